/*
 * Compile and Compute. Compile builds one plan per fused group (everything copied out of ORT's
 * graph) and returns a compute info pointing at it. Compute reads the kernel's inputs, runs the
 * plan in a fresh per-run arena, and copies the evaluated outputs into the buffers ORT allocates.
 * MLX's graph building and evaluation are serialised by one process-wide lock, so concurrent
 * Run calls on one session (or many sessions) are correct; everything else is per call.
 */
#include "ep/ep_types.h"
#include "ep/log.h"
#include "ep/profiler.h"
#include "ep/stats.h"
#include "plan/plan.h"
#include "plan/packed.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct compute_info {
  OrtNodeComputeInfo base; /* first: ORT hands us &base */
  mlx_ep *ep;
  plan *plan;
} compute_info;

static pthread_mutex_t mlx_lock = PTHREAD_MUTEX_INITIALIZER;

void ep_mlx_lock(void) { pthread_mutex_lock(&mlx_lock); }
void ep_mlx_unlock(void) { pthread_mutex_unlock(&mlx_lock); }

enum { PLAN_CACHE_SIZE = 8 }; /* compiled shape variants kept per keyed group */

static OrtStatus *ORT_API_CALL create_state(OrtNodeComputeInfo *this_ptr,
                                            OrtNodeComputeContext *ctx, void **state) {
  (void)ctx;
  *state = this_ptr;
  return NULL;
}

static void ORT_API_CALL release_state(OrtNodeComputeInfo *this_ptr, void *state) {
  (void)this_ptr, (void)state;
}

static OrtStatus *read_input(const OrtApi *ort, OrtKernelContext *kctx, size_t i,
                             plan_tensor *t) {
  const OrtValue *v = NULL;
  OrtStatus *st = ort->KernelContext_GetInput(kctx, i, &v);
  if (st) return st;
  OrtTensorTypeAndShapeInfo *info = NULL;
  if ((st = ort->GetTensorTypeAndShape(v, &info))) return st;
  ONNXTensorElementDataType type;
  size_t rank = 0;
  if (!(st = ort->GetTensorElementType(info, &type)) &&
      !(st = ort->GetDimensionsCount(info, &rank))) {
    if (rank > MX_MAX_RANK) rank = MX_MAX_RANK + 1; /* refused by the plan with a message */
    else st = ort->GetDimensions(info, t->dims, rank);
  }
  ort->ReleaseTensorTypeAndShapeInfo(info);
  if (st) return st;
  t->elem_type = (int)type;
  t->rank = (int)rank;
  if ((st = ort->GetTensorMutableData((OrtValue *)v, &t->data))) return st;
  return ort->GetTensorSizeInBytes(v, &t->bytes);
}

static OrtStatus *write_output(const OrtApi *ort, OrtKernelContext *kctx, size_t i, mx_ctx *mx,
                               mx_array a, plan *p) {
  int64_t dims[MX_MAX_RANK];
  int rank = mx_ndim(a);
  for (int d = 0; d < rank; d++) dims[d] = mx_shape(a)[d];
  OrtValue *out = NULL;
  OrtStatus *st = ort->KernelContext_GetOutput(kctx, i, dims, (size_t)rank, &out);
  if (st) return st;
  void *data = NULL;
  if ((st = ort->GetTensorMutableData(out, &data))) return st;
  int elem = p->g->values[p->g->graph_outputs[i]].elem_type;
  size_t bytes = mx_nbytes(a);
  if (ir_to_mx_dtype(elem) < 0 && ir_carrier_mx_dtype(elem) >= 0) {
    /* a raw type: the carrier packs into ORT's layout (its size is the packed size) */
    if ((st = ort->GetTensorSizeInBytes(out, &bytes))) return st;
    if (packed_from_mx(mx, a, elem, data, bytes) != MX_OK)
      return ep_status(ort, ORT_FAIL, "%s: group '%s': output %zu: %s", EP_NAME, p->name, i,
                       mx->error);
  } else if (bytes && mx_copy_to_host(mx, a, data, bytes) != MX_OK)
    return ep_status(ort, ORT_FAIL, "%s: group '%s': output %zu: %s", EP_NAME, p->name, i,
                     mx->error);
  atomic_fetch_add(&p->stats.bytes_out, bytes);
  return NULL;
}

/* The group's first Run, once (runs are counted under the MLX lock, so one call sees 1): when
 * slower than the slow_first_run_ms option (1 s: users see a stall and ask where it went), a
 * warning, shown at ORT's default severity, saying how much of it was tracing, how much MLX's
 * evaluation (where it compiles kernels on first use) and how much the rest. */
static void warn_slow_first_run(const mlx_ep *ep, const plan *p) {
  uint64_t first = atomic_load(&p->stats.first_run_ns);
  uint64_t trace = atomic_load(&p->stats.first_run_trace_ns);
  uint64_t eval = atomic_load(&p->stats.first_run_eval_ns);
  long limit_ms = ep->options.slow_first_run_ms;
  if (limit_ms < 0 || first < (uint64_t)limit_ms * 1000 * 1000) return;
  uint64_t rest = trace + eval < first ? first - trace - eval : 0;
  EP_LOG(ep, ORT_LOGGING_LEVEL_WARNING,
         "group '%s' (%d nodes, path %s): first Run took %.3f s: %.3f s tracing (%llu trace(s)), "
         "%.3f s in MLX's evaluation (where MLX compiles kernels on first use), %.3f s binding "
         "inputs and translating",
         p->name, p->g->n_nodes, plan_path_name(p->path), (double)first / 1e9,
         (double)trace / 1e9, (unsigned long long)atomic_load(&p->stats.traces),
         (double)eval / 1e9, (double)rest / 1e9);
}

static OrtStatus *run_locked(compute_info *ci, OrtKernelContext *kctx, mx_ctx *mx,
                             plan_tensor *inputs, mx_array *outputs) {
  const OrtApi *ort = ci->ep->ort;
  plan *p = ci->plan;
  OrtStatus *st = NULL;
  for (int i = 0; i < p->g->n_graph_inputs && !st; i++)
    st = read_input(ort, kctx, (size_t)i, &inputs[i]);
  if (st) return st;
  char err[1024];
  bool profiled = ep_profiling_now();
  uint64_t t0 = profiled ? ep_profiler_clock_ns() : 0;
  unsigned long long traces = atomic_load(&p->stats.traces);
  unsigned long long compiled = atomic_load(&p->stats.compiled_runs);
  bool first = atomic_load(&p->stats.runs) == 0;
  if (first) stats_first_run_begins(ci->ep);
  int rc = plan_run(p, mx, inputs, outputs, err, sizeof err);
  if (first) stats_first_run_ended(ci->ep);
  if (profiled && rc == MX_OK)
    ep_profiler_record(p->name, p->g->n_nodes, t0, ep_profiler_clock_ns() - t0,
                       atomic_load(&p->stats.compiled_runs) != compiled ? "compiled" : "eager",
                       atomic_load(&p->stats.traces) != traces);
  if (rc != MX_OK)
    return ep_status(ort, rc == MX_ERR_NOMEM ? ORT_FAIL : ORT_RUNTIME_EXCEPTION, "%s: %s",
                     EP_NAME, err);
  for (int i = 0; i < p->g->n_graph_outputs && !st; i++)
    st = write_output(ort, kctx, (size_t)i, mx, outputs[i], p);
  if (atomic_load(&p->stats.runs) == 1) warn_slow_first_run(ci->ep, p);
  return st;
}

static OrtStatus *ORT_API_CALL compute(OrtNodeComputeInfo *this_ptr, void *state,
                                       OrtKernelContext *kctx) {
  (void)state;
  compute_info *ci = (compute_info *)this_ptr;
  plan *p = ci->plan;
  const OrtApi *ort = ci->ep->ort;
  plan_tensor *inputs = calloc((size_t)p->g->n_graph_inputs + 1, sizeof(plan_tensor));
  mx_array *outputs = calloc((size_t)p->g->n_graph_outputs + 1, sizeof(mx_array));
  mx_ctx mx = {.arena = mx_arena_new(), .device = p->device};
  OrtStatus *st = NULL;
  if (!inputs || !outputs || !mx.arena) {
    st = ep_status(ort, ORT_FAIL, "%s: group '%s': out of memory", EP_NAME, p->name);
  } else {
    pthread_mutex_lock(&mlx_lock);
    st = run_locked(ci, kctx, &mx, inputs, outputs);
    mx_arena_free(mx.arena); /* arrays are released under the lock too */
    mx.arena = NULL;
    pthread_mutex_unlock(&mlx_lock);
  }
  mx_arena_free(mx.arena);
  free(inputs);
  free(outputs);
  return st;
}

static OrtStatus *keep_plan(mlx_ep *ep, plan *p) {
  if (ep->n_plans == ep->cap_plans) {
    int cap = ep->cap_plans ? ep->cap_plans * 2 : 8;
    plan **grown = realloc(ep->plans, sizeof(plan *) * (size_t)cap);
    if (!grown) return ep_status(ep->ort, ORT_FAIL, "%s: out of memory", EP_NAME);
    ep->plans = grown;
    ep->cap_plans = cap;
  }
  ep->plans[ep->n_plans++] = p;
  return NULL;
}

static OrtStatus *compile_one(mlx_ep *ep, const OrtGraph *graph, const OrtNode *fused,
                              OrtNodeComputeInfo **out) {
  const OrtApi *ort = ep->ort;
  const char *name = "";
  OrtStatus *st = ort->Node_GetName(fused, &name);
  if (st) return st;
  char err[1024];
  ir_graph *g = ir_snapshot(ort, ep->factory->ort_version, graph, err, sizeof err);
  if (!g) return ep_status(ort, ORT_FAIL, "%s: Compile '%s': %s", EP_NAME, name, err);
  plan *p = NULL;
  pthread_mutex_lock(&mlx_lock);
  plan_config cfg = {.device = ep->options.device,
                     .compile = ep->options.compile,
                     .shapeless = ep->options.shapeless,
                     .cache_size = PLAN_CACHE_SIZE,
                     .fast_kernels = ep->options.fast_kernels,
                     .path_trial = ep->options.path_trial,
                     .wrap_inputs =
                         ep->options.device == MX_DEVICE_CPU && !ep->options.gpu_crossing,
                     .host_kernels = ep->host_kernels};
  int rc = plan_build(g, name, &cfg, &p, err, sizeof err);
  pthread_mutex_unlock(&mlx_lock);
  if (rc != MX_OK) return ep_status(ort, ORT_FAIL, "%s: Compile '%s': %s", EP_NAME, name, err);
  if ((st = keep_plan(ep, p))) {
    plan_free(p);
    return st;
  }
  compute_info *ci = calloc(1, sizeof *ci);
  if (!ci) return ep_status(ort, ORT_FAIL, "%s: out of memory", EP_NAME);
  ci->ep = ep;
  ci->plan = p;
  ci->base.ort_version_supported = EP_ORT_API_VERSION;
  ci->base.CreateState = create_state;
  ci->base.Compute = compute;
  ci->base.ReleaseState = release_state;
  *out = &ci->base;
  return NULL;
}

OrtStatus *ORT_API_CALL ep_compile(OrtEp *this_ptr, const OrtGraph **graphs,
                                   const OrtNode **fused_nodes, size_t count,
                                   OrtNodeComputeInfo **infos, OrtNode **ep_context_nodes) {
  mlx_ep *ep = (mlx_ep *)this_ptr;
  for (size_t i = 0; i < count; i++) {
    infos[i] = NULL;
    if (ep_context_nodes) ep_context_nodes[i] = NULL;
  }
  for (size_t i = 0; i < count; i++) {
    OrtStatus *st = compile_one(ep, graphs[i], fused_nodes[i], &infos[i]);
    if (st) return st;
  }
  return NULL;
}

void ORT_API_CALL ep_release_compute_infos(OrtEp *this_ptr, OrtNodeComputeInfo **infos,
                                           size_t count) {
  (void)this_ptr;
  for (size_t i = 0; i < count; i++) free(infos[i]);
}
