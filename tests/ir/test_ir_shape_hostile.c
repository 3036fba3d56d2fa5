/* Shape inference on hostile shape data (issue 8, defects 2 and 5):
 *   - Reshape / Expand / ConstantOfShape / Tile / Pad / Concat / Split / Range / OneHot /
 *     whose element counts or dims overflow int64 fail with a clear error
 *     (before: Reshape [2^62+1, 4] of 4 elements was accepted, the product wrapping to 4);
 *   - a shape within int64 but over the 1 TiB tensor limit fails;
 *   - Slice against a naive reference that walks the indices in 128-bit arithmetic, for
 *     starts/ends/steps including INT64_MIN, INT64_MAX, -(2^63-1) (before: step INT64_MIN
 *     gave 0 elements where the spec gives 1, through a negation overflow). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "exec/exec_compiled.h"

#include "common/check.h"

static fbx_tensor T(fbx_dtype dt, int rank, const int64_t *dims, void *data) {
  fbx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.rank = rank;
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  t.data = data;
  return t;
}
#define F(...) T(FBX_DTYPE_F32, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), (int64_t[]){__VA_ARGS__}, NULL)
static fbx_tensor I64V(int n, int64_t *v) { int64_t d = n; return T(FBX_DTYPE_I64, 1, &d, v); }
static fbx_tensor I64S(int64_t *v) { return T(FBX_DTYPE_I64, 0, NULL, v); }

static fbx_ir_node N(fbx_ir_op op, int n_in) {
  fbx_ir_node n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.n_inputs = n_in;
  n.n_outputs = 1;
  n.name = "hostile";
  n.onnx_op = fbx_ir_op_name(op);
  return n;
}

/* Inference must fail, with `needle` in the message. */
static void expect_fail(const char *what, const fbx_ir_node *n, fbx_tensor *in, int n_in, const char *needle) {
  fbx_tensor out[2];
  memset(out, 0, sizeof out);
  fbx_status *st = fbx_ir_infer_node(n, in, n_in, out, 1);
  CHECK(st != NULL, "%s: accepted (output rank %d, dim0 %lld)", what, out[0].rank, (long long)out[0].dims[0]);
  if (st) {
    CHECK(strstr(fbx_status_message(st), needle) != NULL, "%s: message lacks '%s': %s", what, needle,
          fbx_status_message(st));
    printf("ok   %-40s %s\n", what, fbx_status_message(st));
  }
  fbx_status_free(st);
}

static void check_counts(void) {
  const int64_t big = (INT64_C(1) << 62) + 1;
  {
    fbx_ir_node n = N(FBX_IR_OP_RESHAPE, 2);
    int64_t s[2] = {big, 4};
    fbx_tensor in[2] = {F(4), I64V(2, s)};
    expect_fail("Reshape [4] -> [2^62+1, 4]", &n, in, 2, "overflows int64");
    int64_t s2[3] = {-1, INT64_C(1) << 32, INT64_C(1) << 32};
    fbx_tensor in2[2] = {F(4), I64V(3, s2)};
    expect_fail("Reshape [4] -> [-1, 2^32, 2^32]", &n, in2, 2, "overflows int64");
  }
  {
    fbx_ir_node n = N(FBX_IR_OP_EXPAND, 2);
    int64_t s[2] = {big, 4};
    fbx_tensor in[2] = {F(1, 1), I64V(2, s)};
    expect_fail("Expand [1,1] -> [2^62+1, 4]", &n, in, 2, "overflows int64");
  }
  {
    fbx_ir_node n = N(FBX_IR_OP_CONSTANT_OF_SHAPE, 1);
    n.params.fill.dtype = FBX_DTYPE_F32;
    int64_t s[2] = {big, 4};
    fbx_tensor in[1] = {I64V(2, s)};
    expect_fail("ConstantOfShape [2^62+1, 4]", &n, in, 1, "overflows int64");
    int64_t s2[2] = {INT64_C(1) << 30, INT64_C(1) << 20}; /* 2^50 floats: 4 PiB */
    fbx_tensor in2[1] = {I64V(2, s2)};
    expect_fail("ConstantOfShape [2^30, 2^20] (4 PiB)", &n, in2, 1, "tensor limit");
    int64_t s3[3] = {0, INT64_C(1) << 62, 4};
    fbx_tensor in3[1] = {I64V(3, s3)};
    expect_fail("ConstantOfShape [0, 2^62, 4]", &n, in3, 1, "overflows int64");
  }
  {
    fbx_ir_node n = N(FBX_IR_OP_TILE, 2);
    int64_t r[2] = {INT64_C(1) << 62, 8};
    fbx_tensor in[2] = {F(2, 3), I64V(2, r)};
    expect_fail("Tile [2,3] x [2^62, 8]", &n, in, 2, "overflows int64");
  }
  {
    fbx_ir_node n = N(FBX_IR_OP_PAD, 2);
    int64_t p[4] = {INT64_MAX, 0, INT64_MAX, 0};
    fbx_tensor in[2] = {F(2, 3), I64V(4, p)};
    expect_fail("Pad [2,3] by INT64_MAX twice", &n, in, 2, "overflows int64");
  }
  {
    fbx_ir_node n = N(FBX_IR_OP_CONCAT, 2);
    n.params.axis.axis = 0;
    fbx_tensor in[2] = {F(INT64_MAX, 0), F(INT64_MAX, 0)};
    expect_fail("Concat [INT64_MAX,0] twice", &n, in, 2, "overflows int64");
  }
  {
    fbx_ir_node n = N(FBX_IR_OP_SPLIT, 2);
    n.n_outputs = 2;
    n.params.axis.axis = 0;
    int64_t sz[2] = {INT64_MAX, INT64_MAX};
    fbx_tensor in[2] = {F(4), I64V(2, sz)}, out[2];
    memset(out, 0, sizeof out);
    fbx_status *st = fbx_ir_infer_node(&n, in, 2, out, 2);
    CHECK(st != NULL, "Split sizes INT64_MAX x2 accepted");
    fbx_status_free(st);
  }
  {
    fbx_ir_node n = N(FBX_IR_OP_RANGE, 3);
    int64_t s = INT64_MIN, l = INT64_MAX, d = 1, d2 = INT64_C(1) << 62;
    fbx_tensor in[3] = {I64S(&s), I64S(&l), I64S(&d)};
    expect_fail("Range INT64_MIN..INT64_MAX step 1", &n, in, 3, "range too long");
    fbx_tensor in2[3] = {I64S(&s), I64S(&l), I64S(&d2)}, out[1];
    memset(out, 0, sizeof out);
    fbx_status *st = fbx_ir_infer_node(&n, in2, 3, out, 1);
    /* (2^64 - 1) / 2^62 rounded up = 4 elements: INT64_MIN, -2^62, 0, 2^62 */
    CHECK(!st && out[0].rank == 1 && out[0].dims[0] == 4, "Range INT64_MIN..INT64_MAX step 2^62: %s dims %lld",
          st ? fbx_status_message(st) : "ok", (long long)out[0].dims[0]);
    fbx_status_free(st);
  }
  {
    fbx_ir_node n = N(FBX_IR_OP_ONE_HOT, 3);
    n.params.axis.axis = -1;
    float depth = 1e30f, vals[2] = {0, 1};
    int64_t one = 1, two = 2;
    fbx_tensor in[3] = {F(3), T(FBX_DTYPE_F32, 1, &one, &depth), T(FBX_DTYPE_F32, 1, &two, vals)};
    expect_fail("OneHot depth 1e30", &n, in, 3, "too large");
  }
}

/* ---- Slice against a naive walk: i = start; while (step > 0 ? i < end : i > end) i += step ---- */
static int64_t naive_slice(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first) {
  __int128 s = start, e = end, d = dim;
  if (s < 0) s += d;
  if (e < 0) e += d;
  if (step > 0) {
    s = s < 0 ? 0 : s > d ? d : s;
    e = e < 0 ? 0 : e > d ? d : e;
  } else {
    s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
    e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
  }
  int64_t n = 0;
  *first = -1;
  for (__int128 i = s; step > 0 ? i < e : i > e; i += step) {
    if (n == 0) *first = (int64_t)i;
    if (++n > 64) break; /* dims here are small */
  }
  return n;
}

static void check_slice(void) {
  const int64_t dims[] = {0, 1, 2, 5, 7};
  const int64_t vals[] = {INT64_MIN, INT64_MIN + 1, -(INT64_MAX), -8, -5, -2, -1, 0, 1, 2, 4, 5, 6, 8,
                          INT64_MAX - 1, INT64_MAX};
  const int64_t steps[] = {INT64_MIN, -(INT64_MAX), -(INT64_C(1) << 62), -3, -2, -1, 1, 2, 3,
                           INT64_C(1) << 62, INT64_MAX};
  int nv = (int)(sizeof vals / 8), bad = 0, total = 0;
  for (size_t di = 0; di < sizeof dims / 8; di++)
    for (int a = 0; a < nv; a++)
      for (int b = 0; b < nv; b++)
        for (size_t k = 0; k < sizeof steps / 8; k++) {
          int64_t first, f2 = -7, want = naive_slice(dims[di], vals[a], vals[b], steps[k], &first);
          int64_t got = fbx_ir_slice_resolve(dims[di], vals[a], vals[b], steps[k], &f2);
          total++;
          if (got != want || (want > 0 && f2 != first)) {
            if (bad++ < 8)
              fprintf(stderr, "slice dim %lld start %lld end %lld step %lld: got %lld (first %lld), want %lld (%lld)\n",
                      (long long)dims[di], (long long)vals[a], (long long)vals[b], (long long)steps[k],
                      (long long)got, (long long)f2, (long long)want, (long long)first);
          }
        }
  CHECK(bad == 0, "slice: %d of %d cases differ from the naive walk", bad, total);
  printf("ok   slice: %d start/end/step cases match the naive walk\n", total);

  /* the reported case through inference: dim 5, start -1, end INT64_MIN, step INT64_MIN -> 1 */
  fbx_ir_node n = N(FBX_IR_OP_SLICE, 5);
  int64_t st[1] = {-1}, en[1] = {INT64_MIN}, ax[1] = {0}, sp[1] = {INT64_MIN};
  fbx_tensor in[5] = {F(5), I64V(1, st), I64V(1, en), I64V(1, ax), I64V(1, sp)}, out[1];
  memset(out, 0, sizeof out);
  fbx_status *s = fbx_ir_infer_node(&n, in, 5, out, 1);
  CHECK(!s && out[0].dims[0] == 1, "Slice step INT64_MIN: %s, %lld elements (want 1)", s ? fbx_status_message(s) : "ok",
        (long long)out[0].dims[0]);
  fbx_status_free(s);
  sp[0] = -INT64_MAX;
  memset(out, 0, sizeof out);
  s = fbx_ir_infer_node(&n, in, 5, out, 1);
  CHECK(!s && out[0].dims[0] == 1, "Slice step -(2^63-1): %lld elements (want 1)", (long long)out[0].dims[0]);
  fbx_status_free(s);
}

int main(void) {
  check_counts();
  check_slice();
  printf("ir hostile: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
