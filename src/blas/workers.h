/*
 * A small fork-join pool for the plugin's matrix product and host kernels: one thread per
 * available core, the caller counted as the first. Work is a function called once per part.
 */
#ifndef EP_BLAS_WORKERS_H
#define EP_BLAS_WORKERS_H

typedef void (*workers_fn)(void *arg, int part);

/* Threads a job may use, the caller included (at least 1). */
int workers_available(void);

/* Calls fn(arg, part) once for each part in [0, parts), on the caller and whichever pool threads
 * are awake to claim a part, and returns when all are done. parts <= workers_available(). When
 * another thread is using the pool, or its threads could not be started, the caller runs every
 * part itself. */
void workers_run(workers_fn fn, void *arg, int parts);

/* Wakes the sleeping pool threads to spin for a while (NUDGED_SPIN_NS in workers.c), as they do
 * after a job, so that a job coming soon finds them awake: a Run calls it before MLX evaluates,
 * whose first host kernel otherwise ran on the caller alone while the others woke (PP-OCRv4
 * rec's stem, 0.23 ms). */
void workers_nudge(void);

/* Part `part` of `parts` near-equal ranges of [0, total): [*first, *last), empty for parts past
 * the end. */
static inline void workers_range(long total, int parts, int part, long *first, long *last) {
  long per = (total + parts - 1) / parts;
  *first = part * per < total ? part * per : total;
  *last = *first + per < total ? *first + per : total;
}

#endif
