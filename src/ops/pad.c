/*
 * Pad and CenterCropPad. Pads and axes (Pad's inputs from opset 11, axes from 18) and
 * CenterCropPad's shape are read on the host with tr_host_ints: free for constant initializers,
 * an evaluation otherwise, which makes the group eager for that read. Pad crops negative pads
 * first and builds edge/reflect/wrap padding from host-computed source positions, rejecting what
 * ONNX Runtime rejects (reflect beyond dim-1, non-constant modes on empty axes). Opset versions
 * are split where the semantics change (inputs from 11, axes from 18, wrap from 19). Both only
 * move or select data, so each also takes float64 on the CPU device (OP_F64), bit-exact.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdlib.h>
#include <string.h>

/* Every MLX element type, float64 included (claimed on the CPU device only). */
#define ANY_F64 (OP_ALL | OP_F64)

/* --- Pad and CenterCropPad --------------------------------------------------------------- */
/* Where a row takes pads and which modes it knows (the row's code). */
enum { PAD_ATTRS = 0, PAD_INPUTS = 1, PAD_AXES = 2, PAD_WRAP = 3 };
enum { MODE_CONSTANT, MODE_REFLECT, MODE_EDGE, MODE_WRAP, MODE_UNKNOWN };

static int pad_mode(const ir_node *n) {
  const char *m = ir_attr_string(n, "mode", "constant");
  return strcmp(m, "constant") == 0 ? MODE_CONSTANT
         : strcmp(m, "reflect") == 0 ? MODE_REFLECT
         : strcmp(m, "edge") == 0    ? MODE_EDGE
         : strcmp(m, "wrap") == 0    ? MODE_WRAP
                                     : MODE_UNKNOWN;
}

static bool claim_pad(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  const ir_value *x = ir_input(g, n, 0);
  int mode = pad_mode(n);
  if (mode == MODE_UNKNOWN || (mode == MODE_WRAP && r->code != PAD_WRAP))
    return op_decline(why, "mode '%s' is not defined at opset %d (constant, reflect, edge; wrap "
                           "from opset 19)",
                      ir_attr_string(n, "mode", "constant"), n->since_version);
  if (r->code == PAD_ATTRS) {
    const ir_attr *p = ir_find_attr(n, "pads");
    if (!p || p->type != IR_ATTR_INTS) return op_decline(why, "the pads attribute is required");
    if (x->rank >= 0 && p->count != 2 * (size_t)x->rank)
      return op_decline(why, "pads has %zu entries for an input of rank %d", p->count, x->rank);
    return op_rank_fits(x, "the input", why);
  }
  return op_rank_fits(x, "the input", why) &&
         op_ints_fit(g, n, 1, 2 * MX_MAX_RANK, "the pads input", why) &&
         op_ints_fit(g, n, 3, MX_MAX_RANK, "the axes input", why);
}

/* Takes `index` (host-computed source positions) along axis: edge, reflect and wrap padding. */
static int take_positions(tr_ctx *t, mx_array x, int axis, int lo, int out_dim, int mode,
                          mx_array *y) {
  int dim = mx_dim(x, axis);
  int32_t *pos = malloc(sizeof(int32_t) * ((size_t)out_dim + 1));
  if (!pos) return tr_fail(t, "out of memory");
  for (int j = 0; j < out_dim; j++) {
    int64_t p = (int64_t)j - lo;
    if (mode == MODE_EDGE) p = p < 0 ? 0 : p >= dim ? dim - 1 : p;
    else if (mode == MODE_REFLECT) p = p < 0 ? -p : p >= dim ? 2 * (int64_t)(dim - 1) - p : p;
    else p = ((p % dim) + dim) % dim;
    pos[j] = (int32_t)p;
  }
  mx_array idx;
  int rc = mx_from_data(t->mx, &idx, pos, &out_dim, 1, MX_INT32);
  free(pos);
  TR_TRY(rc);
  return mx_take(t->mx, y, x, idx, axis);
}

static const char *pad_mode_name(int mode) {
  return mode == MODE_EDGE ? "edge" : mode == MODE_REFLECT ? "reflect" : "wrap";
}

/* Output positions j of one axis of length dim read input position j - lo; those before the
 * input take the left padding (L of them), those past its end the right (R), and `kept` read
 * the input from `from`. This holds for every pad whose output length dim + lo + hi is not
 * negative, also where a negative pad crops past the far end of the input (then every output
 * is padding: cropping an empty axis by 1 and padding it by 2 gives one padded element, as ONNX
 * Runtime answers). */
typedef struct pad_axis {
  int64_t out, left, kept, right, from;
} pad_axis;

static pad_axis plan_pad_axis(int64_t dim, int64_t lo, int64_t hi) {
  pad_axis a;
  a.out = dim + lo + hi;
  a.left = lo < 0 ? 0 : lo > a.out ? a.out : lo;
  int64_t end = dim + lo; /* output positions before it read the input or the left padding */
  a.right = a.out - (end < 0 ? 0 : end > a.out ? a.out : end);
  a.kept = a.out - a.left - a.right;
  a.from = lo < 0 ? (-lo < dim ? -lo : dim) : 0;
  return a;
}

/* Constant pads as planned above; edge/reflect/wrap crop negative pads first and then take
 * host-computed source positions over the cropped axis (as ONNX Runtime does). An output that
 * holds no element is that empty tensor whatever the mode (ONNX Runtime answers it too). */
static int apply_pads(tr_ctx *t, mx_array x, const int64_t *lo, const int64_t *hi, int mode,
                      mx_array value, mx_array *out) {
  int rank = mx_ndim(x), start[MX_MAX_RANK], stop[MX_MAX_RANK], stride[MX_MAX_RANK];
  int plo[MX_MAX_RANK], phi[MX_MAX_RANK], shape[MX_MAX_RANK];
  bool crop = false, pad = false, empty = false;
  int far_crop = -1;
  for (int i = 0; i < rank; i++) {
    int64_t dim = mx_dim(x, i);
    /* Bounds first, so that nothing below overflows (INT64_MIN has no negation, INT64_MAX no
     * sum): a crop past the axis, or a pad beyond MLX's int32 shapes, fails as ORT fails. */
    if (lo[i] > INT32_MAX || hi[i] > INT32_MAX)
      return tr_fail(t, "pads %lld and %lld of axis %d exceed MLX's shape range",
                     (long long)lo[i], (long long)hi[i], i);
    if (lo[i] < -4 * (int64_t)INT32_MAX || hi[i] < -4 * (int64_t)INT32_MAX ||
        dim + lo[i] + hi[i] < 0)
      return tr_fail(t, "pads %lld and %lld of axis %d crop more than its %lld elements",
                     (long long)lo[i], (long long)hi[i], i, (long long)dim);
    pad_axis a = plan_pad_axis(dim, lo[i], hi[i]);
    if (a.out > INT32_MAX) return tr_fail(t, "padding axis %d exceeds MLX's shape range", i);
    /* edge/reflect/wrap repeat elements of the axis, cropped first: an empty one (or, in a
     * tensor that has elements, one cropped to nothing) has none to pad with */
    int64_t kept = dim + (lo[i] < 0 ? lo[i] : 0) + (hi[i] < 0 ? hi[i] : 0);
    if (mode != MODE_CONSTANT && ((dim == 0 && a.out > 0) ||
                                  (mx_size(x) > 0 && kept <= 0 && (lo[i] > 0 || hi[i] > 0))))
      return tr_fail(t, "%s mode cannot pad axis %d: it is empty%s", pad_mode_name(mode), i,
                     dim ? " once cropped" : "");
    shape[i] = (int)a.out;
    empty = empty || a.out == 0;
    if (mode != MODE_CONSTANT && (lo[i] < -dim || hi[i] < -dim)) far_crop = i;
    if (mode == MODE_CONSTANT) {
      start[i] = (int)a.from, stop[i] = (int)(a.from + a.kept);
      plo[i] = (int)a.left, phi[i] = (int)a.right;
    } else {
      start[i] = lo[i] < 0 ? (int)-lo[i] : 0, stop[i] = (int)(dim - (hi[i] < 0 ? -hi[i] : 0));
      plo[i] = lo[i] > 0 ? (int)lo[i] : 0, phi[i] = hi[i] > 0 ? (int)hi[i] : 0;
    }
    stride[i] = 1;
    crop = crop || start[i] > 0 || stop[i] < dim;
    pad = pad || plo[i] || phi[i];
  }
  if (empty) return mx_full(t->mx, out, shape, rank, value);
  if (far_crop >= 0) /* the crop that comes first would run past the axis */
    return tr_fail(t, "pads %lld and %lld of axis %d crop more than its %d elements",
                   (long long)lo[far_crop], (long long)hi[far_crop], far_crop,
                   mx_dim(x, far_crop));
  if (crop) TR_TRY(mx_slice(t->mx, &x, x, start, stop, stride, rank));
  if (pad && mode == MODE_CONSTANT) {
    TR_TRY(mx_pad(t->mx, &x, x, plo, phi, rank, value));
  } else if (pad) {
    for (int i = 0; i < rank; i++) {
      if (!plo[i] && !phi[i]) continue;
      int dim = mx_dim(x, i);
      if (dim == 0)
        return tr_fail(t, "%s mode cannot pad axis %d: it is empty", pad_mode_name(mode), i);
      if (mode == MODE_REFLECT && (plo[i] > dim - 1 || phi[i] > dim - 1))
        return tr_fail(t, "reflect pads of axis %d are %d and %d; an axis of %d allows at most %d",
                       i, plo[i], phi[i], dim, dim - 1);
      TR_TRY(take_positions(t, x, i, plo[i], plo[i] + dim + phi[i], mode, &x));
    }
  }
  *out = x;
  return MX_OK;
}

static int translate_pad(tr_ctx *t, const ir_node *n, const op_row *r) {
  mx_array x = tr_in(t, 0), value, y;
  int rank = mx_ndim(x), mode = pad_mode(n);
  int64_t pads[2 * MX_MAX_RANK], axes[MX_MAX_RANK], lo[MX_MAX_RANK] = {0}, hi[MX_MAX_RANK] = {0};
  size_t count = 0, naxes = (size_t)rank;
  mx_dtype dt = mx_dtype_of(x);
  if (mode == MODE_UNKNOWN) return tr_fail(t, "unknown pad mode");
  if (r->code == PAD_ATTRS) {
    const ir_attr *a = ir_find_attr(n, "pads");
    if (!a || a->type != IR_ATTR_INTS || a->count > 2 * MX_MAX_RANK)
      return tr_fail(t, "the pads attribute is missing or too long");
    for (size_t k = 0; k < a->count; k++) pads[k] = a->ints[k];
    count = a->count;
    TR_TRY(mx_scalar(t->mx, &value, ir_attr_float(n, "value", 0.0f), dt));
  } else {
    TR_TRY(tr_host_ints(t, 1, pads, 2 * MX_MAX_RANK, &count));
    mx_array c = tr_in(t, 2);
    if (c && mx_size(c) != 1)
      return tr_fail(t, "constant_value must hold one value, not %zu", mx_size(c));
    if (c) TR_TRY(mx_reshape(t->mx, &value, c, NULL, 0));
    else TR_TRY(mx_scalar(t->mx, &value, 0, dt));
    if (mx_dtype_of(value) != dt) TR_TRY(mx_astype(t->mx, &value, value, dt));
  }
  if (r->code >= PAD_AXES && tr_in(t, 3)) {
    TR_TRY(tr_host_ints(t, 3, axes, MX_MAX_RANK, &naxes));
  } else {
    for (int i = 0; i < rank; i++) axes[i] = i;
  }
  if (count != 2 * naxes)
    return tr_fail(t, "pads has %zu entries for %zu axes (2 per axis)", count, naxes);
  bool seen[MX_MAX_RANK] = {0};
  for (size_t k = 0; k < naxes; k++) {
    int ax;
    TR_TRY(tr_axis(t, axes[k], rank, &ax));
    if (seen[ax]) return tr_fail(t, "axis %d appears twice in axes", ax);
    seen[ax] = true;
    lo[ax] = pads[k];
    hi[ax] = pads[k + naxes];
  }
  TR_TRY(apply_pads(t, x, lo, hi, mode, value, &y));
  return tr_out(t, 0, y);
}

static bool claim_center_crop_pad(const ir_graph *g, const ir_node *n, const op_row *r,
                                  op_why why) {
  (void)r;
  const ir_attr *a = ir_find_attr(n, "axes");
  if (a && a->type == IR_ATTR_INTS && a->count > MX_MAX_RANK)
    return op_decline(why, "axes has %zu entries; at most %d are supported", a->count,
                      MX_MAX_RANK);
  return op_rank_fits(ir_input(g, n, 0), "the input", why) &&
         op_ints_fit(g, n, 1, MX_MAX_RANK, "the shape input", why);
}

/* Each named axis is cropped or zero-padded to the target, centred: a crop starts at
 * (dim - target) / 2, a pad puts (target - dim) / 2 in front (both floored). */
static int translate_center_crop_pad(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), value, y;
  int rank = mx_ndim(x);
  int64_t shape[MX_MAX_RANK], lo[MX_MAX_RANK] = {0}, hi[MX_MAX_RANK] = {0};
  size_t count;
  TR_TRY(tr_host_ints(t, 1, shape, MX_MAX_RANK, &count));
  const ir_attr *a = ir_find_attr(n, "axes");
  bool has_axes = a && a->type == IR_ATTR_INTS;
  size_t naxes = has_axes ? a->count : (size_t)rank;
  if (count != naxes)
    return tr_fail(t, "shape has %zu entries for %zu axes", count, naxes);
  bool seen[MX_MAX_RANK] = {0};
  for (size_t k = 0; k < naxes; k++) {
    int ax;
    TR_TRY(tr_axis(t, has_axes ? a->ints[k] : (int64_t)k, rank, &ax));
    if (seen[ax]) return tr_fail(t, "axis %d appears twice in axes", ax);
    seen[ax] = true;
    int64_t dim = mx_dim(x, ax), want = shape[k];
    if (want < 0) return tr_fail(t, "shape[%zu] is %lld; sizes must be >= 0", k, (long long)want);
    int64_t diff = want - dim, front = (diff < 0 ? -diff : diff) / 2;
    lo[ax] = diff < 0 ? -front : front;
    hi[ax] = diff - lo[ax];
  }
  TR_TRY(mx_scalar(t->mx, &value, 0, mx_dtype_of(x)));
  TR_TRY(apply_pads(t, x, lo, hi, MODE_CONSTANT, value, &y));
  return tr_out(t, 0, y);
}

#define HOST_READ_NOTE(what) \
  what " is read on the host: free when constant; when computed, it makes the group eager " \
       "for that read"

const op_row ops_pad_rows[] = {
    {"", "Pad", 2, 10, claim_pad, translate_pad, OP_SHAPE_KEYED, OP_FLOATS | OP_F64, PAD_ATTRS,
     "pads/value attributes; modes constant, reflect, edge; negative pads crop"},
    {"", "Pad", 11, 17, claim_pad, translate_pad, OP_SHAPE_KEYED, ANY_F64, PAD_INPUTS,
     "modes constant, reflect, edge; negative pads crop; " HOST_READ_NOTE("the pads input")},
    {"", "Pad", 18, 18, claim_pad, translate_pad, OP_SHAPE_KEYED, ANY_F64, PAD_AXES,
     "axes input; modes constant, reflect, edge; negative pads crop; pads and axes are read on "
     "the host"},
    {"", "Pad", 19, 25, claim_pad, translate_pad, OP_SHAPE_KEYED, ANY_F64, PAD_WRAP,
     "modes constant, reflect, edge, wrap; negative pads crop first; pads and axes are read on "
     "the host"},
    {"", "CenterCropPad", 18, 25, claim_center_crop_pad, translate_center_crop_pad,
     OP_SHAPE_KEYED, ANY_F64, 0,
     "centred crop or zero pad per axis; " HOST_READ_NOTE("the shape input")},
    OP_ROWS_END,
};
