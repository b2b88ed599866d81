/*
 * What plan.c (building), body.c (control-flow bodies) and run.c (running) share and nobody else
 * needs: per-node translation with the node named in errors, run-time check verification, shape
 * conversion (node.c), the compile cache's freeing (cache.c) and the clock (run.c).
 */
#ifndef PLAN_INTERNAL_H
#define PLAN_INTERNAL_H

#include "plan/plan.h"
#include "plan/translate.h"

/* A control-flow node's subgraph, ready to translate: its nodes' rows in a topological order,
 * its constants as MLX arrays (in the plan's constants arena), prepared values, where each
 * outer-scope value lives in the enclosing graph, and the bodies of its own control-flow nodes.
 * The snapshot it reads belongs to the plan's snapshot. */
typedef struct plan_body {
  const char *attr;
  const ir_graph *g;
  int *order;
  const op_row **rows;
  mx_array *const_values; /* per value; NULL unless constant */
  mx_array *derived;      /* per node, TR_DERIVED_SLOTS */
  tr_node_path *node_paths;
  int *outer;             /* per value: its index in the enclosing graph, or IR_NONE */
  struct op_fusions *fusions; /* the fusion table's matches in g (NULL when none) */
  struct plan_body ***sub; /* per node: one body per subgraph, or NULL */
} plan_body;

/* Builds the bodies of node n of g (NULL *out when it has none), constants into ctx's arena.
 * consts: g's constants (per value), which the bodies' fusion matchers see as outer-scope
 * constants. */
int plan_bodies_build(const ir_graph *g, const mx_array *consts, const ir_node *n, mx_ctx *ctx,
                      bool fast_kernels, plan_body ***out, char *err, size_t len);
void plan_bodies_free(plan_body **bodies, int count);
/* Converts g's constant initializers into MLX arrays (const_values, per value) once. */
int plan_load_constants(ir_graph *g, mx_array *const_values, mx_ctx *ctx, char *err, size_t len);

/* known: values fixed for this translation (constants, and a keyed variant's shape values);
 * host reads of them are free and allowed while tracing. seqs: the translation's sequence
 * values (NULL where no node touching one is translated, as in constant folding). */
int plan_translate_node(const plan *p, mx_ctx *ctx, mx_array *values, const mx_array *known,
                        tr_seqs *seqs, int index, tr_checks *checks, unsigned *host_reads,
                        char *err, size_t len);
/* Whether a node has a sequence or optional input or output: such nodes are never folded into
 * constants nor computed from shapes alone (constants and shape values are plain arrays). */
bool plan_node_touches_container(const ir_graph *g, const ir_node *n);
/* Translates node `index` of t->g through the fusions anchored there, or its row (node.c). */
int plan_translate_with(tr_ctx *t, const struct op_fusions *fusions, int index,
                        const op_row *row);
int plan_verify_checks(mx_ctx *ctx, tr_checks *checks, char *err, size_t len);
int plan_dims_to_int(const int64_t *dims, int rank, int *shape);
/* prologue.c: finds a keyed plan's prologue at build and lays out the compiled function's
 * inputs (plan.call_values) for every compiled plan. */
int plan_find_prologue(plan *p);
/* The compiled function's inputs for one call: the prologue translated from the bound inputs
 * into ctx's arena (its run-time checks ride along with the outputs), or the bound inputs. */
typedef struct plan_call {
  mx_array *inputs; /* per plan.call_values */
  int n;
  bool empty;       /* some input has a zero-size dim (such calls run eagerly) */
  tr_checks checks;
  unsigned host_reads;
} plan_call;
int plan_call_inputs(const plan *p, mx_ctx *ctx, const mx_array *bound, plan_call *call,
                     char *err, size_t len);
void plan_call_free(plan_call *call);
/* cache.c */
void plan_cache_entry_free(plan_cache_entry *e);
void plan_cache_clear(plan *p);
uint64_t plan_now_ns(void);

#endif
