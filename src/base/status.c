#include "status.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct fbx_status {
  fbx_status_code code;
  int is_static;
  char msg[];
};

/* Returned when even the status cannot be allocated; never freed. */
static struct {
  fbx_status s;
  char text[32];
} fbx__oom_status = {{FBX_STATUS_NO_MEMORY, 1}, "out of memory"};

fbx_status *fbx_status_new(fbx_status_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  /* plain malloc on purpose: failure injection must not hide the error it reports */
  fbx_status *s = malloc(sizeof(*s) + (size_t)n + 1);
  if (!s) return &fbx__oom_status.s;
  s->code = code;
  s->is_static = 0;
  va_start(ap, fmt);
  vsnprintf(s->msg, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

fbx_status_code fbx_status_code_of(const fbx_status *s) { return s ? s->code : 0; }
const char *fbx_status_message(const fbx_status *s) { return s ? s->msg : "ok"; }

void fbx_status_free(fbx_status *s) {
  if (s && !s->is_static) free(s);
}

void fbx__assert_fail(const char *cond, const char *file, int line) {
  fprintf(stderr, "fusebox: assertion failed: %s (%s:%d)\n", cond, file, line);
  __builtin_trap();
}
