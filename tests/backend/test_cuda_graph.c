/* CUDA graphs through the executor, on the GPU (skips without one, saying
 * why). The graph of common/graph_kv.h runs on the CUDA backend (with the
 * CPU backend for host steps) and on the CPU backend as the reference
 * (within 1e-5: different kernels):
 *
 *  - a static-shape plan: exactly one capture, then every run a replay with
 *    0 allocations and 1 host synchronisation, and new input values seen;
 *  - a 64-step decode with a growing past: right at every step, 1 host
 *    synchronisation per step; the steps that do not read the past form one
 *    graph segment (exec_run.c), captured once and replayed in every step
 *    after the fifth; graph counts and the last allocating step printed;
 *  - a decode at a fixed past: no new capture, a replay every run with 0
 *    allocations and 1 host synchronisation. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/backend_cuda.h"
#include "base/alloc.h"
#include "common/check.h"
#include "common/graph_kv.h"
#include "exec/exec_compiled.h"
#include "common/exec_outs.h"

enum { D = FBX_TEST_KV_D, MAXL = 80 };
static float W[D * D], X[MAXL * D], PAST[MAXL * D];


static void fill(int k) {
  for (int i = 0; i < MAXL * D; i++) {
    X[i] = (float)(((i + 3 * k) * 5) % 13 - 6) * 0.1f;
    PAST[i] = (float)(((i + 7 * k) * 3) % 17 - 8) * 0.1f;
  }
}

typedef struct pair {
  fbx_exec_compiled *c, *ref;
  outs o, ro;
  int64_t captures, replays;
} pair;

static bool run_pair(pair *pp, int64_t S, int64_t P, fbx_exec_run_report *r, fbx_status **st) {
  fbx_tensor in[2] = {T3(1, S, D, X), T3(1, P, D, PAST)};
  fbx_exec_run_report rr;
  *st = fbx_exec_compiled_run(pp->c, in, 2, out_fn, &pp->o, r);
  if (!*st) *st = fbx_exec_compiled_run(pp->ref, in, 2, out_fn, &pp->ro, &rr);
  if (*st) return false;
  pp->captures += r->graph_captures;
  pp->replays += r->graph_replays;
  int64_t n[3] = {S * D, (P + S) * D, (P + S) * D};
  for (int i = 0; i < 3; i++)
    for (int64_t e = 0; e < n[i]; e++)
      if (!(fabsf(pp->o.buf[i][e] - pp->ro.buf[i][e]) <= 1e-5f)) return false;
  return true;
}

static void pair_free(pair *pp) {
  fbx_exec_compiled_destroy(pp->c);
  fbx_exec_compiled_destroy(pp->ref);
  for (int i = 0; i < 3; i++) fbx_free(pp->o.buf[i]), fbx_free(pp->ro.buf[i]);
}

static bool pair_make(pair *pp, bool decoder, fbx_backend *cuda, fbx_backend *cpu) {
  memset(pp, 0, sizeof *pp);
  fbx_exec_compile_options go = {.compile = true, .cache_limit = 4, .host = cpu}, co = {.compile = true, .cache_limit = 4};
  fbx_status *st = fbx_exec_compiled_create(fbx_test_graph_kv(decoder, 4, 5, W), cuda, &go, "kv_cuda", &pp->c);
  if (!st) st = fbx_exec_compiled_create(fbx_test_graph_kv(decoder, 4, 5, W), cpu, &co, "kv_cpu", &pp->ref);
  CHECK(!st, "create: %s", st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  return !st;
}

static void test_static(fbx_backend *cuda, fbx_backend *cpu) {
  pair pp;
  if (!pair_make(&pp, false, cuda, cpu)) return;
  fbx_status *st = NULL;
  int bad = 0, first_capture = -1;
  for (int k = 0; k < 10 && !st; k++) {
    fill(k);
    fbx_exec_run_report r;
    if (!run_pair(&pp, 4, 5, &r, &st)) bad++;
    if (r.graph_captures && first_capture < 0) first_capture = k;
    if (first_capture >= 0 && k > first_capture && (!r.graph_replays || r.allocs || r.host_syncs != 1)) bad++;
  }
  CHECK(!st && !bad, "cuda static: %d runs wrong or not replayed with 0 allocs / 1 sync (%s)", bad,
        st ? fbx_status_message(st) : "");
  CHECK(pp.captures == 1 && first_capture >= 0 && first_capture <= 3 && pp.replays == 9 - first_capture,
        "cuda static: %lld captures (first at run %d) / %lld replays", (long long)pp.captures, first_capture,
        (long long)pp.replays);
  printf("     cuda static plan: 1 capture at run %d, %lld replays in 10 runs\n", first_capture, (long long)pp.replays);
  fbx_status_free(st);
  pair_free(&pp);
}

static void test_decode(fbx_backend *cuda, fbx_backend *cpu) {
  pair pp;
  if (!pair_make(&pp, true, cuda, cpu)) return;
  fbx_status *st = NULL;
  fbx_exec_run_report r;
  int bad = 0, bad_sync = 0, last_alloc = -1;
  for (int k = 0; k < 64 && !st; k++) { /* past 8 .. 71 */
    fill(k);
    if (!run_pair(&pp, 1, 8 + k, &r, &st) || r.path != FBX_EXEC_PATH_DECODE) bad++;
    if (r.host_syncs != 1) bad_sync++;
    if (r.allocs) last_alloc = k;
  }
  CHECK(!st && !bad && !bad_sync, "cuda 64-step decode: %d wrong, %d with != 1 host sync (%s)", bad, bad_sync,
        st ? fbx_status_message(st) : "");
  CHECK(pp.captures == 1 && pp.replays == 59, "cuda 64-step decode: %lld captures / %lld replays (want 1 / 59)",
        (long long)pp.captures, (long long)pp.replays);
  printf("     cuda 64-step decode, growing past: last allocating step %d; graph %lld capture / %lld replay\n",
         last_alloc, (long long)pp.captures, (long long)pp.replays);
  int64_t c0 = pp.captures, r0 = pp.replays;
  for (int k = 0; k < 8 && !st; k++) { /* a fixed past */
    fill(100 + k);
    if (!run_pair(&pp, 1, 72, &r, &st)) bad++;
    if (k > 3 && (!r.graph_replays || r.allocs || r.host_syncs != 1)) bad++;
  }
  CHECK(!st && !bad && pp.captures - c0 == 0 && pp.replays - r0 == 8,
        "cuda decode at a fixed past: %d bad, %lld captures / %lld replays (%s)", bad, (long long)(pp.captures - c0),
        (long long)(pp.replays - r0), st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  pair_free(&pp);
}

int main(void) {
  for (int i = 0; i < D * D; i++) W[i] = (float)((i * 7) % 11 - 5) * 0.05f;
  fbx_backend *cuda = NULL, *cpu = NULL;
  char exe[4096], lib[4200];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1); /* the library sits in build/, we in build/tests/ */
  exe[n > 0 ? n : 0] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  snprintf(lib, sizeof lib, "%s/../libfusebox_cuda.so", slash ? exe : ".");
  fbx_cuda_options go = {.device_id = 0, .library = lib};
  fbx_status *st = fbx_cuda_backend_open(&go, &cuda);
  if (st) {
    bool skip = fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED;
    printf("test_cuda_graph: %s: %s\n", skip ? "SKIP" : "FAIL", fbx_status_message(st));
    fbx_status_free(st);
    return skip ? 0 : 1;
  }
  fbx_cpu_options co = {.threads = 2};
  st = fbx_cpu_backend_create(&co, &cpu);
  CHECK(!st, "cpu backend: %s", st ? fbx_status_message(st) : "");
  if (!st) {
    test_static(cuda, cpu);
    test_decode(cuda, cpu);
  }
  fbx_status_free(st);
  fbx_backend_destroy(cpu);
  fbx_backend_destroy(cuda);
  printf("test_cuda_graph: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
