/*
 * Composed exp, sigmoid, softmax and erf for float32 on the CPU device (see fastmath.h). exp(x) is
 * reduced as 2^n * exp(r) with n = round(x / ln 2) and r = x - n ln 2 (ln 2 split in two parts so
 * r is exact), exp(r) on |r| <= ln2 / 2 is a degree-7 polynomial (Cephes' expf coefficients),
 * and 2^n is built from exponent bits, in two factors so that results overflow to inf and
 * underflow through the subnormals as exp does. x is first clamped to [-104, 89], beyond which
 * exp is 0 or inf in float32 anyway; NaN propagates through the arithmetic. Measured against
 * float64: at most 1.2e-7 relative error (MLX's own CPU exp: 1.8e-6).
 */
#include "cpu/fastmath.h"

const double CPU_FAST_LOG2E = 1.4426950408889634, CPU_FAST_LN2_HI = 0.693145751953125,
             CPU_FAST_LN2_LO = 1.428606765330187e-06;
const double CPU_FAST_EXP_POLY[CPU_FAST_EXP_TERMS] = {1.9875691500e-4, 1.3981999507e-3,
                                                      8.3334519073e-3, 4.1665795894e-2,
                                                      1.6666665459e-1, 5.0000001201e-1};
/* erf's Taylor series in x^2 below 1 and erfc's Chebyshev fit in t (lowest degree first) */
enum { CPU_FAST_ERF_TAYLOR_TERMS = 11, CPU_FAST_ERFC_CHEB_TERMS = 10 };
static const double CPU_FAST_ERF_TAYLOR[CPU_FAST_ERF_TAYLOR_TERMS] = {
    1.1283791670955126,      -0.37612638903183754,    0.11283791670955126,
    -0.026866170645131252,   0.005223977625442188,    -0.0008548327023450853,
    0.00012055332981789664,  -1.4925650358406251e-05, 1.6462114365889246e-06,
    -1.6365844691234924e-07, 1.4807192815879218e-08};
static const double CPU_FAST_ERFC_CHEB[CPU_FAST_ERFC_CHEB_TERMS] = {
    -1.26551223, 1.00002368,  0.37409196, 0.09678418,  -0.18628806,
    0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};

bool cpu_fast_applies(const tr_ctx *t, mx_array x) {
  /* Keyed traces only: compiled, the composition is one fused loop (4.4x MLX's exp over 196k
   * floats); eager, it is 18 passes over memory, slower than MLX's exp on large arrays; and 2^n
   * is built from bits, a view that MLX's shapeless compile cannot replay. */
  return t->mx->device == MX_DEVICE_CPU && mx_dtype_of(x) == MX_FLOAT32 &&
         t->trace == TR_TRACE_KEYED;
}

bool cpu_fast_has_unary(int op) { return op == MX_EXP || op == MX_SIGMOID || op == MX_ERF; }

static int scalar(tr_ctx *t, double v, mx_array *out) { return tr_scalar(t, out, v, MX_FLOAT32); }

/* a * b + c with scalar b and c */
static int axpb(tr_ctx *t, mx_array a, double b, double c, mx_array *out) {
  mx_array sb, sc;
  TR_TRY(scalar(t, b, &sb));
  TR_TRY(scalar(t, c, &sc));
  TR_TRY(mx_binary(t->mx, out, MX_MULTIPLY, a, sb));
  return mx_binary(t->mx, out, MX_ADD, *out, sc);
}

/* v rounded to the nearest integer (ties to even), for |v| < 2^22: adding 1.5 * 2^23 leaves no
 * bits below the units, and subtracting it gives the rounded value back exactly (contraction
 * and reassociation stay off in MLX's kernels). Addition instead of Floor, which MLX runs
 * through a library call per element where it is not fused (SSE2 libmlx, no roundps). */
static int round_int(tr_ctx *t, mx_array v, mx_array *out) {
  mx_array magic;
  TR_TRY(scalar(t, 12582912.0, &magic));
  TR_TRY(mx_binary(t->mx, out, MX_ADD, v, magic));
  return mx_binary(t->mx, out, MX_SUBTRACT, *out, magic);
}

/* 2^k for integer-valued float k in [-150, 128], as float32 bits (k + 127) << 23 */
static int pow2(tr_ctx *t, mx_array k, mx_array *out) {
  mx_array bias, shift, bits;
  TR_TRY(mx_astype(t->mx, &bits, k, MX_INT32));
  TR_TRY(mx_scalar_int(t->mx, &bias, 127, MX_INT32));
  TR_TRY(mx_scalar_int(t->mx, &shift, 23, MX_INT32));
  TR_TRY(mx_binary(t->mx, &bits, MX_ADD, bits, bias));
  TR_TRY(mx_binary(t->mx, &bits, MX_LEFT_SHIFT, bits, shift));
  return mx_view(t->mx, out, bits, MX_FLOAT32);
}

int cpu_fast_exp(tr_ctx *t, mx_array x, mx_array *out) {
  mx_array lo, hi, xc, n, r, tmp, p, y, n1, n2, f1, f2;
  TR_TRY(scalar(t, -104.0, &lo));
  TR_TRY(scalar(t, 89.0, &hi));
  TR_TRY(mx_clip(t->mx, &xc, x, lo, hi));
  TR_TRY(axpb(t, xc, CPU_FAST_LOG2E, 0.0, &n));
  TR_TRY(round_int(t, n, &n));
  TR_TRY(axpb(t, n, -CPU_FAST_LN2_HI, 0.0, &tmp));
  TR_TRY(mx_binary(t->mx, &r, MX_ADD, xc, tmp));
  TR_TRY(axpb(t, n, -CPU_FAST_LN2_LO, 0.0, &tmp));
  TR_TRY(mx_binary(t->mx, &r, MX_ADD, r, tmp));
  TR_TRY(scalar(t, CPU_FAST_EXP_POLY[0], &p));
  for (int i = 1; i < CPU_FAST_EXP_TERMS; i++) {
    mx_array c;
    TR_TRY(mx_binary(t->mx, &p, MX_MULTIPLY, p, r));
    TR_TRY(scalar(t, CPU_FAST_EXP_POLY[i], &c));
    TR_TRY(mx_binary(t->mx, &p, MX_ADD, p, c));
  }
  /* y = p r^2 + r + 1 */
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, r, r));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, p));
  TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, r));
  TR_TRY(scalar(t, 1.0, &tmp));
  TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, tmp));
  /* 2^n = 2^n1 * 2^n2 with n1 = floor(n / 2) = round(n / 2 - 1/4) (n is an integer): each
   * factor stays a normal float */
  TR_TRY(axpb(t, n, 0.5, -0.25, &n1));
  TR_TRY(round_int(t, n1, &n1));
  TR_TRY(mx_binary(t->mx, &n2, MX_SUBTRACT, n, n1));
  TR_TRY(pow2(t, n1, &f1));
  TR_TRY(pow2(t, n2, &f2));
  TR_TRY(mx_binary(t->mx, &y, MX_MULTIPLY, y, f1));
  return mx_binary(t->mx, out, MX_MULTIPLY, y, f2);
}

/* Horner: c[0] + z (c[1] + z (... c[n-1])) */
static int horner(tr_ctx *t, mx_array z, const double *c, int n, mx_array *out) {
  mx_array p, k;
  TR_TRY(scalar(t, c[n - 1], &p));
  for (int i = n - 2; i >= 0; i--) {
    TR_TRY(mx_binary(t->mx, &p, MX_MULTIPLY, p, z));
    TR_TRY(scalar(t, c[i], &k));
    TR_TRY(mx_binary(t->mx, &p, MX_ADD, p, k));
  }
  *out = p;
  return MX_OK;
}

/* erf: below |x| = 1 its odd Taylor series to x^21 (2/sqrt(pi) sum (-1)^k x^(2k+1) / (k! (2k+1)),
 * the first omitted term 1e-9); from 1 on 1 - erfc(|x|) with the Chebyshev fit
 * erfc(a) = t exp(-a^2 + P(t)), t = 1 / (1 + a / 2) (fractional error below 1.2e-7, and erfc
 * is at most 0.16 there), signed back. */
static int cpu_fast_erf(tr_ctx *t, mx_array x, mx_array *out) {
  mx_array z, small, a, tt, one, half, poly, e, large, neg, is_small, zero;
  TR_TRY(mx_binary(t->mx, &z, MX_MULTIPLY, x, x));
  TR_TRY(horner(t, z, CPU_FAST_ERF_TAYLOR, CPU_FAST_ERF_TAYLOR_TERMS, &small));
  TR_TRY(mx_binary(t->mx, &small, MX_MULTIPLY, small, x));
  TR_TRY(mx_unary(t->mx, &a, MX_ABS, x));
  TR_TRY(scalar(t, 1.0, &one));
  TR_TRY(scalar(t, 0.5, &half));
  TR_TRY(mx_binary(t->mx, &tt, MX_MULTIPLY, a, half));
  TR_TRY(mx_binary(t->mx, &tt, MX_ADD, tt, one));
  TR_TRY(mx_binary(t->mx, &tt, MX_DIVIDE, one, tt));
  TR_TRY(horner(t, tt, CPU_FAST_ERFC_CHEB, CPU_FAST_ERFC_CHEB_TERMS, &poly));
  TR_TRY(mx_binary(t->mx, &e, MX_SUBTRACT, poly, z)); /* -a^2 + P(t) */
  TR_TRY(cpu_fast_exp(t, e, &e));
  TR_TRY(mx_binary(t->mx, &e, MX_MULTIPLY, e, tt));    /* erfc(a) */
  TR_TRY(mx_binary(t->mx, &large, MX_SUBTRACT, one, e));
  TR_TRY(mx_unary(t->mx, &neg, MX_NEG, large));
  TR_TRY(scalar(t, 0.0, &zero));
  TR_TRY(mx_binary(t->mx, &is_small, MX_LESS, x, zero));
  TR_TRY(mx_where(t->mx, &large, is_small, neg, large));
  TR_TRY(mx_binary(t->mx, &is_small, MX_LESS, a, one));
  return mx_where(t->mx, out, is_small, small, large);
}

int cpu_fast_unary(tr_ctx *t, int op, mx_array x, mx_array *out) {
  if (op == MX_EXP) return cpu_fast_exp(t, x, out);
  if (op == MX_ERF) return cpu_fast_erf(t, x, out);
  /* sigmoid: 1 / (1 + exp(-x)) */
  mx_array e, one;
  TR_TRY(mx_unary(t->mx, &e, MX_NEG, x));
  TR_TRY(cpu_fast_exp(t, e, &e));
  TR_TRY(scalar(t, 1.0, &one));
  TR_TRY(mx_binary(t->mx, &e, MX_ADD, e, one));
  return mx_binary(t->mx, out, MX_DIVIDE, one, e);
}

int cpu_fast_softmax(tr_ctx *t, mx_array x, const int *axes, int n, mx_array *out) {
  mx_array m, e, s;
  TR_TRY(mx_reduce(t->mx, &m, MX_MAX, x, axes, n, true));
  TR_TRY(mx_binary(t->mx, &e, MX_SUBTRACT, x, m));
  TR_TRY(cpu_fast_exp(t, e, &e));
  TR_TRY(mx_reduce(t->mx, &s, MX_SUM, e, axes, n, true));
  return mx_binary(t->mx, out, MX_DIVIDE, e, s);
}
