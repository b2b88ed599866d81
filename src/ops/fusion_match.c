/*
 * Recognises, at plan build, the node chains one kernel replaces whole (the fusion table,
 * ops/fusions.c): Gelu spelled in five nodes (Div, Erf, Add, Mul, Mul, as exported from
 * frameworks that predate ONNX's Gelu), Swish as x * Sigmoid(x), layer normalisation spelled in
 * nine nodes (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add, as paddle2onnx and
 * older exporters write it), a Softmax whose input was scaled by a constant and had a mask
 * added, attention spelled in nodes, and chains of elementwise steps with constants (HardSwish's
 * four-node spelling among them). Matching walks back from the chain's last node through
 * producers; every inner value must be read only inside the chain and not be an output, and
 * every constant must hold one element whose rank does not widen the result.
 */
#include "ops/fusion_match.h"
#include "plan/translate.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Value v's producer when it is an ONNX-domain node of type op, else NULL. */
static const ir_node *producer(const ir_graph *g, int v, const char *op) {
  if (v == IR_NONE || g->values[v].producer == IR_NONE) return NULL;
  const ir_node *p = &g->nodes[g->values[v].producer];
  return strcmp(p->op_type, op) == 0 && p->domain[0] == 0 ? p : NULL;
}

/* A value only the chain reads: a matched chain may skip computing it. */
static bool inner(const ir_graph *g, int v) {
  return v != IR_NONE && g->values[v].readers == 1 && !g->values[v].is_graph_output;
}

enum { ANY_RANK = MX_MAX_RANK };

/* The rank the snapshot knows for value v, or ANY_RANK when it does not (the build then checks
 * the constants' rank against the live one). */
static int known_rank(const fz_graph *f, int v) {
  int rank = f->g->values[v].rank;
  return rank >= 0 ? rank : ANY_RANK;
}

static mx_array constant(const fz_graph *f, int v) {
  return v != IR_NONE && f->consts ? f->consts[v] : NULL;
}

/* Value v is a one-element float constant of rank <= max_rank; its value in *out. A float32
 * one (the usual case) is read where it lies, without a cast. */
static bool constant_scalar(const fz_graph *f, int v, int max_rank, double *out) {
  mx_array c = constant(f, v);
  if (!c || mx_size(c) != 1 || mx_ndim(c) > max_rank || !mx_dtype_is_float(mx_dtype_of(c)))
    return false;
  const void *data;
  if (mx_dtype_of(c) == MX_FLOAT32 && mx_host_data(f->mx, c, &data) == MX_OK) {
    *out = *(const float *)data;
    return true;
  }
  return tr_scalar_value(f->mx, c, out) == MX_OK;
}

static bool constant_near(const fz_graph *f, int v, int max_rank, double want) {
  double got;
  return constant_scalar(f, v, max_rank, &got) && fabs(got - want) <= 1e-6 * fabs(want);
}

/* The wider of *rank and constant v's rank, into *rank. */
static void widen_rank(const fz_graph *f, int v, int *rank) {
  int r = mx_ndim(constant(f, v));
  if (r > *rank) *rank = r;
}

/* a is 1 + erf(x / sqrt 2), a chain of inner values: the Erf's node index, or IR_NONE. */
static int one_plus_erf_of(const fz_graph *f, int a, int x, int rank, int *const_rank) {
  const ir_graph *g = f->g;
  const ir_node *add = producer(g, a, "Add");
  if (!add || !inner(g, a)) return IR_NONE;
  for (int i = 0; i < 2; i++) {
    int e = add->inputs[i];
    const ir_node *erf = producer(g, e, "Erf");
    if (!erf || !inner(g, e) || !constant_near(f, add->inputs[1 - i], rank, 1.0)) continue;
    int d = erf->inputs[0], erf_node = g->values[e].producer;
    widen_rank(f, add->inputs[1 - i], const_rank);
    if (!inner(g, d)) return IR_NONE;
    const ir_node *div = producer(g, d, "Div"), *mul = producer(g, d, "Mul");
    if (div) {
      if (div->inputs[0] != x || !constant_near(f, div->inputs[1], rank, M_SQRT2)) return IR_NONE;
      widen_rank(f, div->inputs[1], const_rank);
      return erf_node;
    }
    if (mul)
      for (int j = 0; j < 2; j++)
        if (mul->inputs[j] == x && constant_near(f, mul->inputs[1 - j], rank, M_SQRT1_2)) {
          widen_rank(f, mul->inputs[1 - j], const_rank);
          return erf_node;
        }
    return IR_NONE;
  }
  return IR_NONE;
}

bool fz_match_gelu(const fz_graph *f, const ir_node *n, fz_gelu *m) {
  const ir_graph *g = f->g;
  /* the three factors: one of n's inputs is a Mul of two of them */
  for (int e = 0; e < 2; e++) {
    const ir_node *mul = producer(g, n->inputs[e], "Mul");
    if (!mul || !inner(g, n->inputs[e])) continue;
    int fs[3] = {mul->inputs[0], mul->inputs[1], n->inputs[1 - e]};
    for (int h = 0; h < 3; h++)
      for (int k = 0; k < 3; k++) {
        if (h == k) continue; /* before the read: fs[3 - h - k] is fs[3] when h == k == 0 */
        int x = fs[3 - h - k];
        if (x == IR_NONE) continue;
        int rank = known_rank(f, x), const_rank = 0, erf;
        if (!constant_near(f, fs[h], rank, 0.5)) continue;
        widen_rank(f, fs[h], &const_rank);
        erf = one_plus_erf_of(f, fs[k], x, rank, &const_rank);
        if (erf == IR_NONE) continue;
        *m = (fz_gelu){x, erf, const_rank};
        return true;
      }
  }
  return false;
}

const ir_node *fz_only_reader(const ir_graph *g, int v) {
  return inner(g, v) ? &g->nodes[g->values[v].first_readers[0]] : NULL;
}

/* Value v is x * beta (a Mul by a one-element float constant, either way round) that nothing
 * else reads: beta in *beta, its rank in *rank. */
static bool scaled_by_constant(const fz_graph *f, int v, int x, double *beta, int *rank) {
  const ir_node *m = producer(f->g, v, "Mul");
  if (!m || !inner(f->g, v)) return false;
  /* a constant of higher rank than x would broadcast x to a larger shape */
  for (int i = 0; i < 2; i++)
    if (m->inputs[i] == x && constant_scalar(f, m->inputs[1 - i], known_rank(f, x), beta)) {
      widen_rank(f, m->inputs[1 - i], rank);
      return true;
    }
  return false;
}

bool fz_match_swish(const fz_graph *f, const ir_node *n, fz_swish *m) {
  for (int e = 0; e < 2; e++) {
    const ir_node *s = producer(f->g, n->inputs[e], "Sigmoid");
    int x = n->inputs[1 - e], rank = 0;
    double b = 1.0;
    if (s && x != IR_NONE && inner(f->g, n->inputs[e]) &&
        (s->inputs[0] == x || scaled_by_constant(f, s->inputs[0], x, &b, &rank))) {
      *m = (fz_swish){x, f->g->values[n->inputs[e]].producer, rank, (float)b};
      return true;
    }
  }
  return false;
}

/* Value v is ReduceMean(of) over the last axis with its dims kept (axes as the attribute or,
 * from opset 18, a constant input); of's value index, or IR_NONE. A positive axis is the last
 * only for one rank: when the snapshot does not know of's rank, *need_rank is set to it (and a
 * need already set must agree). */
static int last_axis_mean(const fz_graph *f, int v, int *need_rank) {
  const ir_node *m = producer(f->g, v, "ReduceMean");
  if (!m || !inner(f->g, v) || ir_attr_int(m, "keepdims", 1) != 1 || m->inputs[0] == IR_NONE)
    return IR_NONE;
  int64_t axis;
  const ir_attr *a = ir_find_attr(m, "axes");
  mx_array c = m->n_inputs > 1 ? constant(f, m->inputs[1]) : NULL;
  const void *data;
  if (a && a->type == IR_ATTR_INTS && a->count == 1) {
    axis = a->ints[0];
  } else if (!a && c && mx_size(c) == 1 && mx_dtype_of(c) == MX_INT64 &&
             mx_host_data(f->mx, c, &data) == MX_OK) {
    axis = *(const int64_t *)data;
  } else {
    return IR_NONE;
  }
  if (axis == -1) return m->inputs[0];
  int rank = f->g->values[m->inputs[0]].rank;
  if (axis < 0 || axis >= MX_MAX_RANK || (rank >= 0 && axis != rank - 1)) return IR_NONE;
  if (rank < 0) {
    if (*need_rank >= 0 && *need_rank != axis + 1) return IR_NONE;
    *need_rank = (int)axis + 1;
  }
  return m->inputs[0];
}

/* v is Pow(d, 2) or d * d, read only by the chain; d's reads: the square's and one more. */
static bool square_of(const fz_graph *f, int v, int d, int d_reads) {
  const ir_node *pow = producer(f->g, v, "Pow"), *mul = producer(f->g, v, "Mul");
  if (!inner(f->g, v)) return false;
  if (pow) return d_reads == 2 && pow->inputs[0] == d && constant_near(f, pow->inputs[1], 1, 2.0);
  return d_reads == 3 && mul && mul->inputs[0] == d && mul->inputs[1] == d;
}

bool fz_match_layer_norm(const fz_graph *f, const ir_node *n, fz_layer_norm *ln) {
  const ir_graph *g = f->g;
  for (int e = 0; e < 2; e++) {
    const ir_node *mul = producer(g, n->inputs[e], "Mul");
    if (!mul || !inner(g, n->inputs[e])) continue;
    for (int k = 0; k < 2; k++) {
      const ir_node *div = producer(g, mul->inputs[k], "Div");
      if (!div || !inner(g, mul->inputs[k])) continue;
      int d = div->inputs[0];
      const ir_node *sub = producer(g, d, "Sub"), *sqrt = producer(g, div->inputs[1], "Sqrt");
      /* d = x - mean is read by the square (once as Pow's base, twice as d * d) and the Div */
      int reads = d != IR_NONE ? g->values[d].readers : 0, need_rank = -1;
      if (!sub || !sqrt || !inner(g, div->inputs[1]) || reads < 2 || reads > 3 ||
          g->values[d].is_graph_output)
        continue;
      int x = sub->inputs[0];
      if (x == IR_NONE || last_axis_mean(f, sub->inputs[1], &need_rank) != x) continue;
      const ir_node *add = producer(g, sqrt->inputs[0], "Add");
      if (!add || !inner(g, sqrt->inputs[0])) continue;
      for (int h = 0; h < 2; h++) {
        double eps;
        int var = add->inputs[h], need = need_rank;
        if (!constant_scalar(f, add->inputs[1 - h], 1, &eps)) continue;
        int sq = last_axis_mean(f, var, &need);
        if (sq == IR_NONE || !square_of(f, sq, d, reads)) continue;
        *ln = (fz_layer_norm){x, mul->inputs[1 - k], n->inputs[1 - e], need, (float)eps};
        return true;
      }
    }
  }
  return false;
}

bool fz_match_sum(const fz_graph *f, int v, int *a, int *b) {
  const ir_node *add = producer(f->g, v, "Add");
  if (!add || !inner(f->g, v) || add->n_inputs != 2) return false;
  *a = add->inputs[0], *b = add->inputs[1];
  return *a != IR_NONE && *b != IR_NONE;
}

/* What scaling value v undoes: a Mul by a one-element constant (either operand) or a Div by one,
 * read only there; or by a value computed from shapes, read when a translation knows it. */
static void scaled_of(const fz_graph *f, int v, fz_scaled *s) {
  *s = (fz_scaled){0};
  const ir_node *mul = producer(f->g, v, "Mul"), *div = producer(f->g, v, "Div");
  if ((!mul && !div) || !inner(f->g, v)) return;
  const ir_node *p = mul ? mul : div;
  s->div = div != NULL;
  for (int i = 0; i < (mul ? 2 : 1); i++) {
    double c;
    int k = p->inputs[1 - i];
    if (p->inputs[i] == IR_NONE || k == IR_NONE) continue;
    s->from_shapes[s->n] = IR_NONE;
    if (constant_scalar(f, k, ANY_RANK, &c)) {
      if (div && c == 0.0) continue;
      s->c[s->n] = c, s->rank[s->n] = mx_ndim(constant(f, k));
    } else if (f->from_shapes && f->from_shapes[k]) {
      s->from_shapes[s->n] = k;
    } else {
      continue;
    }
    s->base[s->n++] = p->inputs[i];
  }
}

void fz_match_softmax(const fz_graph *f, const ir_node *softmax, fz_softmax *m) {
  *m = (fz_softmax){softmax->inputs[0], {IR_NONE, IR_NONE}};
  const ir_node *add = producer(f->g, m->input, "Add");
  if (add && inner(f->g, m->input) && add->n_inputs == 2)
    m->add[0] = add->inputs[0], m->add[1] = add->inputs[1];
  scaled_of(f, m->input, &m->scaled[0]);
  for (int i = 0; i < 2; i++)
    if (m->add[i] != IR_NONE) scaled_of(f, m->add[i], &m->scaled[1 + i]);
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

/* Candidate i of s for scores sc: its scale in *c, when it is a one-element float value of rank
 * at most sc's (a higher rank would broadcast the scores to a larger shape). */
static bool live_scale(const fz_scaled *s, int i, mx_array sc, const mx_array *known, mx_ctx *mx,
                       double *c) {
  if (s->from_shapes[i] == IR_NONE) {
    *c = s->c[i];
    return s->rank[i] <= mx_ndim(sc);
  }
  fz_graph view = {NULL, known, mx, NULL};
  return constant_scalar(&view, s->from_shapes[i], mx_ndim(sc), c) && !(s->div && *c == 0.0);
}

void fz_softmax_input_live(const fz_softmax *m, const mx_array *values, const mx_array *known,
                           mx_ctx *mx, fz_softmax_input *in) {
  *in = (fz_softmax_input){m->input, IR_NONE, 1.0f};
  const fz_scaled *s = &m->scaled[0];
  for (int i = 0; m->add[0] != IR_NONE && i < 2; i++) {
    mx_array sc = values[m->add[i]], mask = values[m->add[1 - i]];
    if (sc && mx_dtype_of(sc) == MX_FLOAT32 && mask_fits(mask, sc)) {
      in->scores = m->add[i], in->mask = m->add[1 - i];
      s = &m->scaled[1 + i];
      break;
    }
  }
  if (in->scores == m->input && m->add[0] != IR_NONE) return; /* an Add that is no mask */
  for (int i = 0; i < s->n; i++) {
    mx_array sc = values[s->base[i]];
    double c;
    if (!sc || mx_dtype_of(sc) != MX_FLOAT32 || !live_scale(s, i, sc, known, mx, &c)) continue;
    in->scores = s->base[i], in->scale = (float)(s->div ? 1.0 / c : c);
    return;
  }
}

const ir_node *fz_attention_product(const ir_graph *g, int scores) {
  const ir_node *mm = producer(g, scores, "MatMul");
  return mm && inner(g, scores) && mm->n_inputs == 2 && mm->inputs[0] != IR_NONE &&
                 mm->inputs[1] != IR_NONE
             ? mm
             : NULL;
}

bool fz_match_attention(const fz_graph *f, const ir_node *n, fz_attention *a) {
  const ir_graph *g = f->g;
  const ir_node *softmax = producer(g, n->inputs[0], "Softmax");
  if (!softmax || !inner(g, n->inputs[0]) || softmax->inputs[0] == IR_NONE ||
      n->inputs[1] == IR_NONE)
    return false;
  int rank = g->values[softmax->inputs[0]].rank;
  int64_t axis = ir_attr_int(softmax, "axis", softmax->since_version < 13 ? 1 : -1);
  a->need_rank = -1;
  if (axis != -1) { /* coerced to 2-D, the last axis is the last too */
    if (axis < 0 || axis >= MX_MAX_RANK || (rank >= 0 && axis != rank - 1)) return false;
    if (rank < 0) a->need_rank = (int)axis + 1;
  }
  fz_match_softmax(f, softmax, &a->softmax);
  a->v = n->inputs[1];
  /* some candidate for the scores must be an inner MatMul's product */
  const fz_softmax *s = &a->softmax;
  int candidates[3] = {s->input, s->add[0], s->add[1]};
  for (int c = 0; c < 3; c++) {
    if (candidates[c] == IR_NONE) continue;
    if (fz_attention_product(g, candidates[c])) return true;
    for (int i = 0; i < s->scaled[c].n; i++)
      if (fz_attention_product(g, s->scaled[c].base[i])) return true;
  }
  return false;
}

/* --- elementwise chains ------------------------------------------------------------------- */
/* Node n as one step of a chain, with the value it applies to: Add, Sub, Mul, Div, Max, Min of a
 * computed value and a one-element constant, Clip with constant (or absent) bounds, Relu, or the
 * last node of x * Clip(x + 3, 0, 6) / 6. *nodes: how many nodes the step spans; *shared: how
 * many of them read *in (2 for HardSwish's); *rank: the largest rank of its constants, which
 * must not exceed the chain input's (they would widen the result). Decided from the graph alone:
 * the chain is found at plan build, before any array exists. */
static bool step_at(const fz_graph *f, const ir_node *n, cpu_chain_step *step, int *in, int *nodes,
                    int *shared, int *rank) {
  static const struct { const char *op; cpu_chain_op direct, reversed;
  } binary[] = {
      {"Add", CPU_CHAIN_ADD, CPU_CHAIN_ADD},      {"Mul", CPU_CHAIN_MUL, CPU_CHAIN_MUL},
      {"Sub", CPU_CHAIN_SUB, CPU_CHAIN_SUB_FROM}, {"Div", CPU_CHAIN_DIV, CPU_CHAIN_DIV_INTO},
      {"Max", CPU_CHAIN_MAX, CPU_CHAIN_MAX},      {"Min", CPU_CHAIN_MIN, CPU_CHAIN_MIN}};
  if (n->domain[0] != 0 || n->n_inputs < 1 || n->inputs[0] == IR_NONE) return false;
  *nodes = 1, *shared = 1, *rank = 0;
  double c, lo, hi;
  if (strcmp(n->op_type, "Div") == 0 && n->n_inputs == 2 &&
      constant_near(f, n->inputs[1], ANY_RANK, 6.0)) { /* HardSwish: x * Clip(x + 3, 0, 6) / 6 */
    const ir_node *mul = producer(f->g, n->inputs[0], "Mul");
    for (int i = 0; mul && inner(f->g, n->inputs[0]) && i < 2; i++) {
      int x = mul->inputs[i], k = mul->inputs[1 - i];
      const ir_node *clip = producer(f->g, k, "Clip");
      if (!clip || !inner(f->g, k) || clip->n_inputs != 3 || clip->since_version < 11 ||
          !constant_near(f, clip->inputs[2], 1, 6.0) ||
          !constant_scalar(f, clip->inputs[1], 1, &lo) || lo != 0.0)
        continue;
      const ir_node *add = producer(f->g, clip->inputs[0], "Add");
      if (!add || !inner(f->g, clip->inputs[0])) continue;
      for (int j = 0; j < 2; j++)
        if (add->inputs[j] == x && constant_near(f, add->inputs[1 - j], ANY_RANK, 3.0)) {
          *step = (cpu_chain_step){CPU_CHAIN_HARDSWISH, 0, 0}, *in = x, *nodes = 4, *shared = 2;
          *rank = mx_ndim(constant(f, n->inputs[1]));
          int r = mx_ndim(constant(f, add->inputs[1 - j]));
          *rank = r > *rank ? r : *rank;
          return true;
        }
    }
  }
  for (size_t k = 0; k < sizeof binary / sizeof *binary; k++) {
    if (strcmp(n->op_type, binary[k].op) != 0 || n->n_inputs != 2) continue;
    for (int i = 0; i < 2; i++) {
      int v = n->inputs[i], other = n->inputs[1 - i];
      if (v == IR_NONE || constant(f, v) ||
          !constant_scalar(f, other, ANY_RANK, &c))
        continue;
      *step = (cpu_chain_step){i == 0 ? binary[k].direct : binary[k].reversed, (float)c, 0},
      *in = v;
      *rank = mx_ndim(constant(f, other));
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
    } else if ((ir_has_input(n, 1) && !constant_scalar(f, n->inputs[1], 1, &lo)) ||
               (ir_has_input(n, 2) && !constant_scalar(f, n->inputs[2], 1, &hi))) {
      return false;
    }
    *step = (cpu_chain_step){CPU_CHAIN_CLIP, (float)lo, (float)hi}, *in = n->inputs[0];
    return true; /* Clip's bounds never widen its input */
  }
  return false;
}

/* The readers of value v (the first cap of them, cap <= 2; the count of all). */
static int readers_of(const ir_graph *g, int v, const ir_node **out, int cap) {
  if (v == IR_NONE) return 0;
  const ir_value *val = &g->values[v];
  for (int i = 0; i < cap && i < val->readers && i < 2; i++)
    out[i] = &g->nodes[val->first_readers[i]];
  return val->readers;
}

/* Whether value v goes on into a step that would take the chain further. */
static bool continues(const fz_graph *f, int v) {
  if (v == IR_NONE || f->g->values[v].is_graph_output) return false;
  const ir_node *r[2], *last;
  int count = readers_of(f->g, v, r, 2), in, nodes, shared, rank;
  cpu_chain_step step;
  if (count == 1) return step_at(f, r[0], &step, &in, &nodes, &shared, &rank) && in == v;
  if (count != 2) return false;
  /* HardSwish on v: its Add feeds a Clip, then a Mul, then a Div whose step starts at v */
  for (int i = 0; i < 2; i++) {
    if (strcmp(r[i]->op_type, "Add") != 0) continue;
    const ir_node *next[1];
    if (readers_of(f->g, r[i]->outputs[0], next, 1) != 1) continue;     /* the Clip */
    if (readers_of(f->g, next[0]->outputs[0], next, 1) != 1) continue; /* the Mul */
    if (readers_of(f->g, next[0]->outputs[0], next, 1) != 1) continue; /* the Div */
    last = next[0];
    if (step_at(f, last, &step, &in, &nodes, &shared, &rank) && step.op == CPU_CHAIN_HARDSWISH &&
        in == v)
      return true;
  }
  return false;
}

bool fz_match_chain(const fz_graph *f, const ir_node *n, fz_chain *chain) {
  int in, nodes, shared, rank, widest = 0;
  cpu_chain_step step, reversed[CPU_CHAIN_MAX_STEPS];
  if (!step_at(f, n, &step, &in, &nodes, &shared, &rank) || continues(f, n->outputs[0]))
    return false;
  chain->n_steps = chain->n_nodes = 0;
  for (;;) {
    reversed[chain->n_steps++] = step;
    chain->n_nodes += nodes;
    chain->input = in;
    widest = rank > widest ? rank : widest;
    const ir_value *v = &f->g->values[in];
    const ir_node *p = v->producer != IR_NONE ? &f->g->nodes[v->producer] : NULL;
    chain->input_private = !v->is_graph_output && v->readers == shared;
    if (chain->n_steps == CPU_CHAIN_MAX_STEPS || !p || !chain->input_private ||
        !step_at(f, p, &step, &in, &nodes, &shared, &rank))
      break;
  }
  if (chain->input == IR_NONE || chain->n_nodes < FZ_CHAIN_MIN_NODES) return false;
  chain->const_rank = widest;
  for (int i = 0; i < chain->n_steps; i++) chain->steps[i] = reversed[chain->n_steps - 1 - i];
  return true;
}
