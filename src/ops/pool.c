/*
 * Pooling: MaxPool, AveragePool and LpPool over any number of spatial dimensions, and the global
 * forms GlobalMaxPool, GlobalAveragePool and GlobalLpPool (reductions over the spatial axes). A
 * pooling window is a product of per-axis taps, so max and sum pooling are separable: the input is
 * padded (or cropped) on each spatial axis to exactly the span its output windows cover, then each
 * axis in turn is reduced by combining its kernel taps as strided slices (k slices per axis; no
 * window is materialised and the bridge needs nothing new). ceil_mode adds the right padding for
 * the last window, dropping a window that would start in the right padding as the spec and ONNX
 * Runtime do. Max pads with the value ONNX Runtime's kernels start from. AveragePool divides each
 * axis's sums by its count of taps inside the input, or inside the explicit pads with
 * count_include_pad (never the ceil_mode extension), counts made on the host per axis. Average and
 * Lp pooling of float16/bfloat16 run in float32 and round once. As ORT's CPU pools, an input
 * with an empty dim other than the batch, a global pool below rank 3, and a window overshooting
 * the padded input by two strides or more fail the run naming the node. On the CPU device, float32
 * average pooling (windowed and global) is one host kernel instead (cpu/pool.c). MaxPool's Indices
 * output, pads not smaller than the kernel (ONNX Runtime rejects them) and SAME padding with
 * dilations (ONNX Runtime pads for the undilated kernel, against the spec) are declined and stay on
 * ONNX Runtime.
 */
#include "ops/families.h"
#include "cpu/pool.h"
#include "ops/window.h"
#include "plan/translate.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

enum { POOL_MAX, POOL_AVG, POOL_LP };

/* --- shared helpers ---------------------------------------------------------------------- */
static bool is_half(mx_dtype d) { return d == MX_FLOAT16 || d == MX_BFLOAT16; }

/* Input 0, widened to float32 for the summing pools of half types. */
static int pool_input(tr_ctx *t, int kind, mx_array *x) {
  *x = tr_in(t, 0);
  if (kind != POOL_MAX && is_half(mx_dtype_of(*x)))
    TR_TRY(mx_astype(t->mx, x, *x, MX_FLOAT32));
  return MX_OK;
}

/* LpPool's p: a float in opset 1, an int from opset 2 (default 2 in both). */
static double lp_p(const ir_node *n) {
  const ir_attr *a = ir_find_attr(n, "p");
  if (a && a->type == IR_ATTR_FLOAT) return a->f;
  if (a && a->type == IR_ATTR_INT) return (double)a->i;
  return 2.0;
}

/* |x|^p, the summand of Lp pooling. */
static int lp_power(tr_ctx *t, double p, mx_array x, mx_array *out) {
  mx_array e;
  TR_TRY(mx_unary(t->mx, &x, MX_ABS, x));
  if (p == 1.0) return *out = x, MX_OK;
  if (p == 2.0) return mx_unary(t->mx, out, MX_SQUARE, x);
  TR_TRY(tr_scalar(t, &e, p, mx_dtype_of(x)));
  return mx_binary(t->mx, out, MX_POWER, x, e);
}

/* sum^(1/p), the root that ends Lp pooling. */
static int lp_root(tr_ctx *t, double p, mx_array s, mx_array *out) {
  mx_array e;
  if (p == 1.0) return *out = s, MX_OK;
  if (p == 2.0) return mx_unary(t->mx, out, MX_SQRT, s);
  TR_TRY(tr_scalar(t, &e, 1.0 / p, mx_dtype_of(s)));
  return mx_binary(t->mx, out, MX_POWER, s, e);
}

/* Lp pooling needs p > 0 (p = 0 would divide by zero in the root). */
static bool claim_lp_p(const ir_node *n, op_why why) {
  double p = lp_p(n);
  if (!(p > 0)) return op_decline(why, "p = %g: the Lp norm needs p > 0", p);
  return true;
}

/* --- windowed pooling -------------------------------------------------------------------- */
/* One spatial axis of a pooling: padding, output size, and how far the input must be padded (or,
 * when negative, cropped) at the end so that the windows span exactly the padded axis. */
typedef struct pool_axis {
  int in, k, s, d, lo, hi; /* hi: the explicit (or SAME) padding, used for counting */
  int out, end;            /* end: padding actually applied at the end; negative crops */
} pool_axis;

static void plan_axis(const win_attrs *wa, int i, int in, bool ceil_mode, pool_axis *a) {
  int64_t lo = wa->pad_lo[i], hi = wa->pad_hi[i], e = win_extent(wa, i), s = wa->stride[i];
  if (wa->auto_pad == WIN_SAME_UPPER || wa->auto_pad == WIN_SAME_LOWER)
    win_same_pads(in, s, e, wa->auto_pad == WIN_SAME_UPPER, &lo, &hi);
  int64_t span = in + lo + hi - e, out;
  if (span >= 0) {
    out = span / s + 1;
    if (ceil_mode && span % s) {
      out++;
      if ((out - 1) * s >= in + lo) out--; /* a window may not start in the right padding */
    }
  } else {
    /* a window wider than the padded input: ONNX Runtime's truncating division gives one
     * window (padded further at the end) when span > -stride, else none */
    out = span > -s ? 1 : 0;
    /* with ceil_mode ORT then applies the rule above: over an empty axis without left padding
     * that one window would start in the right padding, so there is none (seen by the fuzzer:
     * [0, 7, 0, 6] with kernel 1, stride 2 gives [0, 7, 0, 3]) */
    if (ceil_mode && out && (out - 1) * s >= in + lo) out--;
  }
  a->in = in, a->k = (int)wa->kernel[i], a->s = (int)s, a->d = (int)wa->dilation[i];
  a->lo = (int)lo, a->hi = (int)hi, a->out = (int)out;
  a->end = (int)((out - 1) * s + e - lo - in);
}

/* Reduces axis `axis` of the padded x to a->out windows: k strided slices combined by op. */
static int reduce_axis(tr_ctx *t, mx_array x, int axis, const pool_axis *a, mx_binary_op op,
                       mx_array *out) {
  int nd = mx_ndim(x), start[MX_MAX_RANK], stop[MX_MAX_RANK], step[MX_MAX_RANK];
  for (int i = 0; i < nd; i++) start[i] = 0, stop[i] = mx_dim(x, i), step[i] = 1;
  step[axis] = a->s;
  mx_array acc = NULL, tap;
  for (int k = 0; k < a->k; k++) {
    start[axis] = k * a->d;
    stop[axis] = start[axis] + (a->out - 1) * a->s + 1;
    TR_TRY(mx_slice(t->mx, &tap, x, start, stop, step, nd));
    if (acc) TR_TRY(mx_binary(t->mx, &acc, op, acc, tap));
    else acc = tap;
  }
  *out = acc;
  return MX_OK;
}

/* Divides axis `axis` (of rank-nd y) of window sums by the number of taps that are counted: those
 * inside the input, or with count_include_pad inside the explicit padding too. */
static int average_axis(tr_ctx *t, mx_array y, int axis, const pool_axis *a, bool include_pad,
                        mx_array *out) {
  int vlo = include_pad ? -a->lo : 0, vhi = include_pad ? a->in + a->hi : a->in;
  float *count = malloc(sizeof(float) * (size_t)a->out);
  if (!count) return tr_fail(t, "out of memory");
  bool uniform = true;
  for (int o = 0; o < a->out; o++) {
    int c = 0;
    for (int k = 0; k < a->k; k++) {
      int pos = o * a->s - a->lo + k * a->d;
      c += pos >= vlo && pos < vhi;
    }
    count[o] = c ? (float)c : 1.0f; /* a window wider than the padded input may hold nothing */
    uniform = uniform && c == a->k;
  }
  mx_array div;
  int rc;
  if (uniform) {
    rc = tr_scalar(t, &div, a->k, mx_dtype_of(y));
  } else {
    int shape[MX_MAX_RANK], rank = mx_ndim(y) - axis;
    shape[0] = a->out;
    for (int i = 1; i < rank; i++) shape[i] = 1;
    rc = mx_from_data(t->mx, &div, count, shape, rank, MX_FLOAT32);
    if (rc == MX_OK && mx_dtype_of(y) != MX_FLOAT32)
      rc = mx_astype(t->mx, &div, div, mx_dtype_of(y));
  }
  free(count);
  if (rc != MX_OK) return rc;
  return mx_binary(t->mx, out, MX_DIVIDE, y, div);
}

/* The value windows are padded with: 0, or for max the value ONNX Runtime's kernels start each
 * window from, so that a window of -inf or of padding alone agrees too: the lowest finite float32,
 * -inf for the half types, the type's minimum for integers. */
static int pad_value(tr_ctx *t, int kind, mx_dtype d, mx_array *v) {
  if (kind != POOL_MAX) return tr_scalar(t, v, 0.0, d);
  if (d == MX_FLOAT32) return tr_scalar(t, v, -FLT_MAX, d);
  if (mx_dtype_is_float(d)) return tr_scalar(t, v, -INFINITY, d);
  if (d == MX_INT8) return mx_scalar_int(t->mx, v, -128, d);
  if (d == MX_UINT8) return mx_scalar_int(t->mx, v, 0, d);
  return tr_fail(t, "MaxPool does not take %s here", mx_dtype_name(d));
}

/* ORT's CPU pools reject an input holding no elements unless its batch is what is empty
 * ("Only N can be zero"): no window could hold a value, and no value is invented. */
static int nonempty_unless_batch(tr_ctx *t, mx_array x) {
  if (mx_size(x) > 0 || mx_dim(x, 0) == 0) return MX_OK;
  for (int i = 1; i < mx_ndim(x); i++)
    if (mx_dim(x, i) == 0)
      return tr_fail(t, "X has a zero-size dim %d: only the batch dim may be empty", i);
  return MX_OK;
}

/* An output with no windows along some axis: an empty array of the output's shape. */
static int empty_output(tr_ctx *t, mx_array x, const pool_axis *ax, int nd) {
  int shape[MX_MAX_RANK];
  mx_array zero, y;
  shape[0] = mx_dim(x, 0), shape[1] = mx_dim(x, 1);
  for (int i = 0; i < nd; i++) shape[i + 2] = ax[i].out;
  TR_TRY(tr_scalar(t, &zero, 0.0, mx_dtype_of(x)));
  TR_TRY(mx_full(t->mx, &y, shape, nd + 2, zero));
  return tr_out_cast(t, 0, y);
}

static bool claim_pool(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *x = ir_input(g, n, 0);
  const ir_attr *ks = ir_find_attr(n, "kernel_shape");
  if (!ks || ks->type != IR_ATTR_INTS || ks->count == 0)
    return op_decline(why, "kernel_shape is required");
  int nd = (int)ks->count;
  if (x && x->rank >= 0 && x->rank != nd + 2)
    return op_decline(why, "kernel_shape has %d dims but X has rank %d", nd, x->rank);
  char err[160], s1[64], s2[64];
  win_attrs wa;
  if (!win_read(n, nd, &wa, err, sizeof err)) return op_decline(why, "%s", err);
  for (int i = 0; i < nd; i++)
    if (wa.pad_lo[i] >= wa.kernel[i] || wa.pad_hi[i] >= wa.kernel[i]) {
      int64_t pads[2 * WIN_MAX_DIMS];
      for (int k = 0; k < nd; k++) pads[k] = wa.pad_lo[k], pads[nd + k] = wa.pad_hi[k];
      return op_decline(why, "pads %s are not all smaller than kernel_shape %s (ONNX Runtime's "
                             "CPU kernel rejects them)",
                        win_fmt(pads, 2 * nd, s1, sizeof s1),
                        win_fmt(wa.kernel, nd, s2, sizeof s2));
    }
  if (wa.auto_pad == WIN_SAME_UPPER || wa.auto_pad == WIN_SAME_LOWER) {
    for (int i = 0; i < nd; i++)
      if (wa.dilation[i] != 1)
        return op_decline(why, "auto_pad SAME with dilations %s: ONNX Runtime pads for the "
                               "undilated kernel, against the spec",
                          win_fmt(wa.dilation, nd, s1, sizeof s1));
    int64_t in[WIN_MAX_DIMS];
    for (int i = 0; i < nd; i++) in[i] = x && x->rank == nd + 2 ? x->dims[i + 2] : -1;
    if (win_same_may_go_negative(&wa, in))
      return op_decline(why, "auto_pad SAME with a kernel smaller than the stride may need "
                             "negative padding, where ONNX Runtime's kernels disagree");
  }
  if (r->code == POOL_MAX && ir_output(g, n, 1))
    return op_decline(why, "MaxPool's Indices output is not translated");
  if (r->code == POOL_LP) return claim_lp_p(n, why);
  return true;
}

static int translate_pool(tr_ctx *t, const ir_node *n, const op_row *r) {
  int kind = r->code;
  mx_array x, v, y;
  TR_TRY(pool_input(t, kind, &x));
  int rank = mx_ndim(x), nd = rank - 2;
  char err[160];
  win_attrs wa;
  if (nd < 1) return tr_fail(t, "X has rank %d: no spatial dimensions to pool", rank);
  if (!win_read(n, nd, &wa, err, sizeof err)) return tr_fail(t, "%s", err);
  if (!wa.has_kernel) return tr_fail(t, "kernel_shape is required");
  TR_TRY(nonempty_unless_batch(t, x));
  bool ceil_mode = ir_attr_int(n, "ceil_mode", 0) != 0;
  pool_axis ax[WIN_MAX_DIMS];
  int lo[MX_MAX_RANK] = {0}, hi[MX_MAX_RANK] = {0}, start[MX_MAX_RANK] = {0},
      stop[MX_MAX_RANK], step[MX_MAX_RANK];
  bool crop = false;
  for (int i = 0; i < rank; i++) stop[i] = mx_dim(x, i), step[i] = 1;
  for (int i = 0; i < nd; i++) {
    plan_axis(&wa, i, mx_dim(x, i + 2), ceil_mode, &ax[i]);
    lo[i + 2] = ax[i].lo;
    hi[i + 2] = ax[i].end > 0 ? ax[i].end : 0;
    if (ax[i].end < 0) stop[i + 2] += ax[i].end, crop = true;
  }
  for (int i = 0; i < nd; i++) {
    /* ORT's CPU pools compute (in + pads - extent) / stride + 1 with C's truncating division and
     * reject a negative result: a window that overshoots the padded input by 2 strides or more. */
    int64_t span = (int64_t)ax[i].in + ax[i].lo + ax[i].hi - win_extent(&wa, i);
    if (span / ax[i].s + 1 < 0)
      return tr_fail(t, "the kernel does not fit: spatial dim %d is %d, with pads %d + %d the "
                        "window extent is %lld", i, ax[i].in, ax[i].lo, ax[i].hi,
                     (long long)win_extent(&wa, i));
  }
  for (int i = 0; i < nd; i++)
    if (ax[i].out == 0) return empty_output(t, x, ax, nd);
  bool include_pad = ir_attr_int(n, "count_include_pad", 0) != 0;
  if (kind == POOL_AVG && nd <= CPU_POOL_MAX_ND && cpu_pool_applies(t, x)) {
    cpu_pool_axis pa[CPU_POOL_MAX_ND];
    for (int i = 0; i < nd; i++) {
      const pool_axis *a = &ax[i];
      pa[i] = (cpu_pool_axis){a->in, a->k, a->s, a->d, a->lo, a->out,
                              include_pad ? -a->lo : 0, include_pad ? a->in + a->hi : a->in};
    }
    TR_TRY(cpu_pool_average(t, x, pa, &y));
    tr_note_path(t, TR_PATH_HOST_KERNEL, "avg_pool", 0, "host kernel (CPU)");
    return tr_out_cast(t, 0, y);
  }
  double p = lp_p(n);
  if (kind == POOL_LP) TR_TRY(lp_power(t, p, x, &x));
  if (crop) TR_TRY(mx_slice(t->mx, &x, x, start, stop, step, rank));
  TR_TRY(pad_value(t, kind, mx_dtype_of(x), &v));
  TR_TRY(mx_pad(t->mx, &y, x, lo, hi, rank, v));
  for (int i = 0; i < nd; i++) {
    TR_TRY(reduce_axis(t, y, i + 2, &ax[i], kind == POOL_MAX ? MX_MAXIMUM : MX_ADD, &y));
    if (kind == POOL_AVG) TR_TRY(average_axis(t, y, i + 2, &ax[i], include_pad, &y));
  }
  if (kind == POOL_LP) TR_TRY(lp_root(t, p, y, &y));
  return tr_out_cast(t, 0, y);
}

/* --- global pooling ---------------------------------------------------------------------- */
static bool claim_global(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *x = ir_input(g, n, 0);
  if (x && x->rank >= 0 && x->rank < 3)
    return op_decline(why, "X has rank %d: no spatial dimensions to pool", x->rank);
  if (r->code == POOL_LP) return claim_lp_p(n, why);
  return true;
}

static int translate_global(tr_ctx *t, const ir_node *n, const op_row *r) {
  int kind = r->code;
  mx_array x, y;
  TR_TRY(pool_input(t, kind, &x));
  int rank = mx_ndim(x), axes[MX_MAX_RANK];
  if (rank < 3) return tr_fail(t, "X has rank %d: no spatial dimensions to pool", rank);
  TR_TRY(nonempty_unless_batch(t, x));
  for (int i = 2; i < rank; i++) axes[i - 2] = i;
  int na = rank - 2;
  if (mx_size(x) == 0) { /* an empty batch (with maybe an empty spatial dim too, which MLX's
                          * max refuses to reduce): the [0, C, 1, ...] result has no element */
    int shape[MX_MAX_RANK];
    mx_array zero;
    for (int i = 0; i < rank; i++) shape[i] = i < 2 ? mx_dim(x, i) : 1;
    TR_TRY(mx_scalar(t->mx, &zero, 0, mx_dtype_of(x)));
    TR_TRY(mx_full(t->mx, &y, shape, rank, zero));
    return tr_out_cast(t, 0, y);
  }
  double p = lp_p(n);
  if (kind == POOL_AVG && cpu_pool_applies(t, x)) {
    TR_TRY(cpu_pool_global_average(t, x, &y));
    tr_note_path(t, TR_PATH_HOST_KERNEL, "global_avg_pool", 0, "host kernel (CPU)");
    return tr_out_cast(t, 0, y);
  }
  switch (kind) {
    case POOL_MAX: TR_TRY(mx_reduce(t->mx, &y, MX_MAX, x, axes, na, true)); break;
    case POOL_AVG: TR_TRY(mx_reduce(t->mx, &y, MX_MEAN, x, axes, na, true)); break;
    default:
      TR_TRY(lp_power(t, p, x, &x));
      TR_TRY(mx_reduce(t->mx, &y, MX_SUM, x, axes, na, true));
      TR_TRY(lp_root(t, p, y, &y));
  }
  return tr_out_cast(t, 0, y);
}

#define POOL(name, lo, hi, kind, types, note) \
  {"", name, lo, hi, claim_pool, translate_pool, OP_SHAPE_KEYED, types, kind, note}
#define GLOBAL(name, lo, hi, kind, note) \
  {"", name, lo, hi, claim_global, translate_global, OP_SHAPELESS, OP_FLOATS, kind, note}
#define INT8S (OP_T(IR_INT8) | OP_T(IR_UINT8))
#define WINDOWS "any spatial rank; pads must be smaller than the kernel"
#define NEWER "; dilations, ceil_mode; SAME with dilations declined"
#define HALF "; half types summed in float32"

const op_row ops_pool_rows[] = {
    POOL("MaxPool", 1, 7, POOL_MAX, OP_FLOATS, WINDOWS),
    POOL("MaxPool", 8, 9, POOL_MAX, OP_FLOATS,
         WINDOWS "; the Indices output is declined (storage_order only affects it)"),
    POOL("MaxPool", 10, 11, POOL_MAX, OP_FLOATS, WINDOWS NEWER "; Indices declined"),
    POOL("MaxPool", 12, 22, POOL_MAX, OP_FLOATS | INT8S, WINDOWS NEWER "; Indices declined"),
    POOL("AveragePool", 1, 6, POOL_AVG, OP_FLOATS, WINDOWS "; pads never counted" HALF),
    POOL("AveragePool", 7, 9, POOL_AVG, OP_FLOATS, WINDOWS "; count_include_pad" HALF),
    POOL("AveragePool", 10, 18, POOL_AVG, OP_FLOATS,
         WINDOWS "; count_include_pad, ceil_mode" HALF),
    POOL("AveragePool", 19, 22, POOL_AVG, OP_FLOATS, WINDOWS "; count_include_pad" NEWER HALF),
    POOL("LpPool", 1, 1, POOL_LP, OP_FLOATS, WINDOWS "; float p" HALF),
    POOL("LpPool", 2, 17, POOL_LP, OP_FLOATS, WINDOWS "; integer p" HALF),
    POOL("LpPool", 18, 22, POOL_LP, OP_FLOATS, WINDOWS "; integer p" NEWER HALF),
    GLOBAL("GlobalMaxPool", 1, 22, POOL_MAX, NULL),
    GLOBAL("GlobalAveragePool", 1, 22, POOL_AVG, "half types averaged in float32"),
    GLOBAL("GlobalLpPool", 1, 1, POOL_LP, "float p" HALF),
    GLOBAL("GlobalLpPool", 2, 22, POOL_LP, "integer p" HALF),
    OP_ROWS_END,
};
