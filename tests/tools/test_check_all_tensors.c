// test_check_all_tensors — `fusebox check --all-tensors` names the planted divergent node.
//
// The model (written here): x(16x32) -> Relu "relu0" -> MatMul "mm1" (by the input w, 32x24)
// -> Add "add2" (bias) -> Tanh "tanh3" -> Mul "mul4" (by 2) -> y. (w is an input, not a
// constant: a constant B takes Fusebox's own packed kernel, two activations take OpenBLAS.) The divergence is planted with no hook in
// the product: a stand-in libopenblas.so.0 (tests/tools/perturb_openblas.c), first on the
// LD_LIBRARY_PATH of the `fusebox` process, moves every result of cblas_sgemm by 1% + 0.01. Fusebox's CPU
// backend runs float MatMul through cblas_sgemm; ORT's CPU EP never calls it (MLAS). So the
// first divergent node in graph order must be mm1, with relu0 (its input) still agreeing, and
// add2/tanh3/mul4 diverging after it. The same model without the plant must report none.
// A third run checks the plant was reached (the library logs its calls), so a future Fusebox
// that stops calling cblas_sgemm for this MatMul fails here with that reason, not as a miss.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/check.h"
#include "common/ort_host.h"
#include "fuzz/fz_model.h"

// The directory of this executable's build tree (build/tests/.. = build).
static int build_dir(char *out, size_t cap) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return -1;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return -1;
  *slash = 0;  // .../build/tests
  slash = strrchr(exe, '/');
  if (!slash) return -1;
  *slash = 0;  // .../build
  snprintf(out, cap, "%s", exe);
  return 0;
}

static int write_model(const char *path) {
  enum { M = 16, K = 32, N = 24 };
  static float bias[N], two = 2.f;
  for (int i = 0; i < N; i++) bias[i] = 0.01f * (float)i;
  fzm b;
  fzm_begin(&b);
  fzm_input(&b, "x", FBX_HOST_F32, 2, (const int64_t[]){M, K});
  fzm_input(&b, "w", FBX_HOST_F32, 2, (const int64_t[]){K, N});
  fzm_init(&b, "bias", FBX_HOST_F32, 1, (const int64_t[]){N}, bias, sizeof bias);
  fzm_init(&b, "two", FBX_HOST_F32, 0, NULL, &two, sizeof two);
  fzm_node(&b, "Relu", "relu0", (const char *[]){"x"}, 1, (const char *[]){"r"}, 1, NULL, 0);
  fzm_node(&b, "MatMul", "mm1", (const char *[]){"r", "w"}, 2, (const char *[]){"m"}, 1, NULL, 0);
  fzm_node(&b, "Add", "add2", (const char *[]){"m", "bias"}, 2, (const char *[]){"a"}, 1, NULL, 0);
  fzm_node(&b, "Tanh", "tanh3", (const char *[]){"a"}, 1, (const char *[]){"t"}, 1, NULL, 0);
  fzm_node(&b, "Mul", "mul4", (const char *[]){"t", "two"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  fzm_output(&b, "y", FBX_HOST_F32);
  unsigned char *p;
  size_t n;
  fzm_end(&b, 17, &p, &n);
  FILE *f = p ? fopen(path, "wb") : NULL;
  int ok = f && fwrite(p, 1, n, f) == n;
  if (f) ok &= fclose(f) == 0;
  free(p);
  return ok ? 0 : -1;
}

// Run `env ENV fusebox check --all-tensors MODEL`; stdout+stderr into out (heap). Exit code.
static int run_tool(const char *fusebox, const char *env, const char *model, char **out) {
  char cmd[16384];
  snprintf(cmd, sizeof cmd, "env %s '%s' check --all-tensors '%s' --threads 1 2>&1", env, fusebox, model);
  FILE *p = popen(cmd, "r");
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  if (!p || !buf) {
    if (p) pclose(p);
    free(buf);
    *out = NULL;
    return -1;
  }
  size_t got;
  while ((got = fread(buf + len, 1, cap - 1 - len, p)) > 0) {
    len += got;
    if (len + 1 == cap) {
      char *q = realloc(buf, cap * 2);
      if (!q) break;
      buf = q;
      cap *= 2;
    }
  }
  buf[len] = 0;
  int st = pclose(p);
  *out = buf;
  printf("---- %s\n%s", env, buf);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void) {
  char build[4096], fusebox[4200], shim[4200], dir[] = "/tmp/fbx_all_tensors_XXXXXX";
  CHECK(build_dir(build, sizeof build) == 0, "cannot find the build directory");
  snprintf(fusebox, sizeof fusebox, "%s/fusebox", build);
  snprintf(shim, sizeof shim, "%s/tests/perturb_blas/libopenblas.so.0", build);
  CHECK(access(fusebox, X_OK) == 0, "%s not built", fusebox);
  CHECK(access(shim, R_OK) == 0, "%s not built", shim);
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char model[4200], mark[4200], env[16384];
  snprintf(model, sizeof model, "%s/planted.onnx", dir);
  snprintf(mark, sizeof mark, "%s/sgemm_calls.txt", dir);
  CHECK(write_model(model) == 0, "cannot write %s", model);
  if (failed) return 1;

  char libdir[4200];
  snprintf(libdir, sizeof libdir, "%s/tests/perturb_blas", build);
  const char *ldp = getenv("LD_LIBRARY_PATH");

  // 1. clean: no divergent node, exit 0
  char *out = NULL;
  snprintf(env, sizeof env, "LD_LIBRARY_PATH='%s%s%s'", libdir, ldp && *ldp ? ":" : "", ldp ? ldp : "");
  int rc = run_tool(fusebox, env, model, &out);
  CHECK(rc == 0, "clean model: exit %d, want 0", rc);
  CHECK(out && strstr(out, "no divergent node: all 5 values within tolerance"), "clean model: no 'no divergent node' line");
  free(out);

  // 2. planted: mm1 is the first divergent node; its input r agrees exactly (same Relu on the
  //    same data), the nodes after it diverge too.
  snprintf(env, sizeof env, "LD_LIBRARY_PATH='%s%s%s' FBX_TEST_SGEMM_PERTURB=1 FBX_TEST_SGEMM_MARK='%s'", libdir,
           ldp && *ldp ? ":" : "", ldp ? ldp : "", mark);
  rc = run_tool(fusebox, env, model, &out);
  FILE *mf = fopen(mark, "r");
  CHECK(mf != NULL, "the plant was not reached: Fusebox did not call cblas_sgemm for MatMul mm1 "
                    "(pick another GEMM-backed node for this test)");
  if (mf) fclose(mf);
  CHECK(rc == 1, "planted model: exit %d, want 1", rc);
  CHECK(out && strstr(out, "first divergent node: mm1 (MatMul), node 2 of 5"), "planted model: mm1 not named first");
  CHECK(out && strstr(out, "ran on:  FuseboxExecutionProvider"), "planted model: EP not reported");
  CHECK(out && strstr(out, "input  r float32[16x32]: max_abs 0 max_rel 0"), "planted model: input r errors not shown as 0");
  CHECK(out && strstr(out, "input  w: graph input (same data)"), "planted model: graph input not named");
  CHECK(out && strstr(out, "output m float32[16x24]"), "planted model: output m not shown");
  CHECK(out && !strstr(out, "kernel:  (not in the trace"), "planted model: no kernel variant from the trace");
  CHECK(out && strstr(out, "4 node(s) diverge in all; the next ones: add2 (Add) tanh3 (Tanh) mul4 (Mul)"),
        "planted model: the downstream nodes are not listed");
  free(out);

  unlink(mark);
  unlink(model);
  rmdir(dir);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
