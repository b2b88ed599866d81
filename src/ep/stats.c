/*
 * The session's run record as JSON (stats.h). Strings go through report.c's escaping.
 */
#include "ep/stats.h"

#include "ep/report.h"
#include "plan/plan.h"


static void field(FILE *f, const char *key, unsigned long long v) {
  fprintf(f, ", \"%s\": %llu", key, v);
}

void stats_write_groups(const mlx_ep *ep, FILE *f) {
  fprintf(f, "{\"ep\": \"%s\", \"device\": \"%s\", \"groups\": [", EP_NAME,
          ep->options.device == MX_DEVICE_GPU ? "gpu" : "cpu");
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
    field(f, "host_reads", s->host_reads);
    fprintf(f, ", \"node_paths\": {");
    bool first = true;
    for (int n = 0; n < p->g->n_nodes; n++) {
      if (!p->node_paths[n]) continue;
      fprintf(f, "%s", first ? "" : ", ");
      report_json_string(f, p->g->nodes[n].name);
      fprintf(f, ": ");
      report_json_string(f, p->node_paths[n]);
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
