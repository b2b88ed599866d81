/*
 * Elementwise operators: arithmetic (Add, Sub, Mul, Div, Pow), comparison (Equal, Less,
 * Greater), logic (Not, Where) and unary math (Neg, Abs, Exp, Log, Sqrt, Reciprocal, Erf). ONNX
 * broadcasting is numpy's, which MLX shares; ONNX does not promote types, so inputs must agree
 * (Pow excepted) and results are cast to the declared output type. Integer Div truncates toward
 * zero as ONNX Runtime does, which MLX's divide (a float result) and floor_divide do not.
 * Rows from opset 7 on: earlier versions used a `broadcast` attribute we do not translate.
 */
#include "ops/families.h"
#include "plan/translate.h"

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

/* --- translators ------------------------------------------------------------------------- */
static int cast_to_output(tr_ctx *t, mx_array y) {
  mx_dtype want = tr_out_dtype(t, 0);
  if (mx_dtype_of(y) != want) TR_TRY(mx_astype(t->mx, &y, y, want));
  return tr_out(t, 0, y);
}

static int translate_binary(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n;
  mx_array y;
  TR_TRY(mx_binary(t->mx, &y, (mx_binary_op)r->code, tr_in(t, 0), tr_in(t, 1)));
  return cast_to_output(t, y);
}

static int translate_unary(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n;
  mx_array y;
  TR_TRY(mx_unary(t->mx, &y, (mx_unary_op)r->code, tr_in(t, 0)));
  return cast_to_output(t, y);
}

/* Integer division truncating toward zero: |a| // |b| with the sign of a*b. */
static int translate_div(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array a = tr_in(t, 0), b = tr_in(t, 1);
  if (mx_dtype_is_float(mx_dtype_of(a))) return translate_binary(t, n, r);
  mx_array q;
  if (mx_dtype_is_unsigned_int(mx_dtype_of(a))) {
    TR_TRY(mx_binary(t->mx, &q, MX_FLOOR_DIVIDE, a, b));
    return cast_to_output(t, q);
  }
  mx_array abs_a, abs_b, sa, sb, sign;
  TR_TRY(mx_unary(t->mx, &abs_a, MX_ABS, a));
  TR_TRY(mx_unary(t->mx, &abs_b, MX_ABS, b));
  TR_TRY(mx_binary(t->mx, &q, MX_FLOOR_DIVIDE, abs_a, abs_b));
  TR_TRY(mx_unary(t->mx, &sa, MX_SIGN, a));
  TR_TRY(mx_unary(t->mx, &sb, MX_SIGN, b));
  TR_TRY(mx_binary(t->mx, &sign, MX_MULTIPLY, sa, sb));
  TR_TRY(mx_binary(t->mx, &q, MX_MULTIPLY, q, sign));
  return cast_to_output(t, q);
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
 * float32 and truncated back (exact while results fit float32's 24-bit mantissa). */
static int translate_pow(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array a = tr_in(t, 0), b = tr_in(t, 1), y;
  mx_dtype ta = mx_dtype_of(a);
  if (mx_dtype_is_float(ta)) {
    if (mx_dtype_of(b) != ta) TR_TRY(mx_astype(t->mx, &b, b, ta));
    TR_TRY(mx_binary(t->mx, &y, MX_POWER, a, b));
  } else if (mx_dtype_is_float(mx_dtype_of(b))) {
    mx_array af;
    TR_TRY(mx_astype(t->mx, &af, a, MX_FLOAT32));
    TR_TRY(mx_astype(t->mx, &b, b, MX_FLOAT32));
    TR_TRY(mx_binary(t->mx, &y, MX_POWER, af, b));
  } else {
    if (mx_dtype_of(b) != ta) TR_TRY(mx_astype(t->mx, &b, b, ta));
    TR_TRY(mx_binary(t->mx, &y, MX_POWER, a, b));
    if (!mx_dtype_is_unsigned_int(ta)) TR_TRY(int_negative_powers(t, a, b, &y));
  }
  return cast_to_output(t, y);
}

static int translate_where(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array y;
  TR_TRY(mx_where(t->mx, &y, tr_in(t, 0), tr_in(t, 1), tr_in(t, 2)));
  return cast_to_output(t, y);
}

#define BINARY(name, lo, hi, op, types) \
  {"", name, lo, hi, claim_same_types, translate_binary, OP_SHAPELESS, types, op, NULL}
#define UNARY(name, lo, hi, op, types) \
  {"", name, lo, hi, NULL, translate_unary, OP_SHAPELESS, types, op, NULL}

const op_row ops_elementwise_rows[] = {
    BINARY("Add", 7, 14, MX_ADD, OP_NUMERIC),
    BINARY("Sub", 7, 14, MX_SUBTRACT, OP_NUMERIC),
    BINARY("Mul", 7, 14, MX_MULTIPLY, OP_NUMERIC),
    {"", "Div", 7, 14, claim_same_types, translate_div, OP_SHAPELESS, OP_NUMERIC, MX_DIVIDE,
     "integer division truncates toward zero"},
    {"", "Pow", 7, 15, NULL, translate_pow, OP_SHAPELESS, OP_NUMERIC, MX_POWER, NULL},
    BINARY("Equal", 7, 19, MX_EQUAL, OP_ALL),
    BINARY("Less", 7, 13, MX_LESS, OP_NUMERIC),
    BINARY("Greater", 7, 13, MX_GREATER, OP_NUMERIC),
    UNARY("Not", 1, 1, MX_LOGICAL_NOT, OP_T(IR_BOOL)),
    {"", "Where", 9, 16, claim_where, translate_where, OP_SHAPELESS, OP_T(IR_BOOL), 0, NULL},
    UNARY("Neg", 6, 13, MX_NEG, OP_FLOATS | OP_SIGNED),
    UNARY("Abs", 6, 13, MX_ABS, OP_NUMERIC),
    UNARY("Exp", 6, 13, MX_EXP, OP_FLOATS),
    UNARY("Log", 6, 13, MX_LOG, OP_FLOATS),
    UNARY("Sqrt", 6, 13, MX_SQRT, OP_FLOATS),
    UNARY("Reciprocal", 6, 13, MX_RECIPROCAL, OP_FLOATS),
    UNARY("Erf", 9, 13, MX_ERF, OP_FLOATS),
    OP_ROWS_END,
};
