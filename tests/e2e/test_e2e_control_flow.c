// test_e2e_control_flow: recurrent cells inside a Loop body (weights from the outer scope) and a
// Scan body (weights of its own), models/gen_control_flow.py, through ORT with Fusebox and on
// ORT's CPU EP alone. Checks:
//   - placement (ORT's own record): on a host-visible device the Loop / Scan node is claimed whole
//     with its body (tests/e2e/test_e2e_loop_scan.c has the full cases), so every node runs on
//     Fusebox; on the opaque test backend every node of the body runs on Fusebox (ORT calls
//     GetCapability for the body) and only the Loop / Scan node itself stays on ORT;
//   - the outputs h_last and ys equal the generator's float64 recurrence (written from the
//     formulas, not from the graph) within 2e-5, and equal ORT's CPU EP within 1e-5;
//   - other trip counts / sequence lengths against ORT's CPU EP (Loop 0, 1, 5 — 0 never runs the
//     body and gives an empty ys; Scan 1, 5): the compiled body is reused across iterations and runs.
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/ort_host.h"

static bool host_visible_backend(void) {
  const char *tb = getenv("FUSEBOX_TEST_BACKEND");
  return !tb || !tb[0] || strcmp(tb, "cpu") == 0;
}

/* On a host-visible device: the control-flow node `cf_op` claimed whole, so it runs on Fusebox
 * and no node is left to ORT. Elsewhere (the opaque test backend): every node but `cf_op` on
 * Fusebox (the body, asked per subgraph), at least min_on of them. */
static void check_placement(fbx_host_session *sf, const char *cf_op, size_t min_on) {
  fbx_host_assign *as = NULL;
  size_t na = 0, on = 0, off_other = 0, keep = 0, keep_on = 0;
  char *e = fbx_host_session_assignment(sf, &as, &na);
  CHECK(!e, "assignment: %s", e ? e : "");
  fbx_host_err_free(e);
  for (size_t i = 0; i < na; i++) {
    bool fb = !strcmp(as[i].ep, FBX_HOST_EP_NAME);
    on += fb;
    if (!strcmp(as[i].op_type, cf_op)) keep++, keep_on += fb;
    else if (!fb) {
      off_other++;
      fprintf(stderr, "  not on Fusebox: %s (%s) on %s\n", as[i].node, as[i].op_type, as[i].ep);
    }
  }
  CHECK(keep == 1, "%s nodes: %zu (want 1)", cf_op, keep);
  if (host_visible_backend()) {
    CHECK(keep_on == 1, "the %s is not on Fusebox (want it claimed whole with its body)", cf_op);
    CHECK(off_other == 0, "%zu nodes left to ORT", off_other);
    printf("  placement: %zu/%zu nodes on Fusebox (the %s claimed whole)\n", on, na, cf_op);
  } else {
    CHECK(keep_on == 0, "the %s is on Fusebox on a device that is not host-visible", cf_op);
    CHECK(off_other == 0, "%zu body nodes left to ORT", off_other);
    CHECK(on >= min_on, "%zu nodes on Fusebox (want >= %zu: the whole body)", on, min_on);
    printf("  placement: %zu/%zu nodes on Fusebox (only the %s on ORT)\n", on, na, cf_op);
  }
  fbx_host_assign_free(as, na);
}

/* Runs both sessions on in[0..n) and compares every output; ref (may be NULL) holds the float64
 * reference of outputs h_last, ys in that order. */
static void run_compare(fbx_host_session *s[2], const fbx_host_tensor *in, size_t n, const fbx_host_tensor *ref,
                        const char *what) {
  fbx_host_tensor *o[2] = {NULL, NULL};
  size_t no[2] = {0, 0};
  char *e = NULL;
  for (int k = 0; k < 2 && !e; k++) e = fbx_host_session_run(s[k], in, n, &o[k], &no[k]);
  CHECK(!e, "%s: %s", what, e ? e : "");
  fbx_host_err_free(e);
  if (!e) {
    static const char *const names[2] = {"h_last", "ys"};
    for (int i = 0; i < 2; i++) {
      long j = fbx_host_session_output_find(s[0], names[i]);
      CHECK(j >= 0, "%s: output %s missing", what, names[i]);
      if (j < 0) continue;
      fbx_host_cmp r;
      fbx_host_compare(&o[0][j], &o[1][j], 0, 1e-5, &r);
      CHECK(!r.shape_mismatch && r.max_abs <= 1e-5, "%s: %s Fusebox vs ORT CPU: max |diff| %.3g%s", what, names[i],
            r.max_abs, r.shape_mismatch ? " (shapes differ)" : "");
      if (ref) {
        fbx_host_compare(&o[0][j], &ref[i], 2e-5, 2e-5, &r);
        CHECK(!r.shape_mismatch && r.n_bad == 0, "%s: %s Fusebox vs float64 reference: max |diff| %.3g%s", what,
              names[i], r.max_abs, r.shape_mismatch ? " (shapes differ)" : "");
      }
    }
    long y = fbx_host_session_output_find(s[0], "ys");
    if (y >= 0) printf("  %s: ys %lld rows, matches%s\n", what, (long long)o[0][y].dims[0], ref ? " (+ reference)" : "");
  }
  for (int k = 0; k < 2; k++) fbx_host_tensors_free(o[k], no[k]);
}

static char *read_case(const char *dir, const char *file, fbx_host_tensor *t, const char *name) {
  char rel[512], path[1024];
  snprintf(rel, sizeof rel, "%s/%s", dir, file);
  if (fbx_host_find_repo_file(rel, path, sizeof path)) return fbx_host_errf("%s not found (run scripts/make_models.sh)", rel);
  char *e = fbx_host_npy_read(path, t);
  return e ? e : fbx_host_tensor_set_name(t, name);
}

/* kind "loop": inputs h0, steps; "scan": h0, xs. */
static void run_model(fbx_host *h, const char *kind) {
  char rel[256], model[1024], cases[256];
  snprintf(rel, sizeof rel, "models/gen/%s_cell.onnx", kind);
  snprintf(cases, sizeof cases, "models/gen/cases/%s_cell", kind);
  const bool loop = !strcmp(kind, "loop");
  printf("  %s\n", rel);
  fbx_host_session *s[2] = {NULL, NULL};
  fbx_host_tensor in[2], ref[2], alt;
  memset(in, 0, sizeof in), memset(ref, 0, sizeof ref), memset(&alt, 0, sizeof alt);
  char *e = NULL;
  if (fbx_host_find_repo_file(rel, model, sizeof model)) e = fbx_host_errf("%s not found (run scripts/make_models.sh)", rel);
  if (!e) e = fbx_host_session_create_threads(h, model, 1, 2, 1, &s[0]);
  if (!e) e = fbx_host_session_create_threads(h, model, 0, 2, 0, &s[1]);
  if (!e) e = read_case(cases, "h0.npy", &in[0], "h0");
  if (!e) e = read_case(cases, loop ? "steps.npy" : "xs.npy", &in[1], loop ? "steps" : "xs");
  if (!e) e = read_case(cases, "h_last.npy", &ref[0], "h_last");
  if (!e) e = read_case(cases, "ys.npy", &ref[1], "ys");
  CHECK(!e, "%s: %s", kind, e ? e : "");
  if (e) goto out;
  check_placement(s[0], loop ? "Loop" : "Scan", loop ? 10 : 6);
  run_compare(s, in, 2, ref, loop ? "loop, generator's trip count" : "scan, generator's sequence");
  /* Scan over T = 0 fails inside ORT's own Scan kernel (its tensor slicer rejects an empty dim 0),
   * with or without Fusebox: it starts at 1 there */
  static const int64_t lengths[] = {0, 1, 5};
  for (size_t i = loop ? 0 : 1; i < sizeof lengths / sizeof lengths[0] && !e; i++) {
    char what[64];
    if (loop) {
      e = fbx_host_tensor_alloc(&alt, "steps", FBX_HOST_I64, 0, NULL);
      if (!e) fbx_host_tensor_set(&alt, 0, (double)lengths[i]);
      snprintf(what, sizeof what, "loop, %lld steps", (long long)lengths[i]);
    } else {
      int64_t d[3] = {lengths[i], 1, in[0].dims[1]};
      e = fbx_host_tensor_alloc(&alt, "xs", FBX_HOST_F32, 3, d);
      if (!e) fbx_host_tensor_fill_uniform(&alt, 7 + (uint64_t)i, -1, 1);
      snprintf(what, sizeof what, "scan, T = %lld", (long long)lengths[i]);
    }
    if (!e) {
      fbx_host_tensor two[2] = {in[0], alt};
      run_compare(s, two, 2, NULL, what);
    }
    fbx_host_tensor_free(&alt);
  }
  CHECK(!e, "%s: %s", kind, e ? e : "");
out:
  fbx_host_err_free(e);
  for (int k = 0; k < 2; k++) {
    fbx_host_tensor_free(&in[k]);
    fbx_host_tensor_free(&ref[k]);
    fbx_host_session_destroy(s[k]);
  }
}

int main(void) {
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "cannot open ORT: %s\n", e);
    return 1;
  }
  run_model(h, "loop");
  run_model(h, "scan");
  fbx_host_close(h);
  printf("e2e_control_flow: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
