/*
 * Convolution forms that MLX's CPU backend runs through per-element loops or an im2col copy,
 * recast on the CPU device into MLX operations that are vectorised or served by BLAS there (MLX's
 * CPU convolution takes its im2col + BLAS path only for ungrouped, undilated correlations): a
 * depthwise convolution runs as conv_depthwise.c's host loop over contiguous channels; other
 * grouped convolutions run group by group (conv.c concatenates them); a 1x1 convolution is one
 * matrix product, its bias added by BLAS (addmm); another stride-1 convolution from about a MiB
 * of im2col columns is one product per kernel tap over shifted blocks of the flattened input;
 * any other ungrouped one is an im2col copy (conv_im2col.c) and one product over its packed
 * weight; and a ConvTranspose whose kernel equals its stride is one matrix product whose columns
 * interleave back into space. Each notes its path (node_path.h) for the run record. Measured in
 * docs/BENCHMARKS.md (PP-OCR's depthwise and pointwise layers, PP-OCRv4 det's upsamplers, rec's
 * stem and neck); the GPU keeps MLX's own convolution. Each form's weight operand (per-tap rows,
 * the transposed matrix, the packed im2col matrix) is made from a constant weight once at plan
 * build (cpu_conv_prepare, called by conv.c's prepare hooks) and rebuilt per translation only for
 * weights computed in the graph; both routes give the same values in the same layout roles.
 */
#include "cpu/sgemm/sgemm.h"
#include "cpu/conv.h"
#include "cpu/math.h"
#include "cpu/matmul.h"
#include "plan/translate.h"

#include <stdint.h>
#include <stdlib.h>

enum { TAPS_GEMM_MIN_COLUMNS = 1 << 18 };

/* Output extent of one spatial axis, or 0 when the window does not fit. */
static int out_extent(int in, int lo, int hi, int k, int dil, int stride) {
  int span = (k - 1) * dil + 1, padded = in + lo + hi;
  return padded < span ? 0 : (padded - span) / stride + 1;
}

bool cpu_conv_depthwise_applies(const tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                                const int *lo, const int *hi, const int *idil, bool flip) {
  if (t->mx->device != MX_DEVICE_CPU || flip || groups == 1) return false;
  if (mx_dtype_of(x) != MX_FLOAT32 || mx_dim(w, -1) != 1 || mx_dim(w, 0) != groups ||
      mx_dim(x, -1) != groups)
    return false;
  for (int i = 0; i < nd; i++)
    if (idil[i] != 1 || lo[i] < 0 || hi[i] < 0) return false;
  return true;
}

/* The depthwise weight w [C, k..., 1] as [taps, C] rows, row `tap` the tap's per-channel
 * weights (a transposed view: prepare makes it contiguous). */
static int depthwise_rows(tr_ctx *t, mx_array w, mx_array *rows) {
  int c = mx_dim(w, 0), taps = 1, perm[2] = {1, 0};
  for (int i = 1; i < mx_ndim(w) - 1; i++) taps *= mx_dim(w, i);
  int shape[2] = {c, taps};
  TR_TRY(mx_reshape(t->mx, rows, w, shape, 2));
  return mx_transpose(t->mx, rows, *rows, perm, 2);
}

/* The window geometry of x [N, s..., C] by w [M, k..., *] (conv.h), or a failure when the
 * kernel does not fit the padded input. */
static int window_of(tr_ctx *t, mx_array x, mx_array w, int nd, const int *stride, const int *lo,
                     const int *hi, const int *kdil, conv_window *g) {
  *g = (conv_window){.n = mx_dim(x, 0), .c = mx_dim(x, -1)};
  for (int i = 0; i < 3; i++) {
    int j = i - (3 - nd); /* the input's spatial axis, or < 0 for a leading extent 1 */
    g->in[i] = j < 0 ? 1 : mx_dim(x, j + 1);
    g->k[i] = j < 0 ? 1 : mx_dim(w, j + 1);
    g->stride[i] = j < 0 ? 1 : stride[j];
    g->lo[i] = j < 0 ? 0 : lo[j];
    g->dil[i] = j < 0 ? 1 : kdil[j];
    g->out[i] = j < 0 ? 1 : out_extent(g->in[i], lo[j], hi[j], g->k[i], g->dil[i], g->stride[i]);
    if (g->out[i] == 0) return tr_fail(t, "the kernel does not fit in the padded input");
  }
  return MX_OK;
}

/* y = sum over taps of x[window at tap] * w[:, tap] (+ bias), by conv_depthwise.c's host loop;
 * x [N, s..., C] and w [C, k..., 1], both channels-last; rows: w's prepared [taps, C] rows, or
 * NULL. A bias that is not float32 [C] is added after the loop. */
int cpu_conv_depthwise(tr_ctx *t, mx_array x, mx_array w, mx_array rows, mx_array bias, int nd,
                       const int *stride, const int *lo, const int *hi, const int *kdil,
                       mx_array *y) {
  conv_window g;
  TR_TRY(window_of(t, x, w, nd, stride, lo, hi, kdil, &g));
  int taps = g.k[0] * g.k[1] * g.k[2];
  if (!rows || mx_ndim(rows) != 2 || mx_dim(rows, 0) != taps || mx_dim(rows, 1) != g.c)
    TR_TRY(depthwise_rows(t, w, &rows));
  bool fuse_bias = bias && mx_dtype_of(bias) == MX_FLOAT32 && mx_ndim(bias) == 1 &&
                   mx_dim(bias, 0) == g.c;
  TR_TRY(cpu_conv_depthwise_loop(t, x, rows, fuse_bias ? bias : NULL, &g, y));
  if (bias && !fuse_bias) TR_TRY(mx_binary(t->mx, y, MX_ADD, *y, bias));
  tr_note_path(t, TR_PATH_HOST_KERNEL, "conv_depthwise", fuse_bias ? TR_FOLD_BIAS : 0,
               fuse_bias ? "depthwise loop with bias (CPU)" : "depthwise loop (CPU)");
  return MX_OK;
}

bool cpu_conv_split_groups(const tr_ctx *t, int groups) {
  return t->mx->device == MX_DEVICE_CPU && groups > 1 && groups <= CPU_CONV_MAX_SPLIT;
}

/* w [O, k..., C] as the right operand [C, O * K] of a product over channels: a transposed view,
 * which MLX's matmul hands to BLAS as transposed (no copy). */
static int matmul_weight(tr_ctx *t, mx_array w, mx_array *w2) {
  int shape[2] = {1, mx_dim(w, -1)}, perm[2] = {1, 0};
  for (int i = 0; i < mx_ndim(w) - 1; i++) shape[0] *= mx_dim(w, i);
  TR_TRY(mx_reshape(t->mx, w2, w, shape, 2));
  return mx_transpose(t->mx, w2, *w2, perm, 2);
}

/* wm: the prepared matmul_weight of w when given and of the right shape; else made now. */
static int matmul_weight_of(tr_ctx *t, mx_array w, mx_array wm, mx_array *w2) {
  int rows = 1;
  for (int i = 0; i < mx_ndim(w) - 1; i++) rows *= mx_dim(w, i);
  if (wm && mx_ndim(wm) == 2 && mx_dim(wm, 0) == mx_dim(w, -1) && mx_dim(wm, 1) == rows)
    return *w2 = wm, MX_OK;
  return matmul_weight(t, w, w2);
}

bool cpu_conv_pointwise_applies(const tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                                const int *lo, const int *hi, const int *idil, bool flip) {
  if (t->mx->device != MX_DEVICE_CPU || flip || groups != 1 || mx_dtype_of(x) != MX_FLOAT32)
    return false;
  for (int i = 0; i < nd; i++)
    if (mx_dim(w, i + 1) != 1 || idil[i] != 1 || lo[i] != 0 || hi[i] != 0) return false;
  return true;
}

/* A 1x..x1 convolution is a matrix product over channels: [P, C] x [O, C]^T, after taking every
 * stride-th position. MLX's CPU convolution would first copy the input into an im2col buffer. A
 * float32 bias [O] goes into the product (addmm: BLAS accumulates onto the broadcast bias), not
 * through a broadcast add afterwards, which MLX runs in its strided (scalar) loop; another bias
 * is added after. addmm fixes its broadcast at trace time, which is sound here: Conv groups
 * compile keyed on shapes, never shapeless. */
int cpu_conv_pointwise(tr_ctx *t, mx_array x, mx_array w, mx_array wm, mx_array packed,
                       mx_array bias, int nd, const int *stride, mx_array *y) {
  int rank = nd + 2, c = mx_dim(x, -1), o = mx_dim(w, 0);
  int start[MX_MAX_RANK] = {0}, stop[MX_MAX_RANK], steps[MX_MAX_RANK], shape[MX_MAX_RANK];
  bool strided = false;
  for (int i = 0; i < rank; i++) {
    stop[i] = mx_dim(x, i);
    steps[i] = i >= 1 && i <= nd ? stride[i - 1] : 1;
    strided = strided || steps[i] != 1;
  }
  if (strided) TR_TRY(mx_slice(t->mx, &x, x, start, stop, steps, rank));
  for (int i = 0; i < rank - 1; i++) shape[i] = mx_dim(x, i);
  int rows[2] = {-1, c};
  mx_array x2, w2;
  TR_TRY(matmul_weight_of(t, w, wm, &w2));
  bool fuse_bias = bias && mx_dtype_of(bias) == MX_FLOAT32 && mx_dtype_of(x) == MX_FLOAT32 &&
                   mx_ndim(bias) == 1 && mx_dim(bias, 0) == o;
  if (cpu_matmul_applies(t, x, w2, packed)) {
    /* the kernel takes x's leading axes as rows itself: no reshape either side (each is an
     * operation of the Run's graph) */
    TR_TRY(cpu_matmul_build(t, x, w2, packed, fuse_bias ? bias : NULL, y));
    tr_note_path(t, TR_PATH_HOST_KERNEL, "conv_pointwise_packed", fuse_bias ? TR_FOLD_BIAS : 0,
                 fuse_bias ? "pointwise matmul on packed weight with bias (CPU)"
                           : "pointwise matmul on packed weight (CPU)");
    return bias && !fuse_bias ? mx_binary(t->mx, y, MX_ADD, *y, bias) : MX_OK;
  }
  TR_TRY(mx_reshape(t->mx, &x2, x, rows, 2));
  if (fuse_bias) TR_TRY(mx_addmm(t->mx, &x2, bias, x2, w2));
  else TR_TRY(mx_matmul(t->mx, &x2, x2, w2));
  tr_note_path(t, TR_PATH_COMPOSED, "conv_pointwise", fuse_bias ? TR_FOLD_BIAS : 0,
               fuse_bias ? "pointwise matmul with bias (CPU)" : "pointwise matmul (CPU)");
  shape[rank - 1] = o;
  TR_TRY(mx_reshape(t->mx, y, x2, shape, rank));
  return bias && !fuse_bias ? mx_binary(t->mx, y, MX_ADD, *y, bias) : MX_OK;
}

bool cpu_conv_taps_gemm_applies(const tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                                const int *stride, const int *lo, const int *hi, const int *idil,
                                bool flip) {
  if (t->mx->device != MX_DEVICE_CPU || flip || groups != 1 || mx_dtype_of(x) != MX_FLOAT32 ||
      mx_size(x) == 0)
    return false;
  double taps = 1, positions = mx_dim(x, 0);
  for (int i = 0; i < nd; i++) {
    if (stride[i] != 1 || idil[i] != 1 || lo[i] < 0 || hi[i] < 0) return false;
    taps *= mx_dim(w, i + 1);
    positions *= mx_dim(x, i + 1);
  }
  /* below about a MiB of im2col columns MLX's one product costs less than a product per tap */
  return taps > 1 && positions * taps * mx_dim(x, -1) >= TAPS_GEMM_MIN_COLUMNS;
}

/* w [O, k..., C] as [taps, C, O]: tap t's [C, O] matrix is a plain block of it. */
static int tap_matrices(tr_ctx *t, mx_array w, mx_array *mats) {
  int o = mx_dim(w, 0), c = mx_dim(w, -1), taps = 1, perm[3] = {1, 2, 0};
  for (int i = 1; i < mx_ndim(w) - 1; i++) taps *= mx_dim(w, i);
  int shape[3] = {o, taps, c};
  TR_TRY(mx_reshape(t->mx, mats, w, shape, 3));
  TR_TRY(mx_transpose(t->mx, mats, *mats, perm, 3));
  return mx_contiguous(t->mx, mats, *mats);
}

/* A stride-1 convolution as one matrix product per kernel tap, summed. In the padded input
 * flattened to rows [N * S, C] (S: the padded spatial size), every output position's tap reads
 * the row at the position's own row plus a fixed offset, so tap t's operand is the contiguous
 * block of rows starting at its offset: no im2col copy (MLX's CPU convolution copies one of
 * taps * C columns per position, element by element). The sum runs over all rows, including
 * positions whose window would leave the padded input (their rows are cut off at the end).
 * BLAS accumulates each tap onto the previous sum (addmm), the first onto the bias when it is
 * float32 [O]; a broadcast fixed at trace time, sound because Conv compiles keyed on shapes. */
int cpu_conv_taps_gemm(tr_ctx *t, mx_array x, mx_array w, mx_array mats, mx_array bias, int nd,
                       const int *lo, const int *hi, const int *kdil, mx_array *y) {
  int rank = nd + 2, n = mx_dim(x, 0), c = mx_dim(x, -1), o = mx_dim(w, 0), taps = 1;
  int plo[MX_MAX_RANK] = {0}, phi[MX_MAX_RANK] = {0}, padded[MX_MAX_RANK], out[MX_MAX_RANK];
  long step[MX_MAX_RANK], rows = n; /* step: rows between neighbours along spatial axis i */
  for (int i = 0; i < nd; i++) {
    plo[i + 1] = lo[i], phi[i + 1] = hi[i];
    padded[i] = mx_dim(x, i + 1) + lo[i] + hi[i];
    out[i] = out_extent(mx_dim(x, i + 1), lo[i], hi[i], mx_dim(w, i + 1), kdil[i], 1);
    if (out[i] == 0) return tr_fail(t, "the kernel does not fit in the padded input");
    rows *= padded[i];
    taps *= mx_dim(w, i + 1);
  }
  if (rows > INT32_MAX) return tr_fail(t, "the padded input has more than 2^31 positions");
  for (int i = nd - 1; i >= 0; i--) step[i] = i == nd - 1 ? 1 : step[i + 1] * padded[i + 1];
  long last = 0; /* the last tap's offset, the largest */
  for (int i = 0; i < nd; i++) last += (long)(mx_dim(w, i + 1) - 1) * kdil[i] * step[i];
  int span = (int)(rows - last); /* rows every tap can read */
  if (!mats || mx_ndim(mats) != 3 || mx_dim(mats, 0) != taps || mx_dim(mats, 1) != c ||
      mx_dim(mats, 2) != o)
    TR_TRY(tap_matrices(t, w, &mats));
  mx_array zero, flat, acc = NULL;
  TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
  TR_TRY(mx_pad(t->mx, &flat, x, plo, phi, rank, zero));
  int flat_shape[2] = {(int)rows, c}, mat_shape[2] = {c, o};
  TR_TRY(mx_reshape(t->mx, &flat, flat, flat_shape, 2));
  bool fuse_bias = bias && mx_dtype_of(bias) == MX_FLOAT32 && mx_ndim(bias) == 1 &&
                   mx_dim(bias, 0) == o;
  for (int tap = 0; tap < taps; tap++) {
    long at = 0;
    for (int i = nd - 1, rest = tap; i >= 0; i--) {
      at += (long)(rest % mx_dim(w, i + 1)) * kdil[i] * step[i];
      rest /= mx_dim(w, i + 1);
    }
    mx_array block, mat;
    TR_TRY(tr_slice_axis(t, flat, 0, (int)at, (int)at + span, &block));
    TR_TRY(tr_slice_axis(t, mats, 0, tap, tap + 1, &mat));
    TR_TRY(mx_reshape(t->mx, &mat, mat, mat_shape, 2));
    if (acc) TR_TRY(mx_addmm(t->mx, &acc, acc, block, mat));
    else if (fuse_bias) TR_TRY(mx_addmm(t->mx, &acc, bias, block, mat));
    else TR_TRY(mx_matmul(t->mx, &acc, block, mat));
  }
  /* rows [span, rows) belong to no output: zeros, so the sum takes the padded input's shape */
  int tail_lo[2] = {0, 0}, tail_hi[2] = {(int)last, 0}, shape[MX_MAX_RANK];
  if (last) TR_TRY(mx_pad(t->mx, &acc, acc, tail_lo, tail_hi, 2, zero));
  shape[0] = n, shape[rank - 1] = o;
  for (int i = 0; i < nd; i++) shape[i + 1] = padded[i];
  TR_TRY(mx_reshape(t->mx, &acc, acc, shape, rank));
  for (int i = 0; i < nd; i++)
    if (out[i] != padded[i]) TR_TRY(tr_slice_axis(t, acc, i + 1, 0, out[i], &acc));
  if (bias && !fuse_bias) TR_TRY(mx_binary(t->mx, &acc, MX_ADD, acc, bias));
  tr_note_path(t, TR_PATH_COMPOSED, "conv_taps", fuse_bias ? TR_FOLD_BIAS : 0,
               fuse_bias ? "taps gemm with bias (CPU)" : "taps gemm (CPU)");
  *y = acc;
  return MX_OK;
}

/* w [O, k..., C] as the [taps * C, O] matrix of an im2col product: column block tap * C + c of
 * row o is w[o, tap, c] (a transposed view; prepare packs it). */
static int im2col_weight(tr_ctx *t, mx_array w, mx_array *w2) {
  int shape[2] = {mx_dim(w, 0), 1}, perm[2] = {1, 0};
  for (int i = 1; i < mx_ndim(w); i++) shape[1] *= mx_dim(w, i);
  TR_TRY(mx_reshape(t->mx, w2, w, shape, 2));
  return mx_transpose(t->mx, w2, *w2, perm, 2);
}

bool cpu_conv_im2col_applies(const tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                             const int *lo, const int *hi, const int *idil, bool flip) {
  if (t->mx->device != MX_DEVICE_CPU || t->trace == TR_TRACE_SHAPELESS ||
      !cpu_host_kernels_enabled() || !cpu_sgemm_own_serves() || flip || groups != 1 ||
      mx_dtype_of(x) != MX_FLOAT32 || mx_dtype_of(w) != MX_FLOAT32 || mx_size(x) == 0)
    return false;
  for (int i = 0; i < nd; i++)
    if (idil[i] != 1 || lo[i] < 0 || hi[i] < 0) return false;
  return true;
}

/* y = im2col(x) @ w's [taps * C, O] matrix, packed (+ bias [O] when float32, in the product):
 * two host kernels (conv_im2col.c, cpu/matmul.c); an elementwise chain reading only y folds
 * into the product as its epilogue. packed: the matrix packed at plan build, or NULL (a weight
 * computed in the graph, packed here on every Run). */
int cpu_conv_im2col(tr_ctx *t, mx_array x, mx_array w, mx_array packed, mx_array bias, int nd,
                    const int *stride, const int *lo, const int *hi, const int *kdil,
                    mx_array *y) {
  conv_window g;
  TR_TRY(window_of(t, x, w, nd, stride, lo, hi, kdil, &g));
  mx_array cols, w2;
  TR_TRY(cpu_conv_im2col_loop(t, x, &g, &cols));
  TR_TRY(im2col_weight(t, w, &w2));
  long k = mx_dim(w2, 0), o = mx_dim(w2, 1);
  if (!cpu_matmul_packed_for(packed, k, o))
    TR_TRY(cpu_matmul_prepare(t, w2, &packed));
  if (!cpu_matmul_applies(t, cols, w2, packed))
    return tr_fail(t, "the im2col product's %ld x %ld weight cannot be packed", k, o);
  int shape[MX_MAX_RANK] = {g.n};
  for (int i = 0; i < nd; i++) shape[1 + i] = g.out[3 - nd + i];
  shape[nd + 1] = (int)o;
  bool fuse_bias = bias && mx_dtype_of(bias) == MX_FLOAT32 && mx_ndim(bias) == 1 &&
                   mx_dim(bias, 0) == o;
  TR_TRY(cpu_matmul_build(t, cols, w2, packed, fuse_bias ? bias : NULL, y));
  TR_TRY(mx_reshape(t->mx, y, *y, shape, nd + 2));
  if (bias && !fuse_bias) TR_TRY(mx_binary(t->mx, y, MX_ADD, *y, bias));
  tr_note_path(t, TR_PATH_HOST_KERNEL, "conv_im2col", fuse_bias ? TR_FOLD_BIAS : 0,
               fuse_bias ? "im2col product with bias (CPU)" : "im2col product (CPU)");
  return MX_OK;
}

bool cpu_conv_transpose_applies(const tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                                const int64_t *stride, const int64_t *dilation) {
  if (t->mx->device != MX_DEVICE_CPU || groups != 1 || mx_dtype_of(x) != MX_FLOAT32 ||
      2 * nd + 2 > MX_MAX_RANK)
    return false;
  for (int i = 0; i < nd; i++)
    if (dilation[i] != 1 || mx_dim(w, i + 1) != stride[i]) return false;
  return true;
}

/* ConvTranspose whose kernel equals its stride: the kernel's copies do not overlap, so the full
 * output is one matrix product [P, C] x [M*K, C]^T whose columns are interleaved back into space
 * ([N, d..., M, k...] -> [N, d1, k1, d2, k2, ..., M]); then the window [head, head + out) of
 * each axis is taken, zero beyond the full extent. MLX's CPU path would correlate the
 * stride-dilated input element by element. x [N, d..., C]; w [M, k..., C] (regrouped). */
int cpu_conv_transpose(tr_ctx *t, mx_array x, mx_array w, mx_array wm, int nd,
                       const int *head, const int *out, mx_array *y) {
  int c = mx_dim(x, -1), m = mx_dim(w, 0);
  int shape[MX_MAX_RANK], perm[MX_MAX_RANK];
  int rows[2] = {-1, c};
  mx_array x2, w2;
  TR_TRY(mx_reshape(t->mx, &x2, x, rows, 2));
  TR_TRY(matmul_weight_of(t, w, wm, &w2));
  TR_TRY(mx_matmul(t->mx, &x2, x2, w2));
  shape[0] = mx_dim(x, 0);
  for (int i = 0; i < nd; i++)
    shape[1 + i] = mx_dim(x, i + 1), shape[2 + nd + i] = mx_dim(w, i + 1);
  shape[1 + nd] = m;
  TR_TRY(mx_reshape(t->mx, &x2, x2, shape, 2 * nd + 2));
  perm[0] = 0, perm[2 * nd + 1] = 1 + nd;
  for (int i = 0; i < nd; i++) perm[1 + 2 * i] = 1 + i, perm[2 + 2 * i] = 2 + nd + i;
  TR_TRY(mx_transpose(t->mx, &x2, x2, perm, 2 * nd + 2));
  shape[0] = mx_dim(x, 0), shape[nd + 1] = m;
  for (int i = 0; i < nd; i++) shape[1 + i] = mx_dim(x, i + 1) * mx_dim(w, i + 1);
  TR_TRY(mx_reshape(t->mx, &x2, x2, shape, nd + 2));
  for (int i = 0; i < nd; i++) { /* the window [head, head + out) of [0, full), zeros beyond */
    int full = shape[1 + i], keep = full - head[i] < out[i] ? full - head[i] : out[i];
    if (keep < 0) keep = 0;
    if (head[i] || keep != full) TR_TRY(tr_slice_axis(t, x2, i + 1, head[i], head[i] + keep, &x2));
    if (keep < out[i]) {
      int lo[MX_MAX_RANK] = {0}, hi[MX_MAX_RANK] = {0};
      hi[i + 1] = out[i] - keep;
      mx_array zero;
      TR_TRY(tr_scalar(t, &zero, 0.0, mx_dtype_of(x2)));
      TR_TRY(mx_pad(t->mx, &x2, x2, lo, hi, nd + 2, zero));
    }
  }
  tr_note_path(t, TR_PATH_COMPOSED, "conv_transpose_unfold", 0,
               "non-overlapping transpose matmul (CPU)");
  *y = x2;
  return MX_OK;
}

/* The weight operand of the CPU form node n will take, made once from its constant weight w
 * (channels-last [M, k..., C/group]; regrouped for ConvTranspose): a depthwise kernel's [taps, C]
 * rows, contiguous so that each tap is a plain row; a stride-1 ungrouped kernel's [taps, C, O]
 * matrices, contiguous; a 1x..x1 kernel's or a kernel-equals-stride ConvTranspose's transposed
 * matrix, a view of w. *packed: the 1x..x1 matrix, or any other ungrouped kernel's [taps * C, O]
 * im2col matrix, packed for the plugin's product. NULL where no form can apply to this weight;
 * the translator still checks the live shapes before taking a form. */
int cpu_conv_prepare(tr_ctx *t, const ir_node *n, mx_array w, bool transposed, mx_array *form,
                     mx_array *packed) {
  *form = *packed = NULL;
  int nd = mx_ndim(w) - 2;
  int64_t groups = ir_attr_int(n, "group", 1);
  if (t->mx->device != MX_DEVICE_CPU || mx_dtype_of(w) != MX_FLOAT32 || nd < 1) return MX_OK;
  if (!transposed && groups > 1 && mx_dim(w, 0) == groups && mx_dim(w, -1) == 1) {
    TR_TRY(depthwise_rows(t, w, form));
    return mx_contiguous(t->mx, form, *form);
  }
  if (groups != 1) return MX_OK;
  const ir_attr *s = ir_find_attr(n, "strides");
  int taps = 1;
  bool unit_strides = true;
  for (int i = 0; i < nd; i++) {
    taps *= mx_dim(w, i + 1);
    unit_strides = unit_strides &&
                   (!s || s->type != IR_ATTR_INTS || s->count != (size_t)nd || s->ints[i] == 1);
  }
  if (!transposed && taps > 1) { /* per-tap products or an im2col product, by input size */
    if (unit_strides) TR_TRY(tap_matrices(t, w, form));
    mx_array w2;
    TR_TRY(im2col_weight(t, w, &w2));
    return cpu_matmul_prepare(t, w2, packed);
  }
  for (int i = 0; i < nd; i++) {
    int64_t stride = s && s->type == IR_ATTR_INTS && s->count == (size_t)nd ? s->ints[i] : 1;
    if (mx_dim(w, i + 1) != (transposed ? stride : 1)) return MX_OK;
  }
  TR_TRY(matmul_weight(t, w, form));
  return transposed ? MX_OK : cpu_matmul_prepare(t, *form, packed);
}
