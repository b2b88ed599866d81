/*
 * Convolutions: Conv and ConvTranspose over 1 to 3 spatial dimensions with groups, strides,
 * dilations, explicit (also asymmetric) pads, auto_pad and an optional bias, on MLX's
 * conv_general. MLX is channels-last, so the NC... input and the OI... weight are transposed in
 * and the result is transposed back; a constant weight is brought into MLX's layout once, when
 * the plan is built (the rows' prepare hooks), not on every run: made contiguous there, since
 * MLX's CPU convolution copies a strided weight on every call, and with the weight operand of the
 * CPU form it will take (cpu/conv.c) in the second slot. ConvTranspose is the correlation of the
 * input dilated by the strides with the flipped kernel, whose per-group [C/group, M/group]
 * blocks are regrouped into an [M, k..., C/group] weight; its padding (explicit pads, auto_pad,
 * or the pads implied by output_shape, with output_padding) becomes low/high padding of that
 * correlation, cropped where
 * negative. MLX has no grouped 3-D convolution, so those run group by group. Forms where ONNX
 * Runtime's CPU kernel rejects the node or departs from the spec (SAME with dilations for Conv,
 * SAME whose padding would be negative, output_padding not below the stride) are declined and stay
 * on ONNX Runtime. A Conv window that does not fit the padded input fails the run as on ORT.
 */
#include "cpu/conv.h"
#include "ops/conv.h"
#include "ops/families.h"
#include "ops/window.h"
#include "plan/translate.h"

#include <stdlib.h>

enum { CONV_MAX_ND = 3 }; /* MLX convolves 1 to 3 spatial dimensions */

/* --- shared helpers ---------------------------------------------------------------------- */
/* perm moving axis 1 (channels) last: [0, 2, ..., rank-1, 1]; or back: [0, rank-1, 1, ...]. */
static void channels_perm(int rank, bool to_last, int *perm) {
  perm[0] = 0;
  for (int i = 1; i < rank; i++)
    perm[i] = to_last ? (i < rank - 1 ? i + 1 : 1) : (i == 1 ? rank - 1 : i - 1);
}

static int to_channels_last(tr_ctx *t, mx_array a, mx_array *out) {
  int perm[MX_MAX_RANK];
  channels_perm(mx_ndim(a), true, perm);
  return mx_transpose(t->mx, out, a, perm, mx_ndim(a));
}

static int to_channels_first(tr_ctx *t, mx_array a, mx_array *out) {
  int perm[MX_MAX_RANK];
  channels_perm(mx_ndim(a), false, perm);
  return mx_transpose(t->mx, out, a, perm, mx_ndim(a));
}

/* mx_conv of channels-last x with w [O, k..., I/groups]. MLX has no grouped 3-D convolution, so
 * there each group is convolved alone and the results are concatenated along channels; on the CPU
 * device grouped 1-D and 2-D convolutions are split the same way (cpu_conv_split_groups). The
 * CPU forms that take a prepared weight operand are chosen by the callers. */
static int conv_channels_last(tr_ctx *t, mx_array x, mx_array w, int nd,
                              const int *stride, const int *lo, const int *hi, const int *kdil,
                              const int *idil, int groups, bool flip, mx_array *y) {
  if (groups == 1 || (nd < 3 && !cpu_conv_split_groups(t, groups)))
    return mx_conv(t->mx, y, x, w, stride, lo, hi, kdil, idil, nd, groups, flip);
  int cin = mx_dim(x, -1) / groups, cout = mx_dim(w, 0) / groups;
  mx_array *parts = malloc(sizeof(mx_array) * (size_t)groups);
  if (!parts) return tr_fail(t, "out of memory");
  int rc = MX_OK;
  for (int g = 0; g < groups && rc == MX_OK; g++) {
    mx_array xg, wg;
    rc = tr_slice_axis(t, x, nd + 1, g * cin, (g + 1) * cin, &xg);
    if (rc == MX_OK) rc = tr_slice_axis(t, w, 0, g * cout, (g + 1) * cout, &wg);
    if (rc == MX_OK)
      rc = mx_conv(t->mx, &parts[g], xg, wg, stride, lo, hi, kdil, idil, nd, 1, flip);
  }
  if (rc == MX_OK) rc = mx_concatenate(t->mx, y, parts, (size_t)groups, nd + 1);
  if (rc == MX_OK) tr_note_path(t, TR_PATH_COMPOSED, "conv_by_group", 0, "group by group");
  free(parts);
  return rc;
}

/* Adds bias [M] (NULL: none) to the channels-last result, moves channels back and casts. */
static int finish(tr_ctx *t, mx_array y, mx_array bias) {
  if (bias) TR_TRY(mx_binary(t->mx, &y, MX_ADD, y, bias));
  TR_TRY(to_channels_first(t, y, &y));
  return tr_out_cast(t, 0, y);
}

/* Reads the window attributes at run time against the live shapes: nd from X, the kernel from W
 * (kernel_shape, when given, must agree), and the group count. */
static int conv_attrs(tr_ctx *t, const ir_node *n, mx_array x, mx_array w, win_attrs *wa,
                      int *groups) {
  int nd = mx_ndim(x) - 2;
  char err[160], a[64], b[64];
  if (nd < 1 || nd > CONV_MAX_ND)
    return tr_fail(t, "%s needs 1 to 3 spatial dimensions, X has rank %d", n->op_type, nd + 2);
  if (mx_ndim(w) != nd + 2)
    return tr_fail(t, "W has rank %d, X has rank %d", mx_ndim(w), nd + 2);
  if (!win_read(n, nd, wa, err, sizeof err)) return tr_fail(t, "%s", err);
  int64_t k[WIN_MAX_DIMS];
  for (int i = 0; i < nd; i++) k[i] = mx_dim(w, i + 2);
  for (int i = 0; i < nd; i++)
    if (wa->has_kernel && wa->kernel[i] != k[i])
      return tr_fail(t, "kernel_shape %s does not match W's spatial dims %s",
                     win_fmt(wa->kernel, nd, a, sizeof a), win_fmt(k, nd, b, sizeof b));
  for (int i = 0; i < nd; i++) wa->kernel[i] = k[i];
  int64_t g = ir_attr_int(n, "group", 1);
  /* with no input channels any group count splits them (into nothing): each output is then
   * the bias alone, as the spec's empty sums give and ORT's CPU kernels answer */
  if (g < 1 || (mx_dim(x, 1) > 0 && g > mx_dim(x, 1)))
    return tr_fail(t, "group %lld is out of range", (long long)g);
  *groups = (int)g;
  return MX_OK;
}

/* What both claims check: one element type, 1-3 spatial dims, valid window attributes, a 1-D
 * bias, kernel_shape agreeing with W (which supplies the kernel when it is absent), group >= 1. */
static bool claim_window(const ir_graph *g, const ir_node *n, win_attrs *wa, op_why why) {
  const ir_value *x = ir_input(g, n, 0), *w = ir_input(g, n, 1), *b = ir_input(g, n, 2);
  if (!op_all_same_type(g, n, why)) return false;
  const ir_attr *ks = ir_find_attr(n, "kernel_shape");
  int nd = x && x->rank >= 0 ? x->rank - 2
           : w && w->rank >= 0 ? w->rank - 2
           : ks && ks->count ? (int)ks->count : -1;
  if (nd == -1) return op_decline(why, "the rank of X and W is unknown");
  if (nd < 1 || nd > CONV_MAX_ND)
    return op_decline(why, "%s over %d spatial dimensions: MLX convolves 1 to 3", n->op_type, nd);
  if (w && w->rank >= 0 && w->rank != nd + 2)
    return op_decline(why, "W has rank %d, X has rank %d", w->rank, nd + 2);
  char err[160], s1[64], s2[64];
  if (!win_read(n, nd, wa, err, sizeof err)) return op_decline(why, "%s", err);
  if (b && b->rank >= 0 && b->rank != 1) return op_decline(why, "B has rank %d, not 1", b->rank);
  int64_t wk[WIN_MAX_DIMS];
  bool known = w && w->rank == nd + 2;
  for (int i = 0; i < nd; i++) {
    wk[i] = known ? w->dims[i + 2] : -1;
    known = known && wk[i] >= 0;
  }
  if (known && wa->has_kernel)
    for (int i = 0; i < nd; i++)
      if (wa->kernel[i] != wk[i])
        return op_decline(why, "kernel_shape %s does not match W's spatial dims %s",
                          win_fmt(wa->kernel, nd, s1, sizeof s1), win_fmt(wk, nd, s2, sizeof s2));
  if (!wa->has_kernel) {
    if (known)
      for (int i = 0; i < nd; i++) wa->kernel[i] = wk[i];
    else if (wa->auto_pad == WIN_SAME_UPPER || wa->auto_pad == WIN_SAME_LOWER)
      return op_decline(why, "auto_pad SAME needs the kernel shape: no kernel_shape and W's "
                             "shape is unknown");
  }
  if (ir_attr_int(n, "group", 1) < 1) return op_decline(why, "group must be at least 1");
  return true;
}

/* --- Conv -------------------------------------------------------------------------------- */
static bool claim_conv(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  win_attrs wa;
  if (!claim_window(g, n, &wa, why)) return false;
  const ir_value *x = ir_input(g, n, 0), *w = ir_input(g, n, 1);
  int64_t group = ir_attr_int(n, "group", 1);
  if (x && w && x->rank == wa.nd + 2 && w->rank == wa.nd + 2 && x->dims[1] >= 0 &&
      w->dims[1] >= 0 && w->dims[0] >= 0 &&
      (x->dims[1] != w->dims[1] * group || w->dims[0] % group))
    return op_decline(why, "X has %lld channels and W is [%lld, %lld, ...]: not valid for %lld "
                           "groups", (long long)x->dims[1], (long long)w->dims[0],
                      (long long)w->dims[1], (long long)group);
  if (wa.auto_pad == WIN_SAME_UPPER || wa.auto_pad == WIN_SAME_LOWER) {
    char s[64];
    for (int i = 0; i < wa.nd; i++)
      if (wa.dilation[i] != 1)
        return op_decline(why, "auto_pad SAME with dilations %s: ONNX Runtime's CPU kernel "
                               "rejects dilations with SAME padding",
                          win_fmt(wa.dilation, wa.nd, s, sizeof s));
    int64_t in[WIN_MAX_DIMS];
    for (int i = 0; i < wa.nd; i++) in[i] = x && x->rank == wa.nd + 2 ? x->dims[i + 2] : -1;
    if (win_same_may_go_negative(&wa, in))
      return op_decline(why, "auto_pad SAME with a kernel smaller than the stride may need "
                             "negative padding, where ONNX Runtime departs from the spec");
  }
  return true;
}

/* A convolution of a channels-last x holding no elements (an empty spatial dim that the pads
 * make up for, or no input channels): every output sums nothing, so it is zero (plus bias). */
static int empty_input_conv(tr_ctx *t, mx_array x, mx_array w, int nd, const int *stride,
                            const int *lo, const int *hi, const int *kdil, mx_array bias,
                            mx_array *y) {
  int shape[MX_MAX_RANK];
  shape[0] = mx_dim(x, 0), shape[nd + 1] = mx_dim(w, 0);
  for (int i = 0; i < nd; i++) {
    int extent = (mx_dim(w, i + 2) - 1) * kdil[i] + 1;
    shape[i + 1] = (mx_dim(x, i + 1) + lo[i] + hi[i] - extent) / stride[i] + 1;
  }
  mx_array zero;
  TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(x)));
  TR_TRY(mx_full(t->mx, y, shape, nd + 2, zero));
  return bias ? mx_binary(t->mx, y, MX_ADD, *y, bias) : MX_OK;
}

/* Conv's correlation of channels-first x by w under node n's window attributes, channels-last,
 * plus bias [M] when given; exported (ops/conv.h) for ConvInteger and QLinearConv. */
int conv_forward_channels_last(tr_ctx *t, const ir_node *n, mx_array x, mx_array w,
                               mx_array bias, mx_array *y) {
  win_attrs wa;
  int groups;
  TR_TRY(conv_attrs(t, n, x, w, &wa, &groups));
  int nd = wa.nd;
  if (mx_dim(x, 1) != mx_dim(w, 1) * groups || mx_dim(w, 0) % groups)
    return tr_fail(t, "X has %d channels and W is [%d, %d, ...]: not valid for %d groups",
                   mx_dim(x, 1), mx_dim(w, 0), mx_dim(w, 1), groups);
  int stride[CONV_MAX_ND], lo[CONV_MAX_ND], hi[CONV_MAX_ND], kdil[CONV_MAX_ND], idil[CONV_MAX_ND];
  for (int i = 0; i < nd; i++) {
    int64_t l = wa.pad_lo[i], h = wa.pad_hi[i];
    if (wa.auto_pad == WIN_SAME_UPPER || wa.auto_pad == WIN_SAME_LOWER)
      win_same_pads(mx_dim(x, i + 2), wa.stride[i], win_extent(&wa, i),
                    wa.auto_pad == WIN_SAME_UPPER, &l, &h);
    stride[i] = (int)wa.stride[i], kdil[i] = (int)wa.dilation[i], idil[i] = 1;
    lo[i] = (int)l, hi[i] = (int)h;
    /* ORT's CPU kernel computes (in + pads - extent) / stride + 1 in float, truncated, and
     * rejects an output dim below 1: any window that does not fit the padded input. */
    if (mx_dim(x, i + 2) + l + h < win_extent(&wa, i))
      return tr_fail(t, "invalid input shape: spatial dim %d is %d, with pads %lld + %lld the "
                        "kernel's extent %lld does not fit", i, mx_dim(x, i + 2), (long long)l,
                     (long long)h, (long long)win_extent(&wa, i));
  }
  TR_TRY(to_channels_last(t, x, &x));
  if (mx_size(x) == 0) /* MLX's convolution leaves such an output unwritten */
    return empty_input_conv(t, x, w, nd, stride, lo, hi, kdil, bias, y);
  bool own = w == tr_in(t, 1); /* Conv's own weight, not one ConvInteger/QLinearConv made */
  mx_array prepared = own ? tr_derived(t, 0) : NULL, form = own ? tr_derived(t, 1) : NULL;
  mx_array packed = own ? tr_derived(t, 2) : NULL;
  if (prepared) w = prepared;
  else TR_TRY(to_channels_last(t, w, &w)); /* no prepared weight: no form either */
  if (cpu_conv_depthwise_applies(t, x, w, nd, groups, lo, hi, idil, false))
    return cpu_conv_depthwise(t, x, w, form, bias, nd, stride, lo, hi, kdil, y);
  if (cpu_conv_pointwise_applies(t, x, w, nd, groups, lo, hi, idil, false))
    return cpu_conv_pointwise(t, x, w, form, packed, bias, nd, stride, y);
  if (cpu_conv_taps_gemm_applies(t, x, w, nd, groups, stride, lo, hi, idil, false))
    return cpu_conv_taps_gemm(t, x, w, form, bias, nd, lo, hi, kdil, y);
  if (cpu_conv_im2col_applies(t, x, w, nd, groups, lo, hi, idil, false))
    return cpu_conv_im2col(t, x, w, packed, bias, nd, stride, lo, hi, kdil, y);
  TR_TRY(conv_channels_last(t, x, w, nd, stride, lo, hi, kdil, idil, groups, false, y));
  return bias ? mx_binary(t->mx, y, MX_ADD, *y, bias) : MX_OK;
}

/* Keeps a prepared weight w (contiguous) in slot 0, its CPU form's operand in slot 1 and that
 * operand packed for the plugin's product in slot 2. */
static int keep_weight(tr_ctx *t, const ir_node *n, mx_array w, bool transposed) {
  mx_array form, packed;
  TR_TRY(mx_contiguous(t->mx, &w, w));
  TR_TRY(tr_keep_derived(t, 0, w));
  TR_TRY(cpu_conv_prepare(t, n, w, transposed, &form, &packed));
  if (packed) TR_TRY(tr_keep_derived(t, 2, packed));
  return form ? tr_keep_derived(t, 1, form) : MX_OK;
}

/* A constant Conv weight, transposed to channels-last once. */
static int prepare_conv(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  if (!tr_input_is_constant(t, 1)) return MX_OK;
  mx_array w;
  TR_TRY(to_channels_last(t, tr_in(t, 1), &w));
  return keep_weight(t, n, w, false);
}

static int translate_conv(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array y;
  TR_TRY(conv_forward_channels_last(t, n, tr_in(t, 0), tr_in(t, 1), tr_in(t, 2), &y));
  return finish(t, y, NULL);
}

/* --- ConvTranspose ----------------------------------------------------------------------- */
/* One spatial dimension of ConvTranspose: the output size and the leading crop `head` of the
 * full transposed convolution (length stride * (in - 1) + extent, then output_padding zeros). */
static void transpose_dim(const win_attrs *wa, int i, int64_t in, int64_t adj, int64_t out_attr,
                          int64_t *out, int64_t *head) {
  int64_t full = wa->stride[i] * (in - 1) + win_extent(wa, i);
  bool upper = wa->auto_pad == WIN_SAME_UPPER;
  if (out_attr > 0 || upper || wa->auto_pad == WIN_SAME_LOWER) {
    /* output_shape, or SAME (output in * stride): pads total full + adj - out, the odd one at
     * the end for SAME_UPPER and at the start otherwise. Beyond the full output: zeros. */
    int64_t want = out_attr > 0 ? out_attr : in * wa->stride[i];
    int64_t total = full + adj - want;
    if (total < 0) total = 0;
    *head = upper ? total / 2 : total - total / 2;
    *out = out_attr > 0 ? out_attr : full + adj - total;
  } else {
    *head = wa->pad_lo[i];
    *out = full + adj - wa->pad_lo[i] - wa->pad_hi[i];
  }
}

static bool claim_conv_transpose(const ir_graph *g, const ir_node *n, const op_row *r,
                                 op_why why) {
  (void)r;
  win_attrs wa;
  if (!claim_window(g, n, &wa, why)) return false;
  const ir_value *x = ir_input(g, n, 0), *w = ir_input(g, n, 1);
  int64_t group = ir_attr_int(n, "group", 1);
  if (x && w && x->rank == wa.nd + 2 && w->rank == wa.nd + 2 && x->dims[1] >= 0 &&
      w->dims[0] >= 0 && (x->dims[1] != w->dims[0] || x->dims[1] % group))
    return op_decline(why, "X has %lld channels and W is [%lld, ...]: not valid for %lld "
                           "groups", (long long)x->dims[1], (long long)w->dims[0],
                      (long long)group);
  const ir_attr *op = ir_find_attr(n, "output_padding"), *os = ir_find_attr(n, "output_shape");
  if (op && op->count && (op->type != IR_ATTR_INTS || op->count != (size_t)wa.nd))
    return op_decline(why, "output_padding needs %d integers", wa.nd);
  if (os && os->count &&
      (os->type != IR_ATTR_INTS ||
       (os->count != (size_t)wa.nd && os->count != (size_t)wa.nd + 2)))
    return op_decline(why, "output_shape needs %d (or %d) integers", wa.nd, wa.nd + 2);
  for (size_t i = 0; os && i < os->count; i++)
    if (os->ints[i] < 1) return op_decline(why, "output_shape has a value below 1");
  bool same = wa.auto_pad == WIN_SAME_UPPER || wa.auto_pad == WIN_SAME_LOWER;
  for (int i = 0; i < wa.nd; i++) {
    int64_t adj = op && op->count ? op->ints[i] : 0;
    if (adj < 0 || adj >= wa.stride[i])
      return op_decline(why, "output_padding %lld is not in [0, stride %lld) (ONNX Runtime "
                             "rejects it)", (long long)adj, (long long)wa.stride[i]);
    if (same && !(os && os->count) && wa.kernel[i] > 0 &&
        win_extent(&wa, i) + adj < wa.stride[i])
      return op_decline(why, "auto_pad SAME with a kernel extent plus output_padding below the "
                             "stride: ONNX Runtime's output is shorter than the spec's");
  }
  return true;
}

/* W [C, M/g, k...] -> [g, C/g, M/g, k...] -> [g, M/g, k..., C/g] -> [M, k..., C/g] */
static int regroup_transposed_weight(tr_ctx *t, mx_array w, int groups, mx_array *out) {
  int nd = mx_ndim(w) - 2, c = mx_dim(w, 0);
  int cg = c / groups, mg = mx_dim(w, 1), shape[MX_MAX_RANK], perm[MX_MAX_RANK];
  shape[0] = groups, shape[1] = cg, shape[2] = mg;
  for (int i = 0; i < nd; i++) shape[3 + i] = mx_dim(w, i + 2);
  TR_TRY(mx_reshape(t->mx, &w, w, shape, nd + 3));
  perm[0] = 0, perm[1] = 2, perm[nd + 2] = 1;
  for (int i = 0; i < nd; i++) perm[2 + i] = 3 + i;
  TR_TRY(mx_transpose(t->mx, &w, w, perm, nd + 3));
  shape[0] = groups * mg;
  for (int i = 0; i < nd; i++) shape[1 + i] = mx_dim(w, 2 + i);
  shape[nd + 1] = cg;
  return mx_reshape(t->mx, out, w, shape, nd + 2);
}

/* A constant ConvTranspose weight, regrouped into MLX's layout once. */
static int prepare_conv_transpose(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  int64_t groups = ir_attr_int(n, "group", 1);
  mx_array w = tr_in(t, 1);
  if (!tr_input_is_constant(t, 1) || groups < 1 || mx_dim(w, 0) % groups) return MX_OK;
  TR_TRY(regroup_transposed_weight(t, w, (int)groups, &w));
  return keep_weight(t, n, w, true);
}

/* ConvTranspose of an x holding no elements: every output sums nothing, so it is zero plus the
 * bias (MLX's convolution would leave such an output unwritten). W [C, M/group, k...]. */
static int transpose_of_empty(tr_ctx *t, mx_array x, mx_array w, int nd, int groups,
                              const int *out) {
  int shape[MX_MAX_RANK];
  shape[0] = mx_dim(x, 0), shape[nd + 1] = mx_dim(w, 1) * groups;
  for (int i = 0; i < nd; i++) shape[i + 1] = out[i];
  mx_array zero, y;
  TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(x)));
  TR_TRY(mx_full(t->mx, &y, shape, nd + 2, zero));
  return finish(t, y, tr_in(t, 2));
}

static int translate_conv_transpose(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), w = tr_in(t, 1), y;
  win_attrs wa;
  int groups;
  TR_TRY(conv_attrs(t, n, x, w, &wa, &groups));
  int nd = wa.nd, c = mx_dim(x, 1);
  if (mx_dim(w, 0) != c || c % groups)
    return tr_fail(t, "X has %d channels and W is [%d, ...]: not valid for %d groups", c,
                   mx_dim(w, 0), groups);
  const ir_attr *op = ir_find_attr(n, "output_padding"), *os = ir_find_attr(n, "output_shape");
  size_t os_skip = os && os->count == (size_t)nd + 2 ? 2 : 0;
  int ones[CONV_MAX_ND], lo[CONV_MAX_ND], hi[CONV_MAX_ND], kdil[CONV_MAX_ND], idil[CONV_MAX_ND];
  int crop[CONV_MAX_ND], out[CONV_MAX_ND], heads[CONV_MAX_ND];
  for (int i = 0; i < nd; i++) {
    int64_t in = mx_dim(x, i + 2), o, head;
    int64_t adj = op && op->type == IR_ATTR_INTS && op->count == (size_t)nd ? op->ints[i] : 0;
    int64_t os_i = os && os->type == IR_ATTR_INTS && os->count ? os->ints[os_skip + i] : 0;
    transpose_dim(&wa, i, in, adj, os_i, &o, &head);
    if (o < 1 || o > INT32_MAX)
      return tr_fail(t, "output size %lld along spatial axis %d", (long long)o, i);
    /* correlate the stride-dilated input (length L) padded by e - 1 - head low and
     * out + head - L high with the flipped kernel; negative padding is cropped afterwards */
    int64_t e = win_extent(&wa, i), l = e - 1 - head, h = o + head - (wa.stride[i] * (in - 1) + 1);
    ones[i] = 1, kdil[i] = (int)wa.dilation[i], idil[i] = (int)wa.stride[i];
    lo[i] = l > 0 ? (int)l : 0, hi[i] = h > 0 ? (int)h : 0;
    crop[i] = l < 0 ? (int)-l : 0, out[i] = (int)o, heads[i] = (int)head;
  }
  if (mx_size(x) == 0) /* no channels (or no batch): sums of nothing, the bias alone */
    return transpose_of_empty(t, x, w, nd, groups, out);
  mx_array prepared = tr_derived(t, 0), form = tr_derived(t, 1);
  if (prepared) w = prepared;
  else TR_TRY(regroup_transposed_weight(t, w, groups, &w));
  TR_TRY(to_channels_last(t, x, &x));
  if (cpu_conv_transpose_applies(t, x, w, nd, groups, wa.stride, wa.dilation)) {
    TR_TRY(cpu_conv_transpose(t, x, w, form, nd, heads, out, &y));
    return finish(t, y, tr_in(t, 2));
  }
  TR_TRY(conv_channels_last(t, x, w, nd, ones, lo, hi, kdil, idil, groups, true, &y));
  for (int i = 0; i < nd; i++)
    if (crop[i] || mx_dim(y, i + 1) != out[i])
      TR_TRY(tr_slice_axis(t, y, i + 1, crop[i], crop[i] + out[i], &y));
  return finish(t, y, tr_in(t, 2));
}

#define CONV_NOTE "1-3 spatial dims; constant weights put in MLX's layout once at plan build"

const op_row ops_conv_rows[] = {
    {"", "Conv", 1, 10, claim_conv, translate_conv, OP_SHAPE_KEYED, OP_FLOATS, 0,
     CONV_NOTE "; SAME pads to ceil(in/stride) as in opset 11; SAME with dilations declined",
     NULL, prepare_conv},
    {"", "Conv", 11, 22, claim_conv, translate_conv, OP_SHAPE_KEYED, OP_FLOATS, 0,
     CONV_NOTE "; SAME with dilations declined (ONNX Runtime rejects it)", NULL, prepare_conv},
    {"", "ConvTranspose", 1, 10, claim_conv_transpose, translate_conv_transpose, OP_SHAPE_KEYED,
     OP_FLOATS, 0,
     CONV_NOTE "; output_shape pads split as in opset 11; output_padding must be below the stride",
     NULL, prepare_conv_transpose},
    {"", "ConvTranspose", 11, 22, claim_conv_transpose, translate_conv_transpose,
     OP_SHAPE_KEYED, OP_FLOATS, 0, CONV_NOTE "; output_padding must be below the stride", NULL,
     prepare_conv_transpose},
    OP_ROWS_END,
};
