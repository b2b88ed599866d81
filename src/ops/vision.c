/*
 * Vision operators: GridSample (opset 16: 4-D, modes bilinear/nearest/bicubic; from 20: N-D,
 * modes linear/nearest/cubic), AffineGrid, RoiAlign (avg/max; opset 10 without, 16 with
 * coordinate_transformation_mode), MaxUnpool, Col2Im and NonMaxSuppression. GridSample follows
 * onnx's reference step by step: grid coordinates are denormalised per align_corners, rounded
 * half to even for nearest, brought back inside by border clamping or reflection when outside,
 * and every tap (1, 2 or 4 per spatial dim) is fetched with zeros/border/reflection padding
 * (cubic with border padding skips the first clamp, as ONNX Runtime and PyTorch do); the
 * taps of all dims are combined into flat indices and weights, gathered from X in one
 * take_along_axis and summed (the per-dim taps live in ops/sample.c, shared with DeformConv).
 * AffineGrid multiplies a host-built base grid (from the concrete size, read on the host) by
 * theta on the device. RoiAlign reads the boxes and batch indices on the host (eager unless
 * constant), computes every sample point's four bilinear taps there as onnx's
 * reference (and ONNX Runtime) do, including the adaptive sampling ratio and the per-tap maximum
 * of mode max, and gathers X on the device. MaxUnpool scatters X into zeros at the flat indices;
 * Col2Im scatter-adds the columns at host-computed image positions. NonMaxSuppression's output
 * size depends on the data, so it runs on the host every time (the row is eager): greedy
 * selection per batch and class by descending score (ties: lower box index first), with float32
 * IoU arithmetic as ONNX Runtime's kernel. Computations run in float32 (half types cast).
 */
#include "ops/families.h"
#include "ops/sample.h"
#include "plan/translate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { GS_OPSET16 = 16, GS_OPSET20 = 20 };
enum { ROI_OPSET10 = 10, ROI_OPSET16 = 16 };

/* --- shared helpers ---------------------------------------------------------------------- */
/* Eager unless every input read on the host (the bits of `mask`) is absent or constant. */
static op_compile_class host_read_class(const ir_graph *g, const ir_node *n, unsigned mask) {
  for (int i = 0; i < n->n_inputs && i < 32; i++)
    if ((mask >> i) & 1u && ir_has_input(n, i) && !op_input_is_const(g, n, i)) return OP_EAGER;
  return OP_SHAPE_KEYED;
}

/* Reads float input i on the host as float32 (malloc'd, *count entries). */
static int host_floats(tr_ctx *t, int i, float **vals, size_t *count) {
  mx_array a = tr_in(t, i), f;
  if (!a) return tr_fail(t, "input %d is missing", i);
  if (!tr_input_is_constant(t, i)) t->host_reads++;
  size_t n = mx_size(a);
  *vals = malloc(sizeof(float) * (n ? n : 1));
  if (!*vals) return tr_fail(t, "out of memory");
  int rc = mx_astype(t->mx, &f, a, MX_FLOAT32);
  if (rc == MX_OK) rc = mx_copy_to_host(t->mx, f, *vals, sizeof(float) * n);
  if (rc != MX_OK) {
    free(*vals);
    *vals = NULL;
    return rc;
  }
  *count = n;
  return MX_OK;
}

/* Reads an int32/int64 input of any length on the host (malloc'd). */
static int host_int_array(tr_ctx *t, int i, int64_t **vals, size_t *count) {
  mx_array a = tr_in(t, i);
  if (!a) return tr_fail(t, "input %d is missing", i);
  size_t n = mx_size(a);
  *vals = malloc(sizeof(int64_t) * (n ? n : 1));
  if (!*vals) return tr_fail(t, "out of memory");
  int rc = tr_host_ints(t, i, *vals, n, count);
  if (rc != MX_OK) {
    free(*vals);
    *vals = NULL;
  }
  return rc;
}

/* --- GridSample -------------------------------------------------------------------------- */
static int gs_mode(const ir_node *n, int opset) {
  const char *m = ir_attr_string(n, "mode", opset == GS_OPSET16 ? "bilinear" : "linear");
  if (strcmp(m, "nearest") == 0) return SMP_NEAREST;
  if (strcmp(m, opset == GS_OPSET16 ? "bilinear" : "linear") == 0) return SMP_LINEAR;
  if (strcmp(m, opset == GS_OPSET16 ? "bicubic" : "cubic") == 0) return SMP_CUBIC;
  return -1;
}

static int gs_padding(const ir_node *n) {
  const char *p = ir_attr_string(n, "padding_mode", "zeros");
  if (strcmp(p, "zeros") == 0) return SMP_ZEROS;
  if (strcmp(p, "border") == 0) return SMP_BORDER;
  if (strcmp(p, "reflection") == 0) return SMP_REFLECTION;
  return -1;
}

static bool claim_grid_sample(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *x = ir_input(g, n, 0), *grid = ir_input(g, n, 1);
  if (gs_mode(n, r->code) < 0)
    return op_decline(why, "mode '%s' is not one of %s", ir_attr_string(n, "mode", ""),
                      r->code == GS_OPSET16 ? "bilinear, nearest, bicubic"
                                            : "linear, nearest, cubic");
  if (gs_padding(n) < 0)
    return op_decline(why, "padding_mode '%s' is not zeros, border or reflection",
                      ir_attr_string(n, "padding_mode", ""));
  if (r->code == GS_OPSET16 && x->rank >= 0 && x->rank != 4)
    return op_decline(why, "X has rank %d; GridSample-16 takes 4-D input (N-D from opset 20)",
                      x->rank);
  if (x->rank >= 0 && (x->rank < 3 || x->rank > 5))
    return op_decline(why, "X has rank %d; 1 to 3 spatial dimensions are translated", x->rank);
  if (grid && !(OP_FLOATS & OP_T(grid->elem_type)))
    return op_decline(why, "grid must be a float tensor");
  if (grid && x->rank >= 0 && grid->rank >= 0 && grid->rank != x->rank)
    return op_decline(why, "grid has rank %d; it must match X's rank %d", grid->rank, x->rank);
  return true;
}

static int translate_grid_sample(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), grid = tr_in(t, 1);
  int rank = mx_ndim(x), nd = rank - 2, mode = gs_mode(n, r->code), padding = gs_padding(n);
  bool align = ir_attr_int(n, "align_corners", 0) != 0;
  if (nd < 1 || nd > 3 || mx_ndim(grid) != rank || mx_dim(grid, -1) != nd ||
      mx_dim(grid, 0) != mx_dim(x, 0))
    return tr_fail(t, "X must be [N, C, D1..Dk] (k = 1..3) and grid [N, O1..Ok, k]");
  if (mode < 0 || padding < 0) return tr_fail(t, "unsupported mode or padding_mode");
  int batch = mx_dim(x, 0), channels = mx_dim(x, 1);
  int64_t q = 1, p = 1;
  for (int d = 0; d < nd; d++) q *= mx_dim(grid, 1 + d), p *= mx_dim(x, 2 + d);
  if (q * 64 > INT32_MAX || p > INT32_MAX) return tr_fail(t, "the grid is too large");
  mx_array g;
  int gshape[3] = {batch, (int)q, nd};
  TR_TRY(mx_astype(t->mx, &g, grid, MX_FLOAT32));
  TR_TRY(mx_reshape(t->mx, &g, g, gshape, 3));
  smp_taps taps[3];
  int64_t stride = p;
  int strides[3];
  for (int d = 0; d < nd; d++) {
    int len = mx_dim(x, 2 + d);
    stride /= len;
    strides[d] = (int)stride;
    /* The grid's last axis lists coordinates innermost dim first (x, y, z). */
    int start[3] = {0, 0, nd - 1 - d}, stop[3] = {batch, (int)q, nd - d}, step[3] = {1, 1, 1};
    mx_array c, xd;
    int last = 2;
    TR_TRY(mx_slice(t->mx, &c, g, start, stop, step, 3));
    TR_TRY(mx_squeeze(t->mx, &c, c, &last, 1));
    if (align) /* (c + 1) / 2 * (len - 1) */
      xd = smp_bin(t, MX_MULTIPLY,
                   smp_bin(t, MX_DIVIDE, smp_bin(t, MX_ADD, c, smp_f(t, 1)), smp_f(t, 2)),
                   smp_f(t, len - 1.0));
    else /* ((c + 1) * len - 1) / 2 */
      xd = smp_bin(t, MX_DIVIDE,
                   smp_bin(t, MX_SUBTRACT,
                           smp_bin(t, MX_MULTIPLY, smp_bin(t, MX_ADD, c, smp_f(t, 1)),
                                   smp_f(t, len)),
                           smp_f(t, 1)),
                   smp_f(t, 2));
    TR_TRY(smp_need(t, xd));
    TR_TRY(smp_dim_taps(t, xd, len, mode, padding, align, &taps[d]));
  }
  /* Every combination of one tap per dim: a flat index into X's spatial block and a weight. */
  int per = taps[0].count, combos = 1;
  for (int d = 0; d < nd; d++) combos *= per;
  mx_array idx[64], wts[64];
  for (int k = 0; k < combos; k++) {
    mx_array flat = NULL, w = NULL;
    for (int d = 0, rest = k; d < nd; d++, rest /= per) {
      int j = rest % per;
      mx_array term = smp_bin(t, MX_MULTIPLY, taps[d].index[j], smp_f(t, strides[d]));
      flat = flat ? smp_bin(t, MX_ADD, flat, term) : term;
      w = w ? smp_bin(t, MX_MULTIPLY, w, taps[d].weight[j]) : taps[d].weight[j];
    }
    TR_TRY(smp_need(t, flat));
    TR_TRY(smp_need(t, w));
    TR_TRY(mx_astype(t->mx, &idx[k], flat, MX_INT32));
    int wshape[2] = {batch, (int)q};
    TR_TRY(mx_broadcast_to(t->mx, &wts[k], w, wshape, 2));
  }
  mx_array all_idx, all_w, xf, vals, y;
  TR_TRY(mx_concatenate(t->mx, &all_idx, idx, (size_t)combos, 1)); /* [N, K*Q] */
  TR_TRY(mx_concatenate(t->mx, &all_w, wts, (size_t)combos, 1));
  int ishape[3] = {batch, 1, combos * (int)q}, wshape[4] = {batch, 1, combos, (int)q};
  int xshape[3] = {batch, channels, (int)p}, vshape[4] = {batch, channels, combos, (int)q};
  TR_TRY(mx_reshape(t->mx, &all_idx, all_idx, ishape, 3));
  TR_TRY(mx_reshape(t->mx, &all_w, all_w, wshape, 4));
  TR_TRY(mx_reshape(t->mx, &xf, x, xshape, 3));
  TR_TRY(mx_take_along_axis(t->mx, &vals, xf, all_idx, 2));
  if (mx_dtype_of(vals) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &vals, vals, MX_FLOAT32));
  TR_TRY(mx_reshape(t->mx, &vals, vals, vshape, 4));
  TR_TRY(mx_binary(t->mx, &vals, MX_MULTIPLY, vals, all_w));
  int axis = 2;
  TR_TRY(mx_reduce(t->mx, &y, MX_SUM, vals, &axis, 1, false));
  int oshape[MX_MAX_RANK];
  oshape[0] = batch, oshape[1] = channels;
  for (int d = 0; d < nd; d++) oshape[2 + d] = mx_dim(grid, 1 + d);
  TR_TRY(mx_reshape(t->mx, &y, y, oshape, rank));
  return tr_out_cast(t, 0, y);
}

/* --- AffineGrid -------------------------------------------------------------------------- */
static bool claim_affine_grid(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *theta = ir_input(g, n, 0), *size = ir_input(g, n, 1);
  if (theta->rank >= 0 && theta->rank != 3)
    return op_decline(why, "theta has rank %d; it must be [N, 2, 3] or [N, 3, 4]", theta->rank);
  if (size && size->rank == 1 && size->dims[0] != IR_DIM_UNKNOWN && size->dims[0] != 4 &&
      size->dims[0] != 5)
    return op_decline(why, "size has %lld entries; 4 (2-D) or 5 (3-D) are translated",
                      (long long)size->dims[0]);
  return true;
}

/* The normalised coordinate of position i of len along one axis. A length-1 axis sits at 0, as
 * PyTorch's affine_grid places it (onnx's reference gives -1 with align_corners, ONNX Runtime
 * +1; without align_corners all three give 0). */
static double affine_coord(int64_t i, int64_t len, bool align) {
  if (len == 1) return 0.0;
  if (align) return -1.0 + 2.0 * (double)i / (double)(len - 1);
  return -1.0 + (2.0 * (double)i + 1.0) / (double)len;
}

static int translate_affine_grid(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array theta = tr_in(t, 0);
  int64_t size[5];
  size_t count = 0;
  TR_TRY(tr_host_ints(t, 1, size, 5, &count));
  if (count != 4 && count != 5) return tr_fail(t, "size must have 4 or 5 entries");
  int nd = (int)count - 2;
  if (mx_ndim(theta) != 3 || mx_dim(theta, 1) != nd || mx_dim(theta, 2) != nd + 1 ||
      mx_dim(theta, 0) != size[0])
    return tr_fail(t, "theta must be [N, %d, %d] with N = size[0]", nd, nd + 1);
  bool align = ir_attr_int(n, "align_corners", 0) != 0;
  int64_t points = 1;
  for (int d = 0; d < nd; d++) {
    if (size[2 + d] < 1) return tr_fail(t, "size holds a non-positive spatial dim");
    points *= size[2 + d];
  }
  if (points * (nd + 1) > INT32_MAX) return tr_fail(t, "the grid is too large");
  float *base = malloc(sizeof(float) * (size_t)(points * (nd + 1)));
  if (!base) return tr_fail(t, "out of memory");
  /* Row-major over the spatial dims; each row (x, y[, z], 1), innermost dim first. */
  for (int64_t k = 0; k < points; k++) {
    float *row = base + k * (nd + 1);
    int64_t rest = k;
    for (int d = nd - 1; d >= 0; d--) {
      int64_t len = size[2 + d];
      row[nd - 1 - d] = (float)affine_coord(rest % len, len, align);
      rest /= len;
    }
    row[nd] = 1.0f;
  }
  int bshape[2] = {(int)points, nd + 1}, perm[3] = {0, 2, 1};
  mx_array b, th, y;
  int rc = mx_from_data(t->mx, &b, base, bshape, 2, MX_FLOAT32);
  free(base);
  TR_TRY(rc);
  TR_TRY(mx_astype(t->mx, &th, theta, MX_FLOAT32));
  TR_TRY(mx_transpose(t->mx, &th, th, perm, 3));
  TR_TRY(mx_matmul(t->mx, &y, b, th)); /* [N, points, nd] */
  int oshape[5];
  oshape[0] = (int)size[0];
  for (int d = 0; d < nd; d++) oshape[1 + d] = (int)size[2 + d];
  oshape[1 + nd] = nd;
  TR_TRY(mx_reshape(t->mx, &y, y, oshape, nd + 2));
  return tr_out_cast(t, 0, y);
}

static op_compile_class affine_node_class(const ir_graph *g, const ir_node *n) {
  return host_read_class(g, n, 0x2);
}

/* --- RoiAlign ---------------------------------------------------------------------------- */
static bool claim_roi_align(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *x = ir_input(g, n, 0), *rois = ir_input(g, n, 1);
  const char *mode = ir_attr_string(n, "mode", "avg");
  if (strcmp(mode, "avg") != 0 && strcmp(mode, "max") != 0)
    return op_decline(why, "mode '%s' is not avg or max", mode);
  if (r->code == ROI_OPSET16) {
    const char *ctm = ir_attr_string(n, "coordinate_transformation_mode", "half_pixel");
    if (strcmp(ctm, "half_pixel") != 0 && strcmp(ctm, "output_half_pixel") != 0)
      return op_decline(why, "coordinate_transformation_mode '%s' is not half_pixel or "
                        "output_half_pixel", ctm);
  }
  if (x->rank >= 0 && x->rank != 4) return op_decline(why, "X has rank %d; RoiAlign takes 4-D",
                                                      x->rank);
  if (rois && rois->elem_type != x->elem_type)
    return op_decline(why, "rois must have X's element type");
  if (ir_attr_int(n, "output_height", 1) < 1 || ir_attr_int(n, "output_width", 1) < 1)
    return op_decline(why, "output_height and output_width must be positive");
  return true;
}

static int translate_roi_align(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0);
  if (mx_ndim(x) != 4) return tr_fail(t, "X must be [N, C, H, W]");
  int batch = mx_dim(x, 0), channels = mx_dim(x, 1), height = mx_dim(x, 2),
      width = mx_dim(x, 3);
  int64_t oh = ir_attr_int(n, "output_height", 1), ow = ir_attr_int(n, "output_width", 1);
  int64_t ratio = ir_attr_int(n, "sampling_ratio", 0);
  double scale = ir_attr_float(n, "spatial_scale", 1.0f);
  bool is_max = strcmp(ir_attr_string(n, "mode", "avg"), "max") == 0;
  bool half_pixel = r->code == ROI_OPSET16 &&
                    strcmp(ir_attr_string(n, "coordinate_transformation_mode", "half_pixel"),
                           "half_pixel") == 0;
  float *rois = NULL;
  int64_t *bidx = NULL;
  size_t n_rois4 = 0, n_rois = 0;
  int rc = host_floats(t, 1, &rois, &n_rois4);
  if (rc == MX_OK) rc = host_int_array(t, 2, &bidx, &n_rois);
  if (rc == MX_OK && (n_rois4 != 4 * n_rois || mx_dim(tr_in(t, 1), -1) != 4))
    rc = tr_fail(t, "rois must be [num_rois, 4] and batch_indices [num_rois]");
  /* Pass 1: the grid of sample points per ROI (ratio, or adaptive from the ROI's size). */
  int64_t max_samples = 1, *grid_h = NULL, *grid_w = NULL;
  double *start_h = NULL, *start_w = NULL, *bin_h = NULL, *bin_w = NULL;
  if (rc == MX_OK) {
    size_t m = n_rois ? n_rois : 1;
    grid_h = calloc(m, sizeof(int64_t)), grid_w = calloc(m, sizeof(int64_t));
    start_h = calloc(m, sizeof(double)), start_w = calloc(m, sizeof(double));
    bin_h = calloc(m, sizeof(double)), bin_w = calloc(m, sizeof(double));
    if (!grid_h || !grid_w || !start_h || !start_w || !bin_h || !bin_w)
      rc = tr_fail(t, "out of memory");
  }
  for (size_t k = 0; rc == MX_OK && k < n_rois; k++) {
    if (bidx[k] < 0 || bidx[k] >= batch) {
      rc = tr_fail(t, "batch_indices[%zu] = %lld is outside [0, %d)", k, (long long)bidx[k],
                   batch);
      break;
    }
    double offset = half_pixel ? 0.5 : 0.0;
    double x0 = rois[4 * k] * scale - offset, y0 = rois[4 * k + 1] * scale - offset;
    double x1 = rois[4 * k + 2] * scale - offset, y1 = rois[4 * k + 3] * scale - offset;
    double rw = x1 - x0, rh = y1 - y0;
    if (!isfinite(rw) || !isfinite(rh)) {
      rc = tr_fail(t, "ROI %zu has non-finite coordinates", k);
      break;
    }
    if (!half_pixel) {
      rw = rw > 1.0 ? rw : 1.0;
      rh = rh > 1.0 ? rh : 1.0;
    }
    start_h[k] = y0, start_w[k] = x0;
    bin_h[k] = rh / (double)oh, bin_w[k] = rw / (double)ow;
    grid_h[k] = ratio > 0 ? ratio : (int64_t)ceil(rh / (double)oh);
    grid_w[k] = ratio > 0 ? ratio : (int64_t)ceil(rw / (double)ow);
    if (grid_h[k] < 0) grid_h[k] = 0;
    if (grid_w[k] < 0) grid_w[k] = 0;
    if (grid_h[k] * grid_w[k] > max_samples) max_samples = grid_h[k] * grid_w[k];
  }
  int64_t bins = (int64_t)n_rois * oh * ow, taps = bins * max_samples * 4;
  if (rc == MX_OK && (taps > INT32_MAX / 2 || taps * channels > ((int64_t)1 << 31)))
    rc = tr_fail(t, "%zu ROIs of %lldx%lld bins with %lld samples each are too many", n_rois,
                 (long long)oh, (long long)ow, (long long)max_samples);
  int32_t *pos = NULL;
  float *wts = NULL, *div = NULL;
  uint8_t *live = NULL;
  if (rc == MX_OK) {
    pos = calloc((size_t)(taps ? taps : 1), sizeof(int32_t));
    wts = calloc((size_t)(taps ? taps : 1), sizeof(float));
    live = calloc((size_t)(bins * max_samples > 0 ? bins * max_samples : 1), 1);
    div = calloc(n_rois ? n_rois : 1, sizeof(float));
    if (!pos || !wts || !live || !div) rc = tr_fail(t, "out of memory");
  }
  /* Pass 2: onnx's reference pre_calc_for_bilinear_interpolate, per sample point. */
  for (size_t k = 0; rc == MX_OK && k < n_rois; k++) {
    int64_t gh = grid_h[k], gw = grid_w[k], count = gh * gw > 1 ? gh * gw : 1;
    div[k] = (float)count;
    int64_t plane = bidx[k] * (int64_t)height * width;
    for (int64_t ph = 0; ph < oh; ph++)
      for (int64_t pw = 0; pw < ow; pw++) {
        int64_t bin = ((int64_t)k * oh + ph) * ow + pw;
        if (gh * gw == 0) live[bin * max_samples] = 1; /* no samples: the output is 0 */
        for (int64_t iy = 0; iy < gh; iy++)
          for (int64_t ix = 0; ix < gw; ix++) {
            int64_t s = bin * max_samples + iy * gw + ix;
            live[s] = 1;
            double yy = start_h[k] + (double)ph * bin_h[k] +
                        ((double)iy + 0.5) * bin_h[k] / (double)gh;
            double xx = start_w[k] + (double)pw * bin_w[k] +
                        ((double)ix + 0.5) * bin_w[k] / (double)gw;
            int32_t *p4 = pos + s * 4;
            float *w4 = wts + s * 4;
            for (int j = 0; j < 4; j++) p4[j] = (int32_t)plane;
            if (yy < -1.0 || yy > height || xx < -1.0 || xx > width) continue; /* weights 0 */
            if (yy < 0) yy = 0;
            if (xx < 0) xx = 0;
            int64_t ylo = (int64_t)yy, xlo = (int64_t)xx, yhi, xhi;
            if (ylo >= height - 1) yhi = ylo = height - 1, yy = (double)ylo;
            else yhi = ylo + 1;
            if (xlo >= width - 1) xhi = xlo = width - 1, xx = (double)xlo;
            else xhi = xlo + 1;
            double ly = yy - (double)ylo, lx = xx - (double)xlo, hy = 1.0 - ly, hx = 1.0 - lx;
            p4[0] = (int32_t)(plane + ylo * width + xlo), w4[0] = (float)(hy * hx);
            p4[1] = (int32_t)(plane + ylo * width + xhi), w4[1] = (float)(hy * lx);
            p4[2] = (int32_t)(plane + yhi * width + xlo), w4[2] = (float)(ly * hx);
            p4[3] = (int32_t)(plane + yhi * width + xhi), w4[3] = (float)(ly * lx);
          }
      }
  }
  mx_array ipos = NULL, iw = NULL, ilive = NULL, idiv = NULL;
  int n_taps = (int)taps;
  int wshape[4] = {(int)bins, (int)max_samples, 4, 1};
  int lshape[3] = {(int)bins, (int)max_samples, 1};
  int dshape[3] = {(int)n_rois, 1, 1};
  if (rc == MX_OK) rc = mx_from_data(t->mx, &ipos, pos, &n_taps, 1, MX_INT32);
  if (rc == MX_OK) rc = mx_from_data(t->mx, &iw, wts, wshape, 4, MX_FLOAT32);
  if (rc == MX_OK) rc = mx_from_data(t->mx, &ilive, live, lshape, 3, MX_BOOL);
  if (rc == MX_OK) rc = mx_from_data(t->mx, &idiv, div, dshape, 3, MX_FLOAT32);
  free(rois), free(bidx), free(grid_h), free(grid_w), free(start_h), free(start_w);
  free(bin_h), free(bin_w), free(pos), free(wts), free(live), free(div);
  TR_TRY(rc);
  /* X as rows of channels: [N*H*W, C]; gather every tap, weight, reduce. */
  int perm[4] = {0, 2, 3, 1}, rows[2] = {batch * height * width, channels};
  int vshape[4] = {(int)bins, (int)max_samples, 4, channels};
  mx_array xr, v, y;
  TR_TRY(mx_transpose(t->mx, &xr, x, perm, 4));
  TR_TRY(mx_reshape(t->mx, &xr, xr, rows, 2));
  TR_TRY(mx_take(t->mx, &v, xr, ipos, 0));
  if (mx_dtype_of(v) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &v, v, MX_FLOAT32));
  TR_TRY(mx_reshape(t->mx, &v, v, vshape, 4));
  TR_TRY(mx_binary(t->mx, &v, MX_MULTIPLY, v, iw));
  int tap_axis = 2, sample_axis = 1;
  if (is_max) { /* the maximum over samples of the largest weighted tap */
    mx_array low;
    TR_TRY(mx_reduce(t->mx, &v, MX_MAX, v, &tap_axis, 1, false)); /* [bins, S, C] */
    TR_TRY(tr_scalar(t, &low, -INFINITY, MX_FLOAT32));
    TR_TRY(mx_where(t->mx, &v, ilive, v, low));
    TR_TRY(mx_reduce(t->mx, &y, MX_MAX, v, &sample_axis, 1, false)); /* [bins, C] */
  } else {
    int axes[2] = {1, 2};
    TR_TRY(mx_reduce(t->mx, &y, MX_SUM, v, axes, 2, false));
  }
  int out3[3] = {(int)n_rois, (int)(oh * ow), channels}, perm_out[3] = {0, 2, 1};
  TR_TRY(mx_reshape(t->mx, &y, y, out3, 3)); /* [R, OH*OW, C] */
  if (!is_max) TR_TRY(mx_binary(t->mx, &y, MX_DIVIDE, y, idiv));
  TR_TRY(mx_transpose(t->mx, &y, y, perm_out, 3));
  int final_shape[4] = {(int)n_rois, channels, (int)oh, (int)ow};
  TR_TRY(mx_reshape(t->mx, &y, y, final_shape, 4));
  return tr_out_cast(t, 0, y);
}

static op_compile_class roi_node_class(const ir_graph *g, const ir_node *n) {
  return host_read_class(g, n, 0x6);
}

/* --- MaxUnpool --------------------------------------------------------------------------- */
static bool claim_max_unpool(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *i = ir_input(g, n, 1);
  const ir_attr *k = ir_find_attr(n, "kernel_shape");
  if (!k || k->type != IR_ATTR_INTS || k->count < 1)
    return op_decline(why, "the kernel_shape attribute is required");
  if (x->rank >= 0 && x->rank != (int)k->count + 2)
    return op_decline(why, "X has rank %d; kernel_shape implies %zu", x->rank, k->count + 2);
  if (!i || (i->elem_type != IR_INT64))
    return op_decline(why, "I must be an int64 tensor");
  const ir_attr *p = ir_find_attr(n, "pads"), *s = ir_find_attr(n, "strides");
  if (p && p->count != 2 * k->count) return op_decline(why, "pads must have 2 entries per dim");
  if (s && s->count != k->count) return op_decline(why, "strides must have 1 entry per dim");
  return true;
}

static int translate_max_unpool(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), ind = tr_in(t, 1);
  int rank = mx_ndim(x), nd = rank - 2;
  const ir_attr *k = ir_find_attr(n, "kernel_shape"), *p = ir_find_attr(n, "pads"),
                *s = ir_find_attr(n, "strides");
  if (!k || (int)k->count != nd) return tr_fail(t, "kernel_shape must have one entry per dim");
  int inferred[MX_MAX_RANK], shape[MX_MAX_RANK];
  inferred[0] = mx_dim(x, 0), inferred[1] = mx_dim(x, 1);
  for (int d = 0; d < nd; d++) {
    int64_t stride = s ? s->ints[d] : 1, lo = p ? p->ints[d] : 0, hi = p ? p->ints[nd + d] : 0;
    int64_t v = (int64_t)(mx_dim(x, 2 + d) - 1) * stride - (lo + hi) + k->ints[d];
    if (v < 0 || v > INT32_MAX) return tr_fail(t, "the inferred output shape is invalid");
    inferred[2 + d] = (int)v;
  }
  memcpy(shape, inferred, sizeof(int) * (size_t)rank);
  if (tr_in(t, 2)) {
    int64_t given[MX_MAX_RANK];
    size_t count = 0;
    TR_TRY(tr_host_ints(t, 2, given, MX_MAX_RANK, &count));
    if ((int)count != rank) return tr_fail(t, "output_shape must have %d entries", rank);
    for (int d = 0; d < rank; d++) {
      if (given[d] < inferred[d] || given[d] > INT32_MAX)
        return tr_fail(t, "output_shape[%d] = %lld is smaller than the inferred %d", d,
                       (long long)given[d], inferred[d]);
      shape[d] = (int)given[d];
    }
  }
  /* As onnx's reference (and its conformance data): scatter into the inferred shape, then
   * place it at the origin of the (possibly larger) output_shape. ONNX Runtime's CPU kernel
   * instead reads the indices as positions in output_shape. */
  int64_t total = 1;
  for (int d = 0; d < rank; d++) total *= inferred[d];
  if (total > INT32_MAX) return tr_fail(t, "the output is too large");
  int flat = -1, one_total = (int)total;
  mx_array xv, iv, zero, y, ok, lo, hi;
  TR_TRY(mx_reshape(t->mx, &xv, x, &flat, 1));
  TR_TRY(mx_reshape(t->mx, &iv, ind, &flat, 1));
  TR_TRY(mx_scalar_int(t->mx, &lo, 0, MX_INT64));
  TR_TRY(mx_scalar_int(t->mx, &hi, total, MX_INT64));
  TR_TRY(mx_binary(t->mx, &ok, MX_LOGICAL_AND, smp_bin(t, MX_GREATER_EQUAL, iv, lo),
                   smp_bin(t, MX_LESS, iv, hi)));
  TR_TRY(tr_check_that(t, ok, "an index in I is outside the output (%lld elements)",
                       (long long)total));
  TR_TRY(mx_scalar_int(t->mx, &hi, total - 1, MX_INT64));
  TR_TRY(mx_clip(t->mx, &iv, iv, lo, hi));
  TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(x)));
  TR_TRY(mx_full(t->mx, &y, &one_total, 1, zero));
  int upd_shape[2] = {(int)mx_size(xv), 1}, axis = 0;
  TR_TRY(mx_reshape(t->mx, &xv, xv, upd_shape, 2));
  /* No values (a zero-size X): nothing to write. MLX's scatter rejects the empty update. */
  if (mx_size(xv) > 0) TR_TRY(mx_scatter(t->mx, &y, MX_SCATTER_SET, y, &iv, 1, xv, &axis));
  TR_TRY(mx_reshape(t->mx, &y, y, inferred, rank));
  bool grow = false;
  int lo_pad[MX_MAX_RANK] = {0}, hi_pad[MX_MAX_RANK];
  for (int d = 0; d < rank; d++) hi_pad[d] = shape[d] - inferred[d], grow |= hi_pad[d] > 0;
  if (grow) TR_TRY(mx_pad(t->mx, &y, y, lo_pad, hi_pad, rank, zero));
  return tr_out(t, 0, y);
}

static op_compile_class unpool_node_class(const ir_graph *g, const ir_node *n) {
  return host_read_class(g, n, 0x4);
}

/* --- Col2Im ------------------------------------------------------------------------------ */
static bool claim_col2im(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *x = ir_input(g, n, 0), *img = ir_input(g, n, 1);
  if (x->rank >= 0 && x->rank != 3)
    return op_decline(why, "input has rank %d; Col2Im takes [N, C*prod(block), L]", x->rank);
  if (img && img->rank == 1 && img->dims[0] != IR_DIM_UNKNOWN &&
      (img->dims[0] < 1 || img->dims[0] > MX_MAX_RANK - 2))
    return op_decline(why, "image_shape has %lld entries", (long long)img->dims[0]);
  return true;
}

static int translate_col2im(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0);
  int64_t img[MX_MAX_RANK], blk[MX_MAX_RANK];
  size_t nd = 0, nb = 0;
  TR_TRY(tr_host_ints(t, 1, img, MX_MAX_RANK - 2, &nd));
  TR_TRY(tr_host_ints(t, 2, blk, MX_MAX_RANK - 2, &nb));
  if (nd != nb || nd < 1) return tr_fail(t, "image_shape and block_shape must match in length");
  if (mx_ndim(x) != 3) return tr_fail(t, "input must be [N, C*prod(block), L]");
  const ir_attr *da = ir_find_attr(n, "dilations"), *pa = ir_find_attr(n, "pads"),
                *sa = ir_find_attr(n, "strides");
  if ((da && da->count != nd) || (sa && sa->count != nd) || (pa && pa->count != 2 * nd))
    return tr_fail(t, "dilations/strides need %zu entries and pads %zu", nd, 2 * nd);
  int64_t dil[MX_MAX_RANK], str[MX_MAX_RANK], plo[MX_MAX_RANK], nblk[MX_MAX_RANK];
  int64_t block = 1, blocks = 1, pixels = 1;
  for (size_t d = 0; d < nd; d++) {
    dil[d] = da ? da->ints[d] : 1, str[d] = sa ? sa->ints[d] : 1;
    plo[d] = pa ? pa->ints[d] : 0;
    int64_t phi = pa ? pa->ints[nd + d] : 0;
    if (dil[d] < 1 || str[d] < 1 || blk[d] < 1 || img[d] < 1)
      return tr_fail(t, "shapes, dilations and strides must be positive");
    nblk[d] = (img[d] + plo[d] + phi - dil[d] * (blk[d] - 1) - 1) / str[d] + 1;
    if (nblk[d] < 1) return tr_fail(t, "no sliding block fits dim %zu", d);
    block *= blk[d], blocks *= nblk[d], pixels *= img[d];
  }
  int cb = mx_dim(x, 1), len = mx_dim(x, 2), batch = mx_dim(x, 0);
  if (cb == 0 || cb % block != 0) /* as ORT: zero channels is an error */
    return tr_fail(t, "dim 1 (%d) is not a positive multiple of prod(block_shape)", cb);
  if (len != blocks) return tr_fail(t, "dim 2 (%d) must be the number of blocks (%lld)", len,
                                    (long long)blocks);
  if (batch == 0) { /* nothing to add up; MLX's scatter divides by the update slice's size (0 for
                     * an empty batch: SIGFPE) and must not see it */
    mx_array zero, y;
    int oshape[MX_MAX_RANK];
    oshape[0] = 0, oshape[1] = (int)(cb / block);
    for (size_t d = 0; d < nd; d++) oshape[2 + d] = (int)img[d];
    TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(x)));
    TR_TRY(mx_full(t->mx, &y, oshape, (int)nd + 2, zero));
    return tr_out(t, 0, y);
  }
  if (block * blocks > INT32_MAX || pixels >= INT32_MAX) return tr_fail(t, "too large");
  int channels = (int)(cb / block), count = (int)(block * blocks);
  int32_t *pos = malloc(sizeof(int32_t) * (size_t)count);
  if (!pos) return tr_fail(t, "out of memory");
  for (int64_t b = 0; b < block; b++)
    for (int64_t l = 0; l < blocks; l++) {
      int64_t flat = 0, rb = b, rl = l;
      bool inside = true;
      int64_t off[MX_MAX_RANK], at[MX_MAX_RANK];
      for (int d = (int)nd - 1; d >= 0; d--) {
        off[d] = rb % blk[d], rb /= blk[d];
        at[d] = rl % nblk[d], rl /= nblk[d];
      }
      for (size_t d = 0; d < nd; d++) {
        int64_t p = at[d] * str[d] - plo[d] + off[d] * dil[d];
        inside = inside && p >= 0 && p < img[d];
        flat = flat * img[d] + p;
      }
      pos[b * blocks + l] = (int32_t)(inside ? flat : pixels); /* outside: a dump slot */
    }
  mx_array idx, v, zero, y;
  int rc = mx_from_data(t->mx, &idx, pos, &count, 1, MX_INT32);
  free(pos);
  TR_TRY(rc);
  int vshape[3] = {batch, channels, count}, perm[3] = {2, 0, 1};
  int ushape[4] = {count, batch, channels, 1}, ys[3] = {batch, channels, (int)pixels + 1};
  TR_TRY(mx_reshape(t->mx, &v, x, vshape, 3));
  TR_TRY(mx_transpose(t->mx, &v, v, perm, 3));
  TR_TRY(mx_reshape(t->mx, &v, v, ushape, 4));
  TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(x)));
  TR_TRY(mx_full(t->mx, &y, ys, 3, zero));
  int axis = 2;
  TR_TRY(mx_scatter(t->mx, &y, MX_SCATTER_ADD, y, &idx, 1, v, &axis));
  int start[3] = {0, 0, 0}, stop[3] = {batch, channels, (int)pixels}, step[3] = {1, 1, 1};
  TR_TRY(mx_slice(t->mx, &y, y, start, stop, step, 3));
  int oshape[MX_MAX_RANK];
  oshape[0] = batch, oshape[1] = channels;
  for (size_t d = 0; d < nd; d++) oshape[2 + d] = (int)img[d];
  TR_TRY(mx_reshape(t->mx, &y, y, oshape, (int)nd + 2));
  return tr_out(t, 0, y);
}

static op_compile_class col2im_node_class(const ir_graph *g, const ir_node *n) {
  return host_read_class(g, n, 0x6);
}

/* --- NonMaxSuppression ------------------------------------------------------------------- */
static bool claim_nms(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_value *boxes = ir_input(g, n, 0), *scores = ir_input(g, n, 1);
  if (boxes->elem_type != IR_FLOAT || !scores || scores->elem_type != IR_FLOAT)
    return op_decline(why, "boxes and scores must be float32 (as ONNX Runtime's kernel)");
  if (boxes->rank >= 0 && boxes->rank != 3)
    return op_decline(why, "boxes has rank %d; it must be [batch, boxes, 4]", boxes->rank);
  int64_t cpb = ir_attr_int(n, "center_point_box", 0);
  if (cpb != 0 && cpb != 1) return op_decline(why, "center_point_box must be 0 or 1");
  return true;
}

typedef struct nms_box {
  float score;
  int64_t index;
} nms_box;

static int nms_order(const void *a, const void *b) { /* score descending, then index */
  const nms_box *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Corners (ymin, xmin, ymax, xmax) of a box in either encoding, as ONNX Runtime computes them. */
static void nms_corners(const float *b, bool center, float c[4]) {
  if (center) {
    float hw = b[2] / 2, hh = b[3] / 2;
    c[0] = b[1] - hh, c[1] = b[0] - hw, c[2] = b[1] + hh, c[3] = b[0] + hw;
  } else {
    c[0] = b[0] < b[2] ? b[0] : b[2], c[2] = b[0] < b[2] ? b[2] : b[0];
    c[1] = b[1] < b[3] ? b[1] : b[3], c[3] = b[1] < b[3] ? b[3] : b[1];
  }
}

static bool nms_suppress(const float *a, const float *b, bool center, float threshold) {
  float p[4], q[4];
  nms_corners(a, center, p);
  nms_corners(b, center, q);
  float ix0 = p[1] > q[1] ? p[1] : q[1], ix1 = p[3] < q[3] ? p[3] : q[3];
  if (ix1 <= ix0) return false;
  float iy0 = p[0] > q[0] ? p[0] : q[0], iy1 = p[2] < q[2] ? p[2] : q[2];
  if (iy1 <= iy0) return false;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  if (inter <= 0) return false;
  float area1 = (p[3] - p[1]) * (p[2] - p[0]), area2 = (q[3] - q[1]) * (q[2] - q[0]);
  float uni = area1 + area2 - inter;
  if (area1 <= 0 || area2 <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

static int translate_nms(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array boxes = tr_in(t, 0), scores = tr_in(t, 1);
  if (mx_ndim(boxes) != 3 || mx_dim(boxes, 2) != 4 || mx_ndim(scores) != 3 ||
      mx_dim(scores, 0) != mx_dim(boxes, 0) || mx_dim(scores, 2) != mx_dim(boxes, 1))
    return tr_fail(t, "boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]");
  int64_t max_out = 0;
  double iou = 0, score_min = 0;
  bool has_score = tr_in(t, 4) != NULL && mx_size(tr_in(t, 4)) > 0;
  if (tr_in(t, 2) && mx_size(tr_in(t, 2)) > 0) {
    int64_t v[1];
    size_t c = 0;
    TR_TRY(tr_host_ints(t, 2, v, 1, &c));
    max_out = v[0] > 0 ? v[0] : 0;
  }
  if (tr_in(t, 3) && mx_size(tr_in(t, 3)) > 0) TR_TRY(tr_host_scalar(t, 3, &iou));
  if (has_score) TR_TRY(tr_host_scalar(t, 4, &score_min));
  if (iou < 0 || iou > 1) return tr_fail(t, "iou_threshold %g must be in [0, 1]", iou);
  bool center = ir_attr_int(n, "center_point_box", 0) != 0;
  int nb = mx_dim(boxes, 0), nc = mx_dim(scores, 1), nx = mx_dim(boxes, 1);
  float *bv = NULL, *sv = NULL;
  size_t cb = 0, cs = 0;
  int rc = host_floats(t, 0, &bv, &cb);
  if (rc == MX_OK) rc = host_floats(t, 1, &sv, &cs);
  int64_t per = max_out < nx ? max_out : nx, cap = (int64_t)nb * nc * per;
  int64_t *out = rc == MX_OK ? malloc(sizeof(int64_t) * 3 * (size_t)(cap ? cap : 1)) : NULL;
  nms_box *cand = rc == MX_OK ? malloc(sizeof(nms_box) * (size_t)(nx ? nx : 1)) : NULL;
  int64_t *kept = rc == MX_OK ? malloc(sizeof(int64_t) * (size_t)(nx ? nx : 1)) : NULL;
  if (rc == MX_OK && (!out || !cand || !kept)) rc = tr_fail(t, "out of memory");
  int64_t selected = 0;
  float thr = (float)iou, smin = (float)score_min;
  for (int b = 0; rc == MX_OK && b < nb; b++)
    for (int c = 0; c < nc; c++) {
      const float *s = sv + ((int64_t)b * nc + c) * nx, *bb = bv + (int64_t)b * nx * 4;
      int m = 0;
      for (int i = 0; i < nx; i++)
        if (!has_score || s[i] > smin) cand[m].score = s[i], cand[m++].index = i;
      qsort(cand, (size_t)m, sizeof *cand, nms_order);
      int64_t nk = 0;
      for (int i = 0; i < m && nk < max_out; i++) {
        bool keep = true;
        for (int64_t j = 0; j < nk && keep; j++)
          keep = !nms_suppress(bb + cand[i].index * 4, bb + kept[j] * 4, center, thr);
        if (!keep) continue;
        kept[nk++] = cand[i].index;
        out[selected * 3] = b, out[selected * 3 + 1] = c, out[selected * 3 + 2] = cand[i].index;
        selected++;
      }
    }
  mx_array y = NULL;
  int shape[2] = {(int)selected, 3};
  if (rc == MX_OK) rc = mx_from_data(t->mx, &y, out, shape, 2, MX_INT64);
  free(bv), free(sv), free(out), free(cand), free(kept);
  TR_TRY(rc);
  return tr_out(t, 0, y);
}

const op_row ops_vision_rows[] = {
    {"", "GridSample", 16, 19, claim_grid_sample, translate_grid_sample, OP_SHAPE_KEYED,
     OP_FLOATS, GS_OPSET16,
     "4-D; bilinear/nearest/bicubic, zeros/border/reflection padding, align_corners; taps "
     "gathered in one take_along_axis"},
    {"", "GridSample", 20, 25, claim_grid_sample, translate_grid_sample, OP_SHAPE_KEYED,
     OP_FLOATS, GS_OPSET20,
     "1 to 3 spatial dims; linear/nearest/cubic, zeros/border/reflection padding, "
     "align_corners"},
    {"", "AffineGrid", 20, 25, claim_affine_grid, translate_affine_grid, OP_EAGER, OP_FLOATS, 0,
     "2-D and 3-D; base grid built on the host from size (eager unless constant), multiplied "
     "by theta on the device",
     affine_node_class},
    {"", "RoiAlign", 10, 15, claim_roi_align, translate_roi_align, OP_EAGER, OP_FLOATS,
     ROI_OPSET10,
     "avg/max; sample points and weights computed on the host from rois and batch_indices "
     "(eager unless constant); output_half_pixel coordinates",
     roi_node_class},
    {"", "RoiAlign", 16, 25, claim_roi_align, translate_roi_align, OP_EAGER, OP_FLOATS,
     ROI_OPSET16,
     "avg/max, half_pixel/output_half_pixel; sample points and weights computed on the host "
     "from rois and batch_indices (eager unless constant)",
     roi_node_class},
    {"", "MaxUnpool", 9, 25, claim_max_unpool, translate_max_unpool, OP_EAGER, OP_FLOATS, 0,
     "scatter at the flat indices (range checked at run time); output_shape read on the host "
     "(eager unless constant)",
     unpool_node_class},
    {"", "Col2Im", 18, 25, claim_col2im, translate_col2im, OP_EAGER, OP_NUMERIC, 0,
     "scatter-add at host-computed image positions; image_shape and block_shape read on the "
     "host (eager unless constant)",
     col2im_node_class},
    {"", "NonMaxSuppression", 10, 25, claim_nms, translate_nms, OP_HOST_SHAPE, OP_T(IR_FLOAT),
     0,
     "data-dependent output: computed on the host every run (greedy per batch and class, "
     "float32 IoU as ONNX Runtime)"},
    OP_ROWS_END,
};
