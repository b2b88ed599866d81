/*
 * The session's run record as JSON (stats.h). Strings go through report.c's escaping. Per group:
 * its compile path and the node whose compile class decided it, its counters, and per noted
 * node the path its translation took as node_path.h's identifiers.
 */
#include "ep/stats.h"

#include "ep/report.h"
#include "plan/plan.h"


static void field(FILE *f, const char *key, unsigned long long v) {
  fprintf(f, ", \"%s\": %llu", key, v);
}

/* {"op": ..., "path": ..., "kernel": ... or null, "folds": [...]}: node_path.h's identifiers. */
static void node_path(FILE *f, const ir_node *n, const tr_node_path *path) {
  fprintf(f, "{\"op\": ");
  report_json_string(f, n->op_type);
  fprintf(f, ", \"path\": \"%s\", \"kernel\": ", tr_path_kind_name(path->kind));
  if (path->kernel) report_json_string(f, path->kernel);
  else fprintf(f, "null");
  fprintf(f, ", \"folds\": [");
  for (int b = 0, k = 0; b < TR_FOLD_COUNT; b++)
    if (path->folds >> b & 1u) fprintf(f, "%s\"%s\"", k++ ? ", " : "", tr_fold_name(b));
  fprintf(f, "]}");
}

/* The path trial (plan.h): null when off; else whether it has decided, what it chose and the
 * fastest run of each path it timed. */
static void trial(FILE *f, const plan_trial *t) {
  if (!t->enabled) {
    fprintf(f, "null");
    return;
  }
  fprintf(f, "{\"decided\": %s, \"chose\": ", t->decided ? "true" : "false");
  if (t->decided)
    fprintf(f, "\"%s\", \"eager_ns\": %llu, \"compiled_ns\": %llu}",
            t->chose_eager ? "eager" : "compiled", (unsigned long long)t->eager_best_ns,
            (unsigned long long)t->compiled_best_ns);
  else
    fprintf(f, "null, \"eager_ns\": null, \"compiled_ns\": null}");
}

void stats_write_groups(const mlx_ep *ep, FILE *f) {
  fprintf(f, "{\"ep\": \"%s\", \"device\": \"%s\", \"cpu_cache_limit_mb\": ", EP_NAME,
          ep->options.device == MX_DEVICE_GPU ? "gpu" : "cpu");
  if (ep->cache_limit_mib) fprintf(f, "%zu", ep->cache_limit_mib);
  else fprintf(f, "null");
  fprintf(f, ", \"groups\": [");
  for (int i = 0; i < ep->n_plans; i++) {
    const plan *p = ep->plans[i];
    const plan_stats *s = &p->stats;
    fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
    report_json_string(f, p->name);
    fprintf(f, ", \"nodes\": %d, \"path\": \"%s\", \"turned_eager\": %s, \"path_reason\": ",
            p->g->n_nodes, plan_path_name(p->path), plan_turned_eager(p) ? "true" : "false");
    report_json_string(f, p->path_reason);
    field(f, "runs", s->runs);
    field(f, "failures", s->failures);
    field(f, "compiled_runs", s->compiled_runs);
    field(f, "eager_runs", s->eager_runs);
    field(f, "cache_hits", s->cache_hits);
    field(f, "cache_misses", s->cache_misses);
    field(f, "traces", s->traces);
    field(f, "fallbacks", s->fallbacks);
    field(f, "first_run_ns", s->first_run_ns);
    field(f, "trace_ns", s->trace_ns);
    field(f, "host_reads", s->host_reads);
    fprintf(f, ", \"turned_eager_by\": [");
    const char *by[3] = {p->compile_broken ? "trace_failed" : NULL,
                         p->trial.chose_eager ? "path_trial" : NULL,
                         p->shape_churn ? "shape_churn" : NULL};
    for (int k = 0, w = 0; k < 3; k++)
      if (by[k]) fprintf(f, "%s\"%s\"", w++ ? ", " : "", by[k]);
    fprintf(f, "], \"trial\": ");
    trial(f, &p->trial);
    fprintf(f, ", \"decided_by\": ");
    if (p->path_node >= 0) {
      const ir_node *n = &p->g->nodes[p->path_node];
      fprintf(f, "{\"node\": ");
      report_json_string(f, n->name);
      fprintf(f, ", \"op\": ");
      report_json_string(f, n->op_type);
      fprintf(f, ", \"class\": \"%s\"}", plan_class_name(p->classes[p->path_node]));
    } else {
      fprintf(f, "null");
    }
    fprintf(f, ", \"node_paths\": {");
    bool first = true;
    for (int n = 0; n < p->g->n_nodes; n++) {
      if (p->node_paths[n].kind == TR_PATH_NONE) continue;
      fprintf(f, "%s", first ? "" : ", ");
      report_json_string(f, p->g->nodes[n].name);
      fprintf(f, ": ");
      node_path(f, &p->g->nodes[n], &p->node_paths[n]);
      first = false;
    }
    fprintf(f, "}}");
  }
  fprintf(f, "]");
  /* CPU device: the library serving MLX's matrix products, and whether it is the build's choice
   * (false when MLX was loaded first and bound another; the note then says what to do). */
  fprintf(f, ", \"blas\": ");
  if (ep->blas) {
    fprintf(f, "{\"as_built\": %s, \"own_sgemm\": %s, \"note\": ",
            ep->blas_as_built ? "true" : "false", ep->own_sgemm ? "true" : "false");
    report_json_string(f, ep->blas);
    fprintf(f, "}");
  } else {
    fprintf(f, "null");
  }
}

void stats_write_end(FILE *f) {
  size_t arrays = 0, arenas = 0;
  mx_live_objects(&arrays, &arenas);
  fprintf(f, ", \"live_arrays_after\": %zu, \"live_arenas_after\": %zu}\n", arrays, arenas);
}
