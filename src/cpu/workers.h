/*
 * A small fork-join pool for the plugin's matrix product and host kernels: one thread per
 * available core, the caller counted as the first. Work is a function called once per part.
 */
#ifndef CPU_WORKERS_H
#define CPU_WORKERS_H

#include "cpu/cpu.h"

#include <stdbool.h>

typedef void (*cpu_workers_fn)(void *arg, int part);

/* Threads a job may use, the caller included (at least 1). */
int cpu_workers_available(void);

/* How many parts a large job should be cut into: a few per thread, which the threads share first
 * come, first served (1 when there is no pool). */
int cpu_workers_parts(void);

/* Calls fn(arg, part) once for each part in [0, parts), on the caller and whichever pool threads
 * are awake to claim a part, and returns when all are done. parts <= 128. When another thread is
 * using the pool, or its threads could not be started, the caller runs every part itself. */
void cpu_workers_run(cpu_workers_fn fn, void *arg, int parts);

/* Whether the calling thread is running a part of a pool job (cpu_workers_run). A job it starts
 * there finds the pool taken and runs all of its parts itself, one after another, so work that
 * would be cut into parts for the pool (a product's panels, each part packing its own copy of B)
 * is better left whole. */
bool cpu_workers_inside_job(void);

/* cpu_workers_hold / cpu_workers_release are declared in cpu/cpu.h (a Run holds the pool). */

/* Part `part` of `parts` near-equal ranges of [0, total): [*first, *last), empty for parts past
 * the end. */
static inline void cpu_workers_range(long total, int parts, int part, long *first, long *last) {
  long per = (total + parts - 1) / parts;
  *first = part * per < total ? part * per : total;
  *last = *first + per < total ? *first + per : total;
}

/* Part `part` of `parts` ranges of [0, total), cut for cpu_workers_run's order: one share of the
 * parts a thread (thread i starts at the i-th share, then helps with the others'), each share's
 * ranges largest first and tapering to one item, so that a job ends on a short part rather than
 * on whichever equal part the slower thread claimed last. [*first, *last), empty for parts past
 * a short share's items. Share i is the i-th of `threads` near-equal runs of items whatever
 * the job, so consecutive jobs keep their rows on one core. Where parts is not a whole number of
 * shares, or there are no more items than parts, the ranges are cpu_workers_range's. */
void cpu_workers_tapered_range(long total, int parts, int part, long *first, long *last);

#endif
