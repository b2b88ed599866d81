/*
 * Elementwise entry points: unary and binary operations, where, casts, bit views and clip. Each
 * takes its operands through Elementwise (layout.cpp), which applies the context device's layout
 * policy (fusion barriers, sunk transposes, single values as scalars) and wraps the result; with
 * no policy set they build exactly the MLX operation named.
 */
#include "mlx/mx_internal.hpp"

using namespace mxb;

extern "C" {

/* --- elementwise ------------------------------------------------------------------------- */
int mx_unary(mx_ctx *ctx, mx_array *out, mx_unary_op op, mx_array a) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {a});
    const mc::array &x = ops[0];
    switch (op) {
      case MX_ABS: return ops.wrap(ctx, out, mc::abs(x, s));
      case MX_NEG: return ops.wrap(ctx, out, mc::negative(x, s));
      case MX_EXP: return ops.wrap(ctx, out, mc::exp(x, s));
      case MX_LOG: return ops.wrap(ctx, out, mc::log(x, s));
      case MX_SQRT: return ops.wrap(ctx, out, mc::sqrt(x, s));
      case MX_RSQRT: return ops.wrap(ctx, out, mc::rsqrt(x, s));
      case MX_RECIPROCAL: return ops.wrap(ctx, out, mc::reciprocal(x, s));
      case MX_SIGMOID: return ops.wrap(ctx, out, mc::sigmoid(x, s));
      case MX_TANH: return ops.wrap(ctx, out, mc::tanh(x, s));
      case MX_ERF: return ops.wrap(ctx, out, mc::erf(x, s));
      case MX_SIN: return ops.wrap(ctx, out, mc::sin(x, s));
      case MX_COS: return ops.wrap(ctx, out, mc::cos(x, s));
      case MX_TAN: return ops.wrap(ctx, out, mc::tan(x, s));
      case MX_ASIN: return ops.wrap(ctx, out, mc::arcsin(x, s));
      case MX_ACOS: return ops.wrap(ctx, out, mc::arccos(x, s));
      case MX_ATAN: return ops.wrap(ctx, out, mc::arctan(x, s));
      case MX_SINH: return ops.wrap(ctx, out, mc::sinh(x, s));
      case MX_COSH: return ops.wrap(ctx, out, mc::cosh(x, s));
      case MX_ASINH: return ops.wrap(ctx, out, mc::arcsinh(x, s));
      case MX_ACOSH: return ops.wrap(ctx, out, mc::arccosh(x, s));
      case MX_ATANH: return ops.wrap(ctx, out, mc::arctanh(x, s));
      case MX_FLOOR: return ops.wrap(ctx, out, mc::floor(x, s));
      case MX_CEIL: return ops.wrap(ctx, out, mc::ceil(x, s));
      case MX_ROUND: return ops.wrap(ctx, out, mc::round(x, s));
      case MX_SIGN: return ops.wrap(ctx, out, mc::sign(x, s));
      case MX_LOGICAL_NOT: return ops.wrap(ctx, out, mc::logical_not(x, s));
      case MX_ISNAN: return ops.wrap(ctx, out, mc::isnan(x, s));
      case MX_ISPOSINF: return ops.wrap(ctx, out, mc::isposinf(x, s));
      case MX_ISNEGINF: return ops.wrap(ctx, out, mc::isneginf(x, s));
      case MX_SQUARE: return ops.wrap(ctx, out, mc::square(x, s));
      case MX_LOG1P: return ops.wrap(ctx, out, mc::log1p(x, s));
      case MX_EXPM1: return ops.wrap(ctx, out, mc::expm1(x, s));
      case MX_BITWISE_INVERT: return ops.wrap(ctx, out, mc::bitwise_invert(x, s));
      case MX_UNARY_OP_COUNT: break;
    }
    throw std::invalid_argument("unknown unary op");
  });
}

int mx_binary(mx_ctx *ctx, mx_array *out, mx_binary_op op, mx_array a, mx_array b) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {a, b});
    const mc::array &x = ops[0], &y = ops[1];
    switch (op) {
      case MX_ADD: return ops.wrap(ctx, out, mc::add(x, y, s));
      case MX_SUBTRACT: return ops.wrap(ctx, out, mc::subtract(x, y, s));
      case MX_MULTIPLY: return ops.wrap(ctx, out, mc::multiply(x, y, s));
      case MX_DIVIDE: return ops.wrap(ctx, out, mc::divide(x, y, s));
      case MX_POWER: return ops.wrap(ctx, out, mc::power(x, y, s));
      case MX_MAXIMUM: return ops.wrap(ctx, out, mc::maximum(x, y, s));
      case MX_MINIMUM: return ops.wrap(ctx, out, mc::minimum(x, y, s));
      case MX_EQUAL: return ops.wrap(ctx, out, mc::equal(x, y, s));
      case MX_NOT_EQUAL: return ops.wrap(ctx, out, mc::not_equal(x, y, s));
      case MX_LESS: return ops.wrap(ctx, out, mc::less(x, y, s));
      case MX_LESS_EQUAL: return ops.wrap(ctx, out, mc::less_equal(x, y, s));
      case MX_GREATER: return ops.wrap(ctx, out, mc::greater(x, y, s));
      case MX_GREATER_EQUAL: return ops.wrap(ctx, out, mc::greater_equal(x, y, s));
      case MX_LOGICAL_AND: return ops.wrap(ctx, out, mc::logical_and(x, y, s));
      case MX_LOGICAL_OR: return ops.wrap(ctx, out, mc::logical_or(x, y, s));
      case MX_REMAINDER: return ops.wrap(ctx, out, mc::remainder(x, y, s));
      case MX_FLOOR_DIVIDE: return ops.wrap(ctx, out, mc::floor_divide(x, y, s));
      case MX_BITWISE_AND: return ops.wrap(ctx, out, mc::bitwise_and(x, y, s));
      case MX_BITWISE_OR: return ops.wrap(ctx, out, mc::bitwise_or(x, y, s));
      case MX_BITWISE_XOR: return ops.wrap(ctx, out, mc::bitwise_xor(x, y, s));
      case MX_LEFT_SHIFT: return ops.wrap(ctx, out, mc::left_shift(x, y, s));
      case MX_RIGHT_SHIFT: return ops.wrap(ctx, out, mc::right_shift(x, y, s));
      case MX_ATAN2: return ops.wrap(ctx, out, mc::arctan2(x, y, s));
      case MX_LOGADDEXP: return ops.wrap(ctx, out, mc::logaddexp(x, y, s));
      case MX_BINARY_OP_COUNT: break;
    }
    throw std::invalid_argument("unknown binary op");
  });
}

int mx_where(mx_ctx *ctx, mx_array *out, mx_array cond, mx_array x, mx_array y) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {cond, x, y});
    return ops.wrap(ctx, out, mc::where(ops[0], ops[1], ops[2], s));
  });
}

int mx_astype(mx_ctx *ctx, mx_array *out, mx_array a, mx_dtype dtype) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {a});
    return ops.wrap(ctx, out, mc::astype(ops[0], to_mlx(dtype), s));
  });
}

int mx_view(mx_ctx *ctx, mx_array *out, mx_array a, mx_dtype dtype) {
  MX_RESULT(mc::view(A(a), to_mlx(dtype), device_of(ctx)));
}

int mx_clip(mx_ctx *ctx, mx_array *out, mx_array a, mx_array lo, mx_array hi) {
  MX_GUARD(ctx, out, {
    auto s = device_of(ctx);
    Elementwise ops(ctx, {a, lo, hi}, true);
    std::optional<mc::array> l, h;
    if (lo) l = ops[1];
    if (hi) h = ops[lo ? 2 : 1];
    return ops.wrap(ctx, out, mc::clip(ops[0], l, h, s));
  });
}

}  // extern "C"
