/*
 * Assorted neural-network operators: RotaryEmbedding (23), NegativeLogLikelihoodLoss (12-22),
 * SoftmaxCrossEntropyLoss (12-13) and MaxRoiPool (1-22); the later since-versions of each only
 * widen the type constraints. All compose in float32 (half inputs widened, results rounded once
 * to the declared type). RotaryEmbedding works in (batch, seq, heads, head) layout as the ONNX
 * function does: 4-D inputs are transposed in and out, 3-D inputs split their hidden axis by
 * num_heads; the rotated part is sliced off by rotary_embedding_dim, so the row is shape-keyed.
 * The losses gather the picked class with take_along_axis over axis 1 (ignored targets map to
 * class 0 and get weight 0) and reduce over all axes, depending on ranks only; "mean" divides by
 * the sum of the picked weights (the count of non-ignored targets without weights).
 * SoftmaxCrossEntropyLoss is the same loss over log-softmax(scores, axis 1). MaxRoiPool builds
 * per-ROI bin masks over H and W (std::round'ed, clamped corners as in the Caffe/ONNX Runtime
 * kernel) and takes masked maxima in two passes; empty bins give 0. It reads H and W, so it is
 * shape-keyed.
 */
#include "ops/families.h"
#include "ops/llm.h"
#include "plan/translate.h"

#include <math.h>
#include <string.h>

/* --- shared helpers ---------------------------------------------------------------------- */
static int to_f32(tr_ctx *t, mx_array *a) {
  if (*a && mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* A value's static rank, or -1 when unknown (rank 0 counts as unknown: see norm.c). */
static int rank_of(const ir_value *v) { return v && v->rank > 0 ? v->rank : -1; }

/* Inputs [from, to) that are present share input 0's element type. */
static bool same_float_type(const ir_graph *g, const ir_node *n, int from, int to, op_why why) {
  const ir_value *x = ir_input(g, n, 0);
  for (int i = from; i < to; i++) {
    const ir_value *v = ir_input(g, n, i);
    if (x && v && v->elem_type != x->elem_type)
      return op_decline(why, "%s input %d has element type %s, unlike input 0's %s", n->op_type,
                        i, ir_elem_name(v->elem_type), ir_elem_name(x->elem_type));
  }
  return true;
}

/* Slice along one axis [start, stop) with a step; other axes whole. */
static int slice_axis(tr_ctx *t, mx_array a, int axis, int start, int stop, int step,
                      mx_array *out) {
  int nd = mx_ndim(a), lo[MX_MAX_RANK], hi[MX_MAX_RANK], st[MX_MAX_RANK];
  for (int i = 0; i < nd; i++) lo[i] = 0, hi[i] = mx_dim(a, i), st[i] = 1;
  lo[axis] = start, hi[axis] = stop, st[axis] = step;
  return mx_slice(t->mx, out, a, lo, hi, st, nd);
}

/* --- RotaryEmbedding --------------------------------------------------------------------- */
static bool claim_rotary(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  int rank = rank_of(ir_input(g, n, 0));
  if (rank > 0 && rank != 3 && rank != 4)
    return op_decline(why, "RotaryEmbedding input of rank %d is not supported (3 or 4)", rank);
  if (rank == 3 && ir_attr_int(n, "num_heads", 0) <= 0)
    return op_decline(why, "RotaryEmbedding with a 3-D input needs a positive num_heads "
                           "attribute to split the hidden axis");
  int64_t rot = ir_attr_int(n, "rotary_embedding_dim", 0);
  if (rot < 0 || rot % 2)
    return op_decline(why, "RotaryEmbedding rotary_embedding_dim %lld must be even and >= 0",
                      (long long)rot);
  return same_float_type(g, n, 1, 3, why);
}

static int translate_rotary(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), cosc = tr_in(t, 1), sinc = tr_in(t, 2), pos = tr_in(t, 3);
  int rank = mx_ndim(x);
  if (rank != 3 && rank != 4) return tr_fail(t, "RotaryEmbedding input must be 3-D or 4-D");
  int b = mx_dim(x, 0), s, h, d;
  if (rank == 4) {
    static const int perm[4] = {0, 2, 1, 3};
    h = mx_dim(x, 1), s = mx_dim(x, 2), d = mx_dim(x, 3);
    TR_TRY(mx_transpose(t->mx, &x, x, perm, 4));
  } else {
    int64_t nh = ir_attr_int(n, "num_heads", 0);
    s = mx_dim(x, 1);
    if (nh <= 0 || mx_dim(x, 2) % nh)
      return tr_fail(t, "hidden size %d is not divisible by num_heads %lld", mx_dim(x, 2),
                     (long long)nh);
    h = (int)nh, d = mx_dim(x, 2) / h;
    int shape[4] = {b, s, h, d};
    TR_TRY(mx_reshape(t->mx, &x, x, shape, 4));
  }
  int rot = (int)ir_attr_int(n, "rotary_embedding_dim", 0);
  if (rot == 0) rot = d;
  if (rot > d || rot % 2)
    return tr_fail(t, "rotary_embedding_dim %d must be even and at most the head size %d", rot, d);
  int half = rot / 2;
  TR_TRY(to_f32(t, &x));
  TR_TRY(to_f32(t, &cosc));
  TR_TRY(to_f32(t, &sinc));
  if (pos) {
    if (mx_ndim(cosc) != 2 || mx_ndim(sinc) != 2)
      return tr_fail(t, "with position_ids, cos_cache and sin_cache must be 2-D");
    TR_TRY(mx_take(t->mx, &cosc, cosc, pos, 0));
    TR_TRY(mx_take(t->mx, &sinc, sinc, pos, 0));
  } else if (mx_ndim(cosc) != 3 || mx_ndim(sinc) != 3) {
    return tr_fail(t, "without position_ids, cos_cache and sin_cache must be 3-D");
  }
  if (mx_dim(cosc, -1) < half || mx_dim(sinc, -1) < half)
    return tr_fail(t, "cos_cache/sin_cache last dimension is below rotary_embedding_dim / 2 (%d)",
                   half);
  static const int ax2[1] = {2};
  TR_TRY(slice_axis(t, cosc, 2, 0, half, 1, &cosc));
  TR_TRY(slice_axis(t, sinc, 2, 0, half, 1, &sinc));
  TR_TRY(mx_expand_dims(t->mx, &cosc, cosc, ax2, 1));
  TR_TRY(mx_expand_dims(t->mx, &sinc, sinc, ax2, 1));

  mx_array y;
  TR_TRY(llm_rope_apply(t, x, cosc, sinc, rot, ir_attr_int(n, "interleaved", 0) != 0, &y));
  if (rank == 4) {
    static const int perm[4] = {0, 2, 1, 3};
    TR_TRY(mx_transpose(t->mx, &y, y, perm, 4));
  } else {
    int shape[3] = {b, s, h * d};
    TR_TRY(mx_reshape(t->mx, &y, y, shape, 3));
  }
  return tr_out_cast(t, 0, y);
}

/* --- NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss ------------------------------- */
typedef enum loss_reduction { LOSS_NONE, LOSS_SUM, LOSS_MEAN, LOSS_BAD } loss_reduction;

static loss_reduction reduction_of(const ir_node *n) {
  const char *s = ir_attr_string(n, "reduction", "mean");
  if (!strcmp(s, "none")) return LOSS_NONE;
  if (!strcmp(s, "sum")) return LOSS_SUM;
  if (!strcmp(s, "mean")) return LOSS_MEAN;
  return LOSS_BAD;
}

static bool claim_loss(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (reduction_of(n) == LOSS_BAD)
    return op_decline(why, "%s reduction '%s' is not one of none, sum, mean", n->op_type,
                      ir_attr_string(n, "reduction", "mean"));
  int rank = rank_of(ir_input(g, n, 0));
  if (rank > 0 && rank < 2)
    return op_decline(why, "%s input of rank %d has no class axis (rank >= 2 needed)",
                      n->op_type, rank);
  return same_float_type(g, n, 2, 3, why);
}

/* The loss over log-probabilities lp (N, C, d...) float32 and integer targets (N, d...),
 * optional weight (C). Sets output 0. */
static int nll(tr_ctx *t, const ir_node *n, mx_array lp, mx_array target, mx_array weight) {
  int rank = mx_ndim(lp);
  if (rank < 2 || mx_ndim(target) != rank - 1)
    return tr_fail(t, "%s wants input (N, C, ...) and target (N, ...) of one rank less",
                   n->op_type);
  const ir_attr *ia = ir_find_attr(n, "ignore_index");
  mx_array mask = NULL, idx = target, picked, w = NULL, loss;
  if (mx_dtype_of(idx) != MX_INT32 && mx_dtype_of(idx) != MX_INT64)
    TR_TRY(mx_astype(t->mx, &idx, idx, MX_INT64));
  if (ia) {
    mx_array ii, zero;
    TR_TRY(mx_scalar_int(t->mx, &ii, ia->i, mx_dtype_of(idx)));
    TR_TRY(mx_scalar_int(t->mx, &zero, 0, mx_dtype_of(idx)));
    TR_TRY(mx_binary(t->mx, &mask, MX_NOT_EQUAL, idx, ii));
    TR_TRY(mx_where(t->mx, &idx, mask, idx, zero));
  }
  static const int ax1[1] = {1};
  mx_array e;
  TR_TRY(mx_expand_dims(t->mx, &e, idx, ax1, 1));
  TR_TRY(mx_take_along_axis(t->mx, &picked, lp, e, 1));
  TR_TRY(mx_squeeze(t->mx, &picked, picked, ax1, 1));
  TR_TRY(mx_unary(t->mx, &loss, MX_NEG, picked));
  if (weight) {
    TR_TRY(to_f32(t, &weight));
    TR_TRY(mx_take(t->mx, &w, weight, idx, 0));
  }
  if (mask) {
    mx_array m;
    TR_TRY(mx_astype(t->mx, &m, mask, MX_FLOAT32));
    if (w)
      TR_TRY(mx_binary(t->mx, &w, MX_MULTIPLY, w, m));
    else
      w = m;
  }
  if (w) TR_TRY(mx_binary(t->mx, &loss, MX_MULTIPLY, loss, w));
  loss_reduction red = reduction_of(n);
  if (red == LOSS_NONE) return tr_out_cast(t, 0, loss);
  int axes[MX_MAX_RANK], k = rank - 1;
  for (int i = 0; i < k; i++) axes[i] = i;
  TR_TRY(mx_reduce(t->mx, &loss, MX_SUM, loss, axes, k, false));
  if (red == LOSS_MEAN) {
    mx_array den;
    if (w)
      TR_TRY(mx_reduce(t->mx, &den, MX_SUM, w, axes, k, false));
    else
      TR_TRY(mx_number_of_elements(t->mx, &den, idx, axes, k, MX_FLOAT32));
    TR_TRY(mx_binary(t->mx, &loss, MX_DIVIDE, loss, den));
  }
  return tr_out_cast(t, 0, loss);
}

static int translate_nll(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0);
  TR_TRY(to_f32(t, &x));
  return nll(t, n, x, tr_in(t, 1), tr_in(t, 2));
}

static int translate_sce(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), lse, lp;
  if (mx_ndim(x) < 2) return tr_fail(t, "SoftmaxCrossEntropyLoss scores need rank >= 2");
  static const int ax1[1] = {1};
  TR_TRY(to_f32(t, &x));
  TR_TRY(mx_reduce(t->mx, &lse, MX_LOGSUMEXP, x, ax1, 1, true));
  TR_TRY(mx_binary(t->mx, &lp, MX_SUBTRACT, x, lse));
  TR_TRY(nll(t, n, lp, tr_in(t, 1), tr_in(t, 2)));
  return tr_out_cast(t, 1, lp); /* an omitted log_prob is skipped */
}

/* --- MaxRoiPool -------------------------------------------------------------------------- */
static bool claim_max_roi_pool(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  const ir_attr *ps = ir_find_attr(n, "pooled_shape");
  if (!ps || ps->type != IR_ATTR_INTS || ps->count != 2 || ps->ints[0] <= 0 || ps->ints[1] <= 0)
    return op_decline(why, "MaxRoiPool needs pooled_shape of two positive integers");
  int rank = rank_of(ir_input(g, n, 0));
  if (rank > 0 && rank != 4)
    return op_decline(why, "MaxRoiPool input of rank %d is not supported (4-D only)", rank);
  return same_float_type(g, n, 1, 2, why);
}

/* std::round: halves away from zero. */
static int round_away(tr_ctx *t, mx_array a, mx_array *out) {
  mx_array sg, ab, half;
  TR_TRY(tr_scalar(t, &half, 0.5, MX_FLOAT32));
  TR_TRY(mx_unary(t->mx, &sg, MX_SIGN, a));
  TR_TRY(mx_unary(t->mx, &ab, MX_ABS, a));
  TR_TRY(mx_binary(t->mx, &ab, MX_ADD, ab, half));
  TR_TRY(mx_unary(t->mx, &ab, MX_FLOOR, ab));
  return mx_binary(t->mx, out, MX_MULTIPLY, sg, ab);
}

/* For one spatial axis of length len and `pooled` bins: per-ROI start/end in roi coordinates
 * (lo, hi: (R,)), the bin masks (R, pooled, len) and bin emptiness (R, pooled). */
static int roi_bins(tr_ctx *t, mx_array lo, mx_array hi, int pooled, int len, mx_array *mask,
                    mx_array *empty) {
  mx_array one, zero, lim, size, bin, p, p1, start, end, pos;
  static const int ax1[1] = {1}, ax2[1] = {2};
  TR_TRY(tr_scalar(t, &one, 1, MX_FLOAT32));
  TR_TRY(tr_scalar(t, &zero, 0, MX_FLOAT32));
  TR_TRY(tr_scalar(t, &lim, len, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &size, MX_SUBTRACT, hi, lo));
  TR_TRY(mx_binary(t->mx, &size, MX_ADD, size, one));
  TR_TRY(mx_binary(t->mx, &size, MX_MAXIMUM, size, one));
  TR_TRY(tr_scalar(t, &bin, pooled, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &bin, MX_DIVIDE, size, bin));
  TR_TRY(mx_expand_dims(t->mx, &bin, bin, ax1, 1)); /* (R, 1) */
  TR_TRY(mx_expand_dims(t->mx, &lo, lo, ax1, 1));
  TR_TRY(mx_arange(t->mx, &p, 0, pooled, 1, MX_FLOAT32));
  TR_TRY(mx_binary(t->mx, &p1, MX_ADD, p, one));
  TR_TRY(mx_binary(t->mx, &start, MX_MULTIPLY, p, bin));
  TR_TRY(mx_unary(t->mx, &start, MX_FLOOR, start));
  TR_TRY(mx_binary(t->mx, &end, MX_MULTIPLY, p1, bin));
  TR_TRY(mx_unary(t->mx, &end, MX_CEIL, end));
  TR_TRY(mx_binary(t->mx, &start, MX_ADD, start, lo));
  TR_TRY(mx_binary(t->mx, &end, MX_ADD, end, lo));
  TR_TRY(mx_clip(t->mx, &start, start, zero, lim)); /* (R, pooled) */
  TR_TRY(mx_clip(t->mx, &end, end, zero, lim));
  TR_TRY(mx_binary(t->mx, empty, MX_LESS_EQUAL, end, start));
  TR_TRY(mx_expand_dims(t->mx, &start, start, ax2, 1));
  TR_TRY(mx_expand_dims(t->mx, &end, end, ax2, 1));
  TR_TRY(mx_arange(t->mx, &pos, 0, len, 1, MX_FLOAT32));
  mx_array ge, lt;
  TR_TRY(mx_binary(t->mx, &ge, MX_GREATER_EQUAL, pos, start));
  TR_TRY(mx_binary(t->mx, &lt, MX_LESS, pos, end));
  return mx_binary(t->mx, mask, MX_LOGICAL_AND, ge, lt);
}

static int translate_max_roi_pool(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), rois = tr_in(t, 1);
  if (mx_ndim(x) != 4) return tr_fail(t, "MaxRoiPool input must be 4-D (N, C, H, W)");
  if (mx_ndim(rois) != 2 || mx_dim(rois, 1) != 5)
    return tr_fail(t, "MaxRoiPool rois must be (num_rois, 5)");
  const ir_attr *ps = ir_find_attr(n, "pooled_shape");
  if (!ps || ps->count != 2) return tr_fail(t, "MaxRoiPool needs pooled_shape");
  int ph = (int)ps->ints[0], pw = (int)ps->ints[1], hh = mx_dim(x, 2), ww = mx_dim(x, 3);
  float scale = ir_attr_float(n, "spatial_scale", 1.0f);
  TR_TRY(to_f32(t, &x));
  TR_TRY(to_f32(t, &rois));
  static const int ax1[1] = {1};
  mx_array col[5], sc;
  TR_TRY(tr_scalar(t, &sc, scale, MX_FLOAT32));
  for (int i = 0; i < 5; i++) {
    TR_TRY(slice_axis(t, rois, 1, i, i + 1, 1, &col[i]));
    TR_TRY(mx_squeeze(t->mx, &col[i], col[i], ax1, 1));
    if (i > 0) {
      TR_TRY(mx_binary(t->mx, &col[i], MX_MULTIPLY, col[i], sc));
      TR_TRY(round_away(t, col[i], &col[i]));
    }
  }
  mx_array bidx, xg, mh, eh, mw, ew, ninf, zero, v;
  TR_TRY(mx_astype(t->mx, &bidx, col[0], MX_INT32));
  TR_TRY(mx_take(t->mx, &xg, x, bidx, 0)); /* (R, C, H, W) */
  TR_TRY(roi_bins(t, col[2], col[4], ph, hh, &mh, &eh)); /* (R, PH, H), (R, PH) */
  TR_TRY(roi_bins(t, col[1], col[3], pw, ww, &mw, &ew)); /* (R, PW, W), (R, PW) */
  TR_TRY(tr_scalar(t, &ninf, -INFINITY, MX_FLOAT32));
  TR_TRY(tr_scalar(t, &zero, 0, MX_FLOAT32));
  /* Over W: (R, C, H, 1, W) against (R, 1, 1, PW, W) -> (R, C, H, PW). */
  static const int a3[1] = {3}, a12[2] = {1, 2}, a2[1] = {2}, a14[2] = {1, 4};
  TR_TRY(mx_expand_dims(t->mx, &v, xg, a3, 1));
  TR_TRY(mx_expand_dims(t->mx, &mw, mw, a12, 2));
  TR_TRY(mx_where(t->mx, &v, mw, v, ninf));
  static const int r4[1] = {4}, r3[1] = {3};
  TR_TRY(mx_reduce(t->mx, &v, MX_MAX, v, r4, 1, false));
  /* Over H: (R, C, 1, H, PW) against (R, 1, PH, H, 1) -> (R, C, PH, PW). */
  TR_TRY(mx_expand_dims(t->mx, &v, v, a2, 1));
  TR_TRY(mx_expand_dims(t->mx, &mh, mh, a14, 2));
  TR_TRY(mx_where(t->mx, &v, mh, v, ninf));
  TR_TRY(mx_reduce(t->mx, &v, MX_MAX, v, r3, 1, false));
  /* Empty bins: (R, PH, 1) | (R, 1, PW) -> (R, 1, PH, PW). */
  mx_array empty;
  TR_TRY(mx_expand_dims(t->mx, &eh, eh, a2, 1));
  TR_TRY(mx_expand_dims(t->mx, &ew, ew, ax1, 1));
  TR_TRY(mx_binary(t->mx, &empty, MX_LOGICAL_OR, eh, ew));
  TR_TRY(mx_expand_dims(t->mx, &empty, empty, ax1, 1));
  TR_TRY(mx_where(t->mx, &v, empty, zero, v));
  return tr_out_cast(t, 0, v);
}

const op_row ops_misc_nn_rows[] = {
    {"", "RotaryEmbedding", 23, 23, claim_rotary, translate_rotary, OP_SHAPE_KEYED, OP_FLOATS, 0,
     "3-D input needs num_heads; slices by rotary_embedding_dim (shape-keyed)", NULL},
    {"", "NegativeLogLikelihoodLoss", 12, 22, claim_loss, translate_nll, OP_SHAPELESS, OP_FLOATS,
     0, "later versions only widen types", NULL},
    {"", "SoftmaxCrossEntropyLoss", 12, 13, claim_loss, translate_sce, OP_SHAPELESS, OP_FLOATS, 0,
     "later versions only widen types", NULL},
    {"", "MaxRoiPool", 1, 22, claim_max_roi_pool, translate_max_roi_pool, OP_SHAPE_KEYED,
     OP_FLOATS, 0, "bin masks over H and W (shape-keyed)", NULL},
    OP_ROWS_END,
};
