/*
 * A compiled plan's variants (plan.h, plan_cache_entry): freeing one, and clearing the cache when
 * the plan turns eager, turns keyed, or is freed. Making and choosing variants is run.c's.
 */
#include "plan/plan_internal.h"

#include <stdlib.h>

void plan_cache_entry_free(plan_cache_entry *e) {
  if (!e) return;
  mx_compiled_free(e->fn);
  mx_arena_free(e->arena);
  free(e->fixed_values);
  free(e->signature);
  free(e);
}

void plan_cache_clear(plan *p) {
  for (int i = 0; i < p->cache_count; i++) plan_cache_entry_free(p->cache[i]);
  free(p->cache);
  p->cache = NULL;
  p->cache_count = 0;
}
