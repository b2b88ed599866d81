/*
 * SVMRegressor and SVMClassifier (ai.onnx.ml 1) as ONNX Runtime's CPU kernels compute them,
 * composed from MLX products. The kernel values against the support vectors are one product
 * [N, V] (LINEAR; POLY and SIGMOID scale it by gamma, add coef0, then raise to degree or take
 * tanh) or, for RBF, exp(-gamma * |x - sv|^2) from the broadcast differences, as ONNX Runtime
 * sums them. A classifier's one-against-one decisions are a second product: a [V, P] matrix
 * built from the coefficients holds, per pair of classes (i, j), class i's vectors' coefficients
 * of row j - 1 and class j's of row i, so scores = K W + rho. Votes are counted with one-hot
 * products, and the label is the first class with most votes. Linear mode (no support vectors)
 * is X coefficients^T + rho[0]. Declined: prob_a/prob_b (ONNX Runtime then couples the pairwise
 * probabilities by an iterative solve per row), string labels, and PROBIT with two classes
 * (ONNX Runtime then writes one value into a two-column Z).
 */
#include "ops/families.h"
#include "ops/ml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_LINEAR, K_POLY, K_RBF, K_SIGMOID };

typedef struct svm_spec {
  bool classifier;
  int kernel;
  float gamma, coef0, degree;
  const float *coef, *sv, *rho;
  size_t n_coef, n_sv, n_rho;
  const int64_t *per_class, *labels;
  size_t n_classes;
  int64_t vectors, features;
  bool one_class;
  ml_post post;
} svm_spec;

static const float *floats_of(const ir_node *n, const char *name, size_t *count) {
  const ir_attr *a = ir_find_attr(n, name);
  *count = a && a->type == IR_ATTR_FLOATS ? a->count : 0;
  return *count ? a->floats : NULL;
}

static bool svm_read(const ir_node *n, svm_spec *s, char *err, size_t len) {
  memset(s, 0, sizeof *s);
  s->classifier = strcmp(n->op_type, "SVMClassifier") == 0;
  static const char *const kernels[] = {"LINEAR", "POLY", "RBF", "SIGMOID"};
  const char *k = ir_attr_string(n, "kernel_type", "LINEAR");
  s->kernel = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(k, kernels[i]) == 0) s->kernel = i;
  if (s->kernel < 0) {
    snprintf(err, len, "kernel_type '%s' is not LINEAR, POLY, RBF or SIGMOID", k);
    return false;
  }
  size_t np;
  const float *params = floats_of(n, "kernel_params", &np);
  if (np >= 3) s->gamma = params[0], s->coef0 = params[1], s->degree = params[2];
  s->coef = floats_of(n, "coefficients", &s->n_coef);
  s->sv = floats_of(n, "support_vectors", &s->n_sv);
  s->rho = floats_of(n, "rho", &s->n_rho);
  if (!s->coef || !s->rho) {
    snprintf(err, len, "coefficients and rho must be non-empty");
    return false;
  }
  if (!ml_read_post(n, &s->post)) {
    snprintf(err, len, "post_transform is not defined");
    return false;
  }
  if (!s->classifier) {
    s->vectors = ir_attr_int(n, "n_supports", 0);
    s->one_class = ir_attr_int(n, "one_class", 0) != 0;
    if (s->vectors > 0) {
      if (s->n_sv % (size_t)s->vectors || s->n_coef < (size_t)s->vectors) {
        snprintf(err, len, "%zu support vector values or %zu coefficients do not fit %lld "
                 "vectors", s->n_sv, s->n_coef, (long long)s->vectors);
        return false;
      }
      s->features = (int64_t)(s->n_sv / (size_t)s->vectors);
    } else {
      s->kernel = K_LINEAR;
      s->features = (int64_t)s->n_coef;
    }
    return s->features > 0 || (snprintf(err, len, "no features"), false);
  }
  const ir_attr *ls = ir_find_attr(n, "classlabels_strings");
  if (ls && ls->type == IR_ATTR_STRINGS && ls->count) {
    snprintf(err, len, "classlabels_strings: string labels stay with ONNX Runtime (only "
             "classlabels_ints is translated)");
    return false;
  }
  const ir_attr *li = ir_find_attr(n, "classlabels_ints");
  s->n_classes = li && li->type == IR_ATTR_INTS ? li->count : 0;
  s->labels = s->n_classes ? li->ints : NULL;
  if (s->n_classes < 1 || s->n_classes > 4096) {
    snprintf(err, len, "%zu class labels (1 to 4096 are translated)", s->n_classes);
    return false;
  }
  size_t pa;
  floats_of(n, "prob_a", &pa);
  const ir_attr *vpc = ir_find_attr(n, "vectors_per_class");
  size_t nv = vpc && vpc->type == IR_ATTR_INTS ? vpc->count : 0;
  s->per_class = nv ? vpc->ints : NULL;
  for (size_t i = 0; i < nv; i++) {
    if (s->per_class[i] < 0) {
      snprintf(err, len, "vectors_per_class[%zu] is negative", i);
      return false;
    }
    s->vectors += s->per_class[i];
  }
  size_t pairs = s->n_classes * (s->n_classes - 1) / 2;
  if (s->vectors > 0) {
    if (pa) {
      snprintf(err, len, "prob_a/prob_b: ONNX Runtime couples the pairwise probabilities by an "
               "iterative solve per row (not translated)");
      return false;
    }
    if (nv != s->n_classes || s->n_sv % (size_t)s->vectors ||
        s->n_coef < (s->n_classes - 1) * (size_t)s->vectors || s->n_rho < pairs) {
      snprintf(err, len, "vectors_per_class, support_vectors, coefficients and rho do not fit "
               "%zu classes of %lld vectors", s->n_classes, (long long)s->vectors);
      return false;
    }
    s->features = (int64_t)(s->n_sv / (size_t)s->vectors);
    if (s->n_classes == 2 && s->post == ML_POST_PROBIT) {
      snprintf(err, len, "PROBIT with two classes: ONNX Runtime writes one value into a "
               "two-column Z");
      return false;
    }
  } else {
    s->kernel = K_LINEAR;
    if (s->n_coef % s->n_classes) {
      snprintf(err, len, "%zu coefficients for %zu classes", s->n_coef, s->n_classes);
      return false;
    }
    s->features = (int64_t)(s->n_coef / s->n_classes);
  }
  return s->features > 0 || (snprintf(err, len, "no features"), false);
}

static bool claim_svm(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  if (x->rank == 0 || x->rank > 2) return op_decline(why, "X must be [C] or [N, C]");
  char err[240];
  svm_spec s;
  if (!svm_read(n, &s, err, sizeof err)) return op_decline(why, "%s", err);
  int64_t c = x->rank >= 1 ? x->dims[x->rank - 1] : -1;
  if (c >= 0 && c != s.features)
    return op_decline(why, "X has %lld features; the model %lld", (long long)c,
                      (long long)s.features);
  return true;
}

static int sc(tr_ctx *t, double v, mx_array *out) { return tr_scalar(t, out, v, MX_FLOAT32); }

/* rows [R, F] of attribute values as a float32 array, transposed to [F, R] when asked. */
static int matrix(tr_ctx *t, const float *v, int64_t r, int64_t f, bool transpose, mx_array *out) {
  int shape[2] = {(int)r, (int)f}, perm[2] = {1, 0};
  TR_TRY(mx_from_data(t->mx, out, v, shape, 2, MX_FLOAT32));
  return transpose ? mx_transpose(t->mx, out, *out, perm, 2) : MX_OK;
}

/* The kernel values of x [N, F] against the support vectors: [N, V]. */
static int kernel_values(tr_ctx *t, const svm_spec *s, mx_array x, mx_array *out) {
  mx_array sv, k;
  if (s->kernel == K_RBF) {
    int ax = 1, last = -1;
    mx_array d, g;
    TR_TRY(matrix(t, s->sv, s->vectors, s->features, false, &sv));
    TR_TRY(mx_expand_dims(t->mx, &d, x, &ax, 1)); /* [N, 1, F] - [V, F] */
    TR_TRY(mx_binary(t->mx, &d, MX_SUBTRACT, d, sv));
    TR_TRY(mx_binary(t->mx, &d, MX_MULTIPLY, d, d));
    TR_TRY(mx_reduce(t->mx, &d, MX_SUM, d, &last, 1, false));
    TR_TRY(sc(t, -s->gamma, &g));
    TR_TRY(mx_binary(t->mx, &d, MX_MULTIPLY, d, g));
    return mx_unary(t->mx, out, MX_EXP, d);
  }
  TR_TRY(matrix(t, s->sv, s->vectors, s->features, true, &sv));
  TR_TRY(mx_matmul(t->mx, &k, x, sv));
  if (s->kernel != K_LINEAR) {
    mx_array g, c;
    TR_TRY(sc(t, s->gamma, &g));
    TR_TRY(sc(t, s->coef0, &c));
    TR_TRY(mx_binary(t->mx, &k, MX_MULTIPLY, k, g));
    TR_TRY(mx_binary(t->mx, &k, MX_ADD, k, c));
    if (s->kernel == K_SIGMOID) {
      TR_TRY(mx_unary(t->mx, &k, MX_TANH, k));
    } else if (s->degree == 2.0f) {
      TR_TRY(mx_binary(t->mx, &k, MX_MULTIPLY, k, k));
    } else if (s->degree == 3.0f) {
      mx_array k2;
      TR_TRY(mx_binary(t->mx, &k2, MX_MULTIPLY, k, k));
      TR_TRY(mx_binary(t->mx, &k, MX_MULTIPLY, k2, k));
    } else {
      mx_array e;
      TR_TRY(sc(t, s->degree, &e));
      TR_TRY(mx_binary(t->mx, &k, MX_POWER, k, e));
    }
  }
  *out = k;
  return MX_OK;
}

/* X as float32 [N, F] (one row for [F]). */
static int rows_of(tr_ctx *t, const svm_spec *s, mx_array *out) {
  mx_array x = tr_in(t, 0);
  if (mx_ndim(x) < 1 || mx_ndim(x) > 2) return tr_fail(t, "X must be [C] or [N, C]");
  if (mx_ndim(x) == 1) {
    int shape[2] = {1, mx_dim(x, 0)};
    TR_TRY(mx_reshape(t->mx, &x, x, shape, 2));
  }
  if (mx_dim(x, 1) != s->features)
    return tr_fail(t, "X has %d features; the model %lld", mx_dim(x, 1), (long long)s->features);
  if (mx_dtype_of(x) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  *out = x;
  return MX_OK;
}

static int translate_svm_regressor(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  char err[240];
  svm_spec s;
  if (!svm_read(n, &s, err, sizeof err)) return tr_fail(t, "%s", err);
  mx_array x, y, w, rho;
  TR_TRY(rows_of(t, &s, &x));
  if (s.vectors > 0) {
    TR_TRY(kernel_values(t, &s, x, &x));
    TR_TRY(matrix(t, s.coef, 1, s.vectors, true, &w));
  } else {
    TR_TRY(matrix(t, s.coef, 1, s.features, true, &w));
  }
  TR_TRY(mx_matmul(t->mx, &y, x, w));
  TR_TRY(sc(t, s.rho[0], &rho));
  TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, rho));
  if (s.one_class) {
    mx_array zero, one, neg, pos;
    TR_TRY(sc(t, 0.0, &zero));
    TR_TRY(sc(t, 1.0, &one));
    TR_TRY(sc(t, -1.0, &neg));
    TR_TRY(mx_binary(t->mx, &pos, MX_GREATER, y, zero));
    TR_TRY(mx_where(t->mx, &y, pos, one, neg));
  }
  return tr_out_cast(t, 0, y);
}

/* The pair-decision matrix [V, P] and the one-hot class of each pair's first and second class
 * ([P, C] each), for the one-against-one scores. */
static int pair_tables(tr_ctx *t, const svm_spec *s, mx_array *w, mx_array *first,
                       mx_array *second) {
  size_t c = s->n_classes, v = (size_t)s->vectors, pairs = c * (c - 1) / 2;
  float *wm = calloc(v * pairs, sizeof(float)), *a = calloc(pairs * c, sizeof(float));
  float *b = calloc(pairs * c, sizeof(float));
  size_t *start = calloc(c, sizeof(size_t));
  int rc = MX_OK;
  if (!wm || !a || !b || !start) {
    rc = tr_fail(t, "out of memory");
    goto done;
  }
  for (size_t i = 1; i < c; i++) start[i] = start[i - 1] + (size_t)s->per_class[i - 1];
  size_t p = 0;
  for (size_t i = 0; i + 1 < c; i++)
    for (size_t j = i + 1; j < c; j++, p++) {
      for (size_t m = 0; m < (size_t)s->per_class[i]; m++)
        wm[(start[i] + m) * pairs + p] = s->coef[(j - 1) * v + start[i] + m];
      for (size_t m = 0; m < (size_t)s->per_class[j]; m++)
        wm[(start[j] + m) * pairs + p] = s->coef[i * v + start[j] + m];
      a[p * c + i] = 1.0f;
      b[p * c + j] = 1.0f;
    }
  int ws[2] = {(int)v, (int)pairs}, os[2] = {(int)pairs, (int)c};
  rc = mx_from_data(t->mx, w, wm, ws, 2, MX_FLOAT32);
  if (rc == MX_OK) rc = mx_from_data(t->mx, first, a, os, 2, MX_FLOAT32);
  if (rc == MX_OK) rc = mx_from_data(t->mx, second, b, os, 2, MX_FLOAT32);
done:
  free(wm);
  free(a);
  free(b);
  free(start);
  return rc;
}

static int translate_svm_classifier(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  char err[240];
  svm_spec s;
  if (!svm_read(n, &s, err, sizeof err)) return tr_fail(t, "%s", err);
  mx_array x, scores, labels, lab, z, zero, one;
  TR_TRY(rows_of(t, &s, &x));
  TR_TRY(sc(t, 0.0, &zero));
  TR_TRY(sc(t, 1.0, &one));
  int rows = mx_dim(x, 0);
  TR_TRY(tr_ints_array(t, s.labels, (int)s.n_classes, MX_INT64, &lab));
  if (s.vectors > 0) { /* one against one */
    mx_array k, w, a, b, rho, pos, neg, votes, vb;
    size_t pairs = s.n_classes * (s.n_classes - 1) / 2;
    TR_TRY(kernel_values(t, &s, x, &k));
    TR_TRY(pair_tables(t, &s, &w, &a, &b));
    TR_TRY(mx_matmul(t->mx, &scores, k, w));
    int rs[2] = {1, (int)pairs};
    TR_TRY(mx_from_data(t->mx, &rho, s.rho, rs, 2, MX_FLOAT32));
    TR_TRY(mx_binary(t->mx, &scores, MX_ADD, scores, rho));
    TR_TRY(mx_binary(t->mx, &pos, MX_GREATER, scores, zero));
    TR_TRY(mx_astype(t->mx, &pos, pos, MX_FLOAT32));
    TR_TRY(mx_binary(t->mx, &neg, MX_SUBTRACT, one, pos));
    TR_TRY(mx_matmul(t->mx, &votes, pos, a));
    TR_TRY(mx_matmul(t->mx, &vb, neg, b));
    TR_TRY(mx_binary(t->mx, &votes, MX_ADD, votes, vb));
    TR_TRY(mx_argmax(t->mx, &labels, votes, 1, false));
    TR_TRY(mx_take(t->mx, &labels, lab, labels, 0));
    if (s.n_classes == 2) { /* one decision: [-s, s] (NONE) or [1 - p, p], p = s or sigmoid(s) */
      mx_array pair[2];
      if (s.post == ML_POST_LOGISTIC) TR_TRY(mx_unary(t->mx, &scores, MX_SIGMOID, scores));
      if (s.post == ML_POST_NONE) TR_TRY(mx_unary(t->mx, &pair[0], MX_NEG, scores));
      else TR_TRY(mx_binary(t->mx, &pair[0], MX_SUBTRACT, one, scores));
      pair[1] = scores;
      TR_TRY(mx_concatenate(t->mx, &z, pair, 2, 1));
    } else {
      TR_TRY(ml_post_transform(t, s.post, scores, &z));
    }
  } else { /* linear: X coefficients^T + rho[0] per class */
    mx_array w, rho, best, arg;
    TR_TRY(matrix(t, s.coef, (int64_t)s.n_classes, s.features, true, &w));
    TR_TRY(mx_matmul(t->mx, &scores, x, w));
    TR_TRY(sc(t, s.rho[0], &rho));
    TR_TRY(mx_binary(t->mx, &scores, MX_ADD, scores, rho));
    TR_TRY(mx_argmax(t->mx, &arg, scores, 1, false));
    TR_TRY(mx_take(t->mx, &labels, lab, arg, 0));
    if (s.n_classes == 2) { /* ONNX Runtime's ChooseClass on the largest score */
      bool positive = true;
      for (size_t i = 0; i < s.n_coef; i++) positive &= s.coef[i] >= 0.0f;
      mx_array cut, hit, l1;
      int ax = 1;
      TR_TRY(mx_reduce(t->mx, &best, MX_MAX, scores, &ax, 1, false));
      TR_TRY(sc(t, positive ? 0.5 : 0.0, &cut));
      TR_TRY(mx_binary(t->mx, &hit, positive ? MX_GREATER_EQUAL : MX_GREATER, best, cut));
      TR_TRY(mx_scalar_int(t->mx, &l1, s.labels[1], MX_INT64));
      TR_TRY(mx_where(t->mx, &labels, hit, l1, labels));
    }
    TR_TRY(ml_post_transform(t, s.post, scores, &z));
  }
  TR_TRY(mx_reshape(t->mx, &labels, labels, &rows, 1));
  TR_TRY(tr_out_cast(t, 0, labels));
  return tr_has_out(t, 1) ? tr_out_cast(t, 1, z) : MX_OK;
}

const op_row ops_ml_svm_rows[] = {
    {"ai.onnx.ml", "SVMRegressor", 1, 1, claim_svm, translate_svm_regressor, OP_SHAPE_KEYED,
     OP_T(IR_FLOAT), 0, "LINEAR/POLY/RBF/SIGMOID kernels, linear mode, one_class", NULL, NULL, 0,
     NULL},
    {"ai.onnx.ml", "SVMClassifier", 1, 1, claim_svm, translate_svm_classifier, OP_SHAPE_KEYED,
     OP_T(IR_FLOAT) | OP_T(IR_INT64) | OP_T(IR_INT32), 0,
     "one-against-one votes as products; classlabels_ints; prob_a/prob_b (iterative coupling) "
     "and string labels declined", NULL, NULL, 0, NULL},
    OP_ROWS_END,
};
