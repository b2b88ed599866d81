/*
 * Builds plans (see plan.h): take ownership of the group's snapshot, order its nodes, find each
 * node's registry row, copy constant initializers into MLX arrays, fold nodes whose inputs are
 * all constant, run the fusion table over the rest (ops/fusions.h), choose the compile path
 * from the nodes' compile classes, and find a keyed plan's prologue (prologue.c). Running lives
 * in run.c; the per-node translation step both share lives in node.c, the compile cache in
 * cache.c.
 */
#include "plan/plan.h"

#include "ir/partition.h"
#include "plan/plan_internal.h"
#include "plan/packed.h"
#include "ops/fusions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool all_inputs_constant(const plan *p, const ir_node *n) {
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] != IR_NONE && !p->const_values[n->inputs[i]]) return false;
  for (int i = 0; i < n->n_implicit; i++) /* values its subgraphs read */
    if (n->implicit[i] != IR_NONE && !p->const_values[n->implicit[i]]) return false;
  return true;
}

/* Nodes whose inputs are all constant (Constant itself, shape arithmetic on initializers) run
 * once here; their outputs become constants. Eager rows (random, host reads) are left alone, and
 * so are nodes touching sequences (a constant is one array, not a list). */
static int fold_constants(plan *p, mx_ctx *ctx, char *err, size_t len) {
  for (int k = 0; k < p->g->n_nodes; k++) {
    int i = p->order[k];
    const ir_node *n = &p->g->nodes[i];
    if (p->rows[i]->compile_class >= OP_EAGER || !all_inputs_constant(p, n) ||
        plan_node_touches_container(p->g, n))
      continue;
    unsigned reads = 0;
    tr_checks checks = {0};
    int rc = plan_translate_node(p, ctx, p->const_values, p->const_values, NULL, i, &checks,
                                 &reads, err, len);
    if (rc == MX_OK) rc = plan_verify_checks(ctx, &checks, err, len);
    free(checks.items);
    for (int o = 0; rc == MX_OK && o < n->n_outputs; o++)
      if (n->outputs[o] != IR_NONE) rc = mx_eval(ctx, &p->const_values[n->outputs[o]], 1);
    if (rc == MX_OK) {
      p->folded[i] = true;
      continue;
    }
    /* A node that cannot be folded (an output too large to hold, a failed check) is left to run
     * per call, where its error reaches the Run that meets it, as on ORT's CPU provider; the
     * session is still made. */
    for (int o = 0; o < n->n_outputs; o++)
      if (n->outputs[o] != IR_NONE) p->const_values[n->outputs[o]] = NULL;
    err[0] = 0;
  }
  return MX_OK;
}

/* Runs the rows' prepare hooks (work on constant inputs done once, such as weight layouts) in
 * the constants' arena; their results live as long as the plan. */
static int prepare_nodes(plan *p, mx_ctx *ctx, char *err, size_t len) {
  for (int i = 0; i < p->g->n_nodes; i++) {
    const ir_node *n = &p->g->nodes[i];
    if (p->folded[i] || !p->rows[i]->prepare) continue;
    tr_ctx t = {.mx = ctx, .g = p->g, .values = p->const_values,
                .const_values = p->const_values, .node = n,
                .derived = &p->derived[(size_t)i * TR_DERIVED_SLOTS], .preparing = true};
    ctx->error[0] = 0;
    if (p->rows[i]->prepare(&t, n, p->rows[i]) != MX_OK) {
      snprintf(err, len, "node '%s' (%s): preparing constants: %s", n->name, n->op_type,
               ctx->error);
      return MX_ERR_MLX;
    }
  }
  return MX_OK;
}

/* Marks the nodes whose outputs depend only on input shapes and constants: Shape (and Size)
 * themselves and every non-eager node all of whose inputs are constants or such values. */
static void mark_shape_nodes(plan *p) {
  bool *derived = calloc((size_t)p->g->n_values + 1, sizeof(bool));
  if (!derived) return; /* without the marks, keyed plans simply trace fewer constants */
  for (int k = 0; k < p->g->n_nodes; k++) {
    int i = p->order[k];
    const ir_node *n = &p->g->nodes[i];
    /* the prologue's values are the compiled function's inputs, not fixed for a variant */
    if (p->folded[i] || p->classes[i] >= OP_EAGER || n->n_subgraphs ||
        plan_node_touches_container(p->g, n) || (p->prologue_node && p->prologue_node[i]))
      continue;
    /* Shape and Size read only shapes, which a keyed variant fixes, whatever their input. */
    bool from_shape = strcmp(n->op_type, "Shape") == 0 || strcmp(n->op_type, "Size") == 0;
    bool all_known = n->n_inputs > 0, any_derived = false;
    for (int j = 0; j < n->n_inputs; j++) {
      int v = n->inputs[j];
      if (v == IR_NONE) continue;
      any_derived |= derived[v];
      all_known &= derived[v] || p->const_values[v] != NULL;
    }
    if (!from_shape && !(all_known && any_derived)) continue;
    p->shape_node[i] = true;
    p->has_shape_nodes = true;
    for (int o = 0; o < n->n_outputs; o++)
      if (n->outputs[o] != IR_NONE) derived[n->outputs[o]] = true;
  }
  free(derived);
}

/* The fusion table's pass (ops/fusions.h), once the constants are known: each anchor's
 * matches, and the compile class a matched anchor needs (a host kernel on the CPU device is
 * built for concrete shapes). The values shape nodes compute are known to keyed variants. */
static int find_fusions(plan *p, mx_ctx *ctx, const plan_config *cfg, char *err, size_t len) {
  bool *from_shapes = calloc((size_t)p->g->n_values + 1, sizeof(bool));
  if (!from_shapes) {
    snprintf(err, len, "out of memory while matching fused patterns");
    return MX_ERR_NOMEM;
  }
  for (int i = 0; i < p->g->n_nodes; i++)
    for (int o = 0; p->shape_node[i] && o < p->g->nodes[i].n_outputs; o++)
      if (p->g->nodes[i].outputs[o] != IR_NONE) from_shapes[p->g->nodes[i].outputs[o]] = true;
  int rc = op_fusions_find(p->g, p->const_values, from_shapes, ctx, p->device, p->folded,
                           &p->fusions);
  free(from_shapes);
  if (rc != MX_OK) {
    snprintf(err, len, "out of memory while matching fused patterns");
    return rc;
  }
  for (int i = 0; p->fusions && i < p->g->n_nodes; i++) {
    op_compile_class c = op_fusions_anchor_class(p->fusions, i);
    if (c == OP_SHAPELESS_GPU) /* as the rows' classes are mapped in plan_build */
      c = p->device == MX_DEVICE_CPU && cfg->host_kernels ? OP_SHAPE_KEYED : OP_SHAPELESS;
    if (c > p->classes[i]) p->classes[i] = c;
  }
  return MX_OK;
}

/* The values keying a keyed plan's variants besides shapes (OP_VALUE_KEYED nodes' key inputs,
 * when computed), and the nodes they need: the key values' producers and, walking back, every
 * node whose output those read. Too many keys and the plan runs eagerly. */
static void find_keys(plan *p) {
  const ir_graph *g = p->g;
  bool *needed = calloc((size_t)g->n_values + 1, sizeof(bool));
  if (!needed) { /* without keys a value-keyed node would read a traced value: stay eager */
    p->path = PLAN_EAGER;
    p->path_reason = "out of memory while finding the values that key the plan";
    return;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    if (p->folded[i] || p->classes[i] != OP_VALUE_KEYED) continue;
    const ir_node *n = &g->nodes[i];
    for (int j = 0; j < n->n_inputs && j < 32; j++) {
      int v = n->inputs[j];
      if (!(p->rows[i]->key_inputs >> j & 1u) || v == IR_NONE || p->const_values[v] ||
          needed[v])
        continue;
      if (p->n_keys == PLAN_MAX_KEYS) {
        p->path = PLAN_EAGER;
        p->path_reason = "more than 16 computed values would key the plan";
        free(needed);
        return;
      }
      p->keys[p->n_keys++] = v;
      needed[v] = true;
    }
  }
  for (int k = g->n_nodes - 1; k >= 0; k--) {
    int i = p->order[k];
    const ir_node *n = &g->nodes[i];
    bool makes_needed = false;
    for (int o = 0; o < n->n_outputs; o++)
      makes_needed |= n->outputs[o] != IR_NONE && needed[n->outputs[o]];
    if (p->folded[i] || !makes_needed) continue;
    p->key_node[i] = true;
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] != IR_NONE) needed[n->inputs[j]] = true;
    for (int j = 0; j < n->n_implicit; j++)
      if (n->implicit[j] != IR_NONE) needed[n->implicit[j]] = true;
  }
  free(needed);
}

/* The compile path: shapeless when every node that runs per call allows it, keyed on input
 * shapes when some node reads shapes, eager when some node reads values on the host. */
static void choose_path(plan *p, const plan_config *cfg) {
  op_compile_class worst = OP_SHAPELESS;
  p->path_reason = "every node is shapeless-safe";
  p->path_node = -1;
  int live = 0;
  for (int i = 0; i < p->g->n_nodes; i++) {
    /* a control-flow node unrolls its subgraphs: more than one op to fuse */
    live += !p->folded[i] ? 1 + (p->g->nodes[i].n_subgraphs > 0) : 0;
    if (p->folded[i] || p->classes[i] <= worst) continue;
    worst = p->classes[i];
    p->path_node = i;
    snprintf(p->path_reason_buf, sizeof p->path_reason_buf, "%s '%s' is %s",
             p->g->nodes[i].op_type, p->g->nodes[i].name,
             worst == OP_HOST_SHAPE   ? "evaluated on the host (its output shape follows values)"
             : worst == OP_EAGER      ? "eager-only"
             : worst == OP_VALUE_KEYED ? "value-keyed (its inputs are computed before the call)"
                                      : "shape-keyed");
    p->path_reason = p->path_reason_buf;
  }
  if (!cfg->compile) {
    p->path = PLAN_EAGER;
    p->path_reason = "compilation disabled (ONNXRUNTIME_EP_MLX_NO_COMPILE)";
  } else if (worst == OP_HOST_SHAPE) {
    p->path = PLAN_EAGER; /* path_reason names the node */
  } else if (live <= 1) {
    p->path = PLAN_EAGER; /* compiling one op only adds the cost of the compiled call */
    p->path_reason = "a single node: nothing to fuse";
  } else if (worst >= OP_EAGER) {
    p->path = PLAN_EAGER;
  } else if (worst == OP_SHAPE_KEYED || worst == OP_VALUE_KEYED || !cfg->shapeless) {
    p->path = PLAN_KEYED;
    if (worst == OP_SHAPELESS)
      p->path_reason = "shapeless disabled (ONNXRUNTIME_EP_MLX_NO_SHAPELESS)";
  } else {
    p->path = PLAN_SHAPELESS;
  }
  p->cache_capacity = cfg->cache_size > 0 ? cfg->cache_size : 1;
  p->trial.enabled = cfg->path_trial && p->path != PLAN_EAGER;
}

int plan_build(const ir_graph *snapshot, const char *name, const plan_config *cfg, plan **out,
               char *err, size_t len) {
  mx_device device = cfg->device;
  *out = NULL;
  plan *p = calloc(1, sizeof *p);
  if (!p) return MX_ERR_NOMEM;
  p->g = (ir_graph *)snapshot; /* the plan owns the snapshot from here on */
  p->device = device;
  p->wrap_inputs = cfg->wrap_inputs;
  p->fast_kernels = cfg->fast_kernels;
  int n = p->g->n_nodes;
  p->name = strdup(name ? name : "");
  p->order = calloc((size_t)n + 1, sizeof(int));
  p->rows = calloc((size_t)n + 1, sizeof(op_row *));
  p->folded = calloc((size_t)n + 1, sizeof(bool));
  p->shape_node = calloc((size_t)n + 1, sizeof(bool));
  p->key_node = calloc((size_t)n + 1, sizeof(bool));
  p->classes = calloc((size_t)n + 1, sizeof(op_compile_class));
  p->node_paths = calloc((size_t)n + 1, sizeof(tr_node_path));
  p->derived = calloc(((size_t)n + 1) * TR_DERIVED_SLOTS, sizeof(mx_array));
  p->const_values = calloc((size_t)p->g->n_values + 1, sizeof(mx_array));
  p->bodies = calloc((size_t)n + 1, sizeof(*p->bodies));
  bool *all = calloc((size_t)n + 1, sizeof(bool));
  int *groups = calloc((size_t)n + 1, sizeof(int));
  p->consts = mx_arena_new();
  int rc = MX_ERR_NOMEM;
  if (!p->name || !p->order || !p->rows || !p->folded || !p->shape_node || !p->key_node ||
      !p->classes ||
      !p->node_paths || !p->derived || !p->const_values || !p->bodies ||
      !all || !groups || !p->consts) {
    snprintf(err, len, "out of memory while building the plan");
    goto fail;
  }
  for (int i = 0; i < n; i++) all[i] = true;
  if (partition_groups(p->g, all, NULL, groups, p->order) < 0) {
    snprintf(err, len, "the fused subgraph has no topological order");
    goto fail;
  }
  for (int i = 0; i < n; i++) {
    const ir_node *nd = &p->g->nodes[i];
    p->rows[i] = op_lookup(nd->domain, nd->op_type, nd->since_version);
    if (p->rows[i]) p->classes[i] = op_node_compile_class(p->rows[i], p->g, nd);
    if (p->classes[i] == OP_SHAPELESS_GPU) /* host kernels on the CPU device (cpu/cpu.h) */
      p->classes[i] = device == MX_DEVICE_CPU && cfg->host_kernels ? OP_SHAPE_KEYED : OP_SHAPELESS;
    if (!p->rows[i]) {
      snprintf(err, len, "node '%s' (%s): no registry row at opset %d", nd->name, nd->op_type,
               nd->since_version);
      rc = MX_ERR_ARG;
      goto fail;
    }
  }
  mx_ctx ctx = {.arena = p->consts, .device = device, .resident = !p->wrap_inputs};
  rc = plan_load_constants(p->g, p->const_values, &ctx, err, len);
  for (int i = 0; rc == MX_OK && i < n; i++)
    rc = plan_bodies_build(p->g, p->const_values, &p->g->nodes[i], &ctx, p->fast_kernels,
                           &p->bodies[i], err, len);
  if (rc == MX_OK) rc = fold_constants(p, &ctx, err, len);
  if (rc == MX_OK) rc = prepare_nodes(p, &ctx, err, len);
  if (rc == MX_OK) mark_shape_nodes(p);
  if (rc == MX_OK) rc = find_fusions(p, &ctx, cfg, err, len);
  if (rc != MX_OK) goto fail;
  choose_path(p, cfg);
  if (p->path == PLAN_KEYED) find_keys(p);
  if (plan_find_prologue(p) != MX_OK) {
    snprintf(err, len, "out of memory while building the plan");
    rc = MX_ERR_NOMEM;
    goto fail;
  }
  if (p->n_prologue_nodes) { /* shape values again, the prologue's left out */
    memset(p->shape_node, 0, (size_t)n * sizeof(bool));
    p->has_shape_nodes = false;
    mark_shape_nodes(p);
  }
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
  plan_cache_clear(p);
  op_fusions_free(p->fusions);
  for (int i = 0; p->bodies && p->g && i < p->g->n_nodes; i++)
    plan_bodies_free(p->bodies[i], p->g->nodes[i].n_subgraphs);
  free(p->bodies);
  mx_arena_free(p->consts);
  ir_graph_free(p->g);
  free(p->name);
  free(p->order);
  free(p->rows);
  free(p->folded);
  free(p->shape_node);
  free(p->key_node);
  free(p->prologue_node);
  free(p->unkeyed_input);
  free(p->call_values);
  free(p->classes);
  free(p->derived);
  free(p->node_paths);
  free(p->const_values);
  free(p);
}

