/*
 * Shape operators: the ops that move, relabel or convert data without arithmetic. Reshape,
 * Transpose, Squeeze, Unsqueeze, Flatten, Concat, Expand, Shape, Identity and Cast. Shape-valued
 * inputs (Reshape's and Expand's shape, Squeeze/Unsqueeze axes from opset 13) are read on the host
 * with tr_host_ints: free for constant initializers, an evaluation otherwise, which makes the
 * group eager for that read. Ops that only relabel axes go through MLX's rank-only primitives
 * (squeeze, expand_dims, flatten) so they stay shapeless; ops whose result depends on concrete
 * dims (Reshape's 0 and -1, Expand, Shape, Squeeze's size-1 checks) are shape-keyed. Cast covers
 * every MLX dtype: float -> int truncates toward zero as C does, float -> bool tests nonzero.
 * Opset versions are split where the semantics change (allowzero from Reshape-14, negative axes
 * from opset 11, axes as an input from opset 13, Shape's start/end from 15).
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdlib.h>
#include <string.h>

/* How a row reads its axes (the row's code). */
enum { AXES_NONNEG_ATTR = 0, AXES_ATTR = 1, AXES_INPUT = 2 };

/* --- shared helpers ---------------------------------------------------------------------- */
/* Declines when a known rank exceeds what MLX arrays can hold. */
static bool rank_fits(const ir_value *v, const char *what, op_why why) {
  if (v && v->rank > MX_MAX_RANK)
    return op_decline(why, "%s has rank %d; MLX arrays hold at most %d dimensions", what, v->rank,
                      MX_MAX_RANK);
  return true;
}

/* Declines a shape-valued input (constant, or computed with a known length) holding more than
 * `cap` values. Its values are read on the host at run time. */
static bool ints_fit(const ir_graph *g, const ir_node *n, int i, size_t cap, const char *what,
                     op_why why) {
  const ir_value *v = ir_input(g, n, i);
  int64_t len = v ? ir_num_elements(v) : -1;
  if (len > (int64_t)cap)
    return op_decline(why, "%s has %lld entries; at most %zu are supported", what,
                      (long long)len, cap);
  return true;
}

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
  return rank_fits(ir_output(g, n, 0), "the output", why) &&
         ints_fit(g, n, 1, MX_MAX_RANK, "the shape input", why);
}

/* 0 copies the input's dim (unless allowzero, the row's code, is set), one -1 is inferred. */
static int translate_reshape(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int64_t spec[MX_MAX_RANK];
  size_t count;
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
    return ints_fit(g, n, 1, MX_MAX_RANK, "the axes input", why);
  const ir_attr *a = ir_find_attr(n, "axes");
  if (!a || a->type != IR_ATTR_INTS) return true;
  if (a->count > MX_MAX_RANK)
    return op_decline(why, "axes has %zu entries; at most %d are supported", a->count,
                      MX_MAX_RANK);
  if (r->code == AXES_NONNEG_ATTR)
    for (size_t k = 0; k < a->count; k++)
      if (a->ints[k] < 0)
        return op_decline(why, "axes holds %lld; opset %d defines only non-negative axes "
                               "(negative axes need opset 11)",
                          (long long)a->ints[k], n->since_version);
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
static bool claim_concat(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  int64_t axis = ir_attr_int(n, "axis", 0);
  const ir_value *x = ir_input(g, n, 0);
  if (!ir_find_attr(n, "axis")) return op_decline(why, "the axis attribute is required");
  if (r->code == AXES_NONNEG_ATTR && axis < 0)
    return op_decline(why, "axis %lld is negative; opset %d defines only non-negative axes "
                           "(negative axes need opset 11)",
                      (long long)axis, n->since_version);
  if (x && x->rank >= 0 && (axis < -x->rank || axis >= x->rank))
    return op_decline(why, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
  return op_all_same_type(g, n, why);
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
  return rank_fits(ir_output(g, n, 0), "the output", why) &&
         ints_fit(g, n, 1, MX_MAX_RANK, "the shape input", why);
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
  if (ir_to_mx_dtype((int)to->i) < 0)
    return op_decline(why, "Cast to %s: MLX has no such dtype", ir_elem_name((int)to->i));
  return true;
}

/* MLX's astype truncates float -> int toward zero and maps nonzero (and NaN) to true, as
 * ONNX Runtime's static_cast does; integer narrowing wraps. */
static int translate_cast(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), y;
  int to = ir_to_mx_dtype((int)ir_attr_int(n, "to", 0));
  if (to < 0) return tr_fail(t, "Cast to an element type MLX cannot hold");
  if (mx_dtype_of(x) == (mx_dtype)to) return tr_out(t, 0, x);
  TR_TRY(mx_astype(t->mx, &y, x, (mx_dtype)to));
  return tr_out(t, 0, y);
}

#define HOST_READ_NOTE(what) \
  what " is read on the host: free when constant; a computed " what " makes the group eager " \
       "for that read"

const op_row ops_shape_rows[] = {
    {"", "Reshape", 5, 13, claim_reshape, translate_reshape, OP_SHAPE_KEYED, 0, 0,
     "0 copies the input dim, one -1 is inferred; " HOST_READ_NOTE("the shape input")},
    {"", "Reshape", 14, 25, claim_reshape, translate_reshape, OP_SHAPE_KEYED, 0, 1,
     "allowzero=1 keeps 0 as a dim; " HOST_READ_NOTE("the shape input")},
    {"", "Transpose", 1, 25, claim_transpose, translate_transpose, OP_SHAPELESS, 0, 0,
     "perm defaults to the reversed axes"},
    {"", "Squeeze", 1, 10, claim_axes, translate_squeeze, OP_SHAPE_KEYED, 0, AXES_NONNEG_ATTR,
     "axes attribute; negative axes declined (opset 11+); checks the squeezed dims are 1"},
    {"", "Squeeze", 11, 12, claim_axes, translate_squeeze, OP_SHAPE_KEYED, 0, AXES_ATTR,
     "axes attribute; checks the squeezed dims are 1"},
    {"", "Squeeze", 13, 25, claim_axes, translate_squeeze, OP_SHAPE_KEYED, 0, AXES_INPUT,
     "checks the squeezed dims are 1; " HOST_READ_NOTE("the axes input")},
    {"", "Unsqueeze", 1, 10, claim_axes, translate_unsqueeze, OP_SHAPELESS, 0, AXES_NONNEG_ATTR,
     "axes attribute; negative axes declined (opset 11+)"},
    {"", "Unsqueeze", 11, 12, claim_axes, translate_unsqueeze, OP_SHAPELESS, 0, AXES_ATTR,
     "axes attribute"},
    {"", "Unsqueeze", 13, 25, claim_axes, translate_unsqueeze, OP_SHAPE_KEYED, 0, AXES_INPUT,
     HOST_READ_NOTE("the axes input")},
    {"", "Flatten", 1, 10, claim_flatten, translate_flatten, OP_SHAPELESS, 0, AXES_NONNEG_ATTR,
     "negative axis declined (opset 11+)"},
    {"", "Flatten", 11, 25, claim_flatten, translate_flatten, OP_SHAPELESS, 0, AXES_ATTR, NULL},
    {"", "Concat", 4, 10, claim_concat, translate_concat, OP_SHAPELESS, 0, AXES_NONNEG_ATTR,
     "negative axis declined (opset 11+); inputs must share a dtype"},
    {"", "Concat", 11, 13, claim_concat, translate_concat, OP_SHAPELESS, 0, AXES_ATTR,
     "inputs must share a dtype"},
    {"", "Expand", 8, 13, claim_expand, translate_expand, OP_SHAPE_KEYED, 0, 0,
     "bidirectional broadcast; " HOST_READ_NOTE("the shape input")},
    {"", "Shape", 1, 14, NULL, translate_shape, OP_SHAPE_KEYED, 0, 0,
     "int64 dims of the concrete input shape"},
    {"", "Shape", 15, 25, NULL, translate_shape, OP_SHAPE_KEYED, 0, 1,
     "start/end clamped to [0, rank]; int64 dims of the concrete input shape"},
    {"", "Identity", 1, 25, NULL, translate_identity, OP_SHAPELESS, 0, 0,
     "tensors only (sequences and optionals are declined)"},
    {"", "Cast", 6, 25, claim_cast, translate_cast, OP_SHAPELESS, 0, 0,
     "float->int truncates toward zero, float->bool is nonzero; float8/int4/string/float64 "
     "declined; saturate and round_mode (float8 only) ignored"},
    OP_ROWS_END,
};
