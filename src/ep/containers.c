/*
 * Enforces the boundary rule for sequence and optional values (see containers.h). For each such
 * value touched by a claimed node it finds the first reason the value would cross a group's
 * boundary (a graph input or output, a producer outside the graph, a producer or consumer that
 * runs on CPU, or one in another MLX group) and unclaims the value's producer and consumers,
 * naming the value and the culprit in each decline reason.
 */
#include "ep/containers.h"

#include <stdio.h>
#include <stdlib.h>

static const char *kind_word(const ir_value *v) {
  return v->kind == IR_KIND_SEQUENCE ? "sequence" : v->kind == IR_KIND_OPTIONAL_TENSOR ||
                                                            v->kind == IR_KIND_OPTIONAL_SEQUENCE
                                                        ? "optional"
                                                        : "non-tensor";
}

/* Whether n reads v, directly or from inside one of its subgraphs (an If branch). */
static bool reads(const ir_node *n, int v) {
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] == v) return true;
  for (int i = 0; i < n->n_implicit; i++)
    if (n->implicit[i] == v) return true;
  return false;
}

/* Why value v would cross the boundary, or false when it stays inside one group. */
static bool crossing(const ir_graph *g, const bool *claimed, const int *group_of, int v,
                     char *why, size_t len) {
  const ir_value *val = &g->values[v];
  if (val->is_graph_input || val->is_graph_output) {
    snprintf(why, len, "it is a graph %s", val->is_graph_input ? "input" : "output");
    return true;
  }
  if (val->producer == IR_NONE) {
    snprintf(why, len, "it comes from outside this graph");
    return true;
  }
  const ir_node *p = &g->nodes[val->producer];
  if (!claimed[val->producer]) {
    snprintf(why, len, "producer '%s' (%s) runs on CPU", p->name, p->op_type);
    return true;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    if (!reads(&g->nodes[i], v)) continue;
    const ir_node *c = &g->nodes[i];
    if (!claimed[i]) {
      snprintf(why, len, "consumer '%s' (%s) runs on CPU", c->name, c->op_type);
      return true;
    }
    if (group_of[i] != group_of[val->producer]) {
      snprintf(why, len, "consumer '%s' (%s) falls in another MLX group than producer '%s'",
               c->name, c->op_type, p->name);
      return true;
    }
  }
  return false;
}

static void unclaim(const ir_graph *g, bool *claimed, int node, const char *reason,
                    containers_decline_fn decline, void *user, int *count) {
  if (node == IR_NONE || !claimed[node]) return;
  (void)g;
  claimed[node] = false;
  decline(user, node, reason);
  (*count)++;
}

int containers_enforce(const ir_graph *g, bool *claimed, const int *group_of,
                       containers_decline_fn decline, void *user) {
  bool *seen = calloc((size_t)g->n_values + 1, sizeof(bool));
  if (!seen) return -1;
  int count = 0;
  char why[192], reason[256];
  for (int i = 0; i < g->n_nodes; i++) {
    if (!claimed[i]) continue;
    const ir_node *n = &g->nodes[i];
    for (int pass = 0; pass < 2; pass++) {
      int k_max = pass ? n->n_outputs : n->n_inputs;
      for (int k = 0; k < k_max && claimed[i]; k++) {
        int v = pass ? n->outputs[k] : n->inputs[k];
        if (v == IR_NONE || g->values[v].is_tensor || seen[v]) continue;
        seen[v] = true;
        if (!crossing(g, claimed, group_of, v, why, sizeof why)) continue;
        snprintf(reason, sizeof reason, "%s value '%s' would cross the MLX boundary (%s)",
                 kind_word(&g->values[v]), g->values[v].name, why);
        unclaim(g, claimed, g->values[v].producer, reason, decline, user, &count);
        for (int c = 0; c < g->n_nodes; c++)
          if (reads(&g->nodes[c], v)) unclaim(g, claimed, c, reason, decline, user, &count);
      }
    }
  }
  free(seen);
  return count;
}
