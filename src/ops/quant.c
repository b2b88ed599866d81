/*
 * Quantization: QuantizeLinear and DequantizeLinear (per-tensor, per-axis and, from opset 21,
 * blocked scales and zero points), DynamicQuantizeLinear, and the integer products MatMulInteger,
 * ConvInteger, QLinearMatMul and QLinearConv. Quantizing divides by the scale, rounds half to
 * even, adds the zero point and saturates to the integer type; x and a scale of the same type are
 * divided in float32 (as ONNX Runtime's CPU kernel does, also for float16), a scale of another type
 * sets the precision (as the spec says) unless the `precision` attribute names one. Dequantizing
 * subtracts the zero point in int32 and multiplies in float32. Int4/int2, float8 and float4 types
 * are refused by the registry's generic check (MLX holds none of them). MLX multiplies and
 * convolves floating-point operands only, so the integer products are computed exactly in float32:
 * operands minus their zero points are integers of magnitude at most 255, and a product is exact
 * when every partial sum stays within 2^24. Where n terms of the largest possible magnitude could
 * exceed that, one operand (then both) is split into base-16 digits (d = 16 * hi + lo, lo in
 * [0, 15]), each partial product is computed exactly in float32, converted to int32 and the
 * results are recombined in int32: one product up to n = 258 terms, two up to 4112, four up to
 * 65535; longer contractions are declined. This holds under TF32 too (MLX's default for float32
 * products on CUDA GPUs): TF32 keeps every integer up to 2^11 and accumulates in float32. The int32
 * accumulators wrap as ONNX Runtime's do.
 * Requantizing (QLinear*) multiplies the int32 result by a_scale * b_scale / y_scale in float32,
 * rounds half to even, adds y_zero_point and saturates, as ONNX Runtime's CPU kernels do.
 */
#include "ops/conv.h"
#include "ops/families.h"
#include "ops/lowbit.h"
#include "ops/window.h"
#include "plan/translate.h"

enum { QUANT_EXACT = 1 << 24 };

#define Q_TYPES (OP_FLOATS | OP_T(IR_INT32))
/* Raw quantized types (see OP_RAW) by the opset that brought them: float8 (19; float8e8m0 is a
 * scale type and not translated), int4/uint4 (21), float4e2m1 (23), int2/uint2 (25). */
#define RAW19 (OP_T(IR_FLOAT8E4M3FN) | OP_T(IR_FLOAT8E4M3FNUZ) | OP_T(IR_FLOAT8E5M2) |          \
               OP_T(IR_FLOAT8E5M2FNUZ))
#define RAW21 (RAW19 | OP_T(IR_INT4) | OP_T(IR_UINT4))
#define RAW23 (RAW21 | OP_T(IR_FLOAT4E2M1))
#define RAW25 (RAW23 | OP_T(IR_INT2) | OP_T(IR_UINT2))
#define Q_RAW RAW25 /* float32 holds every integer up to 2^24 */

/* --- shared helpers ---------------------------------------------------------------------- */
static bool is_int_type(int t) {
  return t == IR_INT8 || t == IR_UINT8 || t == IR_INT16 || t == IR_UINT16;
}

static bool is_8bit(int t) { return t == IR_INT8 || t == IR_UINT8; }

/* The saturation range of the integer types quantization produces. */
static bool int_range(mx_dtype d, double *lo, double *hi) {
  switch (d) {
    case MX_INT8: *lo = -128, *hi = 127; return true;
    case MX_UINT8: *lo = 0, *hi = 255; return true;
    case MX_INT16: *lo = -32768, *hi = 32767; return true;
    case MX_UINT16: *lo = 0, *hi = 65535; return true;
    default: return false;
  }
}

static int cast(tr_ctx *t, mx_array *a, mx_dtype d) {
  if (*a && mx_dtype_of(*a) != d) TR_TRY(mx_astype(t->mx, a, *a, d));
  return MX_OK;
}

/* The saturation range of the packed integer types (carried as int8/uint8). */
static bool raw_int_range(int elem, double *lo, double *hi) {
  switch (elem) {
    case IR_INT4: *lo = -8, *hi = 7; return true;
    case IR_UINT4: *lo = 0, *hi = 15; return true;
    case IR_INT2: *lo = -2, *hi = 1; return true;
    case IR_UINT2: *lo = 0, *hi = 3; return true;
    default: return false;
  }
}

/* saturate(round(v) + zp) as dtype out: v is rounded half to even in its own type (exact), the
 * zero point added and the range applied in float32 (exact for every 16-bit integer). A packed
 * integer output type (elem, when raw) narrows the range to its own. */
static int round_saturate(tr_ctx *t, mx_array v, mx_array zp, mx_dtype out, int elem,
                          mx_array *y) {
  double lo, hi;
  if (!raw_int_range(elem, &lo, &hi) && !int_range(out, &lo, &hi))
    return tr_fail(t, "quantized output type %s is not int8, uint8, int16 or uint16",
                   mx_dtype_name(out));
  mx_array vlo, vhi;
  TR_TRY(mx_unary(t->mx, &v, MX_ROUND, v));
  TR_TRY(cast(t, &v, MX_FLOAT32));
  if (zp) {
    TR_TRY(cast(t, &zp, MX_FLOAT32));
    TR_TRY(mx_binary(t->mx, &v, MX_ADD, v, zp));
  }
  TR_TRY(tr_scalar(t, &vlo, lo, MX_FLOAT32));
  TR_TRY(tr_scalar(t, &vhi, hi, MX_FLOAT32));
  TR_TRY(mx_clip(t->mx, &v, v, vlo, vhi));
  return mx_astype(t->mx, y, v, out);
}

/* A one-element 1-D parameter as a scalar (MLX's squeeze fails on any other length). */
static int squeeze_one(tr_ctx *t, mx_array p, const char *what, mx_array *out) {
  static const int axis0 = 0;
  if (mx_dim(p, 0) != 1)
    return tr_fail(t, "%s has %d elements where only a per-tensor value (one element) fits", what,
                   mx_dim(p, 0));
  return mx_squeeze(t->mx, out, p, &axis0, 1);
}

/* Brings a scale or zero point p of Quantize/DequantizeLinear into broadcasting position against
 * x: a scalar as is; a 1-D p along `axis` (trailing unit axes added; where x has no such axis it
 * must hold one element and becomes a scalar); with block > 0, a p of x's rank whose dimension
 * `axis` is ceil(D / block), repeated block times along it and cut to x's length D. */
static int align_param(tr_ctx *t, mx_array p, mx_array x, int64_t axis_attr, int64_t block,
                       const char *what, mx_array *out) {
  *out = p;
  if (!p) return MX_OK;
  int r = mx_ndim(x), pr = mx_ndim(p), axis;
  if (block > 0) {
    TR_TRY(tr_axis(t, axis_attr, r, &axis));
    if (pr != r) return tr_fail(t, "blocked %s has rank %d, x has rank %d", what, pr, r);
    int d = mx_dim(x, axis);
    for (int i = 0; i < r; i++) {
      int want = i == axis ? (int)((d + block - 1) / block) : mx_dim(x, i);
      if (mx_dim(p, i) != want)
        return tr_fail(t, "blocked %s has dimension %d of size %d, expected %d (block_size %lld)",
                       what, i, mx_dim(p, i), want, (long long)block);
    }
    mx_array idx, b;
    TR_TRY(mx_arange(t->mx, &idx, 0, d, 1, MX_INT32));
    TR_TRY(mx_scalar_int(t->mx, &b, block, MX_INT32));
    TR_TRY(mx_binary(t->mx, &idx, MX_FLOOR_DIVIDE, idx, b));
    return mx_take(t->mx, out, p, idx, axis);
  }
  if (pr == 0) return MX_OK;
  if (pr != 1)
    return tr_fail(t, "%s has rank %d: a scalar, a 1-D per-axis tensor or (with block_size) a "
                      "blocked tensor is expected", what, pr);
  if (r == 0 || axis_attr < -r || axis_attr >= r) return squeeze_one(t, p, what, out);
  TR_TRY(tr_axis(t, axis_attr, r, &axis));
  if (mx_dim(p, 0) != 1 && mx_dim(p, 0) != mx_dim(x, axis))
    return tr_fail(t, "per-axis %s has %d elements, x has %d along axis %d", what, mx_dim(p, 0),
                   mx_dim(x, axis), axis);
  int axes[MX_MAX_RANK], k = 0;
  for (int i = 1; i < r - axis; i++) axes[k++] = i;
  if (k) TR_TRY(mx_expand_dims(t->mx, out, p, axes, k));
  return MX_OK;
}

/* What Quantize/DequantizeLinear's claims check of the scale (input 1) and zero point (input 2)
 * where shapes are known: per-tensor, per-axis (opset 13 on) or blocked (block_size, opset 21 on)
 * forms, the axis, and a zero point shaped like the scale. */
static bool claim_qdq_params(const ir_graph *g, const ir_node *n, op_why why) {
  const ir_value *x = ir_input(g, n, 0), *s = ir_input(g, n, 1), *z = ir_input(g, n, 2);
  int64_t block = ir_attr_int(n, "block_size", 0), axis = ir_attr_int(n, "axis", 1);
  int xr = x ? x->rank : -1;
  if (block < 0) return op_decline(why, "block_size %lld is negative", (long long)block);
  if (z && s && z->rank >= 0 && s->rank >= 0) {
    bool same = z->rank == s->rank;
    for (int i = 0; same && i < s->rank; i++)
      same = z->dims[i] == s->dims[i] || z->dims[i] < 0 || s->dims[i] < 0;
    int64_t zn = 1, sn = 1; /* one element each (a scalar scale, a [1] zero point) also fits */
    for (int i = 0; i < z->rank; i++) zn = z->dims[i] < 0 || zn < 0 ? -1 : zn * z->dims[i];
    for (int i = 0; i < s->rank; i++) sn = s->dims[i] < 0 || sn < 0 ? -1 : sn * s->dims[i];
    if (!same && !(zn == 1 && sn == 1))
      return op_decline(why, "the zero point's shape differs from the scale's");
  }
  if (!s || s->rank < 0) return true;
  if (block > 0) {
    if (xr >= 0 && s->rank != xr)
      return op_decline(why, "blocked quantization (block_size %lld) needs a scale of x's rank "
                        "%d, not %d", (long long)block, xr, s->rank);
    if (xr >= 0 && (axis < -xr || axis >= xr))
      return op_decline(why, "axis %lld is out of range for rank %d", (long long)axis, xr);
    if (xr > 0) {
      int a = (int)(axis < 0 ? axis + xr : axis);
      for (int i = 0; i < xr; i++) {
        int64_t d = x->dims[i], sd = s->dims[i];
        if (d < 0 || sd < 0) continue;
        int64_t want = i == a ? (d + block - 1) / block : d;
        if (sd != want)
          return op_decline(why, "blocked scale dimension %d is %lld, expected %lld for x "
                            "dimension %lld and block_size %lld", i, (long long)sd,
                            (long long)want, (long long)d, (long long)block);
      }
    }
    return true;
  }
  if (s->rank > 1)
    return op_decline(why, "scale of rank %d without block_size: only per-tensor (scalar) and "
                      "per-axis (1-D) scales are defined", s->rank);
  if (s->rank == 0) return true;
  int64_t len = s->dims[0];
  if (n->since_version < 13 && len != 1)
    return op_decline(why, "opset %d takes a per-tensor scale only (per-axis scales come with "
                      "opset 13)", n->since_version);
  if (xr < 0) return true;
  if (xr == 0 || axis < -xr || axis >= xr) {
    if (len != 1)
      return op_decline(why, "a 1-D scale of %lld elements needs axis %lld to exist in x of "
                        "rank %d", (long long)len, (long long)axis, xr);
    return true;
  }
  int64_t d = x->dims[axis < 0 ? axis + xr : axis];
  if (len > 1 && d >= 0 && len != d)
    return op_decline(why, "per-axis scale has %lld elements, x has %lld along axis %lld",
                      (long long)len, (long long)d, (long long)axis);
  return true;
}

/* Blocked Quantize/DequantizeLinear repeat the scale with concrete lengths; the other forms
 * depend on ranks only. */
static op_compile_class qdq_class(const ir_graph *g, const ir_node *n) {
  (void)g;
  return ir_attr_int(n, "block_size", 0) > 0 ? OP_SHAPE_KEYED : OP_SHAPELESS;
}

/* --- QuantizeLinear ---------------------------------------------------------------------- */
static bool claim_quantize(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *y = ir_output(g, n, 0);
  if (x && x->elem_type == IR_INT32)
    return op_decline(why, "QuantizeLinear of int32 x: dividing by a float scale in float32 "
                      "would round values beyond 2^24 (ONNX Runtime's CPU provider has no int32 "
                      "kernel either)");
  if (x && !(Q_TYPES & OP_T(x->elem_type)))
    return op_decline(why, "QuantizeLinear of %s x: x must be float or int32",
                      ir_elem_name(x->elem_type));
  if (y && !is_int_type(y->elem_type) && !(Q_RAW & OP_T(y->elem_type)))
    return op_decline(why, "QuantizeLinear to %s: only int8, uint8, int16, uint16, float8 "
                      "(not e8m0), int4/uint4, float4 and int2/uint2 outputs are translated",
                      ir_elem_name(y->elem_type));
  const ir_value *sc = ir_input(g, n, 1);
  if (sc && ir_to_mx_dtype(sc->elem_type) < 0)
    return op_decline(why, "a %s scale is not translated", ir_elem_name(sc->elem_type));
  int64_t p = ir_attr_int(n, "precision", 0);
  if (p && p != IR_FLOAT && p != IR_FLOAT16 && p != IR_BFLOAT16)
    return op_decline(why, "precision %s is not float, float16 or bfloat16", ir_elem_name((int)p));
  return claim_qdq_params(g, n, why);
}

static int translate_quantize(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), s = tr_in(t, 1), z = tr_in(t, 2), q;
  int64_t axis = ir_attr_int(n, "axis", 1), block = ir_attr_int(n, "block_size", 0);
  TR_TRY(align_param(t, s, x, axis, block, "y_scale", &s));
  TR_TRY(align_param(t, z, x, axis, block, "y_zero_point", &z));
  int64_t p = ir_attr_int(n, "precision", 0);
  mx_dtype prec = p ? (mx_dtype)ir_to_mx_dtype((int)p)
                  : mx_dtype_of(s) == mx_dtype_of(x) ? MX_FLOAT32 : mx_dtype_of(s);
  TR_TRY(cast(t, &x, prec));
  TR_TRY(cast(t, &s, prec));
  TR_TRY(mx_binary(t->mx, &q, MX_DIVIDE, x, s));
  int y_elem = ir_output(t->g, n, 0)->elem_type;
  if (lowbit_is_float(y_elem)) { /* float8/float4: saturate(x / scale + zp), no integer rounding */
    TR_TRY(cast(t, &q, MX_FLOAT32));
    if (z) { /* a zero zero point is not added, so -0 stays -0 (as ONNX Runtime) */
      mx_array sum, zero, nz;
      TR_TRY(lowbit_decode(t->mx, &z, z, y_elem));
      TR_TRY(mx_binary(t->mx, &sum, MX_ADD, q, z));
      TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
      TR_TRY(mx_binary(t->mx, &nz, MX_NOT_EQUAL, z, zero));
      TR_TRY(mx_where(t->mx, &q, nz, sum, q));
    }
    TR_TRY(cast(t, &q, MX_FLOAT32));
    TR_TRY(lowbit_encode(t->mx, &q, q, y_elem, ir_attr_int(n, "saturate", 1) != 0, "nearest"));
    return tr_out(t, 0, q);
  }
  TR_TRY(round_saturate(t, q, z, tr_out_dtype(t, 0), y_elem, &q));
  return tr_out(t, 0, q);
}

/* --- DequantizeLinear -------------------------------------------------------------------- */
static bool claim_dequantize(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *y = ir_output(g, n, 0), *sc = ir_input(g, n, 1);
  if (sc && ir_to_mx_dtype(sc->elem_type) < 0)
    return op_decline(why, "a %s scale is not translated", ir_elem_name(sc->elem_type));
  if (y && !(OP_FLOATS & OP_T(y->elem_type)))
    return op_decline(why, "DequantizeLinear to %s: the output must be a float type",
                      ir_elem_name(y->elem_type));
  return claim_qdq_params(g, n, why);
}

static int translate_dequantize(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), s = tr_in(t, 1), z = tr_in(t, 2), y;
  int64_t axis = ir_attr_int(n, "axis", 1), block = ir_attr_int(n, "block_size", 0);
  TR_TRY(align_param(t, s, x, axis, block, "x_scale", &s));
  TR_TRY(align_param(t, z, x, axis, block, "x_zero_point", &z));
  int x_elem = ir_input(t->g, n, 0)->elem_type;
  if (lowbit_is_float(x_elem)) { /* float8/float4 codes: (decode(x) - decode(zp)) * scale */
    TR_TRY(lowbit_decode(t->mx, &x, x, x_elem));
    if (z) {
      TR_TRY(lowbit_decode(t->mx, &z, z, x_elem));
      TR_TRY(mx_binary(t->mx, &x, MX_SUBTRACT, x, z));
    }
    z = NULL;
  }
  if (!lowbit_is_float(x_elem)) TR_TRY(cast(t, &x, MX_INT32));
  if (z) {
    TR_TRY(cast(t, &z, MX_INT32));
    TR_TRY(mx_binary(t->mx, &x, MX_SUBTRACT, x, z));
  }
  TR_TRY(cast(t, &x, MX_FLOAT32));
  TR_TRY(cast(t, &s, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, x, s));
  TR_TRY(cast(t, &y, tr_out_dtype(t, 0)));
  return tr_out(t, 0, y);
}

/* --- DynamicQuantizeLinear --------------------------------------------------------------- */
/* uint8 quantization over x's range widened to include 0: scale (max - min) / 255 (1 when the
 * range is empty, as ONNX Runtime does), zero point round(saturate(-min / scale)). */
static int translate_dynamic_quantize(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  static const int axis0 = 0;
  mx_array x = tr_in(t, 0), flat, lo, hi, zero, one, span, scale, same, zp, zlo, zhi, y;
  if (mx_ndim(x) == 0) TR_TRY(mx_expand_dims(t->mx, &flat, x, &axis0, 1));
  else TR_TRY(mx_flatten(t->mx, &flat, x, 0, -1));
  TR_TRY(mx_reduce_empty_ok(t->mx, &lo, MX_MIN, flat, &axis0, 1, false));
  TR_TRY(mx_reduce_empty_ok(t->mx, &hi, MX_MAX, flat, &axis0, 1, false));
  TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
  TR_TRY(tr_scalar(t, &one, 1.0, MX_FLOAT32));
  TR_TRY(tr_scalar(t, &zhi, 255.0, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &lo, MX_MINIMUM, lo, zero));
  TR_TRY(mx_binary(t->mx, &hi, MX_MAXIMUM, hi, zero));
  TR_TRY(mx_binary(t->mx, &span, MX_SUBTRACT, hi, lo));
  TR_TRY(mx_binary(t->mx, &scale, MX_DIVIDE, span, zhi));
  TR_TRY(mx_binary(t->mx, &same, MX_EQUAL, hi, lo));
  TR_TRY(mx_where(t->mx, &scale, same, one, scale));
  TR_TRY(mx_binary(t->mx, &zp, MX_DIVIDE, lo, scale));
  TR_TRY(mx_binary(t->mx, &zp, MX_SUBTRACT, zero, zp));
  zlo = zero;
  TR_TRY(mx_clip(t->mx, &zp, zp, zlo, zhi));
  TR_TRY(mx_unary(t->mx, &zp, MX_ROUND, zp));
  TR_TRY(mx_binary(t->mx, &y, MX_DIVIDE, x, scale));
  TR_TRY(round_saturate(t, y, zp, MX_UINT8, IR_UNDEFINED, &y));
  TR_TRY(mx_astype(t->mx, &zp, zp, MX_UINT8));
  TR_TRY(tr_out(t, 0, y));
  TR_TRY(tr_out(t, 1, scale));
  return tr_out(t, 2, zp);
}

/* --- exact integer products ------------------------------------------------------------- */
/* A float32 product of two integer-valued operands (matmul or convolution). */
typedef int (*product_fn)(tr_ctx *t, const ir_node *n, mx_array a, mx_array b, mx_array *out);

/* The largest n for which an exact product of n terms is computed (four partial products). */
enum { QUANT_MAX_TERMS = QUANT_EXACT / 256 - 1 };

static int int32_of(tr_ctx *t, product_fn f, const ir_node *n, mx_array a, mx_array b,
                    mx_array *out) {
  TR_TRY(f(t, n, a, b, out));
  return mx_astype(t->mx, out, *out, MX_INT32);
}

/* d = 16 * hi + lo with lo in [0, 15]: hi = floor(d / 16), exact in float32. */
static int split16(tr_ctx *t, mx_array d, mx_array *hi, mx_array *lo) {
  mx_array k, s;
  TR_TRY(tr_scalar(t, &k, 0.0625, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, hi, MX_MULTIPLY, d, k));
  TR_TRY(mx_unary(t->mx, hi, MX_FLOOR, *hi));
  TR_TRY(tr_scalar(t, &k, 16.0, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &s, MX_MULTIPLY, *hi, k));
  return mx_binary(t->mx, lo, MX_SUBTRACT, d, s);
}

/* acc * k + add, in int32. */
static int mul_add(tr_ctx *t, mx_array acc, int k, mx_array add, mx_array *out) {
  mx_array s;
  TR_TRY(mx_scalar_int(t->mx, &s, k, MX_INT32));
  TR_TRY(mx_binary(t->mx, out, MX_MULTIPLY, acc, s));
  return mx_binary(t->mx, out, MX_ADD, *out, add);
}

/* The int32 product of float32 operands holding integers with |a| <= amax and |b| <= bmax (both
 * at most 256) over `terms` products per output, exact as the top comment explains. */
static int exact_product(tr_ctx *t, const ir_node *n, product_fn f, mx_array a, mx_array b,
                         int64_t terms, int amax, int bmax, mx_array *out) {
  if (terms <= 0 || terms * amax * bmax <= QUANT_EXACT) return int32_of(t, f, n, a, b, out);
  mx_array ah, al, bh, bl, p, q, r2;
  TR_TRY(split16(t, a, &ah, &al));
  if (terms * 16 * bmax <= QUANT_EXACT) {
    TR_TRY(int32_of(t, f, n, ah, b, &p));
    TR_TRY(int32_of(t, f, n, al, b, &q));
    return mul_add(t, p, 16, q, out);
  }
  if (terms > QUANT_MAX_TERMS)
    return tr_fail(t, "%lld products per output element: exact int32 results are computed for "
                   "at most %d", (long long)terms, QUANT_MAX_TERMS);
  TR_TRY(split16(t, b, &bh, &bl));
  TR_TRY(int32_of(t, f, n, ah, bh, &p));
  TR_TRY(int32_of(t, f, n, ah, bl, &q));
  TR_TRY(int32_of(t, f, n, al, bh, &r2));
  TR_TRY(mx_binary(t->mx, &q, MX_ADD, q, r2));
  TR_TRY(mul_add(t, p, 16, q, &p));
  TR_TRY(int32_of(t, f, n, al, bl, &q));
  return mul_add(t, p, 16, q, out);
}

/* x - zero point as float32 (exact), and the largest magnitude it can have. */
static int centered(tr_ctx *t, mx_array x, mx_array zp, mx_array *out, int *max_abs) {
  mx_dtype d = mx_dtype_of(x);
  *max_abs = zp || d == MX_UINT8 ? 255 : 128;
  TR_TRY(mx_astype(t->mx, out, x, MX_FLOAT32));
  if (!zp) return MX_OK;
  TR_TRY(cast(t, &zp, MX_FLOAT32));
  return mx_binary(t->mx, out, MX_SUBTRACT, *out, zp);
}

/* The shared claim of the integer products: 8-bit operands at `ia` and `ib` with zero points of
 * their own types, and scales/zero points that are scalars or 1-D (per row, column or channel). */
static bool claim_int_operands(const ir_graph *g, const ir_node *n, int ia, int iza, int ib,
                               int izb, const int *params, int n_params, op_why why) {
  const int pairs[2][2] = {{ia, iza}, {ib, izb}};
  for (int k = 0; k < 2; k++) {
    const ir_value *v = ir_input(g, n, pairs[k][0]), *z = ir_input(g, n, pairs[k][1]);
    if (v && !is_8bit(v->elem_type))
      return op_decline(why, "%s input %d has element type %s; int8 and uint8 are defined",
                        n->op_type, pairs[k][0], ir_elem_name(v->elem_type));
    if (v && z && z->elem_type != v->elem_type)
      return op_decline(why, "zero point %d is %s, its operand %s", pairs[k][1],
                        ir_elem_name(z->elem_type), ir_elem_name(v->elem_type));
  }
  for (int k = 0; k < n_params; k++) {
    const ir_value *p = ir_input(g, n, params[k]);
    if (p && p->rank > 1)
      return op_decline(why, "input %d ('%s') has rank %d: scalars and 1-D (per-row, -column or "
                        "-channel) tensors are translated", params[k], p->name, p->rank);
  }
  return true;
}

/* --- MatMulInteger, QLinearMatMul -------------------------------------------------------- */
static int matmul_f(tr_ctx *t, const ir_node *n, mx_array a, mx_array b, mx_array *out) {
  (void)n;
  return mx_matmul(t->mx, out, a, b);
}

/* A per-row parameter ([M] or one element) placed against a product of operands of ranks ar, br:
 * [M, 1] where the product has rows and columns, as is where it has rows only, a scalar else. */
static int row_param(tr_ctx *t, mx_array p, int ar, int br, const char *what, mx_array *out) {
  static const int axis1 = 1;
  *out = p;
  if (!p || mx_ndim(p) == 0) return MX_OK;
  if (ar < 2) return squeeze_one(t, p, what, out);
  return br >= 2 ? mx_expand_dims(t->mx, out, p, &axis1, 1) : MX_OK;
}

/* A per-column parameter ([N] or one element): as is where the product has columns. */
static int col_param(tr_ctx *t, mx_array p, int br, const char *what, mx_array *out) {
  *out = p;
  if (!p || mx_ndim(p) == 0) return MX_OK;
  return br >= 2 ? MX_OK : squeeze_one(t, p, what, out);
}

static bool check_terms(const ir_graph *g, const ir_node *n, int ia, op_why why) {
  const ir_value *a = ir_input(g, n, ia);
  if (a && a->rank == 0) return op_decline(why, "%s operand %d is a scalar", n->op_type, ia);
  int64_t k = a && a->rank > 0 ? a->dims[a->rank - 1] : -1;
  if (k > QUANT_MAX_TERMS)
    return op_decline(why, "inner dimension %lld: exact int32 products are computed for at most "
                      "%d terms", (long long)k, QUANT_MAX_TERMS);
  return true;
}

/* The exact int32 product (A - a_zero_point) @ (B - b_zero_point). */
static int int_matmul(tr_ctx *t, mx_array a, mx_array za, mx_array b, mx_array zb, mx_array *y) {
  int ar = mx_ndim(a), br = mx_ndim(b), amax, bmax;
  if (ar == 0 || br == 0) return tr_fail(t, "matrix operands must have rank >= 1");
  TR_TRY(row_param(t, za, ar, 2, "the zero point of A", &za));
  TR_TRY(col_param(t, zb, br, "the zero point of B", &zb));
  TR_TRY(centered(t, a, za, &a, &amax));
  TR_TRY(centered(t, b, zb, &b, &bmax));
  return exact_product(t, t->node, matmul_f, a, b, mx_dim(a, -1), amax, bmax, y);
}

static bool claim_matmul_integer(const ir_graph *g, const ir_node *n, const op_row *r,
                                 op_why why) {
  (void)r;
  static const int params[] = {2, 3};
  return claim_int_operands(g, n, 0, 2, 1, 3, params, 2, why) && check_terms(g, n, 0, why);
}

static int translate_matmul_integer(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array y;
  TR_TRY(int_matmul(t, tr_in(t, 0), tr_in(t, 2), tr_in(t, 1), tr_in(t, 3), &y));
  return tr_out(t, 0, y);
}

/* round(acc * (sa * sb / sy)) + zy, saturated: the scales' product in float32. */
static int requantize(tr_ctx *t, mx_array acc, mx_array sa, mx_array sb, mx_array sy,
                      mx_array zy, mx_array *y) {
  mx_array m;
  TR_TRY(cast(t, &sa, MX_FLOAT32));
  TR_TRY(cast(t, &sb, MX_FLOAT32));
  TR_TRY(cast(t, &sy, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &m, MX_MULTIPLY, sa, sb));
  TR_TRY(mx_binary(t->mx, &m, MX_DIVIDE, m, sy));
  TR_TRY(mx_astype(t->mx, &acc, acc, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &acc, MX_MULTIPLY, acc, m));
  return round_saturate(t, acc, zy, tr_out_dtype(t, 0), IR_UNDEFINED, y);
}

static bool claim_qlinear_matmul(const ir_graph *g, const ir_node *n, const op_row *r,
                                 op_why why) {
  (void)r;
  static const int params[] = {1, 2, 4, 5, 6, 7};
  const ir_value *y = ir_output(g, n, 0);
  if (y && !is_8bit(y->elem_type))
    return op_decline(why, "QLinearMatMul output type %s is not int8 or uint8",
                      ir_elem_name(y->elem_type));
  return claim_int_operands(g, n, 0, 2, 3, 5, params, 6, why) && check_terms(g, n, 0, why);
}

static int translate_qlinear_matmul(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)n, (void)r;
  mx_array a = tr_in(t, 0), b = tr_in(t, 3), acc, sa, sb, sy, zy, y;
  int ar = mx_ndim(a), br = mx_ndim(b);
  TR_TRY(int_matmul(t, a, tr_in(t, 2), b, tr_in(t, 5), &acc));
  TR_TRY(row_param(t, tr_in(t, 1), ar, br, "a_scale", &sa));
  TR_TRY(col_param(t, tr_in(t, 4), br, "b_scale", &sb));
  TR_TRY(row_param(t, tr_in(t, 6), ar, br, "y_scale", &sy));
  TR_TRY(row_param(t, tr_in(t, 7), ar, br, "y_zero_point", &zy));
  TR_TRY(requantize(t, acc, sa, sb, sy, zy, &y));
  return tr_out(t, 0, y);
}

/* The integer matmuls read the inner dimension to choose how many partial products they need; a
 * dimension the graph fixes cannot change between runs, so those nodes compile shapeless. */
static op_compile_class matmul_class(const ir_graph *g, const ir_node *n) {
  const ir_value *a = ir_input(g, n, 0);
  return a && a->rank > 0 && a->dims[a->rank - 1] >= 0 ? OP_SHAPELESS : OP_SHAPE_KEYED;
}

/* --- ConvInteger, QLinearConv ------------------------------------------------------------ */
/* Conv's geometry checks for operands at ix and iw: 1-3 spatial dims, valid window attributes,
 * kernel_shape agreeing with W, channels matching the groups; the SAME forms Conv declines. */
static bool claim_conv_geometry(const ir_graph *g, const ir_node *n, int ix, int iw,
                                op_why why) {
  const ir_value *x = ir_input(g, n, ix), *w = ir_input(g, n, iw);
  int nd = x && x->rank >= 0 ? x->rank - 2 : w && w->rank >= 0 ? w->rank - 2 : -1;
  if (nd == -1) return op_decline(why, "the rank of X and W is unknown");
  if (nd < 1 || nd > 3)
    return op_decline(why, "%s over %d spatial dimensions: MLX convolves 1 to 3", n->op_type, nd);
  if (w && w->rank >= 0 && w->rank != nd + 2)
    return op_decline(why, "W has rank %d, X has rank %d", w->rank, nd + 2);
  win_attrs wa;
  char err[160];
  if (!win_read(n, nd, &wa, err, sizeof err)) return op_decline(why, "%s", err);
  int64_t group = ir_attr_int(n, "group", 1);
  if (group < 1) return op_decline(why, "group must be at least 1");
  bool wk = w && w->rank == nd + 2;
  for (int i = 0; wk && wa.has_kernel && i < nd; i++)
    if (w->dims[i + 2] >= 0 && w->dims[i + 2] != wa.kernel[i])
      return op_decline(why, "kernel_shape does not match W's spatial dims");
  if (x && wk && x->rank == nd + 2 && x->dims[1] >= 0 && w->dims[1] >= 0 && w->dims[0] >= 0 &&
      (x->dims[1] != w->dims[1] * group || w->dims[0] % group))
    return op_decline(why, "X has %lld channels and W is [%lld, %lld, ...]: not valid for %lld "
                      "groups", (long long)x->dims[1], (long long)w->dims[0],
                      (long long)w->dims[1], (long long)group);
  if (wa.auto_pad == WIN_SAME_UPPER || wa.auto_pad == WIN_SAME_LOWER) {
    int64_t in[WIN_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
      if (wa.dilation[i] != 1)
        return op_decline(why, "auto_pad SAME with dilations: ONNX Runtime's CPU kernel rejects "
                          "dilations with SAME padding");
      in[i] = x && x->rank == nd + 2 ? x->dims[i + 2] : -1;
      if (!wa.has_kernel) wa.kernel[i] = wk ? w->dims[i + 2] : -1;
    }
    for (int i = 0; i < nd; i++)
      if (wa.kernel[i] < 0) return op_decline(why, "auto_pad SAME needs the kernel shape");
    if (win_same_may_go_negative(&wa, in))
      return op_decline(why, "auto_pad SAME with a kernel smaller than the stride may need "
                        "negative padding, where ONNX Runtime departs from the spec");
  }
  if (wk) {
    int64_t terms = w->dims[1];
    for (int i = 2; i < w->rank && terms >= 0; i++)
      terms = w->dims[i] < 0 ? -1 : terms * w->dims[i];
    if (terms > QUANT_MAX_TERMS)
      return op_decline(why, "%lld products per output (C/group x kernel): exact int32 results "
                        "are computed for at most %d", (long long)terms, QUANT_MAX_TERMS);
  }
  return true;
}

static int conv_f(tr_ctx *t, const ir_node *n, mx_array x, mx_array w, mx_array *out) {
  return conv_forward_channels_last(t, n, x, w, NULL, out);
}

/* The exact int32 convolution of (X - x_zero_point) by (W - w_zero_point), channels-last; the
 * weight's zero point is a scalar or one per output channel. */
static int int_conv(tr_ctx *t, const ir_node *n, mx_array x, mx_array zx, mx_array w,
                    mx_array zw, mx_array *y) {
  int xmax, wmax, axes[MX_MAX_RANK], k = 0;
  if (mx_ndim(w) < 3) return tr_fail(t, "W has rank %d", mx_ndim(w));
  if (zx && mx_ndim(zx) == 1) TR_TRY(squeeze_one(t, zx, "x_zero_point", &zx));
  if (zw && mx_ndim(zw) == 1) {
    if (mx_dim(zw, 0) != 1 && mx_dim(zw, 0) != mx_dim(w, 0))
      return tr_fail(t, "w_zero_point has %d elements, W has %d output channels", mx_dim(zw, 0),
                     mx_dim(w, 0));
    for (int i = 1; i < mx_ndim(w); i++) axes[k++] = i;
    TR_TRY(mx_expand_dims(t->mx, &zw, zw, axes, k));
  }
  TR_TRY(centered(t, x, zx, &x, &xmax));
  TR_TRY(centered(t, w, zw, &w, &wmax));
  int64_t terms = mx_dim(w, 1);
  for (int i = 2; i < mx_ndim(w); i++) terms *= mx_dim(w, i);
  return exact_product(t, n, conv_f, x, w, terms, xmax, wmax, y);
}

static int channels_first(tr_ctx *t, mx_array y, mx_array *out) {
  int perm[MX_MAX_RANK], rank = mx_ndim(y);
  perm[0] = 0, perm[1] = rank - 1;
  for (int i = 2; i < rank; i++) perm[i] = i - 1;
  return mx_transpose(t->mx, out, y, perm, rank);
}

static bool claim_conv_integer(const ir_graph *g, const ir_node *n, const op_row *r,
                               op_why why) {
  (void)r;
  static const int params[] = {2, 3};
  return claim_int_operands(g, n, 0, 2, 1, 3, params, 2, why) &&
         claim_conv_geometry(g, n, 0, 1, why);
}

static int translate_conv_integer(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array y;
  TR_TRY(int_conv(t, n, tr_in(t, 0), tr_in(t, 2), tr_in(t, 1), tr_in(t, 3), &y));
  TR_TRY(channels_first(t, y, &y));
  return tr_out(t, 0, y);
}

static bool claim_qlinear_conv(const ir_graph *g, const ir_node *n, const op_row *r,
                               op_why why) {
  (void)r;
  static const int params[] = {1, 2, 4, 5, 6, 7, 8};
  const ir_value *b = ir_input(g, n, 8);
  if (b && b->elem_type != IR_INT32)
    return op_decline(why, "QLinearConv bias B is %s, not int32", ir_elem_name(b->elem_type));
  return claim_int_operands(g, n, 0, 2, 3, 5, params, 7, why) &&
         claim_conv_geometry(g, n, 0, 3, why);
}

static int translate_qlinear_conv(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array acc, b = tr_in(t, 8), y;
  TR_TRY(int_conv(t, n, tr_in(t, 0), tr_in(t, 2), tr_in(t, 3), tr_in(t, 5), &acc));
  if (b) {
    TR_TRY(cast(t, &b, MX_INT32));
    TR_TRY(mx_binary(t->mx, &acc, MX_ADD, acc, b)); /* channels last: [M] broadcasts */
  }
  /* per-channel w_scale [M] broadcasts along the channels-last result too */
  TR_TRY(requantize(t, acc, tr_in(t, 1), tr_in(t, 4), tr_in(t, 6), tr_in(t, 7), &y));
  TR_TRY(channels_first(t, y, &y));
  return tr_out(t, 0, y);
}

#define Q_NOTE "round half to even, saturating; per-tensor, per-axis"
#define QB_NOTE Q_NOTE ", blocked (shape-keyed)"
#define DQ_TYPES8 (OP_T(IR_INT8) | OP_T(IR_UINT8) | OP_T(IR_INT32))
#define DQ_TYPES16 (DQ_TYPES8 | OP_T(IR_INT16) | OP_T(IR_UINT16))
#define I8 (OP_T(IR_INT8) | OP_T(IR_UINT8))
/* Rows before opset 21 have no blocked form and compile shapeless; from 21 on the row is
 * shape-keyed and the hook makes nodes without block_size shapeless again. */
#define QROW(op, lo, hi, claim, tr, types, note) \
  {"", op, lo, hi, claim, tr, OP_SHAPELESS, types, 0, note, NULL}
#define QROWB(op, lo, hi, claim, tr, types, note) \
  {"", op, lo, hi, claim, tr, OP_SHAPE_KEYED, types, 0, note, qdq_class}

const op_row ops_quant_rows[] = {
    QROW("QuantizeLinear", 10, 12, claim_quantize, translate_quantize, Q_TYPES,
         "per-tensor scale; " Q_NOTE "; int32 x declined"),
    QROW("QuantizeLinear", 13, 18, claim_quantize, translate_quantize, Q_TYPES,
         Q_NOTE " (axis); int32 x declined"),
    QROW("QuantizeLinear", 19, 20, claim_quantize, translate_quantize, Q_TYPES | RAW19,
         Q_NOTE "; float16/bfloat16 x divided in float32 as ONNX Runtime does; float8 outputs "
         "as Cast's codes of x / scale + zero point (saturate honoured)"),
    QROWB("QuantizeLinear", 21, 22, claim_quantize, translate_quantize, Q_TYPES | RAW21,
         QB_NOTE "; output_dtype; int16/uint16, int4/uint4, float8"),
    QROWB("QuantizeLinear", 23, 23, claim_quantize, translate_quantize, Q_TYPES | RAW23,
         QB_NOTE "; precision attribute (else float32 for a scale of x's type, the scale's type "
         "otherwise); float4e2m1/int4/float8 outputs"),
    QROWB("QuantizeLinear", 24, 24, claim_quantize, translate_quantize, Q_TYPES | RAW23,
         QB_NOTE "; precision; 4-bit/float8 outputs; float8e8m0 scales declined"),
    QROWB("QuantizeLinear", 25, 25, claim_quantize, translate_quantize, Q_TYPES | RAW25,
         QB_NOTE "; precision; int2/uint2/int4/float4/float8 outputs; float8e8m0 scales "
         "declined"),
    QROW("DequantizeLinear", 10, 12, claim_dequantize, translate_dequantize, DQ_TYPES8,
         "per-tensor scale; (x - zero point) in int32, times scale in float32"),
    QROW("DequantizeLinear", 13, 18, claim_dequantize, translate_dequantize, DQ_TYPES8,
         "per-tensor, per-axis; (x - zero point) in int32, times scale in float32"),
    QROW("DequantizeLinear", 19, 20, claim_dequantize, translate_dequantize,
         DQ_TYPES8 | RAW19,
         "per-tensor, per-axis; float16/bfloat16 scales; float8 x as (x - zero point) in "
         "float32"),
    QROWB("DequantizeLinear", 21, 22, claim_dequantize, translate_dequantize,
          DQ_TYPES16 | RAW21,
         "per-tensor, per-axis, blocked (shape-keyed); int16/uint16, int4/uint4, float8"),
    QROWB("DequantizeLinear", 23, 23, claim_dequantize, translate_dequantize,
          DQ_TYPES16 | RAW23,
         "per-tensor, per-axis, blocked (shape-keyed); output_dtype; 4-bit/float8 x"),
    QROWB("DequantizeLinear", 24, 24, claim_dequantize, translate_dequantize,
          DQ_TYPES16 | RAW23,
         "per-tensor, per-axis, blocked (shape-keyed); output_dtype; 4-bit/float8 x; float8e8m0 "
         "scales declined"),
    QROWB("DequantizeLinear", 25, 25, claim_dequantize, translate_dequantize,
          DQ_TYPES16 | RAW25,
         "per-tensor, per-axis, blocked (shape-keyed); output_dtype; 2-bit/4-bit/float8 x; "
         "float8e8m0 scales declined"),
    {"", "DynamicQuantizeLinear", 11, 11, NULL, translate_dynamic_quantize, OP_SHAPELESS,
     OP_T(IR_FLOAT), 0, "uint8 over [min(x, 0), max(x, 0)]; scale 1 for an all-zero x"},
    {"", "MatMulInteger", 10, 10, claim_matmul_integer, translate_matmul_integer, OP_SHAPE_KEYED,
     I8, 0, "exact int32 via float32 partial products (inner dimension <= 65535); per-row "
     "a_zero_point and per-column b_zero_point; shapeless when K is fixed", matmul_class},
    {"", "QLinearMatMul", 10, 20, claim_qlinear_matmul, translate_qlinear_matmul,
     OP_SHAPE_KEYED, I8, 0, "exact int32 product, requantized in float32; per-row a/y, "
     "per-column b parameters; shapeless when K is fixed", matmul_class},
    {"", "QLinearMatMul", 21, 21, claim_qlinear_matmul, translate_qlinear_matmul,
     OP_SHAPE_KEYED, I8, 0, "float16/bfloat16 scales (used in float32); exact int32 product, "
     "requantized in float32; shapeless when K is fixed", matmul_class},
    {"", "ConvInteger", 10, 10, claim_conv_integer, translate_conv_integer, OP_SHAPE_KEYED, I8, 0,
     "exact int32 via float32 partial convolutions (C/group x kernel <= 65535); per-channel "
     "w_zero_point (ONNX Runtime's CPU kernel has per-tensor only)"},
    {"", "QLinearConv", 10, 10, claim_qlinear_conv, translate_qlinear_conv, OP_SHAPE_KEYED, I8, 0,
     "exact int32 convolution plus int32 bias, requantized in float32; per-channel w "
     "parameters"},
    OP_ROWS_END,
};
