#include "common/cuda_fork.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/backend_cuda.h"

void fbx_test_cuda_library(char *lib, size_t size) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  snprintf(lib, size, "%s/../libfusebox_cuda.so", slash ? exe : ".");
}

int fbx_test_cuda_probe(const char *test, const char *lib) {
  int pfd[2];
  if (pipe(pfd)) return FBX_TEST_CUDA_FAIL;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(pfd[0]);
    fbx_backend *be = NULL;
    fbx_cuda_options co = {.device_id = 0, .library = lib};
    fbx_status *st = fbx_cuda_backend_open(&co, &be);
    char msg[1024];
    int code = st ? (fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED ? FBX_TEST_CUDA_SKIP : FBX_TEST_CUDA_FAIL)
                  : FBX_TEST_CUDA_RUN;
    snprintf(msg, sizeof msg, "%s", st ? fbx_status_message(st) : "");
    if (write(pfd[1], msg, strlen(msg)) < 0) code = FBX_TEST_CUDA_FAIL;
    fbx_status_free(st);
    fbx_backend_destroy(be);
    _exit(code);
  }
  close(pfd[1]);
  char msg[1024] = "";
  ssize_t got = pid > 0 ? read(pfd[0], msg, sizeof msg - 1) : 0;
  msg[got > 0 ? got : 0] = 0;
  close(pfd[0]);
  int ws = 0;
  if (pid < 0 || waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws)) {
    printf("%s: FAIL: probing the device crashed\n", test);
    return FBX_TEST_CUDA_FAIL;
  }
  int code = WEXITSTATUS(ws);
  if (code == FBX_TEST_CUDA_SKIP) printf("%s: SKIP: %s\n", test, msg);
  else if (code != FBX_TEST_CUDA_RUN) printf("%s: FAIL: %s\n", test, msg);
  return code == FBX_TEST_CUDA_SKIP ? FBX_TEST_CUDA_SKIP : code ? FBX_TEST_CUDA_FAIL : FBX_TEST_CUDA_RUN;
}

int fbx_test_fork_section(const char *test, const char *name, int (*child)(void *ctx), void *ctx) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int code = child(ctx);
    fflush(stdout);
    fflush(stderr);
    _exit(code);
  }
  int ws = 0;
  if (pid < 0 || waitpid(pid, &ws, 0) != pid) return 2;
  bool ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
  printf("%s: section %-10s %s\n", test, name, ok ? "ok" : "FAILED");
  return ok ? 0 : WIFEXITED(ws) ? 1 : 2;
}
