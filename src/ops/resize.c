/*
 * Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9). Every mode ONNX Runtime implements is
 * separable, so each resized axis is interpolated on its own, one after another: the output
 * positions of an axis map to a few input taps (1 for nearest, 2 for linear, 4 for cubic, a
 * window for antialiased linear/cubic) with weights, all computed on the host from the concrete
 * input and output lengths and the attributes, then applied as gathers (take) of precomputed
 * index arrays, scaled and summed. The host arithmetic mirrors ONNX Runtime's kernels in float32
 * operation for operation (coordinate transforms, nearest rounding, the scale == 1 identity,
 * clamping, Keys' cubic coefficients and exclude_outside, Pillow-style antialias filters), so
 * nearest indices agree exactly. tf_crop_and_resize's extrapolation is a mask over the output
 * (a position outside [0, length - 1] on any axis takes extrapolation_value). Output lengths
 * come from scales (floor of scale * length) or sizes (with keep_aspect_ratio_policy and axes
 * from opset 18). An output equal in shape to X is X, as ONNX Runtime returns it. Linear and
 * cubic work in float32 (half inputs widened, rounded once) and are declined for integer types,
 * whose ONNX Runtime kernels truncate float sums; nearest is a pure gather of any type. Axes
 * whose plan is periodic (an integer growth or shrink factor: the same taps and weights for every
 * phase of the output, up to edge clamping) become strided slices of the edge-extended input
 * interleaved by a reshape, and nearest repetitions a broadcast, avoiding gathers, which MLX's
 * CPU backend runs several times slower. The host side (attributes, plans) is resize_plan.c. The
 * rows are shape-keyed; scales, sizes and roi are read on the host, which costs nothing when they
 * are constants (the usual case) and makes the group run eagerly when they are computed.
 */
#include "ops/families.h"
#include "ops/resize_plan.h"
#include "plan/translate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { RS_UPSAMPLE_ATTR = 7, RS_UPSAMPLE = 9 }; /* row codes below 10: Upsample */

/* --- applying the plans ------------------------------------------------------------------ */
/* A host vector of `count` values shaped (count, 1, ..., 1) to broadcast at axis of rank. */
static int column(tr_ctx *t, const void *data, int count, int axis, int rank, mx_dtype d,
                  mx_array *out) {
  int shape[MX_MAX_RANK];
  shape[0] = count;
  for (int i = 1; i < rank - axis; i++) shape[i] = 1;
  return mx_from_data(t->mx, out, data, shape, rank - axis, d);
}

/* Each input element repeated f times along axis: broadcast a new axis and merge it. */
static int repeat_axis(tr_ctx *t, mx_array x, int axis, int f, mx_array *out) {
  int rank = mx_ndim(x), shape[MX_MAX_RANK + 1], merged[MX_MAX_RANK], ax1 = axis + 1;
  mx_array e;
  TR_TRY(mx_expand_dims(t->mx, &e, x, &ax1, 1));
  for (int i = 0; i <= rank; i++) shape[i] = mx_dim(e, i);
  shape[ax1] = f;
  TR_TRY(mx_broadcast_to(t->mx, &e, e, shape, rank + 1));
  for (int i = 0; i < rank; i++) merged[i] = mx_dim(x, i);
  merged[axis] *= f;
  return mx_reshape(t->mx, out, e, merged, rank);
}

/* x extended along axis by lo copies of its first element and hi of its last. */
static int extend_edges(tr_ctx *t, mx_array x, int axis, int lo, int hi, mx_array *out) {
  int rank = mx_ndim(x), n = mx_dim(x, axis), start[MX_MAX_RANK] = {0}, stop[MX_MAX_RANK],
      step[MX_MAX_RANK], shape[MX_MAX_RANK];
  mx_array parts[3];
  size_t count = 0;
  for (int i = 0; i < rank; i++) stop[i] = shape[i] = mx_dim(x, i), step[i] = 1;
  for (int side = 0; side < 2; side++) {
    int copies = side ? hi : lo;
    if (side) parts[count++] = x;
    if (!copies) continue;
    start[axis] = side ? n - 1 : 0;
    stop[axis] = start[axis] + 1;
    shape[axis] = copies;
    TR_TRY(mx_slice(t->mx, &parts[count], x, start, stop, step, rank));
    TR_TRY(mx_broadcast_to(t->mx, &parts[count], parts[count], shape, rank));
    count++;
  }
  return mx_concatenate(t->mx, out, parts, count, axis);
}

/* A periodic plan (see rs_find_periodic) as strided slices of the edge-extended input, scaled
 * by scalar weights, one result per phase, interleaved by a reshape. */
static int apply_periodic(tr_ctx *t, mx_array x, int axis, const rs_periodic *q,
                          mx_array *out) {
  int rank = mx_ndim(x), start[MX_MAX_RANK] = {0}, stop[MX_MAX_RANK], step[MX_MAX_RANK],
      shape[MX_MAX_RANK];
  mx_array xp = x, phases[RS_MAX_PHASES], tap, w;
  if (q->lo || q->hi) TR_TRY(extend_edges(t, x, axis, q->lo, q->hi, &xp));
  for (int i = 0; i < rank; i++) stop[i] = mx_dim(xp, i), step[i] = 1;
  step[axis] = q->g;
  for (int r = 0; r < q->f; r++) {
    phases[r] = NULL;
    for (int j = 0; j < q->count[r]; j++) {
      start[axis] = q->d[r][j] + q->lo;
      stop[axis] = start[axis] + (q->n - 1) * q->g + 1;
      TR_TRY(mx_slice(t->mx, &tap, xp, start, stop, step, rank));
      if (q->count[r] > 1 || q->w[r][j] != 1.0f) {
        TR_TRY(tr_scalar(t, &w, q->w[r][j], mx_dtype_of(x)));
        TR_TRY(mx_binary(t->mx, &tap, MX_MULTIPLY, tap, w));
      }
      if (phases[r]) TR_TRY(mx_binary(t->mx, &phases[r], MX_ADD, phases[r], tap));
      else phases[r] = tap;
    }
    if (!phases[r]) return tr_fail(t, "an output position reads no input");
    if (q->f > 1) {
      int ax1 = axis + 1;
      TR_TRY(mx_expand_dims(t->mx, &phases[r], phases[r], &ax1, 1));
    }
  }
  if (q->f == 1) return *out = phases[0], MX_OK;
  mx_array y;
  TR_TRY(mx_concatenate(t->mx, &y, phases, (size_t)q->f, axis + 1));
  for (int i = 0; i < rank; i++) shape[i] = mx_dim(x, i);
  shape[axis] = q->n * q->f;
  return mx_reshape(t->mx, out, y, shape, rank);
}

/* One axis: a repetition, a periodic plan, or else one gather per tap, weighted and summed. */
static int apply_axis(tr_ctx *t, mx_array x, int axis, const rs_plan *p, mx_array *out) {
  int rank = mx_ndim(x), f = rs_repeat_factor(p, mx_dim(x, axis));
  if (f) return repeat_axis(t, x, axis, f, out);
  rs_periodic q;
  if (rs_find_periodic(p, mx_dim(x, axis), &q)) return apply_periodic(t, x, axis, &q, out);
  mx_array acc = NULL, idx, g, w;
  int one = p->out;
  for (int k = 0; k < p->taps; k++) {
    TR_TRY(mx_from_data(t->mx, &idx, p->idx + (size_t)k * p->out, &one, 1, MX_INT32));
    TR_TRY(mx_take(t->mx, &g, x, idx, axis));
    if (p->w) {
      TR_TRY(column(t, p->w + (size_t)k * p->out, p->out, axis, rank, MX_FLOAT32, &w));
      TR_TRY(mx_binary(t->mx, &g, MX_MULTIPLY, g, w));
    }
    if (acc) TR_TRY(mx_binary(t->mx, &acc, MX_ADD, acc, g));
    else acc = g;
  }
  *out = acc;
  return MX_OK;
}

/* --- reading scales, sizes and roi ------------------------------------------------------- */
static bool has_values(tr_ctx *t, int i) {
  return i >= 0 && i < t->node->n_inputs && tr_in(t, i) && mx_size(tr_in(t, i)) > 0;
}

/* A float input read on the host (free for constants; a computed one makes the group eager). */
static int host_floats(tr_ctx *t, int i, float *vals, size_t cap, size_t *count) {
  mx_array a = tr_in(t, i);
  size_t n = mx_size(a);
  if (n > cap) return tr_fail(t, "input %d has %zu values, at most %zu expected", i, n, cap);
  if (!tr_input_is_constant(t, i)) t->host_reads++;
  if (mx_dtype_of(a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, &a, a, MX_FLOAT32));
  *count = n;
  return n ? mx_copy_to_host(t->mx, a, vals, n * sizeof(float)) : MX_OK;
}

/* Spreads values given for a->axes (or every axis) over all rank axes; others get `fill`. */
static int spread(tr_ctx *t, const rs_attrs *a, const char *what, const float *v, size_t n,
                  int rank, float fill, float *out) {
  size_t want = a->naxes ? (size_t)a->naxes : (size_t)rank;
  if (n != want)
    return tr_fail(t, "%s has %zu values, %zu expected", what, n, want);
  for (int i = 0; i < rank; i++) out[i] = a->naxes ? fill : v[i];
  for (int i = 0; i < a->naxes; i++) out[a->axes[i]] = v[i];
  return MX_OK;
}

/* Output lengths and per-axis scales, as ONNX Runtime derives them. */
static int output_shape(tr_ctx *t, const ir_node *n, const rs_attrs *a, const int *in, int rank,
                        int *out, float *scales) {
  float v[MX_MAX_RANK];
  size_t count;
  if (a->scales_in < 0 || has_values(t, a->scales_in)) {
    if (a->scales_in < 0) {
      const ir_attr *s = ir_find_attr(n, "scales");
      if (!s || s->type != IR_ATTR_FLOATS || s->count != (size_t)rank)
        return tr_fail(t, "the scales attribute needs %d values", rank);
      memcpy(v, s->floats, sizeof(float) * (size_t)rank);
      count = (size_t)rank;
    } else {
      if (a->sizes_in >= 0 && has_values(t, a->sizes_in))
        return tr_fail(t, "only one of scales and sizes may be given");
      TR_TRY(host_floats(t, a->scales_in, v, MX_MAX_RANK, &count));
    }
    TR_TRY(spread(t, a, "scales", v, count, rank, 1.0f, scales));
    for (int i = 0; i < rank; i++) {
      if (!(scales[i] > 0) || (a->upsample && !(scales[i] >= 1)))
        return tr_fail(t, "scale %g is not %s", scales[i], a->upsample ? ">= 1" : "> 0");
      if (!isfinite(scales[i])) return tr_fail(t, "scale %g is not finite", scales[i]);
      /* checked before the conversion, which is undefined for values an int64 cannot hold */
      float length = scales[i] * (float)in[i];
      if (!(length < (float)INT32_MAX))
        return tr_fail(t, "scale %g makes axis %d longer than MLX's shapes hold", scales[i], i);
      out[i] = (int)(int64_t)length;
    }
    return MX_OK;
  }
  if (a->sizes_in < 0 || !has_values(t, a->sizes_in))
    return tr_fail(t, "either scales or sizes must be given");
  int64_t sz[MX_MAX_RANK];
  TR_TRY(tr_host_ints(t, a->sizes_in, sz, MX_MAX_RANK, &count));
  size_t want = a->naxes ? (size_t)a->naxes : (size_t)rank;
  if (count != want) return tr_fail(t, "sizes has %zu values, %zu expected", count, want);
  for (int i = 0; i < rank; i++) out[i] = in[i];
  for (size_t i = 0; i < count; i++) {
    int at = a->naxes ? (int)a->axes[i] : (int)i;
    if (sz[i] < 0 || sz[i] > INT32_MAX) return tr_fail(t, "size %lld is out of range",
                                                       (long long)sz[i]);
    out[at] = (int)sz[i];
  }
  for (int i = 0; i < rank; i++) {
    if (in[i] == 0 && out[i] != 0) return tr_fail(t, "cannot resize an empty axis to %d", out[i]);
    scales[i] = in[i] == 0 ? 1.0f : (float)out[i] / (float)in[i];
  }
  if (a->policy != AR_STRETCH) {
    bool chosen[MX_MAX_RANK];
    float pick = a->policy == AR_NOT_LARGER ? INFINITY : 0.0f;
    for (int i = 0; i < rank; i++) chosen[i] = a->naxes == 0;
    for (int i = 0; i < a->naxes; i++) chosen[a->axes[i]] = true;
    for (int i = 0; i < rank; i++)
      if (chosen[i]) pick = a->policy == AR_NOT_LARGER ? fminf(pick, scales[i])
                                                       : fmaxf(pick, scales[i]);
    for (int i = 0; i < rank; i++) {
      scales[i] = chosen[i] ? pick : 1.0f;
      float length = roundf(pick * (float)in[i]);
      if (chosen[i] && !(length < (float)INT32_MAX))
        return tr_fail(t, "the aspect ratio policy makes axis %d longer than MLX's shapes hold",
                       i);
      out[i] = chosen[i] ? (int)(int64_t)length : in[i];
    }
  }
  for (int i = 0; i < rank; i++)
    if (!(scales[i] > 0)) return tr_fail(t, "scale %g is not > 0", scales[i]);
  return MX_OK;
}

/* roi for tf_crop_and_resize: start and end per axis, default [0, 1]. */
static int read_roi(tr_ctx *t, const rs_attrs *a, int rank, float *lo, float *hi) {
  for (int i = 0; i < rank; i++) lo[i] = 0.0f, hi[i] = 1.0f;
  if (a->ctm != CT_CROP || !has_values(t, a->roi_in)) return MX_OK;
  float v[2 * MX_MAX_RANK];
  size_t count;
  TR_TRY(host_floats(t, a->roi_in, v, 2 * MX_MAX_RANK, &count));
  size_t half = count / 2;
  if (count % 2) return tr_fail(t, "roi has %zu values (an even count expected)", count);
  TR_TRY(spread(t, a, "roi (starts)", v, half, rank, 0.0f, lo));
  return spread(t, a, "roi (ends)", v + half, half, rank, 1.0f, hi);
}

/* --- translation ------------------------------------------------------------------------- */
/* ANDs the per-axis inside masks into y: outside positions take extrapolation_value. */
static int extrapolate(tr_ctx *t, const rs_attrs *a, const rs_plan *plans, int rank,
                       mx_array y, mx_array *out) {
  mx_array mask = NULL, m, v;
  for (int i = 0; i < rank; i++) {
    if (!plans[i].clipped) continue;
    TR_TRY(column(t, plans[i].inside, plans[i].out, i, rank, MX_BOOL, &m));
    if (mask) TR_TRY(mx_binary(t->mx, &mask, MX_LOGICAL_AND, mask, m));
    else mask = m;
  }
  if (!mask) return *out = y, MX_OK;
  TR_TRY(tr_scalar(t, &v, a->extrapolation, mx_dtype_of(y)));
  return mx_where(t->mx, out, mask, y, v);
}

static int resize_planned(tr_ctx *t, const rs_attrs *a, rs_plan *plans, int rank, mx_array x) {
  mx_array y = x;
  bool widen = a->mode != RS_NEAREST && mx_dtype_of(x) != MX_FLOAT32;
  if (widen) TR_TRY(mx_astype(t->mx, &y, y, MX_FLOAT32));
  for (int i = rank - 1; i >= 0; i--)
    if (!plans[i].identity) TR_TRY(apply_axis(t, y, i, &plans[i], &y));
  TR_TRY(extrapolate(t, a, plans, rank, y, &y));
  return tr_out_cast(t, 0, y);
}

static int translate_resize(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0);
  int rank = mx_ndim(x), in[MX_MAX_RANK], out[MX_MAX_RANK];
  float scales[MX_MAX_RANK], lo[MX_MAX_RANK], hi[MX_MAX_RANK];
  char err[200];
  rs_attrs a;
  if (rank == 0) return tr_fail(t, "X must have rank >= 1");
  if (!rs_read(n, r->code < 10, rank, &a, err, sizeof err)) return tr_fail(t, "%s", err);
  for (int i = 0; i < rank; i++) in[i] = mx_dim(x, i);
  TR_TRY(output_shape(t, n, &a, in, rank, out, scales));
  TR_TRY(read_roi(t, &a, rank, lo, hi));
  bool same = true, empty = false;
  for (int i = 0; i < rank; i++) same &= out[i] == in[i], empty |= out[i] == 0 || in[i] == 0;
  if (same) return tr_out(t, 0, x);
  if (empty) {
    mx_array zero, y;
    TR_TRY(tr_scalar(t, &zero, 0.0, mx_dtype_of(x)));
    TR_TRY(mx_full(t->mx, &y, out, rank, zero));
    return tr_out(t, 0, y);
  }
  rs_plan plans[MX_MAX_RANK];
  memset(plans, 0, sizeof plans);
  int rc = MX_OK;
  for (int i = 0; i < rank && rc == MX_OK; i++) {
    rs_axis ax = {in[i], out[i], scales[i], lo[i], hi[i]};
    if (a.antialias && rs_aa_window(a.mode, scales[i]) > RS_MAX_TAPS)
      rc = tr_fail(t, "antialias over a %gx shrink needs more than %d taps", 1 / scales[i],
                   RS_MAX_TAPS);
    else if (!rs_plan_axis(&a, &ax, rank == 1, &plans[i]))
      rc = tr_fail(t, "out of memory");
  }
  if (rc == MX_OK) rc = resize_planned(t, &a, plans, rank, x);
  for (int i = 0; i < rank; i++) rs_plan_free(&plans[i]);
  return rc;
}

/* --- claims ------------------------------------------------------------------------------ */
/* Reads a constant float input (float32 only; else *count is SIZE_MAX: unknown). */
static void const_floats(const ir_value *v, float *vals, size_t cap, size_t *count) {
  *count = SIZE_MAX;
  if (!v || !v->is_constant || v->elem_type != IR_FLOAT || !v->const_data) return;
  size_t n = v->const_bytes / sizeof(float);
  if (n > cap) return;
  memcpy(vals, v->const_data, n * sizeof(float));
  *count = n;
}

static bool claim_inputs(const ir_graph *g, const ir_node *n, const rs_attrs *a, int rank,
                         op_why why) {
  const ir_value *scales = a->scales_in >= 0 ? ir_input(g, n, a->scales_in) : NULL;
  const ir_value *sizes = a->sizes_in >= 0 ? ir_input(g, n, a->sizes_in) : NULL;
  float v[MX_MAX_RANK];
  size_t count = SIZE_MAX, want = a->naxes ? (size_t)a->naxes : (size_t)rank;
  if (scales && scales->elem_type != IR_FLOAT)
    return op_decline(why, "scales has element type %s (float expected)",
                      ir_elem_name(scales->elem_type));
  if (a->scales_in < 0) {
    const ir_attr *s = ir_find_attr(n, "scales");
    if (!s || s->type != IR_ATTR_FLOATS) return op_decline(why, "the scales attribute is required");
    count = s->count;
    for (size_t i = 0; i < count && i < MX_MAX_RANK; i++) v[i] = s->floats[i];
  } else {
    const_floats(scales, v, MX_MAX_RANK, &count);
  }
  bool scales_empty = (!scales && a->scales_in >= 0) || count == 0 ||
                      (scales && scales->rank == 1 && scales->dims[0] == 0);
  if (scales_empty && !sizes) return op_decline(why, "neither scales nor sizes is given");
  if (!scales_empty && sizes && count != SIZE_MAX && sizes->rank == 1 && sizes->dims[0] != 0)
    return op_decline(why, "both scales and sizes are given (only one may be)");
  if (count != SIZE_MAX && count > 0) {
    if (rank >= 0 && count != want)
      return op_decline(why, "scales has %zu values, %zu expected", count, want);
    for (size_t i = 0; i < count && i < MX_MAX_RANK; i++) {
      if (!(v[i] > 0) || (a->upsample && !(v[i] >= 1)))
        return op_decline(why, "scale %g is not %s", v[i], a->upsample ? ">= 1" : "> 0");
      if (!isfinite(v[i]))
        return op_decline(why, "scale %g is not finite (ONNX Runtime rejects it)", v[i]);
    }
  }
  int64_t *sz = NULL;
  size_t nsz = 0;
  if (scales_empty && sizes && ir_const_ints(sizes, &sz, &nsz)) {
    bool bad = rank >= 0 && nsz != want;
    for (size_t i = 0; i < nsz; i++) bad |= sz[i] < 0;
    free(sz);
    if (bad) return op_decline(why, "sizes has %zu values (%zu expected) or a negative one", nsz,
                               want);
  }
  return true;
}

static bool claim_resize(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *x = ir_input(g, n, 0);
  /* ORT reports an unknown shape as rank 0 (see ir.c); a real scalar fails in the translator */
  int rank = x && x->rank > 0 ? x->rank : -1;
  char err[200];
  rs_attrs a;
  if (rank > MX_MAX_RANK) return op_decline(why, "X's rank %d is too large", rank);
  if (!rs_read(n, r->code < 10, rank, &a, err, sizeof err)) return op_decline(why, "%s", err);
  if (a.mode != RS_NEAREST && x && !(OP_FLOATS & OP_T(x->elem_type)))
    return op_decline(why, "%s mode on %s: ONNX Runtime truncates the float sums of integer "
                           "types, which a separable computation cannot reproduce; only nearest "
                           "takes integers", a.mode == RS_LINEAR ? "linear" : "cubic",
                      ir_elem_name(x->elem_type));
  if (a.antialias && a.mode != RS_NEAREST) {
    float v[MX_MAX_RANK];
    size_t count;
    const_floats(a.scales_in >= 0 ? ir_input(g, n, a.scales_in) : NULL, v, MX_MAX_RANK, &count);
    for (size_t i = 0; count != SIZE_MAX && i < count; i++)
      if (v[i] > 0 && rs_aa_window(a.mode, v[i]) > RS_MAX_TAPS)
        return op_decline(why, "antialias over a %gx shrink needs more than %d taps", 1 / v[i],
                          RS_MAX_TAPS);
  }
  return claim_inputs(g, n, &a, rank, why);
}

#define ROW(op, lo, hi, code, types, note) \
  {"", op, lo, hi, claim_resize, translate_resize, OP_SHAPE_KEYED, types, code, note}
#define NO_BF16 (OP_ALL & ~OP_T(IR_BFLOAT16)) /* bfloat16 from Resize 13 */
#define KEYED "; computed scales/sizes make the group eager"
#define INTS "; linear/cubic on integer types declined"

const op_row ops_resize_rows[] = {
    ROW("Upsample", 7, 8, RS_UPSAMPLE_ATTR, NO_BF16,
        "nearest, linear (N-D, separable); scales attribute" INTS KEYED),
    ROW("Upsample", 9, 9, RS_UPSAMPLE, NO_BF16, "nearest, linear (N-D, separable)" INTS KEYED),
    ROW("Resize", 10, 10, 10, NO_BF16, "nearest, linear; asymmetric" INTS KEYED),
    ROW("Resize", 11, 12, 11, NO_BF16,
        "nearest (4 rounding modes), linear, cubic; every coordinate transform incl. "
        "tf_crop_and_resize" INTS KEYED),
    ROW("Resize", 13, 17, 13, OP_ALL,
        "nearest, linear, cubic; every coordinate transform; optional roi/scales" INTS KEYED),
    ROW("Resize", 18, 18, 18, OP_ALL,
        "nearest, linear, cubic; antialias, axes, keep_aspect_ratio_policy" INTS KEYED),
    ROW("Resize", 19, 19, 19, OP_ALL,
        "nearest, linear, cubic; antialias, axes, keep_aspect_ratio_policy, "
        "half_pixel_symmetric" INTS KEYED),
    OP_ROWS_END,
};
