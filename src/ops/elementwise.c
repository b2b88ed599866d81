/*
 * Elementwise operators: arithmetic (Add, Sub, Mul, Div, Pow, Mod), the variadic Max, Min, Sum
 * and Mean, comparison (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), logic (Not, And, Or,
 * Xor, Where), bitwise ops (BitwiseAnd/Or/Xor/Not, BitShift), unary math (Neg, Abs, Exp, Log,
 * Sqrt, Reciprocal, Erf, trigonometric and hyperbolic functions and their inverses, Floor, Ceil,
 * Round half to even, Sign), Clip, the float tests IsNaN and IsInf, and the type changes
 * CastLike and BitCast. ONNX broadcasting is numpy's, which MLX shares; ONNX does not promote
 * types, so inputs must agree (Pow excepted) and results are cast to the declared output type.
 * Integer Div truncates toward zero as ONNX Runtime does, which MLX's divide (a float result)
 * and floor_divide do not; integer Mod follows the divisor's sign (MLX's remainder) and fmod=1
 * the dividend's (C's fmod; floats computed on magnitudes so they stay exact). Integer division
 * by zero fails the run as on ORT; INT_MIN / -1 wraps (INT_MIN, remainder 0) where ORT traps.
 * Sum and Mean of float16/bfloat16 accumulate in float32. Rows from opset 7 on for ops that
 * earlier used a `broadcast` attribute we do not translate.
 */
#include "ops/families.h"
#include "cpu/math.h"
#include "ops/fusion_match.h"
#include "ops/lowbit.h"
#include "plan/translate.h"

#include <float.h>
#include <string.h>

/* --- claims ------------------------------------------------------------------------------ */
static bool claim_same_types(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  return op_all_same_type(g, n, why);
}

static bool claim_where(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 1), *y = ir_input(g, n, 2);
  if (x && y && x->elem_type != y->elem_type)
    return op_decline(why, "X and Y mix element types %s and %s", ir_elem_name(x->elem_type),
                      ir_elem_name(y->elem_type));
  return true;
}

static bool claim_mod(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  if (!claim_same_types(g, n, r, why)) return false;
  const ir_value *a = ir_input(g, n, 0);
  if (a && (OP_FLOATS & OP_T(a->elem_type)) && ir_attr_int(n, "fmod", 0) == 0)
    return op_decline(why, "Mod of %s with fmod=0 is undefined: ONNX requires fmod=1 for "
                      "floating-point inputs", ir_elem_name(a->elem_type));
  return true;
}

static bool claim_bitshift(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const char *dir = ir_attr_string(n, "direction", "");
  if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
    return op_decline(why, "BitShift direction '%s' is not 'LEFT' or 'RIGHT'", dir);
  return claim_same_types(g, n, r, why);
}

/* Clip's min and max inputs are scalars (ONNX Runtime also takes a one-element 1-D tensor). */
static bool claim_clip(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  if (!claim_same_types(g, n, r, why)) return false;
  for (int i = 1; i < 3; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (v && (v->rank > 1 || (v->rank == 1 && v->dims[0] != 1 && v->dims[0] != IR_DIM_UNKNOWN)))
      return op_decline(why, "Clip %s ('%s') must be a scalar (or one-element 1-D tensor)",
                        i == 1 ? "min" : "max", v->name);
  }
  return true;
}

static bool claim_bitcast(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0);
  const ir_attr *to = ir_find_attr(n, "to");
  if (!to || to->type != IR_ATTR_INT) return op_decline(why, "the 'to' attribute is required");
  if (ir_to_mx_dtype((int)to->i) < 0)
    return op_decline(why, "BitCast to %s: MLX has no such dtype", ir_elem_name((int)to->i));
  if (x && ir_elem_size(x->elem_type) != ir_elem_size((int)to->i))
    return op_decline(why, "BitCast from %s to %s changes the element size; ONNX requires equal "
                      "bit widths", ir_elem_name(x->elem_type), ir_elem_name((int)to->i));
  return true;
}

/* --- translators ------------------------------------------------------------------------- */
/* Integer division and modulo by zero fail the run naming the node, as on ORT's CPU provider
 * (MLX would quietly give 0 or the dividend). */
static int check_nonzero_divisor(tr_ctx *t, mx_array b, const char *what) {
  mx_array zero, ok;
  TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(b)));
  TR_TRY(mx_binary(t->mx, &ok, MX_NOT_EQUAL, b, zero));
  return tr_check_that(t, ok, "integer %s by zero", what);
}

/* A signed divisor with -1 replaced by 1 (*is_minus_one says where). MLX's integer kernels
 * compute x / y and x % y in C++, where INT_MIN / -1 traps (SIGFPE); x % 1 == x % -1 == 0 and
 * x / -1 is taken as -x (two's complement wrap: INT_MIN / -1 = INT_MIN). */
static int divisor_without_minus_one(tr_ctx *t, mx_array b, mx_array *safe,
                                     mx_array *is_minus_one) {
  mx_array one, minus_one;
  TR_TRY(mx_scalar(t->mx, &one, 1, mx_dtype_of(b)));
  TR_TRY(mx_scalar(t->mx, &minus_one, -1, mx_dtype_of(b)));
  TR_TRY(mx_binary(t->mx, is_minus_one, MX_EQUAL, b, minus_one));
  return mx_where(t->mx, safe, *is_minus_one, one, b);
}

/* Whether a signed a / b is a negative non-integer, given MLX's floored remainder r: there the
 * truncated result differs from the floored one. */
static int floor_differs(tr_ctx *t, mx_array a, mx_array b, mx_array r, mx_array *out) {
  mx_array zero, a_neg, b_neg, inexact, signs;
  TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(a)));
  TR_TRY(mx_binary(t->mx, &a_neg, MX_LESS, a, zero));
  TR_TRY(mx_binary(t->mx, &b_neg, MX_LESS, b, zero));
  TR_TRY(mx_binary(t->mx, &signs, MX_NOT_EQUAL, a_neg, b_neg));
  TR_TRY(mx_binary(t->mx, &inexact, MX_NOT_EQUAL, r, zero));
  return mx_binary(t->mx, out, MX_LOGICAL_AND, signs, inexact);
}

/* Integer division truncating toward zero, as ORT: MLX's floor_divide, plus one where a / b is
 * a negative non-integer. Working on the operands themselves (not their magnitudes) keeps
 * INT_MIN exact: its magnitude does not fit. */
static int translate_div(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array a = tr_in(t, 0), b = tr_in(t, 1);
  mx_dtype dt = mx_dtype_of(a);
  if (mx_dtype_is_float(dt)) return op_translate_binary(t, n, r);
  if (mx_dtype_of(b) != dt) return tr_fail(t, "Div inputs differ in type");
  TR_TRY(check_nonzero_divisor(t, b, "division"));
  mx_array q;
  if (mx_dtype_is_unsigned_int(dt)) {
    TR_TRY(mx_binary(t->mx, &q, MX_FLOOR_DIVIDE, a, b));
    return tr_out_cast(t, 0, q);
  }
  mx_array bs, is_minus_one, rem, fix, neg_a;
  TR_TRY(divisor_without_minus_one(t, b, &bs, &is_minus_one));
  TR_TRY(mx_binary(t->mx, &q, MX_FLOOR_DIVIDE, a, bs));
  TR_TRY(mx_binary(t->mx, &rem, MX_REMAINDER, a, bs));
  TR_TRY(floor_differs(t, a, bs, rem, &fix));
  TR_TRY(mx_astype(t->mx, &fix, fix, dt));
  TR_TRY(mx_binary(t->mx, &q, MX_ADD, q, fix));
  TR_TRY(mx_unary(t->mx, &neg_a, MX_NEG, a));
  TR_TRY(mx_where(t->mx, &q, is_minus_one, neg_a, q));
  return tr_out_cast(t, 0, q);
}

/* Integer powers with a negative exponent, as ORT computes them (truncating 1 / a^|b|): 1 for
 * a == 1, +-1 for a == -1 by the exponent's parity, 0 otherwise. MLX's integer power does not
 * define them. */
static int int_negative_powers(tr_ctx *t, mx_array a, mx_array b, mx_array *y) {
  mx_dtype ta = mx_dtype_of(a);
  mx_array zero, one, minus_one, two, neg, is_one, is_minus_one, odd, parity, value;
  TR_TRY(mx_scalar(t->mx, &zero, 0, ta));
  TR_TRY(mx_scalar(t->mx, &one, 1, ta));
  TR_TRY(mx_scalar(t->mx, &two, 2, ta));
  TR_TRY(mx_binary(t->mx, &neg, MX_LESS, b, zero));
  TR_TRY(mx_binary(t->mx, &is_one, MX_EQUAL, a, one));
  TR_TRY(mx_binary(t->mx, &odd, MX_REMAINDER, b, two));
  TR_TRY(mx_binary(t->mx, &odd, MX_NOT_EQUAL, odd, zero));
  if (mx_dtype_is_signed_int(ta)) {
    TR_TRY(mx_scalar(t->mx, &minus_one, -1, ta));
    TR_TRY(mx_binary(t->mx, &is_minus_one, MX_EQUAL, a, minus_one));
    TR_TRY(mx_where(t->mx, &parity, odd, minus_one, one));
    TR_TRY(mx_where(t->mx, &value, is_minus_one, parity, zero));
  } else {
    value = zero;
  }
  TR_TRY(mx_where(t->mx, &value, is_one, one, value));
  return mx_where(t->mx, y, neg, value, *y);
}

/* Pow keeps the base's type; an exponent of another type is cast to it first (as ORT does for
 * float exponents of float bases) unless the base is integral, where the power is taken in
 * float32 (float64 for a float64 exponent) and truncated back (exact while results fit the
 * float's mantissa). */
static int translate_pow(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array a = tr_in(t, 0), b = tr_in(t, 1), y;
  mx_dtype ta = mx_dtype_of(a);
  if (mx_dtype_is_float(ta)) {
    if (mx_dtype_of(b) != ta) TR_TRY(mx_astype(t->mx, &b, b, ta));
    TR_TRY(mx_binary(t->mx, &y, MX_POWER, a, b));
  } else if (mx_dtype_is_float(mx_dtype_of(b))) {
    mx_array af;
    mx_dtype tf = mx_dtype_of(b) == MX_FLOAT64 ? MX_FLOAT64 : MX_FLOAT32;
    TR_TRY(mx_astype(t->mx, &af, a, tf));
    TR_TRY(mx_astype(t->mx, &b, b, tf));
    TR_TRY(mx_binary(t->mx, &y, MX_POWER, af, b));
  } else {
    if (mx_dtype_of(b) != ta) TR_TRY(mx_astype(t->mx, &b, b, ta));
    TR_TRY(mx_binary(t->mx, &y, MX_POWER, a, b));
    if (!mx_dtype_is_unsigned_int(ta)) TR_TRY(int_negative_powers(t, a, b, &y));
  }
  return tr_out_cast(t, 0, y);
}

/* Mod: fmod=0 takes the divisor's sign (MLX's remainder, Python's %); fmod=1 the dividend's, as
 * C's % and fmod. Floats: the remainder of the magnitudes (exact, no quotient is formed) signed
 * like a. Signed integers: the floored remainder minus b where a / b is a negative non-integer
 * (no overflow: that remainder has b's sign and a smaller magnitude; magnitudes would not do,
 * INT_MIN has none that fits). */
static int translate_mod(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array a = tr_in(t, 0), b = tr_in(t, 1), y;
  mx_dtype dt = mx_dtype_of(a);
  bool fmod = ir_attr_int(n, "fmod", 0) != 0;
  if (!mx_dtype_is_float(dt)) {
    if (mx_dtype_of(b) != dt) return tr_fail(t, "Mod inputs differ in type");
    TR_TRY(check_nonzero_divisor(t, b, "modulo"));
    if (mx_dtype_is_unsigned_int(dt)) {
      TR_TRY(mx_binary(t->mx, &y, MX_REMAINDER, a, b));
      return tr_out_cast(t, 0, y);
    }
    mx_array bs, is_minus_one, fix, shifted;
    TR_TRY(divisor_without_minus_one(t, b, &bs, &is_minus_one));
    TR_TRY(mx_binary(t->mx, &y, MX_REMAINDER, a, bs));
    if (fmod) {
      TR_TRY(floor_differs(t, a, bs, y, &fix));
      TR_TRY(mx_binary(t->mx, &shifted, MX_SUBTRACT, y, bs));
      TR_TRY(mx_where(t->mx, &y, fix, shifted, y));
    }
    return tr_out_cast(t, 0, y);
  }
  if (!fmod) {
    TR_TRY(mx_binary(t->mx, &y, MX_REMAINDER, a, b));
    return tr_out_cast(t, 0, y);
  }
  mx_array abs_a, abs_b, neg, zero, is_neg;
  TR_TRY(mx_unary(t->mx, &abs_a, MX_ABS, a));
  TR_TRY(mx_unary(t->mx, &abs_b, MX_ABS, b));
  TR_TRY(mx_binary(t->mx, &y, MX_REMAINDER, abs_a, abs_b));
  TR_TRY(mx_unary(t->mx, &neg, MX_NEG, y));
  TR_TRY(tr_scalar(t, &zero, 0.0, dt));
  TR_TRY(mx_binary(t->mx, &is_neg, MX_LESS, a, zero));
  TR_TRY(mx_where(t->mx, &y, is_neg, neg, y));
  return tr_out_cast(t, 0, y);
}

/* Max, Min, Sum, Mean: a left fold of the (broadcasting) binary op over every input; Sum and
 * Mean of half types accumulate in float32 and round once. */
static int translate_variadic(tr_ctx *t, const ir_node *n, const op_row *r) {
  bool mean = r->code == MX_DIVIDE;
  mx_binary_op op = mean ? MX_ADD : (mx_binary_op)r->code;
  mx_array acc = NULL;
  int count = 0;
  for (int i = 0; i < n->n_inputs; i++) {
    mx_array x = tr_in(t, i);
    if (!x) continue;
    mx_dtype dt = mx_dtype_of(x);
    if (op == MX_ADD && (dt == MX_FLOAT16 || dt == MX_BFLOAT16))
      TR_TRY(mx_astype(t->mx, &x, x, MX_FLOAT32));
    if (acc) TR_TRY(mx_binary(t->mx, &acc, op, acc, x));
    else acc = x;
    count++;
  }
  if (!acc) return tr_fail(t, "%s needs at least one input", n->op_type);
  if (mean && count > 1) {
    mx_array c;
    TR_TRY(tr_scalar(t, &c, count, mx_dtype_of(acc)));
    TR_TRY(mx_binary(t->mx, &acc, MX_DIVIDE, acc, c));
  }
  return tr_out_cast(t, 0, acc);
}

/* Clip before opset 11: `min` and `max` attributes, whose defaults are -/+3.402823e+38 (float32's
 * range): an infinity is clamped to them, a float16 one stays (the default becomes inf). */
static int translate_clip_attr(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), lo, hi, y;
  TR_TRY(tr_scalar(t, &lo, ir_attr_float(n, "min", -FLT_MAX), mx_dtype_of(x)));
  TR_TRY(tr_scalar(t, &hi, ir_attr_float(n, "max", FLT_MAX), mx_dtype_of(x)));
  TR_TRY(mx_clip(t->mx, &y, x, lo, hi));
  return tr_out_cast(t, 0, y);
}

/* The bound an absent Clip min (or max) stands for from opset 11: the type's lowest (highest)
 * value, so that -inf (+inf) is clamped to it, as the spec says and ONNX Runtime does. Integers
 * need none: no value lies beyond their range. */
static int clip_default(tr_ctx *t, mx_dtype d, bool upper, mx_array *out) {
  double v = d == MX_FLOAT16 ? 65504.0 : d == MX_BFLOAT16 ? 3.3895313892515355e38
           : d == MX_FLOAT32 ? FLT_MAX : DBL_MAX;
  *out = NULL;
  if (!mx_dtype_is_float(d)) return MX_OK;
  return tr_scalar(t, out, upper ? v : -v, d);
}

/* Clip from opset 11: optional scalar inputs min and max. MLX's clip is max then min, so
 * min > max gives max everywhere, as ONNX specifies. A one-element 1-D bound is squeezed so it
 * cannot add a dimension to a scalar input. */
static int translate_clip_inputs(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x = tr_in(t, 0), bound[2] = {tr_in(t, 1), tr_in(t, 2)}, y;
  static const int axis0 = 0;
  for (int i = 0; i < 2; i++) {
    if (!bound[i]) continue;
    if (mx_ndim(bound[i]) > 1 || (mx_ndim(bound[i]) == 1 && mx_dim(bound[i], 0) != 1))
      return tr_fail(t, "Clip %s must be a scalar", i ? "max" : "min");
    if (mx_ndim(bound[i]) == 1) TR_TRY(mx_squeeze(t->mx, &bound[i], bound[i], &axis0, 1));
  }
  for (int i = 0; i < 2; i++)
    if (!bound[i]) TR_TRY(clip_default(t, mx_dtype_of(x), i == 1, &bound[i]));
  if (!bound[0] && !bound[1]) return tr_out(t, 0, x);
  TR_TRY(mx_clip(t->mx, &y, x, bound[0], bound[1]));
  return tr_out_cast(t, 0, y);
}

/* IsInf: +inf and/or -inf as detect_positive / detect_negative select (both default to 1). */
static int translate_isinf(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), pos, neg, y;
  bool want_pos = ir_attr_int(n, "detect_positive", 1) != 0;
  bool want_neg = ir_attr_int(n, "detect_negative", 1) != 0;
  TR_TRY(mx_unary(t->mx, &pos, MX_ISPOSINF, x));
  TR_TRY(mx_unary(t->mx, &neg, MX_ISNEGINF, x));
  if (want_pos && want_neg) TR_TRY(mx_binary(t->mx, &y, MX_LOGICAL_OR, pos, neg));
  else if (want_pos) y = pos;
  else if (want_neg) y = neg;
  else TR_TRY(mx_binary(t->mx, &y, MX_LOGICAL_AND, pos, neg)); /* never both: all false */
  return tr_out_cast(t, 0, y);
}

static int translate_bitshift(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array y;
  bool left = strcmp(ir_attr_string(n, "direction", ""), "LEFT") == 0;
  TR_TRY(mx_binary(t->mx, &y, left ? MX_LEFT_SHIFT : MX_RIGHT_SHIFT, tr_in(t, 0), tr_in(t, 1)));
  return tr_out_cast(t, 0, y);
}

/* CastLike: Cast to input 1's element type (the declared output type), as Cast converts. */
static int translate_castlike(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), like = tr_in(t, 1), y;
  int from = ir_input(t->g, n, 0)->elem_type, to = ir_input(t->g, n, 1)->elem_type;
  if (ir_to_mx_dtype(from) < 0 || ir_to_mx_dtype(to) < 0) { /* raw types */
    TR_TRY(lowbit_cast(t->mx, &y, x, from, to, ir_attr_int(n, "saturate", 1) != 0,
                       ir_attr_string(n, "round_mode", "up")));
    return tr_out(t, 0, y);
  }
  if (mx_dtype_of(x) == mx_dtype_of(like)) return tr_out(t, 0, x);
  TR_TRY(mx_astype(t->mx, &y, x, mx_dtype_of(like)));
  return tr_out(t, 0, y);
}

/* BitCast: the same bytes read as another type of the same size (shape unchanged). */
static int translate_bitcast(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), y;
  int to = ir_to_mx_dtype((int)ir_attr_int(n, "to", 0));
  if (to < 0) return tr_fail(t, "BitCast to an element type MLX cannot hold");
  if (mx_dtype_size((mx_dtype)to) != mx_dtype_size(mx_dtype_of(x)))
    return tr_fail(t, "BitCast changes the element size");
  if (mx_dtype_of(x) == (mx_dtype)to) return tr_out(t, 0, x);
  TR_TRY(mx_view(t->mx, &y, x, (mx_dtype)to));
  return tr_out(t, 0, y);
}

/* Sign: MLX's sign of NaN is 0; ONNX Runtime's (and numpy's) is NaN, kept here for floats. */
static int translate_sign(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array x = tr_in(t, 0), y, nan;
  TR_TRY(mx_unary(t->mx, &y, MX_SIGN, x));
  if (mx_dtype_is_float(mx_dtype_of(x))) {
    TR_TRY(mx_unary(t->mx, &nan, MX_ISNAN, x));
    TR_TRY(mx_where(t->mx, &y, nan, x, y));
  }
  return tr_out_cast(t, 0, y);
}

/* On the CPU device, in a graph built for one shape: a float32 operand that other operands'
 * leading dimensions broadcast (an attention mask [1, 1, 1, T] added to scores [1, H, T, T]) is
 * first copied out to the full shape. With a broadcast operand MLX runs the whole fused kernel
 * around the Add through its strided loop, scalar code; the copy is one vectorised pass. */
enum { MATERIALISE_MIN_ELEMENTS = 1 << 16 };
static int materialise_broadcast(tr_ctx *t, mx_array *a, mx_array other) {
  int rank = mx_ndim(*a) > mx_ndim(other) ? mx_ndim(*a) : mx_ndim(other);
  if (mx_dtype_of(*a) != MX_FLOAT32 || mx_ndim(*a) != rank || rank < 2 ||
      mx_ndim(other) != rank)
    return MX_OK;
  int shape[MX_MAX_RANK];
  long out = 1, mine = 1;
  for (int i = 0; i < rank; i++) {
    int d = mx_dim(*a, i), e = mx_dim(other, i);
    if (d != e && d != 1 && e != 1) return MX_OK; /* not broadcastable: MLX reports it */
    shape[i] = d > e ? d : e, out *= shape[i], mine *= d;
  }
  /* only a row broadcast: the last axis whole, some leading one stretched */
  if (mine == out || mx_dim(*a, -1) != shape[rank - 1] || out < MATERIALISE_MIN_ELEMENTS)
    return MX_OK;
  TR_TRY(mx_broadcast_to(t->mx, a, *a, shape, rank));
  return mx_contiguous(t->mx, a, *a);
}

/* The last Add of layer normalisation's nine-node spelling (the fusion table's layer_norm), on
 * the CPU device for float32: one host kernel from x, when scale and bias are vectors of x's last
 * axis. */
int op_build_layer_norm_nodes(tr_ctx *t, const ir_node *n, const op_fusion_match *m, bool *done) {
  (void)n;
  const fz_layer_norm *ln = &m->u.layer_norm;
  if (!cpu_kernel_applies(t, tr_in(t, 0))) return MX_OK;
  mx_array x = t->values[ln->x], scale = t->values[ln->scale], bias = t->values[ln->bias], y;
  bool vectors = x && scale && bias && cpu_kernel_applies(t, x) && mx_ndim(x) >= 1 &&
                 (ln->need_rank < 0 || mx_ndim(x) == ln->need_rank) &&
                 mx_dtype_of(scale) == MX_FLOAT32 && mx_dtype_of(bias) == MX_FLOAT32 &&
                 mx_ndim(scale) == 1 && mx_ndim(bias) == 1 &&
                 mx_dim(scale, 0) == mx_dim(x, -1) && mx_dim(bias, 0) == mx_dim(x, -1);
  if (!vectors) return MX_OK;
  TR_TRY(cpu_layer_norm_last(t, x, NULL, scale, bias, ln->eps, &y));
  tr_note_path(t, TR_PATH_HOST_KERNEL, "layer_norm", 0,
               "last of a layer normalisation's nine nodes: one host kernel (CPU)");
  *done = true;
  return tr_out_cast(t, 0, y);
}

/* Add of a MatMul's product (read nowhere else) and a float32 bias [N] on the CPU device, in a
 * graph built for one shape (eager or keyed; the fusion table's bias): one addmm, so that BLAS
 * accumulates onto the bias instead of zeroing its output and MLX adding a broadcast row in its
 * strided (scalar) loop. */
int op_build_bias_into_product(tr_ctx *t, const ir_node *n, const op_fusion_match *m,
                               bool *done) {
  (void)n;
  if (t->mx->device != MX_DEVICE_CPU || t->trace == TR_TRACE_SHAPELESS) return MX_OK;
  for (int i = 0; i < 2; i++) {
    mx_array product = tr_in(t, i), bias = tr_in(t, 1 - i), y;
    if (!(m->u.product_inputs >> i & 1u)) continue;
    if (mx_dtype_of(product) != MX_FLOAT32 || mx_dtype_of(bias) != MX_FLOAT32 ||
        mx_ndim(bias) != 1 || mx_ndim(product) < 2 || mx_dim(bias, 0) != mx_dim(product, -1))
      continue;
    bool packed = mx_is_host_kernel(product); /* cpu/matmul.c's, with a packed weight */
    TR_TRY(mx_fold_into_product(t->mx, &y, product, bias));
    if (!y) continue;
    if (packed)
      tr_note_path(t, TR_PATH_EPILOGUE, "bias", 0, "folded into the MatMul (packed weight)");
    else
      tr_note_path(t, TR_PATH_MLX_FUSED, "addmm", 0, "folded into the MatMul (addmm)");
    *done = true;
    return tr_out(t, 0, y);
  }
  return MX_OK;
}

/* On the CPU device, a large broadcast float32 operand is copied out to full shape first. */
static int translate_add(tr_ctx *t, const ir_node *n, const op_row *r) {
  if (t->mx->device == MX_DEVICE_CPU && t->trace != TR_TRACE_SHAPELESS) {
    mx_array a = tr_in(t, 0), b = tr_in(t, 1), y;
    TR_TRY(materialise_broadcast(t, &a, b));
    TR_TRY(materialise_broadcast(t, &b, a));
    TR_TRY(mx_binary(t->mx, &y, MX_ADD, a, b));
    return tr_out_cast(t, 0, y);
  }
  return op_translate_binary(t, n, r);
}

/* An activation spelled in nodes whose last is a Mul, from its input x, as one host kernel on the
 * CPU device for float32 (the spelling's inner nodes are translated but never evaluated): Gelu's
 * five nodes, or Swish's x * Sigmoid(x * beta). When only the spelling reads x, the kernel
 * computing x applies it to the rows it has just finished (MiniLM's feed-forward layers), and
 * the node's path note says which of the two it became. The Erf (Sigmoid) inside is noted as
 * computed by this kernel. */
typedef struct spelled_activation {
  bool gelu;
  float beta; /* Swish's */
  const char *as_epilogue, *as_kernel; /* path notes */
  const char *kernel;                  /* the path's kernel id */
  unsigned folds;                      /* TR_FOLD_SCALE: Swish's beta */
  int inside;                          /* the Erf's (Sigmoid's) node index */
  const char *inside_note;
} spelled_activation;

static int translate_spelled(tr_ctx *t, int x, const spelled_activation *a) {
  const ir_value *xv = &t->g->values[x];
  mx_array in = t->values[x], y = NULL;
  if (xv->readers == 2 && !xv->is_graph_output)
    TR_TRY(a->gelu ? cpu_gelu_fold(t, in, &y) : cpu_swish_fold(t, in, a->beta, &y));
  if (y) {
    tr_note_path(t, TR_PATH_EPILOGUE, a->kernel, a->folds, a->as_epilogue);
  } else {
    TR_TRY(a->gelu ? cpu_gelu(t, in, &y) : cpu_swish(t, in, a->beta, &y));
    tr_note_path(t, TR_PATH_HOST_KERNEL, a->kernel, a->folds, a->as_kernel);
  }
  tr_note_path_of(t, a->inside, TR_PATH_INSIDE, a->kernel, 0, a->inside_note);
  return tr_out_cast(t, 0, y);
}

/* Whether the spelling from x runs as a host kernel here: float32 on the CPU device, and no
 * constant of the spelling wider than x. */
static bool spelled_applies(tr_ctx *t, int x, int const_rank) {
  mx_array in = t->values[x];
  return cpu_kernel_applies(t, tr_in(t, 0)) && in && cpu_kernel_applies(t, in) &&
         const_rank <= mx_ndim(in);
}

int op_build_gelu_nodes(tr_ctx *t, const ir_node *n, const op_fusion_match *m, bool *done) {
  (void)n;
  const fz_gelu *g = &m->u.gelu;
  if (!spelled_applies(t, g->x, g->const_rank)) return MX_OK;
  spelled_activation gelu = {
      true, 0.0f,
      "last of a Gelu's five nodes: the epilogue of the kernel computing its input (CPU)",
      "last of a Gelu's five nodes: one host kernel (CPU)", "gelu", 0, g->erf_node,
      "inside a Gelu: its last Mul's host kernel computes it"};
  *done = true;
  return translate_spelled(t, g->x, &gelu);
}

int op_build_swish_nodes(tr_ctx *t, const ir_node *n, const op_fusion_match *m, bool *done) {
  (void)n;
  const fz_swish *s = &m->u.swish;
  if (!spelled_applies(t, s->x, s->const_rank)) return MX_OK;
  spelled_activation swish = {
      false, s->beta, "Swish, x * Sigmoid(x): the epilogue of the kernel computing x (CPU)",
      "Swish, x * Sigmoid(x): one host kernel (CPU)", "swish", 0, s->sigmoid_node,
      "inside a Swish: its Mul's host kernel computes it"};
  if (s->beta != 1.0f) {
    swish.as_epilogue = "x * Sigmoid(x * beta): the epilogue of the kernel computing x (CPU)";
    swish.as_kernel = "x * Sigmoid(x * beta): one host kernel (CPU)";
    swish.folds = TR_FOLD_SCALE;
  }
  *done = true;
  return translate_spelled(t, s->x, &swish);
}

static int translate_where(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array y;
  TR_TRY(mx_where(t->mx, &y, tr_in(t, 0), tr_in(t, 1), tr_in(t, 2)));
  return tr_out_cast(t, 0, y);
}

#define BINARY(name, lo, hi, op, types) \
  {"", name, lo, hi, claim_same_types, op_translate_binary, OP_SHAPELESS, types, op, NULL}
#define UNARY(name, lo, hi, op, types) \
  {"", name, lo, hi, NULL, op_translate_unary, OP_SHAPELESS, types, op, NULL}
#define VARIADIC(name, lo, hi, op, types) \
  {"", name, lo, hi, claim_same_types, translate_variadic, OP_SHAPELESS, types, op, \
   "variadic, numpy broadcasting"}

const op_row ops_elementwise_rows[] = {
    {"", "Add", 7, 14, claim_same_types, translate_add, OP_SHAPELESS, OP_NUMERIC | OP_F64, MX_ADD,
     "CPU: a large broadcast float32 operand is copied out to full shape first; anchors the "
     "layer_norm, bias and chain fusions"},
    BINARY("Sub", 7, 14, MX_SUBTRACT, OP_NUMERIC | OP_F64),
    {"", "Mul", 7, 14, claim_same_types, op_translate_binary, OP_SHAPELESS, OP_NUMERIC | OP_F64,
     MX_MULTIPLY, "anchors the gelu, swish and chain fusions"},
    {"", "Div", 7, 14, claim_same_types, translate_div, OP_SHAPELESS, OP_NUMERIC | OP_F64,
     MX_DIVIDE, "integer division truncates toward zero"},
    {"", "Pow", 7, 15, NULL, translate_pow, OP_SHAPELESS, OP_NUMERIC | OP_F64, MX_POWER, NULL},
    {"", "Mod", 10, 13, claim_mod, translate_mod, OP_SHAPELESS, OP_NUMERIC | OP_F64, 0,
     "fmod=0: sign of the divisor; fmod=1: sign of the dividend; floats with fmod=0 declined"},
    VARIADIC("Max", 6, 13, MX_MAXIMUM, OP_NUMERIC | OP_F64),
    VARIADIC("Min", 6, 13, MX_MINIMUM, OP_NUMERIC | OP_F64),
    {"", "Sum", 6, 13, claim_same_types, translate_variadic, OP_SHAPELESS, OP_FLOATS | OP_F64,
     MX_ADD, "variadic, numpy broadcasting; half types accumulate in float32"},
    {"", "Mean", 6, 13, claim_same_types, translate_variadic, OP_SHAPELESS, OP_FLOATS | OP_F64,
     MX_DIVIDE, "variadic, numpy broadcasting; half types accumulate in float32"},
    {"", "Clip", 6, 10, NULL, translate_clip_attr, OP_SHAPELESS, OP_FLOATS | OP_F64, 0,
     "min/max attributes"},
    {"", "Clip", 11, 11, claim_clip, translate_clip_inputs, OP_SHAPELESS, OP_FLOATS | OP_F64, 0,
     "optional scalar min/max inputs"},
    {"", "Clip", 12, 13, claim_clip, translate_clip_inputs, OP_SHAPELESS, OP_NUMERIC | OP_F64, 0,
     "optional scalar min/max inputs; integers from opset 12"},
    BINARY("Equal", 7, 19, MX_EQUAL, OP_ALL | OP_F64),
    BINARY("Less", 7, 13, MX_LESS, OP_NUMERIC | OP_F64),
    BINARY("Greater", 7, 13, MX_GREATER, OP_NUMERIC | OP_F64),
    BINARY("LessOrEqual", 12, 16, MX_LESS_EQUAL, OP_NUMERIC | OP_F64),
    BINARY("GreaterOrEqual", 12, 16, MX_GREATER_EQUAL, OP_NUMERIC | OP_F64),
    UNARY("Not", 1, 1, MX_LOGICAL_NOT, OP_T(IR_BOOL)),
    BINARY("And", 7, 7, MX_LOGICAL_AND, OP_T(IR_BOOL)),
    BINARY("Or", 7, 7, MX_LOGICAL_OR, OP_T(IR_BOOL)),
    BINARY("Xor", 7, 7, MX_NOT_EQUAL, OP_T(IR_BOOL)),
    {"", "Where", 9, 16, claim_where, translate_where, OP_SHAPELESS, OP_T(IR_BOOL) | OP_F64, 0,
     NULL},
    BINARY("BitwiseAnd", 18, 18, MX_BITWISE_AND, OP_INTS),
    BINARY("BitwiseOr", 18, 18, MX_BITWISE_OR, OP_INTS),
    BINARY("BitwiseXor", 18, 18, MX_BITWISE_XOR, OP_INTS),
    UNARY("BitwiseNot", 18, 18, MX_BITWISE_INVERT, OP_INTS),
    {"", "BitShift", 11, 11, claim_bitshift, translate_bitshift, OP_SHAPELESS, OP_UNSIGNED, 0,
     "direction LEFT or RIGHT; shifts by the type's width or more are undefined (as in C)"},
    UNARY("Neg", 6, 13, MX_NEG, OP_FLOATS | OP_SIGNED | OP_F64),
    UNARY("Abs", 6, 13, MX_ABS, OP_NUMERIC | OP_F64),
    {"", "Sign", 9, 13, NULL, translate_sign, OP_SHAPELESS, OP_NUMERIC | OP_F64, MX_SIGN,
     "NaN for NaN"},
    UNARY("Exp", 6, 13, MX_EXP, OP_FLOATS),
    UNARY("Log", 6, 13, MX_LOG, OP_FLOATS | OP_F64),
    UNARY("Sqrt", 6, 13, MX_SQRT, OP_FLOATS | OP_F64),
    UNARY("Reciprocal", 6, 13, MX_RECIPROCAL, OP_FLOATS | OP_F64),
    {"", "Erf", 9, 13, NULL, op_translate_unary, OP_SHAPELESS_GPU, OP_FLOATS, MX_ERF,
     "CPU, float32: a host kernel"},
    UNARY("Sin", 7, 22, MX_SIN, OP_FLOATS),
    UNARY("Cos", 7, 22, MX_COS, OP_FLOATS),
    UNARY("Tan", 7, 22, MX_TAN, OP_FLOATS),
    UNARY("Asin", 7, 22, MX_ASIN, OP_FLOATS),
    UNARY("Acos", 7, 22, MX_ACOS, OP_FLOATS),
    UNARY("Atan", 7, 22, MX_ATAN, OP_FLOATS | OP_F64),
    UNARY("Sinh", 9, 22, MX_SINH, OP_FLOATS | OP_F64),
    UNARY("Cosh", 9, 22, MX_COSH, OP_FLOATS),
    UNARY("Asinh", 9, 22, MX_ASINH, OP_FLOATS),
    UNARY("Acosh", 9, 22, MX_ACOSH, OP_FLOATS),
    UNARY("Atanh", 9, 22, MX_ATANH, OP_FLOATS),
    UNARY("Floor", 6, 13, MX_FLOOR, OP_FLOATS | OP_F64),
    UNARY("Ceil", 6, 13, MX_CEIL, OP_FLOATS | OP_F64),
    {"", "Round", 11, 22, NULL, op_translate_unary, OP_SHAPELESS, OP_FLOATS | OP_F64, MX_ROUND,
     "halves round to even"},
    UNARY("IsNaN", 9, 20, MX_ISNAN, OP_FLOATS | OP_F64),
    {"", "IsInf", 10, 20, NULL, translate_isinf, OP_SHAPELESS, OP_FLOATS | OP_F64, 0,
     "detect_positive / detect_negative"},
    {"", "CastLike", 15, 25, NULL, translate_castlike, OP_SHAPELESS, OP_ALL | OP_RAW, 0,
     "converts as Cast does (float8/float4/int4/uint4/int2/uint2 included); string/float64 "
     "declined"},
    {"", "BitCast", 26, 26, claim_bitcast, translate_bitcast, OP_SHAPE_KEYED, 0, 0,
     "same-size types only; shape-keyed: MLX's view has no shapeless form"},
    OP_ROWS_END,
};
