/*
 * Kahn's topological sort with three ready queues: claimed, claimed to stand alone, unclaimed.
 * While claimed nodes are ready they are taken first and extend the current group; when none is
 * ready, a ready node that stands alone closes the group and forms one of its own; when neither
 * is, every ready unclaimed node is taken (which may make more claimed nodes ready) and the next
 * claimed node opens a new group. See partition.h for why runs of this order are valid fused
 * groups.
 */
#include "ir/partition.h"

#include <stdlib.h>

typedef struct queue {
  int *items;
  int head, tail;
} queue;

static void push(queue *q, int v) { q->items[q->tail++] = v; }
static bool empty(const queue *q) { return q->head == q->tail; }
static int pop(queue *q) { return q->items[q->head++]; }

/* A node waits for its inputs and for the values its subgraphs read (implicit inputs). */
static int n_deps(const ir_node *nd) { return nd->n_inputs + nd->n_implicit; }
static int dep(const ir_node *nd, int k) {
  return k < nd->n_inputs ? nd->inputs[k] : nd->implicit[k - nd->n_inputs];
}

enum { READY_UNCLAIMED, READY_CLAIMED, READY_ALONE };

static int ready_kind(const bool *claimed, const bool *alone, int i) {
  return !claimed[i] ? READY_UNCLAIMED : alone && alone[i] ? READY_ALONE : READY_CLAIMED;
}

int partition_groups(const ir_graph *g, const bool *claimed, const bool *alone, int *group_of,
                     int *order) {
  int n = g->n_nodes;
  int *pending = calloc((size_t)n + 1, sizeof(int));  /* producers not yet taken */
  int *consumer_count = calloc((size_t)g->n_values + 1, sizeof(int));
  int *consumer_start = calloc((size_t)g->n_values + 2, sizeof(int));
  int *consumers = NULL;
  queue ready[3] = {{calloc((size_t)n + 1, sizeof(int)), 0, 0},
                    {calloc((size_t)n + 1, sizeof(int)), 0, 0},
                    {calloc((size_t)n + 1, sizeof(int)), 0, 0}};
  int groups = -1;
  if (!pending || !consumer_count || !consumer_start || !ready[0].items || !ready[1].items ||
      !ready[2].items)
    goto done;

  /* value -> consumer nodes (CSR), and how many in-graph producers each node waits for. */
  size_t edges = 0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n_deps(&g->nodes[i]); k++) {
      int v = dep(&g->nodes[i], k);
      if (v == IR_NONE || g->values[v].producer == IR_NONE) continue;
      consumer_count[v]++;
      pending[i]++;
      edges++;
    }
  consumers = malloc(sizeof(int) * (edges + 1));
  if (!consumers) goto done;
  for (int v = 0; v < g->n_values; v++)
    consumer_start[v + 1] = consumer_start[v] + consumer_count[v];
  for (int v = 0; v < g->n_values; v++) consumer_count[v] = 0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n_deps(&g->nodes[i]); k++) {
      int v = dep(&g->nodes[i], k);
      if (v == IR_NONE || g->values[v].producer == IR_NONE) continue;
      consumers[consumer_start[v] + consumer_count[v]++] = i;
    }

  for (int i = 0; i < n; i++) {
    group_of[i] = IR_NONE;
    if (pending[i] == 0) push(&ready[ready_kind(claimed, alone, i)], i);
  }
  groups = 0;
  bool in_group = false;
  int taken = 0;
  while (taken < n) {
    int node;
    if (!empty(&ready[READY_CLAIMED])) {
      node = pop(&ready[READY_CLAIMED]);
      if (!in_group) {
        in_group = true;
        groups++;
      }
      group_of[node] = groups - 1;
    } else if (!empty(&ready[READY_ALONE])) {
      node = pop(&ready[READY_ALONE]);
      group_of[node] = groups++;
      in_group = false;
    } else if (!empty(&ready[READY_UNCLAIMED])) {
      node = pop(&ready[READY_UNCLAIMED]);
      in_group = false;
    } else {
      groups = -1; /* a cycle: cannot happen in a graph ORT accepted */
      break;
    }
    if (order) order[taken] = node;
    taken++;
    const ir_node *nd = &g->nodes[node];
    for (int k = 0; k < nd->n_outputs; k++) {
      int v = nd->outputs[k];
      if (v == IR_NONE) continue;
      for (int c = consumer_start[v]; c < consumer_start[v + 1]; c++) {
        int m = consumers[c];
        /* A node consuming one value twice waits for it twice, and is released twice. */
        if (--pending[m] == 0) push(&ready[ready_kind(claimed, alone, m)], m);
      }
    }
  }
done:
  free(pending);
  free(consumer_count);
  free(consumer_start);
  free(consumers);
  for (int q = 0; q < 3; q++) free(ready[q].items);
  return groups;
}
