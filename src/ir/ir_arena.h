/*
 * A bump arena for the IR snapshot: many small allocations (names, dims, attributes) that live
 * and die together with one graph, freed in one call. Memory is zeroed; alignment is 16 bytes.
 */
#ifndef IR_ARENA_H
#define IR_ARENA_H

#include <stddef.h>

typedef struct ir_arena ir_arena;

ir_arena *ir_arena_new(void);
void ir_arena_free(ir_arena *arena);
void *ir_arena_alloc(ir_arena *arena, size_t bytes); /* NULL when out of memory */
char *ir_arena_strdup(ir_arena *arena, const char *s);

#endif
