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
} plan_stats;

typedef struct plan {
  char *name; /* the fused node's name */
  ir_graph *g;
  int *order;           /* node indices in execution order */
  const op_row **rows;  /* per node */
  bool *folded;         /* per node: computed once at build */
  mx_arena *consts;
  mx_array *const_values; /* per value; NULL unless constant */
  mx_device device;
  bool wrap_inputs; /* hand ORT's input buffers to MLX without a copy (CPU device) */
  plan_stats stats;
} plan;

/* Builds a plan from the fused subgraph. On failure returns an MX_* code and a message. */
int plan_build(const ir_graph *snapshot, const char *name, mx_device device, plan **out,
               char *err, size_t err_len);
void plan_free(plan *p);

/* Runs the plan: translates every node on the inputs and evaluates the outputs (n = the
 * subgraph's output count) in ctx's arena. Messages name the failing node. */
int plan_run(plan *p, mx_ctx *ctx, const plan_tensor *inputs, mx_array *outputs, char *err,
             size_t err_len);

#endif
