/*
 * Recognises the node chains host_math.c's kernels replace whole: Gelu spelled in five nodes
 * (Div, Erf, Add, Mul, Mul, as exported from frameworks that predate ONNX's Gelu), and a Softmax
 * whose input was scaled by a constant and had a mask added (attention). Matching walks back from
 * the chain's last node through producers; every inner value must be read once and not be an
 * output, and every constant must hold one element whose rank does not widen the result.
 */
#include "ops/host_patterns.h"

#include <math.h>
#include <string.h>

/* Value v's producer when it is an ONNX-domain node of type op, else NULL. */
static const ir_node *producer(const tr_ctx *t, int v, const char *op) {
  if (v == IR_NONE || t->g->values[v].producer == IR_NONE) return NULL;
  const ir_node *p = &t->g->nodes[t->g->values[v].producer];
  return strcmp(p->op_type, op) == 0 && p->domain[0] == 0 ? p : NULL;
}

/* A value only the chain reads: a matched chain may skip computing it. */
static bool inner(const tr_ctx *t, int v) {
  return v != IR_NONE && t->g->values[v].readers == 1 && !t->g->values[v].is_graph_output;
}

/* Value v is a one-element float constant of rank <= max_rank; its value in *out. */
static bool constant_scalar(tr_ctx *t, int v, int max_rank, double *out) {
  mx_array c = v != IR_NONE && t->const_values ? t->const_values[v] : NULL;
  return c && mx_size(c) == 1 && mx_ndim(c) <= max_rank && mx_dtype_is_float(mx_dtype_of(c)) &&
         tr_scalar_value(t->mx, c, out) == MX_OK;
}

static bool constant_near(tr_ctx *t, int v, int max_rank, double want) {
  double got;
  return constant_scalar(t, v, max_rank, &got) && fabs(got - want) <= 1e-6 * fabs(want);
}

/* a is 1 + erf(x / sqrt 2), a chain of inner values. */
static bool one_plus_erf_of(tr_ctx *t, int a, int x, int rank) {
  const ir_node *add = producer(t, a, "Add");
  if (!add || !inner(t, a)) return false;
  for (int i = 0; i < 2; i++) {
    int e = add->inputs[i];
    const ir_node *erf = producer(t, e, "Erf");
    if (!erf || !inner(t, e) || !constant_near(t, add->inputs[1 - i], rank, 1.0)) continue;
    int d = erf->inputs[0];
    if (!inner(t, d)) return false;
    const ir_node *div = producer(t, d, "Div"), *mul = producer(t, d, "Mul");
    if (div) return div->inputs[0] == x && constant_near(t, div->inputs[1], rank, M_SQRT2);
    if (mul)
      for (int j = 0; j < 2; j++)
        if (mul->inputs[j] == x && constant_near(t, mul->inputs[1 - j], rank, M_SQRT1_2))
          return true;
    return false;
  }
  return false;
}

int hp_gelu_input(tr_ctx *t, const ir_node *n) {
  /* the three factors: one of n's inputs is a Mul of two of them */
  for (int e = 0; e < 2; e++) {
    const ir_node *m = producer(t, n->inputs[e], "Mul");
    if (!m || !inner(t, n->inputs[e])) continue;
    int f[3] = {m->inputs[0], m->inputs[1], n->inputs[1 - e]};
    for (int h = 0; h < 3; h++)
      for (int k = 0; k < 3; k++) {
        int x = f[3 - h - k];
        if (h == k || x == IR_NONE || !t->values[x]) continue;
        int rank = mx_ndim(t->values[x]);
        if (constant_near(t, f[h], rank, 0.5) && one_plus_erf_of(t, f[k], x, rank)) return x;
      }
  }
  return IR_NONE;
}

/* The node that reads value v, when one node reads it once. */
static const ir_node *only_reader(const tr_ctx *t, int v) {
  if (!inner(t, v)) return NULL;
  for (int i = 0; i < t->g->n_nodes; i++)
    for (int k = 0; k < t->g->nodes[i].n_inputs; k++)
      if (t->g->nodes[i].inputs[k] == v) return &t->g->nodes[i];
  return NULL;
}

bool hp_erf_in_gelu(tr_ctx *t, const ir_node *n) {
  const ir_node *add = only_reader(t, n->outputs[0]);
  const ir_node *mul = add ? only_reader(t, add->outputs[0]) : NULL;
  if (!mul || strcmp(mul->op_type, "Mul") != 0) return false;
  if (hp_gelu_input(t, mul) != IR_NONE) return true; /* (1 + erf) * ... was the last Mul */
  const ir_node *last = only_reader(t, mul->outputs[0]);
  return last && strcmp(last->op_type, "Mul") == 0 && hp_gelu_input(t, last) != IR_NONE;
}

/* mask may be added to scores: float32, its axes aligned with scores' trailing ones, each 1 or
 * the scores', the last one whole (a row of the softmax). */
static bool mask_fits(mx_array mask, mx_array scores) {
  int rank = mx_ndim(scores), offset = rank - (mask ? mx_ndim(mask) : 0);
  if (!mask || mx_dtype_of(mask) != MX_FLOAT32 || offset < 0 || mx_ndim(mask) == 0 ||
      mx_dim(mask, -1) != mx_dim(scores, -1))
    return false;
  for (int i = offset; i < rank; i++) {
    int d = mx_shape(mask)[i - offset];
    if (d != 1 && d != mx_shape(scores)[i]) return false;
  }
  return true;
}

void hp_softmax_input_of(tr_ctx *t, const ir_node *softmax, hp_softmax_input *in) {
  *in = (hp_softmax_input){softmax->inputs[0], IR_NONE, 1.0f};
  const ir_node *add = producer(t, in->scores, "Add");
  if (add && inner(t, in->scores))
    for (int i = 0; i < 2; i++) {
      mx_array s = t->values[add->inputs[i]], m = t->values[add->inputs[1 - i]];
      if (s && mx_dtype_of(s) == MX_FLOAT32 && mask_fits(m, s)) {
        in->scores = add->inputs[i], in->mask = add->inputs[1 - i];
        break;
      }
    }
  const ir_node *mul = producer(t, in->scores, "Mul"), *div = producer(t, in->scores, "Div");
  if ((!mul && !div) || !inner(t, in->scores)) return;
  const ir_node *p = mul ? mul : div;
  for (int i = 0; i < (mul ? 2 : 1); i++) {
    mx_array s = t->values[p->inputs[i]];
    double c;
    if (!s || mx_dtype_of(s) != MX_FLOAT32 ||
        !constant_scalar(t, p->inputs[1 - i], mx_ndim(s), &c) || (div && c == 0.0))
      continue;
    in->scores = p->inputs[i], in->scale = (float)(mul ? c : 1.0 / c);
    return;
  }
}
