/*
 * The session's run record as JSON (the stats_file option): the buffer cache limit the EP set;
 * per fused group its path and why (the node whose compile class decided it, what turned it
 * eager, the path trial's outcome), run counts, cache hits and misses, traces, fallbacks, host
 * reads and each noted node's path as node_path.h's identifiers; the library serving MLX's CPU
 * matrix products (blas); where the first Runs' time went (cold_start) and MLX's kernel cache
 * folders (kernel_cache); and the bridge objects still alive after the session freed its plans.
 * Written when ORT releases the EP; tests and tools read it instead of the verbose summary's
 * prose.
 */
#ifndef EP_STATS_H
#define EP_STATS_H

#include "ep/ep_types.h"

#include <stdio.h>

/* Around a group's first Run (under the MLX lock): with a run record asked for, the kernel
 * files of the device's kernel cache folder are counted before the session's first group's first
 * Run and after its last group's, once each. */
void stats_first_run_begins(mlx_ep *ep);
void stats_first_run_ended(mlx_ep *ep);
/* Writes the groups' part (the record up to its closing brace) while the plans exist. */
void stats_write_groups(const mlx_ep *ep, FILE *f);
/* Ends the record with the live bridge objects, counted after the plans were freed. */
void stats_write_end(FILE *f);

#endif
