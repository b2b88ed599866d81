/*
 * The EP object ORT creates per session: reads the options, fills OrtEp's table (capability and
 * compile live in their own files), owns the session's plans (compute infos only point at them)
 * and gives the per-group summary when ORT releases the EP (ORT's logger at INFO; stderr with
 * verbose on).
 */
#include "cpu/cpu.h"
#include "ep/ep_types.h"
#include "ep/log.h"
#include "ep/profiler.h"
#include "ep/stats.h"
#include "plan/plan.h"

#include <stdio.h>
#include <stdlib.h>

static const char *ORT_API_CALL get_name(const OrtEp *ep) {
  (void)ep;
  return EP_NAME;
}

/* What the CPU device's set-up did: the library serving MLX's matrix products and the kernel
 * cache opt-in at INFO through ORT's logger (and on stderr with verbose on, as before), the
 * buffer cache limit at VERBOSE, and a warning (shown at ORT's default severity) when the
 * products went to another BLAS than the build's. */
static void report_cpu_setup(const mlx_ep *ep, const cpu_setup_notes *n) {
  char kernels[600] = "", blas[1200];
  if (ep->options.avx2_kernels)
    snprintf(kernels, sizeof kernels, "CPU kernels: %s%s",
             n->avx2 ? "as MLX builds them: " : "built for AVX2/FMA/F16C", n->avx2 ? n->avx2 : "");
  snprintf(blas, sizeof blas, "BLAS: %s%s", n->blas,
           n->blas_as_built ? (n->own_sgemm ? " (the plugin's own sgemm)"
                                            : " (the plugin hands sgemm to OpenBLAS)")
                            : "");
  if (ep->options.verbose) {
    if (kernels[0]) fprintf(stderr, "[%s] %s\n", EP_NAME, kernels);
    fprintf(stderr, "[%s] %s\n", EP_NAME, blas);
    if (ep->options.cpu_cache_mb > 0)
      fprintf(stderr, "[%s] MLX buffer cache limit: %zu MiB\n", EP_NAME, n->cache_limit_mb);
  }
  if (kernels[0]) EP_LOG(ep, ORT_LOGGING_LEVEL_INFO, "%s", kernels);
  if (n->blas_as_built) EP_LOG(ep, ORT_LOGGING_LEVEL_INFO, "%s", blas);
  else EP_LOG(ep, ORT_LOGGING_LEVEL_WARNING, "%s", n->blas);
  if (ep->options.cpu_cache_mb > 0)
    EP_LOG(ep, ORT_LOGGING_LEVEL_VERBOSE, "MLX buffer cache limit: %zu MiB", n->cache_limit_mb);
}

OrtStatus *ep_create(ep_factory *factory, const OrtSessionOptions *so, const OrtLogger *logger,
                     OrtEp **out) {
  *out = NULL;
  mlx_ep *ep = calloc(1, sizeof *ep);
  if (!ep) return ep_status(factory->ort, ORT_FAIL, "%s: out of memory", EP_NAME);
  ep->factory = factory;
  ep->ort = factory->ort;
  ep->logger = logger;
  OrtStatus *st = ep_options_parse(factory->ort, so, &ep->options);
  if (st) {
    free(ep);
    return st;
  }
  ep_mlx_lock(); /* MLX reads MLX_PTX_CACHE_DIR at its first compile, under this lock */
  st = ep_kernel_cache_setup(factory->ort, &ep->options, &ep->kernel_cache);
  ep_mlx_unlock();
  if (st) {
    free(ep);
    return st;
  }
  if (ep->kernel_cache.not_applied[0])
    EP_LOG(ep, ORT_LOGGING_LEVEL_WARNING, "kernel_cache_dir '%s' not applied: %s",
           ep->options.kernel_cache_dir, ep->kernel_cache.not_applied);
  mx_fail_call_arm(ep->options.fail_bridge_call); /* 0 (the default) disarms */
  if (ep->options.device == MX_DEVICE_CPU) {
    cpu_settings cs = {.host_kernels = ep->options.host_math, .own_sgemm = ep->options.own_sgemm,
                       .portable_sgemm = ep->options.portable_sgemm,
                       .avx512_sgemm = ep->options.avx512_sgemm,
                       .avx2_kernels = ep->options.avx2_kernels,
                       .cache_mb = ep->options.cpu_cache_mb};
    cpu_setup_notes notes;
    ep_mlx_lock();
    cpu_setup(&cs, &notes);
    ep_mlx_unlock();
    ep->own_sgemm = notes.own_sgemm;
    ep->blas = notes.blas;
    ep->blas_as_built = notes.blas_as_built;
    ep->host_kernels = cpu_host_kernels_enabled();
    ep->cache_limit_mib = notes.cache_limit_mb; /* the run record's cpu_cache_limit_mb */
    report_cpu_setup(ep, &notes);
  }
  OrtEp *b = &ep->base;
  b->ort_version_supported = EP_ORT_API_VERSION;
  b->GetName = get_name;
  b->GetCapability = ep_get_capability;
  b->Compile = ep_compile;
  b->ReleaseNodeComputeInfos = ep_release_compute_infos;
  if (factory->profiling) { /* the OrtEp fields of versions 24 and 25 stay NULL but this one */
    b->ort_version_supported = EP_ORT_API_VERSION_PROFILER;
    b->CreateProfiler = ep_create_profiler;
  }
  *out = b;
  return NULL;
}

/* One group's line of the session summary (the verbose format compare.py parses). */
static void group_line(const plan *p, char *buf, size_t len) {
  const plan_stats *s = &p->stats;
  unsigned long long runs = s->runs, ns = s->eval_ns;
  snprintf(buf, len,
           "%s: %d nodes, path %s%s (%s), runs %llu (failed %llu, compiled %llu, eager "
           "%llu), cache hits %llu misses %llu, traces %llu, fallbacks %llu, mean run %.3f ms, "
           "in %llu B, out %llu B, host reads %llu",
           p->name, p->g->n_nodes, plan_path_name(p->path), plan_turned_eager(p) ? "->eager" : "",
           p->path_reason, runs, (unsigned long long)s->failures,
           (unsigned long long)s->compiled_runs, (unsigned long long)s->eager_runs,
           (unsigned long long)s->cache_hits, (unsigned long long)s->cache_misses,
           (unsigned long long)s->traces, (unsigned long long)s->fallbacks,
           runs ? (double)ns / (double)runs / 1e6 : 0.0, (unsigned long long)s->bytes_in,
           (unsigned long long)s->bytes_out, (unsigned long long)s->host_reads);
}

/* The session summary: on stderr with verbose on (nodes' fast paths too), and per group at INFO
 * through ORT's logger (node paths at VERBOSE). */
static void summarize(const mlx_ep *ep) {
  const char *device = ep->options.device == MX_DEVICE_GPU ? "gpu" : "cpu";
  bool info = EP_LOG_ON(ep, ORT_LOGGING_LEVEL_INFO);
  bool verbose_log = EP_LOG_ON(ep, ORT_LOGGING_LEVEL_VERBOSE);
  if (!ep->options.verbose && !info) return;
  if (ep->options.verbose)
    fprintf(stderr, "[%s] session summary: %d fused group(s) on %s\n", EP_NAME, ep->n_plans,
            device);
  if (info)
    EP_LOG(ep, ORT_LOGGING_LEVEL_INFO, "session summary: %d fused group(s) on %s", ep->n_plans,
           device);
  for (int i = 0; i < ep->n_plans; i++) {
    const plan *p = ep->plans[i];
    char line[1024];
    group_line(p, line, sizeof line);
    if (ep->options.verbose) fprintf(stderr, "[%s]   %s\n", EP_NAME, line);
    if (info) EP_LOG(ep, ORT_LOGGING_LEVEL_INFO, "group %s", line);
    for (int n = 0; n < p->g->n_nodes; n++) {
      if (p->node_paths[n].kind == TR_PATH_NONE) continue;
      if (ep->options.verbose)
        fprintf(stderr, "[%s]     node '%s' (%s): %s\n", EP_NAME, p->g->nodes[n].name,
                p->g->nodes[n].op_type, p->node_paths[n].note);
      if (verbose_log)
        EP_LOG(ep, ORT_LOGGING_LEVEL_VERBOSE, "group %s: node '%s' (%s): %s", p->name,
               p->g->nodes[n].name, p->g->nodes[n].op_type, p->node_paths[n].note);
    }
  }
}

void ep_destroy(OrtEp *base) {
  mlx_ep *ep = (mlx_ep *)base;
  if (!ep) return;
  summarize(ep);
  FILE *stats = ep->options.stats_file[0] ? fopen(ep->options.stats_file, "w") : NULL;
  if (stats) stats_write_groups(ep, stats);
  ep_mlx_lock(); /* freeing arrays and compiled functions touches MLX's shared state */
  for (int i = 0; i < ep->n_plans; i++) plan_free(ep->plans[i]);
  ep_mlx_unlock();
  if (stats) {
    stats_write_end(stats);
    fclose(stats);
  }
  free(ep->plans);
  free(ep);
}
