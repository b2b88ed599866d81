/*
 * The fusion table (fusions.h) and the pass that applies it: which multi-node spellings one
 * kernel replaces, at which anchor, on which device. The matchers are in fusion_match.c; each
 * build sits beside its anchor's translator in the anchor's family file, as a claim predicate
 * sits beside its translator.
 */
#include "ops/fusions.h"
#include "ops/fusion_match.h"
#include "plan/translate.h"

#include <stdlib.h>
#include <string.h>

/* --- matchers as rows call them ------------------------------------------------------------ */
static bool match_layer_norm(const fz_graph *f, const ir_node *n, op_fusion_match *m) {
  return fz_match_layer_norm(f, n, &m->u.layer_norm);
}

/* An input is a MatMul's product that nothing else reads: the product's kernel may start from
 * the bias (mx_fold_into_product). */
static bool match_bias(const fz_graph *f, const ir_node *n, op_fusion_match *m) {
  m->u.product_inputs = 0;
  for (int i = 0; i < 2 && i < n->n_inputs; i++) {
    int v = n->inputs[i];
    const ir_value *pv = v >= 0 ? &f->g->values[v] : NULL;
    if (!pv || pv->producer < 0 || strcmp(f->g->nodes[pv->producer].op_type, "MatMul") != 0 ||
        f->g->nodes[pv->producer].domain[0] != 0 || pv->readers != 1 || pv->is_graph_output)
      continue;
    m->u.product_inputs |= 1u << i;
  }
  return m->u.product_inputs != 0;
}

static bool match_gelu(const fz_graph *f, const ir_node *n, op_fusion_match *m) {
  return fz_match_gelu(f, n, &m->u.gelu);
}

static bool match_swish(const fz_graph *f, const ir_node *n, op_fusion_match *m) {
  return fz_match_swish(f, n, &m->u.swish);
}

static bool match_chain(const fz_graph *f, const ir_node *n, op_fusion_match *m) {
  return fz_match_chain(f, n, &m->u.chain);
}

/* Something may fold into the Softmax: an Add (a mask) or a constant scale before it. */
static bool match_softmax(const fz_graph *f, const ir_node *n, op_fusion_match *m) {
  if (n->inputs[0] == IR_NONE) return false;
  fz_match_softmax(f, n, &m->u.softmax);
  return m->u.softmax.add[0] != IR_NONE || m->u.softmax.scaled[0].n > 0;
}

static bool match_attention(const fz_graph *f, const ir_node *n, op_fusion_match *m) {
  return n->n_inputs == 2 && fz_match_attention(f, n, &m->u.attention);
}

static bool match_residual(const fz_graph *f, const ir_node *n, op_fusion_match *m) {
  return n->inputs[0] != IR_NONE && fz_match_sum(f, n->inputs[0], &m->u.sum.a, &m->u.sum.b);
}

/* The anchor is the only reader of its input: the kernel computing the input may take the
 * anchor as its epilogue. */
static bool match_sole_reader(const fz_graph *f, const ir_node *n, op_fusion_match *m) {
  (void)m;
  return n->n_inputs > 0 && n->inputs[0] != IR_NONE && fz_only_reader(f->g, n->inputs[0]) == n;
}

/* A convolution alone reads the anchor's output, as its input X. */
static bool match_read_by_conv(const fz_graph *f, const ir_node *n, op_fusion_match *m) {
  (void)m;
  const ir_node *reader = n->n_outputs > 0 ? fz_only_reader(f->g, n->outputs[0]) : NULL;
  return reader && strcmp(reader->op_type, "Conv") == 0 && reader->domain[0] == 0 &&
         reader->inputs[0] == n->outputs[0];
}

/* --- the table ----------------------------------------------------------------------------- */
static const char *const add_op[] = {"Add", NULL};
static const char *const mul_op[] = {"Mul", NULL};
static const char *const matmul_op[] = {"MatMul", NULL};
static const char *const softmax_op[] = {"Softmax", NULL};
static const char *const layer_norm_op[] = {"LayerNormalization", NULL};
static const char *const hard_sigmoid_op[] = {"HardSigmoid", NULL};
static const char *const concat_op[] = {"Concat", NULL};
/* the steps whose translators end a chain (Max and Min join one only as inner steps) */
static const char *const chain_ops[] = {"Add", "Sub", "Mul", "Div", "Clip", "Relu", NULL};

/* For one anchor op, rows are tried in this order: an Add that ends a layer normalisation is
 * never taken as a bias or a chain step. */
static const op_fusion fusion_rows[] = {
    {"layer_norm", add_op, match_layer_norm, op_build_layer_norm_nodes, OP_FUSION_CPU,
     OP_SHAPELESS_GPU,
     "float32: (x - mean) / sqrt(var + eps) * scale + bias in nine nodes (ReduceMean, Sub, Pow, "
     "ReduceMean, Add, Sqrt, Div, Mul, Add), means over the last axis: one host kernel"},
    {"bias", add_op, match_bias, op_build_bias_into_product, OP_FUSION_CPU, OP_SHAPELESS,
     "float32 MatMul product (read nowhere else) + bias [N], in a graph built for one shape: the "
     "product's kernel starts from the bias (addmm, or the packed-weight kernel's bias rows)"},
    {"gelu", mul_op, match_gelu, op_build_gelu_nodes, OP_FUSION_CPU, OP_SHAPELESS,
     "float32: x * (1 + erf(x / sqrt 2)) * 0.5 in five nodes: one host kernel, or the epilogue of "
     "the kernel computing x when only the Gelu reads x"},
    {"swish", mul_op, match_swish, op_build_swish_nodes, OP_FUSION_CPU, OP_SHAPELESS,
     "float32: x * Sigmoid(x), or x * Sigmoid(x * beta) with a constant beta: one host kernel, or "
     "the epilogue of the kernel computing x when only the Swish reads x"},
    {"chain", chain_ops, match_chain, op_build_chain, OP_FUSION_CPU, OP_SHAPELESS,
     "float32: 3 or more elementwise steps with one-element constants (Add, Sub, Mul, Div, Max, "
     "Min, Clip, Relu, HardSwish's four nodes) on one value: the epilogue of the kernel computing "
     "it when only the chain reads it, else one host kernel from 4096 elements"},
    {"attention", matmul_op, match_attention, op_build_attention_nodes, OP_FUSION_CPU,
     OP_SHAPELESS,
     "float32: Softmax(MatMul(q, kt) [* scale] [+ mask]) over the last axis, times v: one host "
     "kernel; a Transpose merging the heads after it is folded in"},
    {"softmax", softmax_op, match_softmax, op_build_softmax_folds, OP_FUSION_CPU, OP_SHAPELESS,
     "float32 over the last axis: a scale (a Mul or Div by a one-element constant, or by a value "
     "computed from shapes in a keyed plan) and an additive mask before it fold into its host "
     "kernel"},
    {"residual", layer_norm_op, match_residual, op_build_residual_layer_norm, OP_FUSION_CPU,
     OP_SHAPELESS,
     "float32 over the last axis: the Add of two same-shape values before it (the residual sum) "
     "folds into its host kernel"},
    {"hard_sigmoid", hard_sigmoid_op, match_sole_reader, op_build_hard_sigmoid_epilogue,
     OP_FUSION_CPU, OP_SHAPELESS,
     "float32, its input read by it alone: the epilogue of the host kernel computing the input"},
    {"concat_channels_last", concat_op, match_read_by_conv, op_build_concat_channels_last,
     OP_FUSION_CPU, OP_SHAPELESS,
     "float32 parts of rank 3-5 joined along axis 1, read by a Conv alone: joined channels-last, "
     "the layout the convolution's host kernels read in place"},
};
enum { N_FUSION_ROWS = sizeof fusion_rows / sizeof *fusion_rows };

static bool anchors(const op_fusion *row, const ir_node *n) {
  if (n->domain[0] != 0) return false;
  for (const char *const *op = row->anchors; *op; op++)
    if (strcmp(*op, n->op_type) == 0) return true;
  return false;
}

/* --- the pass ------------------------------------------------------------------------------ */
/* Per node, its matches: adjacent in items, in table order. */
struct op_fusions {
  op_fusion_match *items;
  int count, cap;
  int *first;     /* per node: index of its first match in items, or -1 */
  int *n_matches; /* per node */
};

static op_fusion_match *append(op_fusions *f) {
  if (f->count == f->cap) {
    int cap = f->cap ? 2 * f->cap : 16;
    op_fusion_match *items = realloc(f->items, sizeof *items * (size_t)cap);
    if (!items) return NULL;
    f->items = items, f->cap = cap;
  }
  return &f->items[f->count];
}

int op_fusions_find(const ir_graph *g, const mx_array *consts, const bool *from_shapes,
                    mx_ctx *ctx, mx_device device, const bool *skip, op_fusions **out) {
  *out = NULL;
  unsigned on = device == MX_DEVICE_CPU ? OP_FUSION_CPU : OP_FUSION_GPU;
  op_fusions *fs = calloc(1, sizeof *fs);
  if (!fs) return MX_ERR_NOMEM;
  fs->first = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
  fs->n_matches = calloc((size_t)g->n_nodes + 1, sizeof(int));
  if (!fs->first || !fs->n_matches) return op_fusions_free(fs), MX_ERR_NOMEM;
  fz_graph f = {g, consts, ctx, from_shapes};
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    fs->first[i] = -1;
    if (skip && skip[i]) continue;
    for (int k = 0; k < N_FUSION_ROWS; k++) {
      const op_fusion *row = &fusion_rows[k];
      if (!(row->devices & on) || !anchors(row, n)) continue;
      op_fusion_match *m = append(fs);
      if (!m) return op_fusions_free(fs), MX_ERR_NOMEM;
      memset(m, 0, sizeof *m);
      if (!row->match(&f, n, m)) continue;
      m->row = row;
      if (fs->first[i] < 0) fs->first[i] = fs->count;
      fs->count++;
      fs->n_matches[i]++;
    }
  }
  if (fs->count == 0) op_fusions_free(fs), fs = NULL;
  *out = fs;
  return MX_OK;
}

void op_fusions_free(op_fusions *f) {
  if (!f) return;
  free(f->items);
  free(f->first);
  free(f->n_matches);
  free(f);
}

op_compile_class op_fusions_anchor_class(const op_fusions *f, int index) {
  op_compile_class c = OP_SHAPELESS;
  for (int k = 0; f && k < f->n_matches[index]; k++) {
    const op_fusion *row = f->items[f->first[index] + k].row;
    if (row->anchor_class > c) c = row->anchor_class;
  }
  return c;
}

int op_fusions_translate(tr_ctx *t, const op_fusions *f, int index, const op_row *row) {
  const ir_node *n = &t->g->nodes[index];
  for (int k = 0; f && k < f->n_matches[index]; k++) {
    const op_fusion_match *m = &f->items[f->first[index] + k];
    bool done = false;
    TR_TRY(m->row->build(t, n, m, &done));
    if (done) return MX_OK;
  }
  return row->translate(t, n, row);
}

void op_fusions_visit(void (*fn)(void *user, const op_fusion *row), void *user) {
  for (int k = 0; k < N_FUSION_ROWS; k++) fn(user, &fusion_rows[k]);
}
