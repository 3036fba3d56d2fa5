/* Status values: every function that can fail returns fbx_status *.
 * NULL means success. A non-NULL status owns a heap message; the caller
 * either returns it upwards or frees it with fbx_status_free().
 * src/ep/ turns a status into an OrtStatus* in exactly one place. */
#ifndef FBX_BASE_STATUS_H
#define FBX_BASE_STATUS_H

#include <stdio.h>

typedef enum fbx_status_code {
  FBX_STATUS_FAIL = 1,        /* generic failure */
  FBX_STATUS_INVALID_ARG,     /* bad option, bad model, bad input from the caller */
  FBX_STATUS_NO_MEMORY,
  FBX_STATUS_NOT_IMPLEMENTED, /* a configuration we decline; the eager path or ORT takes it */
} fbx_status_code;

typedef struct fbx_status fbx_status;

/* Returns a new status; never NULL (falls back to a static out-of-memory status). */
fbx_status *fbx_status_new(fbx_status_code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
fbx_status_code fbx_status_code_of(const fbx_status *s);
const char *fbx_status_message(const fbx_status *s);
/* Frees s (NULL is fine). */
void fbx_status_free(fbx_status *s);

#define FBX_ERR(...) fbx_status_new(FBX_STATUS_FAIL, __VA_ARGS__)
#define FBX_ERR_ARG(...) fbx_status_new(FBX_STATUS_INVALID_ARG, __VA_ARGS__)
#define FBX_ERR_OOM() fbx_status_new(FBX_STATUS_NO_MEMORY, "out of memory at %s:%d", __FILE__, __LINE__)
#define FBX_ERR_NOTIMPL(...) fbx_status_new(FBX_STATUS_NOT_IMPLEMENTED, __VA_ARGS__)

/* Return early when a call fails. */
#define FBX_TRY(expr)                   \
  do {                                  \
    fbx_status *fbx__st = (expr);       \
    if (fbx__st) return fbx__st;        \
  } while (0)

/* Our own invariants (never the caller's input: that is an fbx_status). An
 * expression with the condition's truth value (1 or 0): a debug build prints
 * and traps when it is false; a release build returns 0 and the caller's branch
 * keeps the library safe, e.g.
 *     if (!FBX_ASSERT(group_is_convex(...))) release the group;              */
void fbx__assert_fail(const char *cond, const char *file, int line);
#ifdef NDEBUG
#define FBX_ASSERT(cond) ((cond) ? 1 : 0)
#else
#define FBX_ASSERT(cond) ((cond) ? 1 : (fbx__assert_fail(#cond, __FILE__, __LINE__), 0))
#endif

#endif
