/*
 * The elementwise chain host kernel (chain.h): a short program of steps with one-element
 * constants applied to every element of one float32 value, 64 floats (8 vectors) at a time in
 * registers, each step decoded once per 64, and blocks of elements split over the cores
 * (cpu/workers.c). Each step rounds as its ONNX node does (no fused multiply-add), and the
 * portable and AVX2 builds of the loop give the same bits, so only the passes MLX would make,
 * and its single thread, are saved. The kernel is elementwise to the bridge, which runs it
 * beneath a shared transpose (a convolution's channels-first view) rather than copying. The same
 * loop serves as the epilogue of the kernel computing the chain's input (cpu_chain_fold), over each
 * run of elements that kernel has just finished: no pass of its own.
 */
#include "cpu/chain.h"

#include "cpu/workers.h"
#include "cpu/simd.h"

enum { BLOCK = 2048 }; /* elements per unit of the split over the cores */
enum { PARALLEL_MIN_ELEMENTS = 1 << 14 };

typedef struct cpu_chain_params {
  int n;
  cpu_chain_step steps[CPU_CHAIN_MAX_STEPS];
  long elements;
} cpu_chain_params;


/* One step on the LANES vectors of v (held in registers): the step is decoded once for all of
 * them. max, min, clip and relu keep a NaN element (the comparison is false). */
enum { LANES = 8 };
#define EACH(stmt) FOR_LANES(LANES, stmt)
CPU_INLINE void step_block(const cpu_chain_step *s, f32x8 *v) {
  f32x8 a = splat8(s->a), b = splat8(s->b), zero = splat8(0.0f), three = splat8(3.0f),
        six = splat8(6.0f), t;
  switch (s->op) {
    case CPU_CHAIN_MUL: EACH(v[l] = v[l] * a); break;
    case CPU_CHAIN_ADD: EACH(v[l] = v[l] + a); break;
    case CPU_CHAIN_SUB: EACH(v[l] = v[l] - a); break;
    case CPU_CHAIN_SUB_FROM: EACH(v[l] = a - v[l]); break;
    case CPU_CHAIN_DIV: EACH(v[l] = v[l] / a); break;
    case CPU_CHAIN_DIV_INTO: EACH(v[l] = a / v[l]); break;
    case CPU_CHAIN_MAX: EACH(v[l] = select8(v[l] < a, a, v[l])); break;
    case CPU_CHAIN_MIN: EACH(v[l] = select8(v[l] > a, a, v[l])); break;
    case CPU_CHAIN_CLIP:
      EACH((v[l] = select8(v[l] < a, a, v[l]), v[l] = select8(v[l] > b, b, v[l])));
      break;
    case CPU_CHAIN_RELU: EACH(v[l] = select8(v[l] < zero, zero, v[l])); break;
    case CPU_CHAIN_HARDSWISH:
      EACH((t = v[l] + three, t = select8(t < zero, zero, t), t = select8(t > six, six, t),
            v[l] = v[l] * t / six));
      break;
  }
}

/* The same steps where this processor has AVX2: max and min as the vector max and min
 * instructions, which pick their second operand when either is NaN or both are equal, exactly
 * what the selects above pick, and the constants broadcast from memory (PP-OCR's chain, scale,
 * shift, HardSwish, scale, shift: 0.82 -> 0.66 ns a float on one core; HardSwish's clamps were
 * a compare and a blend each); the other steps as above. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define CHAIN_AVX2 1
__attribute__((target("avx2"), always_inline)) static inline void
step_block_avx2(const cpu_chain_step *s, f32x8 *v) {
  const f32x8 a = _mm256_broadcast_ss(&s->a), b = _mm256_broadcast_ss(&s->b),
              zero = _mm256_setzero_ps(), three = _mm256_set1_ps(3.0f), six = _mm256_set1_ps(6.0f);
  f32x8 t;
  switch (s->op) {
    case CPU_CHAIN_MAX: EACH(v[l] = _mm256_max_ps(a, v[l])); break;
    case CPU_CHAIN_MIN: EACH(v[l] = _mm256_min_ps(a, v[l])); break;
    case CPU_CHAIN_CLIP:
      EACH((v[l] = _mm256_max_ps(a, v[l]), v[l] = _mm256_min_ps(b, v[l])));
      break;
    case CPU_CHAIN_RELU: EACH(v[l] = _mm256_max_ps(zero, v[l])); break;
    case CPU_CHAIN_HARDSWISH:
      EACH((t = _mm256_max_ps(zero, v[l] + three), t = _mm256_min_ps(six, t),
            v[l] = v[l] * t / six));
      break;
    case CPU_CHAIN_MUL: EACH(v[l] = v[l] * a); break;
    case CPU_CHAIN_ADD: EACH(v[l] = v[l] + a); break;
    default: step_block(s, v);
  }
}
#endif

/* Blocks of LANES vectors through every step, then the remainder as one block padded with zeros
 * (whatever the steps make of them is discarded); built once per step function below. */
#define CHAIN_LOOP(step)                                                \
  do {                                                                  \
    const long block = LANES * 8;                                       \
    long i = 0;                                                         \
    f32x8 v[LANES];                                                     \
    for (; i + block <= n; i += block) {                                \
      EACH(LOAD8(v[l], x + i + 8 * l));                                 \
      for (int k = 0; k < p->n; k++) step(&p->steps[k], v);             \
      EACH(STORE8(y + i + 8 * l, v[l]));                                \
    }                                                                   \
    if (i < n) {                                                        \
      float buf[LANES * 8] = {0};                                       \
      memcpy(buf, x + i, (size_t)(n - i) * sizeof *x);                  \
      EACH(LOAD8(v[l], buf + 8 * l));                                   \
      for (int k = 0; k < p->n; k++) step(&p->steps[k], v);             \
      EACH(STORE8(buf + 8 * l, v[l]));                                  \
      memcpy(y + i, buf, (size_t)(n - i) * sizeof *y);                  \
    }                                                                   \
  } while (0)

static void chain_elements_portable(const cpu_chain_params *p, const float *x, float *y, long n) {
  CHAIN_LOOP(step_block);
}

#ifdef CHAIN_AVX2
__attribute__((target("avx2"))) static void chain_elements_avx2(const cpu_chain_params *p,
                                                                 const float *x, float *y,
                                                                 long n) {
  CHAIN_LOOP(step_block_avx2);
}
#endif

static void chain_elements(const cpu_chain_params *p, const float *x, float *y, long n) {
#ifdef CHAIN_AVX2
  if (__builtin_cpu_supports("avx2")) {
    chain_elements_avx2(p, x, y, n);
    return;
  }
#endif
  chain_elements_portable(p, x, y, n);
}

typedef struct cpu_chain_job {
  const cpu_chain_params *p;
  const float *x;
  float *y;
  int parts;
} cpu_chain_job;

static void chain_part(void *arg, int part) {
  const cpu_chain_job *j = arg;
  long blocks = (j->p->elements + BLOCK - 1) / BLOCK, first, last;
  cpu_workers_range(blocks, j->parts, part, &first, &last);
  long start = first * BLOCK, end = last * BLOCK < j->p->elements ? last * BLOCK : j->p->elements;
  if (start < end) chain_elements(j->p, j->x + start, j->y + start, end - start);
}

static void chain_kernel(const mx_host_tensor *in, int n_in, const mx_host_tensor *out,
                         const void *params) {
  (void)n_in;
  const cpu_chain_params *p = params;
  cpu_chain_job j = {p, in[0].data, (float *)out->data, 1};
  if (p->elements >= PARALLEL_MIN_ELEMENTS) j.parts = cpu_workers_parts();
  cpu_workers_run(chain_part, &j, j.parts);
}

/* The steps over a run of finished elements, in place, as another kernel's epilogue. */
static void chain_epilogue(const void *params, float *run, long count) {
  chain_elements(params, run, run, count);
}

static int chain_params(tr_ctx *t, mx_array x, const cpu_chain_step *steps, int n,
                        cpu_chain_params *p) {
  if (n < 1 || n > CPU_CHAIN_MAX_STEPS)
    return tr_fail(t, "an elementwise chain takes 1 to %d steps", CPU_CHAIN_MAX_STEPS);
  *p = (cpu_chain_params){n, {{0}}, (long)mx_size(x)};
  memcpy(p->steps, steps, (size_t)n * sizeof *steps);
  return MX_OK;
}

int cpu_chain_build(tr_ctx *t, mx_array x, const cpu_chain_step *steps, int n, mx_array *y) {
  cpu_chain_params p;
  TR_TRY(chain_params(t, x, steps, n, &p));
  return mx_host_kernel(t->mx, y, "elementwise chain", chain_kernel, &p, sizeof p, &x, 1,
                        mx_shape(x), mx_ndim(x), MX_FLOAT32, MX_HOST_ELEMENTWISE);
}

int cpu_chain_fold(tr_ctx *t, mx_array x, const cpu_chain_step *steps, int n, mx_array *y) {
  cpu_chain_params p;
  *y = NULL;
  TR_TRY(chain_params(t, x, steps, n, &p));
  return mx_fold_epilogue(t->mx, y, x, chain_epilogue, &p, sizeof p);
}
