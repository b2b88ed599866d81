/*
 * The session's run record as JSON (stats.h). Strings go through report.c's escaping. Per group:
 * its compile path and the node whose compile class decided it, its counters, and per noted
 * node the path its translation took as node_path.h's identifiers. Per session: where the first
 * Runs' time went, and MLX's kernel cache folders with the kernel files the first Run added.
 */
#include "ep/stats.h"

#include "ep/report.h"
#include "plan/plan.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>


static void field(FILE *f, const char *key, unsigned long long v) {
  fprintf(f, ", \"%s\": %llu", key, v);
}

/* The files in a kernel cache folder (a count: nothing is read or written); a folder not made
 * yet holds none; -1 when it cannot be read. MLX writes its kernels there (CPU: the source and
 * the built library per kernel; GPU: the PTX and its kernel names per module). */
static long long count_files(const char *folder) {
  if (!folder[0]) return -1;
  DIR *d = opendir(folder);
  if (!d) return errno == ENOENT ? 0 : -1;
  long long n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_type != DT_DIR && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

void stats_first_run_begins(mlx_ep *ep) {
  ep_kernel_cache *k = &ep->kernel_cache;
  if (ep->options.stats_file[0] && k->first_runs_begun++ == 0)
    k->files_before = count_files(k->device_folder);
}

void stats_first_run_ended(mlx_ep *ep) {
  ep_kernel_cache *k = &ep->kernel_cache;
  if (ep->options.stats_file[0] && ++k->first_runs_ended == ep->n_plans && k->files_before >= 0)
    k->files_after = count_files(k->device_folder);
}

static void json_string_or_null(FILE *f, const char *s) {
  if (s && s[0]) report_json_string(f, s);
  else fprintf(f, "null");
}

static void count_or_null(FILE *f, long long n) {
  if (n >= 0) fprintf(f, "%lld", n);
  else fprintf(f, "null");
}

/* Where the first Runs' time went, summed over the groups (each group's first Run is its part of
 * the session's first Run), and the path trial's eager runs, which come on the Runs after it. */
static void cold_start(const mlx_ep *ep, FILE *f) {
  unsigned long long first = 0, trace = 0, eval = 0, trial = 0;
  for (int i = 0; i < ep->n_plans; i++) {
    const plan_stats *s = &ep->plans[i]->stats;
    first += s->first_run_ns, trace += s->first_run_trace_ns, eval += s->first_run_eval_ns;
    trial += s->trial_eager_ns;
  }
  fprintf(f, ", \"cold_start\": {\"first_run_ns\": %llu, \"first_run_tracing_ns\": %llu, "
             "\"first_run_evaluation_ns\": %llu, \"path_trial_eager_runs_ns\": %llu}",
          first, trace, eval, trial);
}

/* MLX's CUDA kernel cache folder and where it comes from, why this session's kernel_cache_dir
 * did not take effect (null when it did or was not given), the folder this session's device
 * compiles into, and the files that folder gained while the groups had their first Runs (null:
 * no count, an unreadable folder, or a group that never ran). */
static void kernel_cache(const ep_kernel_cache *k, FILE *f) {
  fprintf(f, ", \"kernel_cache\": {\"ptx_folder\": ");
  json_string_or_null(f, k->ptx_folder);
  fprintf(f, ", \"ptx_folder_source\": ");
  json_string_or_null(f, k->ptx_source);
  fprintf(f, ", \"kernel_cache_dir_not_applied\": ");
  json_string_or_null(f, k->not_applied);
  fprintf(f, ", \"device_folder\": ");
  json_string_or_null(f, k->device_folder);
  fprintf(f, ", \"device_folder_files_before_first_run\": ");
  count_or_null(f, k->files_before);
  fprintf(f, ", \"device_folder_files_gained_in_first_run\": ");
  count_or_null(f, k->files_before >= 0 && k->files_after >= 0 ? k->files_after - k->files_before
                                                               : -1);
  fprintf(f, "}");
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
    field(f, "first_run_tracing_ns", s->first_run_trace_ns);
    field(f, "first_run_evaluation_ns", s->first_run_eval_ns);
    field(f, "path_trial_eager_runs_ns", s->trial_eager_ns);
    field(f, "host_reads", s->host_reads);
    /* the keyed plan's prologue (plan.h): its nodes, and the inputs whose dims key no variant */
    fprintf(f, ", \"prologue_nodes\": %d, \"unkeyed_inputs\": [", p->n_prologue_nodes);
    for (int k = 0, w = 0; p->unkeyed_input && k < p->g->n_graph_inputs; k++)
      if (p->unkeyed_input[k]) {
        fprintf(f, "%s", w++ ? ", " : "");
        report_json_string(f, p->g->values[p->g->graph_inputs[k]].name);
      }
    fprintf(f, "]");
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
  cold_start(ep, f);
  kernel_cache(&ep->kernel_cache, f);
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
