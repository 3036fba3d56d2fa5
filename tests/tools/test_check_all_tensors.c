// test_check_all_tensors — `fusebox check --all-tensors` names the first divergent node.
//
// The model (written here): x(16x32) -> Relu "relu0" -> ReduceMax "rmax1" (axis 1, keepdims)
// -> Add "add2" (bias) -> Tanh "tanh3" -> Mul "mul4" (by 2) -> y. The divergence is real and
// needs no hook in the product: x holds a NaN in some rows; Relu keeps it in both engines
// (IEEE, and ORT agrees), but ReduceMax over a row with a NaN is NaN in Fusebox (numpy's
// semantics, README "Numerics") while ORT's CPU EP skips the NaN and returns the row's largest
// number. So the first divergent node in graph order must be rmax1, with relu0 (its input)
// still agreeing, and add2/tanh3/mul4 diverging after it. The same model fed with finite data
// must report none. (If either engine ever changes its NaN rule for ReduceMax, the planted run
// fails with "rmax1 not named first": pick another known divergence then.)
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
  enum { M = 16, K = 32 };
  static float bias[1] = {0.25f}, two = 2.f;
  static const int64_t axes[1] = {1};
  const fzm_attr red[2] = {{.name = "axes", .type = FZM_ATTR_INTS, .ints = axes, .n = 1},
                           {.name = "keepdims", .type = FZM_ATTR_INT, .i = 1}};
  fzm b;
  fzm_begin(&b);
  fzm_input(&b, "x", FBX_HOST_F32, 2, (const int64_t[]){M, K});
  fzm_init(&b, "bias", FBX_HOST_F32, 1, (const int64_t[]){1}, bias, sizeof bias);
  fzm_init(&b, "two", FBX_HOST_F32, 0, NULL, &two, sizeof two);
  fzm_node(&b, "Relu", "relu0", (const char *[]){"x"}, 1, (const char *[]){"r"}, 1, NULL, 0);
  fzm_node(&b, "ReduceMax", "rmax1", (const char *[]){"r"}, 1, (const char *[]){"m"}, 1, red, 2);
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

// x as a .npy (format 1.0, little-endian float32, C order); rows with nan_rows set get a NaN.
static int write_x(const char *path, int nan_rows) {
  enum { M = 16, K = 32 };
  static float x[M * K];
  for (int i = 0; i < M * K; i++) x[i] = (float)((i * 37) % 101) / 50.f - 1.f;
  if (nan_rows)
    for (int m = 0; m < M; m += 3) x[m * K + (m % K)] = __builtin_nanf("");
  char hdr[128];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", M, K);
  while ((10 + n + 1) % 64) hdr[n++] = ' ';
  hdr[n++] = '\n';
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 255), (unsigned char)(n >> 8)};
  int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)n, f) == (size_t)n &&
           fwrite(x, sizeof x[0], M * K, f) == M * K;
  ok &= fclose(f) == 0;
  return ok ? 0 : -1;
}

// Run `env ENV fusebox check --all-tensors MODEL`; stdout+stderr into out (heap). Exit code.
static int run_tool(const char *fusebox, const char *x, const char *model, char **out) {
  char cmd[16384];
  snprintf(cmd, sizeof cmd, "'%s' check --all-tensors '%s' --input 'x=%s' --threads 1 2>&1", fusebox, model, x);
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
  printf("---- x=%s\n%s", x, buf);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void) {
  char build[4096], fusebox[4200], dir[] = "/tmp/fbx_all_tensors_XXXXXX";
  CHECK(build_dir(build, sizeof build) == 0, "cannot find the build directory");
  snprintf(fusebox, sizeof fusebox, "%s/fusebox", build);
  CHECK(access(fusebox, X_OK) == 0, "%s not built", fusebox);
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char model[4200], clean[4200], nan[4200];
  snprintf(model, sizeof model, "%s/planted.onnx", dir);
  snprintf(clean, sizeof clean, "%s/x_clean.npy", dir);
  snprintf(nan, sizeof nan, "%s/x_nan.npy", dir);
  CHECK(write_model(model) == 0, "cannot write %s", model);
  CHECK(write_x(clean, 0) == 0 && write_x(nan, 1) == 0, "cannot write the inputs");
  if (failed) return 1;

  // 1. clean: no divergent node, exit 0
  char *out = NULL;
  int rc = run_tool(fusebox, clean, model, &out);
  CHECK(rc == 0, "clean input: exit %d, want 0", rc);
  CHECK(out && strstr(out, "no divergent node: all 5 values within tolerance"), "clean input: no 'no divergent node' line");
  free(out);

  // 2. NaN rows: rmax1 is the first divergent node; its input r agrees (NaN == NaN), the
  //    nodes after it diverge too.
  rc = run_tool(fusebox, nan, model, &out);
  CHECK(rc == 1, "NaN input: exit %d, want 1", rc);
  CHECK(out && strstr(out, "first divergent node: rmax1 (ReduceMax), node 2 of 5"), "NaN input: rmax1 not named first");
  CHECK(out && strstr(out, "ran on:  FuseboxExecutionProvider"), "NaN input: EP not reported");
  CHECK(out && strstr(out, "input  r float32[16x32]: max_abs 0 max_rel 0"), "NaN input: input r errors not shown as 0");
  CHECK(out && strstr(out, "output m float32[16x1]"), "NaN input: output m not shown");
  CHECK(out && !strstr(out, "kernel:  (not in the trace"), "NaN input: no kernel variant from the trace");
  CHECK(out && strstr(out, "4 node(s) diverge in all; the next ones: add2 (Add) tanh3 (Tanh) mul4 (Mul)"),
        "NaN input: the downstream nodes are not listed");
  free(out);

  unlink(clean);
  unlink(nan);
  unlink(model);
  rmdir(dir);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
