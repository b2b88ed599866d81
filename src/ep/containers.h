/*
 * The boundary rule for sequence and optional values: ORT cannot hand a plugin EP's fused node a
 * sequence or optional, so such a value may only live inside one MLX group. Its producer and
 * every consumer must be claimed and fall in the same group, and it must be neither a graph
 * input nor a graph output. GetCapability applies the rule after partitioning and partitions
 * again until nothing more is declined.
 */
#ifndef CONTAINERS_H
#define CONTAINERS_H

#include "ir/ir.h"

#include <stdbool.h>
#include <stddef.h>

/* Called once per node the rule declines, with the reason. */
typedef void (*containers_decline_fn)(void *user, int node, const char *reason);

/* Unclaims every claimed node touching a sequence/optional value that would cross the MLX
 * boundary under this grouping (group_of from partition_groups); returns how many it unclaimed
 * (0: the grouping is sound), -1 when out of memory. */
int containers_enforce(const ir_graph *g, bool *claimed, const int *group_of,
                       containers_decline_fn decline, void *user);

#endif
