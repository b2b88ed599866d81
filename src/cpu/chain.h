/*
 * Chains of elementwise steps on one float32 value with one-element constants (a scale, a shift,
 * a clip, HardSwish spelled in four nodes...) as one host kernel on the CPU device
 * (chain.c): one pass over the elements, split over the cores, where MLX runs its fused
 * kernel on its one CPU thread; or no pass at all, as the epilogue of the kernel computing the
 * chain's input. Exported vision models put such a chain after every convolution.
 */
#ifndef CPU_CHAIN_H
#define CPU_CHAIN_H

#include "plan/translate.h"

typedef enum cpu_chain_op {
  CPU_CHAIN_MUL,
  CPU_CHAIN_ADD,
  CPU_CHAIN_SUB,
  CPU_CHAIN_SUB_FROM,
  CPU_CHAIN_DIV,
  CPU_CHAIN_DIV_INTO,
  CPU_CHAIN_MAX,
  CPU_CHAIN_MIN,
  CPU_CHAIN_CLIP,
  CPU_CHAIN_RELU,
  CPU_CHAIN_HARDSWISH /* x * clip(x + 3, 0, 6) / 6, in that order */
} cpu_chain_op;

/* One step: x op a (CPU_CHAIN_SUB_FROM: a - x, CPU_CHAIN_DIV_INTO: a / x; CPU_CHAIN_CLIP: between a
 * and b). */
typedef struct cpu_chain_step {
  cpu_chain_op op;
  float a, b;
} cpu_chain_step;

enum { CPU_CHAIN_MAX_STEPS = 24 };
/* Below this many elements MLX's own fused kernel costs about as little as a chain's kernel. */
enum { CPU_CHAIN_MIN_ELEMENTS = 1 << 12 };

/* y = the steps applied to x in order, element by element, each rounded as its node would be. */
int cpu_chain_build(tr_ctx *t, mx_array x, const cpu_chain_step *steps, int n, mx_array *y);
/* The same y from the host kernel computing x, with the steps as its epilogue (mx_fold_epilogue:
 * no pass of their own); *y is NULL when x's kernel takes none. Only where nothing else reads x. */
int cpu_chain_fold(tr_ctx *t, mx_array x, const cpu_chain_step *steps, int n, mx_array *y);

#endif
