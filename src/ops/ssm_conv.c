/*
 * CausalConvWithState (com.microsoft, and ai.onnx from opset 27): a depthwise causal 1-D
 * convolution that carries its receptive field, carry = (k - 1) * dilation time steps, between
 * calls. The translation works in a [B, time, C] layout: channels-first X [B, C, L] is
 * transposed in and out, channels-last X [B, L, d1..dn] is reshaped (C = d1 * .. * dn). The past
 * state (or zeros) is concatenated in front of X, and Y is the sum over the k taps of a strided
 * time slice times that tap's per-channel weight (no grouped-convolution kernel), plus bias,
 * then silu if asked; half types are computed in float32 and rounded once. present_state is the
 * last `carry` steps of the padded input; with state_window W it is the states after each of the
 * last min(L, W) tokens, oldest first, left-padded with zero slots (L == 0 passes the past window
 * through), and the past state read is slot W - 1. Slices depend on L and k, so the row compiles
 * keyed on shape. The ai.onnx form defines no channels_last, dilation or state_window: a node
 * carrying them at other than their defaults is declined.
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdint.h>
#include <string.h>

enum { CC_ACT_NONE, CC_ACT_SILU, CC_ACT_UNKNOWN };
enum { CC_MAX_WINDOW = 8 };

static int cc_activation(const ir_node *n) {
  const char *a = ir_attr_string(n, "activation", "none");
  if (strcmp(a, "none") == 0) return CC_ACT_NONE;
  if (strcmp(a, "silu") == 0 || strcmp(a, "swish") == 0) return CC_ACT_SILU;
  return CC_ACT_UNKNOWN;
}

static bool cc_is_contrib(const ir_node *n) { return strcmp(n->domain, "com.microsoft") == 0; }

/* Expected state dims for an X of known rank (entries -1 where unknown): [W?] + [B, C, carry]
 * channels-first or [B, carry, d1..dn] channels-last. Returns the rank. */
static int cc_state_dims(const ir_value *x, bool channels_last, int64_t c, int64_t carry,
                         int64_t window, int64_t *dims) {
  int k = 0;
  if (window > 0) dims[k++] = window;
  dims[k++] = x->rank > 0 ? x->dims[0] : -1;
  if (channels_last) {
    dims[k++] = carry;
    for (int i = 2; i < x->rank; i++) dims[k++] = x->dims[i];
  } else {
    dims[k++] = c;
    dims[k++] = carry;
  }
  return k;
}

static bool cc_state_ok(const ir_value *v, const int64_t *dims, int rank, const char *what,
                        op_why why) {
  if (v->rank != rank)
    return op_decline(why, "%s must have rank %d (has %d)", what, rank, v->rank);
  for (int i = 0; i < rank; i++)
    if (v->dims[i] >= 0 && dims[i] >= 0 && v->dims[i] != dims[i])
      return op_decline(why, "%s dim %d is %lld, expected %lld", what, i, (long long)v->dims[i],
                        (long long)dims[i]);
  return true;
}

/* --- translation helpers ------------------------------------------------------------------ */
typedef struct cc_geom {
  bool channels_last;
  int batch, len, c, k, dil, carry, window, rank;
  const int *xshape; /* X's shape (channels-last trailing dims) */
} cc_geom;

static int cc_slice_time(tr_ctx *t, mx_array *out, mx_array a, int from, int to) {
  int start[3] = {0, from, 0}, stop[3] = {mx_dim(a, 0), to, mx_dim(a, 2)}, step[3] = {1, 1, 1};
  return mx_slice(t->mx, out, a, start, stop, step, 3);
}

/* [B, carry, C] -> the state layout of one slot, and back. */
static int cc_to_state(tr_ctx *t, const cc_geom *g, mx_array *out, mx_array a) {
  if (!g->channels_last) {
    int perm[3] = {0, 2, 1};
    return mx_transpose(t->mx, out, a, perm, 3);
  }
  int shape[MX_MAX_RANK];
  shape[0] = g->batch;
  shape[1] = g->carry;
  for (int i = 2; i < g->rank; i++) shape[i] = g->xshape[i];
  return mx_reshape(t->mx, out, a, shape, g->rank);
}

static int cc_from_state(tr_ctx *t, const cc_geom *g, mx_array *out, mx_array a) {
  if (!g->channels_last) {
    int perm[3] = {0, 2, 1};
    return mx_transpose(t->mx, out, a, perm, 3);
  }
  int shape[3] = {g->batch, g->carry, g->c};
  return mx_reshape(t->mx, out, a, shape, 3);
}

static int cc_zeros(tr_ctx *t, mx_array *out, const int *shape, int rank, mx_dtype dt) {
  mx_array zero;
  TR_TRY(tr_scalar(t, &zero, 0.0, dt));
  return mx_full(t->mx, out, shape, rank, zero);
}

/* Checks the past state's shape and returns the slot fed in ([B, carry, C]). */
static int cc_past(tr_ctx *t, const cc_geom *g, mx_array past, mx_array *out) {
  int want[MX_MAX_RANK + 1], r = 0;
  if (g->window) want[r++] = g->window;
  want[r++] = g->batch;
  if (g->channels_last) {
    want[r++] = g->carry;
    for (int i = 2; i < g->rank; i++) want[r++] = g->xshape[i];
  } else {
    want[r++] = g->c;
    want[r++] = g->carry;
  }
  if (mx_ndim(past) != r || memcmp(mx_shape(past), want, sizeof(int) * (size_t)r) != 0)
    return tr_fail(t, "past_state must have rank %d with dims matching the input (window %d, "
                      "carry %d)", r, g->window, g->carry);
  if (g->window) {
    int start[MX_MAX_RANK] = {0}, stop[MX_MAX_RANK], step[MX_MAX_RANK];
    for (int i = 0; i < r; i++) stop[i] = want[i], step[i] = 1;
    start[0] = g->window - 1;
    TR_TRY(mx_slice(t->mx, &past, past, start, stop, step, r));
    TR_TRY(mx_reshape(t->mx, &past, past, want + 1, r - 1));
  }
  return cc_from_state(t, g, out, past);
}

/* present_state with a window: slot j holds the state after token L - W + j (zeros below 0). */
static int cc_window_state(tr_ctx *t, const cc_geom *g, mx_array padded, mx_array past,
                           mx_array *out) {
  int srank = g->rank, sshape[MX_MAX_RANK + 1];
  sshape[0] = g->window;
  sshape[1] = g->batch;
  if (g->channels_last) {
    sshape[2] = g->carry;
    for (int i = 2; i < g->rank; i++) sshape[i + 1] = g->xshape[i];
  } else {
    sshape[2] = g->c;
    sshape[3] = g->carry;
  }
  mx_dtype dt = mx_dtype_of(padded);
  if (g->len == 0) {
    if (past) *out = past;
    else TR_TRY(cc_zeros(t, out, sshape, srank + 1, dt));
    return MX_OK;
  }
  mx_array slots[CC_MAX_WINDOW + 1];
  int count = 0, empty = g->window - g->len;
  if (empty > 0) {
    sshape[0] = empty;
    TR_TRY(cc_zeros(t, &slots[count++], sshape, srank + 1, dt));
    sshape[0] = g->window;
  }
  for (int j = empty > 0 ? empty : 0; j < g->window; j++) {
    int p = g->len - g->window + j; /* the token this slot follows */
    mx_array s;
    TR_TRY(cc_slice_time(t, &s, padded, p + 1, p + 1 + g->carry));
    TR_TRY(cc_to_state(t, g, &s, s));
    int one[MX_MAX_RANK + 1];
    one[0] = 1;
    memcpy(one + 1, sshape + 1, sizeof(int) * (size_t)srank);
    TR_TRY(mx_reshape(t->mx, &slots[count++], s, one, srank + 1));
  }
  return mx_concatenate(t->mx, out, slots, (size_t)count, 0);
}

/* --- claim and translation -------------------------------------------------------------- */
static bool claim_conv(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  (void)r;
  if (n->n_inputs < 2 || n->n_inputs > 4 || n->n_outputs != 2 || !ir_output(g, n, 0) ||
      !ir_output(g, n, 1))
    return op_decline(why, "CausalConvWithState takes 2-4 inputs and exactly 2 outputs (Y and "
                           "present_state)");
  if (!cc_is_contrib(n)) {
    static const char *names[3] = {"channels_last", "dilation", "state_window"};
    static const int64_t defaults[3] = {0, 1, 0};
    for (int i = 0; i < 3; i++) {
      const ir_attr *a = ir_find_attr(n, names[i]);
      if (a && (a->type != IR_ATTR_INT || a->i != defaults[i]))
        return op_decline(why, "attribute %s is not part of the ai.onnx form of "
                               "CausalConvWithState (only its default %lld is accepted; use the "
                               "com.microsoft form)", names[i], (long long)defaults[i]);
    }
  }
  int64_t ndim = ir_attr_int(n, "ndim", 1), cl = ir_attr_int(n, "channels_last", 0);
  int64_t dil = ir_attr_int(n, "dilation", 1), window = ir_attr_int(n, "state_window", 0);
  if (ndim != 1)
    return op_decline(why, "ndim %lld: only the 1-D causal convolution (ndim=1) is translated",
                      (long long)ndim);
  if (cl != 0 && cl != 1)
    return op_decline(why, "channels_last must be 0 or 1 (is %lld)", (long long)cl);
  if (dil <= 0) return op_decline(why, "dilation must be >= 1 (is %lld)", (long long)dil);
  if (dil > INT32_MAX) return op_decline(why, "dilation %lld does not fit int32", (long long)dil);
  if (window < 0 || window > CC_MAX_WINDOW)
    return op_decline(why, "state_window %lld is outside 0..%d", (long long)window,
                      CC_MAX_WINDOW);
  if (cc_activation(n) == CC_ACT_UNKNOWN)
    return op_decline(why, "activation '%s' is not one of none, silu, swish",
                      ir_attr_string(n, "activation", ""));
  const ir_value *x = ir_input(g, n, 0), *w = ir_input(g, n, 1), *bias = ir_input(g, n, 2);
  const ir_value *past = ir_input(g, n, 3), *y = ir_output(g, n, 0), *pres = ir_output(g, n, 1);
  if (!x || !w) return op_decline(why, "CausalConvWithState needs input and weight");
  int t = x->elem_type;
  const ir_value *same[5] = {w, bias, past, y, pres};
  static const char *snames[5] = {"weight", "bias", "past_state", "output", "present_state"};
  for (int i = 0; i < 5; i++)
    if (same[i] && same[i]->elem_type != IR_UNDEFINED && same[i]->elem_type != t)
      return op_decline(why, "%s is %s, input is %s: they must share one float type", snames[i],
                        ir_elem_name(same[i]->elem_type), ir_elem_name(t));
  if (!cl && x->rank != 3)
    return op_decline(why, "channels-first input must be [B, C, L] (rank 3), has rank %d",
                      x->rank);
  if (cl && (x->rank < 3 || x->rank > 15))
    return op_decline(why, "channels-last input must be [B, L, d1..dn] with rank 3..15, has "
                           "rank %d", x->rank);
  if (w->rank != 3 || w->dims[0] <= 0 || w->dims[1] != 1 || w->dims[2] <= 0)
    return op_decline(why, "weight must be a static [C, 1, k] with C, k > 0 (depthwise)");
  int64_t c = w->dims[0], k = w->dims[2];
  int64_t xc = 1;
  for (int i = cl ? 2 : 1; i < (cl ? x->rank : 2); i++)
    xc = x->dims[i] < 0 || xc < 0 ? -1 : xc * x->dims[i];
  if (xc < 0)
    return op_decline(why, "the input's channel dims must be static (the weight has C = %lld)",
                      (long long)c);
  if (xc != c)
    return op_decline(why, "the input has %lld channels, the weight %lld", (long long)xc,
                      (long long)c);
  if (k - 1 > INT32_MAX / dil)
    return op_decline(why, "receptive field (k - 1) * dilation = %lld * %lld does not fit int32",
                      (long long)(k - 1), (long long)dil);
  int64_t carry = (k - 1) * dil;
  if (bias && (bias->rank != 1 || (bias->dims[0] >= 0 && bias->dims[0] != c)))
    return op_decline(why, "bias must be [C] = [%lld]", (long long)c);
  int64_t dims[MX_MAX_RANK + 1];
  int srank = cc_state_dims(x, cl, c, carry, window, dims);
  /* (rank 0 is how a state of unknown shape arrives; the translator checks it each run) */
  if (past && past->rank > 0 && !cc_state_ok(past, dims, srank, "past_state", why)) return false;
  if (pres->rank > 0 && !cc_state_ok(pres, dims, srank, "present_state", why)) return false;
  return true;
}

static int translate_conv(tr_ctx *t, const ir_node *n, const op_row *r) {
  (void)r;
  mx_array x = tr_in(t, 0), w = tr_in(t, 1), bias = tr_in(t, 2), past = tr_in(t, 3);
  cc_geom g = {.channels_last = ir_attr_int(n, "channels_last", 0) != 0,
               .dil = (int)ir_attr_int(n, "dilation", 1),
               .window = (int)ir_attr_int(n, "state_window", 0),
               .rank = mx_ndim(x),
               .xshape = mx_shape(x)};
  if (mx_ndim(w) != 3 || g.rank < 3 || (!g.channels_last && g.rank != 3))
    return tr_fail(t, "input/weight ranks do not fit the layout");
  g.batch = mx_dim(x, 0);
  g.c = mx_dim(w, 0);
  g.k = mx_dim(w, 2);
  if ((int64_t)(g.k - 1) * g.dil + (int64_t)mx_dim(x, g.channels_last ? 1 : 2) > INT32_MAX)
    return tr_fail(t, "the padded length (k - 1) * dilation + L does not fit int32");
  g.carry = (g.k - 1) * g.dil;
  int xc = 1;
  if (g.channels_last) {
    g.len = mx_dim(x, 1);
    for (int i = 2; i < g.rank; i++) xc *= mx_dim(x, i);
  } else {
    g.len = mx_dim(x, 2);
    xc = mx_dim(x, 1);
  }
  if (xc != g.c) return tr_fail(t, "the input has %d channels, the weight %d", xc, g.c);
  mx_dtype dt = mx_dtype_of(x);
  mx_array xs, pst, padded;
  int bl[3] = {g.batch, g.len, g.c}, perm[3] = {0, 2, 1};
  if (g.channels_last) TR_TRY(mx_reshape(t->mx, &xs, x, bl, 3));
  else TR_TRY(mx_transpose(t->mx, &xs, x, perm, 3));
  if (past) {
    TR_TRY(cc_past(t, &g, past, &pst));
  } else {
    int zs[3] = {g.batch, g.carry, g.c};
    TR_TRY(cc_zeros(t, &pst, zs, 3, dt));
  }
  mx_array parts[2] = {pst, xs};
  TR_TRY(mx_concatenate(t->mx, &padded, parts, 2, 1));

  /* Y = sum_j padded[:, j*dil : j*dil + L, :] * w[:, 0, j] */
  mx_dtype work = dt == MX_FLOAT16 || dt == MX_BFLOAT16 ? MX_FLOAT32 : dt;
  mx_array pw = padded, wt, acc = NULL;
  if (work != dt) TR_TRY(mx_astype(t->mx, &pw, padded, work));
  int ck[2] = {g.c, g.k}, tperm[2] = {1, 0};
  TR_TRY(mx_reshape(t->mx, &wt, w, ck, 2));
  TR_TRY(mx_transpose(t->mx, &wt, wt, tperm, 2));
  if (mx_dtype_of(wt) != work) TR_TRY(mx_astype(t->mx, &wt, wt, work));
  for (int j = 0; j < g.k; j++) {
    mx_array tap, wj, prod;
    int ws[2] = {j, 0}, we[2] = {j + 1, g.c}, step[2] = {1, 1};
    TR_TRY(cc_slice_time(t, &tap, pw, j * g.dil, j * g.dil + g.len));
    TR_TRY(mx_slice(t->mx, &wj, wt, ws, we, step, 2));
    TR_TRY(mx_binary(t->mx, &prod, MX_MULTIPLY, tap, wj));
    if (acc) TR_TRY(mx_binary(t->mx, &acc, MX_ADD, acc, prod));
    else acc = prod;
  }
  if (bias) {
    if (mx_ndim(bias) != 1 || mx_dim(bias, 0) != g.c)
      return tr_fail(t, "bias must be [C] = [%d]", g.c);
    if (mx_dtype_of(bias) != work) TR_TRY(mx_astype(t->mx, &bias, bias, work));
    TR_TRY(mx_binary(t->mx, &acc, MX_ADD, acc, bias));
  }
  if (cc_activation(n) == CC_ACT_SILU) {
    mx_array sig;
    TR_TRY(mx_unary(t->mx, &sig, MX_SIGMOID, acc));
    TR_TRY(mx_binary(t->mx, &acc, MX_MULTIPLY, acc, sig));
  }
  mx_dtype ydt = tr_out_dtype(t, 0);
  if (mx_dtype_of(acc) != ydt) TR_TRY(mx_astype(t->mx, &acc, acc, ydt));
  mx_array y;
  if (g.channels_last) TR_TRY(mx_reshape(t->mx, &y, acc, g.xshape, g.rank));
  else TR_TRY(mx_transpose(t->mx, &y, acc, perm, 3));
  TR_TRY(tr_out(t, 0, y));

  mx_array state;
  if (g.window) {
    TR_TRY(cc_window_state(t, &g, padded, past, &state));
  } else {
    TR_TRY(cc_slice_time(t, &state, padded, g.len, g.len + g.carry));
    TR_TRY(cc_to_state(t, &g, &state, state));
  }
  mx_dtype sdt = tr_out_dtype(t, 1);
  if (mx_dtype_of(state) != sdt) TR_TRY(mx_astype(t->mx, &state, state, sdt));
  return tr_out(t, 1, state);
}

const op_row ops_ssm_conv_rows[] = {
    {"com.microsoft", "CausalConvWithState", 1, 1, claim_conv, translate_conv, OP_SHAPE_KEYED,
     OP_FLOATS, 0,
     "ndim 1; channels-first or channels-last, dilation, state_window 0..8, silu; keyed: "
     "slices depend on length and kernel"},
    {"", "CausalConvWithState", 27, 27, claim_conv, translate_conv, OP_SHAPE_KEYED, OP_FLOATS, 0,
     "channels-first, no dilation or window (the ai.onnx form); keyed on shape"},
    OP_ROWS_END,
};
