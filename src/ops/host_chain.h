/*
 * Chains of elementwise steps on one float32 value with one-element constants (a scale, a shift,
 * a clip, HardSwish spelled in four nodes...) as one host kernel on the CPU device
 * (host_chain.c): one pass over the elements, split over the cores, where MLX runs its fused
 * kernel on its one CPU thread; or no pass at all, as the epilogue of the kernel computing the
 * chain's input. Exported vision models put such a chain after every convolution.
 */
#ifndef OPS_HOST_CHAIN_H
#define OPS_HOST_CHAIN_H

#include "plan/translate.h"

typedef enum hc_op {
  HC_MUL, HC_ADD, HC_SUB, HC_SUB_FROM, HC_DIV, HC_DIV_INTO, HC_MAX, HC_MIN, HC_CLIP, HC_RELU,
  HC_HARDSWISH /* x * clip(x + 3, 0, 6) / 6, in that order */
} hc_op;

/* One step: x op a (HC_SUB_FROM: a - x, HC_DIV_INTO: a / x; HC_CLIP: between a and b). */
typedef struct hc_step {
  hc_op op;
  float a, b;
} hc_step;

enum { HC_MAX_STEPS = 24 };
/* Below this many elements MLX's own fused kernel costs about as little as a chain's kernel. */
enum { HC_MIN_ELEMENTS = 1 << 12 };

/* y = the steps applied to x in order, element by element, each rounded as its node would be. */
int hc_build(tr_ctx *t, mx_array x, const hc_step *steps, int n, mx_array *y);
/* The same y from the host kernel computing x, with the steps as its epilogue (mx_fold_epilogue:
 * no pass of their own); *y is NULL when x's kernel takes none. Only where nothing else reads x. */
int hc_fold(tr_ctx *t, mx_array x, const hc_step *steps, int n, mx_array *y);

#endif
