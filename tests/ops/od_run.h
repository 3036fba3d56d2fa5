// od_run — run one case of the differential harness: ORT's CPU EP alone, Fusebox registered,
// and the independent reference where the op has one (od_ref.h), judged by od_judge.h.
#ifndef FBX_TESTS_OD_RUN_H
#define FBX_TESTS_OD_RUN_H

#include "ops/od_case.h"
#include "common/od_judge.h"

typedef struct od_run_opts {
  // Self-test hooks (test_ops_diff --corrupt-ort, test_ops_judge): perturb element 0 of the
  // first output of ORT's / the reference's result before judging, so the rule can be seen to
  // pass-with-report when only ORT is off and to fail when nothing agrees with Fusebox.
  int corrupt_ort;
  int corrupt_ref;
} od_run_opts;

typedef struct od_result {
  od_judgement j;  // verdict, reference-vs-ORT agreement, message
  int claimed;     // some node went to Fusebox
  int f32ref;      // ORT's outputs came from the model widened to float32 (no float16 kernel)
  int has_ref;     // the independent reference ran
} od_result;

// The model is written to `path` (overwritten). Never fails itself: errors become the verdict.
void od_run(fbx_host *h, const od_case *c, const char *path, const od_run_opts *o, od_result *res);

// v -> v-1 if v > 0 else v+1 on element 0 (every dtype: ints stay in range, floats move by 1,
// far beyond any tolerance the harness uses). No-op on an empty tensor.
void od_corrupt(fbx_host_tensor *t);

#endif
