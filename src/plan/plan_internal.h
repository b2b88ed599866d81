/*
 * What plan.c (building) and run.c (running) share and nobody else needs: per-node translation
 * with the node named in errors, run-time check verification, shape conversion and the clock.
 */
#ifndef PLAN_INTERNAL_H
#define PLAN_INTERNAL_H

#include "plan/plan.h"
#include "plan/translate.h"

/* known: values fixed for this translation (constants, and a keyed variant's shape values);
 * host reads of them are free and allowed while tracing. seqs: the translation's sequence
 * values (NULL where no node touching one is translated, as in constant folding). */
int plan_translate_node(const plan *p, mx_ctx *ctx, mx_array *values, const mx_array *known,
                        tr_seqs *seqs, int index, tr_checks *checks, unsigned *host_reads,
                        char *err, size_t len);
/* Whether a node has a sequence or optional input or output: such nodes are never folded into
 * constants nor computed from shapes alone (constants and shape values are plain arrays). */
bool plan_node_touches_container(const ir_graph *g, const ir_node *n);
int plan_verify_checks(mx_ctx *ctx, tr_checks *checks, char *err, size_t len);
int plan_dims_to_int(const int64_t *dims, int rank, int *shape);
void plan_cache_clear(plan *p);
uint64_t plan_now_ns(void);

#endif
