/*
 * RNN, GRU and LSTM (ai.onnx 7 and 14..22; 14 adds `layout`, 22 only bfloat16): the recurrences
 * composed of MLX ops one time step after another, unrolled at translation over T read from X's
 * concrete shape (so the rows compile keyed on shape). Per direction, X W^T + Wb is one matmul
 * over all steps; each step adds H R^T + Rb and applies the cell: RNN Ht = tanh(.); GRU gates
 * z, r, h (linear_before_reset applies r after the recurrent matmul, Rbh inside); LSTM gates
 * i, o, f, c with optional peepholes P (i, o, f). Arithmetic is float32, outputs are cast to the
 * declared type. sequence_lens masks per batch entry: past its length a step leaves the state
 * unchanged and writes zeros to Y, so Y_h/Y_c hold each sequence's last valid state (reverse
 * directions start at length - 1 as well). Only the default activations are claimed (custom
 * activations, activation_alpha/beta, clip and LSTM input_forget are declined with reasons).
 */
#include "ops/families.h"
#include "plan/translate.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { CELL_RNN, CELL_GRU, CELL_LSTM };
enum { RI_X, RI_W, RI_R, RI_B, RI_SEQ, RI_H0, RI_C0, RI_P };

static const char *cell_name(int cell) {
  return cell == CELL_RNN ? "RNN" : cell == CELL_GRU ? "GRU" : "LSTM";
}
static int cell_gates(int cell) { return cell == CELL_RNN ? 1 : cell == CELL_GRU ? 3 : 4; }
/* The ONNX default activations of one direction. */
static int cell_acts(int cell, const char **acts) {
  if (cell == CELL_RNN) return acts[0] = "Tanh", 1;
  acts[0] = "Sigmoid";
  acts[1] = acts[2] = "Tanh";
  return cell == CELL_GRU ? 2 : 3;
}

/* 1 forward, 2 reverse, 3 bidirectional; 0 unknown. */
static int rnn_direction(const ir_node *n) {
  const char *d = ir_attr_string(n, "direction", "forward");
  if (strcmp(d, "forward") == 0) return 1;
  if (strcmp(d, "reverse") == 0) return 2;
  if (strcmp(d, "bidirectional") == 0) return 3;
  return 0;
}

static bool rnn_is_float(int t) { return t == IR_FLOAT || t == IR_FLOAT16 || t == IR_BFLOAT16; }

/* --- claim ----------------------------------------------------------------------------------- */
static bool claim_rnn(const ir_graph *g, const ir_node *n, const op_row *r, op_why why) {
  int cell = r->code;
  const char *name = cell_name(cell);
  int dir = rnn_direction(n);
  if (!dir)
    return op_decline(why, "direction '%s' is not forward, reverse or bidirectional",
                      ir_attr_string(n, "direction", ""));
  int dirs = dir == 3 ? 2 : 1;
  if (ir_find_attr(n, "activation_alpha") || ir_find_attr(n, "activation_beta"))
    return op_decline(why, "activation_alpha/activation_beta are not supported (only the default "
                           "activations are claimed)");
  if (ir_find_attr(n, "clip"))
    return op_decline(why, "the clip attribute is not supported (remove it to run on MLX)");
  if (cell == CELL_LSTM && ir_attr_int(n, "input_forget", 0) != 0)
    return op_decline(why, "LSTM input_forget=1 (coupled input and forget gates) is not "
                           "supported");
  const ir_attr *acts = ir_find_attr(n, "activations");
  if (acts) {
    const char *def[3];
    int per = cell_acts(cell, def);
    if (acts->type != IR_ATTR_STRINGS || !acts->s || (int)acts->count < per * dirs)
      return op_decline(why, "%s activations must be %d per direction (the defaults)", name, per);
    const char *s = acts->s;
    for (int i = 0; i < per * dirs; i++, s += strlen(s) + 1)
      if (strcasecmp(s, def[i % per]) != 0)
        return op_decline(why, "custom activation '%s' (position %d) is not supported; only the "
                               "defaults (%s%s%s%s%s) are claimed", s, i, def[0],
                          per > 1 ? ", " : "", per > 1 ? def[1] : "", per > 2 ? ", " : "",
                          per > 2 ? def[2] : "");
  }
  const ir_value *x = ir_input(g, n, RI_X), *w = ir_input(g, n, RI_W), *rr = ir_input(g, n, RI_R);
  if (!x || !w || !rr) return op_decline(why, "%s needs X, W and R", name);
  if (!rnn_is_float(x->elem_type))
    return op_decline(why, "X must be float32, float16 or bfloat16 (is %s)",
                      ir_elem_name(x->elem_type));
  static const int tin[] = {RI_W, RI_R, RI_B, RI_H0, RI_C0, RI_P};
  static const char *tnames[] = {"W", "R", "B", "initial_h", "initial_c", "P"};
  for (int i = 0; i < 6; i++) {
    const ir_value *v = ir_input(g, n, tin[i]);
    if (v && v->elem_type != x->elem_type)
      return op_decline(why, "%s must have X's type %s (is %s)", tnames[i],
                        ir_elem_name(x->elem_type), ir_elem_name(v->elem_type));
  }
  if (cell != CELL_LSTM && (ir_input(g, n, RI_C0) || ir_input(g, n, RI_P)))
    return op_decline(why, "%s takes at most 6 inputs", name);
  const ir_value *seq = ir_input(g, n, RI_SEQ);
  if (seq && seq->elem_type != IR_INT32)
    return op_decline(why, "sequence_lens must be int32 (is %s)", ir_elem_name(seq->elem_type));
  if ((x->rank >= 0 && x->rank != 3) || (w->rank >= 0 && w->rank != 3) ||
      (rr->rank >= 0 && rr->rank != 3))
    return op_decline(why, "X, W and R must have rank 3 (have %d, %d, %d)", x->rank, w->rank,
                      rr->rank);
  if (w->rank == 3 && w->dims[0] >= 0 && w->dims[0] != dirs)
    return op_decline(why, "W's first dim %lld does not match %d direction(s)",
                      (long long)w->dims[0], dirs);
  int64_t hs = ir_attr_int(n, "hidden_size", -1);
  if (rr->rank == 3 && rr->dims[2] >= 0 && hs >= 0 && rr->dims[2] != hs)
    return op_decline(why, "hidden_size %lld does not match R's last dim %lld", (long long)hs,
                      (long long)rr->dims[2]);
  int64_t layout = ir_attr_int(n, "layout", 0);
  if (layout != 0 && layout != 1)
    return op_decline(why, "layout %lld is not 0 or 1", (long long)layout);
  for (int i = 0; i < n->n_outputs; i++) {
    const ir_value *o = ir_output(g, n, i);
    if (o && o->elem_type != IR_UNDEFINED && o->elem_type != x->elem_type)
      return op_decline(why, "output %d must have X's type %s (declared %s)", i,
                        ir_elem_name(x->elem_type), ir_elem_name(o->elem_type));
  }
  return true;
}

/* --- translation helpers ------------------------------------------------------------------- */
typedef struct rnn_geom {
  int cell, t, b, in, h, gh, dirs, dir;
  bool layout, lbr;
} rnn_geom;

static int rnn_f32(tr_ctx *t, mx_array *a) {
  if (mx_dtype_of(*a) != MX_FLOAT32) TR_TRY(mx_astype(t->mx, a, *a, MX_FLOAT32));
  return MX_OK;
}

/* Entry i of axis 0, without that axis. */
static int rnn_row(tr_ctx *t, mx_array a, int i, mx_array *out) {
  TR_TRY(tr_slice_axis(t, a, 0, i, i + 1, out));
  return mx_reshape(t->mx, out, *out, mx_shape(a) + 1, mx_ndim(a) - 1);
}

/* Columns [k*h, (k+1)*h) of a [B, G*h] (or [G*h]) array: gate k. */
static int rnn_gate(tr_ctx *t, mx_array a, int k, int h, mx_array *out) {
  return tr_slice_axis(t, a, mx_ndim(a) - 1, k * h, (k + 1) * h, out);
}

static int rnn_zeros(tr_ctx *t, mx_array *out, const int *shape, int n) {
  mx_array zero;
  TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
  return mx_full(t->mx, out, shape, n, zero);
}

/* A [D, B, H] state input (layout 1: [B, D, H]) as float32 [D, B, H], or zeros. */
static int rnn_state_in(tr_ctx *t, const rnn_geom *g, int i, const char *what, mx_array *out) {
  mx_array s = tr_in(t, i);
  int shape[3] = {g->dirs, g->b, g->h};
  if (!s) return rnn_zeros(t, out, shape, 3);
  int want[3] = {g->layout ? g->b : g->dirs, g->layout ? g->dirs : g->b, g->h};
  if (mx_ndim(s) != 3 || memcmp(mx_shape(s), want, sizeof want) != 0)
    return tr_fail(t, "%s must be [%d, %d, %d]", what, want[0], want[1], want[2]);
  if (g->layout) {
    int perm[3] = {1, 0, 2};
    TR_TRY(mx_transpose(t->mx, &s, s, perm, 3));
  }
  *out = s;
  return rnn_f32(t, out);
}

static int rnn_geometry(tr_ctx *t, const ir_node *n, const op_row *r, rnn_geom *g) {
  memset(g, 0, sizeof *g);
  g->cell = r->code;
  g->dir = rnn_direction(n);
  g->dirs = g->dir == 3 ? 2 : 1;
  g->layout = ir_attr_int(n, "layout", 0) == 1;
  g->lbr = ir_attr_int(n, "linear_before_reset", 0) != 0;
  mx_array x = tr_in(t, RI_X), w = tr_in(t, RI_W), rr = tr_in(t, RI_R);
  if (mx_ndim(x) != 3 || mx_ndim(w) != 3 || mx_ndim(rr) != 3)
    return tr_fail(t, "X, W and R must have rank 3");
  g->t = mx_dim(x, g->layout ? 1 : 0);
  g->b = mx_dim(x, g->layout ? 0 : 1);
  g->in = mx_dim(x, 2);
  g->h = mx_dim(rr, 2);
  g->gh = cell_gates(g->cell) * g->h;
  int64_t hs = ir_attr_int(n, "hidden_size", g->h);
  if (hs != g->h) return tr_fail(t, "hidden_size %lld does not match R's last dim %d",
                                 (long long)hs, g->h);
  if (mx_dim(w, 0) != g->dirs || mx_dim(w, 1) != g->gh || mx_dim(w, 2) != g->in)
    return tr_fail(t, "W must be [%d, %d, %d]", g->dirs, g->gh, g->in);
  if (mx_dim(rr, 0) != g->dirs || mx_dim(rr, 1) != g->gh)
    return tr_fail(t, "R must be [%d, %d, %d]", g->dirs, g->gh, g->h);
  mx_array b = tr_in(t, RI_B), p = tr_in(t, RI_P), seq = tr_in(t, RI_SEQ);
  if (b && (mx_ndim(b) != 2 || mx_dim(b, 0) != g->dirs || mx_dim(b, 1) != 2 * g->gh))
    return tr_fail(t, "B must be [%d, %d]", g->dirs, 2 * g->gh);
  if (p && (mx_ndim(p) != 2 || mx_dim(p, 0) != g->dirs || mx_dim(p, 1) != 3 * g->h))
    return tr_fail(t, "P must be [%d, %d]", g->dirs, 3 * g->h);
  if (seq && (mx_ndim(seq) != 1 || mx_dim(seq, 0) != g->b))
    return tr_fail(t, "sequence_lens must be [%d]", g->b);
  return MX_OK;
}

/* One direction's weights, float32: xw = X W^T + Wb [T, B, GH], rt = R^T [H, GH], rb [GH]
 * (NULL without B), p [3H] (NULL without P). */
typedef struct rnn_dir {
  mx_array xw, rt, rb, p;
} rnn_dir;

static int rnn_dir_prepare(tr_ctx *t, const rnn_geom *g, mx_array x, int d, rnn_dir *o) {
  mx_array w, r;
  int perm[2] = {1, 0};
  TR_TRY(rnn_row(t, tr_in(t, RI_W), d, &w));
  TR_TRY(rnn_f32(t, &w));
  TR_TRY(mx_transpose(t->mx, &w, w, perm, 2));
  TR_TRY(mx_matmul(t->mx, &o->xw, x, w));
  TR_TRY(rnn_row(t, tr_in(t, RI_R), d, &r));
  TR_TRY(rnn_f32(t, &r));
  TR_TRY(mx_transpose(t->mx, &o->rt, r, perm, 2));
  o->rb = o->p = NULL;
  mx_array b = tr_in(t, RI_B), p = tr_in(t, RI_P);
  if (b) {
    mx_array bd, wb;
    TR_TRY(rnn_row(t, b, d, &bd));
    TR_TRY(rnn_f32(t, &bd));
    TR_TRY(tr_slice_axis(t, bd, 0, 0, g->gh, &wb));
    TR_TRY(tr_slice_axis(t, bd, 0, g->gh, 2 * g->gh, &o->rb));
    TR_TRY(mx_binary(t->mx, &o->xw, MX_ADD, o->xw, wb));
  }
  if (p) {
    TR_TRY(rnn_row(t, p, d, &o->p));
    TR_TRY(rnn_f32(t, &o->p));
  }
  return MX_OK;
}

/* h @ rt (+ rb): the recurrent term of all gates [B, GH], or of gates [k0, k1) when rt, rb
 * are already cut. */
static int rnn_recur(tr_ctx *t, mx_array h, mx_array rt, mx_array rb, mx_array *out) {
  TR_TRY(mx_matmul(t->mx, out, h, rt));
  if (rb) TR_TRY(mx_binary(t->mx, out, MX_ADD, *out, rb));
  return MX_OK;
}

static int rnn_act(tr_ctx *t, mx_unary_op op, mx_array a, mx_array *out) {
  return mx_unary(t->mx, out, op, a);
}

/* One time step of the cell: (h, c) -> (*hn, *cn). xt is [B, GH]. */
static int rnn_cell_step(tr_ctx *t, const rnn_geom *g, const rnn_dir *dw, mx_array xt,
                         mx_array h, mx_array c, mx_array *hn, mx_array *cn) {
  int H = g->h;
  mx_array a;
  if (g->cell == CELL_RNN) {
    TR_TRY(rnn_recur(t, h, dw->rt, dw->rb, &a));
    TR_TRY(mx_binary(t->mx, &a, MX_ADD, a, xt));
    return rnn_act(t, MX_TANH, a, hn);
  }
  if (g->cell == CELL_GRU) {
    mx_array rt_zr, rt_h, rb_zr = NULL, rb_h = NULL, x_zr, x_h, zr, z, r, hh;
    TR_TRY(tr_slice_axis(t, dw->rt, 1, 0, 2 * H, &rt_zr));
    TR_TRY(rnn_gate(t, dw->rt, 2, H, &rt_h));
    if (dw->rb) {
      TR_TRY(tr_slice_axis(t, dw->rb, 0, 0, 2 * H, &rb_zr));
      TR_TRY(rnn_gate(t, dw->rb, 2, H, &rb_h));
    }
    TR_TRY(tr_slice_axis(t, xt, 1, 0, 2 * H, &x_zr));
    TR_TRY(rnn_gate(t, xt, 2, H, &x_h));
    TR_TRY(rnn_recur(t, h, rt_zr, rb_zr, &zr));
    TR_TRY(mx_binary(t->mx, &zr, MX_ADD, zr, x_zr));
    TR_TRY(rnn_act(t, MX_SIGMOID, zr, &zr));
    TR_TRY(rnn_gate(t, zr, 0, H, &z));
    TR_TRY(rnn_gate(t, zr, 1, H, &r));
    if (g->lbr) {
      TR_TRY(rnn_recur(t, h, rt_h, rb_h, &hh));
      TR_TRY(mx_binary(t->mx, &hh, MX_MULTIPLY, r, hh));
    } else {
      mx_array rh;
      TR_TRY(mx_binary(t->mx, &rh, MX_MULTIPLY, r, h));
      TR_TRY(rnn_recur(t, rh, rt_h, rb_h, &hh));
    }
    TR_TRY(mx_binary(t->mx, &hh, MX_ADD, hh, x_h));
    TR_TRY(rnn_act(t, MX_TANH, hh, &hh));
    /* Ht = (1 - z) hh + z h = hh + z (h - hh) */
    mx_array dlt;
    TR_TRY(mx_binary(t->mx, &dlt, MX_SUBTRACT, h, hh));
    TR_TRY(mx_binary(t->mx, &dlt, MX_MULTIPLY, z, dlt));
    return mx_binary(t->mx, hn, MX_ADD, hh, dlt);
  }
  /* LSTM: gates i, o, f, c; peepholes P = (Pi, Po, Pf). */
  mx_array gi, go, gf, gc, pk;
  TR_TRY(rnn_recur(t, h, dw->rt, dw->rb, &a));
  TR_TRY(mx_binary(t->mx, &a, MX_ADD, a, xt));
  TR_TRY(rnn_gate(t, a, 0, H, &gi));
  TR_TRY(rnn_gate(t, a, 1, H, &go));
  TR_TRY(rnn_gate(t, a, 2, H, &gf));
  TR_TRY(rnn_gate(t, a, 3, H, &gc));
  if (dw->p) {
    TR_TRY(rnn_gate(t, dw->p, 0, H, &pk));
    TR_TRY(mx_binary(t->mx, &pk, MX_MULTIPLY, pk, c));
    TR_TRY(mx_binary(t->mx, &gi, MX_ADD, gi, pk));
    TR_TRY(rnn_gate(t, dw->p, 2, H, &pk));
    TR_TRY(mx_binary(t->mx, &pk, MX_MULTIPLY, pk, c));
    TR_TRY(mx_binary(t->mx, &gf, MX_ADD, gf, pk));
  }
  TR_TRY(rnn_act(t, MX_SIGMOID, gi, &gi));
  TR_TRY(rnn_act(t, MX_SIGMOID, gf, &gf));
  TR_TRY(rnn_act(t, MX_TANH, gc, &gc));
  mx_array fc, ig;
  TR_TRY(mx_binary(t->mx, &fc, MX_MULTIPLY, gf, c));
  TR_TRY(mx_binary(t->mx, &ig, MX_MULTIPLY, gi, gc));
  TR_TRY(mx_binary(t->mx, cn, MX_ADD, fc, ig));
  if (dw->p) {
    TR_TRY(rnn_gate(t, dw->p, 1, H, &pk));
    TR_TRY(mx_binary(t->mx, &pk, MX_MULTIPLY, pk, *cn));
    TR_TRY(mx_binary(t->mx, &go, MX_ADD, go, pk));
  }
  TR_TRY(rnn_act(t, MX_SIGMOID, go, &go));
  mx_array tc;
  TR_TRY(rnn_act(t, MX_TANH, *cn, &tc));
  return mx_binary(t->mx, hn, MX_MULTIPLY, go, tc);
}

/* Runs direction d (reverse when `rev`) over all steps: ys[step] = [B, H] output rows in time
 * order, *h and *c updated to the final states. seq: [B, 1] int32 lengths or NULL. */
static int rnn_run_dir(tr_ctx *t, const rnn_geom *g, const rnn_dir *dw, bool rev, mx_array seq,
                       mx_array *h, mx_array *c, mx_array *ys) {
  mx_array zero = NULL;
  if (seq) TR_TRY(tr_scalar(t, &zero, 0.0, MX_FLOAT32));
  for (int k = 0; k < g->t; k++) {
    int step = rev ? g->t - 1 - k : k;
    mx_array xt, hn, cn = NULL;
    TR_TRY(rnn_row(t, dw->xw, step, &xt));
    TR_TRY(rnn_cell_step(t, g, dw, xt, *h, *c, &hn, &cn));
    if (seq) {
      mx_array ts, m;
      TR_TRY(tr_scalar(t, &ts, (double)step, MX_INT32));
      TR_TRY(mx_binary(t->mx, &m, MX_LESS, ts, seq)); /* [B, 1]: step inside the sequence */
      TR_TRY(mx_where(t->mx, &ys[step], m, hn, zero));
      TR_TRY(mx_where(t->mx, h, m, hn, *h));
      if (cn) TR_TRY(mx_where(t->mx, c, m, cn, *c));
    } else {
      ys[step] = *h = hn;
      if (cn) *c = cn;
    }
  }
  return MX_OK;
}

/* Stacks n arrays of equal shape along a new axis `axis`. */
static int rnn_stack(tr_ctx *t, mx_array *a, int n, int axis, mx_array *out) {
  int nd = mx_ndim(a[0]), shape[MX_MAX_RANK];
  for (int i = 0, j = 0; i <= nd; i++) shape[i] = i == axis ? 1 : mx_dim(a[0], j++);
  for (int i = 0; i < n; i++) TR_TRY(mx_reshape(t->mx, &a[i], a[i], shape, nd + 1));
  if (n == 1) return *out = a[0], MX_OK;
  return mx_concatenate(t->mx, out, a, (size_t)n, axis);
}

static int rnn_out_state(tr_ctx *t, const rnn_geom *g, int i, mx_array *states) {
  if (!tr_has_out(t, i)) return MX_OK;
  mx_array s;
  TR_TRY(rnn_stack(t, states, g->dirs, g->layout ? 1 : 0, &s)); /* [D,B,H] or [B,D,H] */
  return tr_out_cast(t, i, s);
}

static int translate_rnn(tr_ctx *t, const ir_node *n, const op_row *r) {
  rnn_geom g;
  TR_TRY(rnn_geometry(t, n, r, &g));
  mx_array x = tr_in(t, RI_X), seq = tr_in(t, RI_SEQ), h0, c0;
  TR_TRY(rnn_f32(t, &x));
  if (g.layout) {
    int perm[3] = {1, 0, 2};
    TR_TRY(mx_transpose(t->mx, &x, x, perm, 3)); /* [T, B, I] */
  }
  if (seq) {
    int s2[2] = {g.b, 1};
    TR_TRY(mx_reshape(t->mx, &seq, seq, s2, 2));
  }
  TR_TRY(rnn_state_in(t, &g, RI_H0, "initial_h", &h0));
  TR_TRY(rnn_state_in(t, &g, RI_C0, "initial_c", &c0));
  mx_array hs[2], cs[2], ydir[2];
  mx_array *ys = malloc(sizeof(mx_array) * (size_t)(g.t > 0 ? g.t : 1));
  if (!ys) return tr_fail(t, "out of memory");
  int rc = MX_OK;
  for (int d = 0; d < g.dirs && rc == MX_OK; d++) {
    bool rev = g.dir == 2 || d == 1;
    rnn_dir dw;
    rc = rnn_row(t, h0, d, &hs[d]);
    if (rc == MX_OK) rc = rnn_row(t, c0, d, &cs[d]);
    if (rc == MX_OK) rc = rnn_dir_prepare(t, &g, x, d, &dw);
    if (rc == MX_OK) rc = rnn_run_dir(t, &g, &dw, rev, seq, &hs[d], &cs[d], ys);
    if (rc == MX_OK && tr_has_out(t, 0)) {
      if (g.t == 0) {
        int zs[3] = {0, g.b, g.h};
        rc = rnn_zeros(t, &ydir[d], zs, 3);
      } else {
        rc = rnn_stack(t, ys, g.t, 0, &ydir[d]); /* [T, B, H] */
      }
    }
  }
  free(ys);
  if (rc != MX_OK) return rc;
  if (tr_has_out(t, 0)) {
    mx_array y;
    TR_TRY(rnn_stack(t, ydir, g.dirs, 1, &y)); /* [T, D, B, H] */
    if (g.layout) {
      int perm[4] = {2, 0, 1, 3}; /* [B, T, D, H] */
      TR_TRY(mx_transpose(t->mx, &y, y, perm, 4));
    }
    TR_TRY(tr_out_cast(t, 0, y));
  }
  TR_TRY(rnn_out_state(t, &g, 1, hs));
  if (g.cell == CELL_LSTM) TR_TRY(rnn_out_state(t, &g, 2, cs));
  return MX_OK;
}

const op_row ops_rnn_rows[] = {
    {"", "RNN", 7, 13, claim_rnn, translate_rnn, OP_SHAPE_KEYED, OP_FLOATS, CELL_RNN,
     "default activations only (no clip, alpha/beta); time loop unrolled over T, so keyed on "
     "shape", NULL},
    {"", "RNN", 14, 22, claim_rnn, translate_rnn, OP_SHAPE_KEYED, OP_FLOATS, CELL_RNN,
     "adds layout; default activations only; unrolled over T, keyed on shape", NULL},
    {"", "GRU", 7, 13, claim_rnn, translate_rnn, OP_SHAPE_KEYED, OP_FLOATS, CELL_GRU,
     "both linear_before_reset forms; default activations only; unrolled over T, keyed", NULL},
    {"", "GRU", 14, 22, claim_rnn, translate_rnn, OP_SHAPE_KEYED, OP_FLOATS, CELL_GRU,
     "adds layout; default activations only; unrolled over T, keyed on shape", NULL},
    {"", "LSTM", 7, 13, claim_rnn, translate_rnn, OP_SHAPE_KEYED, OP_FLOATS, CELL_LSTM,
     "peepholes; default activations, no input_forget or clip; unrolled over T, keyed", NULL},
    {"", "LSTM", 14, 22, claim_rnn, translate_rnn, OP_SHAPE_KEYED, OP_FLOATS, CELL_LSTM,
     "adds layout; default activations, no input_forget or clip; unrolled over T, keyed", NULL},
    OP_ROWS_END,
};
