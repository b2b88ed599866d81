/*
 * Shape operators: the ops that move, relabel or convert data without arithmetic. Reshape,
 * Transpose, Squeeze, Unsqueeze, Flatten, Concat, Expand, Shape, Identity, Cast, Split, Tile,
 * DepthToSpace, SpaceToDepth, Size, Dropout (inference), Trilu, EyeLike and
 * ReverseSequence. Shape-valued inputs (Reshape's and Expand's shape, Squeeze/Unsqueeze axes from
 * opset 13, Split's sizes, Tile's repeats) are read on
 * the host with tr_host_ints: free for constant initializers, an evaluation otherwise, which makes
 * the group eager for that read. Ops that only relabel axes go through MLX's rank-only primitives
 * (squeeze, expand_dims, flatten) so they stay shapeless, as does Dropout (identity, its mask
 * built elementwise); ops whose result depends on concrete dims are shape-keyed. Values that only
 * steer elementwise choices stay on the device (Trilu's k, ReverseSequence's lengths, whose range
 * is a run-time check). Cast covers every MLX dtype: float -> int truncates toward zero as C does,
 * float -> bool tests nonzero (Pad and CenterCropPad are in pad.c). Opset versions are split where
 * the semantics change (allowzero from Reshape-14, axes as an input from opset 13, Shape's
 * start/end from 15, Split's input from 13 and num_outputs from 18, Dropout's mask and
 * training_mode from 12). Negative axes are accepted wherever ONNX Runtime's CPU kernels accept
 * them, which includes opsets before 11 for Squeeze, Unsqueeze, Concat and Split; only Flatten
 * before 11 declines one (ONNX Runtime rejects it too). Every row here only moves or selects data,
 * so each also takes float64 on the CPU device (OP_F64), bit-exact.
 */
#include "ops/families.h"
#include "cpu/math.h"
#include "ops/fusion_match.h"
#include "ops/lowbit.h"
#include "plan/translate.h"

#include <stdlib.h>
#include <string.h>

/* Every MLX element type, float64 included (claimed on the CPU device only). */
#define ANY_F64 (OP_ALL | OP_F64)

/* How a row reads its axes (the row's code). */
enum { AXES_NONNEG_ATTR = 0, AXES_ATTR = 1, AXES_INPUT = 2 };

/* --- shared helpers ---------------------------------------------------------------------- */
/* Axes from an `axes` attribute (rows 1..12) or input 1 (rows 13+). *present is false when the
 * model gave none. */
static int read_axes(tr_ctx *t, const ir_node *n, const op_row *r, int64_t *axes, size_t *count,
                     bool *present) {
  *count = 0;
  *present = false;
  if (r->code == AXES_INPUT) {
    if (!ir_has_input(n, 1)) return MX_OK;
    *present = true;
    return tr_host_ints(t, 1, axes, MX_MAX_RANK, count);
  }
  const ir_attr *a = ir_find_attr(n, "axes");
  if (!a || a->type != IR_ATTR_INTS) return MX_OK;
  if (a->count > MX_MAX_RANK)
    return tr_fail(t, "axes has %zu entries; at most %d are supported", a->count, MX_MAX_RANK);
  memcpy(axes, a->ints, sizeof(int64_t) * a->count);
  *count = a->count;
  *present = true;
  return MX_OK;
}

/* Checks an int64 dim fits MLX's int shape. */
static int dim_to_int(tr_ctx *t, int64_t d, int *out) {
  if (d < 0 || d > INT32_MAX)
    return tr_fail(t, "dimension %lld is outside what MLX shapes hold (0..%d)", (long long)d,
                   INT32_MAX);
  *out = (int)d;
  return MX_OK;
}

/* --- Reshape ----------------------------------------------------------------------------- */
static bool claim_reshape(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *s = ir_input(g, n, 1);
  if (s && s->rank >= 0 && s->rank != 1)
    return op_decline(why, "the shape input has rank %d; it must be 1-D", s->rank);
  return op_rank_fits(ir_output(g, n, 0), "the output", why) &&
         op_ints_fit(g, n, 1, MX_MAX_RANK, "the shape input", why);
}

/* 0 copies the input's dim (unless allowzero, the row's code, is set), one -1 is inferred. */
static int translate_reshape(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int64_t spec[MX_MAX_RANK];
  size_t count;
  if (mx_ndim(tr_in(t, 1)) != 1) /* as ORT: "A shape tensor must be a vector tensor" */
    return tr_fail(t, "the shape input has rank %d; it must be 1-D", mx_ndim(tr_in(t, 1)));
  TR_TRY(tr_host_ints(t, 1, spec, MX_MAX_RANK, &count));
  bool allowzero = r->code && ir_attr_int(n, "allowzero", 0) != 0;
  int shape[MX_MAX_RANK], infer = -1;
  int64_t known = 1, total = (int64_t)mx_size(x);
  for (size_t i = 0; i < count; i++) {
    int64_t d = spec[i];
    if (d == 0 && !allowzero) {
      if ((int)i >= mx_ndim(x))
        return tr_fail(t, "shape[%zu] is 0 (copy the input's dim) but the input has rank %d", i,
                       mx_ndim(x));
      d = mx_dim(x, (int)i);
    } else if (d == -1) {
      if (infer >= 0) return tr_fail(t, "shape has more than one -1");
      infer = (int)i;
      continue;
    }
    if (d < 0) return tr_fail(t, "shape[%zu] is %lld; dims must be >= -1", i, (long long)d);
    TR_TRY(dim_to_int(t, d, &shape[i]));
    if (__builtin_mul_overflow(known, d, &known)) return tr_fail(t, "shape is too large");
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      return tr_fail(t, "cannot infer the -1 dim: %lld elements do not divide by %lld",
                     (long long)total, (long long)known);
    TR_TRY(dim_to_int(t, total / known, &shape[infer]));
  } else if (known != total) {
    return tr_fail(t, "cannot reshape %lld elements into a shape of %lld elements",
                   (long long)total, (long long)known);
  }
  TR_TRY(mx_reshape(t->mx, &y, x, shape, (int)count));
  return tr_out(t, 0, y);
}

/* --- Transpose --------------------------------------------------------------------------- */
/* perm, when given, must be a permutation of 0..rank-1. */
static bool valid_perm(const int64_t *perm, size_t count, int rank) {
  bool seen[MX_MAX_RANK] = {0};
  if (rank >= 0 && (int64_t)count != rank) return false;
  if (count > MX_MAX_RANK) return false;
  for (size_t i = 0; i < count; i++) {
    if (perm[i] < 0 || perm[i] >= (int64_t)count || seen[perm[i]]) return false;
    seen[perm[i]] = true;
  }
  return true;
}

static bool claim_transpose(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_attr *perm = ir_find_attr(n, "perm");
  const ir_value *x = ir_input(g, n, 0);
  if (perm && perm->type == IR_ATTR_INTS && !valid_perm(perm->ints, perm->count, x->rank))
    return op_decline(why, "perm is not a permutation of the input's %d axes", x->rank);
  return true;
}

static int translate_transpose(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), y;
  int rank = mx_ndim(x), perm[MX_MAX_RANK];
  const ir_attr *a = ir_find_attr(n, "perm");
  if (a && a->type == IR_ATTR_INTS) {
    if (!valid_perm(a->ints, a->count, rank))
      return tr_fail(t, "perm is not a permutation of the input's %d axes", rank);
    for (int i = 0; i < rank; i++) perm[i] = (int)a->ints[i];
  } else {
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
  }
  TR_TRY(mx_transpose(t->mx, &y, x, perm, rank));
  return tr_out(t, 0, y);
}

/* --- Squeeze and Unsqueeze --------------------------------------------------------------- */
static bool claim_axes(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  if (r->code == AXES_INPUT)
    return op_ints_fit(g, n, 1, MX_MAX_RANK, "the axes input", why);
  const ir_attr *a = ir_find_attr(n, "axes");
  if (!a || a->type != IR_ATTR_INTS) return true;
  if (a->count > MX_MAX_RANK)
    return op_decline(why, "axes has %zu entries; at most %d are supported", a->count,
                      MX_MAX_RANK);
  return true;
}

/* Without axes every dim of size 1 goes; named axes must have size 1. */
static int translate_squeeze(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int64_t axes[MX_MAX_RANK];
  size_t count;
  bool present;
  TR_TRY(read_axes(t, n, r, axes, &count, &present));
  int rank = mx_ndim(x), out[MX_MAX_RANK], k = 0;
  bool drop[MX_MAX_RANK] = {0};
  if (count == 0) {
    for (int i = 0; i < rank; i++) drop[i] = mx_dim(x, i) == 1;
  } else {
    for (size_t i = 0; i < count; i++) {
      int ax;
      TR_TRY(tr_axis(t, axes[i], rank, &ax));
      if (mx_dim(x, ax) != 1)
        return tr_fail(t, "cannot squeeze axis %d: its size is %d, not 1", ax, mx_dim(x, ax));
      drop[ax] = true;
    }
  }
  for (int i = 0; i < rank; i++)
    if (drop[i]) out[k++] = i;
  if (k == 0) return tr_out(t, 0, x);
  TR_TRY(mx_squeeze(t->mx, &y, x, out, k));
  return tr_out(t, 0, y);
}

/* Axes index the output, whose rank is the input's plus the number of axes. */
static int translate_unsqueeze(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int64_t axes[MX_MAX_RANK];
  size_t count;
  bool present;
  TR_TRY(read_axes(t, n, r, axes, &count, &present));
  if (!present) return tr_fail(t, "axes are required");
  int out_rank = mx_ndim(x) + (int)count, ax[MX_MAX_RANK];
  if (out_rank > MX_MAX_RANK)
    return tr_fail(t, "the output would have rank %d; MLX holds at most %d", out_rank,
                   MX_MAX_RANK);
  bool seen[MX_MAX_RANK] = {0};
  for (size_t i = 0; i < count; i++) {
    TR_TRY(tr_axis(t, axes[i], out_rank, &ax[i]));
    if (seen[ax[i]]) return tr_fail(t, "axis %d appears twice in axes", ax[i]);
    seen[ax[i]] = true;
  }
  if (count == 0) return tr_out(t, 0, x);
  TR_TRY(mx_expand_dims(t->mx, &y, x, ax, (int)count));
  return tr_out(t, 0, y);
}

/* --- Flatten ----------------------------------------------------------------------------- */
static bool claim_flatten(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  int64_t axis = ir_attr_int(n, "axis", 1);
  const ir_value *x = ir_input(g, n, 0);
  if (r->code == AXES_NONNEG_ATTR && axis < 0)
    return op_decline(why, "axis %lld is negative; opset %d defines only 0..rank (negative axes "
                           "need opset 11)",
                      (long long)axis, n->since_version);
  if (x->rank >= 0 && (axis < -x->rank || axis > x->rank))
    return op_decline(why, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
  return true;
}

/* (d0*...*d[axis-1], d[axis]*...*d[rank-1]) via MLX's flatten, which keeps it shapeless. */
static int translate_flatten(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), y;
  int rank = mx_ndim(x);
  int64_t axis = ir_attr_int(n, "axis", 1);
  if (axis < -rank || axis > rank)
    return tr_fail(t, "axis %lld is out of range for rank %d", (long long)axis, rank);
  int a = (int)(axis < 0 ? axis + rank : axis);
  if (a == 0 || a == rank) {
    int at = a == 0 ? 0 : 1;
    TR_TRY(mx_flatten(t->mx, &y, x, 0, -1)); /* a scalar becomes shape (1) */
    TR_TRY(mx_expand_dims(t->mx, &y, y, &at, 1));
  } else {
    TR_TRY(mx_flatten(t->mx, &y, x, a, rank - 1));
    TR_TRY(mx_flatten(t->mx, &y, y, 0, a - 1));
  }
  return tr_out(t, 0, y);
}

/* --- Concat ------------------------------------------------------------------------------ */
/* A negative axis counts from the back at every opset, as in ONNX Runtime (Concat-4 too). */
static bool claim_concat(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  int64_t axis = ir_attr_int(n, "axis", 0);
  const ir_value *x = ir_input(g, n, 0);
  if (!ir_find_attr(n, "axis")) return op_decline(why, "the axis attribute is required");
  if (x && x->rank >= 0 && (axis < -x->rank || axis >= x->rank))
    return op_decline(why, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
  return op_all_same_type(g, n, why);
}

/* The parts joined along the channel axis 1 in a channels-last buffer: each part seen as
 * [N, spatial..., C] (a view), joined along the last axis, and the result seen as
 * [N, C, spatial...] again (a view over that buffer). The same values as a plain join. */
static int concat_channels_last(tr_ctx *t, mx_array *parts, int count, mx_array *y) {
  int rank = mx_ndim(parts[0]), to_last[MX_MAX_RANK], to_first[MX_MAX_RANK];
  to_last[0] = to_first[0] = 0;
  for (int i = 1; i < rank; i++) {
    to_last[i] = i + 1 < rank ? i + 1 : 1;
    to_first[i] = i == 1 ? rank - 1 : i - 1;
  }
  for (int i = 0; i < count; i++) TR_TRY(mx_transpose(t->mx, &parts[i], parts[i], to_last, rank));
  TR_TRY(mx_concatenate(t->mx, y, parts, (size_t)count, rank - 1));
  return mx_transpose(t->mx, y, *y, to_first, rank);
}

/* A Concat along axis 1 of float32 parts of rank 3-5 that a convolution alone reads (the fusion
 * table's concat_channels_last) on the CPU device, whose host kernels read channels-last input:
 * joined channels-last (above), which the convolution reads in place. Written channels-first,
 * the convolution gathered each position's channels from planes apart (PP-OCRv4 rec's neck: a
 * 960-channel Concat before a 1x3 convolution, 0.18 ms of copy and 0.29 ms of im2col). */
int op_build_concat_channels_last(tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                                  bool *done) {
  (void)m;
  int count = 0;
  mx_array y, first = NULL;
  for (int i = 0; i < n->n_inputs && !first; i++) first = tr_in(t, i);
  int rank = first ? mx_ndim(first) : 0;
  int64_t axis = ir_attr_int(n, "axis", 0);
  if (axis < 0) axis += rank;
  if (!first || t->mx->device != MX_DEVICE_CPU || !cpu_host_kernels_enabled() || axis != 1 ||
      rank < 3 || rank > 5 || mx_dtype_of(first) != MX_FLOAT32)
    return MX_OK;
  mx_array *parts = malloc(sizeof(mx_array) * ((size_t)n->n_inputs + 1));
  if (!parts) return tr_fail(t, "out of memory");
  for (int i = 0; i < n->n_inputs; i++)
    if (tr_in(t, i)) parts[count++] = tr_in(t, i);
  int rc = concat_channels_last(t, parts, count, &y);
  free(parts);
  TR_TRY(rc);
  tr_note_path(t, TR_PATH_COMPOSED, "concat_channels_last", 0,
               "joined channels-last for the convolution (CPU)");
  *done = true;
  return tr_out(t, 0, y);
}

static int translate_concat(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  int count = 0, axis;
  mx_array y, *parts = malloc(sizeof(mx_array) * ((size_t)n->n_inputs + 1));
  if (!parts) return tr_fail(t, "out of memory");
  for (int i = 0; i < n->n_inputs; i++)
    if (tr_in(t, i)) parts[count++] = tr_in(t, i);
  int rc = count ? tr_axis(t, ir_attr_int(n, "axis", 0), mx_ndim(parts[0]), &axis)
                 : tr_fail(t, "Concat has no inputs");
  if (rc == MX_OK) rc = mx_concatenate(t->mx, &y, parts, (size_t)count, axis);
  free(parts);
  TR_TRY(rc);
  return tr_out(t, 0, y);
}

/* --- Expand ------------------------------------------------------------------------------ */
static bool claim_expand(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  return op_rank_fits(ir_output(g, n, 0), "the output", why) &&
         op_ints_fit(g, n, 1, MX_MAX_RANK, "the shape input", why);
}

/* Bidirectional broadcast of the input's shape with the shape input (numpy rules). */
static int translate_expand(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x = tr_in(t, 0), y;
  int64_t spec[MX_MAX_RANK];
  size_t count;
  TR_TRY(tr_host_ints(t, 1, spec, MX_MAX_RANK, &count));
  int xr = mx_ndim(x), sr = (int)count, rank = xr > sr ? xr : sr, shape[MX_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    int64_t a = i - (rank - xr) >= 0 ? mx_dim(x, i - (rank - xr)) : 1;
    int64_t b = i - (rank - sr) >= 0 ? spec[i - (rank - sr)] : 1;
    if (b < 0) return tr_fail(t, "shape[%d] is %lld; dims must be >= 0", i - (rank - sr),
                              (long long)b);
    if (a != b && a != 1 && b != 1)
      return tr_fail(t, "cannot broadcast input dim %lld against shape dim %lld (axis %d)",
                     (long long)a, (long long)b, i);
    TR_TRY(dim_to_int(t, a == 1 ? b : a, &shape[i]));
  }
  TR_TRY(mx_broadcast_to(t->mx, &y, x, shape, rank));
  return tr_out(t, 0, y);
}

/* --- Shape, Identity, Cast --------------------------------------------------------------- */
/* The input's concrete dims as int64; from opset 15 the start/end attributes select a range,
 * negative values counting from the back and both clamped to [0, rank]. */
static int translate_shape(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int64_t rank = mx_ndim(x), start = 0, end = rank, dims[MX_MAX_RANK];
  if (r->code) {
    start = ir_attr_int(n, "start", 0);
    end = ir_attr_int(n, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < 0 ? 0 : end > rank ? rank : end;
  }
  int len = end > start ? (int)(end - start) : 0;
  for (int i = 0; i < len; i++) dims[i] = mx_dim(x, (int)start + i);
  TR_TRY(mx_from_data(t->mx, &y, dims, &len, 1, MX_INT64));
  return tr_out(t, 0, y);
}

static int translate_identity(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  return tr_out(t, 0, tr_in(t, 0));
}

static bool claim_cast(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)g, (void)r;
  const ir_attr *to = ir_find_attr(n, "to");
  if (!to || to->type != IR_ATTR_INT) return op_decline(why, "the 'to' attribute is required");
  if (ir_value_mx_dtype(ir_elem_from_onnx((int)to->i)) < 0)
    return op_decline(why, "Cast to %s: MLX has no such dtype",
                      ir_elem_name(ir_elem_from_onnx((int)to->i)));
  return true;
}

/* MLX's astype truncates float -> int toward zero and maps nonzero (and NaN) to true, as
 * ONNX Runtime's static_cast does; integer narrowing wraps. */
static int translate_cast(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), y;
  int to_elem = ir_elem_from_onnx((int)ir_attr_int(n, "to", 0));
  int from_elem = ir_input(t->g, n, 0)->elem_type;
  if (ir_to_mx_dtype(to_elem) < 0 || ir_to_mx_dtype(from_elem) < 0) { /* raw types */
    TR_TRY(lowbit_cast(t->mx, &y, x, from_elem, to_elem, ir_attr_int(n, "saturate", 1) != 0,
                       ir_attr_string(n, "round_mode", "up")));
    return tr_out(t, 0, y);
  }
  int to = ir_to_mx_dtype(to_elem);
  if (to < 0) return tr_fail(t, "Cast to an element type MLX cannot hold");
  if (mx_dtype_of(x) == (mx_dtype)to) return tr_out(t, 0, x);
  TR_TRY(mx_astype(t->mx, &y, x, (mx_dtype)to));
  return tr_out(t, 0, y);
}

/* --- Split ------------------------------------------------------------------------------- */
/* Where a row takes its split sizes (the row's code). */
enum { SPLIT_ATTR = 1, SPLIT_INPUT = 2, SPLIT_NUM_OUTPUTS = 3 };

/* A negative axis counts from the back at every opset: ONNX Runtime's kernel accepts one before
 * opset 11 too (pytorch-converted models such as test_GLU carry Split-2 with axis -1). */
static bool claim_split(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *x = ir_input(g, n, 0);
  int64_t axis = ir_attr_int(n, "axis", 0);
  if (x->rank >= 0 && (axis < -x->rank || axis >= (x->rank ? x->rank : 1)))
    return op_decline(why, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
  const ir_attr *split = ir_find_attr(n, "split");
  if (r->code < SPLIT_INPUT && split && split->type == IR_ATTR_INTS &&
      split->count != (size_t)n->n_outputs)
    return op_decline(why, "split has %zu entries for %d outputs", split->count, n->n_outputs);
  if (r->code == SPLIT_NUM_OUTPUTS) {
    const ir_attr *num = ir_find_attr(n, "num_outputs");
    if (num && ir_has_input(n, 1))
      return op_decline(why, "both the split input and num_outputs are given; ONNX allows one");
    if (num && num->i != n->n_outputs)
      return op_decline(why, "num_outputs is %lld but the node has %d outputs", (long long)num->i,
                        n->n_outputs);
  }
  return true;
}

/* Sizes from the split attribute or input (non-negative, summing to the axis), the ceil-sized
 * chunks of num_outputs (opset 18: the last one smaller), or equal parts that must divide. */
static int split_sizes(tr_ctx *t, const ir_node *n, const op_row *r, int64_t dim, int64_t *sizes) {
  int k = n->n_outputs;
  size_t count = 0;
  const ir_attr *a = ir_find_attr(n, "split");
  bool given = false;
  if (r->code < SPLIT_INPUT && a && a->type == IR_ATTR_INTS) {
    if (a->count != (size_t)k)
      return tr_fail(t, "split has %zu entries for %d outputs", a->count, k);
    for (int i = 0; i < k; i++) sizes[i] = a->ints[i];
    given = true;
  } else if (r->code >= SPLIT_INPUT && ir_has_input(n, 1)) {
    TR_TRY(tr_host_ints(t, 1, sizes, (size_t)k, &count));
    if (count != (size_t)k) return tr_fail(t, "split has %zu entries for %d outputs", count, k);
    given = true;
  }
  if (given) {
    int64_t sum = 0;
    for (int i = 0; i < k; i++) {
      if (sizes[i] < 0) return tr_fail(t, "split[%d] is %lld; sizes must be >= 0", i,
                                       (long long)sizes[i]);
      sum += sizes[i];
    }
    if (sum != dim)
      return tr_fail(t, "split sizes sum to %lld but the axis has %lld elements", (long long)sum,
                     (long long)dim);
    return MX_OK;
  }
  if (r->code == SPLIT_NUM_OUTPUTS && ir_find_attr(n, "num_outputs")) {
    int64_t chunk = (dim + k - 1) / k, last = dim - chunk * (k - 1);
    if (k > dim || last < 1) /* as ONNX Runtime: no empty chunk */
      return tr_fail(t, "num_outputs %d cannot split an axis of %lld elements into chunks of "
                        "%lld with a non-empty last one",
                     k, (long long)dim, (long long)chunk);
    for (int i = 0; i < k; i++) sizes[i] = i < k - 1 ? chunk : last;
    return MX_OK;
  }
  if (dim % k != 0)
    return tr_fail(t, "an axis of %lld elements does not split evenly into %d outputs",
                   (long long)dim, k);
  for (int i = 0; i < k; i++) sizes[i] = dim / k;
  return MX_OK;
}

static int translate_split(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int rank = mx_ndim(x), axis, k = n->n_outputs;
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", 0), rank, &axis));
  int64_t *sizes = calloc((size_t)k + 1, sizeof *sizes);
  if (!sizes) return tr_fail(t, "out of memory");
  int rc = split_sizes(t, n, r, mx_dim(x, axis), sizes);
  int start[MX_MAX_RANK], stop[MX_MAX_RANK], stride[MX_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    start[i] = 0;
    stop[i] = mx_dim(x, i);
    stride[i] = 1;
  }
  for (int i = 0, at = 0; rc == MX_OK && i < k; at += (int)sizes[i++]) {
    start[axis] = at;
    stop[axis] = at + (int)sizes[i];
    rc = mx_slice(t->mx, &y, x, start, stop, stride, rank);
    if (rc == MX_OK) rc = tr_out(t, i, y);
  }
  free(sizes);
  return rc;
}

/* --- Tile -------------------------------------------------------------------------------- */
static bool claim_tile(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  return op_rank_fits(ir_output(g, n, 0), "the output", why) &&
         op_ints_fit(g, n, 1, MX_MAX_RANK, "the repeats input", why);
}

static int translate_tile(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x = tr_in(t, 0), y;
  int64_t reps[MX_MAX_RANK];
  size_t count;
  TR_TRY(tr_host_ints(t, 1, reps, MX_MAX_RANK, &count));
  int rank = mx_ndim(x), rep[MX_MAX_RANK];
  if ((int)count != rank)
    return tr_fail(t, "repeats has %zu entries for an input of rank %d", count, rank);
  for (int i = 0; i < rank; i++) {
    if (reps[i] < 0)
      return tr_fail(t, "repeats[%d] is %lld; repeats must be >= 0", i, (long long)reps[i]);
    int64_t total;
    if (__builtin_mul_overflow(reps[i], (int64_t)mx_dim(x, i), &total) || total > INT32_MAX)
      return tr_fail(t, "tiling axis %d gives more elements than MLX shapes hold", i);
    rep[i] = (int)reps[i];
  }
  if (rank == 0) return tr_out(t, 0, x);
  TR_TRY(mx_tile(t->mx, &y, x, rep, rank));
  return tr_out(t, 0, y);
}

/* --- DepthToSpace and SpaceToDepth ------------------------------------------------------- */
/* DepthToSpace's layout (the row's code says whether the mode attribute exists). */
enum { D2S_DCR_ONLY = 0, D2S_MODES = 1 };

static bool claim_blocks(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *x = ir_input(g, n, 0);
  const ir_attr *b = ir_find_attr(n, "blocksize");
  if (!b || b->type != IR_ATTR_INT || b->i <= 0)
    return op_decline(why, "blocksize is required and must be positive");
  if (x->rank >= 0 && x->rank != 4)
    return op_decline(why, "the input has rank %d; %s takes (N, C, H, W)", x->rank, n->op_type);
  const char *mode = ir_attr_string(n, "mode", "DCR");
  if (r->code == D2S_MODES && strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
    return op_decline(why, "mode '%s' is neither DCR nor CRD", mode);
  return true;
}

static int blocks_shape(tr_ctx *t, mx_array x, int64_t b, int *dims) {
  if (mx_ndim(x) != 4) return tr_fail(t, "the input has rank %d, not 4", mx_ndim(x));
  if (b <= 0 || b > 46340) /* b * b must fit an int */
    return tr_fail(t, "blocksize %lld is outside [1, 46340]", (long long)b);
  for (int i = 0; i < 4; i++) {
    dims[i] = mx_dim(x, i);
    if ((int64_t)dims[i] * b * b > INT32_MAX)
      return tr_fail(t, "dim %d times blocksize^2 exceeds MLX's shape range", i);
  }
  return MX_OK;
}

/* DCR reads channels as (b, b, C'); CRD as (C', b, b). */
static int translate_depth_to_space(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int64_t b64 = ir_attr_int(n, "blocksize", 0);
  int d[4];
  TR_TRY(blocks_shape(t, x, b64, d));
  int b = (int)b64;
  if (d[1] % (b * b) != 0)
    return tr_fail(t, "%d channels do not divide by blocksize^2 = %d", d[1], b * b);
  bool crd = r->code == D2S_MODES && strcmp(ir_attr_string(n, "mode", "DCR"), "CRD") == 0;
  int c = d[1] / (b * b);
  int dcr_shape[6] = {d[0], b, b, c, d[2], d[3]}, dcr_perm[6] = {0, 3, 4, 1, 5, 2};
  int crd_shape[6] = {d[0], c, b, b, d[2], d[3]}, crd_perm[6] = {0, 1, 4, 2, 5, 3};
  int out[4] = {d[0], c, d[2] * b, d[3] * b};
  TR_TRY(mx_reshape(t->mx, &y, x, crd ? crd_shape : dcr_shape, 6));
  TR_TRY(mx_transpose(t->mx, &y, y, crd ? crd_perm : dcr_perm, 6));
  TR_TRY(mx_reshape(t->mx, &y, y, out, 4));
  return tr_out(t, 0, y);
}

static int translate_space_to_depth(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), y;
  int64_t b64 = ir_attr_int(n, "blocksize", 0);
  int d[4];
  TR_TRY(blocks_shape(t, x, b64, d));
  int b = (int)b64;
  if (d[2] % b != 0 || d[3] % b != 0)
    return tr_fail(t, "spatial dims %d x %d do not divide by blocksize %d", d[2], d[3], b);
  int shape[6] = {d[0], d[1], d[2] / b, b, d[3] / b, b}, perm[6] = {0, 3, 5, 1, 2, 4};
  int out[4] = {d[0], d[1] * b * b, d[2] / b, d[3] / b};
  TR_TRY(mx_reshape(t->mx, &y, x, shape, 6));
  TR_TRY(mx_transpose(t->mx, &y, y, perm, 6));
  TR_TRY(mx_reshape(t->mx, &y, y, out, 4));
  return tr_out(t, 0, y);
}

/* --- Size, Dropout ----------------------------------------------------------------------- */
static int translate_size(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array y;
  int64_t size = (int64_t)mx_size(tr_in(t, 0));
  TR_TRY(mx_from_data(t->mx, &y, &size, NULL, 0, MX_INT64));
  return tr_out(t, 0, y);
}

/* What Dropout's optional mask holds in inference (the row's code). */
enum { DROPOUT_MASK_ZERO = 0, DROPOUT_MASK_TRUE = 1 };

/* From opset 12 training_mode is an input: absent or a constant false means inference. */
static bool claim_dropout(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  if (r->code != DROPOUT_MASK_TRUE || !ir_has_input(n, 2)) return true;
  const ir_value *m = ir_input(g, n, 2);
  if (!m->is_constant || m->const_bytes != 1)
    return op_decline(why, "training_mode is not a constant; only inference (training_mode "
                           "absent or a constant false) is translated");
  if (*(const uint8_t *)m->const_data)
    return op_decline(why, "training_mode is true: random dropout (training) is not "
                           "translated");
  return true;
}

/* The output is the input. The mask is all true from opset 12 (as ONNX specifies) and all zero
 * for opsets 7..11 (what ONNX Runtime's kernel writes there); it is built from elementwise ops
 * on the input so the row stays shapeless. */
static int translate_dropout(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n;
  mx_array x = tr_in(t, 0), b, nb, mask;
  TR_TRY(tr_out(t, 0, x));
  if (!tr_has_out(t, 1)) return MX_OK;
  TR_TRY(mx_astype(t->mx, &b, x, MX_BOOL));
  TR_TRY(mx_unary(t->mx, &nb, MX_LOGICAL_NOT, b));
  TR_TRY(mx_binary(t->mx, &mask, r->code == DROPOUT_MASK_TRUE ? MX_LOGICAL_OR : MX_LOGICAL_AND,
                   b, nb));
  mx_dtype want = tr_out_dtype(t, 1);
  if (want != MX_BOOL) TR_TRY(mx_astype(t->mx, &mask, mask, want));
  return tr_out(t, 1, mask);
}

/* --- Trilu, EyeLike ---------------------------------------------------------------------- */
/* (col - row) for an m x n matrix as int64, the diagonal offset both ops compare with k. */
static int diagonal_offsets(tr_ctx *t, int m, int n, mx_array *out) {
  mx_array rows, cols;
  int rs[2] = {m, 1}, cs[2] = {1, n};
  TR_TRY(mx_arange(t->mx, &rows, 0, m, 1, MX_INT64));
  TR_TRY(mx_arange(t->mx, &cols, 0, n, 1, MX_INT64));
  TR_TRY(mx_reshape(t->mx, &rows, rows, rs, 2));
  TR_TRY(mx_reshape(t->mx, &cols, cols, cs, 2));
  return mx_binary(t->mx, out, MX_SUBTRACT, cols, rows);
}

static bool claim_trilu(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *k = ir_input(g, n, 1);
  if (x->rank >= 0 && x->rank < 2)
    return op_decline(why, "the input has rank %d; Trilu needs rank >= 2", x->rank);
  if (k && k->elem_type != IR_INT64) return op_decline(why, "k must be an int64 scalar");
  return true;
}

/* Keeps elements with col - row >= k (upper) or <= k (lower); k stays on the device. */
static int translate_trilu(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), kin = tr_in(t, 1), diff, k, keep, zero, y;
  if (mx_ndim(x) < 2) return tr_fail(t, "the input has rank %d; Trilu needs rank >= 2",
                                     mx_ndim(x));
  TR_TRY(diagonal_offsets(t, mx_dim(x, -2), mx_dim(x, -1), &diff));
  if (kin) {
    if (mx_size(kin) != 1) return tr_fail(t, "k must hold one value, not %zu", mx_size(kin));
    TR_TRY(mx_reshape(t->mx, &k, kin, NULL, 0));
    TR_TRY(mx_astype(t->mx, &k, k, MX_INT64));
  } else {
    TR_TRY(mx_scalar_int(t->mx, &k, 0, MX_INT64));
  }
  bool upper = ir_attr_int(n, "upper", 1) != 0;
  TR_TRY(mx_binary(t->mx, &keep, upper ? MX_GREATER_EQUAL : MX_LESS_EQUAL, diff, k));
  TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(x)));
  TR_TRY(mx_where(t->mx, &y, keep, x, zero));
  return tr_out(t, 0, y);
}

static bool claim_eye_like(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  const ir_attr *dt = ir_find_attr(n, "dtype");
  if (x->rank >= 0 && x->rank != 2)
    return op_decline(why, "the input has rank %d; EyeLike takes a 2-D tensor", x->rank);
  if (dt && ir_to_mx_dtype((int)dt->i) < 0)
    return op_decline(why, "dtype %s: MLX has no such dtype", ir_elem_name((int)dt->i));
  return true;
}

/* Ones on the k-th diagonal of the input's 2-D shape, in dtype (default: the input's). */
static int translate_eye_like(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), diff, k, eq, y;
  if (mx_ndim(x) != 2) return tr_fail(t, "the input has rank %d, not 2", mx_ndim(x));
  int m = mx_dim(x, 0), c = mx_dim(x, 1);
  int64_t kv = ir_attr_int(n, "k", 0), bound = (int64_t)m + c + 1;
  kv = kv > bound ? bound : kv < -bound ? -bound : kv;
  TR_TRY(diagonal_offsets(t, m, c, &diff));
  TR_TRY(mx_scalar_int(t->mx, &k, kv, MX_INT64));
  TR_TRY(mx_binary(t->mx, &eq, MX_EQUAL, diff, k));
  const ir_attr *dt = ir_find_attr(n, "dtype");
  int want = dt ? ir_to_mx_dtype((int)dt->i) : (int)mx_dtype_of(x);
  if (want < 0) return tr_fail(t, "dtype is not one MLX holds");
  TR_TRY(mx_astype(t->mx, &y, eq, (mx_dtype)want));
  return tr_out(t, 0, y);
}

/* --- ReverseSequence --------------------------------------------------------------------- */
static bool claim_reverse_sequence(const ir_graph *g, const ir_node *n, const op_row *r,
                                   op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *lens = ir_input(g, n, 1);
  int64_t b = ir_attr_int(n, "batch_axis", 1), tm = ir_attr_int(n, "time_axis", 0);
  if ((b != 0 && b != 1) || (tm != 0 && tm != 1) || b == tm)
    return op_decline(why, "batch_axis %lld and time_axis %lld must be 0 and 1 in some order",
                      (long long)b, (long long)tm);
  if (x->rank >= 0 && x->rank < 2)
    return op_decline(why, "the input has rank %d; ReverseSequence needs rank >= 2", x->rank);
  if (lens->elem_type != IR_INT64) return op_decline(why, "sequence_lens must be int64");
  return true;
}

/* Along the time axis, position p of batch b reads len[b]-1-p while p < len[b], else p: one
 * take_along_axis with device-computed positions. Lengths outside [0, time] fail the run. */
static int translate_reverse_sequence(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), lens = tr_in(t, 1), steps, zero, top, ok, lo_ok, hi_ok, one, rev;
  mx_array before, idx, y;
  int rank = mx_ndim(x), b = (int)ir_attr_int(n, "batch_axis", 1);
  int tm = (int)ir_attr_int(n, "time_axis", 0);
  if (rank < 2) return tr_fail(t, "the input has rank %d; ReverseSequence needs rank >= 2", rank);
  int steps_n = mx_dim(x, tm), batch = mx_dim(x, b);
  if (mx_ndim(lens) != 1 || mx_dim(lens, 0) != batch)
    return tr_fail(t, "sequence_lens must have shape (%d), one length per batch entry", batch);
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, MX_INT64));
  TR_TRY(mx_scalar_int(t->mx, &top, steps_n, MX_INT64));
  TR_TRY(mx_scalar_int(t->mx, &one, 1, MX_INT64));
  TR_TRY(mx_binary(t->mx, &lo_ok, MX_GREATER_EQUAL, lens, zero));
  TR_TRY(mx_binary(t->mx, &hi_ok, MX_LESS_EQUAL, lens, top));
  TR_TRY(mx_binary(t->mx, &ok, MX_LOGICAL_AND, lo_ok, hi_ok));
  TR_TRY(tr_check_that(t, ok, "sequence_lens must lie in [0, %d]", steps_n));
  TR_TRY(mx_clip(t->mx, &lens, lens, zero, top));
  int ls[MX_MAX_RANK], ss[MX_MAX_RANK];
  for (int i = 0; i < rank; i++) ls[i] = ss[i] = 1;
  ls[b] = batch;
  ss[tm] = steps_n;
  TR_TRY(mx_arange(t->mx, &steps, 0, steps_n, 1, MX_INT64));
  TR_TRY(mx_reshape(t->mx, &steps, steps, ss, rank));
  TR_TRY(mx_reshape(t->mx, &lens, lens, ls, rank));
  TR_TRY(mx_binary(t->mx, &rev, MX_SUBTRACT, lens, one));
  TR_TRY(mx_binary(t->mx, &rev, MX_SUBTRACT, rev, steps));
  TR_TRY(mx_binary(t->mx, &before, MX_LESS, steps, lens));
  TR_TRY(mx_where(t->mx, &idx, before, rev, steps));
  TR_TRY(mx_broadcast_to(t->mx, &idx, idx, mx_shape(x), rank));
  TR_TRY(mx_take_along_axis(t->mx, &y, x, idx, tm));
  return tr_out(t, 0, y);
}

#define HOST_READ_NOTE(what) \
  what " is read on the host: free when constant; when computed, it makes the group eager " \
       "for that read"

const op_row ops_shape_rows[] = {
    {"", "Reshape", 5, 13, claim_reshape, translate_reshape, OP_SHAPE_KEYED, ANY_F64, 0,
     "0 copies the input dim, one -1 is inferred; " HOST_READ_NOTE("the shape input")},
    {"", "Reshape", 14, 25, claim_reshape, translate_reshape, OP_SHAPE_KEYED, ANY_F64, 1,
     "allowzero=1 keeps 0 as a dim; " HOST_READ_NOTE("the shape input")},
    {"", "Transpose", 1, 25, claim_transpose, translate_transpose, OP_SHAPELESS, ANY_F64, 0,
     "perm defaults to the reversed axes"},
    {"", "Squeeze", 1, 12, claim_axes, translate_squeeze, OP_SHAPE_KEYED, ANY_F64, AXES_ATTR,
     "axes attribute (negative ones count from the back, before opset 11 too, as in ONNX "
     "Runtime); checks the squeezed dims are 1"},
    {"", "Squeeze", 13, 25, claim_axes, translate_squeeze, OP_SHAPE_KEYED, ANY_F64, AXES_INPUT,
     "checks the squeezed dims are 1; " HOST_READ_NOTE("the axes input")},
    {"", "Unsqueeze", 1, 12, claim_axes, translate_unsqueeze, OP_SHAPELESS, ANY_F64, AXES_ATTR,
     "axes attribute (negative ones count from the back of the output, before opset 11 too, as "
     "in ONNX Runtime)"},
    {"", "Unsqueeze", 13, 25, claim_axes, translate_unsqueeze, OP_SHAPE_KEYED, ANY_F64,
     AXES_INPUT, HOST_READ_NOTE("the axes input")},
    {"", "Flatten", 1, 10, claim_flatten, translate_flatten, OP_SHAPELESS, ANY_F64,
     AXES_NONNEG_ATTR, "negative axis declined (opset 11+; ONNX Runtime rejects it too)"},
    {"", "Flatten", 11, 25, claim_flatten, translate_flatten, OP_SHAPELESS, ANY_F64, AXES_ATTR,
     NULL},
    {"", "Concat", 4, 13, claim_concat, translate_concat, OP_SHAPELESS, ANY_F64, AXES_ATTR,
     "inputs must share a dtype; a negative axis counts from the back (before opset 11 too, as "
     "in ONNX Runtime); CPU: joined channels-last when a convolution alone reads it"},
    {"", "Expand", 8, 13, claim_expand, translate_expand, OP_SHAPE_KEYED, ANY_F64, 0,
     "bidirectional broadcast; " HOST_READ_NOTE("the shape input")},
    {"", "Shape", 1, 14, NULL, translate_shape, OP_SHAPE_KEYED, ANY_F64, 0,
     "int64 dims of the concrete input shape"},
    {"", "Shape", 15, 25, NULL, translate_shape, OP_SHAPE_KEYED, ANY_F64, 1,
     "start/end clamped to [0, rank]; int64 dims of the concrete input shape"},
    {"", "Identity", 1, 25, NULL, translate_identity, OP_SHAPELESS, ANY_F64, 0,
     "tensors only (sequences and optionals are declined)"},
    {"", "Cast", 6, 25, claim_cast, translate_cast, OP_SHAPELESS, ANY_F64 | OP_RAW, 0,
     "float->int truncates toward zero, float->bool is nonzero; float64 from or to any MLX type "
     "on the CPU device (to float16/bfloat16 rounds through float32, as ONNX Runtime does); "
     "float8/float4 as codes (to them: nearest, ties to even, saturate honoured; float8e8m0 by "
     "round_mode), int4/uint4/int2/uint2 unpacked (from floats: half away from zero, then wrap); "
     "string declined"},
    {"", "Split", 2, 12, claim_split, translate_split, OP_SHAPE_KEYED, ANY_F64, SPLIT_ATTR,
     "split attribute or equal parts that must divide the axis; a negative axis counts from the "
     "back (before opset 11 too, as in ONNX Runtime)"},
    {"", "Split", 13, 17, claim_split, translate_split, OP_SHAPE_KEYED, ANY_F64, SPLIT_INPUT,
     "equal parts must divide the axis; " HOST_READ_NOTE("the split input")},
    {"", "Split", 18, 25, claim_split, translate_split, OP_SHAPE_KEYED, ANY_F64,
     SPLIT_NUM_OUTPUTS,
     "num_outputs gives ceil-sized chunks, the last one smaller; "
     HOST_READ_NOTE("the split input")},
    {"", "Tile", 6, 25, claim_tile, translate_tile, OP_SHAPE_KEYED, ANY_F64, 0,
     HOST_READ_NOTE("the repeats input")},
    {"", "DepthToSpace", 1, 10, claim_blocks, translate_depth_to_space, OP_SHAPE_KEYED, ANY_F64,
     D2S_DCR_ONLY, "4-D input, DCR layout"},
    {"", "DepthToSpace", 11, 25, claim_blocks, translate_depth_to_space, OP_SHAPE_KEYED, ANY_F64,
     D2S_MODES, "4-D input; modes DCR and CRD"},
    {"", "SpaceToDepth", 1, 25, claim_blocks, translate_space_to_depth, OP_SHAPE_KEYED, ANY_F64,
     0, "4-D input"},
    {"", "Size", 1, 25, NULL, translate_size, OP_SHAPE_KEYED, ANY_F64, 0,
     "int64 element count of the concrete input"},
    {"", "Dropout", 7, 11, NULL, translate_dropout, OP_SHAPELESS, OP_FLOATS | OP_F64,
     DROPOUT_MASK_ZERO,
     "inference: identity; the optional mask is all zero, as ONNX Runtime writes it"},
    {"", "Dropout", 12, 25, claim_dropout, translate_dropout, OP_SHAPELESS, OP_FLOATS | OP_F64,
     DROPOUT_MASK_TRUE,
     "inference: identity, optional mask all true; training_mode must be absent or a constant "
     "false (training declined); ratio ignored"},
    {"", "Trilu", 14, 25, claim_trilu, translate_trilu, OP_SHAPE_KEYED, ANY_F64, 0,
     "k stays on the device (no host read)"},
    {"", "EyeLike", 9, 25, claim_eye_like, translate_eye_like, OP_SHAPE_KEYED, ANY_F64, 0,
     "2-D input; dtype attribute or the input's type"},
    {"", "ReverseSequence", 10, 25, claim_reverse_sequence, translate_reverse_sequence,
     OP_SHAPE_KEYED, ANY_F64, 0, "a length outside [0, time steps] fails the run, naming the node"},
    OP_ROWS_END,
};
