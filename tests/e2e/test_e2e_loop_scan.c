// test_e2e_loop_scan: Fusebox claims a Loop and a Scan node whole, with their bodies
// (models/gen_loop_scan.py: nodes before and after the control-flow node, bodies reading
// non-constant outer values), through ORT, against ORT's CPU EP in the same process. Checks:
//   - placement from ORT's own record: on a host-visible device every node, the Loop / Scan
//     included, on Fusebox in ONE assigned subgraph and no body node assigned on its own; on the
//     opaque test backend (FUSEBOX_TEST_BACKEND=opaque) the Loop / Scan is declined (the device is
//     not host-visible) and stays with ORT, its body's nodes on Fusebox per subgraph as before;
//   - every output equals the generator's float64 reference (written from the formulas, not the
//     graph; 5e-5) and ORT's CPU EP (1e-5), cases: Loop ended by its trip count (8), by its
//     condition (M = 20, the body's cond stops it after 5), zero trips by M = 0 and by cond = false
//     (outputs = initial values, empty scan outputs of the right shape); Scan with inputs on axes
//     0 / 1 (the second in reverse) and outputs on axes 0 (reversed) / -1, T = 5 and 1;
//   - nested: a Loop inside a Scan body (reading the Scan's slice from its scope), all claimed whole;
//   - misc: three Loops in a row: A (no trip count, its condition ends it) claimed whole; B (a Det
//     in its body) and C (a sequence-typed loop-carried value) declined, left to ORT and right;
//   - each case twice and then all again, so the cached plans are reused.
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

// main-graph nodes of gen_loop_scan.py are named "/..." (body nodes "body/...")
static void check_placement(fbx_host_session *sf, const char *cf_op) {
  fbx_host_assign *as = NULL;
  size_t na = 0;
  char *e = fbx_host_session_assignment(sf, &as, &na);
  CHECK(!e, "assignment: %s", e ? e : "");
  fbx_host_err_free(e);
  int cf_on = 0, main_on = 0, main_total = 0, sg = -1, subgraphs = 0, body_on = 0;
  for (size_t i = 0; i < na; i++) {
    bool fb = !strcmp(as[i].ep, FBX_HOST_EP_NAME);
    bool main_node = as[i].node[0] == '/';
    if (!strcmp(as[i].op_type, cf_op)) cf_on += fb;
    if (main_node) {
      main_total++;
      main_on += fb;
      if (fb && as[i].subgraph != sg) sg = as[i].subgraph, subgraphs++;
    } else {
      body_on += fb;
    }
    if (!fb) fprintf(stderr, "  on ORT: %s (%s) on %s\n", as[i].node, as[i].op_type, as[i].ep);
  }
  if (host_visible_backend()) {
    CHECK(cf_on == 1, "the %s is not on Fusebox", cf_op);
    CHECK(main_total >= 3 && main_on == main_total, "main graph: %d of %d nodes on Fusebox (want all)", main_on,
          main_total);
    CHECK(subgraphs == 1, "main graph in %d Fusebox subgraphs (want 1)", subgraphs);
    CHECK(body_on == 0, "%d body nodes assigned on their own (want 0: they belong to the %s)", body_on, cf_op);
  } else {
    CHECK(cf_on == 0, "the %s is on Fusebox on a device that is not host-visible", cf_op);
    CHECK(body_on > 0, "no body node on Fusebox (want them, per subgraph)");
  }
  printf("  placement: %s %s, main graph %d/%d on Fusebox in %d subgraph(s), %d body nodes on their own\n", cf_op,
         cf_on ? "on Fusebox" : "on ORT", main_on, main_total, subgraphs, body_on);
  fbx_host_assign_free(as, na);
}

/* misc_e2e: Loop A (no trip count) claimed whole on a host-visible device; B (a Det in its body)
 * and C (a sequence-typed carried value) declined and left to ORT, whose results must still be
 * right; on the opaque backend all three stay with ORT. */
static void check_placement_misc(fbx_host_session *sf) {
  fbx_host_assign *as = NULL;
  size_t na = 0;
  char *e = fbx_host_session_assignment(sf, &as, &na);
  CHECK(!e, "assignment: %s", e ? e : "");
  fbx_host_err_free(e);
  int on[3] = {0, 0, 0}, seen[3] = {0, 0, 0}, det_on = 0, b_body_on = 0;
  static const char *const loops[3] = {"/loop_a", "/loop_b", "/loop_c"};
  for (size_t i = 0; i < na; i++) {
    bool fb = !strcmp(as[i].ep, FBX_HOST_EP_NAME);
    for (int k = 0; k < 3; k++)
      if (!strcmp(as[i].node, loops[k])) seen[k]++, on[k] += fb;
    if (!strcmp(as[i].op_type, "Det")) det_on += fb;
    if (!strncmp(as[i].node, "b/", 2)) b_body_on += fb;
  }
  bool hv = host_visible_backend();
  CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1, "the three Loops are in ORT's record");
  CHECK(on[0] == (hv ? 1 : 0), "Loop A %s Fusebox (want %s)", on[0] ? "on" : "not on", hv ? "on" : "off");
  CHECK(on[1] == 0 && on[2] == 0, "Loop B / C on Fusebox (want both declined)");
  CHECK(det_on == 0, "Det on Fusebox");
  CHECK(b_body_on > 0, "no node of B's body on Fusebox (want MatMul/Tanh per subgraph)");
  printf("  placement: Loop A %s, B and C on ORT, %d nodes of B's body on Fusebox per subgraph\n",
         on[0] ? "on Fusebox" : "on ORT", b_body_on);
  fbx_host_assign_free(as, na);
}

typedef struct kind {
  const char *name, *cf_op;
  const char *inputs[4];
  const char *outputs[4];
  const char *cases[4];
  int n_in, n_out, n_cases;
} kind;

static const kind kinds[] = {
    {"loop", "Loop", {"x", "M", "limit", "go"}, {"out", "acc_last", "ys", "accs"}, {"m8", "cond5", "zero_m", "zero_go"},
     4, 4, 4},
    {"scan", "Scan", {"x0", "xs", "zs", "gin"}, {"out", "y1s", "y2s"}, {"t5", "t1"}, 4, 3, 2},
    {"nested", "Scan", {"x0", "xs"}, {"out", "ys"}, {"t4"}, 2, 2, 1},
    {"misc", NULL, {"x", "M", "limit", "go"}, {"ysa", "dsb", "out", "cat"}, {"l3m4", "l1m2"}, 4, 4, 2},
};

static char *load(const char *dir, const char *file, fbx_host_tensor *t, const char *name) {
  char rel[512], path[1024];
  snprintf(rel, sizeof rel, "%s/%s.npy", dir, file);
  if (fbx_host_find_repo_file(rel, path, sizeof path)) return fbx_host_errf("%s not found (run scripts/make_models.sh)", rel);
  char *e = fbx_host_npy_read(path, t);
  return e ? e : fbx_host_tensor_set_name(t, name);
}

static void run_case(fbx_host_session *s[2], const kind *k, int ci, const char *what) {
  char dir[256];
  snprintf(dir, sizeof dir, "models/gen/cases/%s_e2e/%s", k->name, k->cases[ci]);
  fbx_host_tensor in[4], ref[4];
  memset(in, 0, sizeof in), memset(ref, 0, sizeof ref);
  char *e = NULL;
  for (int i = 0; i < k->n_in && !e; i++) e = load(dir, k->inputs[i], &in[i], k->inputs[i]);
  for (int i = 0; i < k->n_out && !e; i++) {
    char f[64];
    snprintf(f, sizeof f, "ref_%s", k->outputs[i]);
    e = load(dir, f, &ref[i], k->outputs[i]);
  }
  fbx_host_tensor *o[2] = {NULL, NULL};
  size_t no[2] = {0, 0};
  for (int j = 0; j < 2 && !e; j++) e = fbx_host_session_run(s[j], in, (size_t)k->n_in, &o[j], &no[j]);
  CHECK(!e, "%s %s: %s", k->name, what, e ? e : "");
  if (!e) {
    int good = 0;
    for (int i = 0; i < k->n_out; i++) {
      long j = fbx_host_session_output_find(s[0], k->outputs[i]);
      CHECK(j >= 0, "%s: output %s missing", what, k->outputs[i]);
      if (j < 0) continue;
      fbx_host_cmp r;
      fbx_host_compare(&o[0][j], &ref[i], 5e-5, 5e-5, &r);
      CHECK(!r.shape_mismatch && r.n_bad == 0, "%s %s: %s vs float64 reference: max |diff| %.3g%s", k->name, what,
            k->outputs[i], r.max_abs, r.shape_mismatch ? " (shapes differ)" : "");
      int ok = !r.shape_mismatch && r.n_bad == 0;
      fbx_host_compare(&o[0][j], &o[1][j], 0, 1e-5, &r);
      CHECK(!r.shape_mismatch && r.max_abs <= 1e-5, "%s %s: %s vs ORT CPU: max |diff| %.3g%s", k->name, what,
            k->outputs[i], r.max_abs, r.shape_mismatch ? " (shapes differ)" : "");
      good += ok && !r.shape_mismatch && r.max_abs <= 1e-5;
    }
    long y = fbx_host_session_output_find(s[0], k->outputs[k->n_out - 1]);
    printf("  %s %s: %d/%d outputs match (%s dim 0: %lld)\n", k->name, what, good, k->n_out, k->outputs[k->n_out - 1],
           y >= 0 ? (long long)o[0][y].dims[0] : -1LL);
  }
  fbx_host_err_free(e);
  for (int j = 0; j < 2; j++) fbx_host_tensors_free(o[j], no[j]);
  for (int i = 0; i < 4; i++) fbx_host_tensor_free(&in[i]), fbx_host_tensor_free(&ref[i]);
}

static void run_kind(fbx_host *h, const kind *k) {
  char rel[256], model[1024];
  snprintf(rel, sizeof rel, "models/gen/%s_e2e.onnx", k->name);
  printf("  %s\n", rel);
  fbx_host_session *s[2] = {NULL, NULL};
  char *e = NULL;
  if (fbx_host_find_repo_file(rel, model, sizeof model)) e = fbx_host_errf("%s not found (run scripts/make_models.sh)", rel);
  if (!e) e = fbx_host_session_create_threads(h, model, 1, 2, 1, &s[0]);
  if (!e) e = fbx_host_session_create_threads(h, model, 0, 2, 0, &s[1]);
  CHECK(!e, "%s: %s", k->name, e ? e : "");
  fbx_host_err_free(e);
  if (!e) {
    if (k->cf_op) check_placement(s[0], k->cf_op);
    else check_placement_misc(s[0]);
    for (int c = 0; c < k->n_cases; c++)
      for (int rep = 0; rep < 2; rep++) {
        char what[64];
        snprintf(what, sizeof what, "%s (run %d)", k->cases[c], rep + 1);
        run_case(s, k, c, what);
      }
    for (int c = 0; c < k->n_cases; c++) run_case(s, k, c, k->cases[c]); /* plans of every case reused */
  }
  for (int j = 0; j < 2; j++) fbx_host_session_destroy(s[j]);
}

int main(void) {
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "cannot open ORT: %s\n", e);
    return 1;
  }
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) run_kind(h, &kinds[i]);
  fbx_host_close(h);
  printf("e2e_loop_scan: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
