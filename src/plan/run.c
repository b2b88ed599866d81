/*
 * Running a plan (see plan.h). Every path binds ORT's inputs to MLX arrays (without a copy on
 * the CPU device) and ends in one evaluation of the outputs plus the run-time checks. The eager
 * path translates node by node on every call. The compiled paths trace the same translation once
 * through MLX `compile` and reuse it: one shapeless function, or a small least-recently-used
 * cache of functions keyed on the dtypes and shapes of the function's inputs (a keyed plan's
 * prologue, prologue.c, replaces some inputs with its results). A compiled call that fails is
 * retried eagerly; if eager succeeds, the trace was at fault and the plan stays eager from then
 * on (counted as a fallback in the diagnostics).
 */
#include "plan/plan_internal.h"
#include "cpu/cpu.h"
#include "plan/packed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t plan_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *plan_path_name(plan_path path) {
  switch (path) {
    case PLAN_EAGER: return "eager";
    case PLAN_SHAPELESS: return "shapeless";
    case PLAN_KEYED: return "keyed";
  }
  return "?";
}

const char *plan_class_name(op_compile_class c) {
  switch (c) {
    case OP_SHAPELESS: return "shapeless";
    case OP_SHAPELESS_GPU: return "shapeless_gpu"; /* resolved at plan build: not recorded */
    case OP_SHAPE_KEYED: return "shape_keyed";
    case OP_VALUE_KEYED: return "value_keyed";
    case OP_EAGER: return "eager";
    case OP_HOST_SHAPE: return "host_shape";
  }
  return "?";
}

/* --- inputs -------------------------------------------------------------------------------- */
static int bind_input(plan *p, mx_ctx *ctx, int k, const plan_tensor *in, mx_array *slot,
                      char *err, size_t len) {
  const ir_value *v = &p->g->values[p->g->graph_inputs[k]];
  int dt = ir_value_mx_dtype(in->elem_type);
  int shape[MX_MAX_RANK];
  if (dt < 0 || (v->elem_type != IR_UNDEFINED && in->elem_type != v->elem_type)) {
    snprintf(err, len, "input '%s' has element type %s, the plan expects %s", v->name,
             ir_elem_name(in->elem_type), ir_elem_name(v->elem_type));
    return MX_ERR_ARG;
  }
  if (plan_dims_to_int(in->dims, in->rank, shape) != MX_OK) {
    snprintf(err, len, "input '%s' has a shape MLX cannot hold (rank %d)", v->name, in->rank);
    return MX_ERR_ARG;
  }
  static char empty[16];
  void *data = in->bytes ? in->data : empty;
  int rc = ir_to_mx_dtype(in->elem_type) < 0 /* a raw type: unpacked into its carrier */
               ? packed_to_mx(ctx, slot, in->elem_type, data, in->bytes, shape, in->rank)
           : p->wrap_inputs ? mx_wrap_data(ctx, slot, data, shape, in->rank, (mx_dtype)dt)
                          : mx_from_host(ctx, slot, data, shape, in->rank, (mx_dtype)dt);
  if (rc != MX_OK) snprintf(err, len, "input '%s': %s", v->name, ctx->error);
  atomic_fetch_add(&p->stats.bytes_in, in->bytes);
  return rc;
}

/* The graph inputs that arrive per run (constants are already in the plan), in order. */
static int bind_inputs(plan *p, mx_ctx *ctx, const plan_tensor *inputs, mx_array *bound,
                       int *n_bound, char *err, size_t len) {
  *n_bound = 0;
  for (int k = 0; k < p->g->n_graph_inputs; k++) {
    int v = p->g->graph_inputs[k];
    if (v == IR_NONE || p->const_values[v]) continue;
    int rc = bind_input(p, ctx, k, &inputs[k], &bound[(*n_bound)++], err, len);
    if (rc != MX_OK) return rc;
  }
  return MX_OK;
}

/* --- translation shared by the eager path and the traces ---------------------------------- */
/* Translates every node that runs per call and collects the outputs, cast to their declared
 * types. `values` must hold the constants and the bound inputs (and, when skip_shape_nodes, the
 * shape values of the variant being traced); `known` marks which values are fixed. */
static int translate_all(const plan *p, mx_ctx *ctx, mx_array *values, const mx_array *known,
                         bool skip_shape_nodes, tr_checks *checks, mx_array *outputs,
                         unsigned *host_reads, char *err, size_t len) {
  tr_seqs seqs;
  if (!tr_seqs_init(&seqs, p->g->n_values)) {
    snprintf(err, len, "out of memory");
    return MX_ERR_NOMEM;
  }
  int rc = MX_OK;
  for (int k = 0; rc == MX_OK && k < p->g->n_nodes; k++) {
    int i = p->order[k];
    if (p->folded[i] || (skip_shape_nodes && p->shape_node[i])) continue;
    if (p->tracing != TR_EAGER && p->prologue_node[i]) continue; /* a call input (prologue.c) */
    rc = plan_translate_node(p, ctx, values, known, &seqs, i, checks, host_reads, err, len);
  }
  tr_seqs_free(&seqs); /* sequences never leave the group: the outputs are arrays */
  if (rc != MX_OK) return rc;
  for (int k = 0; k < p->g->n_graph_outputs; k++) {
    const ir_value *v = &p->g->values[p->g->graph_outputs[k]];
    outputs[k] = values[p->g->graph_outputs[k]];
    int want = ir_value_mx_dtype(v->elem_type); /* raw types: their carrier */
    if (want >= 0 && mx_dtype_of(outputs[k]) != (mx_dtype)want &&
        mx_astype(ctx, &outputs[k], outputs[k], (mx_dtype)want) != MX_OK) {
      snprintf(err, len, "output '%s': %s", v->name, ctx->error);
      return MX_ERR_MLX;
    }
  }
  return MX_OK;
}

static mx_array *values_with_inputs(const plan *p, const mx_array *bound) {
  mx_array *values = malloc(sizeof(mx_array) * ((size_t)p->g->n_values + 1));
  if (!values) return NULL;
  memcpy(values, p->const_values, sizeof(mx_array) * (size_t)p->g->n_values);
  int b = 0;
  for (int k = 0; k < p->g->n_graph_inputs; k++) {
    int v = p->g->graph_inputs[k];
    if (v != IR_NONE && !p->const_values[v]) values[v] = bound[b++];
  }
  return values;
}

/* The values a trace starts from: the constants and the compiled function's inputs
 * (plan.call_values: the bound inputs, or the prologue's results in place of some). */
static mx_array *values_with_call_inputs(const plan *p, const mx_array *inputs) {
  mx_array *values = malloc(sizeof(mx_array) * ((size_t)p->g->n_values + 1));
  if (!values) return NULL;
  memcpy(values, p->const_values, sizeof(mx_array) * (size_t)p->g->n_values);
  for (int c = 0; c < p->n_call_values; c++) values[p->call_values[c]] = inputs[c];
  return values;
}

/* An MLX evaluation, timed: the first Run's breakdown (plan_stats.first_run_eval_ns). */
static int timed_eval(plan *p, mx_ctx *ctx, mx_array *arrays, size_t n) {
  uint64_t t0 = plan_now_ns();
  int rc = mx_eval(ctx, arrays, n);
  atomic_fetch_add(&p->stats.mlx_eval_ns, plan_now_ns() - t0);
  return rc;
}

/* --- eager path ---------------------------------------------------------------------------- */
static int eval_all(plan *p, mx_ctx *ctx, mx_array *outputs, int n, tr_checks *checks) {
  mx_array *all = malloc(sizeof(mx_array) * ((size_t)n + (size_t)checks->count + 1));
  if (!all) {
    mx_set_error(ctx, "out of memory");
    return MX_ERR_NOMEM;
  }
  for (int i = 0; i < n; i++) all[i] = outputs[i];
  for (int i = 0; i < checks->count; i++) all[n + i] = checks->items[i].ok;
  int rc = timed_eval(p, ctx, all, (size_t)n + (size_t)checks->count);
  free(all);
  return rc;
}

/* MLX reports some errors only at evaluation, without saying which op failed. The lazy graph
 * is still intact, so evaluate node by node, in order, to name the culprit. */
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

static int run_eager(plan *p, mx_ctx *ctx, const mx_array *bound, mx_array *outputs, char *err,
                     size_t len) {
  tr_checks checks = {0};
  unsigned host_reads = 0;
  mx_array *values = values_with_inputs(p, bound);
  if (!values) {
    snprintf(err, len, "out of memory");
    return MX_ERR_NOMEM;
  }
  int rc = translate_all(p, ctx, values, p->const_values, false, &checks, outputs, &host_reads,
                         err, len);
  if (rc == MX_OK) {
    rc = eval_all(p, ctx, outputs, p->g->n_graph_outputs, &checks);
    if (rc != MX_OK) locate_failure(p, ctx, values, err, len);
    else rc = plan_verify_checks(ctx, &checks, err, len);
  }
  atomic_fetch_add(&p->stats.host_reads, host_reads);
  atomic_fetch_add(&p->stats.eager_runs, 1);
  free(checks.items);
  free(values);
  return rc;
}

/* --- compiled paths ------------------------------------------------------------------------ */
/* The function MLX traces: the same translation, with every check folded into one extra
 * boolean output so the compiled function has a fixed number of outputs. `user` is the variant
 * (its shape values enter the trace as constants). */
static int traced_graph(void *user, mx_ctx *ctx, const mx_array *inputs, size_t n_inputs,
                        mx_array *outputs, size_t n_outputs) {
  (void)n_inputs, (void)n_outputs;
  plan_cache_entry *e = user;
  plan *p = e->owner;
  atomic_fetch_add(&p->stats.traces, 1);
  tr_checks checks = {0};
  unsigned host_reads = 0;
  char err[MX_ERROR_LEN];
  mx_array *values = values_with_call_inputs(p, inputs);
  mx_array *known = malloc(sizeof(mx_array) * ((size_t)p->g->n_values + 1));
  int rc = values && known ? MX_OK : MX_ERR_NOMEM;
  if (rc == MX_OK) {
    memcpy(known, p->const_values, sizeof(mx_array) * (size_t)p->g->n_values);
    for (int v = 0; e->fixed_values && v < p->g->n_values; v++)
      if (e->fixed_values[v]) values[v] = known[v] = e->fixed_values[v];
    p->tracing = p->path == PLAN_SHAPELESS ? TR_TRACE_SHAPELESS : TR_TRACE_KEYED;
    /* shape values come with keyed variants only (entry_new) */
    rc = translate_all(p, ctx, values, known, p->has_shape_nodes && p->path == PLAN_KEYED,
                       &checks, outputs, &host_reads, err, sizeof err);
    p->tracing = TR_EAGER;
    if (rc != MX_OK) snprintf(ctx->error, sizeof ctx->error, "%s", err);
  }
  mx_array ok = NULL;
  if (rc == MX_OK) rc = mx_scalar(ctx, &ok, 1, MX_BOOL);
  for (int i = 0; rc == MX_OK && i < checks.count; i++)
    rc = mx_binary(ctx, &ok, MX_LOGICAL_AND, ok, checks.items[i].ok);
  if (checks.count) atomic_store(&p->traced_checks, true);
  if (rc == MX_OK && host_reads) {
    mx_set_error(ctx, "a node read a computed value on the host during the trace");
    rc = MX_ERR_ARG;
  }
  outputs[p->g->n_graph_outputs] = ok;
  free(checks.items);
  free(values);
  free(known);
  return rc;
}

/* A translation beside the run's own (a variant's shape values, a plan's keys): the bound inputs
 * and constants as values, a scratch arena, and checks and sequences of its own. */
typedef struct side_translation {
  mx_array *values;
  mx_arena *scratch;
  mx_ctx ctx;
  tr_checks checks;
  tr_seqs seqs;
  unsigned reads;
  char err[MX_ERROR_LEN];
} side_translation;

static int side_begin(plan *p, mx_ctx *ctx, const mx_array *bound, side_translation *s) {
  memset(s, 0, sizeof *s);
  s->values = values_with_inputs(p, bound);
  s->scratch = mx_arena_new();
  s->ctx = (mx_ctx){.arena = s->scratch, .device = ctx->device};
  if (s->values && s->scratch && tr_seqs_init(&s->seqs, p->g->n_values)) return MX_OK;
  snprintf(s->err, sizeof s->err, "out of memory");
  return MX_ERR_NOMEM;
}

static int side_node(plan *p, side_translation *s, int i) {
  return plan_translate_node(p, &s->ctx, s->values, p->const_values, &s->seqs, i, &s->checks,
                             &s->reads, s->err, sizeof s->err);
}

static void side_end(side_translation *s) {
  tr_seqs_free(&s->seqs);
  free(s->checks.items);
  free(s->values);
  mx_arena_free(s->scratch);
}

/* Evaluates a keyed variant's shape values from the concrete inputs, into its own arena. The
 * other nodes are translated too, lazily and into a scratch arena, so that Shape of an
 * intermediate value sees its shape; only the shape values are evaluated and kept. */
static int compute_shape_values(plan *p, mx_ctx *ctx, plan_cache_entry *e, const mx_array *bound) {
  if (!p->has_shape_nodes) return MX_OK;
  side_translation s;
  int rc = side_begin(p, ctx, bound, &s);
  e->fixed_values = calloc((size_t)p->g->n_values + 1, sizeof(mx_array));
  if (rc == MX_OK && !e->fixed_values) rc = MX_ERR_NOMEM;
  for (int k = 0; rc == MX_OK && k < p->g->n_nodes; k++) {
    int i = p->order[k];
    if (p->folded[i]) continue;
    s.ctx.arena = p->shape_node[i] ? e->arena : s.scratch;
    rc = side_node(p, &s, i);
    const ir_node *n = &p->g->nodes[i];
    for (int o = 0; rc == MX_OK && p->shape_node[i] && o < n->n_outputs; o++) {
      int v = n->outputs[o];
      if (v == IR_NONE) continue;
      rc = timed_eval(p, &s.ctx, &s.values[v], 1);
      if (rc != MX_OK)
        snprintf(s.err, sizeof s.err, "node '%.100s' (%.40s): %.300s", n->name, n->op_type,
                 s.ctx.error);
      e->fixed_values[v] = s.values[v];
    }
  }
  if (rc == MX_OK) rc = plan_verify_checks(&s.ctx, &s.checks, s.err, sizeof s.err);
  if (rc != MX_OK) mx_set_error(ctx, "%s", s.err[0] ? s.err : "computing shape values failed");
  side_end(&s);
  return rc;
}

/* --- value keys (plan.h: keys) ------------------------------------------------------------- */
typedef struct key_values {
  int n;
  double value[PLAN_MAX_KEYS];
  mx_dtype dtype[PLAN_MAX_KEYS];
  bool classed[PLAN_MAX_KEYS]; /* value[k] stands for klass[k]: variants are keyed on the class */
  int64_t klass[PLAN_MAX_KEYS];
} key_values;

/* The class of key k's value (op_row.key_class), when every value-keyed node reading it names
 * the same one; false when any does not (the variant is then keyed on the value). values: the
 * side translation's, where the group's inputs are bound. */
static bool key_class_of(const plan *p, const mx_array *values, int k, double value,
                         int64_t *klass) {
  const ir_graph *g = p->g;
  bool any = false;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (p->folded[i] || p->classes[i] != OP_VALUE_KEYED) continue;
    for (int j = 0; j < n->n_inputs && j < 32; j++) {
      if (!(p->rows[i]->key_inputs >> j & 1u) || n->inputs[j] != p->keys[k]) continue;
      if (!p->rows[i]->key_class || n->n_inputs > 32 || value != (double)(int64_t)value)
        return false;
      const int *dims[32];
      int ranks[32];
      for (int m = 0; m < n->n_inputs; m++) {
        mx_array a = n->inputs[m] == IR_NONE ? NULL : values[n->inputs[m]];
        dims[m] = a ? mx_shape(a) : NULL;
        ranks[m] = a ? mx_ndim(a) : -1;
      }
      int64_t c;
      if (!p->rows[i]->key_class(n, j, (int64_t)value, dims, ranks, &c) || (any && c != *klass))
        return false;
      *klass = c, any = true;
    }
  }
  return any;
}

/* The plan's key values for these inputs: the nodes computing them translated eagerly into a
 * scratch arena (the compiled call computes them again; they are small: an If's cond), then each
 * key evaluated and read on the host. A key holding other than one value fails here, and the
 * eager retry reports it from the node that reads it. */
static int compute_keys(plan *p, mx_ctx *ctx, const mx_array *bound, key_values *kv) {
  kv->n = 0;
  if (!p->n_keys) return MX_OK;
  side_translation s;
  int rc = side_begin(p, ctx, bound, &s);
  for (int k = 0; rc == MX_OK && k < p->g->n_nodes; k++) {
    int i = p->order[k];
    if (!p->folded[i] && p->key_node[i]) rc = side_node(p, &s, i);
  }
  if (rc == MX_OK) rc = plan_verify_checks(&s.ctx, &s.checks, s.err, sizeof s.err);
  for (int k = 0; rc == MX_OK && k < p->n_keys; k++) {
    mx_array a = s.values[p->keys[k]];
    if (!a || mx_size(a) != 1) {
      snprintf(s.err, sizeof s.err, "'%s' keys the compiled plan but does not hold one value",
               p->g->values[p->keys[k]].name);
      rc = MX_ERR_ARG;
      break;
    }
    kv->dtype[k] = mx_dtype_of(a);
    rc = tr_scalar_value(&s.ctx, a, &kv->value[k]);
    if (rc != MX_OK) snprintf(s.err, sizeof s.err, "%s", s.ctx.error);
    kv->classed[k] = rc == MX_OK && key_class_of(p, s.values, k, kv->value[k], &kv->klass[k]);
    kv->n = k + 1;
  }
  if (rc != MX_OK) mx_set_error(ctx, "%s", s.err[0] ? s.err : "computing the plan's keys failed");
  atomic_fetch_add(&p->stats.host_reads, (unsigned long long)kv->n);
  side_end(&s);
  return rc;
}

static size_t signature_of(const mx_array *bound, int n, int64_t *sig) {
  size_t len = 0;
  for (int i = 0; i < n; i++) {
    sig[len++] = mx_dtype_of(bound[i]);
    sig[len++] = mx_ndim(bound[i]);
    for (int d = 0; d < mx_ndim(bound[i]); d++) sig[len++] = mx_shape(bound[i])[d];
  }
  return len;
}

/* A shapeless variant's key: dtypes and ranks, and for every dim only whether it is 1 and which
 * earlier dim (of any input) it equals. MLX's shapeless replay re-derives shapes without
 * re-checking them, so a variant traced where two dims matched, replayed where they differ
 * (an Add of [128, 512] and [3, 512] after [128, 512] twice), would read past a buffer instead
 * of failing; a different pattern gets its own trace, where MLX checks the shapes. */
static size_t pattern_of(const mx_array *bound, int n, int64_t *sig, int64_t *dims) {
  size_t len = 0, nd = 0;
  for (int i = 0; i < n; i++) {
    sig[len++] = mx_dtype_of(bound[i]);
    sig[len++] = mx_ndim(bound[i]);
    for (int d = 0; d < mx_ndim(bound[i]); d++) {
      int64_t v = mx_shape(bound[i])[d], same = (int64_t)nd;
      for (size_t j = 0; j < nd; j++)
        if (dims[j] == v) {
          same = (int64_t)j;
          break;
        }
      dims[nd++] = v;
      sig[len++] = v == 1 ? -1 : same;
    }
  }
  return len;
}

/* A variant's key values, as constants in its arena: its trace reads them as known values (for
 * a classed key, the value of the call that traced it: the row vouches that any value of the
 * class translates the same). */
static int keep_keys(plan *p, mx_ctx *ctx, plan_cache_entry *e, const key_values *kv) {
  if (!e->fixed_values) e->fixed_values = calloc((size_t)p->g->n_values + 1, sizeof(mx_array));
  if (!e->fixed_values) return mx_set_error(ctx, "out of memory"), MX_ERR_NOMEM;
  mx_ctx ectx = {.arena = e->arena, .device = ctx->device};
  for (int k = 0; k < kv->n; k++) {
    int rc = mx_scalar(&ectx, &e->fixed_values[p->keys[k]], kv->value[k], kv->dtype[k]);
    if (rc != MX_OK) return mx_set_error(ctx, "%s", ectx.error), rc;
  }
  return MX_OK;
}

/* Makes a variant for these inputs: a keyed one's shape values and keys, then its compiled
 * function. */
static int entry_new(plan *p, mx_ctx *ctx, const mx_array *bound, const key_values *kv,
                     const int64_t *sig, size_t len, plan_cache_entry **out) {
  size_t n_out = (size_t)p->g->n_graph_outputs + 1;
  plan_cache_entry *e = calloc(1, sizeof *e);
  if (e) {
    e->owner = p;
    e->signature = malloc(len * sizeof *sig + 1);
    e->arena = mx_arena_new();
  }
  int rc = e && e->signature && e->arena ? MX_OK : MX_ERR_NOMEM;
  if (rc != MX_OK) mx_set_error(ctx, "out of memory");
  bool shapeless = p->path == PLAN_SHAPELESS;
  if (rc == MX_OK && !shapeless) rc = compute_shape_values(p, ctx, e, bound);
  if (rc == MX_OK && kv->n) rc = keep_keys(p, ctx, e, kv);
  if (rc == MX_OK) rc = mx_compiled_new(ctx, &e->fn, traced_graph, e, n_out, shapeless);
  if (rc != MX_OK) {
    plan_cache_entry_free(e);
    return rc;
  }
  memcpy(e->signature, sig, len * sizeof *sig);
  e->signature_len = len;
  *out = e;
  return MX_OK;
}

/* The compiled function for these inputs from the plan's cache: keyed on every dim of the
 * function's inputs (the prologue's results in place of the inputs only it reads), or for a
 * shapeless plan on the pattern of its dims (pattern_of). Keys and shape values are computed
 * from the bound inputs. sig: room for the key (compiled_for). */
static int variant_for(plan *p, mx_ctx *ctx, const mx_array *bound, const plan_call *call,
                       int64_t *sig, int64_t *scratch, mx_compiled **fn) {
  size_t len = p->path == PLAN_SHAPELESS ? pattern_of(call->inputs, call->n, sig, scratch)
                                          : signature_of(call->inputs, call->n, sig);
  key_values kv;
  TR_TRY(compute_keys(p, ctx, bound, &kv));
  for (int k = 0; k < kv.n; k++) { /* a classed value keys by its class (run.c: key_class_of) */
    sig[len++] = kv.classed[k] ? -1 - (int64_t)kv.dtype[k] : kv.dtype[k];
    if (kv.classed[k]) sig[len++] = kv.klass[k];
    else memcpy(&sig[len++], &kv.value[k], sizeof(int64_t));
  }
  p->cache_clock++;
  for (int i = 0; i < p->cache_count; i++) {
    plan_cache_entry *e = p->cache[i];
    if (e->signature_len == len && memcmp(e->signature, sig, len * sizeof *sig) == 0) {
      e->last_use = p->cache_clock;
      atomic_fetch_add(&p->stats.cache_hits, 1);
      *fn = e->fn;
      return MX_OK;
    }
  }
  atomic_fetch_add(&p->stats.cache_misses, 1);
  if (!p->cache) {
    p->cache = calloc((size_t)p->cache_capacity, sizeof *p->cache);
    if (!p->cache) return mx_set_error(ctx, "out of memory"), MX_ERR_NOMEM;
  }
  plan_cache_entry *e = NULL;
  TR_TRY(entry_new(p, ctx, bound, &kv, sig, len, &e));
  int slot = p->cache_count;
  if (slot == p->cache_capacity) { /* evict the least recently used variant */
    slot = 0;
    for (int i = 1; i < p->cache_count; i++)
      if (p->cache[i]->last_use < p->cache[slot]->last_use) slot = i;
    plan_cache_entry_free(p->cache[slot]);
  } else {
    p->cache_count++;
  }
  e->last_use = p->cache_clock;
  p->cache[slot] = e;
  *fn = e->fn;
  return MX_OK;
}

/* variant_for with room for any number of inputs (a decoder of 32 layers has 66) */
static int compiled_for(plan *p, mx_ctx *ctx, const mx_array *bound, const plan_call *call,
                        mx_compiled **fn) {
  size_t room = (size_t)call->n * (MX_MAX_RANK + 2) + 2 * PLAN_MAX_KEYS + 1;
  int64_t *sig = malloc(2 * room * sizeof *sig);
  if (!sig) return mx_set_error(ctx, "out of memory"), MX_ERR_NOMEM;
  int rc = variant_for(p, ctx, bound, call, sig, sig + room, fn);
  free(sig);
  return rc;
}

static int run_compiled(plan *p, mx_ctx *ctx, const mx_array *bound, const plan_call *call,
                        mx_array *outputs, bool *checks_ok) {
  mx_compiled *fn = NULL;
  TR_TRY(compiled_for(p, ctx, bound, call, &fn));
  int n = p->g->n_graph_outputs, n_pro = call->checks.count;
  mx_array *results = malloc(sizeof(mx_array) * ((size_t)n + 1 + (size_t)n_pro));
  if (!results) return mx_set_error(ctx, "out of memory"), MX_ERR_NOMEM;
  uint64_t traces = atomic_load(&p->stats.traces), t0 = plan_now_ns();
  int rc = mx_compiled_call(ctx, fn, call->inputs, (size_t)call->n, results, (size_t)n + 1);
  if (atomic_load(&p->stats.traces) != traces)
    atomic_fetch_add(&p->stats.trace_ns, plan_now_ns() - t0);
  bool read_checks = atomic_load(&p->traced_checks);
  /* the prologue's checks are evaluated with the outputs, after the trace's own */
  size_t n_eval = (size_t)n + (read_checks ? 1 : 0);
  for (int i = 0; i < n_pro; i++) results[n_eval + (size_t)i] = call->checks.items[i].ok;
  if (rc == MX_OK) rc = timed_eval(p, ctx, results, n_eval + (size_t)n_pro);
  *checks_ok = true;
  if (rc == MX_OK && read_checks)
    rc = mx_copy_to_host(ctx, results[n], checks_ok, sizeof *checks_ok);
  for (int i = 0; rc == MX_OK && *checks_ok && i < n_pro; i++) /* scalars (tr_check_that) */
    rc = mx_copy_to_host(ctx, results[n_eval + (size_t)i], checks_ok, sizeof *checks_ok);
  for (int i = 0; rc == MX_OK && i < n; i++) outputs[i] = results[i];
  free(results);
  if (rc == MX_OK) atomic_fetch_add(&p->stats.compiled_runs, 1);
  return rc;
}

/* --- the path trial (plan.h) ----------------------------------------------------------------- */
/* The fastest of a path's trial runs: this machine's neighbours only ever add time, and a
 * median of three still let a slow burst decide (plan.h). */
static uint64_t fastest(const uint64_t *v, int n) {
  uint64_t best = v[0];
  for (int i = 1; i < n; i++) best = v[i] < best ? v[i] : best;
  return best;
}

/* Whether this run of a compiled plan is an eager trial run. */
static bool trial_wants_eager(const plan *p) {
  const plan_trial *tr = &p->trial;
  return tr->enabled && !tr->decided && atomic_load(&p->stats.runs) > 0 &&
         tr->n_eager <= tr->n_compiled;
}

static void trial_record(plan *p, bool eager, uint64_t ns) {
  plan_trial *tr = &p->trial;
  if (!tr->enabled || tr->decided) return;
  if (eager) tr->eager_ns[tr->n_eager++] = ns;
  else tr->compiled_ns[tr->n_compiled++] = ns;
  if (tr->n_eager < PLAN_TRIAL_RUNS || tr->n_compiled < PLAN_TRIAL_RUNS) return;
  uint64_t e = fastest(tr->eager_ns, PLAN_TRIAL_RUNS);
  uint64_t c = fastest(tr->compiled_ns, PLAN_TRIAL_RUNS);
  tr->decided = true;
  tr->eager_best_ns = e;
  tr->compiled_best_ns = c;
  tr->chose_eager = e * 100 < c * (100 - PLAN_TRIAL_EAGER_MARGIN);
  char before[sizeof p->path_reason_buf];
  snprintf(before, sizeof before, "%s", p->path_reason ? p->path_reason : "");
  snprintf(p->path_reason_buf, sizeof p->path_reason_buf,
           "path trial: eager %.3f ms, compiled %.3f ms (fastest of %d)%s%.96s", (double)e / 1e6,
           (double)c / 1e6, PLAN_TRIAL_RUNS, before[0] ? "; " : "", before);
  p->path_reason = p->path_reason_buf;
}

/* A keyed plan whose inputs keep changing shape (downstream of NonZero, say), or a shapeless
 * one whose dims keep changing pattern, would trace on most runs; once it has traced
 * PLAN_CHURN_TRACES variants, more than one run in two, it runs eagerly for the rest of the
 * session. */
enum { PLAN_CHURN_TRACES = 16 };

static void check_shape_churn(plan *p) {
  unsigned long long misses = atomic_load(&p->stats.cache_misses);
  unsigned long long runs = atomic_load(&p->stats.runs) + 1;
  if (p->path == PLAN_EAGER || misses < PLAN_CHURN_TRACES || 2 * misses <= runs) return;
  p->shape_churn = true;
  char before[sizeof p->path_reason_buf];
  snprintf(before, sizeof before, "%s", p->path_reason ? p->path_reason : "");
  snprintf(p->path_reason_buf, sizeof p->path_reason_buf,
           "%llu input shapes traced in %llu runs: eager from then on; %.96s", misses, runs,
           before);
  p->path_reason = p->path_reason_buf;
}

/* A shapeless plan whose trace MLX's shapeless compile would mis-run (MX_ERR_SHAPELESS, see
 * mx_compiled_new) compiles keyed on shapes from then on, as ONNXRUNTIME_EP_MLX_NO_SHAPELESS would
 * have made it: its nodes are all shapeless-safe, so it has no keys to find. */
static void turn_keyed(plan *p, const char *why) {
  plan_cache_clear(p);
  p->path = PLAN_KEYED;
  snprintf(p->path_reason_buf, sizeof p->path_reason_buf, "keyed on shapes: %.150s", why);
  p->path_reason = p->path_reason_buf;
}

bool plan_turned_eager(const plan *p) {
  return p->compile_broken || p->trial.chose_eager || p->shape_churn;
}

/* When the last Run took a millisecond or more on the CPU device, the host kernels' pool threads
 * are held awake through this one (cpu_workers_hold), so that they spin through MLX's scheduling of
 * the graph (0.2 ms for PP-OCRv4 rec) and its stretches of its own operations, and every host
 * kernel splits over the cores; before a shorter Run they stay asleep. */
static const uint64_t HOLD_WORKERS_MIN_NS = 1000 * 1000;

/* --- entry point --------------------------------------------------------------------------- */
int plan_run(plan *p, mx_ctx *ctx, const plan_tensor *inputs, mx_array *outputs, char *err,
             size_t len) {
  uint64_t start = plan_now_ns();
  /* the first Run's share of tracing and evaluation: runs are serialised by the EP's MLX lock */
  uint64_t traced_before = atomic_load(&p->stats.trace_ns);
  uint64_t evaluated_before = atomic_load(&p->stats.mlx_eval_ns);
  bool hold = p->device == MX_DEVICE_CPU && atomic_load(&p->last_run_ns) >= HOLD_WORKERS_MIN_NS;
  if (hold) cpu_workers_hold();
  int n_bound = 0;
  mx_array *bound = malloc(sizeof(mx_array) * ((size_t)p->g->n_graph_inputs + 1));
  int rc = bound ? bind_inputs(p, ctx, inputs, bound, &n_bound, err, len) : MX_ERR_NOMEM;
  if (!bound) snprintf(err, len, "out of memory");
  /* Calls with a zero-size input take the eager path: MLX's shapeless replay mis-broadcasts
   * zero-size dims, and its CUDA backend's compiled kernels die of SIGFPE on them (seen on the
   * H200 with keyed variants of T = 0), where eager MLX ops return empty results. */
  bool empty_input = false;
  for (int i = 0; rc == MX_OK && i < n_bound; i++) empty_input |= mx_size(bound[i]) == 0;
  bool compiled = (p->path == PLAN_KEYED || p->path == PLAN_SHAPELESS) && !empty_input;
  compiled = compiled && !plan_turned_eager(p);
  bool trial_eager = rc == MX_OK && compiled && trial_wants_eager(p);
  /* The compiled function's inputs (prologue.c). Where the prologue fails, eager runs the call
   * and reports the failure; where it yields a zero-size value, eager runs it (as above). */
  plan_call call = {0};
  uint64_t t0 = plan_now_ns();
  if (rc == MX_OK && compiled && !trial_eager) {
    compiled = plan_call_inputs(p, ctx, bound, &call, err, len) == MX_OK && !call.empty;
    atomic_fetch_add(&p->stats.host_reads, call.host_reads);
  }
  if (trial_eager) {
    rc = run_eager(p, ctx, bound, outputs, err, len);
    uint64_t trial_ns = plan_now_ns() - t0;
    atomic_fetch_add(&p->stats.trial_eager_ns, trial_ns);
    if (rc == MX_OK) trial_record(p, true, trial_ns);
  } else if (rc == MX_OK && compiled) {
    bool checks_ok = false;
    uint64_t misses = atomic_load(&p->stats.cache_misses);
    int compiled_rc = run_compiled(p, ctx, bound, &call, outputs, &checks_ok);
    if (compiled_rc == MX_ERR_SHAPELESS) { /* a shapeless plan has no prologue to redo */
      turn_keyed(p, ctx->error);
      compiled_rc = run_compiled(p, ctx, bound, &call, outputs, &checks_ok);
    }
    if (compiled_rc == MX_OK && checks_ok && atomic_load(&p->stats.runs) > 0 &&
        atomic_load(&p->stats.cache_misses) == misses)
      trial_record(p, false, plan_now_ns() - t0);
    if (compiled_rc == MX_OK) check_shape_churn(p);
    if (compiled_rc != MX_OK) {
      char trace_err[MX_ERROR_LEN];
      snprintf(trace_err, sizeof trace_err, "%s", ctx->error);
      rc = run_eager(p, ctx, bound, outputs, err, len);
      if (rc == MX_OK) { /* the compiled function failed where eager did not: stay eager */
        p->compile_broken = true;
        atomic_fetch_add(&p->stats.fallbacks, 1);
        snprintf(p->path_reason_buf, sizeof p->path_reason_buf, "trace failed: %.160s",
                 trace_err);
        p->path_reason = p->path_reason_buf;
      }
    } else if (!checks_ok) {
      rc = run_eager(p, ctx, bound, outputs, err, len); /* names the check that failed */
      if (rc == MX_OK) {
        snprintf(err, len, "group '%s': a run-time check failed", p->name);
        rc = MX_ERR_ARG;
      }
    }
  } else if (rc == MX_OK) {
    rc = run_eager(p, ctx, bound, outputs, err, len);
  }
  plan_call_free(&call);
  free(bound);
  if (hold) cpu_workers_release();
  uint64_t took = plan_now_ns() - start;
  if (atomic_fetch_add(&p->stats.runs, 1) == 0) {
    atomic_store(&p->stats.first_run_ns, took);
    atomic_store(&p->stats.first_run_trace_ns, atomic_load(&p->stats.trace_ns) - traced_before);
    atomic_store(&p->stats.first_run_eval_ns,
                 atomic_load(&p->stats.mlx_eval_ns) - evaluated_before);
  }
  if (rc != MX_OK) atomic_fetch_add(&p->stats.failures, 1);
  atomic_store(&p->last_run_ns, took);
  atomic_fetch_add(&p->stats.eval_ns, took);
  return rc;
}
