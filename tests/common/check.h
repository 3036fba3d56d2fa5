/* The CHECK macro shared by the unit test programs: counts passes and failures and
 * prints file:line plus a printf-style message for each failure. Each test program
 * is one translation unit, so the counters are plain statics. */
#ifndef FBX_TESTS_CHECK_H
#define FBX_TESTS_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (cond) {                                            \
      passed++;                                            \
    } else {                                               \
      failed++;                                            \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fputc('\n', stderr);                                 \
    }                                                      \
  } while (0)

/* x returns an fbx_status: a failure is a failed check with its message, and
 * the (void) test function returns. */
#define CHECK_TRY(x)                                                  \
  do {                                                               \
    fbx_status *s_ = (x);                                            \
    CHECK(!s_, "%s: %s", #x, s_ ? fbx_status_message(s_) : "");      \
    if (s_) {                                                        \
      fbx_status_free(s_);                                           \
      return;                                                        \
    }                                                                \
  } while (0)

#endif
