/*
 * The register kernels of the plugin's single-precision matrix product (sgemm.c): one 6 x 16
 * block of C from a packed 6-row panel of A and a packed 16-column panel of B. The x86-64 build
 * has a version in AVX2 fused multiply-adds, 12 accumulators of 8 floats, chosen once at first use
 * when the processor has AVX2 and FMA, and where it also has AVX-512F a 6 x 32 block over two
 * panels at once, 12 accumulators of 16 floats, for whole blocks; every other processor runs the
 * portable version, which rounds each product before adding it. All write C through the same
 * store step: overwrite or add, and a partial block (at the right or bottom edge) through a
 * scratch tile.
 */
#include "cpu/sgemm/internal.h"


/* Stores the 6 x 16 tile acc into C's m x n corner: overwriting C when add is 0 (C is not read,
 * so stale NaNs there do not leak), adding to it otherwise; plus the bias row (n floats) on every
 * row when bias is not NULL. */
static void store_tile(const float *acc, float *c, long ldc, int m, int n, int add,
                       const float *bias) {
  for (int i = 0; i < m; i++) {
    float *row = c + i * ldc;
    const float *src = acc + i * SGEMM_NR;
    for (int j = 0; j < n; j++) {
      float v = bias ? src[j] + bias[j] : src[j];
      row[j] = add ? row[j] + v : v;
    }
  }
}

static void kernel_portable(int kc, const float *a, const float *b, float *c, long ldc, int m,
                            int n, int add, const float *bias) {
  float acc[SGEMM_MR * SGEMM_NR] = {0};
  for (int k = 0; k < kc; k++, a += SGEMM_MR, b += SGEMM_NR)
    for (int i = 0; i < SGEMM_MR; i++)
      for (int j = 0; j < SGEMM_NR; j++) acc[i * SGEMM_NR + j] += a[i] * b[j];
  store_tile(acc, c, ldc, m, n, add, bias);
}

/* m rows of A where they lie (m <= MR) */
static void rows_portable(int kc, const float *a, long lda, const float *b, float *c, long ldc,
                          int m, int n, int add, const float *bias) {
  float acc[SGEMM_MR * SGEMM_NR] = {0};
  for (int k = 0; k < kc; k++, b += SGEMM_NR)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < SGEMM_NR; j++) acc[i * SGEMM_NR + j] += a[i * lda + k] * b[j];
  store_tile(acc, c, ldc, m, n, add, bias);
}

#define ROWS_PORTABLE(M)                                                                          \
  static void kernel_rows##M##_portable(int kc, const float *a, long lda, const float *b,         \
                                        float *c, long ldc, int n, int add, const float *bias) {  \
    rows_portable(kc, a, lda, b, c, ldc, M, n, add, bias);                                        \
  }
ROWS_PORTABLE(1)
ROWS_PORTABLE(2)
ROWS_PORTABLE(3)
ROWS_PORTABLE(4)
ROWS_PORTABLE(5)
ROWS_PORTABLE(6)

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2_FMA __attribute__((target("avx2,fma")))

/* Writes the 12 accumulators (6 rows of 16) to C, through the scratch tile when the block is
 * partial. */
AVX2_FMA static inline __attribute__((always_inline)) void
store_avx2(__m256 rows[SGEMM_MR][2], float *c, long ldc, int m, int n, int add,
           const float *bias) {
  if (m == SGEMM_MR && n == SGEMM_NR) {
    __m256 b0 = _mm256_setzero_ps(), b1 = b0;
    if (bias) b0 = _mm256_loadu_ps(bias), b1 = _mm256_loadu_ps(bias + 8);
    for (int i = 0; i < SGEMM_MR; i++) {
      float *row = c + i * ldc;
      __m256 lo = rows[i][0], hi = rows[i][1];
      if (bias) lo = _mm256_add_ps(lo, b0), hi = _mm256_add_ps(hi, b1);
      if (add) {
        lo = _mm256_add_ps(lo, _mm256_loadu_ps(row));
        hi = _mm256_add_ps(hi, _mm256_loadu_ps(row + 8));
      }
      _mm256_storeu_ps(row, lo), _mm256_storeu_ps(row + 8, hi);
    }
    return;
  }
  float acc[SGEMM_MR * SGEMM_NR] __attribute__((aligned(32)));
  for (int i = 0; i < SGEMM_MR; i++) {
    _mm256_store_ps(acc + i * SGEMM_NR, rows[i][0]);
    _mm256_store_ps(acc + i * SGEMM_NR + 8, rows[i][1]);
  }
  store_tile(acc, c, ldc, m, n, add, bias);
}

_Static_assert(SGEMM_MR == 6, "the AVX2 kernels hold 6 rows, the tail tables 1 to 5");

/* Asks for the m rows of the C tile (width floats: 16, one or two lines a row, or the pair
 * kernel's 32, two or three) before the steps over k, which outlast fetching them. MLX gives
 * each product's output a buffer from its cache, which hands back the buffer freed longest ago,
 * so C is often out of cache, and each row's store waited on its lines at the end of the tile
 * (MiniLM's 36 products on one core, each into a buffer of its own: 26.0-26.2 -> 25.0-25.3 ms, as
 * fast as into two buffers in turn; through the EP 26.8-27.3
 * -> 25.8-26.6 ms). */
static inline __attribute__((always_inline)) void prefetch_tile(const float *c, long ldc, int m,
                                                                 int width) {
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < width; j += SGEMM_NR) __builtin_prefetch(c + i * ldc + j, 1, 3);
    __builtin_prefetch(c + i * ldc + width - 1, 1, 3);
  }
}

/* One step over k: row i of A's element is a_i, B's 16 floats are b0:b1. */
#define STEP(a0, a1, a2, a3, a4, a5)                                                              \
  do {                                                                                            \
    __m256 ai = _mm256_broadcast_ss(a0);                                                          \
    c00 = _mm256_fmadd_ps(ai, b0, c00), c01 = _mm256_fmadd_ps(ai, b1, c01);                      \
    ai = _mm256_broadcast_ss(a1);                                                                 \
    c10 = _mm256_fmadd_ps(ai, b0, c10), c11 = _mm256_fmadd_ps(ai, b1, c11);                      \
    ai = _mm256_broadcast_ss(a2);                                                                 \
    c20 = _mm256_fmadd_ps(ai, b0, c20), c21 = _mm256_fmadd_ps(ai, b1, c21);                      \
    ai = _mm256_broadcast_ss(a3);                                                                 \
    c30 = _mm256_fmadd_ps(ai, b0, c30), c31 = _mm256_fmadd_ps(ai, b1, c31);                      \
    ai = _mm256_broadcast_ss(a4);                                                                 \
    c40 = _mm256_fmadd_ps(ai, b0, c40), c41 = _mm256_fmadd_ps(ai, b1, c41);                      \
    ai = _mm256_broadcast_ss(a5);                                                                 \
    c50 = _mm256_fmadd_ps(ai, b0, c50), c51 = _mm256_fmadd_ps(ai, b1, c51);                      \
  } while (0)

#define ACCUMULATORS                                                                              \
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;        \
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00
#define ROWS {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}}

AVX2_FMA static void kernel_avx2(int kc, const float *a, const float *b, float *c, long ldc,
                                 int m, int n, int add, const float *bias) {
  ACCUMULATORS;
  prefetch_tile(c, ldc, m, SGEMM_NR);
  for (int k = 0; k < kc; k++, a += SGEMM_MR, b += SGEMM_NR) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    STEP(a, a + 1, a + 2, a + 3, a + 4, a + 5);
  }
  __m256 rows[SGEMM_MR][2] = ROWS;
  store_avx2(rows, c, ldc, m, n, add, bias);
}

/* The rows kernel over M <= MR rows (M a constant at each use below: the rows past M compile
 * away, and every accumulator stays in a register; an array of them indexed in a loop did not,
 * and the tails ran at a third of the 6-row kernel's speed). Each step also asks for the line of
 * B's next panel (panels lie one after another) that the same step of that panel will read, into
 * level 2: weights stream from memory, and without it the first row block of every panel waited
 * on each line (MiniLM's products on one core: 32.8 -> 31.2 ms a Run's worth). Past the last
 * panel it asks for lines nobody reads; a prefetch never faults. */
#define ROW_STEP(i, ci0, ci1)                                                                     \
  if (M > (i)) {                                                                                  \
    __m256 ai = _mm256_broadcast_ss(r[i] + k);                                                    \
    ci0 = _mm256_fmadd_ps(ai, b0, ci0), ci1 = _mm256_fmadd_ps(ai, b1, ci1);                      \
  }
AVX2_FMA static inline __attribute__((always_inline)) void
rows_avx2(const int M, int kc, const float *a, long lda, const float *b, float *c, long ldc,
          int n, int add, const float *bias) {
  ACCUMULATORS;
  const float *r[SGEMM_MR];
  for (int i = 0; i < SGEMM_MR; i++) r[i] = a + (i < M ? i : 0) * lda;
  prefetch_tile(c, ldc, M, SGEMM_NR);
  const float *next = b + (long)kc * SGEMM_NR;
  for (int k = 0; k < kc; k++, b += SGEMM_NR, next += SGEMM_NR) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    _mm_prefetch((const char *)next, _MM_HINT_T1);
    ROW_STEP(0, c00, c01) ROW_STEP(1, c10, c11) ROW_STEP(2, c20, c21)
    ROW_STEP(3, c30, c31) ROW_STEP(4, c40, c41) ROW_STEP(5, c50, c51)
  }
  __m256 rows[SGEMM_MR][2] = ROWS;
  store_avx2(rows, c, ldc, M, n, add, bias);
}

#define ROWS_AVX2(M)                                                                              \
  AVX2_FMA static void kernel_rows##M##_avx2(int kc, const float *a, long lda, const float *b,   \
                                             float *c, long ldc, int n, int add,                  \
                                             const float *bias) {                                 \
    rows_avx2((M), kc, a, lda, b, c, ldc, n, add, bias);                                          \
  }
ROWS_AVX2(1)
ROWS_AVX2(2)
ROWS_AVX2(3)
ROWS_AVX2(4)
ROWS_AVX2(5)
ROWS_AVX2(6)

/* 8 rows of 8 floats (row i at src + i * stride) transposed into dst's 8 rows (row i at dst + i *
 * SGEMM_NR): row i of the result holds element i of every source row. */
AVX2_FMA static inline __attribute__((always_inline)) void
transpose8(const float *src, long stride, float *dst) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * stride);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; h++) {
      r[i + h] = _mm256_shuffle_ps(t[i + h], t[i + h + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[i + h + 2] = _mm256_shuffle_ps(t[i + h], t[i + h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    }
  /* r[0..3] hold rows 0-3's elements (0,4), (2,6), (1,5), (3,7) by lane half; r[4..7] rows 4-7's */
  static const int order[4] = {0, 2, 1, 3};
  for (int i = 0; i < 4; i++) {
    _mm256_storeu_ps(dst + order[i] * SGEMM_NR, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (order[i] + 4) * SGEMM_NR,
                     _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

/* sgemm_kernels.pack_columns: the panel's 16 columns are 16 rows of b, cs apart, each kc long;
 * whole 8 x 8 blocks through transpose8, the last kc % 8 steps one float at a time. */
AVX2_FMA static void pack_columns_avx2(const float *b, long cs, int kc, float *dst) {
  int whole = kc / 8 * 8;
  for (int p = 0; p < whole; p += 8)
    for (int j = 0; j < SGEMM_NR; j += 8) transpose8(b + j * cs + p, cs, dst + p * SGEMM_NR + j);
  for (int p = whole; p < kc; p++)
    for (int j = 0; j < SGEMM_NR; j++) dst[p * SGEMM_NR + j] = b[j * cs + p];
}

#define AVX512 __attribute__((target("avx512f,avx2,fma")))

/* One step over k for row i of the pair: its element ai times both panels' 16 floats. */
#define PAIR_STEP(ai, c0, c1)                                                                     \
  do {                                                                                            \
    __m512 a_ = _mm512_set1_ps(ai);                                                               \
    c0 = _mm512_fmadd_ps(a_, x0, c0), c1 = _mm512_fmadd_ps(a_, x1, c1);                          \
  } while (0)
/* Row i's two accumulators plus the bias (when given) and C (when adding), stored. */
#define PAIR_STORE(i, c0, c1)                                                                     \
  do {                                                                                            \
    float *row_ = c + (i) * ldc;                                                                  \
    if (bias) c0 = _mm512_add_ps(c0, b0), c1 = _mm512_add_ps(c1, b16);                            \
    if (add) {                                                                                    \
      c0 = _mm512_add_ps(c0, _mm512_loadu_ps(row_));                                              \
      c1 = _mm512_add_ps(c1, _mm512_loadu_ps(row_ + SGEMM_NR));                                   \
    }                                                                                             \
    _mm512_storeu_ps(row_, c0), _mm512_storeu_ps(row_ + SGEMM_NR, c1);                            \
  } while (0)

/* sgemm_kernels.rows_pair in AVX-512: 6 whole rows by the 32 columns of two panels, the same
 * steps as rows_avx2 with each accumulator twice as wide (12 of 32 registers). A step asks for
 * the next pair's lines as rows_avx2 does for the next panel. On the Zen 4 machine of
 * 2026-12-04, MiniLM's 36 products on one core, each into a buffer of its own: 128 rows 24.8 ms
 * against 25.1-25.3 with the AVX2 kernel, 1024 rows 194.5-196.3 against 199.5-213; MiniLM b8
 * through the EP, both builds alternated in one process: 1.3 % and 1.8 % faster. A 12-row
 * version (24 accumulators) was no faster than this one at 1024 rows. */
AVX512 static void kernel_rows6_pair_avx512(int kc, const float *a, long lda, const float *b,
                                            float *c, long ldc, int add, const float *bias) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float *r0 = a, *r1 = a + lda, *r2 = r1 + lda, *r3 = r2 + lda, *r4 = r3 + lda,
              *r5 = r4 + lda;
  prefetch_tile(c, ldc, SGEMM_MR, 2 * SGEMM_NR);
  const float *b1 = b + (long)kc * SGEMM_NR, *next = b1 + (long)kc * SGEMM_NR;
  for (int k = 0; k < kc; k++, b += SGEMM_NR, b1 += SGEMM_NR, next += SGEMM_NR) {
    __m512 x0 = _mm512_loadu_ps(b), x1 = _mm512_loadu_ps(b1);
    _mm_prefetch((const char *)next, _MM_HINT_T1);
    _mm_prefetch((const char *)(next + (long)kc * SGEMM_NR), _MM_HINT_T1);
    PAIR_STEP(r0[k], c00, c01);
    PAIR_STEP(r1[k], c10, c11);
    PAIR_STEP(r2[k], c20, c21);
    PAIR_STEP(r3[k], c30, c31);
    PAIR_STEP(r4[k], c40, c41);
    PAIR_STEP(r5[k], c50, c51);
  }
  __m512 b0 = _mm512_setzero_ps(), b16 = b0;
  if (bias) b0 = _mm512_loadu_ps(bias), b16 = _mm512_loadu_ps(bias + SGEMM_NR);
  PAIR_STORE(0, c00, c01);
  PAIR_STORE(1, c10, c11);
  PAIR_STORE(2, c20, c21);
  PAIR_STORE(3, c30, c31);
  PAIR_STORE(4, c40, c41);
  PAIR_STORE(5, c50, c51);
}

static bool has_avx2_fma(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static bool has_avx512f(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}
#endif

sgemm_kernels sgemm_pick_kernels(bool portable, bool wide) {
#if defined(__x86_64__)
  if (!portable && has_avx2_fma())
    return (sgemm_kernels){kernel_avx2, kernel_rows6_avx2,
                           {NULL, kernel_rows1_avx2, kernel_rows2_avx2, kernel_rows3_avx2,
                            kernel_rows4_avx2, kernel_rows5_avx2},
                           pack_columns_avx2,
                           wide && has_avx512f() ? kernel_rows6_pair_avx512 : NULL};
#else
  (void)wide;
#endif
  return (sgemm_kernels){kernel_portable, kernel_rows6_portable,
                         {NULL, kernel_rows1_portable, kernel_rows2_portable,
                          kernel_rows3_portable, kernel_rows4_portable, kernel_rows5_portable},
                         NULL, NULL};
}
