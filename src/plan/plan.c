/*
 * Builds and runs plans (see plan.h). Build: take ownership of the group's snapshot, order its
 * nodes, find each node's registry row, copy constant initializers into MLX arrays, and fold
 * nodes whose inputs are all constant. Run: wrap the inputs, call each node's translator to grow
 * one lazy MLX graph, cast outputs to their declared types and evaluate them together.
 */
#include "plan/plan.h"

#include "ir/partition.h"
#include "plan/translate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int dims_to_int(const int64_t *dims, int rank, int *shape) {
  if (rank > MX_MAX_RANK) return MX_ERR_ARG;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0 || dims[i] > INT32_MAX) return MX_ERR_ARG;
    shape[i] = (int)dims[i];
  }
  return MX_OK;
}

static int load_constants(plan *p, mx_ctx *ctx, char *err, size_t len) {
  for (int v = 0; v < p->g->n_values; v++) {
    ir_value *val = &p->g->values[v];
    if (!val->is_constant) continue;
    int dt = ir_to_mx_dtype(val->elem_type);
    int shape[MX_MAX_RANK];
    if (dt < 0 || dims_to_int(val->dims, val->rank, shape) != MX_OK) {
      snprintf(err, len, "constant '%s' (%s) cannot become an MLX array", val->name,
               ir_elem_name(val->elem_type));
      return MX_ERR_ARG;
    }
    if (mx_from_data(ctx, &p->const_values[v], val->const_data, shape, val->rank,
                     (mx_dtype)dt) != MX_OK) {
      snprintf(err, len, "constant '%s': %s", val->name, ctx->error);
      return MX_ERR_MLX;
    }
    val->const_data = NULL; /* ORT's buffer is not ours to keep */
  }
  return MX_OK;
}

static bool all_inputs_constant(const plan *p, const ir_node *n) {
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] != IR_NONE && !p->const_values[n->inputs[i]]) return false;
  return true;
}

/* Runs one node's translator, reporting failures with the node's name and op. */
static int translate_node(const plan *p, mx_ctx *ctx, mx_array *values, int index,
                          tr_checks *checks, unsigned *host_reads, char *err, size_t len) {
  const ir_node *n = &p->g->nodes[index];
  tr_ctx t = {.mx = ctx, .g = p->g, .values = values, .node = n, .checks = checks};
  ctx->error[0] = 0;
  int rc = p->rows[index]->translate(&t, n, p->rows[index]);
  *host_reads += t.host_reads;
  if (rc != MX_OK) {
    snprintf(err, len, "node '%s' (%s): %s", n->name, n->op_type,
             ctx->error[0] ? ctx->error : "translation failed");
    return rc;
  }
  for (int k = 0; k < n->n_outputs; k++)
    if (n->outputs[k] != IR_NONE && !values[n->outputs[k]]) {
      snprintf(err, len, "node '%s' (%s): output %d was not produced", n->name, n->op_type, k);
      return MX_ERR_ARG;
    }
  return MX_OK;
}

/* Evaluates the run-time checks and fails on the first that does not hold. */
static int verify_checks(mx_ctx *ctx, tr_checks *checks, char *err, size_t len) {
  for (int i = 0; i < checks->count; i++) {
    tr_check *k = &checks->items[i];
    bool ok = false;
    if (mx_copy_to_host(ctx, k->ok, &ok, sizeof ok) != MX_OK) {
      snprintf(err, len, "node '%s' (%s): %s", k->node->name, k->node->op_type, ctx->error);
      return MX_ERR_MLX;
    }
    if (!ok) {
      snprintf(err, len, "node '%s' (%s): %s", k->node->name, k->node->op_type, k->message);
      return MX_ERR_ARG;
    }
  }
  return MX_OK;
}

/* Nodes whose inputs are all constant (Constant itself, shape arithmetic on initializers) run
 * once here; their outputs become constants. Eager rows (random, host reads) are left alone. */
static int fold_constants(plan *p, mx_ctx *ctx, char *err, size_t len) {
  for (int k = 0; k < p->g->n_nodes; k++) {
    int i = p->order[k];
    const ir_node *n = &p->g->nodes[i];
    if (p->rows[i]->compile_class == OP_EAGER || !all_inputs_constant(p, n)) continue;
    unsigned reads = 0;
    tr_checks checks = {0};
    int rc = translate_node(p, ctx, p->const_values, i, &checks, &reads, err, len);
    if (rc == MX_OK) rc = verify_checks(ctx, &checks, err, len);
    free(checks.items);
    if (rc != MX_OK) return rc;
    for (int o = 0; o < n->n_outputs; o++) {
      if (n->outputs[o] == IR_NONE) continue;
      mx_array *slot = &p->const_values[n->outputs[o]];
      if (mx_eval(ctx, slot, 1) != MX_OK) {
        snprintf(err, len, "node '%s' (%s): %s", n->name, n->op_type, ctx->error);
        return MX_ERR_MLX;
      }
    }
    p->folded[i] = true;
  }
  return MX_OK;
}

int plan_build(const ir_graph *snapshot, const char *name, mx_device device, plan **out,
               char *err, size_t len) {
  *out = NULL;
  plan *p = calloc(1, sizeof *p);
  if (!p) return MX_ERR_NOMEM;
  p->g = (ir_graph *)snapshot; /* the plan owns the snapshot from here on */
  p->device = device;
  p->wrap_inputs = device == MX_DEVICE_CPU;
  int n = p->g->n_nodes;
  p->name = strdup(name ? name : "");
  p->order = calloc((size_t)n + 1, sizeof(int));
  p->rows = calloc((size_t)n + 1, sizeof(op_row *));
  p->folded = calloc((size_t)n + 1, sizeof(bool));
  p->const_values = calloc((size_t)p->g->n_values + 1, sizeof(mx_array));
  bool *all = calloc((size_t)n + 1, sizeof(bool));
  int *groups = calloc((size_t)n + 1, sizeof(int));
  p->consts = mx_arena_new();
  int rc = MX_ERR_NOMEM;
  if (!p->name || !p->order || !p->rows || !p->folded || !p->const_values || !all || !groups ||
      !p->consts) {
    snprintf(err, len, "out of memory while building the plan");
    goto fail;
  }
  for (int i = 0; i < n; i++) all[i] = true;
  if (partition_groups(p->g, all, groups, p->order) < 0) {
    snprintf(err, len, "the fused subgraph has no topological order");
    goto fail;
  }
  for (int i = 0; i < n; i++) {
    const ir_node *nd = &p->g->nodes[i];
    p->rows[i] = op_lookup(nd->domain, nd->op_type, nd->since_version);
    if (!p->rows[i]) {
      snprintf(err, len, "node '%s' (%s): no registry row at opset %d", nd->name, nd->op_type,
               nd->since_version);
      rc = MX_ERR_ARG;
      goto fail;
    }
  }
  mx_ctx ctx = {.arena = p->consts, .device = device};
  rc = load_constants(p, &ctx, err, len);
  if (rc == MX_OK) rc = fold_constants(p, &ctx, err, len);
  if (rc != MX_OK) goto fail;
  free(all);
  free(groups);
  *out = p;
  return MX_OK;
fail:
  free(all);
  free(groups);
  plan_free(p);
  return rc;
}

void plan_free(plan *p) {
  if (!p) return;
  mx_arena_free(p->consts);
  ir_graph_free(p->g);
  free(p->name);
  free(p->order);
  free(p->rows);
  free(p->folded);
  free(p->const_values);
  free(p);
}

static int bind_input(plan *p, mx_ctx *ctx, int k, const plan_tensor *in, mx_array *slot,
                      char *err, size_t len) {
  const ir_value *v = &p->g->values[p->g->graph_inputs[k]];
  int dt = ir_to_mx_dtype(in->elem_type);
  int shape[MX_MAX_RANK];
  if (dt < 0 || (v->elem_type != IR_UNDEFINED && in->elem_type != v->elem_type)) {
    snprintf(err, len, "input '%s' has element type %s, the plan expects %s", v->name,
             ir_elem_name(in->elem_type), ir_elem_name(v->elem_type));
    return MX_ERR_ARG;
  }
  if (dims_to_int(in->dims, in->rank, shape) != MX_OK) {
    snprintf(err, len, "input '%s' has a shape MLX cannot hold (rank %d)", v->name, in->rank);
    return MX_ERR_ARG;
  }
  static char empty[16];
  void *data = in->bytes ? in->data : empty;
  int rc = p->wrap_inputs ? mx_wrap_data(ctx, slot, data, shape, in->rank, (mx_dtype)dt)
                          : mx_from_data(ctx, slot, data, shape, in->rank, (mx_dtype)dt);
  if (rc != MX_OK) snprintf(err, len, "input '%s': %s", v->name, ctx->error);
  atomic_fetch_add(&p->stats.bytes_in, in->bytes);
  return rc;
}

/* One evaluation for the outputs and the checks together. */
static int eval_outputs(mx_ctx *ctx, mx_array *outputs, int n, tr_checks *checks) {
  mx_array *all = malloc(sizeof(mx_array) * ((size_t)n + (size_t)checks->count + 1));
  if (!all) {
    mx_set_error(ctx, "out of memory");
    return MX_ERR_NOMEM;
  }
  for (int i = 0; i < n; i++) all[i] = outputs[i];
  for (int i = 0; i < checks->count; i++) all[n + i] = checks->items[i].ok;
  int rc = mx_eval(ctx, all, (size_t)n + (size_t)checks->count);
  free(all);
  return rc;
}

/* MLX reports some errors only when the graph is evaluated, without saying which op failed.
 * The lazy graph is still intact, so evaluate node by node, in order, to name the culprit. */
static void locate_failure(const plan *p, mx_ctx *ctx, mx_array *values, char *err, size_t len) {
  char first[MX_ERROR_LEN];
  snprintf(first, sizeof first, "%s", ctx->error);
  for (int k = 0; k < p->g->n_nodes; k++) {
    const ir_node *n = &p->g->nodes[p->order[k]];
    for (int o = 0; o < n->n_outputs; o++) {
      if (n->outputs[o] == IR_NONE || !values[n->outputs[o]]) continue;
      if (mx_eval(ctx, &values[n->outputs[o]], 1) != MX_OK) {
        snprintf(err, len, "node '%s' (%s): %s", n->name, n->op_type, ctx->error);
        return;
      }
    }
  }
  snprintf(err, len, "evaluating group '%s': %s", p->name, first);
}

int plan_run(plan *p, mx_ctx *ctx, const plan_tensor *inputs, mx_array *outputs, char *err,
             size_t len) {
  uint64_t start = now_ns();
  int rc = MX_ERR_NOMEM;
  tr_checks checks = {0};
  mx_array *values = malloc(sizeof(mx_array) * ((size_t)p->g->n_values + 1));
  if (!values) {
    snprintf(err, len, "out of memory");
    goto done;
  }
  memcpy(values, p->const_values, sizeof(mx_array) * (size_t)p->g->n_values);
  for (int k = 0; k < p->g->n_graph_inputs; k++) {
    int v = p->g->graph_inputs[k];
    if (v == IR_NONE || p->const_values[v]) continue;
    rc = bind_input(p, ctx, k, &inputs[k], &values[v], err, len);
    if (rc != MX_OK) goto done;
  }
  unsigned host_reads = 0;
  for (int k = 0; k < p->g->n_nodes; k++) {
    int i = p->order[k];
    if (p->folded[i]) continue;
    rc = translate_node(p, ctx, values, i, &checks, &host_reads, err, len);
    if (rc != MX_OK) goto done;
  }
  atomic_fetch_add(&p->stats.host_reads, host_reads);
  for (int k = 0; k < p->g->n_graph_outputs; k++) {
    const ir_value *v = &p->g->values[p->g->graph_outputs[k]];
    outputs[k] = values[p->g->graph_outputs[k]];
    int want = ir_to_mx_dtype(v->elem_type);
    if (want >= 0 && mx_dtype_of(outputs[k]) != (mx_dtype)want &&
        mx_astype(ctx, &outputs[k], outputs[k], (mx_dtype)want) != MX_OK) {
      snprintf(err, len, "output '%s': %s", v->name, ctx->error);
      rc = MX_ERR_MLX;
      goto done;
    }
  }
  rc = eval_outputs(ctx, outputs, p->g->n_graph_outputs, &checks);
  if (rc != MX_OK) locate_failure(p, ctx, values, err, len);
  else rc = verify_checks(ctx, &checks, err, len);
done:
  free(checks.items);
  free(values);
  atomic_fetch_add(&p->stats.runs, 1);
  if (rc != MX_OK) atomic_fetch_add(&p->stats.failures, 1);
  atomic_fetch_add(&p->stats.eval_ns, now_ns() - start);
  return rc;
}
