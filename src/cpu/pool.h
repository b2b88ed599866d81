/*
 * Average pooling of float32 on the CPU device as host kernels (cpu/pool.c): AveragePool's
 * windows and GlobalAveragePool, the input read where it lies, the output written channels-last
 * and returned as its channels-first view.
 */
#ifndef CPU_POOL_H
#define CPU_POOL_H

#include "plan/translate.h"

enum { CPU_POOL_MAX_ND = 3 };

/* One spatial axis of a windowed pooling: input length, kernel taps, stride, dilation, padding
 * before, output length, and the range of input positions a window's count includes
 * ([count_lo, count_hi): the input, or with count_include_pad the explicit padding too). */
typedef struct cpu_pool_axis {
  int in, k, s, d, lo, out, count_lo, count_hi;
} cpu_pool_axis;

/* Whether x takes these kernels: float32 on the CPU device outside shapeless traces (host
 * kernels on), 1 to CPU_POOL_MAX_ND spatial axes, not empty. */
bool cpu_pool_applies(const tr_ctx *t, mx_array x);

/* AveragePool of x [N, C, spatial...] with windows ax[0 : rank - 2] (every output length >= 1). */
int cpu_pool_average(tr_ctx *t, mx_array x, const cpu_pool_axis *ax, mx_array *y);

/* GlobalAveragePool of x [N, C, spatial...]: y [N, C, 1...]. */
int cpu_pool_global_average(tr_ctx *t, mx_array x, mx_array *y);

#endif
