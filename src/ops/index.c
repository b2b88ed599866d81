/*
 * Indexing operators: Slice and Gather. Slice follows ONNX's clamping rules exactly (negative
 * starts/ends count from the back, then clamp to [0, dim] for positive steps and to
 * [0, dim-1] / [-1, dim-1] for negative ones, so INT64_MAX/INT64_MIN mean "to the end"), computes
 * each axis' length itself and hands MLX's slice arguments it cannot reinterpret (MLX reads a
 * negative stop as counting from the back, so "before index 0" is passed as -(dim+1)). Opsets
 * 1..9 take starts/ends/axes attributes; 10..13 take them (and steps) as inputs, read on the host.
 * Gather wraps negative indices, clamps them before the take so no read can leave the array, and
 * records the range condition as a run-time check: an out-of-range index fails the run naming the
 * node instead of reading out of bounds.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdlib.h>

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
  mx_array lo, hi, zero, last, ge, lt, ok, neg, shifted, wrapped, safe;
  TR_TRY(mx_scalar_int(t->mx, &lo, -(int64_t)dim, it));
  TR_TRY(mx_scalar_int(t->mx, &hi, dim, it));
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, it));
  TR_TRY(mx_scalar_int(t->mx, &last, dim - 1, it));
  TR_TRY(mx_binary(t->mx, &ge, MX_GREATER_EQUAL, idx, lo));
  TR_TRY(mx_binary(t->mx, &lt, MX_LESS, idx, hi));
  TR_TRY(mx_binary(t->mx, &ok, MX_LOGICAL_AND, ge, lt));
  /* Reduced to a scalar here: tr_check_that's own reduction passes no axes, which MLX reads as
   * "reduce none", and the check would then hold one flag per index. */
  int all_axes[MX_MAX_RANK], nd = mx_ndim(ok);
  for (int i = 0; i < nd; i++) all_axes[i] = i;
  if (nd > 0) TR_TRY(mx_reduce(t->mx, &ok, MX_ALL, ok, all_axes, nd, false));
  TR_TRY(tr_check_that(t, ok, "index out of range: indices must lie in [%d, %d) for axis %d",
                       -dim, dim, axis));
  TR_TRY(mx_binary(t->mx, &neg, MX_LESS, idx, zero));
  TR_TRY(mx_binary(t->mx, &shifted, MX_ADD, idx, hi));
  TR_TRY(mx_where(t->mx, &wrapped, neg, shifted, idx));
  TR_TRY(mx_clip(t->mx, &safe, wrapped, zero, last));
  TR_TRY(mx_take(t->mx, &y, x, safe, axis));
  return tr_out(t, 0, y);
}

const op_row ops_index_rows[] = {
    {"", "Slice", 1, 9, claim_slice, translate_slice, OP_SHAPE_KEYED, 0, SLICE_ATTRS,
     "starts/ends/axes attributes, clamped as in ONNX"},
    {"", "Slice", 10, 13, claim_slice, translate_slice, OP_SHAPE_KEYED, 0, SLICE_INPUTS,
     "negative steps slice backward; starts/ends/axes/steps are read on the host: free when "
     "constant; computed ones make the group eager for that read"},
    {"", "Gather", 1, 13, claim_gather, translate_gather, OP_SHAPE_KEYED, 0, 0,
     "negative indices wrap; an out-of-range index fails the run, naming the node"},
    OP_ROWS_END,
};
