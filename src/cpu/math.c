/*
 * Host kernels for the transcendental and normalising operations of float32 models on the CPU
 * device: softmax and layer normalisation over the last axis, erf (and Gelu), the sigmoid (and
 * Swish). MLX runs these as compositions of several passes (a reduction, a broadcast subtraction
 * through its strided loop, the composed exp or erf of fastmath.c, another reduction, a
 * division), each a trip through memory; here each row is read once into vector registers per
 * statistic and written once. exp is fastmath.c's reduction and polynomial (multiply-adds fused
 * in the x86-64-v3 build, results below the smallest normal flushed to zero); erf is this file's
 * own, cheaper than fastmath.c's composition (two polynomials, no exp, no division); the sigmoid
 * is one exp and one division. Each stays within 2.4e-7 relative of float64 above the subnormal
 * range (tested). Rows are split over the cores (cpu/workers.c).
 */
#include "cpu/math.h"

#include "cpu/workers.h"
#include "cpu/fastmath.h"
#include "cpu/simd.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

/* Multiply-adds contracted into FMA where the build has it (the x86-64-v3 clone below): exp and
 * erf are chains of them, and this core issues about one vector operation per cycle (erf over
 * 196k floats: 1.39 -> 1.08 ms, exp 2.16 -> 1.84 ns a float). */
#pragma GCC optimize("fp-contract=fast")

/* Unsigned lanes, for bit arithmetic whose signed form overflows (exp8n's exponent field). */
typedef unsigned u32x8 __attribute__((vector_size(32)));

/* Below this many elements a kernel runs on the calling thread alone. */
enum { PARALLEL_MIN_ELEMENTS = 1 << 15 };

/* fastmath.c's constants as float32, the type its composed graph uses them in. */
typedef struct cpu_fast_constants {
  float log2e, ln2_hi, ln2_lo, exp_poly[CPU_FAST_EXP_TERMS];
} cpu_fast_constants;

/* Converted once: the kernels below ask per row (MiniLM b1: ten thousand rows a Run), and the
 * conversion, a call of its own, took 0.7 % of the Run's samples. */
static cpu_fast_constants exp_constants;
static pthread_once_t exp_constants_once = PTHREAD_ONCE_INIT;
static void convert_constants(void) {
  exp_constants =
      (cpu_fast_constants){(float)CPU_FAST_LOG2E, (float)CPU_FAST_LN2_HI, (float)CPU_FAST_LN2_LO};
  for (int i = 0; i < CPU_FAST_EXP_TERMS; i++)
    exp_constants.exp_poly[i] = (float)CPU_FAST_EXP_POLY[i];
}
static const cpu_fast_constants *constants(void) {
  pthread_once(&exp_constants_once, convert_constants);
  return &exp_constants;
}


/* exp and erf below work on n vectors at once (n a constant at each call, at most LANES_MAX),
 * every step over all n before the next: each is a long chain of dependent operations, and one
 * vector at a time left this core waiting on each result (on one core, Gelu over 196k floats
 * 5.2 -> 2.9 ns a float, softmax over rows of 128 2.5 -> 2.0; 2 lanes: 3.8 and 2.3, 8: no
 * better than 4). Each lane computes exactly what it would alone: the same bits. */
enum { LANES_MAX = 4 };

/* e^x, fastmath.c's reduction and polynomial (the same constants, multiply-adds fused where the
 * build allows), with two shortcuts its composed graph cannot take: 2^n goes straight into the
 * exponent bits, and results below float32's smallest normal (x < -87.33654) flush to zero, so no
 * operation ever makes a subnormal. This processor takes a slow assist for each one: softmax rows
 * behind a -3.4e38 attention mask ran 2.6x slower. Its callers pass x <= 0 (softmax's x - max,
 * sigmoid's -|x|) or NaN, so there is no overflow to guard. An underflowing lane is not clamped
 * first: it computes on (infinities and NaN for the most negative inputs) and its result is
 * masked to zero at the end. Two selects fewer: softmax over rows of 128, 0.87 -> 0.79 ns a
 * float on one core, masked rows alike. NaN stays NaN. In place, n vectors. */
CPU_INLINE void exp8n(f32x8 *x, const int n, const cpu_fast_constants *c) {
  const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer in the low bits */
  i32x8 underflow[LANES_MAX];
  f32x8 t[LANES_MAX], k[LANES_MAX], r[LANES_MAX], p[LANES_MAX], y[LANES_MAX];
  FOR_LANES(n, underflow[l] = x[l] < -87.33654f);
  FOR_LANES(n, t[l] = x[l] * c->log2e + magic);
  FOR_LANES(n, k[l] = t[l] - magic);
  FOR_LANES(n, r[l] = x[l] + (k[l] * -c->ln2_hi + 0.0f));
  FOR_LANES(n, r[l] = r[l] + (k[l] * -c->ln2_lo + 0.0f));
  FOR_LANES(n, p[l] = splat8(c->exp_poly[0]));
  for (int i = 1; i < CPU_FAST_EXP_TERMS; i++) FOR_LANES(n, p[l] = p[l] * r[l] + c->exp_poly[i]);
  FOR_LANES(n, y[l] = r[l] * r[l]);
  FOR_LANES(n, y[l] = y[l] * p[l]);
  FOR_LANES(n, y[l] = y[l] + r[l]);
  FOR_LANES(n, y[l] = y[l] + 1.0f);
  /* t's low bits hold k, two's complement. Added into the exponent field in unsigned lanes:
   * k << 23 shifts bits out of the sign (and an underflowing lane's sum wraps), which signed
   * arithmetic leaves undefined; the bits are the same. */
  FOR_LANES(n, y[l] = (f32x8)(((u32x8)y[l] + ((u32x8)t[l] << 23)) & ~(u32x8)underflow[l]));
  FOR_LANES(n, x[l] = select8(x[l] != x[l], x[l], y[l]));
}

/* erf(x): x * P(x^2) below |x| = 1; above, 1 - R(|x|) with the sign of x, R a polynomial in
 * (|x| - 2.5) / 1.5 fitted to erfc over [1, 4] (|x| taken as 4 past 4, where erf rounds to 1).
 * P and R are this file's own fits: P relative to erf(x) / x over x^2 in [0, 1], R minimax in
 * absolute error (9.4e-9) over [1, 4], where erf >= 0.84 makes that relative too. Max error
 * 1.69e-7 relative, rounding included, over every 7th float32 from 2^-126 to 5 (fastmath.c's
 * composition: 1.78e-7). No division and no exp (an earlier form took 1 - e^Q(|x| - 1), about
 * a third more operations): Gelu's erf is most of its cost. NaN stays NaN. In place, n
 * vectors. */
static const float ERF_SMALL[6] = {1.128379107e+00f, -3.761231899e-01f, 1.128013059e-01f,
                                   -2.670994960e-02f, 4.916023463e-03f, -5.625396152e-04f};
static const float ERFC_LARGE[15] = {
    4.069526622e-04f,  -3.267283319e-03f, 1.225277223e-02f,  -2.818704024e-02f,
    4.365234822e-02f,  -4.639251903e-02f, 3.186355159e-02f,  -9.569224901e-03f,
    -6.624578033e-03f, 1.039501652e-02f,  -4.685666412e-03f, -1.529430621e-03f,
    2.045840258e-03f,  -9.912471432e-05f, -2.616083366e-04f};
CPU_INLINE void erf8n(f32x8 *x, const int n) {
  const i32x8 sign = (i32x8)splat8(-0.0f);
  f32x8 z[LANES_MAX], small[LANES_MAX], a[LANES_MAX], w[LANES_MAX], q[LANES_MAX];
  FOR_LANES(n, z[l] = x[l] * x[l]);
  FOR_LANES(n, small[l] = splat8(ERF_SMALL[5]));
  for (int i = 4; i >= 0; i--) FOR_LANES(n, small[l] = small[l] * z[l] + ERF_SMALL[i]);
  FOR_LANES(n, small[l] = small[l] * x[l]);
  FOR_LANES(n, a[l] = (f32x8)((i32x8)x[l] & ~sign));
  FOR_LANES(n, w[l] = select8(a[l] > 4.0f, splat8(4.0f), a[l]) * (1.0f / 1.5f) + (-2.5f / 1.5f));
  FOR_LANES(n, q[l] = splat8(ERFC_LARGE[14]));
  for (int i = 13; i >= 0; i--) FOR_LANES(n, q[l] = q[l] * w[l] + ERFC_LARGE[i]);
  FOR_LANES(n, q[l] = 1.0f - q[l]);
  FOR_LANES(n, q[l] = (f32x8)((i32x8)q[l] | ((i32x8)x[l] & sign)));
  FOR_LANES(n, x[l] = select8(a[l] < 1.0f, small[l], q[l]));
}

/* The first n (< 8) floats at p, the other lanes fill. */
CPU_INLINE f32x8 load_part(const float *p, int n, float fill) {
  f32x8 v = splat8(fill);
  memcpy(&v, p, (size_t)n * sizeof *p);
  return v;
}

CPU_INLINE float lanes_sum(f32x8 v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

CPU_INLINE float lanes_max(f32x8 v) {
  float m = v[0];
  for (int i = 1; i < 8; i++) m = v[i] > m ? v[i] : m;
  return m;
}

/* --- the kernels -------------------------------------------------------------------------- */
typedef enum cpu_math_kind {
  CPU_MATH_SOFTMAX,
  CPU_MATH_LAYER_NORM,
  CPU_MATH_ERF,
  CPU_MATH_GELU,
  CPU_MATH_SIGMOID,
  CPU_MATH_SWISH
} cpu_math_kind;
/* the kinds computed element by element (the others row by row) */
static bool elementwise_kind(cpu_math_kind k) {
  return k == CPU_MATH_ERF || k == CPU_MATH_GELU || k == CPU_MATH_SIGMOID || k == CPU_MATH_SWISH;
}

typedef struct cpu_math_params {
  cpu_math_kind kind;
  long rows, cols; /* the elementwise kernels see one row of every element */
  float eps;
  /* softmax: scores * scale (+ a mask row) before the softmax. A row r of x, counted over x's
   * leading axes lead[0:n_lead], reads the mask's row at sum of its index on axis i times
   * mask_stride[i] (0 where the mask broadcasts). Swish: x * sigmoid(x * scale). */
  float scale;
  bool masked;
  bool skip; /* layer norm: x is the sum of its first input and its last */
  int n_lead;
  int lead[MX_MAX_RANK];
  long mask_stride[MX_MAX_RANK];
} cpu_math_params;

typedef struct cpu_math_job {
  const cpu_math_params *p;
  const float *x, *aux[2]; /* layer norm's scale and bias (or NULL), softmax's mask (or NULL) */
  const float *skip;        /* layer norm: added to x first (or NULL) */
  float *y;
  int parts;
} cpu_math_job;

/* Where row r's mask row starts (p->masked). */
static long mask_offset(const cpu_math_params *p, long r) {
  long at = 0;
  for (int i = p->n_lead - 1; i >= 0; i--) {
    at += r % p->lead[i] * p->mask_stride[i];
    r /= p->lead[i];
  }
  return at;
}

/* One row of softmax(x * scale + mask) (mask NULL: none), y may be x: the first pass writes the
 * scaled, masked row to y and finds its maximum, the second exponentiates in place and sums, the
 * third scales by the sum's reciprocal. */
CPU_CLONES_FMA
void cpu_softmax_row(const float *x, float *y, long cols, float scale, const float *m) {
  const cpu_fast_constants c = *constants(); /* a local copy: y may alias it */
  long full = cols - cols % 8;
  int tail = (int)(cols % 8);
  f32x8 m8 = splat8(-INFINITY), v, b;
  for (long i = 0; i < full; i += 8) {
    LOAD8(v, x + i);
    v = v * scale;
    if (m) LOAD8(b, m + i), v = v + b;
    STORE8(y + i, v);
    m8 = select8(v > m8, v, m8);
  }
  float top = lanes_max(m8);
  for (long i = full; i < cols; i++) {
    y[i] = x[i] * scale + (m ? m[i] : 0.0f);
    top = y[i] > top ? y[i] : top;
  }
  f32x8 s8 = splat8(0.0f), e[LANES_MAX];
  long i = 0;
  for (; i + 8 * LANES_MAX <= full; i += 8 * LANES_MAX) {
    FOR_LANES(LANES_MAX, (LOAD8(e[l], y + i + 8 * l), e[l] = e[l] - top));
    exp8n(e, LANES_MAX, &c);
    FOR_LANES(LANES_MAX, (STORE8(y + i + 8 * l, e[l]), s8 = s8 + e[l]));
  }
  for (; i < full; i += 8) {
    LOAD8(e[0], y + i);
    e[0] = e[0] - top;
    exp8n(e, 1, &c);
    STORE8(y + i, e[0]);
    s8 = s8 + e[0];
  }
  if (tail) {
    e[0] = load_part(y + full, tail, top) - top;
    exp8n(e, 1, &c);
    memcpy(y + full, &e[0], (size_t)tail * sizeof *y);
  }
  float s = lanes_sum(s8);
  for (long i = full; i < cols; i++) s += y[i];
  float inv = 1.0f / s;
  for (long i = 0; i < full; i += 8) LOAD8(v, y + i), v = v * inv, STORE8(y + i, v);
  for (long i = full; i < cols; i++) y[i] = y[i] * inv;
}

/* Rows [first, first + rows) of softmax(x * scale + mask). */
static void softmax_rows(const cpu_math_params *p, const float *x, const float *mask, float *y,
                         long first, long rows) {
  long cols = p->cols;
  x += first * cols, y += first * cols;
  for (long r = first; r < first + rows; r++, x += cols, y += cols)
    cpu_softmax_row(x, y, cols, p->scale, p->masked ? mask + mask_offset(p, r) : NULL);
}

/* Rows of layer normalisation of x, or of x + skip when skip is not NULL: the sum is written to
 * y first (rounded once, as an Add before it would) and normalised there in place. */
CPU_CLONES_FMA
static void layer_norm_rows(const float *x, const float *skip, const float *scale,
                            const float *bias, float *y, long rows, long cols, float eps) {
  long full = cols - cols % 8;
  for (long r = 0; r < rows; r++, x += cols, y += cols) {
    f32x8 s8 = splat8(0.0f), v, d;
    const float *in = x;
    if (skip) {
      f32x8 w;
      for (long i = 0; i < full; i += 8)
        LOAD8(v, x + i), LOAD8(w, skip + i), v = v + w, STORE8(y + i, v);
      for (long i = full; i < cols; i++) y[i] = x[i] + skip[i];
      in = y, skip += cols;
    }
    for (long i = 0; i < full; i += 8) LOAD8(v, in + i), s8 = s8 + v;
    float sum = lanes_sum(s8);
    for (long i = full; i < cols; i++) sum += in[i];
    float mean = sum / (float)cols;
    s8 = splat8(0.0f);
    for (long i = 0; i < full; i += 8) LOAD8(v, in + i), d = v - mean, s8 = s8 + d * d;
    float sq = lanes_sum(s8);
    for (long i = full; i < cols; i++) sq += (in[i] - mean) * (in[i] - mean);
    float inv = 1.0f / sqrtf(sq / (float)cols + eps);
    for (long i = 0; i < full; i += 8) {
      f32x8 g, b = splat8(0.0f);
      LOAD8(v, in + i), LOAD8(g, scale + i);
      if (bias) LOAD8(b, bias + i);
      v = (v - mean) * inv * g + b;
      STORE8(y + i, v);
    }
    for (long i = full; i < cols; i++)
      y[i] = (in[i] - mean) * inv * scale[i] + (bias ? bias[i] : 0.0f);
  }
}

/* The elementwise kinds on n vectors v, results in e: erf; Gelu as x * (1 + erf(x / sqrt 2))
 * * 0.5 (approximate='none', in the order of its five-node spelling); sigmoid as 1 / (1 + e^-x)
 * for x >= 0 and e^x / (1 + e^x) below, from e^-|x|, which never overflows (sigmoid(-100) is
 * then 0, as exp flushes to zero there, not a subnormal); Swish as x * sigmoid(x). */
CPU_INLINE void map8n(const f32x8 *v, f32x8 *e, const int n, cpu_math_kind kind, float beta,
                       const cpu_fast_constants *c) {
  const i32x8 sign = (i32x8)splat8(-0.0f);
  if (kind == CPU_MATH_ERF || kind == CPU_MATH_GELU) {
    FOR_LANES(n, e[l] = kind == CPU_MATH_GELU ? v[l] * (float)M_SQRT1_2 : v[l]);
    erf8n(e, n);
    if (kind == CPU_MATH_GELU) FOR_LANES(n, e[l] = v[l] * (e[l] + 1.0f) * 0.5f);
    return;
  }
  f32x8 u[LANES_MAX], s[LANES_MAX]; /* the sigmoid's argument: x, or x * beta for Swish */
  FOR_LANES(n, u[l] = kind == CPU_MATH_SWISH ? v[l] * beta : v[l]);
  FOR_LANES(n, e[l] = (f32x8)((i32x8)u[l] | sign)); /* -|u| */
  exp8n(e, n, c);
  FOR_LANES(n, s[l] = 1.0f / (1.0f + e[l]));
  FOR_LANES(n, e[l] = select8(u[l] >= 0.0f, s[l], e[l] * s[l]));
  if (kind == CPU_MATH_SWISH) FOR_LANES(n, e[l] = v[l] * e[l]);
}

/* One elementwise kind over n elements. */
CPU_CLONES_FMA
static void map_elements(const float *x, float *y, long n, cpu_math_kind kind, float beta) {
  const cpu_fast_constants c = *constants(); /* a local copy: y may alias it */
  f32x8 v[LANES_MAX], e[LANES_MAX];
  long i = 0;
  for (; i + 8 * LANES_MAX <= n; i += 8 * LANES_MAX) {
    FOR_LANES(LANES_MAX, LOAD8(v[l], x + i + 8 * l));
    map8n(v, e, LANES_MAX, kind, beta, &c);
    FOR_LANES(LANES_MAX, STORE8(y + i + 8 * l, e[l]));
  }
  for (; i < n; i += 8) {
    int count = n - i < 8 ? (int)(n - i) : 8;
    if (count == 8) LOAD8(v[0], x + i);
    else v[0] = load_part(x + i, count, 0.0f);
    map8n(v, e, 1, kind, beta, &c);
    if (count == 8) STORE8(y + i, e[0]);
    else memcpy(y + i, &e[0], (size_t)count * sizeof *y);
  }
}

/* Part `part` of `parts` of the rows (of the elements, for erf, in multiples of 8). */
static void run_part(void *arg, int part) {
  const cpu_math_job *job = arg;
  const cpu_math_params *p = job->p;
  bool elementwise = elementwise_kind(p->kind);
  long units = elementwise ? (p->cols + 7) / 8 : p->rows, start, end;
  cpu_workers_range(units, job->parts, part, &start, &end);
  long count = end - start;
  if (count <= 0) return;
  if (elementwise) {
    long at = start * 8, n = count * 8 < p->cols - at ? count * 8 : p->cols - at;
    map_elements(job->x + at, job->y + at, n, p->kind, p->scale);
    return;
  }
  long at = start * p->cols;
  if (p->kind == CPU_MATH_SOFTMAX) softmax_rows(p, job->x, job->aux[0], job->y, start, count);
  else
    layer_norm_rows(job->x + at, job->skip ? job->skip + at : NULL, job->aux[0], job->aux[1],
                    job->y + at, count, p->cols, p->eps);
}

static void host_math(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                      const void *params) {
  const cpu_math_params *p = params;
  int aux = p->skip ? n_in - 1 : n_in; /* the skip comes last */
  cpu_math_job job = {p, in[0].data, {aux > 1 ? in[1].data : NULL, aux > 2 ? in[2].data : NULL},
                p->skip ? in[n_in - 1].data : NULL, (float *)out->data, 1};
  if (p->rows * p->cols >= PARALLEL_MIN_ELEMENTS) job.parts = cpu_workers_parts();
  cpu_workers_run(run_part, &job, job.parts);
}

/* --- building them ------------------------------------------------------------------------- */
static atomic_bool enabled = true;
void cpu_set_host_kernels(bool on) { atomic_store(&enabled, on); }
bool cpu_host_kernels_enabled(void) { return atomic_load(&enabled); }

bool cpu_kernel_applies(const tr_ctx *t, mx_array x) {
  return atomic_load(&enabled) && t->mx->device == MX_DEVICE_CPU && mx_dtype_of(x) == MX_FLOAT32 &&
         t->trace != TR_TRACE_SHAPELESS;
}

static int build(tr_ctx *t, cpu_math_params p, const char *name, mx_array *ins, int n_ins,
                 mx_array *y) {
  mx_array x = ins[0];
  int rank = mx_ndim(x);
  long elements = 1;
  for (int i = 0; i < rank; i++) elements *= mx_shape(x)[i];
  if (elementwise_kind(p.kind)) p.rows = 1, p.cols = elements;
  else p.cols = rank ? mx_shape(x)[rank - 1] : 1, p.rows = p.cols ? elements / p.cols : 0;
  return mx_host_kernel(t->mx, y, name, host_math, &p, sizeof p, ins, n_ins, mx_shape(x), rank,
                        MX_FLOAT32, 0);
}

int cpu_softmax_last(tr_ctx *t, mx_array x, float scale, mx_array mask, mx_array *y) {
  cpu_math_params p = {CPU_MATH_SOFTMAX, .scale = scale, .masked = mask != NULL};
  if (mask) { /* its axes align with x's trailing ones; its last is whole (the caller checks) */
    int rank = mx_ndim(x), offset = rank - mx_ndim(mask);
    long stride = mx_dim(x, -1);
    p.n_lead = rank - 1;
    for (int i = rank - 2; i >= 0; i--) {
      int d = i >= offset ? mx_shape(mask)[i - offset] : 1;
      p.lead[i] = mx_shape(x)[i];
      p.mask_stride[i] = d == 1 ? 0 : stride;
      stride *= d;
    }
  }
  mx_array ins[2] = {x, mask};
  return build(t, p, mask ? "scaled, masked softmax" : "softmax", ins, mask ? 2 : 1, y);
}

int cpu_layer_norm_last(tr_ctx *t, mx_array x, mx_array skip, mx_array scale, mx_array bias,
                       float eps, mx_array *y) {
  mx_array ins[4] = {x, scale};
  int n = 2;
  if (bias) ins[n++] = bias;
  if (skip) ins[n++] = skip;
  cpu_math_params p = {CPU_MATH_LAYER_NORM, .eps = eps, .skip = skip != NULL};
  return build(t, p, skip ? "layer normalization of a sum" : "layer normalization", ins, n, y);
}

int cpu_erf(tr_ctx *t, mx_array x, mx_array *y) {
  return build(t, (cpu_math_params){CPU_MATH_ERF}, "erf", &x, 1, y);
}

int cpu_gelu(tr_ctx *t, mx_array x, mx_array *y) {
  return build(t, (cpu_math_params){CPU_MATH_GELU}, "gelu", &x, 1, y);
}

/* An elementwise kind (Gelu, Swish) over a run of finished elements, in place, as another
 * kernel's epilogue. */
static void elementwise_epilogue(const void *params, float *run, long count) {
  const cpu_math_params *p = params;
  map_elements(run, run, count, p->kind, p->scale);
}

static int fold(tr_ctx *t, cpu_math_params p, mx_array x, mx_array *y) {
  return mx_fold_epilogue(t->mx, y, x, elementwise_epilogue, &p, sizeof p);
}

int cpu_gelu_fold(tr_ctx *t, mx_array x, mx_array *y) {
  return fold(t, (cpu_math_params){CPU_MATH_GELU}, x, y);
}

int cpu_sigmoid(tr_ctx *t, mx_array x, mx_array *y) {
  return build(t, (cpu_math_params){CPU_MATH_SIGMOID}, "sigmoid", &x, 1, y);
}

int cpu_swish(tr_ctx *t, mx_array x, float beta, mx_array *y) {
  return build(t, (cpu_math_params){CPU_MATH_SWISH, .scale = beta}, "swish", &x, 1, y);
}

int cpu_swish_fold(tr_ctx *t, mx_array x, float beta, mx_array *y) {
  return fold(t, (cpu_math_params){CPU_MATH_SWISH, .scale = beta}, x, y);
}
