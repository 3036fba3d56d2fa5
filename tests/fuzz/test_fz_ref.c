// test_fz_ref — the fuzz target's independent reference (fz_ref.h) on the cases where the
// fuzz classes make ORT part from the ONNX spec, against values worked out here by hand from
// the spec (and numpy):
//   nan      Clip with a NaN min is NaN everywhere (np.clip); min > max gives max
//   bigint   Slice step -2, start -1, end INT64_MAX on a length-2 axis: 0 elements (the end
//            clamps to dim - 1 = 1 = the start); step INT64_MIN from 1: one element
//   samepad  MaxPool SAME_UPPER, kernel 2, dilation 2 on width 5: out ceil(5/1) = 5, total pad
//            (5-1)*1 + 3 - 5 = 2 split 1/1, taps o-1 and o+1
//   invalid  MaxPool VALID 3x3 on 2x2: floor((2-3)/1)+1 = 0, an empty [1, 1, 0, 0]
//   empty    Pad constant of an empty [0, 2] by one row each side: [2, 2] zeros; reflect of an
//            empty dim that needs data declines (no value), as the spec has none
// and the graph walk: a node without a naive op takes ORT's output only where its inputs equal
// ORT's; otherwise the reference has no value.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz/fz_gen.h"
#include "fuzz/fz_ref.h"

#include "common/check.h"

static fz_model g_m;

static void begin(void) {
  fz_model_free(&g_m);
  g_m.recorded = 1;
}

static void input(const char *name, int rank, const int64_t *d, const float *v) {
  fbx_host_tensor *t = &g_m.inputs[g_m.n_inputs++];
  char *e = fbx_host_tensor_alloc(t, name, FBX_HOST_F32, rank, d);
  CHECK(!e, "alloc %s", name);
  if (!e && t->nbytes) memcpy(t->data, v, t->nbytes);
}

static void cst(const char *name, int dtype, int rank, const int64_t *d, const void *v) {
  fbx_host_tensor *t = &g_m.consts[g_m.n_consts++];
  char *e = fbx_host_tensor_alloc(t, name, dtype, rank, d);
  CHECK(!e, "alloc %s", name);
  if (!e && t->nbytes) memcpy(t->data, v, t->nbytes);
}

static fz_rnode *node(const char *op, const char *const *ins, int n_in, const char *out) {
  fz_rnode *n = &g_m.nodes[g_m.n_nodes++];
  memset(n, 0, sizeof *n);
  n->op = op;
  n->n_in = n_in;
  for (int i = 0; i < n_in; i++) snprintf(n->in[i], sizeof n->in[i], "%s", ins[i]);
  n->n_out = 1;
  snprintf(n->out[0], sizeof n->out[0], "%s", out);
  return n;
}

static void attr_ints(fz_rnode *n, const char *name, const int64_t *v, int k) {
  fz_rattr *a = &n->at[n->n_at++];
  a->name = name;
  a->type = 7;
  a->n = k;
  for (int i = 0; i < k; i++) a->ints[i] = v[i];
}
static void attr_s(fz_rnode *n, const char *name, const char *s) {
  fz_rattr *a = &n->at[n->n_at++];
  a->name = name;
  a->type = 3;
  a->s = s;
}

// Run the reference for output y; check its shape and values (NaN == NaN). want NULL: expect
// no value.
static void expect(const char *what, const fbx_host_tensor *ort, size_t n_ort, int rank, const int64_t *d,
                   const double *want) {
  const char *names[1] = {"y"};
  char why[300];
  fbx_host_tensor *r = fz_ref_run(&g_m, ort, n_ort, names, 1, why, sizeof why);
  if (!d) {
    CHECK(r == NULL, "%s: the reference gave a value where it has none", what);
    fbx_host_tensors_free(r, r ? 1 : 0);
    return;
  }
  CHECK(r != NULL, "%s: no reference value: %s", what, why);
  if (!r) return;
  int same = r[0].rank == rank;
  for (int i = 0; same && i < rank; i++) same = r[0].dims[i] == d[i];
  CHECK(same, "%s: shape", what);
  size_t n = fbx_host_tensor_numel(&r[0]);
  for (size_t i = 0; same && i < n; i++) {
    double g = fbx_host_tensor_get(&r[0], i);
    CHECK((isnan(g) && isnan(want[i])) || fabs(g - want[i]) < 1e-6, "%s: y[%zu] = %g, want %g", what, i, g, want[i]);
  }
  fbx_host_tensors_free(r, 1);
}

int main(void) {
  const float nanf_ = NAN;
  {  // Clip
    const float x[4] = {1, -3, NAN, 2};
    const float lo[3] = {NAN, -1, 2}, hi[3] = {1, 1, 1};
    const double want[3][4] = {{NAN, NAN, NAN, NAN}, {1, -1, NAN, 1}, {1, 1, NAN, 1}};
    for (int c = 0; c < 3; c++) {
      begin();
      input("x", 1, (int64_t[]){4}, x);
      cst("lo", FBX_HOST_F32, 0, NULL, &lo[c]);
      cst("hi", FBX_HOST_F32, 0, NULL, &hi[c]);
      node("Clip", (const char *[]){"x", "lo", "hi"}, 3, "y");
      char what[64];
      snprintf(what, sizeof what, "Clip min %g max %g", (double)lo[c], (double)hi[c]);
      expect(what, NULL, 0, 1, (int64_t[]){4}, want[c]);
    }
  }
  {  // Slice
    const float x[2] = {10, 20};
    const int64_t st[3] = {-1, 1, 1}, en[3] = {INT64_MAX, INT64_MIN, INT64_MIN}, sp[3] = {-2, -1, INT64_MIN};
    const int64_t n_want[3] = {0, 2, 1};
    const double want[3][2] = {{0, 0}, {20, 10}, {20, 0}};
    for (int c = 0; c < 3; c++) {
      begin();
      input("x", 1, (int64_t[]){2}, x);
      const int64_t zero = 0, one = 1;
      cst("st", FBX_HOST_I64, 1, &one, &st[c]);
      cst("en", FBX_HOST_I64, 1, &one, &en[c]);
      cst("ax", FBX_HOST_I64, 1, &one, &zero);
      cst("sp", FBX_HOST_I64, 1, &one, &sp[c]);
      node("Slice", (const char *[]){"x", "st", "en", "ax", "sp"}, 5, "y");
      char what[80];
      snprintf(what, sizeof what, "Slice start %lld end %lld step %lld", (long long)st[c], (long long)en[c],
               (long long)sp[c]);
      expect(what, NULL, 0, 1, &n_want[c], want[c]);
    }
  }
  {  // MaxPool SAME_UPPER dilated; VALID wider than the input
    begin();
    input("x", 4, (int64_t[]){1, 1, 1, 5}, (const float[]){1, 5, 2, 4, 3});
    fz_rnode *n = node("MaxPool", (const char *[]){"x"}, 1, "y");
    attr_ints(n, "kernel_shape", (int64_t[]){1, 2}, 2);
    attr_ints(n, "dilations", (int64_t[]){1, 2}, 2);
    attr_s(n, "auto_pad", "SAME_UPPER");
    expect("MaxPool SAME_UPPER k2 d2 on 5", NULL, 0, 4, (int64_t[]){1, 1, 1, 5}, (const double[]){5, 2, 5, 3, 4});
    begin();
    input("x", 4, (int64_t[]){1, 1, 2, 2}, (const float[]){1, 2, 3, 4});
    n = node("MaxPool", (const char *[]){"x"}, 1, "y");
    attr_ints(n, "kernel_shape", (int64_t[]){3, 3}, 2);
    attr_s(n, "auto_pad", "VALID");
    expect("MaxPool VALID 3x3 on 2x2", NULL, 0, 4, (int64_t[]){1, 1, 0, 0}, NULL);
    // NaN in a window: np.max is NaN
    begin();
    input("x", 4, (int64_t[]){1, 1, 1, 3}, (const float[]){1, nanf_, 2});
    n = node("MaxPool", (const char *[]){"x"}, 1, "y");
    attr_ints(n, "kernel_shape", (int64_t[]){1, 2}, 2);
    expect("MaxPool with a NaN", NULL, 0, 4, (int64_t[]){1, 1, 1, 2}, (const double[]){NAN, NAN});
  }
  {  // Pad of an empty dim
    begin();
    input("x", 2, (int64_t[]){0, 2}, NULL);
    const int64_t four = 4, pads[4] = {1, 0, 1, 0};
    cst("p", FBX_HOST_I64, 1, &four, pads);
    fz_rnode *n = node("Pad", (const char *[]){"x", "p"}, 2, "y");
    attr_s(n, "mode", "constant");
    expect("Pad constant of [0, 2]", NULL, 0, 2, (int64_t[]){2, 2}, (const double[]){0, 0, 0, 0});
    n->at[0].s = "reflect";
    expect("Pad reflect of [0, 2] (no value)", NULL, 0, 0, NULL, NULL);
  }
  {  // the walk: Conv has no naive op; ORT's value is taken only where its inputs match
    begin();
    input("x", 1, (int64_t[]){3}, (const float[]){3, 1, 2});
    node("Relu", (const char *[]){"x"}, 1, "r");
    node("Conv", (const char *[]){"r"}, 1, "y");
    fbx_host_tensor ort[2];
    memset(ort, 0, sizeof ort);
    char *e = fbx_host_tensor_alloc(&ort[0], "r", FBX_HOST_F32, 1, (int64_t[]){3});
    if (!e) e = fbx_host_tensor_alloc(&ort[1], "y", FBX_HOST_F32, 1, (int64_t[]){1});
    CHECK(!e, "alloc");
    if (!e) {
      memcpy(ort[0].data, (const float[]){3, 1, 2}, 12);
      ((float *)ort[1].data)[0] = 3;
      expect("Conv after Relu: ORT's value", ort, 2, 1, (int64_t[]){1}, (const double[]){3});
      ((float *)ort[0].data)[1] = 7;  // ORT's Relu output differs from the reference's
      expect("Conv on other inputs than ORT's: no value", ort, 2, 0, NULL, NULL);
      expect("Conv without ORT: no value", NULL, 0, 0, NULL, NULL);
    }
    for (int i = 0; i < 2; i++) fbx_host_tensor_free(&ort[i]);
  }
  fz_model_free(&g_m);
  printf("fz_ref: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
