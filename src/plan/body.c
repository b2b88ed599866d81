/*
 * Control-flow subgraphs (the branches of If, the bodies of Loop and Scan) inside a plan. At plan
 * build each subgraph becomes a plan_body: its nodes' registry rows found once in a topological
 * order, its constants converted to MLX arrays once, prepare hooks run, and every outer-scope
 * value it reads located in the enclosing graph by name, the fusion table run over it; bodies
 * of nested control-flow nodes are built the same way. At run time the control-flow translators
 * call tr_run_body, which translates the body's nodes into the same lazy MLX graph with a values
 * table of the body's own, so unrolling a loop is just translating its body once per iteration.
 */
#include "ir/partition.h"
#include "ops/fusions.h"
#include "plan/plan_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void body_free(plan_body *b) {
  if (!b) return;
  for (int i = 0; b->sub && i < b->g->n_nodes; i++)
    plan_bodies_free(b->sub[i], b->g->nodes[i].n_subgraphs);
  free(b->sub);
  free(b->order);
  free(b->rows);
  free(b->const_values);
  free(b->derived);
  free(b->node_paths);
  free(b->outer);
  op_fusions_free(b->fusions);
  free(b);
}

void plan_bodies_free(plan_body **bodies, int count) {
  if (!bodies) return;
  for (int i = 0; i < count; i++) body_free(bodies[i]);
  free(bodies);
}

/* A value of g that g neither computes nor receives nor holds: it comes from an outer scope. */
static bool reads_outer(const ir_value *v) {
  return !v->is_constant && !v->is_graph_input && v->producer == IR_NONE;
}

static int prepare_body(plan_body *b, mx_ctx *ctx, char *err, size_t len) {
  for (int i = 0; i < b->g->n_nodes; i++) {
    const ir_node *n = &b->g->nodes[i];
    if (!b->rows[i]->prepare) continue;
    tr_ctx t = {.mx = ctx, .g = b->g, .values = b->const_values,
                .const_values = b->const_values, .node = n,
                .derived = &b->derived[(size_t)i * TR_DERIVED_SLOTS], .preparing = true};
    ctx->error[0] = 0;
    if (b->rows[i]->prepare(&t, n, b->rows[i]) != MX_OK) {
      snprintf(err, len, "%s node '%s' (%s): preparing constants: %s", b->attr, n->name,
               n->op_type, ctx->error);
      return MX_ERR_MLX;
    }
  }
  return MX_OK;
}

/* Runs the fusion table over b's graph, its constants seen with the enclosing graph's
 * (outer-scope values the body reads) beside its own; *view receives that table, which the
 * body's own bodies then see as their enclosing constants (the caller frees it). */
static int body_fusions(plan_body *b, const mx_array *enclosing_consts, mx_ctx *ctx,
                        mx_array **view) {
  const ir_graph *g = b->g;
  *view = calloc((size_t)g->n_values + 1, sizeof(mx_array));
  if (!*view) return MX_ERR_NOMEM;
  for (int v = 0; v < g->n_values; v++)
    (*view)[v] = b->const_values[v]           ? b->const_values[v]
                 : b->outer[v] != IR_NONE && enclosing_consts ? enclosing_consts[b->outer[v]]
                                                              : NULL;
  return op_fusions_find(g, *view, NULL, ctx, ctx->device, NULL, &b->fusions);
}

static int body_build(const ir_graph *enclosing, const mx_array *enclosing_consts,
                      const ir_subgraph *s, mx_ctx *ctx, bool fast_kernels, plan_body **out,
                      char *err, size_t len) {
  const ir_graph *g = s->graph;
  int n = g->n_nodes;
  plan_body *b = calloc(1, sizeof *b);
  *out = b;
  if (!b) return snprintf(err, len, "out of memory"), MX_ERR_NOMEM;
  b->attr = s->attr;
  b->g = g;
  b->order = calloc((size_t)n + 1, sizeof(int));
  b->rows = calloc((size_t)n + 1, sizeof(op_row *));
  b->const_values = calloc((size_t)g->n_values + 1, sizeof(mx_array));
  b->derived = calloc(((size_t)n + 1) * TR_DERIVED_SLOTS, sizeof(mx_array));
  b->node_paths = calloc((size_t)n + 1, sizeof(tr_node_path));
  b->outer = calloc((size_t)g->n_values + 1, sizeof(int));
  b->sub = calloc((size_t)n + 1, sizeof(*b->sub));
  bool *all = calloc((size_t)n + 1, sizeof(bool));
  int *groups = calloc((size_t)n + 1, sizeof(int));
  mx_array *consts = NULL;
  int rc = MX_ERR_NOMEM;
  if (!b->order || !b->rows || !b->const_values || !b->derived || !b->node_paths || !b->outer ||
      !b->sub || !all || !groups) {
    snprintf(err, len, "out of memory");
    goto done;
  }
  rc = MX_ERR_ARG;
  for (int i = 0; i < n; i++) all[i] = true;
  if (partition_groups(g, all, NULL, groups, b->order) < 0) {
    snprintf(err, len, "%s has no topological order", s->attr);
    goto done;
  }
  for (int i = 0; i < n; i++) {
    const ir_node *nd = &g->nodes[i];
    b->rows[i] = op_lookup(nd->domain, nd->op_type, nd->since_version);
    if (!b->rows[i]) {
      snprintf(err, len, "%s node '%s' (%s): no registry row at opset %d", s->attr, nd->name,
               nd->op_type, nd->since_version);
      goto done;
    }
  }
  for (int v = 0; v < g->n_values; v++) {
    b->outer[v] = IR_NONE;
    if (!reads_outer(&g->values[v])) continue;
    b->outer[v] = ir_find_value(enclosing, g->values[v].name);
    if (b->outer[v] == IR_NONE) {
      snprintf(err, len, "%s reads '%s' from an outer scope, which the fused group does not "
               "receive", s->attr, g->values[v].name);
      goto done;
    }
  }
  rc = plan_load_constants((ir_graph *)g, b->const_values, ctx, err, len);
  if (rc == MX_OK && body_fusions(b, enclosing_consts, ctx, &consts) != MX_OK) {
    snprintf(err, len, "out of memory");
    rc = MX_ERR_NOMEM;
  }
  for (int i = 0; rc == MX_OK && i < n; i++)
    rc = plan_bodies_build(g, consts, &g->nodes[i], ctx, fast_kernels, &b->sub[i], err, len);
  if (rc == MX_OK) rc = prepare_body(b, ctx, err, len);
done:
  free(consts);
  free(all);
  free(groups);
  return rc;
}

int plan_bodies_build(const ir_graph *g, const mx_array *consts, const ir_node *n, mx_ctx *ctx,
                      bool fast_kernels, plan_body ***out, char *err, size_t len) {
  *out = NULL;
  if (!n->n_subgraphs) return MX_OK;
  plan_body **bodies = calloc((size_t)n->n_subgraphs, sizeof *bodies);
  if (!bodies) return snprintf(err, len, "out of memory"), MX_ERR_NOMEM;
  *out = bodies;
  for (int k = 0; k < n->n_subgraphs; k++) {
    int rc = body_build(g, consts, &n->subgraphs[k], ctx, fast_kernels, &bodies[k], err, len);
    if (rc != MX_OK) return rc; /* the caller frees what was built */
  }
  return MX_OK;
}

/* --- translation ------------------------------------------------------------------------- */
const struct plan_body *tr_body(const tr_ctx *t, const char *attr) {
  if (!t->bodies) return NULL;
  for (int k = 0; k < t->node->n_subgraphs; k++)
    if (strcmp(t->node->subgraphs[k].attr, attr) == 0) return t->bodies[k];
  return NULL;
}

const ir_graph *tr_body_graph(const struct plan_body *b) { return b->g; }

/* Rewrites the context's error as coming from body node n. */
static int body_error(tr_ctx *t, const plan_body *b, const ir_node *n, int rc) {
  char msg[MX_ERROR_LEN + 200];
  snprintf(msg, sizeof msg, "%.30s node '%.100s' (%.40s): %s", b->attr, n->name, n->op_type,
           t->mx->error[0] ? t->mx->error : "translation failed");
  memcpy(t->mx->error, msg, sizeof t->mx->error - 1);
  t->mx->error[sizeof t->mx->error - 1] = 0;
  return rc;
}

static int translate_body(tr_ctx *t, const plan_body *b, mx_array *values, const mx_array *known) {
  const ir_graph *g = b->g;
  for (int k = 0; k < g->n_nodes; k++) {
    int i = b->order[k];
    const ir_node *n = &g->nodes[i];
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] != IR_NONE && !values[n->inputs[j]]) {
        mx_set_error(t->mx, "input %d ('%s') has no value here", j, g->values[n->inputs[j]].name);
        return body_error(t, b, n, MX_ERR_ARG);
      }
    if (++t->body_nodes > TR_BODY_NODE_CAP)
      return tr_fail(t, "unrolling its subgraphs translates more than %d nodes in one run",
                     TR_BODY_NODE_CAP);
    tr_ctx sub = {.mx = t->mx, .g = g, .values = values, .const_values = known, .node = n,
                  .checks = t->checks, .path_note = &b->node_paths[i], .paths = b->node_paths,
                  .fast_kernels = t->fast_kernels, .trace = t->trace,
                  .derived = &b->derived[(size_t)i * TR_DERIVED_SLOTS], .bodies = b->sub[i],
                  .body_nodes = t->body_nodes};
    t->mx->error[0] = 0;
    int rc = plan_translate_with(&sub, b->fusions, i, b->rows[i]);
    t->host_reads += sub.host_reads;
    t->body_nodes = sub.body_nodes;
    if (rc != MX_OK) return body_error(t, b, n, rc);
    for (int o = 0; o < n->n_outputs; o++)
      if (n->outputs[o] != IR_NONE && !values[n->outputs[o]]) {
        mx_set_error(t->mx, "output %d was not produced", o);
        return body_error(t, b, n, MX_ERR_ARG);
      }
  }
  return MX_OK;
}

int tr_run_body(tr_ctx *t, const struct plan_body *b, const mx_array *inputs,
                uint64_t fixed_inputs, mx_array *outputs) {
  const ir_graph *g = b->g;
  size_t nv = (size_t)g->n_values + 1;
  mx_array *values = malloc(sizeof(mx_array) * nv), *known = malloc(sizeof(mx_array) * nv);
  int rc = values && known ? MX_OK : tr_fail(t, "out of memory");
  if (rc == MX_OK) {
    memcpy(values, b->const_values, sizeof(mx_array) * (size_t)g->n_values);
    memcpy(known, b->const_values, sizeof(mx_array) * (size_t)g->n_values);
    for (int v = 0; v < g->n_values; v++) {
      int o = b->outer[v];
      if (o == IR_NONE) continue;
      values[v] = t->values[o];
      if (t->const_values) known[v] = t->const_values[o];
      if (!values[v]) {
        rc = tr_fail(t, "%s reads '%s' from the outer scope, which has no value here", b->attr,
                     g->values[v].name);
        break;
      }
    }
    for (int k = 0; rc == MX_OK && k < g->n_graph_inputs; k++) {
      int v = g->graph_inputs[k];
      if (v == IR_NONE) continue;
      if (!inputs[k]) rc = tr_fail(t, "%s input %d has no value", b->attr, k);
      values[v] = inputs[k];
      known[v] = k < 64 && (fixed_inputs >> k & 1) ? inputs[k] : NULL;
    }
  }
  if (rc == MX_OK) rc = translate_body(t, b, values, known);
  for (int k = 0; rc == MX_OK && k < g->n_graph_outputs; k++) {
    int v = g->graph_outputs[k];
    outputs[k] = v == IR_NONE ? NULL : values[v];
    if (!outputs[k]) rc = tr_fail(t, "%s output %d has no value", b->attr, k);
  }
  free(values);
  free(known);
  return rc;
}
