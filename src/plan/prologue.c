/*
 * A keyed plan's prologue: the index and length arithmetic a group does on some of its inputs
 * before the heavy part reads the results (a decoder's attention_mask turned into seqlens_k by
 * ReduceSum, Sub and Cast, and into total_sequence_length by Shape, Gather and Cast). Found once
 * at plan build (plan_find_prologue), translated eagerly before each compiled call
 * (plan_call_inputs), and handed to the compiled function in place of the inputs only it reads.
 * A keyed variant is keyed on its function's inputs' dims, so such an input's dims stop keying
 * variants and its results' dims key them instead: a mask one column wider each decode step
 * keys nothing, the [B] lengths it sums to do. Whether a shape matters is never guessed: every
 * value the compiled function takes keys by its dims, and where a value computed from such an
 * input's shape alone may be read on the host as fixed for the variant (directly or through
 * shapeless-safe arithmetic: Expand's shape, Reshape's target), the input stays keyed. Read as
 * a value-keyed node's key input, such a value keys by its value or class (key_class_gqa).
 */
#include "plan/plan_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Index and length values: integer or bool. The prologue computes only these, so it never takes
 * an activation's work out of the compiled function. */
static bool index_type(int elem_type) {
  switch (elem_type) {
    case IR_BOOL: case IR_INT8: case IR_INT16: case IR_INT32: case IR_INT64:
    case IR_UINT8: case IR_UINT16: case IR_UINT32: case IR_UINT64: return true;
    default: return false;
  }
}

/* Whether node i can run before the compiled call: computable from bound inputs, constants and
 * other such nodes (avail), no host-value reads by its class, and index values out. */
static bool before_call(const plan *p, int i, const bool *avail) {
  const ir_graph *g = p->g;
  const ir_node *n = &g->nodes[i];
  if (p->folded[i] || p->classes[i] > OP_SHAPE_KEYED || n->n_subgraphs || n->n_implicit ||
      plan_node_touches_container(g, n))
    return false;
  for (int j = 0; j < n->n_inputs; j++)
    if (n->inputs[j] != IR_NONE && !avail[n->inputs[j]]) return false;
  bool any_out = false;
  for (int o = 0; o < n->n_outputs; o++) {
    int v = n->outputs[o];
    if (v == IR_NONE) continue;
    if (!index_type(g->values[v].elem_type)) return false;
    any_out = true;
  }
  return any_out;
}

static bool reads(const ir_node *n, int v) {
  for (int j = 0; j < n->n_inputs; j++)
    if (n->inputs[j] == v) return true;
  for (int j = 0; j < n->n_implicit; j++)
    if (n->implicit[j] == v) return true;
  return false;
}

/* Whether value v, computed from input shapes alone and fixed for a variant without a prologue,
 * may enter the compiled function as a traced value instead. Each node after the prologue
 * reading it must: a value-keyed node's key input keys the variant by value (or class) before
 * the call; a shapeless-safe node reads no value on the host, though what it computes from v
 * was fixed too and must pass the same test (a Cast feeding a Reshape's target would not). Any
 * other node may read it on the host as fixed for the variant (Expand's shape), which only
 * keying on the input's dims guarantees. Deep chains are refused. */
static bool may_be_traced(const plan *p, int v, int depth) {
  const ir_graph *g = p->g;
  if (depth > 32) return false;
  for (int r = 0; r < g->n_nodes; r++) {
    const ir_node *n = &g->nodes[r];
    if (p->prologue_node[r] || p->folded[r] || !reads(n, v)) continue;
    if (p->classes[r] == OP_SHAPELESS && !n->n_implicit) {
      for (int o = 0; p->shape_node[r] && o < n->n_outputs; o++)
        if (n->outputs[o] != IR_NONE && !may_be_traced(p, n->outputs[o], depth + 1)) return false;
      continue;
    }
    if (p->classes[r] != OP_VALUE_KEYED || n->n_implicit) return false;
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] == v && !(j < 32 && (p->rows[r]->key_inputs >> j & 1u))) return false;
  }
  return true;
}

/* The prologue of unkeyed inputs `unkeyed` (bits of candidate inputs): the before-call nodes
 * depending on one of them (dep: per value, the candidates it is computed from). Returns the
 * candidates to key again: those a prologue value depends on that is a graph output, or that
 * is computed from shapes alone and may not be traced (may_be_traced). */
static uint64_t mark(plan *p, const bool *early, const uint64_t *dep, uint64_t unkeyed) {
  const ir_graph *g = p->g;
  uint64_t rekey = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    uint64_t d = 0;
    for (int o = 0; o < n->n_outputs; o++)
      if (n->outputs[o] != IR_NONE) d |= dep[n->outputs[o]];
    p->prologue_node[i] = early[i] && (d & unkeyed);
  }
  for (int i = 0; i < g->n_nodes; i++) {
    if (!p->prologue_node[i]) continue;
    const ir_node *n = &g->nodes[i];
    for (int o = 0; o < n->n_outputs; o++) {
      int v = n->outputs[o];
      if (v == IR_NONE) continue;
      if (g->values[v].is_graph_output || (p->shape_node[i] && !may_be_traced(p, v, 0)))
        rekey |= dep[v] & unkeyed;
    }
  }
  return rekey;
}

/* The compiled function's inputs: the bound graph inputs the prologue does not replace, in
 * order, then the prologue's values that nodes after it read. */
static int lay_out_call(plan *p) {
  const ir_graph *g = p->g;
  p->call_values = calloc((size_t)g->n_values + 1, sizeof(int));
  if (!p->call_values) return MX_ERR_NOMEM;
  p->n_call_values = 0;
  for (int k = 0; k < g->n_graph_inputs; k++) {
    int v = g->graph_inputs[k];
    if (v != IR_NONE && !p->const_values[v] && !p->unkeyed_input[k])
      p->call_values[p->n_call_values++] = v;
  }
  for (int k = 0; k < g->n_nodes; k++) {
    int i = p->order[k];
    if (!p->prologue_node[i]) continue;
    const ir_node *n = &g->nodes[i];
    for (int o = 0; o < n->n_outputs; o++) {
      int v = n->outputs[o];
      bool read_after = false;
      for (int r = 0; v != IR_NONE && r < g->n_nodes && !read_after; r++)
        read_after = !p->prologue_node[r] && !p->folded[r] && reads(&g->nodes[r], v);
      if (read_after) p->call_values[p->n_call_values++] = v;
    }
  }
  return MX_OK;
}

/* The inputs read by before-call nodes alone (and not themselves outputs): bit c of the result
 * stands for graph input cand[c]; at most 64 (a decoder has one, its mask). */
static uint64_t candidates(const plan *p, const bool *early, int *cand) {
  const ir_graph *g = p->g;
  uint64_t bits = 0;
  for (int k = 0, c = 0; k < g->n_graph_inputs && c < 64; k++) {
    int v = g->graph_inputs[k];
    if (v == IR_NONE || p->const_values[v] || g->values[v].is_graph_output) continue;
    bool only_early = false;
    for (int i = 0; i < g->n_nodes; i++) {
      if (!reads(&g->nodes[i], v)) continue;
      only_early = early[i];
      if (!only_early) break;
    }
    if (!only_early) continue;
    cand[c] = k;
    bits |= 1ull << c++;
  }
  return bits;
}

int plan_find_prologue(plan *p) {
  const ir_graph *g = p->g;
  p->prologue_node = calloc((size_t)g->n_nodes + 1, sizeof(bool));
  p->unkeyed_input = calloc((size_t)g->n_graph_inputs + 1, sizeof(bool));
  if (!p->prologue_node || !p->unkeyed_input) return MX_ERR_NOMEM;
  if (p->path != PLAN_KEYED) return lay_out_call(p);
  bool *avail = calloc((size_t)g->n_values + 1, sizeof(bool));
  bool *early = calloc((size_t)g->n_nodes + 1, sizeof(bool));
  uint64_t *dep = calloc((size_t)g->n_values + 1, sizeof(uint64_t));
  if (!avail || !early || !dep) {
    free(avail), free(early), free(dep);
    return MX_ERR_NOMEM;
  }
  for (int v = 0; v < g->n_values; v++) avail[v] = p->const_values[v] != NULL;
  for (int k = 0; k < g->n_graph_inputs; k++)
    if (g->graph_inputs[k] != IR_NONE) avail[g->graph_inputs[k]] = true;
  for (int k = 0; k < g->n_nodes; k++) {
    int i = p->order[k];
    if (!(early[i] = before_call(p, i, avail))) continue;
    const ir_node *n = &g->nodes[i];
    for (int o = 0; o < n->n_outputs; o++)
      if (n->outputs[o] != IR_NONE) avail[n->outputs[o]] = true;
  }
  int cand[64];
  uint64_t unkeyed = candidates(p, early, cand);
  for (int c = 0; c < 64; c++)
    if (unkeyed >> c & 1u) dep[g->graph_inputs[cand[c]]] = 1ull << c;
  for (int k = 0; unkeyed && k < g->n_nodes; k++) { /* what each early value is computed from */
    int i = p->order[k];
    const ir_node *n = &g->nodes[i];
    uint64_t d = 0;
    for (int j = 0; early[i] && j < n->n_inputs; j++)
      if (n->inputs[j] != IR_NONE) d |= dep[n->inputs[j]];
    for (int o = 0; early[i] && o < n->n_outputs; o++)
      if (n->outputs[o] != IR_NONE) dep[n->outputs[o]] = d;
  }
  for (uint64_t rekey; unkeyed && (rekey = mark(p, early, dep, unkeyed));) unkeyed &= ~rekey;
  if (!unkeyed) memset(p->prologue_node, 0, (size_t)g->n_nodes * sizeof(bool));
  for (int c = 0; c < 64; c++)
    if (unkeyed >> c & 1u) p->unkeyed_input[cand[c]] = true;
  p->n_prologue_nodes = 0;
  for (int i = 0; i < g->n_nodes; i++) p->n_prologue_nodes += p->prologue_node[i];
  free(avail), free(early), free(dep);
  return lay_out_call(p);
}

int plan_call_inputs(const plan *p, mx_ctx *ctx, const mx_array *bound, plan_call *call,
                     char *err, size_t len) {
  memset(call, 0, sizeof *call);
  const ir_graph *g = p->g;
  call->inputs = calloc((size_t)p->n_call_values + 1, sizeof(mx_array));
  mx_array *values = NULL;
  if (p->n_prologue_nodes) values = malloc(sizeof(mx_array) * ((size_t)g->n_values + 1));
  if (!call->inputs || (p->n_prologue_nodes && !values)) {
    free(values);
    snprintf(err, len, "out of memory");
    return MX_ERR_NOMEM;
  }
  int rc = MX_OK;
  if (values) {
    memcpy(values, p->const_values, sizeof(mx_array) * (size_t)g->n_values);
    for (int k = 0, b = 0; k < g->n_graph_inputs; k++) {
      int v = g->graph_inputs[k];
      if (v != IR_NONE && !p->const_values[v]) values[v] = bound[b++];
    }
    for (int k = 0; rc == MX_OK && k < g->n_nodes; k++) {
      int i = p->order[k];
      if (p->prologue_node[i])
        rc = plan_translate_node(p, ctx, values, p->const_values, NULL, i, &call->checks,
                                 &call->host_reads, err, len);
    }
  }
  for (int c = 0; rc == MX_OK && c < p->n_call_values; c++) {
    int v = p->call_values[c];
    /* without a prologue the call values are the bound inputs, in order (lay_out_call) */
    call->inputs[c] = values ? values[v] : bound[c];
    if (!call->inputs[c]) {
      snprintf(err, len, "'%s' was not computed before the compiled call", g->values[v].name);
      rc = MX_ERR_ARG;
    } else {
      call->empty |= mx_size(call->inputs[c]) == 0;
    }
  }
  call->n = p->n_call_values;
  free(values);
  return rc;
}

void plan_call_free(plan_call *call) {
  free(call->inputs);
  free(call->checks.items);
  memset(call, 0, sizeof *call);
}
