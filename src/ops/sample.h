/*
 * Sampling of an image at fractional positions, shared by GridSample (src/ops/vision.c) and
 * DeformConv (src/ops/deform_conv.c): float32 composition helpers that let one expression chain
 * bridge calls (a failed call gives NULL, and every helper passes a NULL operand on as a failure,
 * so one smp_need at the end reports the first error), and the taps of one spatial dimension for
 * nearest, linear or cubic sampling with zeros, border or reflection padding.
 */
#ifndef SAMPLE_H
#define SAMPLE_H

#include "mlx/mx.h"
#include "plan/translate.h"

#include <stdbool.h>

enum { SMP_NEAREST, SMP_LINEAR, SMP_CUBIC };      /* sampling modes */
enum { SMP_ZEROS, SMP_BORDER, SMP_REFLECTION };   /* padding modes */

/* Composition helpers: the result, or NULL when the bridge call failed (message in t->mx). */
mx_array smp_f(tr_ctx *t, double v); /* a float32 scalar */
mx_array smp_bin(tr_ctx *t, mx_binary_op op, mx_array a, mx_array b);
mx_array smp_un(tr_ctx *t, mx_unary_op op, mx_array a);
mx_array smp_where(tr_ctx *t, mx_array cond, mx_array a, mx_array b);
mx_array smp_clip(tr_ctx *t, mx_array a, double lo, double hi);
/* MX_OK when a composed value is non-NULL, else fails with the bridge's message. */
int smp_need(tr_ctx *t, mx_array a);

typedef struct smp_taps {
  int count;          /* 1 (nearest), 2 (linear) or 4 (cubic) */
  mx_array index[4];  /* float32 positions along the dim, already padded into [0, len - 1] */
  mx_array weight[4]; /* float32, zero for taps outside with zeros padding */
} smp_taps;

/* The taps of one spatial dim of length len for float32 pixel coordinates x (already
 * denormalised; align says whether the dim's extent is [0, len - 1] or [-0.5, len - 0.5], which
 * matters for border and reflection padding). Follows onnx's GridSample reference. */
int smp_dim_taps(tr_ctx *t, mx_array x, int len, int mode, int padding, bool align,
                 smp_taps *taps);

#endif
