// od_judge.c — the decision rule of the differential harness and the fuzz target (see od_judge.h).
#include "common/od_judge.h"

#include <stdio.h>

const char *od_verdict_name(od_verdict v) {
  switch (v) {
    case OD_VERDICT_PASS: return "pass";
    case OD_VERDICT_ORT_DISAGREES: return "ORT disagrees; independent reference agrees";
    case OD_VERDICT_REF_ONLY: return "ORT cannot run it; independent reference agrees";
    case OD_VERDICT_SKIP: return "skip";
    case OD_VERDICT_FAIL: return "fail";
  }
  return "?";
}

// 1 when every output of a is within tolerance of b's; else 0 and why[] says where, naming b
// as `bname`.
static int od_match(od_outputs a, od_outputs b, const char *bname, double rtol, double atol, char *why, size_t cap) {
  if (a.n != b.n) {
    snprintf(why, cap, "output count %zu vs %s %zu", a.n, bname, b.n);
    return 0;
  }
  for (size_t i = 0; i < a.n; i++) {
    fbx_host_cmp cmp;
    if (fbx_host_compare(&a.t[i], &b.t[i], rtol, atol, &cmp)) continue;
    char s1[64], s2[64];
    snprintf(why, cap, "output %zu: %s%s vs %s %s: %zu/%zu bad, max_abs %.3g max_rel %.3g at %zu", i,
             cmp.shape_mismatch ? "shape/dtype mismatch " : "", fbx_host_shape_str(a.t[i].rank, a.t[i].dims, s1, sizeof s1),
             bname, fbx_host_shape_str(b.t[i].rank, b.t[i].dims, s2, sizeof s2), cmp.n_bad, cmp.numel, cmp.max_abs,
             cmp.max_rel, cmp.worst_index);
    return 0;
  }
  return 1;
}

typedef struct od_tol {
  double rtol, atol;
} od_tol;

static int od_match_tol(od_outputs a, od_outputs b, const char *bname, void *ctx, char *why, size_t cap) {
  const od_tol *t = ctx;
  return od_match(a, b, bname, t->rtol, t->atol, why, cap);
}

void od_judge(od_outputs fbx, od_outputs ort, od_outputs ref, int claimed, double rtol, double atol,
              od_judgement *j) {
  od_tol t = {rtol, atol};
  od_judge_with(fbx, ort, ref, claimed, od_match_tol, &t, j);
}

void od_judge_with(od_outputs fbx, od_outputs ort, od_outputs ref, int claimed, od_match_fn match, void *ctx,
                   od_judgement *j) {
  char w_ort[260] = "", w_ref[260] = "", w_ro[260] = "";
  j->msg[0] = 0;
  j->ref_vs_ort = -1;
  int fbx_ort = ort.t && match(fbx, ort, "ORT", ctx, w_ort, sizeof w_ort);
  int fbx_ref = ref.t && match(fbx, ref, "reference", ctx, w_ref, sizeof w_ref);
  if (ort.t && ref.t) j->ref_vs_ort = match(ref, ort, "ORT", ctx, w_ro, sizeof w_ro);

  if (!ort.t) {
    if (!ref.t) { j->verdict = OD_VERDICT_SKIP; return; }
    j->verdict = fbx_ref ? OD_VERDICT_REF_ONLY : OD_VERDICT_FAIL;
    if (!fbx_ref) snprintf(j->msg, sizeof j->msg, "ORT cannot run it; Fusebox vs independent reference: %s", w_ref);
    return;
  }
  if (fbx_ort) {
    if (j->ref_vs_ort == 0 && claimed) {  // the reference disagrees with two implementations
      j->verdict = OD_VERDICT_FAIL;
      snprintf(j->msg, sizeof j->msg, "independent reference disagrees with ORT and Fusebox (reference bug?): %s", w_ro);
    } else {
      j->verdict = OD_VERDICT_PASS;
      if (j->ref_vs_ort == 0)
        snprintf(j->msg, sizeof j->msg, "not claimed; ORT disagrees with the independent reference: %s", w_ro);
    }
    return;
  }
  if (fbx_ref) {
    j->verdict = OD_VERDICT_ORT_DISAGREES;
    snprintf(j->msg, sizeof j->msg, "%s: %s", od_verdict_name(j->verdict), w_ort);
    return;
  }
  j->verdict = OD_VERDICT_FAIL;
  if (ref.t) snprintf(j->msg, sizeof j->msg, "%s; independent reference: %s", w_ort, w_ref);
  else snprintf(j->msg, sizeof j->msg, "%s", w_ort);
}
