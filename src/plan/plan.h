/*
 * A plan is everything needed to run one fused group, built once at Compile and read-only during
 * Run: a snapshot of the group's subgraph, the registry row of each node in topological order,
 * constant initializers already converted to MLX arrays (and nodes whose inputs are all constant
 * folded into constants), and the order of the group's boundary inputs and outputs. Plans know
 * nothing of ORT's kernel API: the EP hands inputs in as plan_tensor and copies outputs out.
 */
#ifndef PLAN_H
#define PLAN_H

#include "ir/ir.h"
#include "mlx/mx.h"
#include "plan/node_path.h"
#include "ops/registry.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct plan_tensor {
  int elem_type; /* IR_* code */
  int rank;
  int64_t dims[MX_MAX_RANK];
  void *data;
  size_t bytes;
} plan_tensor;

typedef struct plan_stats {
  atomic_ullong runs, failures, eval_ns, bytes_in, bytes_out, host_reads;
  atomic_ullong compiled_runs, eager_runs, cache_hits, cache_misses, traces, fallbacks;
  /* where a slow start went: the first Run's time, and the time of compiled calls that traced
   * (tracing and MLX's compile; evaluation is lazy and comes after) over the session */
  atomic_ullong first_run_ns, trace_ns;
  /* time inside MLX's evaluations (where MLX JIT-compiles kernels on first use: NVRTC on the
   * GPU, the C++ compiler on the CPU) over the session; the first Run's share of it and of
   * trace_ns; the time of the eager runs the path trial added */
  atomic_ullong mlx_eval_ns, first_run_eval_ns, first_run_trace_ns, trial_eager_ns;
} plan_stats;

typedef enum plan_path { PLAN_EAGER, PLAN_SHAPELESS, PLAN_KEYED } plan_path;

/* Session-wide settings a plan is built with (from provider options / environment). */
typedef struct plan_config {
  mx_device device;
  bool compile;   /* MLX compile at all (ONNXRUNTIME_EP_MLX_NO_COMPILE=1 turns it off) */
  bool shapeless; /* allow shapeless compile (ONNXRUNTIME_EP_MLX_NO_SHAPELESS=1 turns it off) */
  int cache_size; /* compiled variants kept per keyed plan */
  bool fast_kernels; /* custom GPU kernels (ONNXRUNTIME_EP_MLX_NO_LINEAR_ATTENTION_SCAN=1: off) */
  bool path_trial;   /* time compiled against eager on the first runs, keep eager only when
                      * clearly faster (ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL=1: always compiled
                      * where allowed) */
  bool host_kernels; /* CPU device: the CPU room's host kernels are on (cpu/cpu.h), so nodes whose
                      * translation may take one compile keyed on shapes */
  bool wrap_inputs;  /* CPU device: MLX works on ORT's input buffers in place; otherwise MLX reads
                      * them when evaluated (mx_from_host: into device memory on the GPU) */
} plan_config;

/* The path trial of a compiled plan: after its first (tracing) run, PLAN_TRIAL_RUNS eager and
 * as many compiled runs alternate (compiled runs that traced do not count); eager wins for the
 * rest of the session when its fastest run is at least PLAN_TRIAL_EAGER_MARGIN percent below the
 * compiled one. MLX's fused CPU kernels are not always faster than its eager ones
 * (docs/BENCHMARKS.md), and only a measurement on the machine can tell; the margin keeps a close
 * call, which a few runs on a busy machine decide by noise, on the compiled path (MiniLM b1 took
 * eager in one `make bench` of four and ran 5 ms slower; comparing medians of three, at a 5%
 * margin and then at 10%, still in one of three on 2026-12-03; the fastest of three, with 10%,
 * in two of five for MiniLM b1 or rec, which eager costs 5-7%). The fastest runs compare what
 * the paths cost, where neighbours only add time; five of each give a quiet moment more chances
 * to fall in both. */
enum { PLAN_TRIAL_RUNS = 5, PLAN_TRIAL_EAGER_MARGIN = 10 };
/* At most this many values key one plan's variants (more: the plan runs eagerly). */
enum { PLAN_MAX_KEYS = 16 };
typedef struct plan_trial {
  bool enabled, decided, chose_eager;
  int n_eager, n_compiled;
  uint64_t eager_best_ns, compiled_best_ns; /* once decided: the fastest run of each path */
  uint64_t eager_ns[PLAN_TRIAL_RUNS], compiled_ns[PLAN_TRIAL_RUNS];
} plan_trial;

struct plan;

/* One compiled variant. For keyed variants, values computed only from input shapes and
 * constants (Shape -> Gather -> Concat -> Reshape chains) are a function of the signature: they
 * are evaluated once when the variant is made and enter its trace as constants, as do the key
 * values (plan.keys) the variant was made for. */
typedef struct plan_cache_entry {
  struct plan *owner;
  int64_t *signature; /* per input of the compiled function (plan.call_values) its dtype, rank
                       * and dims (or their pattern), then the keys */
  size_t signature_len;
  mx_compiled *fn;
  uint64_t last_use;
  mx_arena *arena;     /* holds fixed_values */
  mx_array *fixed_values; /* per value: a shape-derived value or a key; NULL otherwise */
} plan_cache_entry;

typedef struct plan {
  char *name; /* the fused node's name */
  ir_graph *g;
  int *order;           /* node indices in execution order */
  const op_row **rows;  /* per node */
  bool *folded;         /* per node: computed once at build */
  op_compile_class *classes; /* per node: its compile class */
  tr_node_path *node_paths;   /* per node: which kernel path its translator last reported */
  mx_array *derived;         /* per node, TR_DERIVED_SLOTS values its row prepared at build */
  struct plan_body ***bodies; /* per node: its subgraphs made ready (control flow), or NULL */
  struct op_fusions *fusions; /* the fusion table's matches, per anchor (NULL when none) */
  mx_arena *consts;
  mx_array *const_values; /* per value; NULL unless constant */
  mx_device device;
  bool wrap_inputs; /* plan_config.wrap_inputs */
  bool fast_kernels;
  int tracing; /* TR_TRACE_* while a compiled function traces (see tr_ctx.trace) */
  plan_path path;   /* chosen at build from the rows' compile classes */
  const char *path_reason;
  char path_reason_buf[192];
  int path_node; /* the node whose compile class decided the path at build, or -1 (all
                  * shapeless-safe) */
  bool compile_broken; /* a trace failed where eager succeeded: eager from then on */
  bool shape_churn;    /* a keyed plan kept meeting new shapes: eager from then on (run.c) */
  plan_trial trial;
  atomic_bool traced_checks; /* some trace recorded run-time checks: read the check output */
  bool *shape_node;        /* per node: computes only from input shapes and constants */
  bool has_shape_nodes;
  /* Value-keyed plans (OP_VALUE_KEYED nodes, e.g. an If with a computed cond): the values that
   * key a variant besides the input shapes, and the nodes that compute them, evaluated eagerly
   * before each compiled call (run.c). */
  int keys[PLAN_MAX_KEYS];
  int n_keys;
  bool *key_node; /* per node */
  /* Keyed plans: the prologue (prologue.c), index and length arithmetic on some inputs (a
   * mask's ReduceSum, Shape, Gather, Cast) translated before each compiled call. The compiled
   * function takes its results in place of the inputs only it reads (unkeyed_input, per graph
   * input), so their dims key no variant; the results' dims do. call_values: the compiled
   * function's inputs as value indices (the bound inputs when there is no prologue). */
  bool *prologue_node; /* per node */
  int n_prologue_nodes;
  bool *unkeyed_input;
  int *call_values;
  int n_call_values;
  plan_cache_entry **cache; /* compiled variants (per shape, or per dim pattern when shapeless),
                             * least recently used evicted */
  int cache_count, cache_capacity;
  uint64_t cache_clock;
  plan_stats stats;
  /* how long the last Run took (run.c holds the pool awake through the next when it was long);
   * atomic, as ORT may run a session from several threads at once */
  _Atomic uint64_t last_run_ns;
} plan;

/* Whether a compiled plan has turned eager for the rest of the session: a trace failed where
 * eager did not, the path trial chose eager, or its shapes kept changing (run.c). */
bool plan_turned_eager(const plan *p);

/* Builds a plan from the fused subgraph. On failure returns an MX_* code and a message. */
int plan_build(const ir_graph *snapshot, const char *name, const plan_config *cfg, plan **out,
               char *err, size_t err_len);
void plan_free(plan *p);
const char *plan_path_name(plan_path path);
/* A compile class as the run record names it ("shape_keyed"). */
const char *plan_class_name(op_compile_class c);

/* Runs the plan: on the compiled path calls the cached MLX-compiled function (tracing it on a
 * miss), otherwise translates every node eagerly; evaluates the outputs (n = the subgraph's
 * output count) in ctx's arena. A failed trace falls back to eager for that call. Messages name
 * the failing node. Callers serialise plan_run calls (MLX's graph state is process-wide). */
int plan_run(plan *p, mx_ctx *ctx, const plan_tensor *inputs, mx_array *outputs, char *err,
             size_t err_len);

#endif
