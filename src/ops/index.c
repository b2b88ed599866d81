/*
 * Indexing operators: Slice, Gather, GatherElements, GatherND, ScatterElements (and its old name
 * Scatter), ScatterND and OneHot (Compress, NonZero and Unique are in value_shaped.c). Slice
 * follows ONNX's clamping rules exactly (negative starts/ends count from the back, then clamp to
 * [0, dim] for positive steps and to [0, dim-1] / [-1, dim-1] for negative ones, so
 * INT64_MAX/INT64_MIN mean "to the end"), computes each axis' length itself and hands MLX's slice
 * arguments it cannot reinterpret (MLX reads a negative stop as counting from the back, so "before
 * index 0" is passed as -(dim+1)). Opsets 1..9 take starts/ends/axes attributes; 10..13 take them
 * (and steps) as inputs, read on the host. The gathers and scatters share checked_index: negative
 * indices wrap, every index is clamped before MLX's gather/scatter so no read or write can leave
 * the array, and the range condition is a run-time check, so an out-of-range index fails the run
 * naming the node. Scatter reductions follow their opsets (none from 11, add/mul from 16, max/min
 * from 18); with 'none', which of several updates to one slot lands is unspecified (ONNX leaves it
 * undefined). Every row takes float64 on the CPU device (OP_F64): the data is only moved, selected
 * or compared, scatter reductions apply the updates one by one in float64 as ONNX Runtime does, and
 * float64 indices are compared as float64 (never narrowed to float32).
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every MLX element type, float64 included (claimed on the CPU device only). */
#define ANY_F64 (OP_ALL | OP_F64)

enum { SLICE_ATTRS = 0, SLICE_INPUTS = 1 };

/* --- Slice ------------------------------------------------------------------------------- */
/* Declines a constant int input with more entries than ranks MLX holds or, for steps, a 0. */
static bool slice_input_ok(const ir_graph *g, const ir_node *n, int i, const char *what,
                           op_why why) {
  const ir_value *v = ir_input(g, n, i);
  if (!v || !v->is_constant || v->const_bytes == 0) return true;
  int64_t *vals;
  size_t count;
  if (!ir_const_ints(v, &vals, &count))
    return op_decline(why, "%s must be an int32/int64 tensor", what);
  bool zero = false;
  for (size_t k = 0; i == 4 && k < count; k++) zero = zero || vals[k] == 0;
  free(vals);
  if (count > MX_MAX_RANK)
    return op_decline(why, "%s has %zu entries; at most %d axes can be sliced", what, count,
                      MX_MAX_RANK);
  if (zero) return op_decline(why, "steps holds 0; every step must be nonzero");
  return true;
}

static bool claim_slice(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  if (r->code == SLICE_INPUTS)
    return slice_input_ok(g, n, 1, "starts", why) && slice_input_ok(g, n, 2, "ends", why) &&
           slice_input_ok(g, n, 3, "axes", why) && slice_input_ok(g, n, 4, "steps", why);
  const ir_attr *s = ir_find_attr(n, "starts"), *e = ir_find_attr(n, "ends"),
                *a = ir_find_attr(n, "axes");
  if (!s || !e || s->type != IR_ATTR_INTS || e->type != IR_ATTR_INTS)
    return op_decline(why, "the starts and ends attributes are required");
  if (s->count != e->count || (a && a->count != s->count))
    return op_decline(why, "starts, ends and axes must have the same length");
  if (s->count > MX_MAX_RANK)
    return op_decline(why, "%zu axes sliced; at most %d are supported", s->count, MX_MAX_RANK);
  return true;
}

/* Copies an ints attribute; *present is false when the node lacks it. */
static int attr_ints(tr_ctx *t, const ir_node *n, const char *name, int64_t *vals,
                     size_t *count, bool *present) {
  const ir_attr *a = ir_find_attr(n, name);
  *count = 0;
  *present = a && a->type == IR_ATTR_INTS;
  if (!*present) return MX_OK;
  if (a->count > MX_MAX_RANK)
    return tr_fail(t, "%s has %zu entries; at most %d are supported", name, a->count,
                   MX_MAX_RANK);
  for (size_t k = 0; k < a->count; k++) vals[k] = a->ints[k];
  *count = a->count;
  return MX_OK;
}

/* Reads optional input i on the host; *present is false when the node omits it. */
static int input_ints(tr_ctx *t, int i, int64_t *vals, size_t *count, bool *present) {
  *count = 0;
  *present = tr_in(t, i) != NULL;
  return *present ? tr_host_ints(t, i, vals, MX_MAX_RANK, count) : MX_OK;
}

/* One axis of ONNX's Slice: normalises and clamps start/end for the step's direction and
 * returns the element count plus MLX slice arguments that select exactly those elements.
 * Like ONNX Runtime (and unlike the letter of the spec, which clamps it to dim-1), an end of
 * INT64_MAX or INT32_MAX with a negative step means "through index 0", so a node gives the same
 * answer whichever provider runs it. */
static void slice_axis(int64_t dim, int64_t s, int64_t e, int64_t step, int *start, int *stop,
                       int *stride, int *count) {
  if (step > 0 && step > dim) step = dim > 0 ? dim : 1; /* one element either way, and MLX's */
  if (step < 0 && step < -dim) step = dim > 0 ? -dim : -1; /* int32 length math stays in range */
  if (step < 0 && (e == INT64_MAX || e == INT32_MAX)) e = -1;
  else if (e < 0) e += dim;
  if (s < 0) s += dim;
  int64_t len = 0;
  if (dim > 0 && step > 0) {
    s = s < 0 ? 0 : s > dim ? dim : s;
    e = e < 0 ? 0 : e > dim ? dim : e;
    len = e > s ? (e - s + step - 1) / step : 0;
  } else if (dim > 0) {
    s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    len = s > e ? (s - e - step - 1) / -step : 0;
  }
  *count = (int)len;
  if (len == 0) {
    *start = *stop = 0;
    *stride = 1;
  } else {
    *start = (int)s;
    *stop = step < 0 && e < 0 ? (int)-(dim + 1) : (int)e; /* MLX adds dim to negative stops */
    *stride = (int)step;
  }
}

static int translate_slice(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int rank = mx_ndim(x);
  int64_t starts[MX_MAX_RANK], ends[MX_MAX_RANK], axes[MX_MAX_RANK], steps[MX_MAX_RANK];
  size_t ns, ne, na, nst = 0;
  bool has_s, has_e, has_axes, has_steps = false;
  if (r->code == SLICE_ATTRS) {
    TR_TRY(attr_ints(t, n, "starts", starts, &ns, &has_s));
    TR_TRY(attr_ints(t, n, "ends", ends, &ne, &has_e));
    TR_TRY(attr_ints(t, n, "axes", axes, &na, &has_axes));
  } else {
    TR_TRY(input_ints(t, 1, starts, &ns, &has_s));
    TR_TRY(input_ints(t, 2, ends, &ne, &has_e));
    TR_TRY(input_ints(t, 3, axes, &na, &has_axes));
    TR_TRY(input_ints(t, 4, steps, &nst, &has_steps));
  }
  if (!has_s || !has_e) return tr_fail(t, "starts and ends are required");
  if (ne != ns || (has_axes && na != ns) || (has_steps && nst != ns))
    return tr_fail(t, "starts, ends, axes and steps must have the same length");
  int start[MX_MAX_RANK], stop[MX_MAX_RANK], stride[MX_MAX_RANK], want[MX_MAX_RANK];
  bool seen[MX_MAX_RANK] = {0};
  for (int i = 0; i < rank; i++) {
    start[i] = 0;
    stop[i] = want[i] = mx_dim(x, i);
    stride[i] = 1;
  }
  for (size_t k = 0; k < ns; k++) {
    int ax;
    TR_TRY(tr_axis(t, has_axes ? axes[k] : (int64_t)k, rank, &ax));
    if (seen[ax]) return tr_fail(t, "axis %d is sliced twice", ax);
    seen[ax] = true;
    int64_t step = has_steps ? steps[k] : 1;
    if (step == 0) return tr_fail(t, "steps[%zu] is 0; every step must be nonzero", k);
    slice_axis(mx_dim(x, ax), starts[k], ends[k], step, &start[ax], &stop[ax], &stride[ax],
               &want[ax]);
  }
  TR_TRY(mx_slice(t->mx, &y, x, start, stop, stride, rank));
  for (int i = 0; i < rank; i++) /* guards against MLX changing its slice conventions */
    if (mx_dim(y, i) != want[i])
      return tr_fail(t, "MLX slice gave %d elements on axis %d where ONNX wants %d",
                     mx_dim(y, i), i, want[i]);
  return tr_out(t, 0, y);
}

/* --- index checks shared by the gathers and scatters ------------------------------------- */
/* Wraps indices from [-dim, dim) into [0, dim), records that range as a run-time check with
 * `message` (an index outside it fails the run, naming the node) and clamps, so the read or write
 * that follows never leaves the axis. dim is a scalar in idx's dtype or, for the ND ops, one
 * entry per index component (it broadcasts along idx's last axis); every dim must be positive. */
static int checked_index(tr_ctx *t, mx_array idx, mx_array dim, const char *message,
                         mx_array *out) {
  mx_dtype it = mx_dtype_of(idx);
  mx_array zero, one, lo, last, ge, lt, ok, neg, shifted, wrapped;
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, it));
  TR_TRY(mx_scalar_int(t->mx, &one, 1, it));
  TR_TRY(mx_unary(t->mx, &lo, MX_NEG, dim));
  TR_TRY(mx_binary(t->mx, &last, MX_SUBTRACT, dim, one));
  TR_TRY(mx_binary(t->mx, &ge, MX_GREATER_EQUAL, idx, lo));
  TR_TRY(mx_binary(t->mx, &lt, MX_LESS, idx, dim));
  TR_TRY(mx_binary(t->mx, &ok, MX_LOGICAL_AND, ge, lt));
  /* Reduced to a scalar here, so an empty index array needs no reshape in the check. */
  int all_axes[MX_MAX_RANK], nd = mx_ndim(ok);
  for (int i = 0; i < nd; i++) all_axes[i] = i;
  if (nd > 0) TR_TRY(mx_reduce(t->mx, &ok, MX_ALL, ok, all_axes, nd, false));
  TR_TRY(tr_check_that(t, ok, "%s", message));
  TR_TRY(mx_binary(t->mx, &neg, MX_LESS, idx, zero));
  TR_TRY(mx_binary(t->mx, &shifted, MX_ADD, idx, dim));
  TR_TRY(mx_where(t->mx, &wrapped, neg, shifted, idx));
  return mx_clip(t->mx, out, wrapped, zero, last);
}

/* Declines an output whose known rank exceeds what MLX arrays hold. */
static bool rank_ok(const ir_value *y, op_why why) {
  if (y && y->rank > MX_MAX_RANK)
    return op_decline(why, "the output has rank %d; MLX arrays hold at most %d dimensions",
                      y->rank, MX_MAX_RANK);
  return true;
}

/* --- Gather ------------------------------------------------------------------------------ */
static bool claim_gather(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *idx = ir_input(g, n, 1), *y = ir_output(g, n, 0);
  int64_t axis = ir_attr_int(n, "axis", 0);
  if (!idx || (idx->elem_type != IR_INT32 && idx->elem_type != IR_INT64))
    return op_decline(why, "indices must be int32 or int64");
  if (x->rank == 0) return op_decline(why, "data is a scalar; Gather needs rank >= 1");
  if (x->rank > 0 && (axis < -x->rank || axis >= x->rank))
    return op_decline(why, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
  if (y && y->rank > MX_MAX_RANK)
    return op_decline(why, "the output has rank %d; MLX arrays hold at most %d dimensions",
                      y->rank, MX_MAX_RANK);
  return true;
}

/* Indices in [-dim, dim) wrap; the rest fail the run (checked with the outputs) after being
 * clamped, so the take itself never reads outside the axis. */
static int translate_gather(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), idx = tr_in(t, 1), y;
  int rank = mx_ndim(x), axis;
  if (rank < 1) return tr_fail(t, "data is a scalar; Gather needs rank >= 1");
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", 0), rank, &axis));
  mx_dtype it = mx_dtype_of(idx);
  if (it != MX_INT32 && it != MX_INT64) return tr_fail(t, "indices must be int32 or int64");
  int dim = mx_dim(x, axis);
  if (dim == 0) {
    if (mx_size(idx) > 0)
      return tr_fail(t, "index out of range: axis %d of the data is empty", axis);
    TR_TRY(mx_take(t->mx, &y, x, idx, axis));
    return tr_out(t, 0, y);
  }
  mx_array hi, safe;
  char msg[96];
  snprintf(msg, sizeof msg, "index out of range: indices must lie in [%d, %d) for axis %d", -dim,
           dim, axis);
  TR_TRY(mx_scalar_int(t->mx, &hi, dim, it));
  TR_TRY(checked_index(t, idx, hi, msg, &safe));
  TR_TRY(mx_take(t->mx, &y, x, safe, axis));
  return tr_out(t, 0, y);
}

/* --- shared index helpers ---------------------------------------------------------------- */
static bool int_indices(const ir_value *v) {
  return v && (v->elem_type == IR_INT32 || v->elem_type == IR_INT64);
}

/* An arange over [0, n) shaped to broadcast along `axis` of a rank-`rank` array. */
static int axis_positions(tr_ctx *t, int n, int axis, int rank, mx_dtype dtype, mx_array *out) {
  int shape[MX_MAX_RANK];
  for (int i = 0; i < rank; i++) shape[i] = i == axis ? n : 1;
  TR_TRY(mx_arange(t->mx, out, 0, n, 1, dtype));
  return mx_reshape(t->mx, out, *out, shape, rank);
}

/* --- GatherElements ---------------------------------------------------------------------- */
static bool claim_gather_elements(const ir_graph *g, const ir_node *n, const op_row *r,
                                  op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *idx = ir_input(g, n, 1);
  int64_t axis = ir_attr_int(n, "axis", 0);
  if (!int_indices(idx)) return op_decline(why, "indices must be int32 or int64");
  if (x->rank == 0) return op_decline(why, "data is a scalar; GatherElements needs rank >= 1");
  if (x->rank > 0 && (axis < -x->rank || axis >= x->rank))
    return op_decline(why, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
  if (x->rank >= 0 && idx->rank >= 0 && x->rank != idx->rank)
    return op_decline(why, "data has rank %d but indices rank %d; they must match", x->rank,
                      idx->rank);
  return true;
}

/* out[i][j][k] = data[i][idx[i][j][k]][k] (axis 1): indices may be shorter than the data on
 * every axis, longer only on the gathered one; the data is cut to their extent elsewhere. */
static int translate_gather_elements(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), idx = tr_in(t, 1), dim, y;
  int rank = mx_ndim(x), axis;
  if (rank < 1) return tr_fail(t, "data is a scalar; GatherElements needs rank >= 1");
  if (mx_ndim(idx) != rank)
    return tr_fail(t, "data has rank %d but indices rank %d; they must match", rank,
                   mx_ndim(idx));
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", 0), rank, &axis));
  int start[MX_MAX_RANK], stop[MX_MAX_RANK], stride[MX_MAX_RANK];
  bool cut = false;
  for (int i = 0; i < rank; i++) {
    start[i] = 0;
    stride[i] = 1;
    stop[i] = mx_dim(x, i);
    if (i == axis) continue;
    if (mx_dim(idx, i) > mx_dim(x, i))
      return tr_fail(t, "indices dim %d is %d, larger than the data's %d", i, mx_dim(idx, i),
                     mx_dim(x, i));
    cut = cut || mx_dim(idx, i) < mx_dim(x, i);
    stop[i] = mx_dim(idx, i);
  }
  if (mx_size(idx) == 0) {
    mx_array zero;
    TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(x)));
    TR_TRY(mx_full(t->mx, &y, mx_shape(idx), rank, zero));
    return tr_out(t, 0, y);
  }
  if (mx_dim(x, axis) == 0)
    return tr_fail(t, "index out of range: axis %d of the data is empty", axis);
  if (cut) TR_TRY(mx_slice(t->mx, &x, x, start, stop, stride, rank));
  TR_TRY(mx_scalar_int(t->mx, &dim, mx_dim(x, axis), mx_dtype_of(idx)));
  char msg[96];
  snprintf(msg, sizeof msg, "index out of range: indices must lie in [%d, %d) for axis %d",
           -mx_dim(x, axis), mx_dim(x, axis), axis);
  TR_TRY(checked_index(t, idx, dim, msg, &idx));
  TR_TRY(mx_take_along_axis(t->mx, &y, x, idx, axis));
  return tr_out(t, 0, y);
}

/* --- GatherND ---------------------------------------------------------------------------- */
static bool claim_gather_nd(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *idx = ir_input(g, n, 1);
  int64_t b = ir_attr_int(n, "batch_dims", 0);
  if (!idx || idx->elem_type != IR_INT64) return op_decline(why, "indices must be int64");
  if (b < 0) return op_decline(why, "batch_dims is %lld; it must be >= 0", (long long)b);
  if ((x->rank >= 0 && b >= x->rank) || (idx->rank >= 0 && b >= idx->rank))
    return op_decline(why, "batch_dims %lld must be less than both ranks", (long long)b);
  if (x->rank >= 0 && idx->rank > 0 && idx->dims[idx->rank - 1] > x->rank - b)
    return op_decline(why, "indices' last dim %lld exceeds data rank %d minus batch_dims",
                      (long long)idx->dims[idx->rank - 1], x->rank);
  return rank_ok(ir_output(g, n, 0), why);
}

/* Splits (..., k) indices into k index arrays over axes b..b+k-1 (each wrapped and checked
 * against its own dim, which broadcasts along the last axis), adds arange index arrays for the
 * b batch axes, and gathers whole slices of the remaining axes. */
static int translate_gather_nd(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), idx = tr_in(t, 1), y;
  int rank = mx_ndim(x), q = mx_ndim(idx), b = (int)ir_attr_int(n, "batch_dims", 0);
  if (q < 1 || b < 0 || b >= q || b >= rank)
    return tr_fail(t, "batch_dims %d must be less than the data rank %d and indices rank %d", b,
                   rank, q);
  int k = mx_dim(idx, q - 1);
  if (k > rank - b)
    return tr_fail(t, "indices' last dim %d exceeds data rank %d minus batch_dims %d", k, rank, b);
  for (int i = 0; i < b; i++)
    if (mx_dim(idx, i) != mx_dim(x, i))
      return tr_fail(t, "batch dim %d is %d in the indices but %d in the data", i,
                     mx_dim(idx, i), mx_dim(x, i));
  int out_shape[2 * MX_MAX_RANK], out_rank = 0, slice[MX_MAX_RANK], axes[MX_MAX_RANK];
  size_t tuples = 1;
  for (int i = 0; i < q - 1; i++) {
    out_shape[out_rank++] = mx_dim(idx, i);
    tuples *= (size_t)mx_dim(idx, i);
  }
  for (int i = b + k; i < rank; i++) out_shape[out_rank++] = mx_dim(x, i);
  if (out_rank > MX_MAX_RANK)
    return tr_fail(t, "the output would have rank %d; MLX holds at most %d", out_rank,
                   MX_MAX_RANK);
  if (tuples == 0 || mx_size(x) == 0) {
    for (int i = 0; i < b + k && tuples; i++)
      if (mx_dim(x, i) == 0)
        return tr_fail(t, "index out of range: axis %d of the data is empty", i);
    mx_array zero;
    TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(x)));
    TR_TRY(mx_full(t->mx, &y, out_shape, out_rank, zero));
    return tr_out(t, 0, y);
  }
  mx_array parts[MX_MAX_RANK];
  if (k > 0) {
    int64_t dims[MX_MAX_RANK];
    mx_array dim;
    for (int j = 0; j < k; j++) dims[j] = mx_dim(x, b + j);
    TR_TRY(tr_ints_array(t, dims, k, mx_dtype_of(idx), &dim));
    TR_TRY(checked_index(t, idx, dim, "index out of range: each index must lie in [-dim, dim) "
                         "of the axis it addresses", &idx));
  }
  int start[MX_MAX_RANK], stop[MX_MAX_RANK], stride[MX_MAX_RANK], last = q - 1;
  for (int i = 0; i < q; i++) {
    start[i] = 0;
    stop[i] = mx_dim(idx, i);
    stride[i] = 1;
  }
  for (int i = 0; i < b; i++) {
    TR_TRY(axis_positions(t, mx_dim(x, i), i, q - 1, mx_dtype_of(idx), &parts[i]));
  }
  for (int j = 0; j < k; j++) {
    start[last] = j;
    stop[last] = j + 1;
    TR_TRY(mx_slice(t->mx, &parts[b + j], idx, start, stop, stride, q));
    TR_TRY(mx_squeeze(t->mx, &parts[b + j], parts[b + j], &last, 1));
  }
  for (int i = 0; i < rank; i++) {
    axes[i] = i;
    slice[i] = i < b + k ? 1 : mx_dim(x, i);
  }
  if (b + k == 0) { /* no index tuple entries: each tuple selects the whole data */
    int lead[MX_MAX_RANK], full[2 * MX_MAX_RANK];
    for (int i = 0; i < q - 1; i++) lead[i] = i;
    for (int i = 0; i < out_rank; i++) full[i] = out_shape[i];
    if (q > 1) TR_TRY(mx_expand_dims(t->mx, &x, x, lead, q - 1));
    TR_TRY(mx_broadcast_to(t->mx, &y, x, full, out_rank));
    return tr_out(t, 0, y);
  }
  TR_TRY(mx_gather(t->mx, &y, x, parts, b + k, axes, slice));
  TR_TRY(mx_reshape(t->mx, &y, y, out_shape, out_rank));
  return tr_out(t, 0, y);
}

/* --- ScatterElements and ScatterND ------------------------------------------------------- */
/* Which reductions a row's opset defines (the row's code). */
enum { REDUCE_NONE_ONLY = 0, REDUCE_ADD_MUL = 1, REDUCE_ALL = 2 };

static int scatter_reduction(const ir_node *n, int code, mx_scatter_op *op) {
  const char *s = ir_attr_string(n, "reduction", "none");
  static const struct {
    const char *name;
    mx_scatter_op op;
    int since;
  } known[] = {{"none", MX_SCATTER_SET, REDUCE_NONE_ONLY}, {"add", MX_SCATTER_ADD, REDUCE_ADD_MUL},
               {"mul", MX_SCATTER_PROD, REDUCE_ADD_MUL},  {"max", MX_SCATTER_MAX, REDUCE_ALL},
               {"min", MX_SCATTER_MIN, REDUCE_ALL}};
  for (size_t i = 0; i < sizeof known / sizeof *known; i++)
    if (strcmp(s, known[i].name) == 0 && code >= known[i].since) {
      *op = known[i].op;
      return 0;
    }
  return -1;
}

static bool claim_scatter_common(const ir_graph *g, const ir_node *n, const op_row *r,
                                 op_why why) {
  const ir_value *x = ir_input(g, n, 0), *u = ir_input(g, n, 2);
  mx_scatter_op op;
  if (scatter_reduction(n, r->code, &op) != 0)
    return op_decline(why, "reduction '%s' is not defined at opset %d (add/mul from 16, max/min "
                           "from 18)",
                      ir_attr_string(n, "reduction", "none"), n->since_version);
  if (u && u->elem_type != x->elem_type)
    return op_decline(why, "updates are %s but data is %s", ir_elem_name(u->elem_type),
                      ir_elem_name(x->elem_type));
  if (x->rank >= MX_MAX_RANK)
    return op_decline(why, "data has rank %d; at most %d is supported", x->rank, MX_MAX_RANK - 1);
  return true;
}

/* Bool has no arithmetic: add is logical or (max), mul logical and (min). */
static mx_scatter_op bool_safe(mx_scatter_op op, mx_dtype dt) {
  if (dt != MX_BOOL) return op;
  return op == MX_SCATTER_ADD ? MX_SCATTER_MAX : op == MX_SCATTER_PROD ? MX_SCATTER_MIN : op;
}

static bool claim_scatter_elements(const ir_graph *g, const ir_node *n, const op_row *r,
                                   op_why why) {
  const ir_value *x = ir_input(g, n, 0), *idx = ir_input(g, n, 1);
  int64_t axis = ir_attr_int(n, "axis", 0);
  if (!int_indices(idx)) return op_decline(why, "indices must be int32 or int64");
  if (x->rank == 0) return op_decline(why, "data is a scalar; ScatterElements needs rank >= 1");
  if (x->rank > 0 && (axis < -x->rank || axis >= x->rank))
    return op_decline(why, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
  return claim_scatter_common(g, n, r, why);
}

/* Every update lands at its own position except along axis, where the (wrapped, checked,
 * clamped) index says: one MLX scatter over all axes with flattened coordinates. */
static int translate_scatter_elements(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), idx = tr_in(t, 1), upd = tr_in(t, 2), dim, y;
  int rank = mx_ndim(x), axis, flat = -1;
  mx_scatter_op op;
  if (scatter_reduction(n, r->code, &op) != 0) return tr_fail(t, "unknown reduction");
  if (rank < 1) return tr_fail(t, "data is a scalar; ScatterElements needs rank >= 1");
  if (rank >= MX_MAX_RANK) return tr_fail(t, "data rank %d is too large", rank);
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", 0), rank, &axis));
  if (mx_ndim(idx) != rank || mx_ndim(upd) != rank)
    return tr_fail(t, "data, indices and updates must share a rank (%d, %d, %d)", rank,
                   mx_ndim(idx), mx_ndim(upd));
  for (int i = 0; i < rank; i++) {
    if (mx_dim(upd, i) != mx_dim(idx, i))
      return tr_fail(t, "updates and indices differ on dim %d (%d vs %d)", i, mx_dim(upd, i),
                     mx_dim(idx, i));
    if (i != axis && mx_dim(idx, i) > mx_dim(x, i))
      return tr_fail(t, "indices dim %d is %d, larger than the data's %d", i, mx_dim(idx, i),
                     mx_dim(x, i));
  }
  if (mx_size(idx) == 0) return tr_out(t, 0, x);
  if (mx_dim(x, axis) == 0)
    return tr_fail(t, "index out of range: axis %d of the data is empty", axis);
  mx_dtype it = mx_dtype_of(idx);
  char msg[96];
  snprintf(msg, sizeof msg, "index out of range: indices must lie in [%d, %d) for axis %d",
           -mx_dim(x, axis), mx_dim(x, axis), axis);
  TR_TRY(mx_scalar_int(t->mx, &dim, mx_dim(x, axis), it));
  TR_TRY(checked_index(t, idx, dim, msg, &idx));
  mx_array coords[MX_MAX_RANK];
  int axes[MX_MAX_RANK], ushape[MX_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    axes[i] = i;
    if (i == axis) coords[i] = idx;
    else TR_TRY(axis_positions(t, mx_dim(idx, i), i, rank, it, &coords[i]));
    TR_TRY(mx_broadcast_to(t->mx, &coords[i], coords[i], mx_shape(idx), rank));
    TR_TRY(mx_reshape(t->mx, &coords[i], coords[i], &flat, 1));
  }
  ushape[0] = (int)mx_size(upd);
  for (int i = 0; i < rank; i++) ushape[i + 1] = 1;
  TR_TRY(mx_reshape(t->mx, &upd, upd, ushape, rank + 1));
  TR_TRY(mx_scatter(t->mx, &y, bool_safe(op, mx_dtype_of(x)), x, coords, rank, upd, axes));
  return tr_out(t, 0, y);
}

static bool claim_scatter_nd(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *idx = ir_input(g, n, 1);
  if (!idx || idx->elem_type != IR_INT64) return op_decline(why, "indices must be int64");
  if (idx->rank == 0) return op_decline(why, "indices is a scalar; ScatterND needs rank >= 1");
  if (idx->rank > 0 && idx->dims[idx->rank - 1] == 0)
    return op_decline(why, "indices' last dim is 0 (whole-tensor updates are not translated)");
  return claim_scatter_common(g, n, r, why);
}

/* (..., k) indices address slices of the first k axes: flattened to M tuples, each component
 * wrapped and checked against its axis, the updates reshaped to (M, 1 x k, slice dims). */
static int translate_scatter_nd(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), idx = tr_in(t, 1), upd = tr_in(t, 2), dim, y;
  int rank = mx_ndim(x), q = mx_ndim(idx);
  mx_scatter_op op;
  if (scatter_reduction(n, r->code, &op) != 0) return tr_fail(t, "unknown reduction");
  if (q < 1) return tr_fail(t, "indices is a scalar; ScatterND needs rank >= 1");
  if (rank >= MX_MAX_RANK) return tr_fail(t, "data rank %d is too large", rank);
  int k = mx_dim(idx, q - 1);
  if (k < 1 || k > rank)
    return tr_fail(t, "indices' last dim is %d; it must lie in [1, %d]", k, rank);
  bool same = mx_ndim(upd) == q - 1 + rank - k;
  for (int i = 0; same && i < q - 1; i++) same = mx_dim(upd, i) == mx_dim(idx, i);
  for (int i = k; same && i < rank; i++) same = mx_dim(upd, q - 1 + i - k) == mx_dim(x, i);
  if (!same)
    return tr_fail(t, "updates must have shape indices.shape[:-1] + data.shape[%d:]", k);
  size_t tuples = mx_size(idx) / (size_t)k;
  if (tuples == 0) return tr_out(t, 0, x);
  int64_t dims[MX_MAX_RANK];
  for (int j = 0; j < k; j++) {
    dims[j] = mx_dim(x, j);
    if (dims[j] == 0) return tr_fail(t, "index out of range: axis %d of the data is empty", j);
  }
  TR_TRY(tr_ints_array(t, dims, k, MX_INT64, &dim));
  TR_TRY(checked_index(t, idx, dim, "index out of range: each index must lie in [-dim, dim) "
                       "of the axis it addresses", &idx));
  /* Updates with a zero-size slice (data [1, 0], indices [[0]]) write nothing: the result is the
   * data, with the indices still checked as ORT does. MLX's scatter divides by the update
   * slice's size (ldiv(0, 0): SIGFPE) and must not see them. */
  if (mx_size(upd) == 0) return tr_out(t, 0, x);
  int m = (int)tuples, flat[2] = {m, k}, start[2] = {0, 0}, stop[2] = {m, 0}, stride[2] = {1, 1};
  int axes[MX_MAX_RANK], ushape[MX_MAX_RANK], one = 1;
  mx_array coords[MX_MAX_RANK];
  TR_TRY(mx_reshape(t->mx, &idx, idx, flat, 2));
  for (int j = 0; j < k; j++) {
    axes[j] = j;
    start[1] = j;
    stop[1] = j + 1;
    TR_TRY(mx_slice(t->mx, &coords[j], idx, start, stop, stride, 2));
    TR_TRY(mx_squeeze(t->mx, &coords[j], coords[j], &one, 1));
  }
  ushape[0] = m;
  for (int i = 0; i < rank; i++) ushape[i + 1] = i < k ? 1 : mx_dim(x, i);
  TR_TRY(mx_reshape(t->mx, &upd, upd, ushape, rank + 1));
  TR_TRY(mx_scatter(t->mx, &y, bool_safe(op, mx_dtype_of(x)), x, coords, k, upd, axes));
  return tr_out(t, 0, y);
}

/* --- OneHot ------------------------------------------------------------------------------ */
static bool claim_one_hot(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *idx = ir_input(g, n, 0), *depth = ir_input(g, n, 1);
  int64_t axis = ir_attr_int(n, "axis", -1);
  if (idx->rank >= 0 && (axis < -idx->rank - 1 || axis > idx->rank))
    return op_decline(why, "axis %lld is out of range for an output of rank %d", (long long)axis,
                      idx->rank + 1);
  if (idx->rank >= MX_MAX_RANK)
    return op_decline(why, "the output would have rank %d; MLX holds at most %d", idx->rank + 1,
                      MX_MAX_RANK);
  if (depth->elem_type == IR_BOOL) return op_decline(why, "depth must be numeric");
  return true;
}

/* Indices in [-depth, -1] wrap; any other value out of range, or a fractional float index,
 * gives an all-off row (ONNX Runtime compares values exactly). depth is read on the host and
 * truncated toward zero. */
static int translate_one_hot(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array idx = tr_in(t, 0), vals = tr_in(t, 2), on, off, zero, d, neg, shifted, pos, eq, y;
  double depth_value;
  TR_TRY(tr_host_scalar(t, 1, &depth_value));
  if (!(depth_value >= 1) || depth_value > INT32_MAX)
    return tr_fail(t, "depth is %g; it must be a positive count", depth_value);
  int depth = (int)depth_value, rank = mx_ndim(idx) + 1, axis;
  if (rank > MX_MAX_RANK) return tr_fail(t, "the output would have rank %d", rank);
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", -1), rank, &axis));
  if (mx_size(vals) != 2) return tr_fail(t, "values must hold [off, on], not %zu values",
                                         mx_size(vals));
  int flat = -1, s0 = 0, s1 = 1, s2 = 2, one = 1;
  TR_TRY(mx_reshape(t->mx, &vals, vals, &flat, 1));
  TR_TRY(mx_slice(t->mx, &off, vals, &s0, &s1, &one, 1));
  TR_TRY(mx_slice(t->mx, &on, vals, &s1, &s2, &one, 1));
  TR_TRY(mx_reshape(t->mx, &off, off, NULL, 0));
  TR_TRY(mx_reshape(t->mx, &on, on, NULL, 0));
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, MX_INT64));
  TR_TRY(mx_scalar_int(t->mx, &d, depth, MX_INT64));
  if (mx_dtype_is_float(mx_dtype_of(idx))) { /* a fractional index matches no position */
    mx_array f, whole, integral; /* float32 holds float16/bfloat16 exactly; float64 stays */
    TR_TRY(mx_astype(t->mx, &f, idx, mx_dtype_of(idx) == MX_FLOAT64 ? MX_FLOAT64 : MX_FLOAT32));
    TR_TRY(mx_unary(t->mx, &whole, MX_FLOOR, f));
    TR_TRY(mx_binary(t->mx, &integral, MX_EQUAL, whole, f));
    TR_TRY(mx_astype(t->mx, &idx, f, MX_INT64));
    TR_TRY(mx_where(t->mx, &idx, integral, idx, d));
  } else if (mx_dtype_of(idx) != MX_INT64) {
    TR_TRY(mx_astype(t->mx, &idx, idx, MX_INT64));
  }
  TR_TRY(mx_binary(t->mx, &neg, MX_LESS, idx, zero));
  TR_TRY(mx_binary(t->mx, &shifted, MX_ADD, idx, d));
  TR_TRY(mx_where(t->mx, &idx, neg, shifted, idx));
  TR_TRY(mx_expand_dims(t->mx, &idx, idx, &axis, 1));
  TR_TRY(axis_positions(t, depth, axis, rank, MX_INT64, &pos));
  TR_TRY(mx_binary(t->mx, &eq, MX_EQUAL, idx, pos));
  TR_TRY(mx_where(t->mx, &y, eq, on, off));
  return tr_out(t, 0, y);
}

const op_row ops_index_rows[] = {
    {"", "Slice", 1, 9, claim_slice, translate_slice, OP_SHAPE_KEYED, ANY_F64, SLICE_ATTRS,
     "starts/ends/axes attributes, clamped as in ONNX"},
    {"", "Slice", 10, 13, claim_slice, translate_slice, OP_SHAPE_KEYED, ANY_F64, SLICE_INPUTS,
     "negative steps slice backward; starts/ends/axes/steps are read on the host: free when "
     "constant; computed ones make the group eager for that read"},
    {"", "Gather", 1, 13, claim_gather, translate_gather, OP_SHAPE_KEYED, ANY_F64, 0,
     "negative indices wrap; an out-of-range index fails the run, naming the node"},
    {"", "GatherElements", 11, 25, claim_gather_elements, translate_gather_elements,
     OP_SHAPE_KEYED, ANY_F64, 0,
     "negative indices wrap; an out-of-range index fails the run, naming the node"},
    {"", "GatherND", 11, 11, claim_gather_nd, translate_gather_nd, OP_SHAPE_KEYED, ANY_F64, 0,
     "negative indices wrap; an out-of-range index fails the run, naming the node"},
    {"", "GatherND", 12, 25, claim_gather_nd, translate_gather_nd, OP_SHAPE_KEYED, ANY_F64, 0,
     "batch_dims; negative indices wrap; an out-of-range index fails the run, naming the node"},
    {"", "ScatterElements", 11, 15, claim_scatter_elements, translate_scatter_elements,
     OP_SHAPE_KEYED, ANY_F64, REDUCE_NONE_ONLY,
     "duplicate indices: which update lands is unspecified (ONNX Runtime: the last); an "
     "out-of-range index fails the run, naming the node"},
    {"", "ScatterElements", 16, 17, claim_scatter_elements, translate_scatter_elements,
     OP_SHAPE_KEYED, ANY_F64, REDUCE_ADD_MUL,
     "reduction none/add/mul (bool: or/and); duplicate indices with none: unspecified winner; "
     "an out-of-range index fails the run, naming the node"},
    {"", "ScatterElements", 18, 25, claim_scatter_elements, translate_scatter_elements,
     OP_SHAPE_KEYED, ANY_F64, REDUCE_ALL,
     "reduction none/add/mul/max/min (bool: add is or, mul is and); duplicate indices with none: "
     "unspecified winner; an out-of-range index fails the run, naming the node"},
    {"", "Scatter", 9, 10, claim_scatter_elements, translate_scatter_elements, OP_SHAPE_KEYED,
     ANY_F64, REDUCE_NONE_ONLY,
     "the deprecated name of ScatterElements without reduction; an out-of-range index fails the "
     "run, naming the node"},
    {"", "ScatterND", 11, 15, claim_scatter_nd, translate_scatter_nd, OP_SHAPE_KEYED, ANY_F64,
     REDUCE_NONE_ONLY,
     "duplicate indices: which update lands is unspecified; indices' last dim 0 declined; an "
     "out-of-range index fails the run, naming the node"},
    {"", "ScatterND", 16, 17, claim_scatter_nd, translate_scatter_nd, OP_SHAPE_KEYED, ANY_F64,
     REDUCE_ADD_MUL,
     "reduction none/add/mul (bool: or/and); duplicate indices with none: unspecified winner; "
     "an out-of-range index fails the run, naming the node"},
    {"", "ScatterND", 18, 25, claim_scatter_nd, translate_scatter_nd, OP_SHAPE_KEYED, ANY_F64,
     REDUCE_ALL,
     "reduction none/add/mul/max/min (bool: add is or, mul is and); duplicate indices with none: "
     "unspecified winner; an out-of-range index fails the run, naming the node"},
    {"", "OneHot", 9, 25, claim_one_hot, translate_one_hot, OP_SHAPE_KEYED, OP_NUMERIC | OP_F64,
     0,
     "negative indices wrap (opset 9 too, as in ONNX Runtime), others out of range give all-off; "
     "depth is read on the host: free when constant; a computed depth makes the group eager for "
     "that read"},
    OP_ROWS_END,
};
