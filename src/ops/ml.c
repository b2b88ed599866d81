/*
 * The numeric ai.onnx.ml operators other than the tree ensembles (ops/ml_tree.c): Scaler,
 * Normalizer, Binarizer, LinearRegressor, LinearClassifier, ArrayFeatureExtractor, Imputer,
 * FeatureVectorizer, OneHotEncoder (integer categories) and LabelEncoder (numeric keys and
 * values, opsets 2 and 4). Each follows ONNX Runtime's CPU kernel where the spec leaves room:
 * inputs [N, C] or [C] (a row), scores computed in float32, a lone binary score left
 * untransformed except by PROBIT, NaN keys matching NaN from LabelEncoder 4 on. Dictionary
 * lookups (OneHotEncoder, LabelEncoder) compare X with every key at once ([..., K]), which MLX
 * runs as one elementwise pass and a reduction. String labels, keys or values stay with ONNX
 * Runtime: the generic check declines string tensors, and attributes naming strings are
 * declined here with a reason.
 */
#include "ops/families.h"
#include "ops/ml.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* --- shared with ml_tree.c ----------------------------------------------------------------- */
bool ml_read_post(const ir_node *n, ml_post *out) {
  static const char *const names[] = {"NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"};
  const char *s = ir_attr_string(n, "post_transform", "NONE");
  for (int i = 0; i < 5; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = (ml_post)i;
      return true;
    }
  return false;
}

int ml_floats(tr_ctx *t, const float *v, int count, bool flat, mx_array *out) {
  int shape[2] = {1, count};
  return mx_from_data(t->mx, out, v, flat ? shape + 1 : shape, flat ? 1 : 2, MX_FLOAT32);
}

static int sc(tr_ctx *t, double v, mx_array *out) { return tr_scalar(t, out, v, MX_FLOAT32); }

int ml_probit(tr_ctx *t, mx_array p, mx_array *out) {
  /* x = 2p - 1; erfinv(x) ~ sgn(x) sqrt(sqrt(v^2 - log((1-x)(1+x)) / 0.147) - v), with
   * v = 2 / (pi' * 0.147) + log((1-x)(1+x)) / 2 and pi' = 3.14159, ONNX Runtime's constants */
  mx_array two, one, x, a, b, lg, v, v2, k, s, zero, neg, sgn;
  TR_TRY(sc(t, 2.0, &two));
  TR_TRY(sc(t, 1.0, &one));
  TR_TRY(mx_binary(t->mx, &x, MX_MULTIPLY, p, two));
  TR_TRY(mx_binary(t->mx, &x, MX_SUBTRACT, x, one));
  TR_TRY(mx_binary(t->mx, &a, MX_SUBTRACT, one, x));
  TR_TRY(mx_binary(t->mx, &b, MX_ADD, one, x));
  TR_TRY(mx_binary(t->mx, &a, MX_MULTIPLY, a, b));
  TR_TRY(mx_unary(t->mx, &lg, MX_LOG, a));
  TR_TRY(sc(t, 2.0f / (3.14159f * 0.147f), &k));
  TR_TRY(sc(t, 0.5, &s));
  TR_TRY(mx_binary(t->mx, &v, MX_MULTIPLY, lg, s));
  TR_TRY(mx_binary(t->mx, &v, MX_ADD, v, k));
  TR_TRY(sc(t, 1.0f / 0.147f, &k));
  TR_TRY(mx_binary(t->mx, &v2, MX_MULTIPLY, lg, k));
  TR_TRY(mx_binary(t->mx, &a, MX_MULTIPLY, v, v));
  TR_TRY(mx_binary(t->mx, &a, MX_SUBTRACT, a, v2));
  TR_TRY(mx_unary(t->mx, &a, MX_SQRT, a));
  TR_TRY(mx_binary(t->mx, &a, MX_SUBTRACT, a, v));
  TR_TRY(mx_unary(t->mx, &a, MX_SQRT, a));
  TR_TRY(sc(t, 0.0, &zero));
  TR_TRY(sc(t, -1.0, &neg));
  TR_TRY(mx_binary(t->mx, &sgn, MX_LESS, x, zero));
  TR_TRY(mx_where(t->mx, &sgn, sgn, neg, one));
  TR_TRY(mx_binary(t->mx, &a, MX_MULTIPLY, a, sgn));
  TR_TRY(sc(t, 1.41421356f, &k));
  return mx_binary(t->mx, out, MX_MULTIPLY, a, k);
}

/* ONNX Runtime's SOFTMAX_ZERO: scores within 1e-7 of zero stay (near) zero and are left out of
 * the sum. */
static int softmax_zero(tr_ctx *t, mx_array s, mx_array *out) {
  int axis = -1;
  mx_array mx, e, tiny, big, nz, zero, sum, scaled;
  TR_TRY(mx_reduce(t->mx, &mx, MX_MAX, s, &axis, 1, true));
  TR_TRY(mx_binary(t->mx, &e, MX_SUBTRACT, s, mx));
  TR_TRY(mx_unary(t->mx, &e, MX_EXP, e));
  TR_TRY(mx_unary(t->mx, &big, MX_ABS, s));
  TR_TRY(sc(t, 0.0000001f, &tiny));
  TR_TRY(mx_binary(t->mx, &nz, MX_GREATER, big, tiny));
  TR_TRY(sc(t, 0.0, &zero));
  TR_TRY(mx_where(t->mx, &sum, nz, e, zero));
  TR_TRY(mx_reduce(t->mx, &sum, MX_SUM, sum, &axis, 1, true));
  TR_TRY(mx_unary(t->mx, &scaled, MX_NEG, mx));
  TR_TRY(mx_unary(t->mx, &scaled, MX_EXP, scaled));
  TR_TRY(mx_binary(t->mx, &scaled, MX_MULTIPLY, s, scaled));
  TR_TRY(mx_where(t->mx, &e, nz, e, scaled));
  return mx_binary(t->mx, out, MX_DIVIDE, e, sum);
}

int ml_post_transform(tr_ctx *t, ml_post post, mx_array s, mx_array *out) {
  int axis = -1;
  if (mx_dim(s, -1) == 1 && post != ML_POST_PROBIT) post = ML_POST_NONE;
  if (post != ML_POST_NONE && mx_dtype_of(s) == MX_FLOAT64) /* ONNX Runtime: in float32 */
    TR_TRY(mx_astype(t->mx, &s, s, MX_FLOAT32));
  switch (post) {
    case ML_POST_LOGISTIC: return mx_unary(t->mx, out, MX_SIGMOID, s);
    case ML_POST_SOFTMAX: return mx_softmax(t->mx, out, s, &axis, 1);
    case ML_POST_SOFTMAX_ZERO: return softmax_zero(t, s, out);
    case ML_POST_PROBIT: return ml_probit(t, s, out);
    default: *out = s; return MX_OK;
  }
}

/* --- shared claim and translation steps ----------------------------------------------------- */
static const float *floats_attr(const ir_node *n, const char *name, size_t *count) {
  const ir_attr *a = ir_find_attr(n, name);
  *count = a && a->type == IR_ATTR_FLOATS ? a->count : 0;
  return *count ? a->floats : NULL;
}

static const int64_t *ints_attr(const ir_node *n, const char *name, size_t *count) {
  const ir_attr *a = ir_find_attr(n, name);
  *count = a && a->type == IR_ATTR_INTS ? a->count : 0;
  return *count ? a->ints : NULL;
}

static bool has_strings(const ir_node *n, const char *name) {
  const ir_attr *a = ir_find_attr(n, name);
  return a && a->type == IR_ATTR_STRINGS && a->count > 0;
}

/* X is [C] or [N, C] (ONNX Runtime's kernels read no other). ONNX infers no shapes for most
 * ai.onnx.ml outputs, so an unknown rank is accepted here and checked when translated. */
static bool rows_input(const ir_graph *g, const ir_node *n, int i, op_why why) {
  const ir_value *x = ir_input(g, n, i);
  if (!x || x->rank == 0 || x->rank > 2)
    return op_decline(why, "input %d must be [C] or [N, C]", i);
  return true;
}

/* The last dimension of a value when known, else -1. */
static int64_t last_dim(const ir_value *x) { return x->rank >= 1 ? x->dims[x->rank - 1] : -1; }

/* X as float32 [N, C] (a row for [C]). */
static int rows_f32(tr_ctx *t, int i, mx_array *out) {
  mx_array x = tr_in(t, i);
  if (mx_ndim(x) < 1 || mx_ndim(x) > 2) return tr_fail(t, "input %d must be [C] or [N, C]", i);
  if (mx_ndim(x) == 1) {
    int shape[2] = {1, mx_dim(x, 0)};
    TR_TRY(mx_reshape(t->mx, &x, x, shape, 2));
  }
  if (mx_dtype_of(x) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  *out = x;
  return MX_OK;
}

/* --- Scaler, Normalizer, Binarizer ------------------------------------------------------------ */
static bool claim_scaler(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  size_t no, ns;
  floats_attr(n, "offset", &no);
  floats_attr(n, "scale", &ns);
  const ir_value *x = ir_input(g, n, 0);
  if (x->rank == 0) return op_decline(why, "X must have a rank of at least 1");
  int64_t c = last_dim(x);
  for (int k = 0; k < 2; k++) {
    size_t cnt = k ? ns : no;
    if (cnt > 1 && c >= 0 && (int64_t)cnt != c)
      return op_decline(why, "%s has %zu values for %lld columns", k ? "scale" : "offset", cnt,
                        (long long)c);
  }
  return true;
}

static int translate_scaler(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  size_t no, ns;
  const float *off = floats_attr(n, "offset", &no), *scl = floats_attr(n, "scale", &ns);
  mx_array x = tr_in(t, 0), o, s;
  int c = mx_dim(x, -1);
  if ((no > 1 && (int)no != c) || (ns > 1 && (int)ns != c))
    return tr_fail(t, "offset/scale length does not match X's %d columns", c);
  TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  if (off) {
    TR_TRY(ml_floats(t, off, (int)no, true, &o));
    TR_TRY(mx_binary(t->mx, &x, MX_SUBTRACT, x, o));
  }
  if (scl) {
    TR_TRY(ml_floats(t, scl, (int)ns, true, &s));
    TR_TRY(mx_binary(t->mx, &x, MX_MULTIPLY, x, s));
  }
  return tr_out_cast(t, 0, x);
}

static bool claim_normalizer(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const char *norm = ir_attr_string(n, "norm", "MAX");
  if (strcmp(norm, "MAX") && strcmp(norm, "L1") && strcmp(norm, "L2"))
    return op_decline(why, "norm '%s' is not MAX, L1 or L2", norm);
  return rows_input(g, n, 0, why);
}

static int translate_normalizer(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  const char *norm = ir_attr_string(n, "norm", "MAX");
  mx_array x = tr_in(t, 0), d, zero, nz;
  int axis = -1;
  TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  if (strcmp(norm, "MAX") == 0) {
    TR_TRY(mx_reduce(t->mx, &d, MX_MAX, x, &axis, 1, true));
  } else if (strcmp(norm, "L1") == 0) {
    TR_TRY(mx_unary(t->mx, &d, MX_ABS, x));
    TR_TRY(mx_reduce(t->mx, &d, MX_SUM, d, &axis, 1, true));
  } else {
    TR_TRY(mx_binary(t->mx, &d, MX_MULTIPLY, x, x));
    TR_TRY(mx_reduce(t->mx, &d, MX_SUM, d, &axis, 1, true));
    TR_TRY(mx_unary(t->mx, &d, MX_SQRT, d));
  }
  /* a zero norm leaves the row as it is */
  TR_TRY(sc(t, 0.0, &zero));
  TR_TRY(mx_binary(t->mx, &nz, MX_NOT_EQUAL, d, zero));
  mx_array one, q;
  TR_TRY(sc(t, 1.0, &one));
  TR_TRY(mx_where(t->mx, &d, nz, d, one));
  TR_TRY(mx_binary(t->mx, &q, MX_DIVIDE, x, d));
  return tr_out_cast(t, 0, q);
}

static int translate_binarizer(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), th, gt, one, zero, y, nan;
  mx_dtype dt = mx_dtype_of(x);
  TR_TRY(tr_scalar(t, &th, ir_attr_float(n, "threshold", 0.0f), dt));
  TR_TRY(tr_scalar(t, &one, 1.0, dt));
  TR_TRY(tr_scalar(t, &zero, 0.0, dt));
  TR_TRY(mx_binary(t->mx, &gt, MX_GREATER, x, th));
  TR_TRY(mx_where(t->mx, &y, gt, one, zero));
  TR_TRY(mx_unary(t->mx, &nan, MX_ISNAN, x)); /* NaN stays NaN */
  TR_TRY(mx_where(t->mx, &y, nan, x, y));
  return tr_out(t, 0, y);
}

/* --- LinearRegressor, LinearClassifier ------------------------------------------------------- */
/* X [N, C] times coefficients^T [C, K] plus intercepts; K from the intercepts or targets. */
static bool linear_shape(const ir_graph *g, const ir_node *n, int64_t k, op_why why) {
  size_t nc, ni;
  floats_attr(n, "coefficients", &nc);
  floats_attr(n, "intercepts", &ni);
  if (!rows_input(g, n, 0, why)) return false;
  if (k < 1 || nc == 0 || nc % (size_t)k)
    return op_decline(why, "%zu coefficients do not split into %lld rows", nc, (long long)k);
  if (ni && (int64_t)ni != k)
    return op_decline(why, "%zu intercepts for %lld targets", ni, (long long)k);
  int64_t c = last_dim(ir_input(g, n, 0));
  if (c >= 0 && c != (int64_t)(nc / (size_t)k))
    return op_decline(why, "X has %lld columns; the coefficients %zu", (long long)c,
                      nc / (size_t)k);
  ml_post post = ML_POST_NONE;
  if (!ml_read_post(n, &post))
    return op_decline(why, "post_transform '%s' is not defined",
                      ir_attr_string(n, "post_transform", ""));
  return true;
}

static int linear_scores(tr_ctx *t, const ir_node *n, int k, mx_array *out) {
  size_t nc, ni;
  const float *coef = floats_attr(n, "coefficients", &nc), *icp = floats_attr(n, "intercepts", &ni);
  mx_array x, w, b;
  TR_TRY(rows_f32(t, 0, &x));
  int c = (int)(nc / (size_t)k), shape[2] = {k, c}, perm[2] = {1, 0};
  if (mx_dim(x, 1) != c)
    return tr_fail(t, "X has %d columns; the coefficients %d", mx_dim(x, 1), c);
  TR_TRY(mx_from_data(t->mx, &w, coef, shape, 2, MX_FLOAT32));
  TR_TRY(mx_transpose(t->mx, &w, w, perm, 2));
  TR_TRY(mx_matmul(t->mx, &x, x, w));
  if (icp) {
    TR_TRY(ml_floats(t, icp, k, false, &b));
    TR_TRY(mx_binary(t->mx, &x, MX_ADD, x, b));
  }
  *out = x;
  return MX_OK;
}

static bool claim_linear_regressor(const ir_graph *g, const ir_node *n, const op_row *r,
                                   op_why why) {
  (void)r;
  return linear_shape(g, n, ir_attr_int(n, "targets", 1), why);
}

static int translate_linear_regressor(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  ml_post post = ML_POST_NONE;
  mx_array s;
  ml_read_post(n, &post);
  TR_TRY(linear_scores(t, n, (int)ir_attr_int(n, "targets", 1), &s));
  TR_TRY(ml_post_transform(t, post, s, &s));
  return tr_out_cast(t, 0, s);
}

static bool claim_linear_classifier(const ir_graph *g, const ir_node *n, const op_row *r,
                                    op_why why) {
  (void)r;
  if (has_strings(n, "classlabels_strings"))
    return op_decline(why, "classlabels_strings: string labels stay with ONNX Runtime (only "
                      "classlabels_ints is translated)");
  size_t ni, nl;
  floats_attr(n, "intercepts", &ni);
  ints_attr(n, "classlabels_ints", &nl);
  if (ni < 1) return op_decline(why, "intercepts is empty");
  if (!(ni == 1 && nl == 2) && nl != ni && !(ni == 1 && nl == 0))
    return op_decline(why, "%zu class labels for %zu intercepts", nl, ni);
  ml_post post = ML_POST_NONE;
  if (ni == 1 && nl == 2 && ml_read_post(n, &post) && post == ML_POST_PROBIT)
    return op_decline(why, "PROBIT on one score with two labels: ONNX Runtime writes the "
                      "probits packed into the first half of Z, not one per row");
  return linear_shape(g, n, (int64_t)ni, why);
}

static int translate_linear_classifier(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  size_t ni, nl;
  floats_attr(n, "intercepts", &ni);
  const int64_t *labels = ints_attr(n, "classlabels_ints", &nl);
  ml_post post = ML_POST_NONE;
  ml_read_post(n, &post);
  mx_array s, y, zero, lab;
  TR_TRY(linear_scores(t, n, (int)ni, &s));
  int rows = mx_dim(s, 0), lshape = rows;
  if (ni == 1) { /* one score: label positive when > 0 (labels[1], else 1) */
    mx_array pos, neg, gt;
    TR_TRY(sc(t, 0.0, &zero));
    TR_TRY(mx_binary(t->mx, &gt, MX_GREATER, s, zero));
    TR_TRY(mx_scalar_int(t->mx, &pos, nl == 2 ? labels[1] : 1, MX_INT64));
    TR_TRY(mx_scalar_int(t->mx, &neg, nl == 2 ? labels[0] : 0, MX_INT64));
    TR_TRY(mx_where(t->mx, &y, gt, pos, neg));
    if (nl == 2) { /* ONNX Runtime widens to [1 - p, p], p = s or LOGISTIC's sigmoid(s) */
      mx_array one, inv, pair[2];
      if (post == ML_POST_LOGISTIC) TR_TRY(mx_unary(t->mx, &s, MX_SIGMOID, s));
      TR_TRY(sc(t, 1.0, &one));
      TR_TRY(mx_binary(t->mx, &inv, MX_SUBTRACT, one, s));
      pair[0] = inv;
      pair[1] = s;
      TR_TRY(mx_concatenate(t->mx, &s, pair, 2, 1));
    } else {
      TR_TRY(ml_post_transform(t, post, s, &s));
    }
  } else {
    TR_TRY(mx_argmax(t->mx, &y, s, 1, false));
    TR_TRY(tr_ints_array(t, labels, (int)nl, MX_INT64, &lab));
    TR_TRY(mx_take(t->mx, &y, lab, y, 0));
    TR_TRY(ml_post_transform(t, post, s, &s));
  }
  TR_TRY(mx_reshape(t->mx, &y, y, &lshape, 1));
  TR_TRY(tr_out_cast(t, 0, y));
  return tr_has_out(t, 1) ? tr_out_cast(t, 1, s) : MX_OK;
}

/* --- ArrayFeatureExtractor, Imputer, FeatureVectorizer --------------------------------------- */
static bool claim_array_feature_extractor(const ir_graph *g, const ir_node *n, const op_row *r,
                                          op_why why) {
  (void)r;
  if (ir_input(g, n, 0)->rank == 0) return op_decline(why, "X must have a rank of at least 1");
  return true;
}

static int translate_array_feature_extractor(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x = tr_in(t, 0), idx = tr_in(t, 1), ok, lo, hi, a, b;
  int c = mx_dim(x, -1), count = 1;
  for (int i = 0; i < mx_ndim(idx); i++) count *= mx_dim(idx, i);
  TR_TRY(mx_reshape(t->mx, &idx, idx, &count, 1));
  TR_TRY(mx_scalar_int(t->mx, &lo, 0, mx_dtype_of(idx)));
  TR_TRY(mx_scalar_int(t->mx, &hi, c, mx_dtype_of(idx)));
  TR_TRY(mx_binary(t->mx, &a, MX_GREATER_EQUAL, idx, lo));
  TR_TRY(mx_binary(t->mx, &b, MX_LESS, idx, hi));
  TR_TRY(mx_binary(t->mx, &ok, MX_LOGICAL_AND, a, b));
  TR_TRY(tr_check_that(t, ok, "an index of Y is outside [0, %d)", c));
  mx_array zero = lo;
  TR_TRY(mx_where(t->mx, &idx, ok, idx, zero));
  TR_TRY(mx_take(t->mx, &x, x, idx, -1));
  if (mx_ndim(x) == 1) {
    int shape[2] = {1, count};
    TR_TRY(mx_reshape(t->mx, &x, x, shape, 2));
  }
  return tr_out(t, 0, x);
}

static bool claim_imputer(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  size_t nf, ni;
  floats_attr(n, "imputed_value_floats", &nf);
  ints_attr(n, "imputed_value_int64s", &ni);
  bool is_float = x->elem_type == IR_FLOAT;
  if (is_float ? nf == 0 : ni == 0)
    return op_decline(why, "X is %s but imputed_value_%s is empty", ir_elem_name(x->elem_type),
                      is_float ? "floats" : "int64s");
  size_t cnt = is_float ? nf : ni;
  if (!rows_input(g, n, 0, why)) return false;
  int64_t c = last_dim(x);
  if (cnt > 1 && c >= 0 && (int64_t)cnt != c)
    return op_decline(why, "%zu imputed values for %lld columns", cnt, (long long)c);
  return true;
}

static int translate_imputer(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), v, rep, hit;
  mx_dtype dt = mx_dtype_of(x);
  size_t cnt;
  if (dt == MX_FLOAT32) {
    const float *vals = floats_attr(n, "imputed_value_floats", &cnt);
    float replaced = ir_attr_float(n, "replaced_value_float", 0.0f);
    TR_TRY(ml_floats(t, vals, (int)cnt, true, &v));
    if (isnan(replaced)) {
      TR_TRY(mx_unary(t->mx, &hit, MX_ISNAN, x));
    } else {
      TR_TRY(sc(t, replaced, &rep));
      TR_TRY(mx_binary(t->mx, &hit, MX_EQUAL, x, rep));
    }
  } else {
    const int64_t *vals = ints_attr(n, "imputed_value_int64s", &cnt);
    TR_TRY(tr_ints_array(t, vals, (int)cnt, dt, &v));
    TR_TRY(mx_scalar_int(t->mx, &rep, ir_attr_int(n, "replaced_value_int64", 0), dt));
    TR_TRY(mx_binary(t->mx, &hit, MX_EQUAL, x, rep));
  }
  if (cnt > 1 && (int)cnt != mx_dim(x, -1))
    return tr_fail(t, "%zu imputed values for %d columns", cnt, mx_dim(x, -1));
  TR_TRY(mx_where(t->mx, &x, hit, v, x));
  return tr_out(t, 0, x);
}

static bool claim_feature_vectorizer(const ir_graph *g, const ir_node *n, const op_row *r,
                                     op_why why) {
  (void)r;
  size_t nd;
  const int64_t *dims = ints_attr(n, "inputdimensions", &nd);
  if ((int)nd != n->n_inputs)
    return op_decline(why, "inputdimensions has %zu entries for %d inputs", nd, n->n_inputs);
  for (int i = 0; i < n->n_inputs; i++) {
    if (dims[i] < 0 || dims[i] > (1 << 24))
      return op_decline(why, "inputdimensions[%d] = %lld is out of range", i, (long long)dims[i]);
    if (!rows_input(g, n, i, why)) return false;
  }
  return true;
}

static int translate_feature_vectorizer(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  size_t nd;
  const int64_t *dims = ints_attr(n, "inputdimensions", &nd);
  mx_array parts[64], *part = n->n_inputs <= 64 ? parts : NULL, y;
  if (!part) return tr_fail(t, "more than 64 inputs");
  int rows = -1;
  for (int i = 0; i < n->n_inputs; i++) {
    mx_array x;
    TR_TRY(rows_f32(t, i, &x));
    if (rows < 0) rows = mx_dim(x, 0);
    if (mx_dim(x, 0) != rows) return tr_fail(t, "inputs have different numbers of rows");
    int c = mx_dim(x, 1), want = (int)dims[i];
    if (c > want) TR_TRY(tr_slice_axis(t, x, 1, 0, want, &x));
    else if (c < want) {
      int lo[2] = {0, 0}, hi[2] = {0, want - c};
      mx_array zero;
      TR_TRY(sc(t, 0.0, &zero));
      TR_TRY(mx_pad(t->mx, &x, x, lo, hi, 2, zero));
    }
    part[i] = x;
  }
  TR_TRY(mx_concatenate(t->mx, &y, part, (size_t)n->n_inputs, 1));
  return tr_out_cast(t, 0, y);
}

/* --- OneHotEncoder, LabelEncoder ----------------------------------------------------------- */
static bool claim_one_hot_encoder(const ir_graph *g, const ir_node *n, const op_row *r,
                                  op_why why) {
  (void)g, (void)r;
  size_t nc;
  if (has_strings(n, "cats_strings"))
    return op_decline(why, "cats_strings: string categories stay with ONNX Runtime (only "
                      "cats_int64s is translated)");
  ints_attr(n, "cats_int64s", &nc);
  if (nc == 0) return op_decline(why, "cats_int64s is empty");
  return true;
}

static int translate_one_hot_encoder(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  size_t nc;
  const int64_t *cats = ints_attr(n, "cats_int64s", &nc);
  mx_array x = tr_in(t, 0), c, eq, y;
  int ax = mx_ndim(x), last = -1;
  if (mx_dtype_of(x) != MX_INT64) TR_TRY(mx_astype(t->mx, &x, x, MX_INT64));
  TR_TRY(mx_expand_dims(t->mx, &x, x, &ax, 1));
  TR_TRY(tr_ints_array(t, cats, (int)nc, MX_INT64, &c));
  TR_TRY(mx_binary(t->mx, &eq, MX_EQUAL, x, c));
  if (ir_attr_int(n, "zeros", 1) == 0) {
    mx_array any;
    TR_TRY(mx_reduce(t->mx, &any, MX_ANY, eq, &last, 1, false));
    TR_TRY(tr_check_that(t, any, "a value of X is not among cats_int64s (zeros = 0)"));
  }
  TR_TRY(mx_astype(t->mx, &y, eq, MX_FLOAT32));
  return tr_out_cast(t, 0, y);
}

/* LabelEncoder: keys and values from the opset-2 list attributes or the opset-4 tensors. */
typedef struct le_spec {
  int key_type, value_type; /* IR_INT64, IR_FLOAT, IR_DOUBLE (opset 4) */
  const void *keys, *values;
  size_t n_keys, n_values;
  double default_f;
  int64_t default_i;
} le_spec;

static bool le_list(const ir_node *n, const char *base, int *type, const void **data,
                    size_t *count) {
  char name[48];
  snprintf(name, sizeof name, "%s_tensor", base);
  const ir_attr *a = ir_find_attr(n, name);
  if (a && a->type == IR_ATTR_TENSOR) {
    size_t sz = ir_elem_size(a->tensor_elem_type);
    *type = a->tensor_elem_type;
    *data = a->tensor_data;
    *count = sz ? a->tensor_bytes / sz : 0;
    return true;
  }
  size_t k;
  snprintf(name, sizeof name, "%s_int64s", base);
  if ((*data = ints_attr(n, name, &k))) {
    *type = IR_INT64;
    *count = k;
    return true;
  }
  snprintf(name, sizeof name, "%s_floats", base);
  if ((*data = floats_attr(n, name, &k))) {
    *type = IR_FLOAT;
    *count = k;
    return true;
  }
  return false;
}

static bool le_read(const ir_node *n, le_spec *s, char *err, size_t len) {
  memset(s, 0, sizeof *s);
  if (has_strings(n, "keys_strings") || has_strings(n, "values_strings")) {
    snprintf(err, len, "string keys or values stay with ONNX Runtime (numeric ones are "
             "translated)");
    return false;
  }
  if (!le_list(n, "keys", &s->key_type, &s->keys, &s->n_keys) ||
      !le_list(n, "values", &s->value_type, &s->values, &s->n_values)) {
    snprintf(err, len, "keys or values are missing or not numeric");
    return false;
  }
  for (int k = 0; k < 2; k++) {
    int ty = k ? s->value_type : s->key_type;
    if (ty != IR_INT64 && ty != IR_FLOAT && ty != IR_DOUBLE) {
      snprintf(err, len, "%s of element type %s are not translated", k ? "values" : "keys",
               ir_elem_name(ty));
      return false;
    }
  }
  if (s->n_keys != s->n_values || s->n_keys == 0) {
    snprintf(err, len, "%zu keys for %zu values", s->n_keys, s->n_values);
    return false;
  }
  s->default_i = ir_attr_int(n, "default_int64", -1);
  s->default_f = ir_attr_float(n, "default_float", -0.0f);
  const ir_attr *d = ir_find_attr(n, "default_tensor");
  if (d && d->type == IR_ATTR_TENSOR && d->tensor_bytes == ir_elem_size(d->tensor_elem_type)) {
    switch (d->tensor_elem_type) {
      case IR_INT64: s->default_i = *(const int64_t *)d->tensor_data; break;
      case IR_FLOAT: s->default_f = *(const float *)d->tensor_data; break;
      case IR_DOUBLE: s->default_f = *(const double *)d->tensor_data; break;
      default: snprintf(err, len, "default_tensor is not numeric"); return false;
    }
  }
  return true;
}

static bool claim_label_encoder(const ir_graph *g, const ir_node *n, const op_row *r,
                                op_why why) {
  (void)g, (void)r;
  char err[200];
  le_spec s;
  if (!le_read(n, &s, err, sizeof err)) return op_decline(why, "%s", err);
  return true;
}

static int le_array(tr_ctx *t, int type, const void *data, size_t count, mx_array *out) {
  int c = (int)count;
  return mx_from_data(t->mx, out, data, &c, 1, type == IR_INT64 ? MX_INT64
                                              : type == IR_FLOAT ? MX_FLOAT32 : MX_FLOAT64);
}

static int translate_label_encoder(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  char err[200];
  le_spec s;
  if (!le_read(n, &s, err, sizeof err)) return tr_fail(t, "%s", err);
  mx_array x = tr_in(t, 0), keys, vals, eq, any, idx, y, def;
  int ax = mx_ndim(x), last = -1;
  TR_TRY(le_array(t, s.key_type, s.keys, s.n_keys, &keys));
  TR_TRY(le_array(t, s.value_type, s.values, s.n_values, &vals));
  if (mx_dtype_of(keys) != mx_dtype_of(x)) TR_TRY(mx_astype(t->mx, &keys, keys, mx_dtype_of(x)));
  TR_TRY(mx_expand_dims(t->mx, &x, x, &ax, 1));
  TR_TRY(mx_binary(t->mx, &eq, MX_EQUAL, x, keys));
  if (s.key_type != IR_INT64 && n->since_version >= 4) { /* NaN finds a NaN key */
    mx_array xn, kn;
    TR_TRY(mx_unary(t->mx, &xn, MX_ISNAN, x));
    TR_TRY(mx_unary(t->mx, &kn, MX_ISNAN, keys));
    TR_TRY(mx_binary(t->mx, &xn, MX_LOGICAL_AND, xn, kn));
    TR_TRY(mx_binary(t->mx, &eq, MX_LOGICAL_OR, eq, xn));
  }
  TR_TRY(mx_reduce(t->mx, &any, MX_ANY, eq, &last, 1, false));
  TR_TRY(mx_argmax(t->mx, &idx, eq, -1, false));
  TR_TRY(mx_take(t->mx, &y, vals, idx, 0));
  mx_dtype out = tr_out_dtype(t, 0);
  if (s.value_type == IR_INT64) TR_TRY(mx_scalar_int(t->mx, &def, s.default_i, out));
  else TR_TRY(tr_scalar(t, &def, s.default_f, out));
  if (mx_dtype_of(y) != out) TR_TRY(mx_astype(t->mx, &y, y, out));
  TR_TRY(mx_where(t->mx, &y, any, y, def));
  return tr_out(t, 0, y);
}

#define ML "ai.onnx.ml"
#define ML_IN (OP_T(IR_FLOAT) | OP_T(IR_DOUBLE) | OP_T(IR_INT64) | OP_T(IR_INT32))

const op_row ops_ml_rows[] = {
    {ML, "Scaler", 1, 1, claim_scaler, translate_scaler, OP_SHAPE_KEYED, ML_IN, 0,
     "(X - offset) * scale in float32, offset/scale of 1 or C values", NULL, NULL, 0, NULL},
    {ML, "Normalizer", 1, 1, claim_normalizer, translate_normalizer, OP_SHAPE_KEYED, ML_IN, 0,
     "MAX, L1, L2 per row of [N, C]; a zero norm leaves the row", NULL, NULL, 0, NULL},
    {ML, "Binarizer", 1, 1, NULL, translate_binarizer, OP_SHAPELESS, OP_T(IR_FLOAT), 0,
     "x > threshold; NaN stays NaN", NULL, NULL, 0, NULL},
    {ML, "LinearRegressor", 1, 1, claim_linear_regressor, translate_linear_regressor,
     OP_SHAPE_KEYED, OP_T(IR_FLOAT), 0, "X coefficients^T + intercepts, post_transform", NULL,
     NULL, 0, NULL},
    {ML, "LinearClassifier", 1, 1, claim_linear_classifier, translate_linear_classifier,
     OP_SHAPE_KEYED, ML_IN, 0,
     "classlabels_ints (strings stay with ONNX Runtime); one score with two labels widened to "
     "[1 - p, p] as ONNX Runtime does (PROBIT there declined)", NULL, NULL, 0, NULL},
    {ML, "ArrayFeatureExtractor", 1, 1, claim_array_feature_extractor,
     translate_array_feature_extractor, OP_SHAPE_KEYED,
     OP_T(IR_FLOAT) | OP_T(IR_DOUBLE) | OP_T(IR_INT64) | OP_T(IR_INT32), 0,
     "take along the last axis; indices checked at run time", NULL, NULL, 0, NULL},
    {ML, "Imputer", 1, 1, claim_imputer, translate_imputer, OP_SHAPE_KEYED,
     OP_T(IR_FLOAT) | OP_T(IR_INT64), 0, "replaced_value_float may be NaN", NULL, NULL, 0, NULL},
    {ML, "FeatureVectorizer", 1, 1, claim_feature_vectorizer, translate_feature_vectorizer,
     OP_SHAPE_KEYED, ML_IN, 0, "inputs cut or zero-padded to inputdimensions, joined", NULL,
     NULL, 0, NULL},
    {ML, "OneHotEncoder", 1, 1, claim_one_hot_encoder, translate_one_hot_encoder,
     OP_SHAPE_KEYED, OP_T(IR_FLOAT) | OP_T(IR_DOUBLE) | OP_T(IR_INT64), 0,
     "cats_int64s (strings stay with ONNX Runtime); zeros = 0 checked at run time", NULL, NULL,
     0, NULL},
    {ML, "LabelEncoder", 2, 4, claim_label_encoder, translate_label_encoder, OP_SHAPE_KEYED,
     OP_T(IR_FLOAT) | OP_T(IR_DOUBLE) | OP_T(IR_INT64), 0,
     "int64/float/double keys and values (lists or tensors); strings stay with ONNX Runtime",
     NULL, NULL, 0, NULL},
    OP_ROWS_END,
};
