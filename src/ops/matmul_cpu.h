/*
 * MatMul on the CPU device through the plugin's product (matmul_cpu.c): a constant float32
 * weight packed once at plan build, and batches of computed operands read where they lie.
 */
#ifndef OPS_MATMUL_CPU_H
#define OPS_MATMUL_CPU_H

#include "plan/translate.h"

/* In a prepare hook: the packed form of weight w [k, n], or *packed NULL where it does not apply
 * (another device or dtype, host kernels switched off (hm_enabled), or MLX's products handed to
 * OpenBLAS). */
int matmul_cpu_prepare(tr_ctx *t, mx_array w, mx_array *packed);
/* Whether packed is what matmul_cpu_prepare made of a [k, n] weight. */
bool matmul_cpu_packed_for(mx_array packed, long k, long n);
/* Whether a @ w runs over the packed weight: float32 A of rank >= 1 whose last axis is w's rows,
 * outside shapeless traces. */
bool matmul_cpu_applies(const tr_ctx *t, mx_array a, mx_array w, mx_array packed);
/* a @ w (+ bias, a float32 [n] row, when not NULL) as one host kernel over the packed weight; y
 * has shape a.shape[:-1] + [n]. Without a bias, an Add of one can fold in later
 * (mx_fold_into_product). */
int matmul_cpu_build(tr_ctx *t, mx_array a, mx_array w, mx_array packed, mx_array bias,
                     mx_array *y);

/* Whether a @ b, both computed float32 operands with a batch (rank >= 3 for one of them, batch
 * axes broadcasting), runs as one host kernel that reads them where they lie: per-head views of
 * attention (transposes of reshapes) are not copied first, and the batch's products are spread
 * over the cores. Outside shapeless traces, with the plugin's product serving. */
bool matmul_cpu_batched_applies(const tr_ctx *t, mx_array a, mx_array b);
int matmul_cpu_batched_build(tr_ctx *t, mx_array a, mx_array b, mx_array *y);

/* Where operand t's matrix (its last two axes) for batch item `item` starts, in elements: item
 * counts row-major over batch[0:n_batch], the output's batch axes, with which t's other axes
 * align at the end; an axis of size 1 broadcasts. */
long mm_item_offset(const mx_host_tensor *t, int n_batch, const int *batch, long item);

#endif
