/*
 * DeformConv (opset 19, 22) over 2-D images: X [N, C, H, W], W [oC, C/group, kH, kW], offset
 * [N, offset_group*2*kH*kW, oH, oW] ((dy, dx) per kernel tap, tap-major), optional B [oC] and
 * mask [N, offset_group*kH*kW, oH, oW]. Every kernel tap of every output position samples X at
 * its regular position (-pad + stride*out + dilation*tap) moved by its offset, bilinearly with
 * zeros outside the image (the taps of ops/sample.c, as GridSample with align_corners and zeros
 * padding), scaled by the mask; the samples of the four bilinear corners are gathered from X
 * with take_along_axis, weighted and summed into columns [N, C*kH*kW, oH*oW], which one grouped
 * matrix product with W (reshaped to [group, oC/group, C/group*kH*kW]) turns into Y. Sampling
 * and the product run in float32 (float64 for float64 inputs, on the CPU device); the result is
 * cast back to X's type. 1-D and 3-D forms are declined.
 */
#include "ops/families.h"
#include "ops/sample.h"
#include "ops/window.h"
#include "plan/translate.h"

#include <stdlib.h>

enum { DC_IN_X, DC_IN_W, DC_IN_OFFSET, DC_IN_B, DC_IN_MASK };

/* A known dim of a value (IR_DIM_UNKNOWN otherwise). */
static int64_t known_dim(const ir_value *v, int axis) {
  return v && v->rank > axis ? v->dims[axis] : IR_DIM_UNKNOWN;
}

static bool claim_deform_conv(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, DC_IN_X), *w = ir_input(g, n, DC_IN_W);
  const ir_value *off = ir_input(g, n, DC_IN_OFFSET), *mask = ir_input(g, n, DC_IN_MASK);
  if (x->rank >= 0 && x->rank != 4)
    return op_decline(why, "X has rank %d; only 2-D DeformConv ([N, C, H, W]) is translated",
                      x->rank);
  if (w && w->rank >= 0 && w->rank != 4)
    return op_decline(why, "W has rank %d; it must be [oC, C/group, kH, kW]", w->rank);
  if (!w || !off) return op_decline(why, "W and offset are required inputs");
  if (!op_all_same_type(g, n, why)) return false;
  char err[200];
  win_attrs wa;
  if (!win_read(n, 2, &wa, err, sizeof err)) return op_decline(why, "%s", err);
  if (ir_find_attr(n, "auto_pad")) return op_decline(why, "DeformConv has no auto_pad");
  int64_t group = ir_attr_int(n, "group", 1), og = ir_attr_int(n, "offset_group", 1);
  if (group < 1 || og < 1) return op_decline(why, "group and offset_group must be positive");
  int64_t c = known_dim(x, 1), oc = known_dim(w, 0), wc = known_dim(w, 1);
  if (c != IR_DIM_UNKNOWN && (c % group != 0 || c % og != 0))
    return op_decline(why, "C = %lld is not divisible by group %lld and offset_group %lld",
                      (long long)c, (long long)group, (long long)og);
  if (c != IR_DIM_UNKNOWN && wc != IR_DIM_UNKNOWN && wc * group != c)
    return op_decline(why, "W's dim 1 (%lld) times group (%lld) must equal C (%lld)",
                      (long long)wc, (long long)group, (long long)c);
  if (oc != IR_DIM_UNKNOWN && oc % group != 0)
    return op_decline(why, "oC = %lld is not divisible by group %lld", (long long)oc,
                      (long long)group);
  int64_t kh = wa.has_kernel ? wa.kernel[0] : known_dim(w, 2);
  int64_t kw = wa.has_kernel ? wa.kernel[1] : known_dim(w, 3);
  if (wa.has_kernel && ((known_dim(w, 2) != IR_DIM_UNKNOWN && known_dim(w, 2) != kh) ||
                        (known_dim(w, 3) != IR_DIM_UNKNOWN && known_dim(w, 3) != kw)))
    return op_decline(why, "kernel_shape does not match W's spatial dims");
  if (kh != IR_DIM_UNKNOWN && kw != IR_DIM_UNKNOWN) {
    int64_t oc2 = known_dim(off, 1), mc = known_dim(mask, 1);
    if (oc2 != IR_DIM_UNKNOWN && oc2 != og * 2 * kh * kw)
      return op_decline(why, "offset has %lld channels; offset_group*2*kH*kW = %lld expected",
                        (long long)oc2, (long long)(og * 2 * kh * kw));
    if (mc != IR_DIM_UNKNOWN && mc != og * kh * kw)
      return op_decline(why, "mask has %lld channels; offset_group*kH*kW = %lld expected",
                        (long long)mc, (long long)(og * kh * kw));
  }
  return true;
}

/* The regular (undeformed) sampling positions: rows (or columns) of every kernel tap k at every
 * output position p, flattened [K, P], in dtype. */
static int dc_base(tr_ctx *t, const win_attrs *wa, int kh, int kw, int oh, int ow, int dim,
                   mx_dtype dtype, mx_array *out) {
  int64_t count = (int64_t)kh * kw * oh * ow;
  float *v = malloc(sizeof(float) * (size_t)(count ? count : 1));
  if (!v) return tr_fail(t, "out of memory");
  for (int a = 0, k = 0; a < kh; a++)
    for (int b = 0; b < kw; b++, k++)
      for (int i = 0, p = 0; i < oh; i++)
        for (int j = 0; j < ow; j++, p++) {
          int64_t at = dim == 0 ? -wa->pad_lo[0] + wa->stride[0] * i + wa->dilation[0] * a
                                : -wa->pad_lo[1] + wa->stride[1] * j + wa->dilation[1] * b;
          v[(int64_t)k * oh * ow + p] = (float)at;
        }
  int shape[2] = {kh * kw, oh * ow};
  int rc = mx_from_data(t->mx, out, v, shape, 2, MX_FLOAT32);
  free(v);
  TR_TRY(rc);
  if (dtype != MX_FLOAT32) TR_TRY(mx_astype(t->mx, out, *out, dtype));
  return MX_OK;
}

/* offset [N, G*K*2, oH, oW] -> the (dim 0: rows, 1: columns) component [N, G, K, P]. */
static int dc_offset(tr_ctx *t, mx_array off, int g, int k, int p, int dim, mx_array *out) {
  int n = mx_dim(off, 0);
  int shape[5] = {n, g, k, 2, p}, start[5] = {0, 0, 0, dim, 0}, stop[5] = {n, g, k, dim + 1, p};
  int step[5] = {1, 1, 1, 1, 1}, axis = 3;
  TR_TRY(mx_reshape(t->mx, out, off, shape, 5));
  TR_TRY(mx_slice(t->mx, out, *out, start, stop, step, 5));
  return mx_squeeze(t->mx, out, *out, &axis, 1);
}

static int translate_deform_conv(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, DC_IN_X), w = tr_in(t, DC_IN_W), off = tr_in(t, DC_IN_OFFSET);
  mx_array bias = tr_in(t, DC_IN_B), mask = tr_in(t, DC_IN_MASK);
  if (mx_ndim(x) != 4 || mx_ndim(w) != 4 || mx_ndim(off) != 4)
    return tr_fail(t, "X, W and offset must be 4-D ([N, C, H, W], [oC, C/group, kH, kW], "
                      "[N, offset_group*2*kH*kW, oH, oW])");
  char err[200];
  win_attrs wa;
  if (!win_read(n, 2, &wa, err, sizeof err)) return tr_fail(t, "%s", err);
  int64_t group = ir_attr_int(n, "group", 1), og = ir_attr_int(n, "offset_group", 1);
  int batch = mx_dim(x, 0), c = mx_dim(x, 1), h = mx_dim(x, 2), wd = mx_dim(x, 3);
  int oc = mx_dim(w, 0), kh = mx_dim(w, 2), kw = mx_dim(w, 3);
  if (wa.has_kernel && (wa.kernel[0] != kh || wa.kernel[1] != kw))
    return tr_fail(t, "kernel_shape does not match W's spatial dims %dx%d", kh, kw);
  wa.kernel[0] = kh, wa.kernel[1] = kw;
  if (group < 1 || og < 1 || c % group != 0 || c % og != 0 || oc % group != 0 ||
      (int64_t)mx_dim(w, 1) * group != c)
    return tr_fail(t, "C = %d and oC = %d must be divisible by group (%lld), C by "
                      "offset_group (%lld), and W's dim 1 must be C/group",
                   c, oc, (long long)group, (long long)og);
  int k = kh * kw, oh = mx_dim(off, 2), ow = mx_dim(off, 3), p = oh * ow;
  int64_t want_h = (h + wa.pad_lo[0] + wa.pad_hi[0] - win_extent(&wa, 0)) / wa.stride[0] + 1;
  int64_t want_w = (wd + wa.pad_lo[1] + wa.pad_hi[1] - win_extent(&wa, 1)) / wa.stride[1] + 1;
  if (mx_dim(off, 0) != batch || mx_dim(off, 1) != og * 2 * k || oh != want_h || ow != want_w)
    return tr_fail(t, "offset must be [%d, %lld, %lld, %lld] for these shapes and attributes",
                   batch, (long long)(og * 2 * k), (long long)want_h, (long long)want_w);
  if (mask && (mx_ndim(mask) != 4 || mx_dim(mask, 0) != batch || mx_dim(mask, 1) != og * k ||
               mx_dim(mask, 2) != oh || mx_dim(mask, 3) != ow))
    return tr_fail(t, "mask must be [%d, %lld, %d, %d]", batch, (long long)(og * k), oh, ow);
  if (bias && (mx_ndim(bias) != 1 || mx_dim(bias, 0) != oc))
    return tr_fail(t, "B must be [%d]", oc);
  if ((int64_t)h * wd >= INT32_MAX || (int64_t)k * p * c >= INT32_MAX)
    return tr_fail(t, "the image or the sampled columns are too large");
  int gi = (int)og, cg = c / gi, groups = (int)group;
  mx_dtype cd = mx_dtype_of(x) == MX_FLOAT64 ? MX_FLOAT64 : MX_FLOAT32;

  /* Sampling positions [N, G, K, P] and their bilinear taps along rows and columns. */
  mx_array base_h, base_w, dy, dx, ys, xs;
  TR_TRY(dc_base(t, &wa, kh, kw, oh, ow, 0, cd, &base_h));
  TR_TRY(dc_base(t, &wa, kh, kw, oh, ow, 1, cd, &base_w));
  TR_TRY(mx_astype(t->mx, &off, off, cd));
  TR_TRY(dc_offset(t, off, gi, k, p, 0, &dy));
  TR_TRY(dc_offset(t, off, gi, k, p, 1, &dx));
  TR_TRY(mx_binary(t->mx, &ys, MX_ADD, dy, base_h));
  TR_TRY(mx_binary(t->mx, &xs, MX_ADD, dx, base_w));
  smp_taps th, tw;
  TR_TRY(smp_dim_taps(t, ys, h, SMP_LINEAR, SMP_ZEROS, true, &th));
  TR_TRY(smp_dim_taps(t, xs, wd, SMP_LINEAR, SMP_ZEROS, true, &tw));
  int gshape[4] = {batch, gi, 1, k * p};
  mx_array m = NULL;
  if (mask) {
    TR_TRY(mx_astype(t->mx, &m, mask, cd));
    TR_TRY(mx_reshape(t->mx, &m, m, gshape, 4));
  }

  /* Columns [N, G, C/G, K*P]: the four corners gathered from X and summed with their weights. */
  mx_array xf, cols = NULL;
  int xshape[4] = {batch, gi, cg, h * wd};
  TR_TRY(mx_reshape(t->mx, &xf, x, xshape, 4));
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++) {
      mx_array flat = smp_bin(t, MX_ADD, smp_bin(t, MX_MULTIPLY, th.index[a], smp_f(t, wd)),
                              tw.index[b]);
      mx_array wt = smp_bin(t, MX_MULTIPLY, th.weight[a], tw.weight[b]), idx, v;
      TR_TRY(smp_need(t, flat));
      TR_TRY(smp_need(t, wt));
      TR_TRY(mx_astype(t->mx, &idx, flat, MX_INT32));
      TR_TRY(mx_reshape(t->mx, &idx, idx, gshape, 4));
      TR_TRY(mx_astype(t->mx, &wt, wt, cd));
      TR_TRY(mx_reshape(t->mx, &wt, wt, gshape, 4));
      if (m) TR_TRY(mx_binary(t->mx, &wt, MX_MULTIPLY, wt, m));
      TR_TRY(mx_take_along_axis(t->mx, &v, xf, idx, 3));
      TR_TRY(mx_astype(t->mx, &v, v, cd));
      TR_TRY(mx_binary(t->mx, &v, MX_MULTIPLY, v, wt));
      if (cols) TR_TRY(mx_binary(t->mx, &cols, MX_ADD, cols, v));
      else cols = v;
    }

  /* Y [N, group, oC/group, P] = W [group, oC/group, C/group*K] @ columns [N, group, ., P]. */
  int cshape[4] = {batch, groups, (c / groups) * k, p};
  int wshape[4] = {1, groups, oc / groups, (c / groups) * k}, yshape[4] = {batch, oc, oh, ow};
  mx_array wm, y;
  TR_TRY(mx_reshape(t->mx, &cols, cols, cshape, 4));
  TR_TRY(mx_astype(t->mx, &wm, w, cd));
  TR_TRY(mx_reshape(t->mx, &wm, wm, wshape, 4));
  TR_TRY(mx_matmul(t->mx, &y, wm, cols));
  TR_TRY(mx_reshape(t->mx, &y, y, yshape, 4));
  if (bias) {
    mx_array bb;
    int bshape[4] = {1, oc, 1, 1};
    TR_TRY(mx_astype(t->mx, &bb, bias, cd));
    TR_TRY(mx_reshape(t->mx, &bb, bb, bshape, 4));
    TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, bb));
  }
  return tr_out_cast(t, 0, y);
}

const op_row ops_deform_conv_rows[] = {
    {"", "DeformConv", 19, 25, claim_deform_conv, translate_deform_conv, OP_SHAPE_KEYED,
     OP_FLOATS | OP_F64, 0,
     "2-D only; groups, offset groups, mask, bias, pads, strides, dilations; bilinear samples "
     "(zeros outside) gathered into columns and one grouped matmul, in float32 (float64 on CPU)"},
    OP_ROWS_END,
};
