/*
 * Shared between the plugin's matrix product (sgemm.c) and its register kernels
 * (sgemm/kernel.c): the block sizes and the kernel's signature.
 */
#ifndef CPU_SGEMM_INTERNAL_H
#define CPU_SGEMM_INTERNAL_H

#include <stdbool.h>

/* A register block of C is MR x NR; A is packed in panels of MR rows, B in panels of NR
 * columns. KC x NR floats of B (24 KiB) stay in the level-1 cache while the kernels stream
 * MC x KC of A (198 KiB) from level 2; NC bounds the packed B block (768 KiB). Chosen by
 * measurement on the project's 2-core machine (docs/BENCHMARKS.md). MC is 132 so that a
 * transformer's 128 tokens take one pass over each weight panel (96 read every panel twice;
 * MiniLM's products on one core, measured with 128: 31.5 -> 31.2 ms a Run's worth, on the Zen 3
 * machine), and a whole number of MR-row panels, which packing A rounds up to. */
enum { SGEMM_MR = 6, SGEMM_NR = 16, SGEMM_KC = 384, SGEMM_MC = 132, SGEMM_NC = 512 };
_Static_assert(SGEMM_MC % SGEMM_MR == 0, "packed A holds whole panels of MR rows");

/* The register kernels. Both write C[0:m, 0:n] (row stride ldc), overwriting it or, when add is
 * set, adding to it, plus bias[0:n] on every row when bias is not NULL, from a packed kc x NR
 * panel of B (any alignment: weights packed ahead of
 * time lie where MLX allocated them); m <= MR, n <= NR.
 *   packed: A is a packed MR x kc panel (k-major, MR floats per k);
 *   rows:   A is MR full rows read where they lie, row i at a + i * lda, k contiguous (packing
 *           a row-major A would cost a copy of it per thread and per column block);
 *   rows_tail: the same for fewer rows. */
typedef struct sgemm_kernels {
  void (*packed)(int kc, const float *a, const float *b, float *c, long ldc, int m, int n,
                 int add, const float *bias);
  void (*rows)(int kc, const float *a, long lda, const float *b, float *c, long ldc, int n,
               int add, const float *bias);
  /* rows_tail[m] for m in 1..MR-1: the rows kernel over m rows only (a last partial panel of a
   * row-major A, which would otherwise be packed and computed as a whole panel). */
  void (*rows_tail[SGEMM_MR])(int kc, const float *a, long lda, const float *b, float *c,
                              long ldc, int n, int add, const float *bias);
  /* One whole panel of B (kc x NR) whose columns lie in rows: element (p, j) at b[p + j * cs]
   * (a transposed operand, attention's keys), into dst k-major, or NULL where the processor
   * has no faster way than pack_b's gather. */
  void (*pack_columns)(const float *b, long cs, int kc, float *dst);
  /* MR full rows of A read where they lie against two whole panels of B that follow each other
   * (b, then b + kc * NR: 2 * NR columns), or NULL where the processor has no wider registers:
   * twice the columns per step over k for the same count of accumulator registers. */
  void (*rows_pair)(int kc, const float *a, long lda, const float *b, float *c, long ldc,
                    int add, const float *bias);
} sgemm_kernels;

/* The fastest kernels this processor runs, or the portable ones when portable is set; wide
 * false leaves out the AVX-512 pair kernel (the AVX2 ones alone, to test them on any
 * processor that has AVX-512, or to compare). */
sgemm_kernels sgemm_pick_kernels(bool portable, bool wide);

#endif
