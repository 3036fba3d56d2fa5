#include "arena.h"

#include <string.h>

#include "alloc.h"

typedef struct fbx__arena_block {
  struct fbx__arena_block *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
} fbx__arena_block;

struct fbx_arena {
  fbx__arena_block *head;
  size_t block_size;
  size_t reserved;
};

fbx_arena *fbx_arena_create(size_t block_size) {
  fbx_arena *a = fbx_calloc(1, sizeof(*a));
  if (!a) return NULL;
  a->block_size = block_size ? block_size : 64 * 1024;
  return a;
}

void fbx_arena_destroy(fbx_arena *a) {
  if (!a) return;
  fbx__arena_block *b = a->head;
  while (b) {
    fbx__arena_block *n = b->next;
    fbx_free(b);
    b = n;
  }
  fbx_free(a);
}

void *fbx_arena_alloc(fbx_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  fbx__arena_block *b = a->head;
  if (!b || b->size - b->used < n) {
    size_t sz = n > a->block_size ? n : a->block_size;
    b = fbx_malloc(sizeof(*b) + sz);
    if (!b) return NULL;
    b->size = sz;
    b->used = 0;
    /* keep the fuller block at the head only if the new one is a one-off big block */
    if (a->head && n > a->block_size) {
      b->next = a->head->next;
      a->head->next = b;
    } else {
      b->next = a->head;
      a->head = b;
    }
    a->reserved += sz;
  }
  void *p = b->data + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

char *fbx_arena_strdup(fbx_arena *a, const char *s) {
  if (!s) s = "";
  size_t n = strlen(s) + 1;
  char *d = fbx_arena_alloc(a, n);
  if (d) memcpy(d, s, n);
  return d;
}

size_t fbx_arena_bytes(const fbx_arena *a) { return a->reserved; }
