/*
 * The partition report: how many nodes the EP claimed, into how many fused groups, and every
 * declined node with its op, name and the predicate's reason. Built by GetCapability, printed
 * with verbose on and written as JSON when the report_file option names a file.
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

void report_print(const report *r, FILE *out);
int report_write_json(const report *r, const char *path); /* 0 on success */
/* Writes s as a JSON string, escaped. */
void report_json_string(FILE *f, const char *s);

#endif
