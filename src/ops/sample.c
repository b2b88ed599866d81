/*
 * Sampling taps shared by GridSample and DeformConv (see sample.h): the float32 composition
 * helpers, reflection of out-of-range coordinates back into the image, Keys' cubic weights, and
 * the per-dimension taps. Coordinates are denormalised by the caller; rounding for nearest is
 * half to even, and every tap's index is clamped into the image so gathers never read outside
 * (its weight carries the padding rule instead).
 */
#include "ops/sample.h"

mx_array smp_f(tr_ctx *t, double v) {
  mx_array s = NULL;
  return tr_scalar(t, &s, v, MX_FLOAT32) == MX_OK ? s : NULL;
}

mx_array smp_bin(tr_ctx *t, mx_binary_op op, mx_array a, mx_array b) {
  mx_array y = NULL;
  return mx_binary(t->mx, &y, op, a, b) == MX_OK ? y : NULL;
}

mx_array smp_un(tr_ctx *t, mx_unary_op op, mx_array a) {
  mx_array y = NULL;
  return mx_unary(t->mx, &y, op, a) == MX_OK ? y : NULL;
}

mx_array smp_where(tr_ctx *t, mx_array cond, mx_array a, mx_array b) {
  mx_array y = NULL;
  return mx_where(t->mx, &y, cond, a, b) == MX_OK ? y : NULL;
}

mx_array smp_clip(tr_ctx *t, mx_array a, double lo, double hi) {
  mx_array y = NULL;
  return mx_clip(t->mx, &y, a, smp_f(t, lo), smp_f(t, hi)) == MX_OK ? y : NULL;
}

int smp_need(tr_ctx *t, mx_array a) {
  if (a) return MX_OK;
  if (!t->mx->error[0]) return tr_fail(t, "building the computation failed");
  return MX_ERR_MLX;
}

/* onnx's reference _gs_reflect: folds x back into [lo, hi] (rng > 0). */
static mx_array smp_reflect(tr_ctx *t, mx_array x, double lo, double hi) {
  double rng = hi - lo;
  if (rng <= 0) return smp_clip(t, x, lo, hi);
  mx_array flo = smp_f(t, lo), fhi = smp_f(t, hi), frng = smp_f(t, rng), two = smp_f(t, 2);
  mx_array zero = smp_f(t, 0);
  mx_array dlo = smp_bin(t, MX_SUBTRACT, flo, x), dhi = smp_bin(t, MX_SUBTRACT, x, fhi);
  mx_array nlo = smp_un(t, MX_FLOOR, smp_bin(t, MX_DIVIDE, dlo, frng));
  mx_array nhi = smp_un(t, MX_FLOOR, smp_bin(t, MX_DIVIDE, dhi, frng));
  mx_array rlo = smp_bin(t, MX_SUBTRACT, dlo, smp_bin(t, MX_MULTIPLY, nlo, frng));
  mx_array rhi = smp_bin(t, MX_SUBTRACT, dhi, smp_bin(t, MX_MULTIPLY, nhi, frng));
  mx_array even_lo = smp_bin(t, MX_EQUAL, smp_bin(t, MX_REMAINDER, nlo, two), zero);
  mx_array even_hi = smp_bin(t, MX_EQUAL, smp_bin(t, MX_REMAINDER, nhi, two), zero);
  mx_array below = smp_where(t, even_lo, smp_bin(t, MX_ADD, flo, rlo),
                             smp_bin(t, MX_SUBTRACT, fhi, rlo));
  mx_array above = smp_where(t, even_hi, smp_bin(t, MX_SUBTRACT, fhi, rhi),
                             smp_bin(t, MX_ADD, flo, rhi));
  return smp_where(t, smp_bin(t, MX_LESS, x, flo), below,
                   smp_where(t, smp_bin(t, MX_GREATER, x, fhi), above, x));
}

/* Keys' cubic convolution weights (A = -0.75) for the four taps at offsets -1..2 from floor. */
static void smp_cubic_weights(tr_ctx *t, mx_array f, mx_array w[4]) {
  const double A = -0.75;
  mx_array one = smp_f(t, 1), two = smp_f(t, 2);
  mx_array d[4] = {smp_bin(t, MX_ADD, f, one), f, smp_bin(t, MX_SUBTRACT, one, f),
                   smp_bin(t, MX_SUBTRACT, two, f)};
  for (int k = 0; k < 4; k++) {
    mx_array x = d[k], p;
    if (k == 0 || k == 3) { /* ((A x - 5A) x + 8A) x - 4A */
      p = smp_bin(t, MX_SUBTRACT, smp_bin(t, MX_MULTIPLY, smp_f(t, A), x), smp_f(t, 5 * A));
      p = smp_bin(t, MX_ADD, smp_bin(t, MX_MULTIPLY, p, x), smp_f(t, 8 * A));
      w[k] = smp_bin(t, MX_SUBTRACT, smp_bin(t, MX_MULTIPLY, p, x), smp_f(t, 4 * A));
    } else { /* ((A + 2) x - (A + 3)) x x + 1 */
      p = smp_bin(t, MX_SUBTRACT, smp_bin(t, MX_MULTIPLY, smp_f(t, A + 2), x), smp_f(t, A + 3));
      w[k] = smp_bin(t, MX_ADD, smp_bin(t, MX_MULTIPLY, smp_bin(t, MX_MULTIPLY, p, x), x), one);
    }
  }
}

int smp_dim_taps(tr_ctx *t, mx_array x, int len, int mode, int padding, bool align,
                 smp_taps *taps) {
  double lo = align ? 0.0 : -0.5, hi = align ? len - 1.0 : len - 0.5;
  if (mode == SMP_NEAREST) x = smp_un(t, MX_ROUND, x);
  /* Cubic with border padding clamps each tap only, as ONNX Runtime and PyTorch do (onnx's
   * reference clamps the coordinate first, which changes cubic results near the edges). */
  if (padding != SMP_ZEROS && !(mode == SMP_CUBIC && padding == SMP_BORDER)) {
    mx_array outside = smp_bin(t, MX_LOGICAL_OR, smp_bin(t, MX_LESS, x, smp_f(t, lo)),
                               smp_bin(t, MX_GREATER, x, smp_f(t, hi)));
    mx_array fixed = padding == SMP_BORDER ? smp_clip(t, x, 0, len - 1.0)
                                           : smp_reflect(t, x, lo, hi);
    x = smp_where(t, outside, fixed, x);
  }
  TR_TRY(smp_need(t, x));
  mx_array base, frac = NULL;
  if (mode == SMP_NEAREST) { /* truncation toward zero, as the reference's int cast */
    mx_array tr = NULL, safe = smp_clip(t, x, -2.0, len + 1.0); /* stays outside, fits int32 */
    TR_TRY(smp_need(t, safe));
    TR_TRY(mx_astype(t->mx, &tr, safe, MX_INT32));
    TR_TRY(mx_astype(t->mx, &base, tr, MX_FLOAT32));
    taps->count = 1;
    taps->index[0] = base;
    taps->weight[0] = smp_f(t, 1);
  } else {
    base = smp_un(t, MX_FLOOR, x);
    frac = smp_bin(t, MX_SUBTRACT, x, base);
    if (mode == SMP_LINEAR) {
      taps->count = 2;
      taps->index[0] = base;
      taps->index[1] = smp_bin(t, MX_ADD, base, smp_f(t, 1));
      taps->weight[0] = smp_bin(t, MX_SUBTRACT, smp_f(t, 1), frac);
      taps->weight[1] = frac;
    } else {
      taps->count = 4;
      for (int k = 0; k < 4; k++) taps->index[k] = smp_bin(t, MX_ADD, base, smp_f(t, k - 1));
      smp_cubic_weights(t, frac, taps->weight);
    }
  }
  for (int k = 0; k < taps->count; k++) { /* the reference's _pixel_at_array */
    mx_array i = taps->index[k];
    if (padding == SMP_ZEROS) {
      mx_array inside = smp_bin(t, MX_LOGICAL_AND, smp_bin(t, MX_GREATER_EQUAL, i, smp_f(t, 0)),
                                smp_bin(t, MX_LESS, i, smp_f(t, len)));
      taps->weight[k] = smp_where(t, inside, taps->weight[k], smp_f(t, 0));
    } else if (padding == SMP_REFLECTION) {
      mx_array r = smp_reflect(t, i, lo, hi), ri = NULL;
      if (r && mx_astype(t->mx, &ri, r, MX_INT32) == MX_OK) mx_astype(t->mx, &i, ri, MX_FLOAT32);
      else i = NULL;
    }
    taps->index[k] = smp_clip(t, i, 0, len - 1.0);
    TR_TRY(smp_need(t, taps->index[k]));
    TR_TRY(smp_need(t, taps->weight[k]));
  }
  return MX_OK;
}
