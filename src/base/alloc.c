#include "alloc.h"

#include "checked.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static _Atomic long fbx__fail_countdown = -1;

/* Requests above FBX_TENSOR_MAX_BYTES fail like an out-of-memory malloc: a
 * many-TB request from a hostile shape must not reach the OS (or ASan, which
 * aborts on it). */
static int fbx__too_large(size_t n) { return (uint64_t)n > FBX_TENSOR_MAX_BYTES; }

static int fbx__should_fail(void) {
  long v = atomic_load_explicit(&fbx__fail_countdown, memory_order_relaxed);
  if (v < 0) return 0; /* the common case: one relaxed load */
  return atomic_fetch_sub(&fbx__fail_countdown, 1) == 0;
}

void fbx_alloc_fail_after(long n) { atomic_store(&fbx__fail_countdown, n); }
int fbx_alloc_fail_pending(void) { return atomic_load(&fbx__fail_countdown) >= 0; }

void *fbx_malloc(size_t n) { return fbx__too_large(n) || fbx__should_fail() ? NULL : malloc(n ? n : 1); }
void *fbx_calloc(size_t c, size_t s) {
  size_t n;
  return !fbx_size_mul(c, s, &n) || fbx__too_large(n) || fbx__should_fail() ? NULL : calloc(c ? c : 1, s ? s : 1);
}
void *fbx_realloc(void *p, size_t n) { return fbx__too_large(n) || fbx__should_fail() ? NULL : realloc(p, n ? n : 1); }
void fbx_free(void *p) { free(p); }

void *fbx_malloc_aligned(size_t n) {
  if (fbx__too_large(n) || fbx__should_fail()) return NULL;
  void *p = NULL;
  if (posix_memalign(&p, 64, n ? (n + 63) & ~(size_t)63 : 64) != 0) return NULL;
  return p;
}
void fbx_free_aligned(void *p) { free(p); }

void *fbx_malloc_huge(size_t n) {
  if (n < ((size_t)1 << 20)) return fbx_malloc_aligned(n);
  if (fbx__too_large(n) || fbx__should_fail()) return NULL;
  const size_t huge = (size_t)2 << 20;
  size_t rounded = (n + huge - 1) & ~(huge - 1);
  void *p = NULL;
  if (posix_memalign(&p, huge, rounded) != 0) return NULL;
  (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: failure is harmless */
  return p;
}

void *fbx_malloc_huge_exact(size_t n) {
  const size_t huge = (size_t)2 << 20;
  if (n < huge) return fbx_malloc_aligned(n);
  if (fbx__too_large(n) || fbx__should_fail()) return NULL;
  void *p = NULL;
  if (posix_memalign(&p, huge, n) != 0) return NULL;
  (void)madvise(p, n & ~(huge - 1), MADV_HUGEPAGE); /* advice only: failure is harmless */
  return p;
}

char *fbx_strdup(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = fbx_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}
