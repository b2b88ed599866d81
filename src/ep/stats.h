/*
 * The session's run record as JSON (the stats_file option): per fused group its path and why,
 * run counts, cache hits and misses, traces, fallbacks, host reads and each fast-kernel node's
 * path, the library serving MLX's CPU matrix products (blas), and the bridge objects still alive
 * after the session freed its plans. Written when ORT releases the EP; tests read it instead of
 * the verbose summary's prose.
 */
#ifndef EP_STATS_H
#define EP_STATS_H

#include "ep/ep_types.h"

#include <stdio.h>

/* Writes the groups' part (the record up to its closing brace) while the plans exist. */
void stats_write_groups(const mlx_ep *ep, FILE *f);
/* Ends the record with the live bridge objects, counted after the plans were freed. */
void stats_write_end(FILE *f);

#endif
