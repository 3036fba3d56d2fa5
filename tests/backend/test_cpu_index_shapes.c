/* test_cpu_index_shapes — the element-wise index kernels refuse operands whose shapes would make
 * them read or write past a buffer, and still compute the valid cases (naive references here).
 * Found by the fuzzer (tests/fuzz): a ScatterElements model whose updates were 1x2 for 1x4
 * indices read past updates (ASan heap-buffer-overflow in fbx__sc_apply). */
#include "cpu_test_util.h"

static void expect_invalid(const char *what, fbx_status *st) {
  check(st && fbx_status_code_of(st) == FBX_STATUS_INVALID_ARG, "%s: want INVALID_ARG, got %s", what,
        st ? fbx_status_message(st) : "success");
  fbx_status_free(st);
}

static void test_scatter_elements(void) {
  fbx_ir_params p = {.scatter = {.axis = 1, .reduction = 0}};
  /* valid: data 2x5, indices/updates 2x3 along axis 1 */
  fbx_tensor in[3] = {T(FBX_DTYPE_F32, 2, 5), T(FBX_DTYPE_I64, 2, 3), T(FBX_DTYPE_F32, 2, 3)};
  fbx_tensor y = T(FBX_DTYPE_F32, 2, 5);
  frand(&in[0]);
  frand(&in[2]);
  static const int64_t idx[6] = {4, 0, -1, 1, 3, 2};
  memcpy(in[1].data, idx, sizeof idx);
  run_ok("scatter_elements valid", FBX_IR_OP_SCATTER_ELEMENTS, &p, in, 3, &y, 1);
  double ref[10];
  for (int i = 0; i < 10; i++) ref[i] = F(&in[0])[i];
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < 3; j++) {
      int64_t c = idx[r * 3 + j] < 0 ? idx[r * 3 + j] + 5 : idx[r * 3 + j];
      ref[r * 5 + c] = F(&in[2])[r * 3 + j];
    }
  fclose_arr(F(&y), ref, 10, 0, "scatter_elements valid values");
  /* updates 2x2 for indices 2x3: reads past updates */
  fbx_tensor small = T(FBX_DTYPE_F32, 2, 2);
  fbx_tensor bad[3] = {in[0], in[1], small};
  expect_invalid("scatter_elements updates shape != indices shape",
                 run_node(FBX_IR_OP_SCATTER_ELEMENTS, &p, bad, 3, &y, 1, NULL));
  /* indices 3x3 (dim 0 > data's 2): writes past data */
  fbx_tensor ind3 = T(FBX_DTYPE_I64, 3, 3), upd3 = T(FBX_DTYPE_F32, 3, 3);
  fbx_tensor bad2[3] = {in[0], ind3, upd3};
  expect_invalid("scatter_elements indices dim > data dim off the axis",
                 run_node(FBX_IR_OP_SCATTER_ELEMENTS, &p, bad2, 3, &y, 1, NULL));
  tfree(&small);
  tfree(&ind3);
  tfree(&upd3);
  for (int i = 0; i < 3; i++) tfree(&in[i]);
  tfree(&y);
}

static void test_gather_elements(void) {
  fbx_ir_params p = {.axis = {.axis = 0}};
  fbx_tensor x = T(FBX_DTYPE_F32, 3, 2), ind = T(FBX_DTYPE_I64, 2, 3), y = T(FBX_DTYPE_F32, 2, 3);
  frand(&x);
  fbx_tensor in[2] = {x, ind};
  /* indices 2x3 on data 3x2 along axis 0: dim 1 (3) > data's (2) reads past data */
  expect_invalid("gather_elements indices dim > data dim off the axis",
                 run_node(FBX_IR_OP_GATHER_ELEMENTS, &p, in, 2, &y, 1, NULL));
  /* valid: indices 2x2 */
  fbx_tensor ind2 = T(FBX_DTYPE_I64, 2, 2), y2 = T(FBX_DTYPE_F32, 2, 2);
  static const int64_t idx[4] = {2, 0, -1, 1};
  memcpy(ind2.data, idx, sizeof idx);
  fbx_tensor in2[2] = {x, ind2};
  run_ok("gather_elements valid", FBX_IR_OP_GATHER_ELEMENTS, &p, in2, 2, &y2, 1);
  double ref[4];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      int64_t r = idx[i * 2 + j] < 0 ? idx[i * 2 + j] + 3 : idx[i * 2 + j];
      ref[i * 2 + j] = F(&x)[r * 2 + j];
    }
  fclose_arr(F(&y2), ref, 4, 0, "gather_elements valid values");
  tfree(&x);
  tfree(&ind);
  tfree(&y);
  tfree(&ind2);
  tfree(&y2);
}

static void test_scatter_nd(void) {
  fbx_ir_params p = {.scatter = {.axis = 0, .reduction = 0}};
  /* data 4x3, indices 2x1 (rows), updates must be 2x3; give 2x2 */
  fbx_tensor x = T(FBX_DTYPE_F32, 4, 3), ind = T(FBX_DTYPE_I64, 2, 1), u = T(FBX_DTYPE_F32, 2, 2);
  fbx_tensor y = T(FBX_DTYPE_F32, 4, 3);
  L(&ind)[0] = 3;
  L(&ind)[1] = 0;
  fbx_tensor in[3] = {x, ind, u};
  expect_invalid("scatter_nd updates too small", run_node(FBX_IR_OP_SCATTER_ND, &p, in, 3, &y, 1, NULL));
  fbx_tensor u2 = T(FBX_DTYPE_F32, 2, 3);
  frand(&x);
  frand(&u2);
  fbx_tensor in2[3] = {x, ind, u2};
  run_ok("scatter_nd valid", FBX_IR_OP_SCATTER_ND, &p, in2, 3, &y, 1);
  double ref[12];
  for (int i = 0; i < 12; i++) ref[i] = F(&x)[i];
  for (int j = 0; j < 3; j++) ref[3 * 3 + j] = F(&u2)[j], ref[0 * 3 + j] = F(&u2)[3 + j];
  fclose_arr(F(&y), ref, 12, 0, "scatter_nd valid values");
  tfree(&x);
  tfree(&ind);
  tfree(&u);
  tfree(&u2);
  tfree(&y);
}

int main(void) {
  test_setup(1);
  test_scatter_elements();
  test_gather_elements();
  test_scatter_nd();
  return test_finish("cpu index shapes");
}
