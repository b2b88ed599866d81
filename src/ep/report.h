/*
 * The partition report: how many nodes the EP claimed, into how many fused groups, and every
 * declined node with its op, name and the predicate's reason. Built by GetCapability, printed
 * with verbose on, logged through ORT's logger, and written as JSON when the report_file option
 * names a file.
 */
#ifndef REPORT_H
#define REPORT_H

#include "ir/ir.h"

#include <stdio.h>

typedef struct report_decline {
  const char *op, *domain, *name; /* borrowed from the snapshot */
  int since_version;
  char reason[256];
} report_decline;

typedef struct report {
  int nodes, claimed, groups;
  int *group_sizes;         /* groups entries */
  report_decline *declines; /* nodes - claimed entries */
  int n_declines;
} report;

struct mlx_ep;
void report_print(const report *r, FILE *out);
/* Through the EP's ORT logger: the summary at INFO, one message per decline at VERBOSE. */
void report_log(const report *r, const struct mlx_ep *ep);
int report_write_json(const report *r, const char *path); /* 0 on success */
/* Writes s as a JSON string, escaped. */
void report_json_string(FILE *f, const char *s);

#endif
