/*
 * The partitioner: turns the set of claimed nodes into fused groups that ORT can replace with one
 * node each. Groups are maximal runs of claimed nodes in a topological order built to keep claimed
 * nodes together; a run of a topological order is convex, and contracting runs keeps the graph
 * acyclic, so no group can form a cycle with another or with the CPU nodes between them.
 */
#ifndef PARTITION_H
#define PARTITION_H

#include "ir/ir.h"

/* group_of[i] receives the group of node i, or IR_NONE if not claimed; order (optional, n_nodes
 * entries) receives the topological order used. alone (optional): claimed nodes that get a group
 * of their own (eager nodes whose output shapes follow values), taken only when no other claimed
 * node is ready, so the group before them is as large as it can be. Returns the number of
 * groups, or -1 when out of memory. Group ids follow topological order. With every node claimed,
 * order is simply a topological order of the graph (what plans execute in). */
int partition_groups(const ir_graph *g, const bool *claimed, const bool *alone, int *group_of,
                     int *order);

#endif
