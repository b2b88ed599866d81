/*
 * Normalisation by statistics of the input itself: LayerNormalization (17), RMSNormalization
 * (23), GroupNormalization (18, 21), InstanceNormalization (6, 22), MeanVarianceNormalization
 * (9, 13) and LpNormalization (1, 22). Each is composed in float32 (half inputs widened, the
 * result rounded once to the output type): the mean over the normalised axes, the centred values,
 * their mean square and a reciprocal square root, reducing over the axes directly (keepdims) so
 * that the composition depends on ranks only; per-channel Scale and B get trailing unit axes with
 * expand_dims for the same reason. LayerNormalization and RMSNormalization over the last axis
 * with a 1-D Scale (and B) of that axis's length, only Y wanted, use MLX's fast kernels.
 * GroupNormalization splits C into its groups with a reshape, so its rows are shape-keyed; opset
 * 18 scales and shifts per group, opset 21 per channel. MeanVarianceNormalization divides by the
 * standard deviation plus 1e-9 as its function body does (ONNX Runtime's kernel omits the 1e-9
 * and gives NaN on constant slices) and, like that kernel, ignores axes beyond X's rank.
 * LpNormalization (p 1 or 2) first divides by the largest magnitude so that squares cannot
 * overflow. stash_type other than 1 (float32 statistics) is declined.
 */
#include "ops/families.h"
#include "cpu/math.h"
#include "ops/fusion_match.h"
#include "plan/translate.h"

#include <math.h>

/* --- shared helpers ---------------------------------------------------------------------- */
static int cast_to(tr_ctx *t, int i, mx_array y) {
  mx_dtype want = tr_out_dtype(t, i);
  if (mx_dtype_of(y) != want) TR_TRY(mx_astype(t->mx, &y, y, want));
  return tr_out(t, i, y);
}

static int to_f32(tr_ctx *t, mx_array *a) {
  if (*a && mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* Mean of x over axes (kept as size 1), the centred values and their variance. */
static int centre(tr_ctx *t, mx_array x, const int *axes, int k, mx_array *mean, mx_array *d,
                  mx_array *var) {
  TR_TRY(mx_reduce(t->mx, mean, MX_MEAN, x, axes, k, true));
  TR_TRY(mx_binary(t->mx, d, MX_SUBTRACT, x, *mean));
  TR_TRY(mx_binary(t->mx, var, MX_MULTIPLY, *d, *d));
  return mx_reduce(t->mx, var, MX_MEAN, *var, axes, k, true);
}

/* 1 / sqrt(var + eps). */
static int inv_std(tr_ctx *t, mx_array var, float eps, mx_array *inv) {
  mx_array e;
  TR_TRY(tr_scalar(t, &e, eps, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, inv, MX_ADD, var, e));
  return mx_unary(t->mx, inv, MX_RSQRT, *inv);
}

/* y * scale (+ bias), both widened to float32; either may be NULL. */
static int affine(tr_ctx *t, mx_array y, mx_array scale, mx_array bias, mx_array *out) {
  if (scale) {
    TR_TRY(to_f32(t, &scale));
    TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, scale));
  }
  if (bias) {
    TR_TRY(to_f32(t, &bias));
    TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, bias));
  }
  *out = y;
  return MX_OK;
}

/* A per-channel vector (C) given `trailing` unit axes, to broadcast against (N, C, ...). */
static int per_channel(tr_ctx *t, mx_array v, int trailing, mx_array *out) {
  int axes[MX_MAX_RANK];
  for (int i = 0; i < trailing; i++) axes[i] = i + 1;
  if (!v || trailing == 0) return *out = v, MX_OK;
  return mx_expand_dims(t->mx, out, v, axes, trailing);
}

/* A value's static rank, or -1 when unknown. ORT reports an unknown shape as rank 0 (see
 * ir.c), and no normalisation takes a scalar, so rank 0 counts as unknown here: a real scalar
 * fails in the translator instead. */
static int rank_of(const ir_value *v) { return v && v->rank > 0 ? v->rank : -1; }

static bool decline_stash(const ir_node *n, op_why why) {
  int64_t stash = ir_attr_int(n, "stash_type", 1);
  if (stash != 1)
    return op_decline(why, "%s stash_type %lld is not supported (only 1, float32)", n->op_type,
                      (long long)stash);
  return true;
}

/* The statistics axes [axis, rank) of LayerNormalization and RMSNormalization. */
static bool claim_trailing_axis(const ir_graph *g, const ir_node *n, op_why why) {
  int rank = rank_of(ir_input(g, n, 0));
  int64_t axis = ir_attr_int(n, "axis", -1);
  if (rank > 0 && (axis < -rank || axis >= rank))
    return op_decline(why, "%s axis %lld is out of range for X of rank %d", n->op_type,
                      (long long)axis, rank);
  return decline_stash(n, why);
}

/* Whether MLX's fast kernel computes exactly what the node asks: last axis only, Y only, and
 * Scale (and B) 1-D over the last axis. The kernel wants Scale's length to equal the last
 * dimension; a 1-D Scale whose static length is above 1 must (a valid broadcast to X's shape
 * needs it), so the decision rests on the graph's static shapes, not this run's. */
static bool vector_over_last(const ir_value *v) {
  return v && v->rank == 1 && v->dims[0] > 1;
}

static bool fast_path_ok(tr_ctx *t, const ir_node *n, int rank, int axis) {
  if (axis != rank - 1 || tr_has_out(t, 1) || tr_has_out(t, 2)) return false;
  if (!vector_over_last(ir_input(t->g, n, 1))) return false;
  if (mx_dtype_of(tr_in(t, 1)) != mx_dtype_of(tr_in(t, 0))) return false;
  return !ir_has_input(n, 2) || vector_over_last(ir_input(t->g, n, 2));
}

/* --- LayerNormalization ------------------------------------------------------------------ */
static bool claim_layer_norm(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  return claim_trailing_axis(g, n, why) && op_all_same_type(g, n, why);
}

static bool same_shape(mx_array a, mx_array b) {
  if (!a || !b || mx_ndim(a) != mx_ndim(b)) return false;
  for (int i = 0; i < mx_ndim(a); i++)
    if (mx_shape(a)[i] != mx_shape(b)[i]) return false;
  return true;
}

/* LayerNormalization over the last axis of x = a + b, the residual sum (the fusion table's
 * residual), on the CPU device for float32 a and b of x's shape: the host kernel adds them
 * itself. Declines wherever the translator would not take its host kernel. */
int op_build_residual_layer_norm(tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                                 bool *done) {
  mx_array x = tr_in(t, 0), scale = tr_in(t, 1), bias = tr_in(t, 2), y;
  mx_array a = t->values[m->u.sum.a], b = t->values[m->u.sum.b];
  int rank = mx_ndim(x);
  int64_t axis = ir_attr_int(n, "axis", -1);
  if (axis < 0) axis += rank;
  if (rank == 0 || axis != rank - 1 || !fast_path_ok(t, n, rank, rank - 1) ||
      !cpu_kernel_applies(t, x) || mx_dim(scale, 0) != mx_dim(x, -1) ||
      (bias && mx_dim(bias, 0) != mx_dim(x, -1)))
    return MX_OK;
  if (!a || !b || mx_dtype_of(a) != MX_FLOAT32 || mx_dtype_of(b) != MX_FLOAT32 ||
      !same_shape(a, x) || !same_shape(b, x))
    return MX_OK;
  TR_TRY(cpu_layer_norm_last(t, a, b, scale, bias, ir_attr_float(n, "epsilon", 1e-5f), &y));
  tr_note_path(t, TR_PATH_HOST_KERNEL, "layer_norm", TR_FOLD_RESIDUAL,
               "host kernel, the Add before it folded in (CPU)");
  *done = true;
  return cast_to(t, 0, y);
}

static int translate_layer_norm(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), scale = tr_in(t, 1), bias = tr_in(t, 2), y;
  int rank = mx_ndim(x), axis;
  if (rank == 0) return tr_fail(t, "LayerNormalization of a scalar is undefined");
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", -1), rank, &axis));
  float eps = ir_attr_float(n, "epsilon", 1e-5f);
  if (fast_path_ok(t, n, rank, axis)) {
    int cols = mx_dim(x, -1);
    if (cpu_kernel_applies(t, x) && mx_dim(scale, 0) == cols &&
        (!bias || mx_dim(bias, 0) == cols)) {
      TR_TRY(cpu_layer_norm_last(t, x, NULL, scale, bias, eps, &y));
      tr_note_path(t, TR_PATH_HOST_KERNEL, "layer_norm", 0, "host kernel (CPU)");
    } else {
      TR_TRY(mx_layer_norm(t->mx, &y, x, scale, bias, eps));
    }
    return cast_to(t, 0, y);
  }
  int axes[MX_MAX_RANK], k = 0;
  for (int i = axis; i < rank; i++) axes[k++] = i;
  mx_array mean, d, var, inv;
  TR_TRY(to_f32(t, &x));
  TR_TRY(centre(t, x, axes, k, &mean, &d, &var));
  TR_TRY(inv_std(t, var, eps, &inv));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, d, inv));
  TR_TRY(affine(t, y, scale, bias, &y));
  TR_TRY(cast_to(t, 0, y));
  TR_TRY(cast_to(t, 1, mean)); /* omitted outputs are skipped by tr_out */
  return cast_to(t, 2, inv);
}

/* --- RMSNormalization -------------------------------------------------------------------- */
/* X (T) and Scale (V) may differ in type; Y takes Scale's. */
static bool claim_rms_norm(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *scale = ir_input(g, n, 1);
  if (!scale) return op_decline(why, "RMSNormalization needs Scale");
  if (!(OP_FLOATS & OP_T(scale->elem_type)))
    return op_decline(why, "Scale has element type %s (a float type is needed)",
                      ir_elem_name(scale->elem_type));
  return claim_trailing_axis(g, n, why);
}

static int translate_rms_norm(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), scale = tr_in(t, 1), y, ms, inv;
  int rank = mx_ndim(x), axis;
  if (rank == 0) return tr_fail(t, "RMSNormalization of a scalar is undefined");
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", -1), rank, &axis));
  float eps = ir_attr_float(n, "epsilon", 1e-5f);
  if (fast_path_ok(t, n, rank, axis)) {
    TR_TRY(mx_rms_norm(t->mx, &y, x, scale, eps));
    return cast_to(t, 0, y);
  }
  int axes[MX_MAX_RANK], k = 0;
  for (int i = axis; i < rank; i++) axes[k++] = i;
  TR_TRY(to_f32(t, &x));
  TR_TRY(mx_unary(t->mx, &ms, MX_SQUARE, x));
  TR_TRY(mx_reduce(t->mx, &ms, MX_MEAN, ms, axes, k, true));
  TR_TRY(inv_std(t, ms, eps, &inv));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, inv));
  TR_TRY(affine(t, y, scale, NULL, &y));
  return cast_to(t, 0, y);
}

/* --- InstanceNormalization --------------------------------------------------------------- */
static bool claim_instance_norm(const ir_graph *g, const ir_node *n, const op_row *r,
                                op_why why) {
  (void)r;
  int rank = rank_of(ir_input(g, n, 0));
  if (rank >= 0 && rank < 3)
    return op_decline(why, "InstanceNormalization needs X of rank >= 3 (N, C, D1, ...), not %d",
                      rank);
  for (int i = 1; i <= 2; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (!v) return op_decline(why, "InstanceNormalization needs scale and B");
    if (rank_of(v) > 1)
      return op_decline(why, "InstanceNormalization %s has rank %d (1-D over C expected)",
                        i == 1 ? "scale" : "B", v->rank);
  }
  return op_all_same_type(g, n, why);
}

static int translate_instance_norm(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), scale, bias, mean, d, var, inv, y;
  int rank = mx_ndim(x), axes[MX_MAX_RANK], k = 0;
  if (rank < 3) return tr_fail(t, "InstanceNormalization needs X of rank >= 3");
  for (int i = 2; i < rank; i++) axes[k++] = i;
  TR_TRY(to_f32(t, &x));
  TR_TRY(centre(t, x, axes, k, &mean, &d, &var));
  TR_TRY(inv_std(t, var, ir_attr_float(n, "epsilon", 1e-5f), &inv));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, d, inv));
  TR_TRY(per_channel(t, tr_in(t, 1), rank - 2, &scale));
  TR_TRY(per_channel(t, tr_in(t, 2), rank - 2, &bias));
  TR_TRY(affine(t, y, scale, bias, &y));
  return cast_to(t, 0, y);
}

/* --- GroupNormalization ------------------------------------------------------------------ */
/* Scale and bias hold num_groups values in opset 18 and C values from 21. */
static bool claim_group_norm(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  bool per_group = r->since_max < 21;
  const ir_attr *ng = ir_find_attr(n, "num_groups");
  if (!ng || ng->type != IR_ATTR_INT) return op_decline(why, "num_groups is required");
  int64_t groups = ng->i;
  if (groups < 1) return op_decline(why, "num_groups %lld must be positive", (long long)groups);
  const ir_value *x = ir_input(g, n, 0);
  int rank = rank_of(x);
  if (rank >= 0 && rank < 2)
    return op_decline(why, "GroupNormalization needs X of rank >= 2 (N, C, ...), not %d", rank);
  int64_t c = rank >= 2 ? x->dims[1] : -1;
  if (c >= 0 && c % groups)
    return op_decline(why, "C = %lld is not a multiple of num_groups %lld", (long long)c,
                      (long long)groups);
  int64_t want = per_group ? groups : c;
  for (int i = 1; i <= 2; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (!v) return op_decline(why, "GroupNormalization needs scale and bias");
    if (rank_of(v) > 1)
      return op_decline(why, "%s has rank %d (1-D over %s expected)", i == 1 ? "scale" : "bias",
                        v->rank, per_group ? "the groups" : "C");
    if (v->rank == 1 && want >= 0 && v->dims[0] >= 0 && v->dims[0] != want)
      return op_decline(why, "%s has %lld values, %lld expected (%s)", i == 1 ? "scale" : "bias",
                        (long long)v->dims[0], (long long)want,
                        per_group ? "one per group in opset 18" : "one per channel");
  }
  return decline_stash(n, why) && op_all_same_type(g, n, why);
}

static int translate_group_norm(tr_ctx *t, const ir_node *n, const op_row *r) {
  bool per_group = r->since_max < 21;
  mx_array x = tr_in(t, 0), scale = tr_in(t, 1), bias = tr_in(t, 2), mean, d, var, inv, y;
  int rank = mx_ndim(x), groups = (int)ir_attr_int(n, "num_groups", 1), axis = 2;
  if (rank < 2) return tr_fail(t, "GroupNormalization needs X of rank >= 2");
  int c = mx_dim(x, 1);
  if (groups < 1 || c % groups) return tr_fail(t, "C = %d is not a multiple of num_groups %d", c,
                                               groups);
  int grouped[3] = {mx_dim(x, 0), groups, -1};
  TR_TRY(to_f32(t, &x));
  TR_TRY(mx_reshape(t->mx, &y, x, grouped, 3));
  TR_TRY(centre(t, y, &axis, 1, &mean, &d, &var));
  TR_TRY(inv_std(t, var, ir_attr_float(n, "epsilon", 1e-5f), &inv));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, d, inv));
  if (per_group) {
    TR_TRY(per_channel(t, scale, 1, &scale));
    TR_TRY(per_channel(t, bias, 1, &bias));
    TR_TRY(affine(t, y, scale, bias, &y));
    TR_TRY(mx_reshape(t->mx, &y, y, mx_shape(x), rank));
  } else {
    TR_TRY(mx_reshape(t->mx, &y, y, mx_shape(x), rank));
    TR_TRY(per_channel(t, scale, rank - 2, &scale));
    TR_TRY(per_channel(t, bias, rank - 2, &bias));
    TR_TRY(affine(t, y, scale, bias, &y));
  }
  return cast_to(t, 0, y);
}

/* --- MeanVarianceNormalization ----------------------------------------------------------- */
/* The axes attribute (default [0, 2, 3]) normalised against rank, sorted and de-duplicated;
 * axes outside the rank are dropped, as ONNX Runtime's kernel drops them. */
static int mvn_axes(const ir_node *n, int rank, int *axes) {
  static const int64_t dflt[] = {0, 2, 3};
  const ir_attr *a = ir_find_attr(n, "axes");
  const int64_t *v = a && a->type == IR_ATTR_INTS ? a->ints : dflt;
  size_t count = a && a->type == IR_ATTR_INTS ? a->count : 3;
  bool seen[MX_MAX_RANK] = {false};
  for (size_t i = 0; i < count; i++)
    if (v[i] >= -rank && v[i] < rank) seen[v[i] < 0 ? v[i] + rank : v[i]] = true;
  int k = 0;
  for (int i = 0; i < rank; i++)
    if (seen[i]) axes[k++] = i;
  return k;
}

static int translate_mvn(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), mean, d, var, e, y;
  int axes[MX_MAX_RANK], k = mvn_axes(n, mx_ndim(x), axes);
  TR_TRY(to_f32(t, &x));
  TR_TRY(centre(t, x, axes, k, &mean, &d, &var));
  TR_TRY(mx_unary(t->mx, &var, MX_SQRT, var));
  TR_TRY(tr_scalar(t, &e, 1e-9, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &var, MX_ADD, var, e));
  TR_TRY(mx_binary(t->mx, &y, MX_DIVIDE, d, var));
  return cast_to(t, 0, y);
}

/* --- LpNormalization -------------------------------------------------------------------- */
/* x / ||x||_p along one axis, p 1 or 2. As ONNX Runtime does, x is first divided by its largest
 * magnitude (so that squares cannot overflow or underflow), a zero vector gives zeros, and a
 * vector holding an infinity or NaN is divided by its unscaled norm. */
static bool claim_lp_norm(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  int64_t p = ir_attr_int(n, "p", 2), axis = ir_attr_int(n, "axis", -1);
  if (p != 1 && p != 2) return op_decline(why, "p = %lld: only the L1 and L2 norms are defined",
                                          (long long)p);
  int rank = rank_of(ir_input(g, n, 0));
  if (rank > 0 && (axis < -rank || axis >= rank))
    return op_decline(why, "axis %lld is out of range for X of rank %d", (long long)axis, rank);
  return true;
}

static int lp_norm_of(tr_ctx *t, mx_array x, int64_t p, int axis, mx_array *norm) {
  mx_array a;
  if (p == 1) {
    TR_TRY(mx_unary(t->mx, &a, MX_ABS, x));
    return mx_reduce(t->mx, norm, MX_SUM, a, &axis, 1, true);
  }
  TR_TRY(mx_unary(t->mx, &a, MX_SQUARE, x));
  TR_TRY(mx_reduce(t->mx, &a, MX_SUM, a, &axis, 1, true));
  return mx_unary(t->mx, norm, MX_SQRT, a);
}

static int translate_lp_norm(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), m, one, zero, inf, finite, is_zero, safe, xs, norm, y;
  int rank = mx_ndim(x), axis;
  int64_t p = ir_attr_int(n, "p", 2);
  if (rank == 0) return tr_fail(t, "LpNormalization of a scalar is undefined");
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", -1), rank, &axis));
  if (mx_size(x) == 0) return tr_out_cast(t, 0, x); /* MLX's max refuses an empty axis */
  TR_TRY(to_f32(t, &x));
  TR_TRY(mx_unary(t->mx, &m, MX_ABS, x));
  TR_TRY(mx_reduce(t->mx, &m, MX_MAX, m, &axis, 1, true));
  TR_TRY(tr_scalar(t, &one, 1.0, MX_FLOAT32));
  TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
  TR_TRY(tr_scalar(t, &inf, INFINITY, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &finite, MX_LESS, m, inf)); /* false for inf and NaN */
  TR_TRY(mx_binary(t->mx, &safe, MX_GREATER, m, zero));
  TR_TRY(mx_binary(t->mx, &safe, MX_LOGICAL_AND, safe, finite));
  TR_TRY(mx_where(t->mx, &safe, safe, m, one)); /* divide by 1 when zero or not finite */
  TR_TRY(mx_binary(t->mx, &xs, MX_DIVIDE, x, safe));
  TR_TRY(lp_norm_of(t, xs, p, axis, &norm));
  TR_TRY(mx_binary(t->mx, &y, MX_DIVIDE, xs, norm));
  TR_TRY(mx_binary(t->mx, &is_zero, MX_EQUAL, m, zero));
  TR_TRY(mx_where(t->mx, &y, is_zero, zero, y));
  return cast_to(t, 0, y);
}

#define ROW(op, lo, hi, claim, translate, cls, note) \
  {"", op, lo, hi, claim, translate, cls, OP_FLOATS, 0, note}
#define ROW_NO_BF16(op, lo, hi, claim, translate, cls, note) \
  {"", op, lo, hi, claim, translate, cls, OP_T(IR_FLOAT) | OP_T(IR_FLOAT16), 0, note}
#define F32 "composed in float32"

const op_row ops_norm_rows[] = {
    ROW("LayerNormalization", 17, 17, claim_layer_norm, translate_layer_norm, OP_SHAPELESS_GPU,
        "MLX fast kernel for last-axis, 1-D Scale/B, Y only (CPU, float32: a host kernel); "
        "else " F32 "; stash_type other than 1 declined"),
    ROW("RMSNormalization", 23, 23, claim_rms_norm, translate_rms_norm, OP_SHAPELESS,
        "MLX fast kernel for last-axis, 1-D Scale of X's type; else " F32
        "; stash_type other than 1 declined"),
    ROW_NO_BF16("InstanceNormalization", 6, 21, claim_instance_norm, translate_instance_norm,
        OP_SHAPELESS, F32 "; X of rank >= 3"),
    ROW("InstanceNormalization", 22, 22, claim_instance_norm, translate_instance_norm,
        OP_SHAPELESS, F32 "; X of rank >= 3"),
    ROW("GroupNormalization", 18, 20, claim_group_norm, translate_group_norm, OP_SHAPE_KEYED,
        F32 "; scale and bias per group; shape-keyed (reshape into groups)"),
    ROW("GroupNormalization", 21, 21, claim_group_norm, translate_group_norm, OP_SHAPE_KEYED,
        F32 "; scale and bias per channel; stash_type other than 1 declined; shape-keyed "
            "(reshape into groups)"),
    ROW_NO_BF16("MeanVarianceNormalization", 9, 12, NULL, translate_mvn, OP_SHAPELESS,
        F32 "; (X - mean) / (std + 1e-9) as the function body"),
    ROW("MeanVarianceNormalization", 13, 13, NULL, translate_mvn, OP_SHAPELESS,
        F32 "; (X - mean) / (std + 1e-9) as the function body"),
    ROW_NO_BF16("LpNormalization", 1, 21, claim_lp_norm, translate_lp_norm, OP_SHAPELESS,
        F32 " after dividing by the largest magnitude; p 1 or 2"),
    ROW("LpNormalization", 22, 22, claim_lp_norm, translate_lp_norm, OP_SHAPELESS,
        F32 " after dividing by the largest magnitude; p 1 or 2"),
    OP_ROWS_END,
};
