/*
 * The host side of Resize and Upsample: their attributes, read and checked once for both the
 * claim and the translator, and the per-axis interpolation plans, computed from the concrete
 * input and output lengths with ONNX Runtime's float32 arithmetic (coordinate transforms, nearest
 * rounding, linear and Keys' cubic weights, Pillow-style antialias windows). A plan lists, for
 * every output position of one axis, its input taps and their weights; resize.c applies it with
 * MLX. Plain C with no MLX arrays, like window.h for the sliding-window operators.
 */
#ifndef RESIZE_PLAN_H
#define RESIZE_PLAN_H

#include "ir/ir.h"
#include "mlx/mx.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum { CT_HALF_PIXEL, CT_ASYMMETRIC, CT_PYTORCH, CT_TF_NN, CT_ALIGN, CT_CROP, CT_SYMMETRIC };
enum { NM_SIMPLE, NM_PREFER_FLOOR, NM_PREFER_CEIL, NM_FLOOR, NM_CEIL };
enum { AR_STRETCH, AR_NOT_LARGER, AR_NOT_SMALLER };
enum { RS_MAX_TAPS = 64 }; /* antialias windows wider than this (shrinking > ~30x) are declined */
enum { RS_MAX_PHASES = 8, RS_PERIODIC_TAPS = 4 };

typedef struct rs_attrs {
  int version;   /* the node's since_version */
  bool upsample; /* Upsample (opset < 10): scales >= 1 */
  int mode, ctm, nearest, policy;
  float cubic_a, extrapolation;
  bool exclude_outside, antialias;
  int naxes; /* 0: every axis */
  int64_t axes[MX_MAX_RANK];
  int roi_in, scales_in, sizes_in; /* input indices; -1 where the opset has none */
} rs_attrs;

/* Reads and checks the attributes of a Resize (upsample false) or Upsample node whose X has
 * the given rank (-1: unknown). Returns false with a reason in err. */
bool rs_read(const ir_node *n, bool upsample, int rank, rs_attrs *a, char *err, size_t len);

/* One axis to resize: lengths, the scale ONNX Runtime uses, and tf_crop_and_resize's roi. */
typedef struct rs_axis {
  int in, out;
  float scale, roi_lo, roi_hi;
} rs_axis;

/* One axis's interpolation: idx[k * out + o] is tap k's input index for output position o and
 * w[k * out + o] its weight (w is NULL for nearest: one tap of weight 1); inside[o] is false
 * where tf_crop_and_resize extrapolates. */
typedef struct rs_plan {
  int taps, out;
  int32_t *idx;
  float *w;
  bool *inside;
  bool identity; /* the axis is unchanged (output position o is input element o) */
  bool clipped;  /* some position extrapolates */
} rs_plan;

/* Plans one axis (rank1: X is 1-D, where ONNX Runtime's nearest has no scale-1 shortcut).
 * Returns false when out of memory; rs_plan_free releases the plan either way. */
bool rs_plan_axis(const rs_attrs *a, const rs_axis *ax, bool rank1, rs_plan *p);
void rs_plan_free(rs_plan *p);

/* Taps of the antialias window for mode at scale rscale. */
int rs_aa_window(int mode, float rscale);

/* f when a nearest plan repeats each input element f times (out = in * f), else 0. */
int rs_repeat_factor(const rs_plan *p, int in);

/* A periodic plan: output position i * f + r (phase r < f) reads taps clamp(i * g + d) with the
 * same weights for every i. Applied as strided slices of the input extended by lo copies of its
 * first element and hi of its last, one result per phase, interleaved. */
typedef struct rs_periodic {
  int f, g, n, lo, hi; /* n: positions per phase */
  int count[RS_MAX_PHASES];
  int d[RS_MAX_PHASES][RS_PERIODIC_TAPS];
  float w[RS_MAX_PHASES][RS_PERIODIC_TAPS];
} rs_periodic;

/* Whether plan p (over an axis of length in) is periodic: every position is checked (taps at one
 * index merged, zero weights dropped, weights equal within 1e-6), so the periodic form sums the
 * same terms as the plan. */
bool rs_find_periodic(const rs_plan *p, int in, rs_periodic *q);

#endif
