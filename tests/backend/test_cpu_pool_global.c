/* GlobalAveragePool / GlobalMaxPool on the CPU backend against a naive double
 * reference written here: plane sizes around the kernel's 16-lane steps and
 * 1024-element chunks (1, 15, 16, 17, 1023..1025, 5000), several planes,
 * serial and parallel sizes, rank 3 and 4, and large-offset data (the chunked
 * sums keep float32 accuracy where one float accumulator would not). */
#include <math.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "common/check.h"

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static float rnd_f(void) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(g_rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

static void run(fbx_backend *be, fbx_ir_op op, int64_t N, int64_t C, int64_t H, int64_t W, int rank, float offset) {
  int64_t S = H * W, planes = N * C;
  float *x = malloc(sizeof(float) * (size_t)(planes * S)), *y = malloc(sizeof(float) * (size_t)planes);
  for (int64_t i = 0; i < planes * S; i++) x[i] = offset + rnd_f();
  fbx_tensor in = {.dtype = FBX_DTYPE_F32, .rank = rank, .data = x}, out = {.dtype = FBX_DTYPE_F32, .rank = rank, .data = y};
  in.dims[0] = out.dims[0] = N;
  in.dims[1] = out.dims[1] = C;
  if (rank == 4) in.dims[2] = H, in.dims[3] = W, out.dims[2] = out.dims[3] = 1;
  else in.dims[2] = S, out.dims[2] = 1;
  fbx_ir_node nd = {.op = op, .n_inputs = 1, .n_outputs = 1};
  fbx_kernel_info info = {0};
  fbx_status *st = be->vt->run_node(be, &nd, NULL, &in, 1, &out, 1, &info);
  CHECK(!st, "%s: %s", fbx_ir_op_name(op), st ? fbx_status_message(st) : "");
  if (st) fbx_status_free(st);
  int64_t bad = 0;
  for (int64_t p = 0; p < planes && !st; p++) {
    double acc = op == FBX_IR_OP_GLOBAL_MAXPOOL ? -INFINITY : 0.0;
    for (int64_t i = 0; i < S; i++)
      acc = op == FBX_IR_OP_GLOBAL_MAXPOOL ? fmax(acc, x[p * S + i]) : acc + x[p * S + i];
    if (op != FBX_IR_OP_GLOBAL_MAXPOOL) acc /= (double)S;
    if (fabs(y[p] - acc) > 2e-6 * fmax(1.0, fabs(acc))) bad++;
  }
  CHECK(bad == 0, "%s N%lld C%lld S%lld rank %d offset %g: %lld of %lld planes wrong", fbx_ir_op_name(op),
        (long long)N, (long long)C, (long long)S, rank, offset, (long long)bad, (long long)planes);
  free(x);
  free(y);
}

int main(void) {
  fbx_cpu_options o = {.threads = 2};
  fbx_backend *be = NULL;
  fbx_status *st = fbx_cpu_backend_create(&o, &be);
  if (st) {
    fprintf(stderr, "backend: %s\n", fbx_status_message(st));
    return 1;
  }
  const int64_t hw[][2] = {{1, 1}, {3, 5}, {4, 4}, {1, 17}, {31, 33}, {32, 32}, {25, 41}, {50, 100}, {2, 96}};
  for (size_t k = 0; k < sizeof hw / sizeof hw[0]; k++)
    for (int rank = 3; rank <= 4; rank++) {
      run(be, FBX_IR_OP_GLOBAL_AVGPOOL, 1, 3, hw[k][0], hw[k][1], rank, 0.f);
      run(be, FBX_IR_OP_GLOBAL_AVGPOOL, 2, 40, hw[k][0], hw[k][1], rank, 100.f); /* parallel when large */
      run(be, FBX_IR_OP_GLOBAL_MAXPOOL, 2, 5, hw[k][0], hw[k][1], rank, 0.f);
    }
  fbx_backend_destroy(be);
  printf("cpu global pool: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
