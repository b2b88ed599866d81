/*
 * The IR's bump arena: a chain of blocks, each at least 64 KiB, handed out front to back. Large
 * requests get a block of their own. Freed as a whole by ir_arena_free.
 */
#include "ir/ir_arena.h"

#include <stdlib.h>
#include <string.h>

typedef struct block {
  struct block *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
} block;

struct ir_arena {
  block *head;
};

enum { BLOCK_SIZE = 64 * 1024 };

ir_arena *ir_arena_new(void) { return calloc(1, sizeof(ir_arena)); }

void ir_arena_free(ir_arena *arena) {
  if (!arena) return;
  for (block *b = arena->head, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  free(arena);
}

void *ir_arena_alloc(ir_arena *arena, size_t bytes) {
  size_t need = (bytes + 15) & ~(size_t)15;
  block *b = arena->head;
  if (!b || b->size - b->used < need) {
    size_t size = need > BLOCK_SIZE ? need : BLOCK_SIZE;
    block *nb = calloc(1, sizeof(block) + size);
    if (!nb) return NULL;
    nb->size = size;
    if (b && need > BLOCK_SIZE) { /* keep the current block open for small requests */
      nb->next = b->next;
      b->next = nb;
      nb->used = need;
      return nb->data;
    }
    nb->next = b;
    arena->head = b = nb;
  }
  void *p = b->data + b->used;
  b->used += need;
  return p;
}

char *ir_arena_strdup(ir_arena *arena, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = ir_arena_alloc(arena, n);
  if (p) memcpy(p, s, n);
  return p;
}
