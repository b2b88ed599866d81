/*
 * The per-node steps that building a plan (plan.c), its control-flow bodies (body.c) and running
 * it (run.c) share: constants converted into MLX arrays, one node translated (through the
 * fusions anchored there, else its row) with its name and op in any error, run-time checks
 * verified, shape conversion. Nothing here calls up into those files, so plan/ has one
 * direction: translate.c, node.c and cache.c below; body.c; plan.c (build); run.c (run).
 */
#include "plan/plan_internal.h"
#include "plan/packed.h"
#include "ops/fusions.h"

#include <stdio.h>
#include <stdlib.h>

int plan_dims_to_int(const int64_t *dims, int rank, int *shape) {
  if (rank > MX_MAX_RANK) return MX_ERR_ARG;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0 || dims[i] > INT32_MAX) return MX_ERR_ARG;
    shape[i] = (int)dims[i];
  }
  return MX_OK;
}

int plan_load_constants(ir_graph *g, mx_array *const_values, mx_ctx *ctx, char *err,
                        size_t len) {
  for (int v = 0; v < g->n_values; v++) {
    ir_value *val = &g->values[v];
    if (!val->is_constant) continue;
    int dt = ir_value_mx_dtype(val->elem_type);
    int shape[MX_MAX_RANK];
    if (dt < 0 || plan_dims_to_int(val->dims, val->rank, shape) != MX_OK) {
      snprintf(err, len, "constant '%s' (%s) cannot become an MLX array", val->name,
               ir_elem_name(val->elem_type));
      return MX_ERR_ARG;
    }
    int rc = ir_to_mx_dtype(val->elem_type) < 0 /* a raw type: unpacked into its carrier */
                 ? packed_to_mx(ctx, &const_values[v], val->elem_type, val->const_data,
                                val->const_bytes, shape, val->rank)
                 : mx_from_data(ctx, &const_values[v], val->const_data, shape, val->rank,
                                (mx_dtype)dt);
    if (rc != MX_OK) {
      snprintf(err, len, "constant '%s': %s", val->name, ctx->error);
      return MX_ERR_MLX;
    }
    val->const_data = NULL; /* ORT's buffer is not ours to keep */
  }
  return MX_OK;
}

bool plan_node_touches_container(const ir_graph *g, const ir_node *n) {
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] != IR_NONE && !g->values[n->inputs[i]].is_tensor) return true;
  for (int i = 0; i < n->n_outputs; i++)
    if (n->outputs[i] != IR_NONE && !g->values[n->outputs[i]].is_tensor) return true;
  return false;
}

/* Runs one node's translator, reporting failures with the node's name and op. */
int plan_translate_node(const plan *p, mx_ctx *ctx, mx_array *values, const mx_array *known,
                        tr_seqs *seqs, int index, tr_checks *checks, unsigned *host_reads,
                        char *err, size_t len) {
  const ir_node *n = &p->g->nodes[index];
  tr_ctx t = {.mx = ctx, .g = p->g, .values = values, .const_values = known,
              .node = n, .checks = checks, .path_note = &p->node_paths[index],
              .paths = p->node_paths,
              .fast_kernels = p->fast_kernels, .trace = (tr_trace)p->tracing,
              .derived = &p->derived[(size_t)index * TR_DERIVED_SLOTS], .seqs = seqs,
              .bodies = p->bodies[index]};
  ctx->error[0] = 0;
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] != IR_NONE && !tr_value_ready(&t, n->inputs[i])) {
      snprintf(err, len, "node '%s' (%s): input %d ('%s') has no value here", n->name,
               n->op_type, i, p->g->values[n->inputs[i]].name);
      return MX_ERR_ARG;
    }
  int rc = plan_translate_with(&t, p->fusions, index, p->rows[index]);
  *host_reads += t.host_reads;
  if (rc != MX_OK) {
    snprintf(err, len, "node '%s' (%s): %s", n->name, n->op_type,
             ctx->error[0] ? ctx->error : "translation failed");
    return rc;
  }
  for (int k = 0; k < n->n_outputs; k++)
    if (n->outputs[k] != IR_NONE && !tr_value_ready(&t, n->outputs[k])) {
      snprintf(err, len, "node '%s' (%s): output %d was not produced", n->name, n->op_type, k);
      return MX_ERR_ARG;
    }
  return MX_OK;
}

int plan_translate_with(tr_ctx *t, const struct op_fusions *fusions, int index,
                        const op_row *row) {
  return fusions ? op_fusions_translate(t, fusions, index, row)
                 : row->translate(t, t->node, row);
}

/* Evaluates the run-time checks and fails on the first that does not hold. */
int plan_verify_checks(mx_ctx *ctx, tr_checks *checks, char *err, size_t len) {
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
