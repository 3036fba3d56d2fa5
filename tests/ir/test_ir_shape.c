/* IR shape inference against hand-computed shapes: broadcasting, MatMul
 * (1-D, batch, trans_b), Reshape 0/-1, Slice (negative steps, INT64 ends),
 * Conv auto_pad, pool ceil_mode, Resize, Gather, Concat/Split, and errors. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "exec/exec_compiled.h"

static int passed, failed;

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
static fbx_tensor ABSENT(void) { fbx_tensor t; memset(&t, 0, sizeof t); t.rank = -1; return t; }

static fbx_ir_node N(fbx_ir_op op, int n_in, int n_out) {
  fbx_ir_node n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.n_inputs = n_in;
  n.n_outputs = n_out;
  n.name = "t";
  n.onnx_op = fbx_ir_op_name(op);
  return n;
}

/* Checks output 0 (or output `o`) against an expected shape. */
static void expect(const char *what, const fbx_ir_node *n, fbx_tensor *in, int n_in, int n_out, int o,
                   fbx_dtype dt, int rank, const int64_t *dims) {
  fbx_tensor out[8];
  memset(out, 0, sizeof out);
  fbx_status *st = fbx_ir_infer_node(n, in, n_in, out, n_out);
  bool ok = !st && out[o].rank == rank && out[o].dtype == dt;
  for (int i = 0; ok && i < rank; i++) ok = out[o].dims[i] == dims[i];
  printf("%s %-48s", ok ? "ok  " : "FAIL", what);
  if (st) printf(" error: %s", fbx_status_message(st));
  else if (!ok) {
    printf(" got %s rank %d [", fbx_dtype_name(out[o].dtype), out[o].rank);
    for (int i = 0; i < out[o].rank; i++) printf(" %lld", (long long)out[o].dims[i]);
    printf(" ]");
  }
  printf("\n");
  fbx_status_free(st);
  ok ? passed++ : failed++;
}
#define EXPECT(what, n, in, nin, dt, ...) \
  expect(what, n, in, nin, 1, 0, dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), (int64_t[]){__VA_ARGS__})

static void expect_error(const char *what, const fbx_ir_node *n, fbx_tensor *in, int n_in, int n_out) {
  fbx_tensor out[8];
  memset(out, 0, sizeof out);
  fbx_status *st = fbx_ir_infer_node(n, in, n_in, out, n_out);
  printf("%s %-48s %s\n", st ? "ok  " : "FAIL", what, st ? fbx_status_message(st) : "(no error)");
  st ? passed++ : failed++;
  fbx_status_free(st);
}

int main(void) {
  /* ---- elementwise ---- */
  fbx_ir_node add = N(FBX_IR_OP_ADD, 2, 1);
  fbx_tensor b1[2] = {F(2, 1, 4), F(3, 1)};
  EXPECT("Add broadcast (2,1,4)+(3,1)", &add, b1, 2, FBX_DTYPE_F32, 2, 3, 4);
  fbx_tensor b2[2] = {F(5), T(FBX_DTYPE_F32, 0, NULL, NULL)};
  EXPECT("Add (5)+scalar", &add, b2, 2, FBX_DTYPE_F32, 5);
  fbx_tensor b3[2] = {F(2, 3), F(4, 3)};
  expect_error("Add (2,3)+(4,3) must fail", &add, b3, 2, 1);
  fbx_ir_node less = N(FBX_IR_OP_LESS, 2, 1);
  EXPECT("Less outputs bool", &less, b1, 2, FBX_DTYPE_BOOL, 2, 3, 4);
  fbx_ir_node cast = N(FBX_IR_OP_CAST, 1, 1);
  cast.params.ew.to = FBX_DTYPE_I64;
  EXPECT("Cast to int64", &cast, b1, 1, FBX_DTYPE_I64, 2, 1, 4);
  fbx_ir_node where = N(FBX_IR_OP_WHERE, 3, 1);
  fbx_tensor w3[3] = {T(FBX_DTYPE_BOOL, 2, (int64_t[]){4, 1}, NULL), T(FBX_DTYPE_F16, 1, (int64_t[]){5}, NULL), F(1)};
  EXPECT("Where dtype of input 1, broadcast", &where, w3, 3, FBX_DTYPE_F16, 4, 5);

  /* ---- matmul ---- */
  fbx_ir_node mm = N(FBX_IR_OP_MATMUL, 2, 1);
  fbx_tensor m1[2] = {F(4), F(2, 4, 3)};
  EXPECT("MatMul 1-D x (2,4,3) -> (2,3)", &mm, m1, 2, FBX_DTYPE_F32, 2, 3);
  fbx_tensor m2[2] = {F(2, 5, 4), F(4)};
  EXPECT("MatMul (2,5,4) x 1-D -> (2,5)", &mm, m2, 2, FBX_DTYPE_F32, 2, 5);
  fbx_tensor m3[2] = {F(3, 1, 2, 4), F(5, 4, 6)};
  EXPECT("MatMul batch broadcast", &mm, m3, 2, FBX_DTYPE_F32, 3, 5, 2, 6);
  fbx_ir_node mmt = mm;
  mmt.params.matmul.trans_b = 1;
  fbx_tensor m4[2] = {F(7, 4), F(6, 4)};
  EXPECT("MatMul trans_b (7,4)x(6,4)^T", &mmt, m4, 2, FBX_DTYPE_F32, 7, 6);
  fbx_tensor m5[2] = {F(4), F(4)};
  EXPECT("MatMul 1-D x 1-D -> scalar", &mm, m5, 2, FBX_DTYPE_F32);
  fbx_tensor m6[2] = {F(2, 3), F(4, 5)};
  expect_error("MatMul K mismatch must fail", &mm, m6, 2, 1);

  /* ---- reshape ---- */
  fbx_ir_node rs = N(FBX_IR_OP_RESHAPE, 2, 1);
  int64_t s1[] = {0, -1, 4};
  fbx_tensor r1[2] = {F(2, 3, 8), I64V(3, s1)};
  EXPECT("Reshape (2,3,8) to [0,-1,4]", &rs, r1, 2, FBX_DTYPE_F32, 2, 6, 4);
  int64_t s2[] = {0, 5};
  fbx_tensor r2[2] = {F(0, 5), I64V(2, s2)};
  rs.params.reshape.allowzero = 1;
  EXPECT("Reshape allowzero (0,5) to [0,5]", &rs, r2, 2, FBX_DTYPE_F32, 0, 5);
  rs.params.reshape.allowzero = 0;
  int64_t s3[] = {-1, 7};
  fbx_tensor r3[2] = {F(2, 3, 8), I64V(2, s3)};
  expect_error("Reshape 48 elems to [-1,7] must fail", &rs, r3, 2, 1);

  /* ---- slice ---- */
  fbx_ir_node sl = N(FBX_IR_OP_SLICE, 5, 1);
  int64_t st1[] = {-1, 0}, en1[] = {INT64_MIN, INT64_MAX}, ax1[] = {0, 1}, sp1[] = {-1, 2};
  fbx_tensor q1[5] = {F(10, 7), I64V(2, st1), I64V(2, en1), I64V(2, ax1), I64V(2, sp1)};
  EXPECT("Slice [-1:INT64_MIN:-1, 0:MAX:2] of (10,7)", &sl, q1, 5, FBX_DTYPE_F32, 10, 4);
  int64_t st2[] = {8}, en2[] = {2}, ax2[] = {-1}, sp2[] = {-3};
  fbx_tensor q2[5] = {F(3, 10), I64V(1, st2), I64V(1, en2), I64V(1, ax2), I64V(1, sp2)};
  EXPECT("Slice 8:2:-3 on axis -1 (10) -> 2", &sl, q2, 5, FBX_DTYPE_F32, 3, 2);
  int64_t st3[] = {-100}, en3[] = {3};
  fbx_tensor q3[3] = {F(5, 6), I64V(1, st3), I64V(1, en3)};
  EXPECT("Slice -100:3 clamps -> 3", &sl, q3, 3, FBX_DTYPE_F32, 3, 6);

  /* ---- conv / pool ---- */
  fbx_ir_node cv = N(FBX_IR_OP_CONV, 2, 1);
  cv.params.conv.nd = 2;
  cv.params.conv.strides[0] = cv.params.conv.strides[1] = 2;
  cv.params.conv.auto_pad = FBX_IR_PAD_SAME_UPPER;
  fbx_tensor c1[2] = {F(1, 3, 7, 8), F(16, 3, 3, 3)};
  EXPECT("Conv SAME_UPPER stride 2 on 7x8", &cv, c1, 2, FBX_DTYPE_F32, 1, 16, 4, 4);
  int64_t k[3], pads[6], os[3];
  fbx_status *gst = fbx_ir_conv_geometry(&cv, &c1[0], &c1[1], k, pads, os);
  bool gok = !gst && pads[0] == 1 && pads[2] == 1 && pads[1] == 0 && pads[3] == 1;
  printf("%s %-48s\n", gok ? "ok  " : "FAIL", "Conv SAME_UPPER pads (1,0 | 1,1)");
  gok ? passed++ : failed++;
  fbx_status_free(gst);
  cv.params.conv.auto_pad = FBX_IR_PAD_NOTSET;
  cv.params.conv.strides[0] = cv.params.conv.strides[1] = 1;
  cv.params.conv.dilations[0] = cv.params.conv.dilations[1] = 2;
  cv.params.conv.pads[0] = cv.params.conv.pads[2] = 1;
  EXPECT("Conv dilation 2, pad 1 on H only", &cv, c1, 2, FBX_DTYPE_F32, 1, 16, 5, 4);
  cv.params.conv.auto_pad = FBX_IR_PAD_VALID;
  cv.params.conv.dilations[0] = cv.params.conv.dilations[1] = 1;
  EXPECT("Conv VALID ignores pads", &cv, c1, 2, FBX_DTYPE_F32, 1, 16, 5, 6);
  fbx_ir_node grp = N(FBX_IR_OP_CONV, 2, 1);
  grp.params.conv.group = 4;
  fbx_tensor c2[2] = {F(2, 8, 5, 5), F(12, 2, 1, 1)};
  EXPECT("Conv group 4, kernel from W", &grp, c2, 2, FBX_DTYPE_F32, 2, 12, 5, 5);

  fbx_ir_node mp = N(FBX_IR_OP_MAXPOOL, 1, 1);
  mp.params.conv.nd = 2;
  mp.params.conv.kernel[0] = mp.params.conv.kernel[1] = 3;
  mp.params.conv.strides[0] = mp.params.conv.strides[1] = 2;
  fbx_tensor p1[1] = {F(1, 4, 8, 8)};
  EXPECT("MaxPool k3 s2 floor on 8x8 -> 3x3", &mp, p1, 1, FBX_DTYPE_F32, 1, 4, 3, 3);
  mp.params.conv.ceil_mode = 1;
  EXPECT("MaxPool k3 s2 ceil_mode on 8x8 -> 4x4", &mp, p1, 1, FBX_DTYPE_F32, 1, 4, 4, 4);
  mp.params.conv.kernel[0] = mp.params.conv.kernel[1] = 2;
  mp.params.conv.pads[0] = mp.params.conv.pads[1] = 1;
  mp.params.conv.pads[2] = mp.params.conv.pads[3] = 1;
  fbx_tensor p2[1] = {F(1, 1, 5, 5)};
  /* (5+2-2)/2 = 2.5 -> ceil 3, +1 = 4; window 4 starts at 6 >= 5+1 -> dropped: 3 */
  EXPECT("MaxPool ceil_mode drops a window in the pad", &mp, p2, 1, FBX_DTYPE_F32, 1, 1, 3, 3);
  fbx_ir_node gap = N(FBX_IR_OP_GLOBAL_AVGPOOL, 1, 1);
  EXPECT("GlobalAveragePool", &gap, p1, 1, FBX_DTYPE_F32, 1, 4, 1, 1);

  fbx_ir_node ct = N(FBX_IR_OP_CONV_TRANSPOSE, 2, 1);
  ct.params.conv.nd = 2;
  ct.params.conv.strides[0] = ct.params.conv.strides[1] = 2;
  ct.params.conv.output_padding[0] = 1;
  fbx_tensor t1[2] = {F(1, 3, 4, 4), F(3, 5, 3, 3)};
  EXPECT("ConvTranspose s2 k3 output_padding 1", &ct, t1, 2, FBX_DTYPE_F32, 1, 5, 10, 9);

  /* ---- resize ---- */
  fbx_ir_node rz = N(FBX_IR_OP_RESIZE, 3, 1);
  float sc[] = {1, 1, 2.0f, 1.5f};
  int64_t four = 4;
  fbx_tensor z1[3] = {F(1, 3, 5, 5), ABSENT(), T(FBX_DTYPE_F32, 1, &four, sc)};
  EXPECT("Resize scales (2,1.5) on 5x5 -> 10x7", &rz, z1, 3, FBX_DTYPE_F32, 1, 3, 10, 7);
  int64_t sz[] = {1, 3, 9, 11};
  fbx_ir_node rz4 = N(FBX_IR_OP_RESIZE, 4, 1);
  fbx_tensor z2[4] = {F(1, 3, 5, 5), ABSENT(), ABSENT(), I64V(4, sz)};
  EXPECT("Resize sizes", &rz4, z2, 4, FBX_DTYPE_F32, 1, 3, 9, 11);

  /* ---- gather / concat / split / transpose / squeeze ---- */
  fbx_ir_node ga = N(FBX_IR_OP_GATHER, 2, 1);
  ga.params.axis.axis = 1;
  fbx_tensor g1[2] = {F(5, 6, 7), T(FBX_DTYPE_I64, 2, (int64_t[]){2, 3}, NULL)};
  EXPECT("Gather axis 1 indices (2,3)", &ga, g1, 2, FBX_DTYPE_F32, 5, 2, 3, 7);
  fbx_tensor g2[2] = {F(5, 6, 7), T(FBX_DTYPE_I64, 0, NULL, NULL)};
  EXPECT("Gather scalar index drops the axis", &ga, g2, 2, FBX_DTYPE_F32, 5, 7);
  fbx_ir_node cc = N(FBX_IR_OP_CONCAT, 3, 1);
  cc.params.axis.axis = 1;
  fbx_tensor k1[3] = {F(2, 3), F(2, 0), F(2, 5)};
  EXPECT("Concat axis 1 incl. empty", &cc, k1, 3, FBX_DTYPE_F32, 2, 8);
  fbx_ir_node sp = N(FBX_IR_OP_SPLIT, 1, 3);
  sp.params.axis.axis = 0;
  fbx_tensor sp_in[1] = {F(7, 2)};
  expect("Split 7 in 3 -> 3,3,1 (last)", &sp, sp_in, 1, 3, 2, FBX_DTYPE_F32, 2, (int64_t[]){1, 2});
  fbx_ir_node tr = N(FBX_IR_OP_TRANSPOSE, 1, 1);
  tr.params.transpose.perm[0] = 2, tr.params.transpose.perm[1] = 0, tr.params.transpose.perm[2] = 1;
  fbx_tensor tr_in[1] = {F(2, 3, 4)};
  EXPECT("Transpose perm (2,0,1)", &tr, tr_in, 1, FBX_DTYPE_F32, 4, 2, 3);
  fbx_ir_node us = N(FBX_IR_OP_UNSQUEEZE, 1, 1);
  us.params.axes.axes_mask = (1u << 0) | (1u << 3);
  EXPECT("Unsqueeze axes {0,3}", &us, tr_in, 1, FBX_DTYPE_F32, 1, 2, 3, 1, 4);
  fbx_ir_node rd = N(FBX_IR_OP_REDUCE_MEAN, 1, 1);
  rd.params.reduce.axes_mask = 1u << 1;
  rd.params.reduce.keepdims = 1;
  EXPECT("ReduceMean axis 1 keepdims", &rd, tr_in, 1, FBX_DTYPE_F32, 2, 1, 4);
  fbx_ir_node shp = N(FBX_IR_OP_SHAPE, 1, 1);
  shp.params.shape.start = -2;
  EXPECT("Shape start=-2", &shp, tr_in, 1, FBX_DTYPE_I64, 2);
  fbx_ir_node rg = N(FBX_IR_OP_RANGE, 3, 1);
  float r0 = 1.0f, r1v = 2.0f, rdl = 0.3f;
  fbx_tensor rg_in[3] = {T(FBX_DTYPE_F32, 0, NULL, &r0), T(FBX_DTYPE_F32, 0, NULL, &r1v), T(FBX_DTYPE_F32, 0, NULL, &rdl)};
  EXPECT("Range 1..2 step 0.3 -> 4", &rg, rg_in, 3, FBX_DTYPE_F32, 4);
  fbx_ir_node pd = N(FBX_IR_OP_PAD, 2, 1);
  int64_t pv[] = {1, -1, 2, 0};
  fbx_tensor pd_in[2] = {F(3, 4), I64V(4, pv)};
  EXPECT("Pad begins (1,-1) ends (2,0)", &pd, pd_in, 2, FBX_DTYPE_F32, 6, 3);
  fbx_ir_node ex = N(FBX_IR_OP_EXPAND, 2, 1);
  int64_t ev[] = {2, 1, 6};
  fbx_tensor ex_in[2] = {F(3, 1), I64V(3, ev)};
  EXPECT("Expand (3,1) to [2,1,6]", &ex, ex_in, 2, FBX_DTYPE_F32, 2, 3, 6);

  printf("ir: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
