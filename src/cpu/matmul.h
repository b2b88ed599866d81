/*
 * MatMul on the CPU device through the plugin's product (cpu/matmul.c): a constant float32
 * weight packed once at plan build, and batches of computed operands read where they lie.
 */
#ifndef CPU_MATMUL_H
#define CPU_MATMUL_H

#include "plan/translate.h"

/* In a prepare hook: the packed form of weight w [k, n], or *packed NULL where it does not apply
 * (another device or dtype, host kernels switched off (cpu_host_kernels_enabled), or MLX's products
 * handed to OpenBLAS). */
int cpu_matmul_prepare(tr_ctx *t, mx_array w, mx_array *packed);
/* Whether packed is what cpu_matmul_prepare made of a [k, n] weight. */
bool cpu_matmul_packed_for(mx_array packed, long k, long n);
/* Whether a @ w runs over the packed weight: float32 A of rank >= 1 whose last axis is w's rows,
 * outside shapeless traces. */
bool cpu_matmul_applies(const tr_ctx *t, mx_array a, mx_array w, mx_array packed);
/* a @ w (+ bias, a float32 [n] row, when not NULL) as one host kernel over the packed weight; y
 * has shape a.shape[:-1] + [n]. Without a bias, an Add of one can fold in later
 * (mx_fold_into_product). */
int cpu_matmul_build(tr_ctx *t, mx_array a, mx_array w, mx_array packed, mx_array bias,
                     mx_array *y);

/* Whether a @ b, both computed float32 operands with a batch (rank >= 3 for one of them, batch
 * axes broadcasting), runs as one host kernel that reads them where they lie: per-head views of
 * attention (transposes of reshapes) are not copied first, and the batch's products are spread
 * over the cores. Outside shapeless traces, with the plugin's product serving. */
bool cpu_matmul_batched_applies(const tr_ctx *t, mx_array a, mx_array b);
int cpu_matmul_batched_build(tr_ctx *t, mx_array a, mx_array b, mx_array *y);

/* Where operand t's matrix (its last two axes) for batch item `item` starts, in elements: item
 * counts row-major over batch[0:n_batch], the output's batch axes, with which t's other axes
 * align at the end; an axis of size 1 broadcasts. */
long cpu_matmul_item_offset(const mx_host_tensor *t, int n_batch, const int *batch, long item);

#endif
