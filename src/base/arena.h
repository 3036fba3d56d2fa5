/* A bump arena: many small allocations freed at once. Blocks grow as needed.
 * fbx_arena_alloc returns zeroed, 16-byte aligned memory or NULL on OOM. */
#ifndef FBX_BASE_ARENA_H
#define FBX_BASE_ARENA_H

#include <stddef.h>

typedef struct fbx_arena fbx_arena;

fbx_arena *fbx_arena_create(size_t block_size);  /* NULL on OOM */
void fbx_arena_destroy(fbx_arena *a);            /* NULL is fine */
void *fbx_arena_alloc(fbx_arena *a, size_t n);
char *fbx_arena_strdup(fbx_arena *a, const char *s); /* NULL s -> "" */
size_t fbx_arena_bytes(const fbx_arena *a);      /* total reserved */

#endif
