/*
 * The plugin's single-precision matrix product, which serves MLX's CPU matrix products: libmlx
 * calls cblas_sgemm, and the plugin exports one (sgemm.c) that the loader finds first.
 */
#ifndef CPU_SGEMM_H
#define CPU_SGEMM_H

#include <stdbool.h>
#include <stddef.h>

/* C = alpha * op(A) * op(B) + beta * C, every matrix row-major with unit column stride or given
 * strides: op(A) is m x k with element (i, p) at a[i * rsa + p * csa], op(B) is k x n with (p, j)
 * at b[p * rsb + j * csb], C's row stride is ldc. beta == 0 overwrites C without reading it. */
void cpu_sgemm(int m, int n, int k, float alpha, const float *a, long rsa, long csa,
              const float *b, long rsb, long csb, float beta, float *c, long ldc);

/* An elementwise pass over finished elements of C: fn(params, run, count) rewrites count floats
 * in place, each from itself alone. */
typedef struct cpu_sgemm_post {
  void (*fn)(const void *params, float *run, long count);
  const void *params;
} cpu_sgemm_post;

/* Products with a constant B (a weight) packed once, ahead of time, instead of on every call:
 * cpu_sgemm_packed_floats floats hold B (k x n, element (p, j) at b[p * rsb + j * csb]) packed
 * by cpu_sgemm_pack; then C (m x n, row stride ldc) = A (m x k, row-major, row stride lda) * B,
 * plus bias (n floats) on every row when bias is not NULL, then post applied to every element
 * when post is not NULL: each thread passes over the rows of C it has just finished, while they
 * are in its cache, instead of a pass over all of C afterwards. */
size_t cpu_sgemm_packed_floats(int k, int n);
void cpu_sgemm_pack(int k, int n, const float *b, long rsb, long csb, float *packed);
void cpu_sgemm_prepacked(int m, int n, int k, const float *a, long lda, const float *packed,
                        const float *bias, const cpu_sgemm_post *post, float *c, long ldc);

/* Who serves cblas_sgemm: the plugin's product (the default), or, when own is false and the
 * plugin was built with OpenBLAS, OpenBLAS's (an A/B switch; ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM).
 * Returns whether the plugin's own product serves from now on. Process-wide. */
bool cpu_sgemm_use_own(bool own);

/* Whether the plugin's own product serves cblas_sgemm now (it may take packed weights). */
bool cpu_sgemm_own_serves(void);

/* The portable kernels instead of the processor's fastest, to test them on any processor
 * (ONNXRUNTIME_EP_MLX_PORTABLE_SGEMM=1). Process-wide. */
void cpu_sgemm_use_portable(bool portable);

/* Whether the AVX-512 kernel may serve whole blocks where the processor has AVX-512F (the
 * default), or the AVX2 kernels alone (ONNXRUNTIME_EP_MLX_NO_AVX512_SGEMM=1: to test them on such
 * a processor, or to compare). Process-wide. */
void cpu_sgemm_use_avx512(bool avx512);

#endif
