// Elementwise programs: one thread per output element runs the whole
// program (a fused chain, or a single EW1/EW2/EW3 op as a one-instruction
// program) in registers, reading the program from its parameters. The
// interpreter runs whatever cuda_ew_gen.c could not compile with NVRTC (no
// NVRTC library, FUSEBOX_CUDA_NVRTC=off, a compile failure); both share the
// op semantics of cuda_ew_ops.cuh. Float math is fp32, as on the CPU.
#include <math.h>

#include "cuda_kernels.h"
#include "../../ir/ir_ops.h"

namespace {

#define FBX_EW_FN __device__
#include "cuda_ew_ops.cuh"

__global__ void ew_kernel(const fbx_cuda_ew_args a) {
  reg R[FBX_CUDA_EW_MAX_REGS];
  unsigned char K[FBX_CUDA_EW_MAX_REGS];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n;
       i += (long long)gridDim.x * blockDim.x) {
    long long idx[FBX_CUDA_RANK];
    long long rem = i;
    for (int d = a.rank - 1; d >= 0; d--) {
      idx[d] = rem % a.out_dims[d];
      rem /= a.out_dims[d];
    }
    for (int k = 0; k < a.n_in; k++) {
      long long off = i;
      if (!a.in_same[k]) {
        off = 0;
        for (int d = 0; d < a.rank; d++) off += idx[d] * a.in_strides[k][d];
      }
      R[k] = load(a.in[k], a.in_ek[k], off);
      K[k] = a.in_ek[k];
    }
    for (int j = 0; j < a.n_ins; j++) {
      const fbx_cuda_ew_ins in = a.prog ? a.prog[j] : a.inline_prog[j];
      R[a.n_in + j] = exec(in, R, K);
      K[a.n_in + j] = (unsigned char)in.ek;
    }
    store(a.out, a.out_ek, i, R[a.out_reg]);
  }
}

}  // namespace

static_assert(sizeof(fbx_cuda_ew_args) <= 4096, "kernel parameters are limited to 4 KiB");

extern "C" int fbx_cuda_launch_ew(const fbx_cuda_ew_args *a, cudaStream_t s) {
  if (a->n <= 0) return 0;
  long long blocks = (a->n + 255) / 256;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  ew_kernel<<<(unsigned)blocks, 256, 0, s>>>(*a);
  return (int)cudaGetLastError();
}
