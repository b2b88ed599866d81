/*
 * Recognises the node chains host kernels replace whole: Gelu spelled in five nodes (Div, Erf,
 * Add, Mul, Mul, as exported from frameworks that predate ONNX's Gelu), Swish as x * Sigmoid(x),
 * layer normalisation spelled in nine nodes (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div,
 * Mul, Add, as paddle2onnx and older exporters write it), a Softmax whose input was
 * scaled by a constant and had a mask added (attention), both for math.c, and chains of
 * elementwise steps with constants (HardSwish's four-node spelling among them) for
 * chain.c. Matching walks back from the chain's last node through producers; every inner
 * value must be read only inside the chain and not be an output, and every constant must hold
 * one element whose rank does not widen the result.
 */
#include "ops/fusion_match.h"

#include <float.h>
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

/* Value v is a one-element float constant of rank <= max_rank; its value in *out. A float32
 * one (the usual case) is read where it lies: matching runs on every eager translation, and
 * tr_scalar_value would build a cast and a handle for each look. */
static bool constant_scalar(tr_ctx *t, int v, int max_rank, double *out) {
  mx_array c = v != IR_NONE && t->const_values ? t->const_values[v] : NULL;
  if (!c || mx_size(c) != 1 || mx_ndim(c) > max_rank || !mx_dtype_is_float(mx_dtype_of(c)))
    return false;
  const void *data;
  if (mx_dtype_of(c) == MX_FLOAT32 && mx_host_data(t->mx, c, &data) == MX_OK) {
    *out = *(const float *)data;
    return true;
  }
  return tr_scalar_value(t->mx, c, out) == MX_OK;
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

int cpu_match_gelu_input(tr_ctx *t, const ir_node *n) {
  /* the three factors: one of n's inputs is a Mul of two of them */
  for (int e = 0; e < 2; e++) {
    const ir_node *m = producer(t, n->inputs[e], "Mul");
    if (!m || !inner(t, n->inputs[e])) continue;
    int f[3] = {m->inputs[0], m->inputs[1], n->inputs[1 - e]};
    for (int h = 0; h < 3; h++)
      for (int k = 0; k < 3; k++) {
        if (h == k) continue; /* before the read: f[3 - h - k] is f[3] when h == k == 0 */
        int x = f[3 - h - k];
        if (x == IR_NONE || !t->values[x]) continue;
        int rank = mx_ndim(t->values[x]);
        if (constant_near(t, f[h], rank, 0.5) && one_plus_erf_of(t, f[k], x, rank)) return x;
      }
  }
  return IR_NONE;
}

const ir_node *cpu_match_only_reader(const tr_ctx *t, int v) {
  return inner(t, v) ? &t->g->nodes[t->g->values[v].first_readers[0]] : NULL;
}

bool cpu_match_erf_in_gelu(tr_ctx *t, const ir_node *n) {
  const ir_node *add = cpu_match_only_reader(t, n->outputs[0]);
  const ir_node *mul = add ? cpu_match_only_reader(t, add->outputs[0]) : NULL;
  if (!mul || strcmp(mul->op_type, "Mul") != 0) return false;
  if (cpu_match_gelu_input(t, mul) != IR_NONE) return true; /* (1 + erf) * ... was the last Mul */
  const ir_node *last = cpu_match_only_reader(t, mul->outputs[0]);
  return last && strcmp(last->op_type, "Mul") == 0 && cpu_match_gelu_input(t, last) != IR_NONE;
}

/* Value v is x * beta (a Mul by a one-element float constant, either way round) that nothing
 * else reads: beta in *beta. */
static bool scaled_by_constant(tr_ctx *t, int v, int x, double *beta) {
  const ir_node *m = producer(t, v, "Mul");
  if (!m || !inner(t, v)) return false;
  /* a constant of higher rank than x would broadcast x to a larger shape */
  int rank = t->values && t->values[x] ? mx_ndim(t->values[x]) : t->g->values[x].rank;
  for (int i = 0; rank >= 0 && i < 2; i++)
    if (m->inputs[i] == x && constant_scalar(t, m->inputs[1 - i], rank, beta)) return true;
  return false;
}

int cpu_match_swish_input(tr_ctx *t, const ir_node *n, float *beta) {
  for (int e = 0; e < 2; e++) {
    const ir_node *s = producer(t, n->inputs[e], "Sigmoid");
    int x = n->inputs[1 - e];
    double b = 1.0;
    if (s && inner(t, n->inputs[e]) &&
        (s->inputs[0] == x || scaled_by_constant(t, s->inputs[0], x, &b))) {
      *beta = (float)b;
      return x;
    }
  }
  return IR_NONE;
}

bool cpu_match_sigmoid_in_swish(tr_ctx *t, const ir_node *n) {
  const ir_node *mul = cpu_match_only_reader(t, n->outputs[0]);
  float beta;
  return mul && strcmp(mul->op_type, "Mul") == 0 && mul->domain[0] == 0 &&
         cpu_match_swish_input(t, mul, &beta) != IR_NONE;
}

/* Value v is ReduceMean(of) over the last axis with its dims kept (axes as the attribute or,
 * from opset 18, a constant input); of's value index, or IR_NONE. */
static int last_axis_mean(tr_ctx *t, int v) {
  const ir_node *m = producer(t, v, "ReduceMean");
  if (!m || !inner(t, v) || ir_attr_int(m, "keepdims", 1) != 1 || !t->values[m->inputs[0]])
    return IR_NONE;
  int64_t axis;
  const ir_attr *a = ir_find_attr(m, "axes");
  mx_array c = m->n_inputs > 1 && m->inputs[1] != IR_NONE && t->const_values
                   ? t->const_values[m->inputs[1]]
                   : NULL;
  const void *data;
  if (a && a->type == IR_ATTR_INTS && a->count == 1) {
    axis = a->ints[0];
  } else if (!a && c && mx_size(c) == 1 && mx_dtype_of(c) == MX_INT64 &&
             mx_host_data(t->mx, c, &data) == MX_OK) {
    axis = *(const int64_t *)data;
  } else {
    return IR_NONE;
  }
  int rank = mx_ndim(t->values[m->inputs[0]]);
  return axis == -1 || axis == rank - 1 ? m->inputs[0] : IR_NONE;
}

/* v is Pow(d, 2) or d * d, read only by the chain; d's reads: the square's and one more. */
static bool square_of(tr_ctx *t, int v, int d, int d_reads) {
  const ir_node *pow = producer(t, v, "Pow"), *mul = producer(t, v, "Mul");
  if (!inner(t, v)) return false;
  if (pow) return d_reads == 2 && pow->inputs[0] == d && constant_near(t, pow->inputs[1], 1, 2.0);
  return d_reads == 3 && mul && mul->inputs[0] == d && mul->inputs[1] == d;
}

bool cpu_match_layer_norm_of(tr_ctx *t, const ir_node *n, cpu_match_layer_norm *ln) {
  for (int e = 0; e < 2; e++) {
    const ir_node *mul = producer(t, n->inputs[e], "Mul");
    if (!mul || !inner(t, n->inputs[e])) continue;
    for (int f = 0; f < 2; f++) {
      const ir_node *div = producer(t, mul->inputs[f], "Div");
      if (!div || !inner(t, mul->inputs[f])) continue;
      int d = div->inputs[0];
      const ir_node *sub = producer(t, d, "Sub"), *sqrt = producer(t, div->inputs[1], "Sqrt");
      /* d = x - mean is read by the square (once as Pow's base, twice as d * d) and the Div */
      int reads = t->g->values[d].readers;
      if (!sub || !sqrt || !inner(t, div->inputs[1]) || reads < 2 || reads > 3 ||
          t->g->values[d].is_graph_output)
        continue;
      int x = sub->inputs[0];
      if (last_axis_mean(t, sub->inputs[1]) != x) continue;
      const ir_node *add = producer(t, sqrt->inputs[0], "Add");
      if (!add || !inner(t, sqrt->inputs[0])) continue;
      for (int g = 0; g < 2; g++) {
        double eps;
        int var = add->inputs[g];
        if (!constant_scalar(t, add->inputs[1 - g], 1, &eps)) continue;
        int sq = last_axis_mean(t, var);
        if (sq == IR_NONE || !square_of(t, sq, d, reads)) continue;
        *ln = (cpu_match_layer_norm){x, mul->inputs[1 - f], n->inputs[1 - e], (float)eps};
        return true;
      }
    }
  }
  return false;
}

static bool same_shape(mx_array a, mx_array b) {
  if (!a || !b || mx_ndim(a) != mx_ndim(b)) return false;
  for (int i = 0; i < mx_ndim(a); i++)
    if (mx_shape(a)[i] != mx_shape(b)[i]) return false;
  return true;
}

bool cpu_match_sum_of(tr_ctx *t, int v, int *a, int *b) {
  const ir_node *add = producer(t, v, "Add");
  if (!add || !inner(t, v) || !t->values[v]) return false;
  *a = add->inputs[0], *b = add->inputs[1];
  mx_array x = t->values[*a], y = t->values[*b];
  return x && y && mx_dtype_of(x) == MX_FLOAT32 && mx_dtype_of(y) == MX_FLOAT32 &&
         same_shape(x, t->values[v]) && same_shape(y, t->values[v]);
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

void cpu_match_softmax_input_of(tr_ctx *t, const ir_node *softmax, cpu_match_softmax_input *in) {
  *in = (cpu_match_softmax_input){softmax->inputs[0], IR_NONE, 1.0f};
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

bool cpu_match_attention_of(tr_ctx *t, const ir_node *n, cpu_match_attention *a) {
  const ir_node *softmax = producer(t, n->inputs[0], "Softmax");
  if (!softmax || !inner(t, n->inputs[0]) || !t->values[softmax->inputs[0]]) return false;
  int rank = mx_ndim(t->values[softmax->inputs[0]]);
  int64_t axis = ir_attr_int(softmax, "axis", softmax->since_version < 13 ? 1 : -1);
  if (axis != -1 && axis != rank - 1) return false; /* coerced to 2-D, this is the last too */
  cpu_match_softmax_input in;
  cpu_match_softmax_input_of(t, softmax, &in);
  const ir_node *mm = producer(t, in.scores, "MatMul");
  if (!mm || !inner(t, in.scores) || !t->values[mm->inputs[0]] || !t->values[mm->inputs[1]])
    return false;
  *a = (cpu_match_attention){mm->inputs[0], mm->inputs[1], n->inputs[1], in.mask, in.scale};
  return true;
}

/* --- elementwise chains ------------------------------------------------------------------- */
/* Node n as one step of a chain, with the value it applies to: Add, Sub, Mul, Div, Max, Min of a
 * computed value and a one-element constant, Clip with constant (or absent) bounds, Relu, or the
 * last node of x * Clip(x + 3, 0, 6) / 6. *nodes: how many nodes the step spans; *shared: how
 * many of them read *in (2 for HardSwish's); *rank: the largest rank of its constants, which
 * must not exceed the chain input's (they would widen the result). Decided from the graph alone:
 * a later node's inputs have no arrays yet when an earlier one asks whether the chain goes on. */
static bool step_at(tr_ctx *t, const ir_node *n, cpu_chain_step *step, int *in, int *nodes,
                    int *shared, int *rank) {
  static const struct { const char *op; cpu_chain_op direct, reversed;
  } binary[] = {
      {"Add", CPU_CHAIN_ADD, CPU_CHAIN_ADD},      {"Mul", CPU_CHAIN_MUL, CPU_CHAIN_MUL},
      {"Sub", CPU_CHAIN_SUB, CPU_CHAIN_SUB_FROM}, {"Div", CPU_CHAIN_DIV, CPU_CHAIN_DIV_INTO},
      {"Max", CPU_CHAIN_MAX, CPU_CHAIN_MAX},      {"Min", CPU_CHAIN_MIN, CPU_CHAIN_MIN}};
  enum { ANY = MX_MAX_RANK };
  if (n->domain[0] != 0 || n->n_inputs < 1 || n->inputs[0] == IR_NONE) return false;
  *nodes = 1, *shared = 1, *rank = 0;
  double c, lo, hi;
  if (strcmp(n->op_type, "Div") == 0 && n->n_inputs == 2 &&
      constant_near(t, n->inputs[1], ANY, 6.0)) { /* HardSwish: x * Clip(x + 3, 0, 6) / 6 */
    const ir_node *mul = producer(t, n->inputs[0], "Mul");
    for (int i = 0; mul && inner(t, n->inputs[0]) && i < 2; i++) {
      int x = mul->inputs[i], k = mul->inputs[1 - i];
      const ir_node *clip = producer(t, k, "Clip");
      if (!clip || !inner(t, k) || clip->n_inputs != 3 || clip->since_version < 11 ||
          !constant_near(t, clip->inputs[2], 1, 6.0) ||
          !constant_scalar(t, clip->inputs[1], 1, &lo) || lo != 0.0)
        continue;
      const ir_node *add = producer(t, clip->inputs[0], "Add");
      if (!add || !inner(t, clip->inputs[0])) continue;
      for (int j = 0; j < 2; j++)
        if (add->inputs[j] == x && constant_near(t, add->inputs[1 - j], ANY, 3.0)) {
          *step = (cpu_chain_step){CPU_CHAIN_HARDSWISH, 0, 0}, *in = x, *nodes = 4, *shared = 2;
          *rank = mx_ndim(t->const_values[n->inputs[1]]);
          int r = mx_ndim(t->const_values[add->inputs[1 - j]]);
          *rank = r > *rank ? r : *rank;
          return true;
        }
    }
  }
  for (size_t k = 0; k < sizeof binary / sizeof *binary; k++) {
    if (strcmp(n->op_type, binary[k].op) != 0 || n->n_inputs != 2) continue;
    for (int i = 0; i < 2; i++) {
      int v = n->inputs[i], other = n->inputs[1 - i];
      if (v == IR_NONE || (t->const_values && t->const_values[v]) ||
          !constant_scalar(t, other, ANY, &c))
        continue;
      *step = (cpu_chain_step){i == 0 ? binary[k].direct : binary[k].reversed, (float)c, 0},
      *in = v;
      *rank = mx_ndim(t->const_values[other]);
      return true;
    }
    return false;
  }
  if (strcmp(n->op_type, "Relu") == 0) {
    *step = (cpu_chain_step){CPU_CHAIN_RELU, 0, 0}, *in = n->inputs[0];
    return true;
  }
  if (strcmp(n->op_type, "Clip") == 0) {
    /* an absent bound is float32's range (the opset 6 defaults; from 11 the type's limits),
     * so an infinity is clamped to it */
    lo = -FLT_MAX, hi = FLT_MAX;
    if (n->since_version < 11) {
      lo = ir_attr_float(n, "min", -FLT_MAX), hi = ir_attr_float(n, "max", FLT_MAX);
    } else if ((ir_has_input(n, 1) && !constant_scalar(t, n->inputs[1], 1, &lo)) ||
               (ir_has_input(n, 2) && !constant_scalar(t, n->inputs[2], 1, &hi))) {
      return false;
    }
    *step = (cpu_chain_step){CPU_CHAIN_CLIP, (float)lo, (float)hi}, *in = n->inputs[0];
    return true; /* Clip's bounds never widen its input */
  }
  return false;
}

/* The readers of value v (the first cap of them, cap <= 2; the count of all). */
static int readers_of(const tr_ctx *t, int v, const ir_node **out, int cap) {
  if (v == IR_NONE) return 0;
  const ir_value *val = &t->g->values[v];
  for (int i = 0; i < cap && i < val->readers && i < 2; i++)
    out[i] = &t->g->nodes[val->first_readers[i]];
  return val->readers;
}

/* Whether value v goes on into a step that would take the chain further. */
static bool continues(tr_ctx *t, int v) {
  if (v == IR_NONE || t->g->values[v].is_graph_output) return false;
  const ir_node *r[2], *last;
  int count = readers_of(t, v, r, 2), in, nodes, shared, rank;
  cpu_chain_step step;
  if (count == 1) return step_at(t, r[0], &step, &in, &nodes, &shared, &rank) && in == v;
  if (count != 2) return false;
  /* HardSwish on v: its Add feeds a Clip, then a Mul, then a Div whose step starts at v */
  for (int i = 0; i < 2; i++) {
    if (strcmp(r[i]->op_type, "Add") != 0) continue;
    const ir_node *next[1];
    if (readers_of(t, r[i]->outputs[0], next, 1) != 1) continue;     /* the Clip */
    if (readers_of(t, next[0]->outputs[0], next, 1) != 1) continue; /* the Mul */
    if (readers_of(t, next[0]->outputs[0], next, 1) != 1) continue; /* the Div */
    last = next[0];
    if (step_at(t, last, &step, &in, &nodes, &shared, &rank) && step.op == CPU_CHAIN_HARDSWISH &&
        in == v)
      return true;
  }
  return false;
}

bool cpu_match_chain_ending_at(tr_ctx *t, const ir_node *n, cpu_match_chain *chain) {
  int in, nodes, shared, rank, widest = 0;
  cpu_chain_step step, reversed[CPU_CHAIN_MAX_STEPS];
  if (!step_at(t, n, &step, &in, &nodes, &shared, &rank) || continues(t, n->outputs[0]))
    return false;
  chain->n_steps = chain->n_nodes = 0;
  for (;;) {
    reversed[chain->n_steps++] = step;
    chain->n_nodes += nodes;
    chain->input = in;
    widest = rank > widest ? rank : widest;
    const ir_value *v = &t->g->values[in];
    const ir_node *p = v->producer != IR_NONE ? &t->g->nodes[v->producer] : NULL;
    chain->input_private = !v->is_graph_output && v->readers == shared;
    if (chain->n_steps == CPU_CHAIN_MAX_STEPS || !p || !chain->input_private ||
        !step_at(t, p, &step, &in, &nodes, &shared, &rank))
      break;
  }
  mx_array x = chain->input != IR_NONE ? t->values[chain->input] : NULL;
  if (!x || mx_dtype_of(x) != MX_FLOAT32 || widest > mx_ndim(x) ||
      chain->n_nodes < CPU_MATCH_CHAIN_MIN_NODES)
    return false;
  for (int i = 0; i < chain->n_steps; i++) chain->steps[i] = reversed[chain->n_steps - 1 - i];
  return true;
}
