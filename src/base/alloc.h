/* All heap allocation goes through these wrappers so tests can inject failure.
 * Semantics match malloc/calloc/realloc/free. fbx_alloc_fail_after(n) makes the
 * n-th next allocation (0 = the next one) return NULL; -1 disables injection. */
#ifndef FBX_BASE_ALLOC_H
#define FBX_BASE_ALLOC_H

#include <stddef.h>

void *fbx_malloc(size_t n);
void *fbx_calloc(size_t count, size_t size);
void *fbx_realloc(void *p, size_t n);
void fbx_free(void *p);
/* 64-byte aligned allocation for kernel buffers; free with fbx_free_aligned. */
void *fbx_malloc_aligned(size_t n);
void fbx_free_aligned(void *p);
/* Large, long-lived, streamed buffers (packed weights): 2 MiB aligned and, when
 * at least 1 MiB, advised to use transparent huge pages (fewer TLB misses when a
 * decode step streams every weight once). Free with fbx_free_aligned. */
void *fbx_malloc_huge(size_t n);
/* The same without rounding n up: 2 MiB aligned, the whole 2 MiB pages inside the
 * buffer advised to use transparent huge pages, the tail (< 2 MiB) left on small pages,
 * so no huge page is backed beyond n (a per-matrix rounding would waste up to 2 MiB of
 * memory per buffer). Free with fbx_free_aligned. */
void *fbx_malloc_huge_exact(size_t n);
/* Returns a heap copy of s (NULL on OOM or NULL s); caller frees with fbx_free. */
char *fbx_strdup(const char *s);

void fbx_alloc_fail_after(long n);
/* Is an injected failure still to come? (false once it has happened, or when off):
 * lets a test step n upwards until a run completes without reaching the failure. */
int fbx_alloc_fail_pending(void);

#endif
