/*
 * Softmax (with a scale and an additive mask folded in) and LayerNormalization over the last
 * axis, erf, Gelu, sigmoid and Swish, as host kernels for float32 on the CPU device
 * (math.c): one pass per row (or over the elements) in vector registers, rows split over the
 * cores, in place of the compositions MLX runs as several scalar passes.
 */
#ifndef CPU_MATH_H
#define CPU_MATH_H

#include "cpu/cpu.h"
#include "plan/translate.h"

/* Whether x can take these kernels: float32 on the CPU device, outside shapeless traces (a host
 * kernel's output shape is fixed when it is built), unless turned off. */
bool cpu_kernel_applies(const tr_ctx *t, mx_array x);

/* Process-wide A/B switch, set as each session's EP is created (ONNXRUNTIME_EP_MLX_NO_HOST_MATH=1
 * turns it off; translation then composes these operations as before, MatMul takes MLX's
 * product (cpu/matmul.c), and their rows are shapeless on the CPU device too). */
void cpu_set_host_kernels(bool enabled);
/* cpu_host_kernels_enabled() reads it (cpu/cpu.h). */

/* softmax over x's last axis of x * scale, plus mask when not NULL: a float32 array whose axes
 * align with x's trailing ones, each 1 or x's, the last x's own (the caller checks) */
int cpu_softmax_last(tr_ctx *t, mx_array x, float scale, mx_array mask, mx_array *y);
/* One row of that softmax, for kernels that compute rows themselves (attention.c): y[0:cols]
 * from x[0:cols] (y may be x) and mask[0:cols] (NULL: none). */
void cpu_softmax_row(const float *x, float *y, long cols, float scale, const float *mask);
/* (x - mean) / sqrt(var + eps) * scale + bias over x's last axis, of x + skip when skip is not
 * NULL (a float32 array of x's shape: the residual sum before a transformer's layer norms);
 * scale and bias (bias may be NULL) are float32 vectors of the last axis's length (the caller
 * checks). */
int cpu_layer_norm_last(tr_ctx *t, mx_array x, mx_array skip, mx_array scale, mx_array bias,
                       float eps, mx_array *y);
/* erf, element by element */
int cpu_erf(tr_ctx *t, mx_array x, mx_array *y);
/* x * (1 + erf(x / sqrt 2)) * 0.5, element by element (Gelu, approximate='none') */
int cpu_gelu(tr_ctx *t, mx_array x, mx_array *y);
/* Gelu as the epilogue of the host kernel computing x (mx_fold_epilogue): *y is that kernel
 * applying it to each run of elements it finishes, or NULL where x's kernel takes none. Only for
 * an x that nothing but the Gelu reads. */
int cpu_gelu_fold(tr_ctx *t, mx_array x, mx_array *y);
/* 1 / (1 + e^-x), and x * sigmoid(x * beta) (Swish or SiLU with beta 1, QuickGelu with 1.702),
 * element by element */
int cpu_sigmoid(tr_ctx *t, mx_array x, mx_array *y);
int cpu_swish(tr_ctx *t, mx_array x, float beta, mx_array *y);
/* That Swish as the epilogue of the host kernel computing x, as cpu_gelu_fold; x is read by the
 * spelling's nodes alone. */
int cpu_swish_fold(tr_ctx *t, mx_array x, float beta, mx_array *y);

#endif
