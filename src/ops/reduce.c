/*
 * Reductions: ReduceSum, ReduceMean and ReduceMax. Axes come from the `axes` attribute in older
 * opsets (ReduceSum before 13, ReduceMean and ReduceMax before 18) and from an optional second
 * input after; missing or empty axes mean every axis, unless noop_with_empty_axes (input forms
 * only) makes the node an identity. keepdims defaults to 1. An axes input is claimed only when
 * it is a constant initializer: the translator reads it on the host, and a constant keeps the
 * node shapeless (a computed axes input is declined with that reason). ReduceSum of integers
 * stays integral; ReduceMean of integers divides the integral sum by the element count,
 * truncating toward zero as ONNX Runtime does; float16/bfloat16 sums and means accumulate in
 * float32. ReduceMax over an empty axis (ONNX: -inf or the type's minimum) is declined where the
 * static shape shows it.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdlib.h>

/* --- shared claim checks ----------------------------------------------------------------- */
/* Checks axes against the input's static rank and shape: in range, no repeats, and for
 * ReduceMax no reduced dimension known to be empty. */
static bool check_axes(const ir_graph *g, const ir_node *n, const op_row *r, const int64_t *axes,
                       size_t count, op_why why) {
  const ir_value *x = ir_input(g, n, 0);
  int rank = x ? x->rank : -1;
  if (rank < 0) return true;
  bool seen[MX_MAX_RANK] = {false};
  if (rank > MX_MAX_RANK)
    return op_decline(why, "%s input has rank %d; MLX holds at most %d", n->op_type, rank,
                      MX_MAX_RANK);
  for (size_t i = 0; i < count; i++) {
    if (axes[i] < -rank || axes[i] >= rank)
      return op_decline(why, "%s axis %lld is out of range for an input of rank %d", n->op_type,
                        (long long)axes[i], rank);
    int a = (int)(axes[i] < 0 ? axes[i] + rank : axes[i]);
    if (seen[a]) return op_decline(why, "%s axes name axis %d twice", n->op_type, a);
    seen[a] = true;
  }
  if (r->code == MX_MAX)
    for (int a = 0; a < rank; a++)
      if ((count == 0 || seen[a]) && x->dims[a] == 0)
        return op_decline(why, "ReduceMax over the empty axis %d (size 0) is not supported", a);
  return true;
}

/* --- shared translation ------------------------------------------------------------------ */
static int cast_to_output(tr_ctx *t, mx_array y) {
  mx_dtype want = tr_out_dtype(t, 0);
  if (mx_dtype_of(y) != want) TR_TRY(mx_astype(t->mx, &y, y, want));
  return tr_out(t, 0, y);
}

/* Integer mean: the integral sum divided by the element count, truncated toward zero. The count
 * is itself a sum (of ones shaped like x), which keeps the translation free of shape reads. */
static int int_mean(tr_ctx *t, mx_array x, const int *axes, int k, bool keep, mx_array *out) {
  mx_array s, ones, cnt;
  TR_TRY(mx_reduce(t->mx, &s, MX_SUM, x, axes, k, keep));
  mx_dtype dt = mx_dtype_of(s);
  TR_TRY(mx_binary(t->mx, &ones, MX_EQUAL, x, x));
  TR_TRY(mx_reduce(t->mx, &cnt, MX_SUM, ones, axes, k, keep));
  TR_TRY(mx_astype(t->mx, &cnt, cnt, dt));
  if (mx_dtype_is_unsigned_int(dt)) return mx_binary(t->mx, out, MX_FLOOR_DIVIDE, s, cnt);
  mx_array mag, sign;
  TR_TRY(mx_unary(t->mx, &mag, MX_ABS, s));
  TR_TRY(mx_binary(t->mx, &mag, MX_FLOOR_DIVIDE, mag, cnt));
  TR_TRY(mx_unary(t->mx, &sign, MX_SIGN, s));
  return mx_binary(t->mx, out, MX_MULTIPLY, mag, sign);
}

/* Reduces input 0 over the given ONNX axes (count 0: all axes, or none when noop). */
static int reduce(tr_ctx *t, const ir_node *n, const op_row *r, const int64_t *onnx_axes,
                  size_t count, bool noop) {
  mx_array x = tr_in(t, 0), y;
  int rank = mx_ndim(x), axes[MX_MAX_RANK], k = 0;
  if (count == 0 && noop) return cast_to_output(t, x);
  if (count > (size_t)rank) return tr_fail(t, "%zu axes for an input of rank %d", count, rank);
  if (count == 0)
    for (int i = 0; i < rank; i++) axes[k++] = i;
  for (size_t i = 0; i < count; i++) TR_TRY(tr_axis(t, onnx_axes[i], rank, &axes[k++]));
  bool keep = ir_attr_int(n, "keepdims", 1) != 0;
  mx_dtype dt = mx_dtype_of(x);
  mx_reduce_op op = (mx_reduce_op)r->code;
  if (op == MX_MEAN && !mx_dtype_is_float(dt)) {
    TR_TRY(int_mean(t, x, axes, k, keep, &y));
    return cast_to_output(t, y);
  }
  if ((op == MX_SUM || op == MX_MEAN) && (dt == MX_FLOAT16 || dt == MX_BFLOAT16))
    TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
  TR_TRY(mx_reduce(t->mx, &y, op, x, axes, k, keep));
  return cast_to_output(t, y);
}

/* --- axes as an attribute (ReduceSum < 13, ReduceMean and ReduceMax < 18) ----------------- */
static bool claim_reduce_attr(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_attr *a = ir_find_attr(n, "axes");
  return check_axes(g, n, r, a ? a->ints : NULL, a ? a->count : 0, why);
}

static int translate_reduce_attr(tr_ctx *t, const ir_node *n, const op_row *r) {
  const ir_attr *a = ir_find_attr(n, "axes");
  return reduce(t, n, r, a ? a->ints : NULL, a ? a->count : 0, false);
}

/* --- axes as an optional input (ReduceSum 13, ReduceMean and ReduceMax 18+) --------------- */
static bool claim_reduce_input(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  if (!ir_has_input(n, 1)) return check_axes(g, n, r, NULL, 0, why);
  const ir_value *v = ir_input(g, n, 1);
  if (!v->is_constant)
    return op_decline(why, "%s axes (input 1, '%s') must be a constant initializer; computed "
                      "axes are not supported", n->op_type, v->name);
  int64_t *axes = NULL;
  size_t count = 0;
  /* An empty constant has no data for ir_const_ints to read: zero axes. */
  if (ir_num_elements(v) != 0 && !ir_const_ints(v, &axes, &count))
    return op_decline(why, "%s axes ('%s') could not be read as int64 values", n->op_type,
                      v->name);
  bool noop = ir_attr_int(n, "noop_with_empty_axes", 0) != 0;
  bool ok = (count == 0 && noop) || check_axes(g, n, r, axes, count, why);
  free(axes);
  return ok;
}

static int translate_reduce_input(tr_ctx *t, const ir_node *n, const op_row *r) {
  int64_t axes[MX_MAX_RANK];
  size_t count = 0;
  if (tr_in(t, 1)) TR_TRY(tr_host_ints(t, 1, axes, MX_MAX_RANK, &count));
  return reduce(t, n, r, axes, count, ir_attr_int(n, "noop_with_empty_axes", 0) != 0);
}

#define SUM_TYPES (OP_FLOATS | OP_T(IR_INT32) | OP_T(IR_INT64) | OP_T(IR_UINT32) | OP_T(IR_UINT64))
#define MAX_TYPES (SUM_TYPES | OP_T(IR_INT8) | OP_T(IR_UINT8))
#define ATTR_ROW(name, lo, hi, op, types) \
  {"", name, lo, hi, claim_reduce_attr, translate_reduce_attr, OP_SHAPELESS, types, op, \
   "axes attribute"}
#define INPUT_ROW(name, lo, hi, op, types) \
  {"", name, lo, hi, claim_reduce_input, translate_reduce_input, OP_SHAPELESS, types, op, \
   "axes input must be a constant initializer (read once on the host); computed axes declined"}

const op_row ops_reduce_rows[] = {
    ATTR_ROW("ReduceSum", 1, 12, MX_SUM, SUM_TYPES),
    INPUT_ROW("ReduceSum", 13, 13, MX_SUM, SUM_TYPES),
    ATTR_ROW("ReduceMean", 1, 17, MX_MEAN, SUM_TYPES),
    INPUT_ROW("ReduceMean", 18, 18, MX_MEAN, SUM_TYPES),
    ATTR_ROW("ReduceMax", 1, 17, MX_MAX, MAX_TYPES),
    INPUT_ROW("ReduceMax", 18, 19, MX_MAX, MAX_TYPES),
    INPUT_ROW("ReduceMax", 20, 20, MX_MAX, MAX_TYPES | OP_T(IR_BOOL)),
    OP_ROWS_END,
};
