// test_e2e_if: Fusebox claims an If node with both of its branches (models/gen_if.py) and runs it
// as part of one fused subgraph; against ORT's CPU EP in the same process. Checks:
//   - if_small: placement from ORT's own record: every main-graph node, the If included, on
//     Fusebox, all in ONE assigned subgraph (on a host-visible device; on the opaque test backend,
//     FUSEBOX_TEST_BACKEND=opaque, the If is declined and stays with ORT, its branches' nodes on
//     Fusebox per subgraph as before);
//   - outputs equal ORT's (1e-5) for all four paths, with compile=on (cached plans) and
//     compile=off (the eager path): then; else with the nested If's then / else;
//     the branches give `z` different shapes ([2, 3] / [2, 5]), so the output shape follows the
//     branch taken; each path twice, then alternating, so cached plans of both branches are reused;
//   - if_unclaimable: a Det (not claimable) in then_branch keeps the If with ORT (today's path:
//     the claimable nodes of the branches on Fusebox, asked per subgraph) and the results still
//     equal ORT's.
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

/* main-graph nodes of gen_if.py are named "/..." (branch nodes "then/...", "else/...", "in_...") */
static bool main_node(const char *name) { return name[0] == '/'; }

static void check_placement(fbx_host_session *sf, bool want_if_on_fusebox) {
  fbx_host_assign *as = NULL;
  size_t na = 0;
  char *e = fbx_host_session_assignment(sf, &as, &na);
  CHECK(!e, "assignment: %s", e ? e : "");
  fbx_host_err_free(e);
  int if_on = 0, main_on = 0, main_total = 0, sg = -1, subgraphs = 0, branch_on = 0, det_on = 0;
  for (size_t i = 0; i < na; i++) {
    bool fb = !strcmp(as[i].ep, FBX_HOST_EP_NAME);
    if (!strcmp(as[i].op_type, "If") && main_node(as[i].node)) if_on += fb;
    if (!strcmp(as[i].op_type, "Det")) det_on += fb;
    if (main_node(as[i].node)) {
      main_total++;
      main_on += fb;
      if (fb && as[i].subgraph != sg) sg = as[i].subgraph, subgraphs++;
    } else {
      branch_on += fb;
    }
    if (!fb) fprintf(stderr, "  on ORT: %s (%s) on %s\n", as[i].node, as[i].op_type, as[i].ep);
  }
  if (want_if_on_fusebox) {
    CHECK(if_on == 1, "the If is not on Fusebox");
    CHECK(main_total >= 4 && main_on == main_total, "main graph: %d of %d nodes on Fusebox (want all)", main_on,
          main_total); /* ORT may drop the Identity */
    CHECK(subgraphs == 1, "main graph in %d Fusebox subgraphs (want 1)", subgraphs);
    CHECK(branch_on == 0, "%d branch nodes assigned on their own (want 0: they belong to the If)", branch_on);
  } else {
    CHECK(if_on == 0, "the If is on Fusebox (want it left to ORT)");
    CHECK(det_on == 0, "Det on Fusebox");
    CHECK(branch_on > 0, "no branch node on Fusebox (want the claimable ones, per subgraph)");
  }
  printf("  placement: If %s, main graph %d/%d on Fusebox in %d subgraph(s), %d branch nodes on their own\n",
         if_on ? "on Fusebox" : "on ORT", main_on, main_total, subgraphs, branch_on);
  fbx_host_assign_free(as, na);
}

/* One path: k > 0 (then) or not; y's sum > 0 picks the nested If's then in else_branch. */
static void run_path(fbx_host_session *s[2], int64_t k, double ysign, uint64_t seed, int want_cols) {
  fbx_host_tensor in[3];
  memset(in, 0, sizeof in);
  int64_t dx[2] = {2, 8}, dy[1] = {8};
  char *e = fbx_host_tensor_alloc(&in[0], "x", FBX_HOST_F32, 2, dx);
  if (!e) e = fbx_host_tensor_alloc(&in[1], "y", FBX_HOST_F32, 1, dy);
  if (!e) e = fbx_host_tensor_alloc(&in[2], "k", FBX_HOST_I64, 0, NULL);
  if (!e) {
    fbx_host_tensor_fill_uniform(&in[0], seed, -1, 1);
    fbx_host_tensor_fill_uniform(&in[1], seed + 7, ysign > 0 ? 0.1 : -1, ysign > 0 ? 1 : -0.1);
    fbx_host_tensor_set(&in[2], 0, (double)k);
  }
  fbx_host_tensor *o[2] = {NULL, NULL};
  size_t no[2] = {0, 0};
  for (int j = 0; j < 2 && !e; j++) e = fbx_host_session_run(s[j], in, 3, &o[j], &no[j]);
  CHECK(!e, "k %lld y %+g: %s", (long long)k, ysign, e ? e : "");
  if (!e) {
    static const char *const names[] = {"z", "s"};
    for (int q = 0; q < 2; q++) {
      long i0 = fbx_host_session_output_find(s[0], names[q]), i1 = fbx_host_session_output_find(s[1], names[q]);
      fbx_host_cmp r;
      fbx_host_compare(&o[0][i0], &o[1][i1], 1e-5, 1e-5, &r);
      CHECK(!r.shape_mismatch && r.n_bad == 0, "k %lld y %+g: output %s differs from ORT (max %.3g, shape %s)",
            (long long)k, ysign, names[q], r.max_abs, r.shape_mismatch ? "differs" : "same");
    }
    long iz = fbx_host_session_output_find(s[0], "z");
    CHECK(o[0][iz].rank == 2 && o[0][iz].dims[1] == want_cols, "k %lld y %+g: z has %lld columns, want %d",
          (long long)k, ysign, o[0][iz].rank == 2 ? (long long)o[0][iz].dims[1] : -1LL, want_cols);
  }
  fbx_host_err_free(e);
  for (int j = 0; j < 2; j++) fbx_host_tensors_free(o[j], no[j]);
  for (int i = 0; i < 3; i++) fbx_host_tensor_free(&in[i]);
}

static void run_model(fbx_host *h, const char *rel, bool claimable) {
  char model[1024];
  fbx_host_session *fb[2] = {NULL, NULL}, *ort = NULL; /* fb[1]: compile=off */
  printf("  %s\n", rel);
  if (fbx_host_find_repo_file(rel, model, sizeof model)) {
    CHECK(0, "%s not found (run scripts/make_models.sh)", rel);
    return;
  }
  char *e = fbx_host_session_create_threads(h, model, 1, 2, 1, &fb[0]);
  if (!e) e = fbx_host_session_create_threads(h, model, 0, 2, 0, &ort);
  if (!e) {
    static const char *const keys[] = {"threads", "compile"}, *const vals[] = {"2", "off"};
    fbx_host_session_opts o = fbx_host_session_opts_default();
    o.use_fusebox = 1;
    o.intra_threads = 2;
    o.ep_keys = keys;
    o.ep_vals = vals;
    o.n_ep_opts = 2;
    e = fbx_host_session_create(h, model, &o, &fb[1]);
  }
  CHECK(!e, "sessions: %s", e ? e : "");
  if (!e) {
    check_placement(fb[0], claimable && host_visible_backend());
    for (int c = 0; c < 2; c++) {
      fbx_host_session *s[2] = {fb[c], ort};
      for (int rep = 0; rep < 2; rep++) { /* each path twice in a row, then the same again */
        run_path(s, 1, +1, 10 + rep, 3);
        run_path(s, 1, -1, 20 + rep, 3);
        run_path(s, -2, +1, 30 + rep, 5);
        run_path(s, -2, +1, 40 + rep, 5);
        run_path(s, 0, -1, 50 + rep, 5);
        run_path(s, 0, -1, 60 + rep, 5);
        run_path(s, 3, -1, 70 + rep, 3);
      }
    }
  }
  fbx_host_err_free(e);
  for (int k = 0; k < 2; k++) fbx_host_session_destroy(fb[k]);
  fbx_host_session_destroy(ort);
}

int main(void) {
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "cannot open ORT: %s\n", e);
    return 1;
  }
  run_model(h, "models/gen/if_small.onnx", true);
  run_model(h, "models/gen/if_unclaimable.onnx", false);
  fbx_host_close(h);
  printf("e2e_if: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
