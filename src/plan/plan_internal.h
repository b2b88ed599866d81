/*
 * What plan.c (building) and run.c (running) share and nobody else needs: per-node translation
 * with the node named in errors, run-time check verification, shape conversion and the clock.
 */
#ifndef PLAN_INTERNAL_H
#define PLAN_INTERNAL_H

#include "plan/plan.h"
#include "plan/translate.h"

/* known: values fixed for this translation (constants, and a keyed variant's shape values);
 * host reads of them are free and allowed while tracing. */
int plan_translate_node(const plan *p, mx_ctx *ctx, mx_array *values, const mx_array *known,
                        int index, tr_checks *checks, unsigned *host_reads, char *err,
                        size_t len);
int plan_verify_checks(mx_ctx *ctx, tr_checks *checks, char *err, size_t len);
int plan_dims_to_int(const int64_t *dims, int rank, int *shape);
void plan_cache_clear(plan *p);
uint64_t plan_now_ns(void);

#endif
