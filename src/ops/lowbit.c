/*
 * The codec of raw element types inside the MLX graph (see lowbit.h). Decoding gathers from a
 * host-built table of every code's value. Encoding a float8/float4 counts how many midpoints
 * between consecutive non-negative values lie below |x| (a binary search over the host-built
 * midpoints), which is the code of the nearest value since non-negative codes are ordered by
 * value; a tie goes up only when the upper code is even (round half to even on the mantissa).
 * One virtual value above the largest finite one marks overflow.
 */
#include "ops/lowbit.h"
#include "ops/registry.h"

#include <math.h>
#include <string.h>

#define TRY(call)                  \
  do {                             \
    int rc_ = (call);              \
    if (rc_ != MX_OK) return rc_;  \
  } while (0)

typedef struct fmt {
  int ebits, mbits, bias;
  unsigned max_code;  /* largest finite non-negative code */
  unsigned nan_code;  /* what NaN encodes to */
  int inf_code;       /* +inf's code, -1 where the format has none */
  bool uz;            /* no negative zero (0x80 is NaN) */
  unsigned sign;      /* sign bit */
} fmt;

static bool get_fmt(int t, fmt *f) {
  switch (t) {
    case IR_FLOAT8E4M3FN: *f = (fmt){4, 3, 7, 0x7E, 0x7F, -1, false, 0x80}; return true;
    case IR_FLOAT8E4M3FNUZ: *f = (fmt){4, 3, 8, 0x7F, 0x80, -1, true, 0x80}; return true;
    case IR_FLOAT8E5M2: *f = (fmt){5, 2, 15, 0x7B, 0x7F, 0x7C, false, 0x80}; return true;
    case IR_FLOAT8E5M2FNUZ: *f = (fmt){5, 2, 16, 0x7F, 0x80, -1, true, 0x80}; return true;
    case IR_FLOAT4E2M1: *f = (fmt){2, 1, 1, 0x7, 0x8, -1, false, 0x8}; return true; /* NaN: -0 */
    default: return false;
  }
}

bool lowbit_is_float(int t) {
  fmt f;
  return get_fmt(t, &f) || t == IR_FLOAT8E8M0;
}

float lowbit_code_value(int t, unsigned c) {
  if (t == IR_FLOAT8E8M0) return c == 0xFF ? NAN : ldexpf(1.0f, (int)c - 127);
  fmt f;
  if (!get_fmt(t, &f)) return NAN;
  unsigned mag = c & (f.sign - 1);
  bool neg = (c & f.sign) != 0;
  if (f.uz && c == 0x80) return NAN;
  if (f.inf_code >= 0 && mag > (unsigned)f.inf_code) return NAN;
  if (f.inf_code >= 0 && mag == (unsigned)f.inf_code) return neg ? -INFINITY : INFINITY;
  if (!f.uz && t != IR_FLOAT4E2M1 && mag > f.max_code) return NAN; /* e4m3fn 0x7F */
  unsigned e = mag >> f.mbits, m = mag & ((1u << f.mbits) - 1);
  float v = e ? ldexpf(1.0f + (float)m / (float)(1u << f.mbits), (int)e - f.bias)
              : ldexpf((float)m, 1 - f.bias - f.mbits);
  return neg ? -v : v;
}

static int scalar_i(mx_ctx *ctx, mx_array *out, int64_t v) {
  return mx_scalar_int(ctx, out, v, MX_INT32);
}

int lowbit_decode(mx_ctx *ctx, mx_array *out, mx_array x, int t) {
  if (!lowbit_is_float(t)) return mx_astype(ctx, out, x, MX_FLOAT32);
  int n = t == IR_FLOAT4E2M1 ? 16 : 256;
  float table[256];
  for (int c = 0; c < n; c++) table[c] = lowbit_code_value(t, (unsigned)c);
  mx_array tab, idx;
  TRY(mx_from_data(ctx, &tab, table, &n, 1, MX_FLOAT32));
  TRY(mx_astype(ctx, &idx, x, MX_INT32));
  return mx_take(ctx, out, tab, idx, 0);
}

/* e8m0 from float32 bits, as onnx.numpy_helper.to_float8e8m0 (sign ignored). */
static int encode_e8m0(mx_ctx *ctx, mx_array *out, mx_array x, bool saturate,
                       const char *mode) {
  mx_array bits, e, k, s23, inc, r, zero, one;
  TRY(mx_view(ctx, &bits, x, MX_INT32));
  TRY(scalar_i(ctx, &s23, 23));
  TRY(scalar_i(ctx, &k, 0xFF));
  TRY(scalar_i(ctx, &zero, 0));
  TRY(scalar_i(ctx, &one, 1));
  TRY(mx_binary(ctx, &e, MX_RIGHT_SHIFT, bits, s23));
  TRY(mx_binary(ctx, &e, MX_BITWISE_AND, e, k));
  mx_array special, normal;
  TRY(mx_binary(ctx, &special, MX_EQUAL, e, k));
  TRY(mx_unary(ctx, &normal, MX_LOGICAL_NOT, special));
  if (strcmp(mode, "down") == 0) {
    TRY(mx_binary(ctx, &inc, MX_LOGICAL_AND, special, normal)); /* all false */
  } else if (strcmp(mode, "nearest") == 0) {
    mx_array mg, mrs, g, rs, lsb;
    TRY(scalar_i(ctx, &mg, 0x400000));
    TRY(scalar_i(ctx, &mrs, 0x3FFFFF));
    TRY(mx_binary(ctx, &g, MX_BITWISE_AND, bits, mg));
    TRY(mx_binary(ctx, &g, MX_NOT_EQUAL, g, zero));
    TRY(mx_binary(ctx, &rs, MX_BITWISE_AND, bits, mrs));
    TRY(mx_binary(ctx, &rs, MX_NOT_EQUAL, rs, zero));
    TRY(mx_binary(ctx, &lsb, MX_GREATER, e, zero));
    TRY(mx_binary(ctx, &rs, MX_LOGICAL_OR, rs, lsb));
    TRY(mx_binary(ctx, &inc, MX_LOGICAL_AND, g, rs));
    TRY(mx_binary(ctx, &inc, MX_LOGICAL_AND, inc, normal));
  } else { /* "up" */
    mx_array mf;
    TRY(scalar_i(ctx, &mf, 0x7FFFFF));
    TRY(mx_binary(ctx, &inc, MX_BITWISE_AND, bits, mf));
    TRY(mx_binary(ctx, &inc, MX_NOT_EQUAL, inc, zero));
    TRY(mx_binary(ctx, &inc, MX_LOGICAL_AND, inc, normal));
  }
  if (saturate) {
    mx_array fe, at_max;
    TRY(scalar_i(ctx, &fe, 0xFE));
    TRY(mx_binary(ctx, &at_max, MX_EQUAL, e, fe));
    TRY(mx_unary(ctx, &at_max, MX_LOGICAL_NOT, at_max));
    TRY(mx_binary(ctx, &inc, MX_LOGICAL_AND, inc, at_max));
  }
  TRY(mx_where(ctx, &r, inc, one, zero));
  TRY(mx_binary(ctx, &r, MX_ADD, e, r));
  return mx_astype(ctx, out, r, MX_UINT8);
}

/* neg: where the float's own sign bit is set, read from its bits in its own width (a cast to
 * float32 first may not keep a NaN's sign: MLX's CUDA backend makes -NaN +NaN there). */
static int sign_bit_set(mx_ctx *ctx, mx_array x, mx_array *neg) {
  mx_dtype d = mx_dtype_of(x);
  mx_dtype as = d == MX_FLOAT64 ? MX_INT64 : d == MX_FLOAT32 ? MX_INT32 : MX_INT16;
  mx_array bits, zero;
  TRY(mx_view(ctx, &bits, x, as));
  TRY(mx_scalar_int(ctx, &zero, 0, as));
  return mx_binary(ctx, neg, MX_LESS, bits, zero);
}

/* x: float32 values; sign_src: the same values in the caller's float type (for the sign). */
static int encode_float(mx_ctx *ctx, mx_array *out, mx_array x, mx_array sign_src, int t,
                        bool saturate) {
  fmt f;
  get_fmt(t, &f);
  /* non-negative values by code, one virtual value past the largest, and their midpoints */
  int k = (int)f.max_code + 1;
  float v[130], mids[129];
  bool even_up[129];
  for (int c = 0; c < k; c++) v[c] = lowbit_code_value(t, (unsigned)c);
  v[k] = 2 * v[k - 1] - v[k - 2];
  for (int i = 0; i < k; i++) {
    mids[i] = (v[i] + v[i + 1]) / 2;
    even_up[i] = ((i + 1) & 1) == 0;
  }
  /* counted midpoints form a prefix (they increase): binary search for its length, 8 steps of
   * gathers (k <= 128), so memory stays proportional to x */
  mx_array ax, mid, ev, cnt, kk, one;
  TRY(mx_unary(ctx, &ax, MX_ABS, x));
  TRY(mx_from_data(ctx, &mid, mids, &k, 1, MX_FLOAT32));
  TRY(mx_from_data(ctx, &ev, even_up, &k, 1, MX_BOOL));
  mx_array fzero;
  TRY(mx_scalar(ctx, &fzero, 0.0, MX_FLOAT32));
  TRY(mx_binary(ctx, &cnt, MX_LESS, ax, fzero)); /* all false, even for NaN: zeros of x's shape */
  TRY(mx_astype(ctx, &cnt, cnt, MX_INT32));
  TRY(scalar_i(ctx, &kk, k));
  TRY(scalar_i(ctx, &one, 1));
  for (int step = 128; step >= 1; step /= 2) {
    mx_array st, cand, valid, j, m, e, gt, eq, ok;
    TRY(scalar_i(ctx, &st, step));
    TRY(mx_binary(ctx, &cand, MX_ADD, cnt, st));
    TRY(mx_binary(ctx, &valid, MX_LESS_EQUAL, cand, kk));
    TRY(mx_binary(ctx, &j, MX_MINIMUM, cand, kk));
    TRY(mx_binary(ctx, &j, MX_SUBTRACT, j, one)); /* in [0, k - 1]: cnt starts at 0 */
    TRY(mx_take(ctx, &m, mid, j, 0));
    TRY(mx_take(ctx, &e, ev, j, 0));
    TRY(mx_binary(ctx, &gt, MX_GREATER, ax, m));
    TRY(mx_binary(ctx, &eq, MX_EQUAL, ax, m));
    TRY(mx_binary(ctx, &eq, MX_LOGICAL_AND, eq, e));
    TRY(mx_binary(ctx, &ok, MX_LOGICAL_OR, gt, eq));
    TRY(mx_binary(ctx, &ok, MX_LOGICAL_AND, ok, valid));
    TRY(mx_where(ctx, &cnt, ok, cand, cnt));
  }
  /* overflow (and inf): clamp, or inf/NaN */
  mx_array maxc, over, ovf_code, mag, zero, neg, sign, nan_code, nan, r;
  TRY(scalar_i(ctx, &maxc, f.max_code));
  TRY(mx_binary(ctx, &over, MX_GREATER, cnt, maxc));
  unsigned oc = saturate || t == IR_FLOAT4E2M1 ? f.max_code
                 : f.inf_code >= 0                ? (unsigned)f.inf_code
                                                  : f.nan_code;
  TRY(scalar_i(ctx, &ovf_code, oc));
  TRY(mx_where(ctx, &mag, over, ovf_code, cnt));
  /* the sign bit from the float's own (so -0 stays -0), except where the code is zero in a
   * format without negative zero */
  TRY(scalar_i(ctx, &zero, 0));
  mx_array sign_bit, nan_sign;
  TRY(sign_bit_set(ctx, sign_src, &neg));
  TRY(scalar_i(ctx, &sign_bit, f.sign));
  TRY(mx_where(ctx, &nan_sign, neg, sign_bit, zero)); /* NaN keeps its sign, as ORT's */
  if (f.uz) {
    mx_array nz;
    TRY(mx_binary(ctx, &nz, MX_NOT_EQUAL, mag, zero));
    TRY(mx_binary(ctx, &neg, MX_LOGICAL_AND, neg, nz));
  }
  TRY(mx_where(ctx, &sign, neg, sign_bit, zero));
  TRY(mx_binary(ctx, &r, MX_BITWISE_OR, mag, sign));
  TRY(scalar_i(ctx, &nan_code, f.nan_code));
  /* float4 has no NaN: the ONNX reference (ml_dtypes) writes NaN as -0 and -NaN as +0 */
  TRY(mx_binary(ctx, &nan_code, t == IR_FLOAT4E2M1 ? MX_BITWISE_XOR : MX_BITWISE_OR, nan_code,
                nan_sign));
  TRY(mx_unary(ctx, &nan, MX_ISNAN, x));
  TRY(mx_where(ctx, &r, nan, nan_code, r));
  return mx_astype(ctx, out, r, MX_UINT8);
}

/* Integers: keep the low bits; signed types sign-extend them into int8. */
static int wrap_int(mx_ctx *ctx, mx_array *out, mx_array x, int t) {
  int bits = t == IR_UINT4 || t == IR_INT4 ? 4 : 2;
  bool is_signed = t == IR_INT4 || t == IR_INT2;
  mx_array a, mask, r;
  TRY(mx_astype(ctx, &a, x, MX_INT64));
  TRY(mx_scalar_int(ctx, &mask, (1 << bits) - 1, MX_INT64));
  TRY(mx_binary(ctx, &r, MX_BITWISE_AND, a, mask));
  if (is_signed) {
    mx_array sh;
    TRY(mx_scalar_int(ctx, &sh, 64 - bits, MX_INT64));
    TRY(mx_binary(ctx, &r, MX_LEFT_SHIFT, r, sh));
    TRY(mx_binary(ctx, &r, MX_RIGHT_SHIFT, r, sh)); /* arithmetic on int64 */
  }
  return mx_astype(ctx, out, r, is_signed ? MX_INT8 : MX_UINT8);
}

/* Rounded half away from zero (as ONNX Runtime's CPU kernel), NaN and +-inf to 0, then wrapped. */
static int encode_int(mx_ctx *ctx, mx_array *out, mx_array x, int t) {
  mx_array half, ax, sgn, bad, zero, r, nan, pinf, ninf;
  TRY(mx_scalar(ctx, &half, 0.5, MX_FLOAT32));
  TRY(mx_scalar(ctx, &zero, 0.0, MX_FLOAT32));
  TRY(mx_unary(ctx, &ax, MX_ABS, x));
  TRY(mx_binary(ctx, &ax, MX_ADD, ax, half));
  TRY(mx_unary(ctx, &ax, MX_FLOOR, ax));
  TRY(mx_unary(ctx, &sgn, MX_SIGN, x));
  TRY(mx_binary(ctx, &r, MX_MULTIPLY, ax, sgn));
  TRY(mx_unary(ctx, &nan, MX_ISNAN, x));
  TRY(mx_unary(ctx, &pinf, MX_ISPOSINF, x));
  TRY(mx_unary(ctx, &ninf, MX_ISNEGINF, x));
  TRY(mx_binary(ctx, &bad, MX_LOGICAL_OR, nan, pinf));
  TRY(mx_binary(ctx, &bad, MX_LOGICAL_OR, bad, ninf));
  TRY(mx_where(ctx, &r, bad, zero, r));
  return wrap_int(ctx, out, r, t);
}

int lowbit_encode(mx_ctx *ctx, mx_array *out, mx_array x, int t, bool saturate,
                  const char *round_mode) {
  if (t == IR_FLOAT8E8M0) return encode_e8m0(ctx, out, x, saturate, round_mode ? round_mode : "up");
  fmt f;
  if (get_fmt(t, &f)) {
    mx_array x32 = x;
    if (mx_dtype_of(x) != MX_FLOAT32) TRY(mx_astype(ctx, &x32, x, MX_FLOAT32));
    return encode_float(ctx, out, x32, x, t, saturate);
  }
  if (ir_carrier_mx_dtype(t) < 0) {
    mx_set_error(ctx, "element type %d is not a raw type", t);
    return MX_ERR_ARG;
  }
  return encode_int(ctx, out, x, t);
}

static bool is_float_dtype(mx_dtype d) {
  return d == MX_FLOAT32 || d == MX_FLOAT16 || d == MX_BFLOAT16 || d == MX_FLOAT64;
}

int lowbit_from(mx_ctx *ctx, mx_array *out, mx_array x, int t, bool saturate,
                const char *round_mode) {
  mx_dtype d = mx_dtype_of(x);
  if (is_float_dtype(d) || lowbit_is_float(t)) {
    mx_array f = x;
    /* float formats take the caller's float type (lowbit_encode reads the sign from it) */
    bool keep = is_float_dtype(d) && lowbit_is_float(t) && t != IR_FLOAT8E8M0;
    if (!keep && d != MX_FLOAT32) TRY(mx_astype(ctx, &f, x, MX_FLOAT32));
    return lowbit_encode(ctx, out, f, t, saturate, round_mode);
  }
  return wrap_int(ctx, out, x, t); /* integers and bool */
}

int lowbit_cast(mx_ctx *ctx, mx_array *out, mx_array x, int from, int to, bool saturate,
                const char *round_mode) {
  bool raw_from = ir_to_mx_dtype(from) < 0, raw_to = ir_to_mx_dtype(to) < 0;
  if (from == to) {
    *out = x;
    return MX_OK;
  }
  mx_array v = x; /* a value MLX computes with: float32 for codes, the carrier's integers */
  if (raw_from && lowbit_is_float(from)) TRY(lowbit_decode(ctx, &v, x, from));
  if (raw_to) return lowbit_from(ctx, out, v, to, saturate, round_mode);
  int d = ir_to_mx_dtype(to);
  if (d < 0) {
    mx_set_error(ctx, "element type %d has no MLX dtype", to);
    return MX_ERR_ARG;
  }
  if (mx_dtype_of(v) == (mx_dtype)d) {
    *out = v;
    return MX_OK;
  }
  return mx_astype(ctx, out, v, (mx_dtype)d);
}
