// od_judge — the decision rule of the differential harness (tests/ops) and of the fuzz target
// (tests/fuzz), given Fusebox's outputs, ORT CPU EP's outputs and, where there is one
// (tests/ops/od_ref.h, tests/fuzz/fz_ref.h), an independent reference's:
//
//   Fusebox == ORT                                 -> pass (the reference, where there is one,
//                                                     must agree too: so it is tested on every
//                                                     machine where ORT is right)
//   Fusebox != ORT, Fusebox == reference           -> pass, reported "ORT disagrees; independent
//                                                     reference agrees" (ORT's CPU EP returns
//                                                     wrong ConvInteger sums on AMD EPYC)
//   ORT cannot run it, Fusebox == reference        -> pass, reported "reference only"
//   ORT cannot run it, no reference                -> skip
//   anything else                                  -> fail
//
// When Fusebox did not claim the node, its session ran ORT's own kernel, so a reference that
// disagrees with both says nothing about Fusebox: reported, not failed.
#ifndef FBX_TESTS_COMMON_OD_JUDGE_H
#define FBX_TESTS_COMMON_OD_JUDGE_H

#include <stddef.h>

#include "common/ort_host.h"

typedef enum od_verdict {
  OD_VERDICT_PASS,
  OD_VERDICT_ORT_DISAGREES,  // a pass: Fusebox == independent reference != ORT
  OD_VERDICT_REF_ONLY,       // a pass: ORT cannot run it, Fusebox == independent reference
  OD_VERDICT_SKIP,
  OD_VERDICT_FAIL,
} od_verdict;

typedef struct od_outputs {
  const fbx_host_tensor *t;  // NULL: not available (ORT could not run it / no reference)
  size_t n;
} od_outputs;

typedef struct od_judgement {
  od_verdict verdict;
  int ref_vs_ort;  // -1: not both available; 1: reference == ORT; 0: they differ
  char msg[600];   // why (failures and reported passes); "" for a plain pass
} od_judgement;

// fbx must be available (a Fusebox session error is a failure the caller reports itself).
// Tolerance: |a-b| <= atol + rtol*|b| per element (ints and bool exact, NaN == NaN).
void od_judge(od_outputs fbx, od_outputs ort, od_outputs ref, int claimed, double rtol, double atol,
              od_judgement *j);

// The same rule with the caller's comparison: match(a, b, bname, ctx, why, cap) is 1 when
// every output of a is within the caller's tolerance of b's, else 0 with why[] saying where
// (naming b as bname). The fuzz target's tolerance scales with the reference's magnitude and
// treats an overflow's inf as equal to a huge finite value (tests/fuzz/fuzz_model.c).
typedef int (*od_match_fn)(od_outputs a, od_outputs b, const char *bname, void *ctx, char *why, size_t cap);
void od_judge_with(od_outputs fbx, od_outputs ort, od_outputs ref, int claimed, od_match_fn match, void *ctx,
                   od_judgement *j);

// Verdict name for reports ("pass", "ORT disagrees; independent reference agrees", ...).
const char *od_verdict_name(od_verdict v);

#endif
