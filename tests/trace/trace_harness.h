/* Shared harness of the src/trace test programs: every case runs in a child process (the
 * program re-executed as `child <case>` with its own environment, since the environment is
 * read once per process); the parent checks the files it wrote. One TU per program, so the
 * state and helpers here are statics. */
#ifndef FBX_TESTS_TRACE_HARNESS_H
#define FBX_TESTS_TRACE_HARNESS_H

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trace/trace.h"
#include "trace/trace_profiler.h"

static const char *g_self;
static char g_dir[256];
static int g_pass = 0, g_fail = 0;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "  check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);     \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

__attribute__((unused)) static void span(const char *name, const char *cat, uint64_t t0, uint64_t t1) {
  fbx_trace_complete(name, cat, t0, t1, NULL, 0);
}

__attribute__((unused)) static int load_ok(const char *path, json_t **out) {
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  if (!j) fprintf(stderr, "  json error: %s line %d: %s\n", path, err.line, err.text);
  *out = j;
  return j != NULL;
}

__attribute__((unused)) static int count_named(json_t *root, const char *name) {
  json_t *ev = json_object_get(root, "traceEvents");
  size_t i;
  json_t *e;
  int n = 0;
  json_array_foreach(ev, i, e) {
    const char *nm = json_string_value(json_object_get(e, "name"));
    if (nm && !strcmp(nm, name)) n++;
  }
  return n;
}


__attribute__((unused)) static char *path_of(const char *name) {
  static char buf[8][512];
  static int k = 0;
  char *p = buf[k++ % 8];
  snprintf(p, 512, "%s/%s", g_dir, name);
  return p;
}

/* Runs `self child <name>` with env "K=V" strings (NULL-terminated) added to
 * a clean FUSEBOX_*-free environment; stderr to errfile. Returns exit code. */
__attribute__((unused)) static int run_child(const char *name, const char *const *env, const char *errfile) {
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("FUSEBOX_TRACE");
    unsetenv("FUSEBOX_VERBOSE");
    unsetenv("FUSEBOX_CLAIM_DEBUG");
    unsetenv("FUSEBOX_NVTX");
    unsetenv("FUSEBOX_TRACE_MAX_EVENTS");
    unsetenv("FUSEBOX_GPU_CAPTURE");
    unsetenv("FUSEBOX_GPU_CAPTURE_EVAL");
    for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
    if (errfile && !freopen(errfile, "w", stderr)) _exit(99);
    execl(g_self, g_self, "child", name, (char *)NULL);
    _exit(98);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

__attribute__((unused)) static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)n + 1);
  if (fread(p, 1, (size_t)n, f) != (size_t)n) n = 0;
  p[n] = '\0';
  fclose(f);
  return p;
}

static char g_envbuf[16][600];
__attribute__((unused)) static const char *envv(int k, const char *fmt, const char *v) {
  snprintf(g_envbuf[k], sizeof g_envbuf[k], fmt, v);
  return g_envbuf[k];
}

static json_t *events(json_t *root) { return json_object_get(root, "traceEvents"); }

__attribute__((unused)) static json_t *find_event(json_t *root, const char *name, int nth) {
  size_t i;
  json_t *e;
  json_array_foreach(events(root), i, e) {
    const char *nm = json_string_value(json_object_get(e, "name"));
    if (nm && !strcmp(nm, name) && nth-- == 0) return e;
  }
  return NULL;
}

__attribute__((unused)) static int64_t arg_int(json_t *e, const char *k) {
  return json_integer_value(json_object_get(json_object_get(e, "args"), k));
}


typedef struct tcase {
  const char *name;
  int (*parent)(void);
  const char *child_name;
  int (*child)(void);
} tcase;

/* Runs `child <name>` when asked to, else every case (or those matching argv[1]); prints
 * "<suite>: N passed, N failed". */
static int trace_harness_main(int argc, char **argv, const tcase *cases, size_t n_cases, const char *suite) {
  g_self = "/proc/self/exe";
  static char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    g_self = self;
  }
  if (argc == 3 && !strcmp(argv[1], "child")) {
    for (size_t i = 0; i < n_cases; i++)
      if (cases[i].child_name && !strcmp(cases[i].child_name, argv[2])) return cases[i].child();
    return 97;
  }
  snprintf(g_dir, sizeof g_dir, "/tmp/fbx_trace_test_%d", (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", g_dir);
  if (system(cmd) != 0) return 2;
  const char *only = argc > 1 ? argv[1] : NULL;
  for (size_t i = 0; i < n_cases; i++) {
    if (only && !strstr(cases[i].name, only)) continue;
    int r = cases[i].parent();
    printf("%s %s\n", r ? "FAIL" : "ok  ", cases[i].name);
    if (r) g_fail++;
    else g_pass++;
  }
  if (!g_fail) {
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) { /* leave it */ }
  } else {
    printf("(files kept in %s)\n", g_dir);
  }
  printf("%s: %d passed, %d failed\n", suite, g_pass, g_fail);
  return g_fail ? 1 : 0;
}

#endif
