// test_ops_diff_judge — checks the differential harness's own judge (tests/common/od_judge.h) and
// independent references (od_ref*.c), so that "ORT disagrees; independent reference agrees"
// can be trusted:
//   1. the decision rule on hand-made outputs, every branch: agree, ORT off (pass + report),
//      ORT and reference both off (fail), reference off alone (fail when claimed), ORT cannot
//      run it (reference only / skip), tolerance, output-count mismatch;
//   2. each reference on small inputs worked out by hand (padding, zero points per tensor /
//      row / column / channel, round-half-to-even and saturation, dynamic scale and zero point,
//      truncating division, broadcasting);
//   3. real generated cases through ORT and Fusebox with ORT's output deliberately corrupted:
//      cases with a reference pass with the report, and fail once the reference is corrupted
//      too; a case without a reference fails.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "common/ort_host.h"
#include "ops/od_gen.h"
#include "common/od_judge.h"
#include "ops/od_ref.h"
#include "ops/od_run.h"

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

// t := dtype[dims] holding v[0..numel).
static void mk(fbx_host_tensor *t, const char *name, int dtype, int rank, const int64_t *dims, const double *v) {
  char *e = fbx_host_tensor_alloc(t, name, dtype, rank, dims);
  CHECK(!e, "alloc %s: %s", name, e ? e : "");
  fbx_host_err_free(e);
  if (e) return;
  size_t n = fbx_host_tensor_numel(t);
  for (size_t i = 0; i < n; i++) fbx_host_tensor_set(t, i, v[i]);
}

// Append input x<n_in> (dtype[dims] = v) to a hand-made case.
static void add_in(od_case *c, int dtype, int rank, const int64_t *dims, const double *v) {
  char name[16];
  snprintf(name, sizeof name, "x%d", c->n_in);
  mk(&c->in[c->n_in], name, dtype, rank, dims, v);
  c->is_init[c->n_in++] = 1;
}

// Run c's reference and compare its only output with want[0..n) (and its dims).
static void check_ref(od_case *c, const char *what, int rank, const int64_t *dims, const double *want) {
  fbx_host_tensor *y = NULL;
  size_t ny = 0;
  char *e = od_ref_run(c, &y, &ny);
  CHECK(!e && ny == 1, "%s: reference failed: %s", what, e ? e : "no output");
  fbx_host_err_free(e);
  if (!e && ny == 1) {
    CHECK(y->rank == rank && !memcmp(y->dims, dims, sizeof(int64_t) * (size_t)rank), "%s: output shape", what);
    size_t n = fbx_host_tensor_numel(y);
    for (size_t i = 0; i < n && y->rank == rank; i++)
      CHECK(fbx_host_tensor_get(y, i) == want[i], "%s: y[%zu] = %g, want %g", what, i, fbx_host_tensor_get(y, i), want[i]);
  }
  if (y) fbx_host_tensors_free(y, ny);
  od_case_free(c);
  memset(c, 0, sizeof *c);
}

// ---------------------------------------------------------------------------------------
// 1. The decision rule
// ---------------------------------------------------------------------------------------

static od_verdict judge(const fbx_host_tensor *f, const fbx_host_tensor *o, const fbx_host_tensor *r, int claimed,
                        od_judgement *j) {
  od_judge((od_outputs){f, 1}, (od_outputs){o, o ? 1 : 0}, (od_outputs){r, r ? 1 : 0}, claimed, 1e-4, 1e-5, j);
  return j->verdict;
}

static void test_rule(void) {
  int64_t d[1] = {3};
  fbx_host_tensor good, bad, bad2, fgood, fnear;
  mk(&good, "y0", FBX_HOST_I32, 1, d, (double[]){1, 2, 3});
  mk(&bad, "y0", FBX_HOST_I32, 1, d, (double[]){1, 2, 4});
  mk(&bad2, "y0", FBX_HOST_I32, 1, d, (double[]){0, 2, 3});
  mk(&fgood, "y0", FBX_HOST_F32, 1, d, (double[]){1, 2, 3});
  mk(&fnear, "y0", FBX_HOST_F32, 1, d, (double[]){1 + 1e-6, 2, 3 - 1e-5});
  od_judgement j;

  CHECK(judge(&good, &good, NULL, 1, &j) == OD_VERDICT_PASS && !j.msg[0], "agree, no reference: pass");
  CHECK(judge(&good, &good, &good, 1, &j) == OD_VERDICT_PASS && j.ref_vs_ort == 1, "all agree: pass, ref == ORT");
  CHECK(judge(&good, &bad, &good, 1, &j) == OD_VERDICT_ORT_DISAGREES && j.ref_vs_ort == 0 &&
            strstr(j.msg, "ORT disagrees; independent reference agrees") && strstr(j.msg, "1/3 bad"),
        "ORT off, reference agrees: pass with report (%s)", j.msg);
  CHECK(judge(&good, &bad, &bad2, 1, &j) == OD_VERDICT_FAIL, "ORT and reference off differently: fail");
  CHECK(judge(&good, &bad, &bad, 1, &j) == OD_VERDICT_FAIL && j.ref_vs_ort == 1, "ORT and reference off alike: fail");
  CHECK(judge(&good, &bad, NULL, 1, &j) == OD_VERDICT_FAIL && strstr(j.msg, "vs ORT"), "ORT off, no reference: fail");
  CHECK(judge(&good, &good, &bad, 1, &j) == OD_VERDICT_FAIL && strstr(j.msg, "reference"),
        "reference off alone, claimed: fail (the reference is tested wherever ORT is right)");
  CHECK(judge(&good, &good, &bad, 0, &j) == OD_VERDICT_PASS && j.ref_vs_ort == 0 && j.msg[0],
        "reference off alone, not claimed: says nothing of Fusebox, reported");
  CHECK(judge(&good, NULL, &good, 1, &j) == OD_VERDICT_REF_ONLY, "ORT cannot run it, reference agrees");
  CHECK(judge(&good, NULL, &bad, 1, &j) == OD_VERDICT_FAIL, "ORT cannot run it, reference disagrees");
  CHECK(judge(&good, NULL, NULL, 1, &j) == OD_VERDICT_SKIP, "nothing to compare with: skip");
  CHECK(judge(&fnear, &fgood, NULL, 1, &j) == OD_VERDICT_PASS, "float within tolerance: pass");
  CHECK(judge(&fgood, &good, NULL, 1, &j) == OD_VERDICT_FAIL, "dtype mismatch: fail");
  fbx_host_tensor two[2] = {good, good};
  od_judge((od_outputs){two, 2}, (od_outputs){&good, 1}, (od_outputs){NULL, 0}, 1, 0, 0, &j);
  CHECK(j.verdict == OD_VERDICT_FAIL && strstr(j.msg, "output count"), "output count mismatch: fail");
  fbx_host_tensor *all[] = {&good, &bad, &bad2, &fgood, &fnear};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) fbx_host_tensor_free(all[i]);
}

// ---------------------------------------------------------------------------------------
// 2. The references on hand-worked inputs
// ---------------------------------------------------------------------------------------

static void test_refs(void) {
  od_case c;
  memset(&c, 0, sizeof c);
  int64_t one[1] = {1};

  // ConvInteger: X uint8 1..9 (1x1x3x3), x_zp 1 -> X - x_zp = [[0,1,2],[3,4,5],[6,7,8]];
  // W int8 [[1,-1],[2,0]] (1x1x2x2). No pads: y = [[5,7],[11,13]].
  int64_t xd[4] = {1, 1, 3, 3}, wd[4] = {1, 1, 2, 2};
  const double xv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, wv[4] = {1, -1, 2, 0};
  c.op = "ConvInteger";
  add_in(&c, FBX_HOST_U8, 4, xd, xv);
  add_in(&c, FBX_HOST_I8, 4, wd, wv);
  add_in(&c, FBX_HOST_U8, 0, one, (double[]){1});
  c.n_out = 1;
  check_ref(&c, "ConvInteger no pads", 4, (int64_t[]){1, 1, 2, 2}, (double[]){5, 7, 11, 13});
  // pads 1: 4x4; row 0 sees only W's bottom row against X's top row: y[0][j] = 2*x'[0][j-1] + 0
  c.op = "ConvInteger";
  add_in(&c, FBX_HOST_U8, 4, xd, xv);
  add_in(&c, FBX_HOST_I8, 4, wd, wv);
  add_in(&c, FBX_HOST_U8, 0, one, (double[]){1});
  od_aints(&c, "pads", (int64_t[]){1, 1, 1, 1}, 4);
  c.n_out = 1;
  // y[i][j] = sum_ab W[a][b] * X'[i+a-1][j+b-1] (0 outside): row 0 sees only W's bottom row
  // against X's top row, row 3 only W's top row against X's last row.
  check_ref(&c, "ConvInteger pads 1", 4, (int64_t[]){1, 1, 4, 4},
            (double[]){0, 0, 2, 4, /* row 1 */ 0, 5, 7, 12, /* row 2 */ -3, 11, 13, 21, /* row 3 */ -6, -1, -1, 8});
  // group 2, stride 2, per-channel w_zp [1, -1], int8 X: channel m sees X's channel m alone
  int64_t xg[4] = {1, 2, 2, 2}, wg[4] = {2, 1, 1, 1}, m2[1] = {2};
  c.op = "ConvInteger";
  add_in(&c, FBX_HOST_I8, 4, xg, (double[]){-1, 2, -3, 4, 5, -6, 7, -8});
  add_in(&c, FBX_HOST_I8, 4, wg, (double[]){3, 2});
  add_in(&c, FBX_HOST_I8, 0, one, (double[]){0});
  add_in(&c, FBX_HOST_I8, 1, m2, (double[]){1, -1});
  od_ai(&c, "group", 2);
  od_aints(&c, "strides", (int64_t[]){2, 2}, 2);
  c.n_out = 1;
  check_ref(&c, "ConvInteger group 2 stride 2 per-channel w_zp", 4, (int64_t[]){1, 2, 1, 1}, (double[]){-1 * 2, 5 * 3});

  // MatMulInteger: A int8 [[1,-2,3],[-4,5,-6]] - 1; B uint8 [[1,2],[3,4],[5,6]] - per-column [1,3]
  // -> A' [[0,-3,2],[-5,4,-7]], B' [[0,-1],[2,1],[4,3]], Y = [[2,3],[-20,-12]].
  int64_t ad[2] = {2, 3}, bd[2] = {3, 2};
  c.op = "MatMulInteger";
  add_in(&c, FBX_HOST_I8, 2, ad, (double[]){1, -2, 3, -4, 5, -6});
  add_in(&c, FBX_HOST_U8, 2, bd, (double[]){1, 2, 3, 4, 5, 6});
  add_in(&c, FBX_HOST_I8, 0, one, (double[]){1});
  add_in(&c, FBX_HOST_U8, 1, m2, (double[]){1, 3});
  c.n_out = 1;
  check_ref(&c, "MatMulInteger per-column b_zp", 2, (int64_t[]){2, 2}, (double[]){2, 3, -20, -12});
  // batch 2 of A against one B, no zero points: [[1],[2]] and [[3],[4]] (2x2x1) times [[1,10]] (1x2)
  c.op = "MatMulInteger";
  add_in(&c, FBX_HOST_U8, 3, (int64_t[]){2, 2, 1}, (double[]){1, 2, 3, 4});
  add_in(&c, FBX_HOST_U8, 2, (int64_t[]){1, 2}, (double[]){1, 10});
  c.n_out = 1;
  check_ref(&c, "MatMulInteger batched A", 3, (int64_t[]){2, 2, 2}, (double[]){1, 10, 2, 20, 3, 30, 4, 40});

  // QuantizeLinear: ties to even, saturation, both 8-bit types
  int64_t q6[1] = {6};
  const double qx[6] = {0.5, 1.5, 2.5, -0.5, 300, -300};
  c.op = "QuantizeLinear";
  add_in(&c, FBX_HOST_F32, 1, q6, qx);
  add_in(&c, FBX_HOST_F32, 0, one, (double[]){1});
  add_in(&c, FBX_HOST_U8, 0, one, (double[]){0});
  c.n_out = 1;
  check_ref(&c, "QuantizeLinear uint8", 1, q6, (double[]){0, 2, 2, 0, 255, 0});
  c.op = "QuantizeLinear";
  add_in(&c, FBX_HOST_F32, 1, q6, qx);
  add_in(&c, FBX_HOST_F32, 0, one, (double[]){0.5});
  add_in(&c, FBX_HOST_I8, 0, one, (double[]){10});
  c.n_out = 1;  // x / 0.5 = 1, 3, 5, -1, 600, -600; + 10
  check_ref(&c, "QuantizeLinear int8 scale 0.5 zp 10", 1, q6, (double[]){11, 13, 15, 9, 127, -128});
  // DequantizeLinear
  c.op = "DequantizeLinear";
  add_in(&c, FBX_HOST_U8, 1, (int64_t[]){3}, (double[]){0, 128, 255});
  add_in(&c, FBX_HOST_F32, 0, one, (double[]){0.5});
  add_in(&c, FBX_HOST_U8, 0, one, (double[]){128});
  c.n_out = 1;
  check_ref(&c, "DequantizeLinear", 1, (int64_t[]){3}, (double[]){-64, 0, 63.5});

  // DynamicQuantizeLinear: x = [-1, 0, 2, 1] -> scale 3/255, zero point round(1 / scale) = 85,
  // y = [0, 85, 255, 170]
  c.op = "DynamicQuantizeLinear";
  add_in(&c, FBX_HOST_F32, 1, (int64_t[]){4}, (double[]){-1, 0, 2, 1});
  c.n_out = 3;
  fbx_host_tensor *y = NULL;
  size_t ny = 0;
  char *e = od_ref_run(&c, &y, &ny);
  CHECK(!e && ny == 3, "DynamicQuantizeLinear reference: %s", e ? e : "not 3 outputs");
  fbx_host_err_free(e);
  if (!e && ny == 3) {
    const double want[4] = {0, 85, 255, 170};
    for (size_t i = 0; i < 4; i++) CHECK(fbx_host_tensor_get(&y[0], i) == want[i], "DynamicQuantizeLinear y[%zu]", i);
    CHECK(fbx_host_tensor_get(&y[1], 0) == (double)(3.0f / 255.0f) && y[1].dtype == FBX_HOST_F32, "DynamicQuantizeLinear scale");
    CHECK(fbx_host_tensor_get(&y[2], 0) == 85 && y[2].dtype == FBX_HOST_U8, "DynamicQuantizeLinear zero point");
  }
  if (y) fbx_host_tensors_free(y, ny);
  od_case_free(&c);
  memset(&c, 0, sizeof c);
  // QLinearMatMul: a [[10,20]] - 10 = [0,10]; b [[1,1],[3,2]] - 1 = [[0,0],[2,1]]; acc = [20, 10];
  // multiplier 0.5 * 0.25 / 0.5 = 0.25 -> [5, 2.5 -> 2 (tie to even)] + 100; with y_zp 254: saturates
  for (int sat = 0; sat < 2; sat++) {
    c.op = "QLinearMatMul";
    add_in(&c, FBX_HOST_U8, 2, (int64_t[]){1, 2}, (double[]){10, 20});
    add_in(&c, FBX_HOST_F32, 0, one, (double[]){0.5});
    add_in(&c, FBX_HOST_U8, 0, one, (double[]){10});
    add_in(&c, FBX_HOST_U8, 2, (int64_t[]){2, 2}, (double[]){1, 1, 3, 2});
    add_in(&c, FBX_HOST_F32, 0, one, (double[]){0.25});
    add_in(&c, FBX_HOST_U8, 0, one, (double[]){1});
    add_in(&c, FBX_HOST_F32, 0, one, (double[]){0.5});
    add_in(&c, FBX_HOST_U8, 0, one, (double[]){sat ? 254 : 100});
    c.n_out = 1;
    check_ref(&c, sat ? "QLinearMatMul saturates" : "QLinearMatMul ties to even", 2, (int64_t[]){1, 2},
              sat ? (double[]){255, 255} : (double[]){105, 102});
  }

  // integer binary ops: truncating Div, Pow, broadcasting [2,1] + [3] -> [2,3], int8 wrap
  c.op = "Div";
  add_in(&c, FBX_HOST_I32, 1, m2, (double[]){-7, 7});
  add_in(&c, FBX_HOST_I32, 1, m2, (double[]){2, -2});
  c.n_out = 1;
  check_ref(&c, "Div int32 truncates", 1, m2, (double[]){-3, -3});
  c.op = "Pow";
  add_in(&c, FBX_HOST_I64, 1, m2, (double[]){-2, 3});
  add_in(&c, FBX_HOST_I64, 1, m2, (double[]){3, 0});
  c.n_out = 1;
  check_ref(&c, "Pow int64", 1, m2, (double[]){-8, 1});
  c.op = "Add";
  add_in(&c, FBX_HOST_I8, 2, (int64_t[]){2, 1}, (double[]){100, -1});
  add_in(&c, FBX_HOST_I8, 1, (int64_t[]){3}, (double[]){1, 27, 28});
  c.n_out = 1;
  check_ref(&c, "Add int8 broadcast + wrap", 2, (int64_t[]){2, 3}, (double[]){101, 127, -128, 0, 26, 27});

  // which ops have a reference: integer Add yes, float Add no
  c.op = "Add";
  add_in(&c, FBX_HOST_F32, 1, m2, (double[]){1, 2});
  add_in(&c, FBX_HOST_F32, 1, m2, (double[]){1, 2});
  CHECK(!od_ref_has(&c), "float Add has no independent reference (ORT is the oracle)");
  od_case_free(&c);
}

// ---------------------------------------------------------------------------------------
// 3. Real cases through ORT and Fusebox, ORT's output corrupted
// ---------------------------------------------------------------------------------------

// Generate the next case of `gen` whose op is `op`, from stream r.
static void next_case(od_gen gen, const char *op, od_rng *r, od_case *c) {
  for (;;) {
    memset(c, 0, sizeof *c);
    od_rng cr = {od_next(r) | 1};
    gen(c, &cr);
    if (!strcmp(c->op, op)) break;
    od_case_free(c);
  }
  od_describe(c);
}

static int is_pass(od_verdict v) {
  return v == OD_VERDICT_PASS || v == OD_VERDICT_ORT_DISAGREES || v == OD_VERDICT_REF_ONLY;
}

static void test_corrupted_ort(fbx_host *h, const char *path) {
  static const struct { od_gen gen; const char *op; } kinds[] = {
      {od_gen_convint, "ConvInteger"},       {od_gen_composed, "MatMulInteger"},
      {od_gen_composed, "QLinearMatMul"},   {od_gen_composed, "QuantizeLinear"},
      {od_gen_composed, "DequantizeLinear"}, {od_gen_composed, "DynamicQuantizeLinear"}};
  od_rng r = {0x5eed0f0d5eedULL};
  int reported = 0;
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
    for (int i = 0; i < 6; i++) {
      od_case c;
      next_case(kinds[k].gen, kinds[k].op, &r, &c);
      od_result res;
      od_run_opts plain = {0}, bad_ort = {.corrupt_ort = 1}, bad_both = {.corrupt_ort = 1, .corrupt_ref = 1},
                  bad_ref = {.corrupt_ref = 1};
      od_run(h, &c, path, &plain, &res);
      // on a machine where ORT's kernel is wrong this is ORT_DISAGREES; here (Intel) PASS
      CHECK(is_pass(res.j.verdict) && res.has_ref && res.claimed, "%s: plain run: %s %s", c.desc,
            od_verdict_name(res.j.verdict), res.j.msg);
      od_run(h, &c, path, &bad_ort, &res);
      CHECK(res.j.verdict == OD_VERDICT_ORT_DISAGREES || res.j.verdict == OD_VERDICT_REF_ONLY,
            "%s: ORT corrupted -> want pass with report, got %s %s", c.desc, od_verdict_name(res.j.verdict), res.j.msg);
      reported += res.j.verdict == OD_VERDICT_ORT_DISAGREES && strstr(res.j.msg, "ORT disagrees; independent reference agrees");
      od_run(h, &c, path, &bad_both, &res);
      CHECK(res.j.verdict == OD_VERDICT_FAIL, "%s: ORT and reference corrupted -> want fail, got %s", c.desc,
            od_verdict_name(res.j.verdict));
      od_run(h, &c, path, &bad_ref, &res);
      CHECK(res.j.verdict == OD_VERDICT_FAIL, "%s: reference corrupted -> want fail, got %s", c.desc,
            od_verdict_name(res.j.verdict));
      od_case_free(&c);
    }
  CHECK(reported >= 18, "only %d corrupted-ORT cases reported \"ORT disagrees; independent reference agrees\"", reported);
  // an op without a reference: a corrupted ORT output is a plain failure
  od_case c;
  next_case(od_gen_conv, "Conv", &r, &c);
  od_result res;
  od_run_opts bad_ort = {.corrupt_ort = 1};
  od_run(h, &c, path, &bad_ort, &res);
  CHECK(!res.has_ref && res.j.verdict == OD_VERDICT_FAIL, "%s: no reference, ORT corrupted -> want fail, got %s",
        c.desc, od_verdict_name(res.j.verdict));
  od_case_free(&c);
}

int main(void) {
  test_rule();
  test_refs();
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  CHECK(!e, "fbx_host_open: %s", e ? e : "");
  fbx_host_err_free(e);
  if (h) {
    char path[] = "/tmp/fbx_ops_judge_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    test_corrupted_ort(h, path);
    unlink(path);
    fbx_host_close(h);
  }
  printf("test_ops_diff_judge: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
