/*
 * Reductions, arg-reductions, scans and TopK. ReduceSum, ReduceMean, ReduceMax, ReduceMin,
 * ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare take their
 * axes from the `axes` attribute in older opsets (ReduceSum before 13, the others before 18) and
 * from an optional second input after; missing or empty axes mean every axis, unless
 * noop_with_empty_axes (input forms only) makes the node reduce over no axis, which still applies
 * the elementwise part (ReduceSumSquare squares, ReduceL1 takes |x|, ReduceLogSum the log) as
 * ONNX Runtime does. keepdims defaults to 1. An axes input is read on the host: free for a
 * constant initializer (validated at claim time); a computed one makes the group eager for that
 * read. Over an empty set the results are ONNX Runtime's identities: 0 for Sum, Mean, L1, L2 and
 * SumSquare, 1 for Prod, the lowest value (-inf) for Max, the highest for Min, -inf (the lowest
 * integer) for LogSum and LogSumExp. Integers stay integral with ONNX Runtime's arithmetic: Mean
 * truncates toward zero, L2 is floor(sqrt), LogSum truncates log(sum), LogSumExp is
 * trunc(max + log(count of maxima)) (ORT truncates every exp term to an integer). float16 and
 * bfloat16 accumulate in float32, except for Max and Min, which are exact. ArgMax/ArgMin give
 * int64 indices (the first extreme, or the last with select_last_index; a NaN is passed over
 * unless it starts the slice, as ORT scans); CumSum and CumProd are
 * MLX's scans with exclusive and reverse, their axis input read on the host; TopK sorts stably
 * (ties keep the lower index first, as ORT does) and slices k, which reads the concrete shape.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <math.h>
#include <stdlib.h>

/* Reductions composed here (row codes after MLX's own mx_reduce_op values). */
enum { RED_L1 = MX_REDUCE_OP_COUNT, RED_L2, RED_LOG_SUM, RED_LOG_SUM_EXP, RED_SUM_SQUARE };

/* --- shared helpers ---------------------------------------------------------------------- */
static bool is_half(mx_dtype d) { return d == MX_FLOAT16 || d == MX_BFLOAT16; }

static int widen_half(tr_ctx *t, mx_array *x) {
  if (is_half(mx_dtype_of(*x))) TR_TRY(mx_astype(t->mx, x, *x, MX_FLOAT32));
  return MX_OK;
}

/* The lowest value of an integer dtype (0 for unsigned ones). */
static int lowest_int(tr_ctx *t, mx_dtype dt, mx_array *out) {
  int64_t v = dt == MX_INT8 ? INT8_MIN : dt == MX_INT16 ? INT16_MIN
            : dt == MX_INT32 ? INT32_MIN : dt == MX_INT64 ? INT64_MIN : 0;
  return mx_scalar_int(t->mx, out, v, dt);
}

/* One MLX reduction over k axes; over no axis it is the identity. Max and Min of an empty set
 * are their identities rather than MLX's error. */
static int over(tr_ctx *t, mx_reduce_op op, mx_array x, const int *axes, int k, bool keep,
                mx_array *y) {
  if (k == 0) {
    *y = x;
    return MX_OK;
  }
  if (op == MX_MAX || op == MX_MIN) return mx_reduce_empty_ok(t->mx, y, op, x, axes, k, keep);
  return mx_reduce(t->mx, y, op, x, axes, k, keep);
}

/* --- shared claim checks ----------------------------------------------------------------- */
/* Checks axes against the input's static rank: in range, no repeats. */
static bool check_axes(const ir_graph *g, const ir_node *n, const int64_t *axes, size_t count,
                       op_why why) {
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
  return true;
}

/* A single axis attribute against the input's static rank (rank 0 has no axis). */
static bool check_one_axis(const ir_graph *g, const ir_node *n, int64_t axis, op_why why,
                           int *out) {
  const ir_value *x = ir_input(g, n, 0);
  *out = -1;
  if (!x || x->rank < 0) return true;
  if (x->rank == 0)
    return op_decline(why, "%s of a scalar is undefined (its input needs rank >= 1)",
                      n->op_type);
  if (axis < -x->rank || axis >= x->rank)
    return op_decline(why, "%s axis %lld is out of range for an input of rank %d", n->op_type,
                      (long long)axis, x->rank);
  *out = (int)(axis < 0 ? axis + x->rank : axis);
  return true;
}

/* --- integer forms with ONNX Runtime's arithmetic ------------------------------------------ */
/* Integer mean: the integral sum divided by the element count, truncated toward zero; the mean
 * of nothing is 0 (the count is clamped to 1 rather than dividing by zero). The count comes from
 * MLX's number_of_elements, which keeps the translation free of shape reads. */
static int int_mean(tr_ctx *t, mx_array x, const int *axes, int k, bool keep, mx_array *out) {
  mx_array s, cnt, one;
  TR_TRY(mx_reduce(t->mx, &s, MX_SUM, x, axes, k, keep));
  mx_dtype dt = mx_dtype_of(s);
  TR_TRY(mx_number_of_elements(t->mx, &cnt, x, axes, k, dt));
  TR_TRY(mx_scalar(t->mx, &one, 1, dt));
  TR_TRY(mx_binary(t->mx, &cnt, MX_MAXIMUM, cnt, one));
  if (mx_dtype_is_unsigned_int(dt)) return mx_binary(t->mx, out, MX_FLOOR_DIVIDE, s, cnt);
  mx_array mag, sign;
  TR_TRY(mx_unary(t->mx, &mag, MX_ABS, s));
  TR_TRY(mx_binary(t->mx, &mag, MX_FLOOR_DIVIDE, mag, cnt));
  TR_TRY(mx_unary(t->mx, &sign, MX_SIGN, s));
  return mx_binary(t->mx, out, MX_MULTIPLY, mag, sign);
}

/* floor(sqrt(s)) of an integer sum of squares, exactly: a float32 estimate, one integer Newton
 * step (which 64-bit sums need) and a correction by one either way, in int64 and with divisions
 * instead of squares so nothing overflows. A negative (overflowed) sum gives the lowest value, as
 * ORT's sqrt -> NaN -> integer conversion does on x86. */
static int int_sqrt(tr_ctx *t, mx_array s, mx_array *out) {
  mx_dtype dt = mx_dtype_of(s);
  mx_array s64, f, r, one, two, next, safe, q, c;
  TR_TRY(mx_astype(t->mx, &s64, s, MX_INT64));
  TR_TRY(mx_astype(t->mx, &f, s, MX_FLOAT32));
  TR_TRY(mx_unary(t->mx, &f, MX_SQRT, f));
  TR_TRY(mx_astype(t->mx, &r, f, MX_INT64));
  TR_TRY(mx_scalar_int(t->mx, &one, 1, MX_INT64));
  TR_TRY(mx_scalar_int(t->mx, &two, 2, MX_INT64));
  TR_TRY(mx_binary(t->mx, &r, MX_MAXIMUM, r, one));
  TR_TRY(mx_binary(t->mx, &next, MX_FLOOR_DIVIDE, s64, r)); /* r = (r + s / r) / 2 */
  TR_TRY(mx_binary(t->mx, &next, MX_ADD, next, r));
  TR_TRY(mx_binary(t->mx, &r, MX_FLOOR_DIVIDE, next, two));
  TR_TRY(mx_binary(t->mx, &next, MX_ADD, r, one)); /* (r + 1)^2 <= s: one more */
  TR_TRY(mx_binary(t->mx, &q, MX_FLOOR_DIVIDE, s64, next));
  TR_TRY(mx_binary(t->mx, &c, MX_LESS_EQUAL, next, q));
  TR_TRY(mx_where(t->mx, &r, c, next, r));
  TR_TRY(mx_binary(t->mx, &safe, MX_MAXIMUM, r, one)); /* r^2 > s: one less */
  TR_TRY(mx_binary(t->mx, &q, MX_FLOOR_DIVIDE, s64, safe));
  TR_TRY(mx_binary(t->mx, &c, MX_GREATER, r, q));
  TR_TRY(mx_binary(t->mx, &next, MX_SUBTRACT, r, one));
  TR_TRY(mx_where(t->mx, &r, c, next, r));
  TR_TRY(mx_astype(t->mx, &r, r, dt));
  if (!mx_dtype_is_signed_int(dt)) {
    *out = r;
    return MX_OK;
  }
  mx_array zero, low;
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, dt));
  TR_TRY(lowest_int(t, dt, &low));
  TR_TRY(mx_binary(t->mx, &c, MX_LESS, s, zero));
  return mx_where(t->mx, out, c, low, r);
}

/* trunc(log(s)) of an integer sum; s <= 0 (log -inf or NaN) gives the lowest value. */
static int int_log(tr_ctx *t, mx_array s, mx_array *out) {
  mx_dtype dt = mx_dtype_of(s);
  mx_array f, r, zero, low, c;
  TR_TRY(mx_astype(t->mx, &f, s, MX_FLOAT32));
  TR_TRY(mx_unary(t->mx, &f, MX_LOG, f));
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &c, MX_GREATER, f, zero)); /* keep NaN and -inf out of the cast */
  TR_TRY(mx_where(t->mx, &f, c, f, zero));
  TR_TRY(mx_astype(t->mx, &r, f, dt));
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, dt));
  TR_TRY(lowest_int(t, dt, &low));
  TR_TRY(mx_binary(t->mx, &c, MX_LESS_EQUAL, s, zero));
  return mx_where(t->mx, out, c, low, r);
}

/* Integer LogSumExp as ORT computes it: each exp(x - max) term is truncated into an integer
 * accumulator, so only the maxima count: trunc(max + log(count)), with the truncation toward
 * zero taken exactly as max + floor(log count) when the sum is >= 0, else max + ceil(log count).
 * An empty set gives the lowest value. Keeps the reduced axes (keepdims). */
static int int_log_sum_exp(tr_ctx *t, mx_array x, const int *axes, int k, mx_array *out) {
  mx_dtype dt = mx_dtype_of(x);
  mx_array m, eq, cnt, l, negm, fl, cl, up, down, zero, c;
  TR_TRY(over(t, MX_MAX, x, axes, k, true, &m));
  TR_TRY(mx_binary(t->mx, &eq, MX_EQUAL, x, m));
  TR_TRY(mx_astype(t->mx, &eq, eq, MX_INT32));
  TR_TRY(over(t, MX_SUM, eq, axes, k, true, &cnt));
  TR_TRY(mx_astype(t->mx, &l, cnt, MX_FLOAT32));
  TR_TRY(mx_unary(t->mx, &l, MX_LOG, l));
  TR_TRY(mx_astype(t->mx, &negm, m, MX_FLOAT32));
  TR_TRY(mx_unary(t->mx, &negm, MX_NEG, negm));
  TR_TRY(mx_unary(t->mx, &fl, MX_FLOOR, l));
  TR_TRY(mx_unary(t->mx, &cl, MX_CEIL, l));
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &c, MX_GREATER, l, zero)); /* log(0) = -inf stays out of the cast */
  TR_TRY(mx_where(t->mx, &fl, c, fl, zero));
  TR_TRY(mx_where(t->mx, &cl, c, cl, zero));
  TR_TRY(mx_astype(t->mx, &fl, fl, dt));
  TR_TRY(mx_astype(t->mx, &cl, cl, dt));
  TR_TRY(mx_binary(t->mx, &down, MX_ADD, m, fl));
  TR_TRY(mx_binary(t->mx, &up, MX_ADD, m, cl));
  TR_TRY(mx_binary(t->mx, &c, MX_GREATER_EQUAL, l, negm));
  TR_TRY(mx_where(t->mx, out, c, down, up));
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, MX_INT32));
  TR_TRY(mx_binary(t->mx, &c, MX_EQUAL, cnt, zero));
  return mx_where(t->mx, out, c, m, *out);
}

/* log(sum(exp(x - m))) + m with m the maximum, or 0 where that is not finite (all -inf, an
 * empty set, +inf), as ORT does. Keeps the reduced axes (keepdims). */
static int log_sum_exp(tr_ctx *t, mx_array x, const int *axes, int k, mx_array *out) {
  mx_array m, d, zero, finite, e, s;
  TR_TRY(over(t, MX_MAX, x, axes, k, true, &m));
  TR_TRY(tr_scalar(t, &zero, 0.0, mx_dtype_of(x)));
  TR_TRY(mx_binary(t->mx, &d, MX_SUBTRACT, m, m));
  TR_TRY(mx_binary(t->mx, &finite, MX_EQUAL, d, zero));
  TR_TRY(mx_where(t->mx, &m, finite, m, zero));
  TR_TRY(mx_binary(t->mx, &e, MX_SUBTRACT, x, m));
  TR_TRY(mx_unary(t->mx, &e, MX_EXP, e));
  TR_TRY(over(t, MX_SUM, e, axes, k, true, &s));
  TR_TRY(mx_unary(t->mx, &s, MX_LOG, s));
  return mx_binary(t->mx, out, MX_ADD, s, m);
}

/* --- Reduce* ----------------------------------------------------------------------------- */
/* One ONNX reduction (the row's code) of x over k distinct, sorted axes (k == 0: none). */
static int reduce_by(tr_ctx *t, int code, mx_array x, const int *axes, int k, bool keep,
                     mx_array *y) {
  mx_dtype dt = mx_dtype_of(x);
  bool is_float = mx_dtype_is_float(dt);
  switch (code) {
    case MX_MAX:
    case MX_MIN:
      return over(t, (mx_reduce_op)code, x, axes, k, keep, y);
    case MX_SUM:
    case MX_PROD:
      TR_TRY(widen_half(t, &x));
      return over(t, (mx_reduce_op)code, x, axes, k, keep, y);
    case MX_MEAN: {
      if (k == 0) return over(t, MX_SUM, x, axes, k, keep, y); /* the identity */
      if (!is_float) return int_mean(t, x, axes, k, keep, y);
      /* MLX's mean of nothing is NaN (0 / 0); ORT's is 0. */
      mx_array cnt, zero, none;
      TR_TRY(widen_half(t, &x));
      TR_TRY(mx_reduce(t->mx, y, MX_MEAN, x, axes, k, keep));
      TR_TRY(mx_number_of_elements(t->mx, &cnt, x, axes, k, MX_FLOAT32));
      TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
      TR_TRY(mx_binary(t->mx, &none, MX_EQUAL, cnt, zero));
      return mx_where(t->mx, y, none, zero, *y);
    }
    case RED_L1:
      TR_TRY(widen_half(t, &x));
      TR_TRY(mx_unary(t->mx, &x, MX_ABS, x));
      return over(t, MX_SUM, x, axes, k, keep, y);
    case RED_SUM_SQUARE:
    case RED_L2:
      TR_TRY(widen_half(t, &x));
      TR_TRY(mx_binary(t->mx, &x, MX_MULTIPLY, x, x));
      TR_TRY(over(t, MX_SUM, x, axes, k, keep, y));
      if (code == RED_SUM_SQUARE) return MX_OK;
      return is_float ? mx_unary(t->mx, y, MX_SQRT, *y) : int_sqrt(t, *y, y);
    case RED_LOG_SUM:
      TR_TRY(widen_half(t, &x));
      TR_TRY(over(t, MX_SUM, x, axes, k, keep, y));
      return is_float ? mx_unary(t->mx, y, MX_LOG, *y) : int_log(t, *y, y);
    case RED_LOG_SUM_EXP:
      TR_TRY(widen_half(t, &x));
      TR_TRY(is_float ? log_sum_exp(t, x, axes, k, y) : int_log_sum_exp(t, x, axes, k, y));
      return keep || k == 0 ? MX_OK : mx_squeeze(t->mx, y, *y, axes, k);
  }
  return tr_fail(t, "unknown reduction %d", code);
}

/* Reduces input 0 over the given ONNX axes (count 0: all axes, or none when noop). */
static int reduce(tr_ctx *t, const ir_node *n, const op_row *r, const int64_t *onnx_axes,
                  size_t count, bool noop) {
  mx_array x = tr_in(t, 0), y;
  int rank = mx_ndim(x), axes[MX_MAX_RANK], k = 0;
  bool seen[MX_MAX_RANK] = {false};
  if (count > (size_t)rank) return tr_fail(t, "%zu axes for an input of rank %d", count, rank);
  for (size_t i = 0; i < count; i++) {
    int a;
    TR_TRY(tr_axis(t, onnx_axes[i], rank, &a));
    if (seen[a]) return tr_fail(t, "axes name axis %d twice", a);
    seen[a] = true;
  }
  for (int i = 0; i < rank; i++)
    if (seen[i] || (count == 0 && !noop)) axes[k++] = i;
  TR_TRY(reduce_by(t, r->code, x, axes, k, ir_attr_int(n, "keepdims", 1) != 0, &y));
  return tr_out_cast(t, 0, y);
}

/* Axes as an attribute (ReduceSum < 13, the others < 18). */
static bool claim_reduce_attr(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_attr *a = ir_find_attr(n, "axes");
  return check_axes(g, n, a ? a->ints : NULL, a ? a->count : 0, why);
}

static int translate_reduce_attr(tr_ctx *t, const ir_node *n, const op_row *r) {
  const ir_attr *a = ir_find_attr(n, "axes");
  return reduce(t, n, r, a ? a->ints : NULL, a ? a->count : 0, false);
}

/* Axes as an optional input (ReduceSum 13, the others 18+): a constant is checked here; a
 * computed one is read on the host when the node runs (the group runs eagerly for that read). */
static bool claim_reduce_input(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (!ir_has_input(n, 1)) return check_axes(g, n, NULL, 0, why);
  const ir_value *v = ir_input(g, n, 1);
  if (!v->is_constant) return true;
  int64_t *axes = NULL;
  size_t count = 0;
  /* An empty constant has no data for ir_const_ints to read: zero axes. */
  if (ir_num_elements(v) != 0 && !ir_const_ints(v, &axes, &count))
    return op_decline(why, "%s axes ('%s') could not be read as int64 values", n->op_type,
                      v->name);
  bool noop = ir_attr_int(n, "noop_with_empty_axes", 0) != 0;
  bool ok = (count == 0 && noop) || check_axes(g, n, axes, count, why);
  free(axes);
  return ok;
}

static int translate_reduce_input(tr_ctx *t, const ir_node *n, const op_row *r) {
  int64_t axes[MX_MAX_RANK];
  size_t count = 0;
  if (tr_in(t, 1)) TR_TRY(tr_host_ints(t, 1, axes, MX_MAX_RANK, &count));
  return reduce(t, n, r, axes, count, ir_attr_int(n, "noop_with_empty_axes", 0) != 0);
}

/* --- ArgMax, ArgMin ---------------------------------------------------------------------- */
enum { ARG_MIN = 0, ARG_MAX = 1, ARG_NONNEG_AXIS = 2, ARG_LAST_INDEX = 4 };

static bool claim_arg(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  int64_t axis = ir_attr_int(n, "axis", 0);
  int a;
  if ((r->code & ARG_NONNEG_AXIS) && axis < 0)
    return op_decline(why, "%s-%d axis %lld is negative; negative axes arrive at opset 11",
                      n->op_type, n->since_version, (long long)axis);
  if (!check_one_axis(g, n, axis, why, &a)) return false;
  const ir_value *x = ir_input(g, n, 0);
  if (a >= 0 && x->dims[a] == 0)
    return op_decline(why, "%s over the empty axis %d (size 0) has no index to return",
                      n->op_type, a);
  return true;
}

/* NaN as ORT's CPU kernel treats it: it scans from a slice's first element and moves on a
 * strictly greater (smaller) value, or greater-or-equal for the last index, so a NaN never wins
 * over what came before it, and a NaN at the start stays the answer (index 0). MLX's max and
 * argmax propagate NaN instead (and no element equals a NaN maximum: the last-index composition
 * gave -1). So NaN (where `nan` is set) becomes the reduction's identity (-inf for max, +inf for
 * min) in *clean, and *starts_nan says, per slice, whether its first element is NaN. pos holds
 * each element's 1-based position along axis a. */
static int arg_nan_rules(tr_ctx *t, mx_array x, mx_array nan, mx_array pos, int a, bool is_max,
                         bool keep, mx_array *clean, mx_array *starts_nan) {
  mx_array fill, one, first;
  TR_TRY(tr_scalar(t, &fill, is_max ? -INFINITY : INFINITY, mx_dtype_of(x)));
  TR_TRY(mx_where(t->mx, clean, nan, fill, x));
  TR_TRY(mx_scalar_int(t->mx, &one, 1, MX_INT64));
  TR_TRY(mx_binary(t->mx, &first, MX_EQUAL, pos, one));
  TR_TRY(mx_binary(t->mx, &first, MX_LOGICAL_AND, first, nan));
  return mx_reduce(t->mx, starts_nan, MX_ANY, first, &a, 1, keep);
}

/* An input with a zero-size dim: MLX's argmax refuses to reduce an empty array. When the output
 * holds no element either (another axis is empty) the answer is that empty tensor; when only the
 * reduced axis is empty, each output slot would need an index into nothing, which ORT's CPU
 * provider rejects too. */
static int arg_of_empty(tr_ctx *t, const ir_node *n, mx_array x, int a, bool keep,
                        mx_array zero) {
  int shape[MX_MAX_RANK], k = 0;
  size_t count = 1;
  for (int i = 0; i < mx_ndim(x); i++) {
    int d = i == a ? 1 : mx_dim(x, i);
    if (i == a && !keep) continue;
    shape[k++] = d;
    count *= (size_t)d;
  }
  if (count != 0)
    return tr_fail(t, "%s over the empty axis %d (size 0) has no index to return", n->op_type,
                   a);
  mx_array y;
  TR_TRY(mx_full(t->mx, &y, shape, k, zero));
  return tr_out_cast(t, 0, y);
}

/* MLX's argmax/argmin return the first extreme. The last one (select_last_index) is the largest
 * 1-based position (a cumsum of ones, so no shape is read) among the elements equal to the
 * extreme, minus one: never -1, since with NaN set aside (arg_nan_rules) some element equals the
 * extreme unless the slice starts with NaN, whose answer is 0. */
static int translate_arg(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y, pos = NULL, starts_nan = NULL, zero;
  int a;
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", 0), mx_ndim(x), &a));
  if (mx_ndim(x) == 0) return tr_fail(t, "%s of a scalar is undefined", n->op_type);
  bool keep = ir_attr_int(n, "keepdims", 1) != 0, is_max = (r->code & ARG_MAX) != 0;
  bool last = (r->code & ARG_LAST_INDEX) && ir_attr_int(n, "select_last_index", 0);
  bool is_float = mx_dtype_is_float(mx_dtype_of(x));
  TR_TRY(mx_scalar_int(t->mx, &zero, 0, MX_INT64));
  if (mx_size(x) == 0) return arg_of_empty(t, n, x, a, keep, zero);
  if (last || is_float) {
    mx_array ones, nan = NULL;
    TR_TRY(mx_binary(t->mx, &ones, MX_EQUAL, x, x)); /* true but where NaN */
    if (is_float) {
      TR_TRY(mx_unary(t->mx, &nan, MX_ISNAN, x));
      TR_TRY(mx_binary(t->mx, &ones, MX_LOGICAL_OR, ones, nan));
    }
    TR_TRY(mx_astype(t->mx, &pos, ones, MX_INT64));
    TR_TRY(mx_cumsum(t->mx, &pos, pos, a, false, true));
    if (is_float) TR_TRY(arg_nan_rules(t, x, nan, pos, a, is_max, keep, &x, &starts_nan));
  }
  if (last) {
    mx_array m, eq, one;
    TR_TRY(mx_reduce(t->mx, &m, is_max ? MX_MAX : MX_MIN, x, &a, 1, true));
    /* against the input, where NaN equals nothing (an identity put in its place could) */
    TR_TRY(mx_binary(t->mx, &eq, MX_EQUAL, tr_in(t, 0), m));
    TR_TRY(mx_where(t->mx, &pos, eq, pos, zero));
    TR_TRY(mx_reduce(t->mx, &y, MX_MAX, pos, &a, 1, keep));
    TR_TRY(mx_scalar_int(t->mx, &one, 1, MX_INT64));
    TR_TRY(mx_binary(t->mx, &y, MX_SUBTRACT, y, one));
  } else if (is_max) {
    TR_TRY(mx_argmax(t->mx, &y, x, a, keep));
  } else {
    TR_TRY(mx_argmin(t->mx, &y, x, a, keep));
  }
  if (starts_nan) {
    TR_TRY(mx_astype(t->mx, &y, y, MX_INT64));
    TR_TRY(mx_where(t->mx, &y, starts_nan, zero, y));
  }
  return tr_out_cast(t, 0, y);
}

/* --- CumSum, CumProd --------------------------------------------------------------------- */
/* The axis input (a scalar) is checked when it is constant; a computed one is read on the host
 * when the node runs. */
static bool claim_scan(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *axis = ir_input(g, n, 1);
  if (x && x->rank == 0)
    return op_decline(why, "%s of a scalar is undefined (its input needs rank >= 1)",
                      n->op_type);
  if (!axis || !axis->is_constant) return true;
  int64_t *vals = NULL;
  size_t count = 0;
  if (!ir_const_ints(axis, &vals, &count) || count != 1) {
    free(vals);
    return op_decline(why, "%s axis ('%s') must hold one int32/int64 value", n->op_type,
                      axis->name);
  }
  int a;
  bool ok = check_one_axis(g, n, vals[0], why, &a);
  free(vals);
  return ok;
}

static int translate_scan(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), y;
  int64_t axis;
  size_t count = 0;
  int a;
  TR_TRY(tr_host_ints(t, 1, &axis, 1, &count));
  if (count != 1) return tr_fail(t, "%s axis must hold one value", n->op_type);
  if (mx_ndim(x) == 0) return tr_fail(t, "%s of a scalar is undefined", n->op_type);
  TR_TRY(tr_axis(t, axis, mx_ndim(x), &a));
  bool reverse = ir_attr_int(n, "reverse", 0) != 0;
  bool inclusive = ir_attr_int(n, "exclusive", 0) == 0;
  TR_TRY(widen_half(t, &x));
  if (r->code == MX_PROD) TR_TRY(mx_cumprod(t->mx, &y, x, a, reverse, inclusive));
  else TR_TRY(mx_cumsum(t->mx, &y, x, a, reverse, inclusive));
  return tr_out_cast(t, 0, y);
}

/* --- TopK -------------------------------------------------------------------------------- */
enum { TOPK_K_ATTR, TOPK_K_INPUT, TOPK_FULL }; /* opset 1, 10, 11+ */

/* The axis is checked against the static rank and a known k (the attribute, or a constant
 * input) against the axis' static size; a computed k is read on the host when the node runs. */
static bool claim_topk(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  int a;
  if (!check_one_axis(g, n, ir_attr_int(n, "axis", -1), why, &a)) return false;
  int64_t k = 0;
  bool known = true;
  if (r->code == TOPK_K_ATTR) {
    if (!ir_find_attr(n, "k")) return op_decline(why, "TopK-1 needs the 'k' attribute");
    k = ir_attr_int(n, "k", 0);
  } else {
    const ir_value *kv = ir_input(g, n, 1);
    int64_t *vals = NULL;
    size_t count = 0;
    known = kv && kv->is_constant;
    if (known && (!ir_const_ints(kv, &vals, &count) || count != 1)) {
      free(vals);
      return op_decline(why, "TopK k ('%s') must hold one int64 value", kv->name);
    }
    if (known) k = vals[0];
    free(vals);
  }
  const ir_value *x = ir_input(g, n, 0);
  int64_t dim = a >= 0 ? x->dims[a] : IR_DIM_UNKNOWN;
  if (known && (k < 0 || (dim != IR_DIM_UNKNOWN && k > dim)))
    return op_decline(why, "TopK k = %lld is out of range for axis %d of size %lld",
                      (long long)k, a, (long long)dim);
  return true;
}

/* A stable ascending argsort of a key that orders the wanted elements first: x for the
 * smallest, -x (floats) or ~x (integers, which reverses their order exactly) for the largest.
 * The first k indices are sliced (a shape read), the values gathered with them. sorted=0 also
 * returns them sorted, which ONNX allows. */
static int translate_topk(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), key = x, idx, values, indices;
  int rank = mx_ndim(x), a;
  if (rank == 0) return tr_fail(t, "TopK of a scalar is undefined");
  TR_TRY(tr_axis(t, ir_attr_int(n, "axis", -1), rank, &a));
  int64_t k = 0;
  if (r->code == TOPK_K_ATTR) {
    k = ir_attr_int(n, "k", -1);
  } else {
    size_t count = 0;
    TR_TRY(tr_host_ints(t, 1, &k, 1, &count));
    if (count != 1) return tr_fail(t, "TopK k must hold one value");
  }
  if (k < 0 || k > mx_dim(x, a))
    return tr_fail(t, "TopK k = %lld is out of range for axis %d of size %d", (long long)k, a,
                   mx_dim(x, a));
  bool largest = r->code != TOPK_FULL || ir_attr_int(n, "largest", 1) != 0;
  if (largest)
    TR_TRY(mx_unary(t->mx, &key, mx_dtype_is_float(mx_dtype_of(x)) ? MX_NEG : MX_BITWISE_INVERT,
                    x));
  TR_TRY(mx_argsort(t->mx, &idx, key, a));
  int start[MX_MAX_RANK], stop[MX_MAX_RANK], strides[MX_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    start[i] = 0;
    stop[i] = i == a ? (int)k : mx_dim(x, i);
    strides[i] = 1;
  }
  TR_TRY(mx_slice(t->mx, &idx, idx, start, stop, strides, rank));
  TR_TRY(mx_take_along_axis(t->mx, &values, x, idx, a));
  TR_TRY(mx_astype(t->mx, &indices, idx, MX_INT64));
  TR_TRY(tr_out(t, 0, values));
  return tr_out(t, 1, indices);
}

/* --- rows -------------------------------------------------------------------------------- */
#define SUM_TYPES (OP_FLOATS | OP_T(IR_INT32) | OP_T(IR_INT64) | OP_T(IR_UINT32) | OP_T(IR_UINT64))
#define MAX_TYPES (SUM_TYPES | OP_T(IR_INT8) | OP_T(IR_UINT8))
#define HOST_READ_NOTE(what) \
  what " is read on the host: free when constant; a computed " what " makes the group eager " \
       "for that read"
#define ATTR_ROW(name, lo, hi, op, types) \
  {"", name, lo, hi, claim_reduce_attr, translate_reduce_attr, OP_SHAPELESS, types, op, \
   "axes attribute"}
#define INPUT_ROW(name, lo, hi, op, types) \
  {"", name, lo, hi, claim_reduce_input, translate_reduce_input, OP_SHAPELESS, types, op, \
   HOST_READ_NOTE("the axes input")}
#define ARG_ROWS(name, code)                                                                   \
  {"", name, 1, 10, claim_arg, translate_arg, OP_SHAPELESS, OP_NUMERIC | OP_F64,               \
   (code) | ARG_NONNEG_AXIS, "int64 index of the first extreme; negative axis declined"},     \
  {"", name, 11, 11, claim_arg, translate_arg, OP_SHAPELESS, OP_NUMERIC | OP_F64, code,       \
   "int64 index of the first extreme"},                                                       \
  {"", name, 12, 13, claim_arg, translate_arg, OP_SHAPELESS, OP_NUMERIC | OP_F64,             \
   (code) | ARG_LAST_INDEX, "int64 index of the first extreme, or the last (select_last_index)"}

const op_row ops_reduce_rows[] = {
    ATTR_ROW("ReduceSum", 1, 12, MX_SUM, SUM_TYPES | OP_F64),
    INPUT_ROW("ReduceSum", 13, 13, MX_SUM, SUM_TYPES | OP_F64),
    ATTR_ROW("ReduceMean", 1, 17, MX_MEAN, SUM_TYPES | OP_F64),
    INPUT_ROW("ReduceMean", 18, 18, MX_MEAN, SUM_TYPES | OP_F64),
    ATTR_ROW("ReduceMax", 1, 17, MX_MAX, MAX_TYPES | OP_F64),
    INPUT_ROW("ReduceMax", 18, 19, MX_MAX, MAX_TYPES | OP_F64),
    INPUT_ROW("ReduceMax", 20, 20, MX_MAX, MAX_TYPES | OP_F64 | OP_T(IR_BOOL)),
    ATTR_ROW("ReduceMin", 1, 17, MX_MIN, MAX_TYPES | OP_F64),
    INPUT_ROW("ReduceMin", 18, 19, MX_MIN, MAX_TYPES | OP_F64),
    INPUT_ROW("ReduceMin", 20, 20, MX_MIN, MAX_TYPES | OP_F64 | OP_T(IR_BOOL)),
    ATTR_ROW("ReduceProd", 1, 17, MX_PROD, SUM_TYPES | OP_F64),
    INPUT_ROW("ReduceProd", 18, 18, MX_PROD, SUM_TYPES | OP_F64),
    ATTR_ROW("ReduceL1", 1, 17, RED_L1, SUM_TYPES | OP_F64),
    INPUT_ROW("ReduceL1", 18, 18, RED_L1, SUM_TYPES | OP_F64),
    ATTR_ROW("ReduceL2", 1, 17, RED_L2, SUM_TYPES | OP_F64),
    INPUT_ROW("ReduceL2", 18, 18, RED_L2, SUM_TYPES | OP_F64),
    ATTR_ROW("ReduceLogSum", 1, 17, RED_LOG_SUM, SUM_TYPES | OP_F64),
    INPUT_ROW("ReduceLogSum", 18, 18, RED_LOG_SUM, SUM_TYPES | OP_F64),
    ATTR_ROW("ReduceLogSumExp", 1, 17, RED_LOG_SUM_EXP, SUM_TYPES),
    INPUT_ROW("ReduceLogSumExp", 18, 18, RED_LOG_SUM_EXP, SUM_TYPES),
    ATTR_ROW("ReduceSumSquare", 1, 17, RED_SUM_SQUARE, SUM_TYPES | OP_F64),
    INPUT_ROW("ReduceSumSquare", 18, 18, RED_SUM_SQUARE, SUM_TYPES | OP_F64),
    ARG_ROWS("ArgMax", ARG_MAX),
    ARG_ROWS("ArgMin", ARG_MIN),
    {"", "CumSum", 11, 14, claim_scan, translate_scan, OP_SHAPELESS, SUM_TYPES | OP_F64, MX_SUM,
     "exclusive, reverse; " HOST_READ_NOTE("the axis input")},
    {"", "CumProd", 26, 26, claim_scan, translate_scan, OP_SHAPELESS, SUM_TYPES | OP_F64, MX_PROD,
     "exclusive, reverse; " HOST_READ_NOTE("the axis input")},
    {"", "TopK", 1, 9, claim_topk, translate_topk, OP_SHAPE_KEYED, OP_FLOATS | OP_F64, TOPK_K_ATTR,
     "k attribute; largest first; ties keep the lower index first"},
    {"", "TopK", 10, 10, claim_topk, translate_topk, OP_SHAPE_KEYED, OP_FLOATS | OP_F64,
     TOPK_K_INPUT, "largest first; ties keep the lower index first; " HOST_READ_NOTE("k")},
    {"", "TopK", 11, 24, claim_topk, translate_topk, OP_SHAPE_KEYED, OP_NUMERIC | OP_F64, TOPK_FULL,
     "largest/smallest, always sorted; ties keep the lower index first; " HOST_READ_NOTE("k")},
    OP_ROWS_END,
};
