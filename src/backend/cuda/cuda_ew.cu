// Elementwise programs: one thread per output element runs the whole
// program (a fused chain, or a single EW1/EW2/EW3 op as a one-instruction
// program) in registers, reading the program from its parameters. The
// interpreter runs whatever cuda_ew_gen.c could not compile with NVRTC (no
// NVRTC library, FUSEBOX_CUDA_NVRTC=off, a compile failure); both share the
// op semantics of cuda_ew_ops.cuh. Float math is fp32, as on the CPU.
#include <math.h>
#include <string.h>

#include "cuda_launch.cuh"
#include "../../ir/ir_ops.h"

namespace {

#define FBX_EW_FN __device__
#include "cuda_ew_ops.cuh"

// The small programs decode runs by the hundred per token (a residual Add, a
// SiLU, the rotary's Mul/Add, the mask arithmetic) launch a compact copy of
// the arguments: the full fbx_cuda_ew_args is ~3.3 KB of kernel parameters,
// which every launch moves, and its 128-register file lives in local memory.
template <int NI, int NR, int NP> struct ew_small {
  long long n;
  int rank, n_in, n_ins, out_reg, out_ek, idx32;
  long long out_dims[NR];
  long long in_strides[NI][NR];
  const void *in[NI];
  unsigned char in_ek[NI], in_same[NI];
  void *out;
  fbx_cuda_ew_ins prog[NP];
};
typedef ew_small<4, 4, 8> ew_small_t; // (<= 4 inputs, rank <= 4, <= 8 instructions: ~700 bytes)

// Output index i -> input k's element offset. 32-bit index math when every
// index fits (64-bit division is a long instruction sequence on the GPU).
template <typename A>
__device__ __forceinline__ long long in_off(const A &a, int k, long long i) {
  if (a.in_same[k]) return i;
  long long off = 0;
  if (a.idx32) {
    unsigned rem = (unsigned)i;
    for (int d = a.rank - 1; d >= 0; d--) {
      unsigned dim = (unsigned)a.out_dims[d], q = rem / dim;
      off += (long long)(rem - q * dim) * a.in_strides[k][d];
      rem = q;
    }
  } else {
    long long rem = i;
    for (int d = a.rank - 1; d >= 0; d--) {
      off += (rem % a.out_dims[d]) * a.in_strides[k][d];
      rem /= a.out_dims[d];
    }
  }
  return off;
}

__global__ void ew_small_kernel(const ew_small_t a) {
  fbx::pdl_enter();
  reg R[4 + 8];
  unsigned char K[4 + 8];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n;
       i += (long long)gridDim.x * blockDim.x) {
    for (int k = 0; k < a.n_in; k++) {
      R[k] = load(a.in[k], a.in_ek[k], in_off(a, k, i));
      K[k] = a.in_ek[k];
    }
    for (int j = 0; j < a.n_ins; j++) {
      R[a.n_in + j] = exec(a.prog[j], R, K);
      K[a.n_in + j] = (unsigned char)a.prog[j].ek;
    }
    store(a.out, a.out_ek, i, R[a.out_reg]);
  }
}

__global__ void ew_kernel(const fbx_cuda_ew_args a) {
  fbx::pdl_enter();
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
  if (a->n_in <= 4 && a->rank <= 4 && a->n_ins <= 8 && !a->prog) {
    ew_small_t b;
    memset(&b, 0, sizeof b);
    b.n = a->n;
    b.rank = a->rank;
    b.n_in = a->n_in;
    b.n_ins = a->n_ins;
    b.out_reg = a->out_reg;
    b.out_ek = a->out_ek;
    b.out = a->out;
    b.idx32 = a->n < (1LL << 31);
    for (int d = 0; d < a->rank; d++) b.out_dims[d] = a->out_dims[d];
    for (int k = 0; k < a->n_in; k++) {
      b.in[k] = a->in[k];
      b.in_ek[k] = a->in_ek[k];
      b.in_same[k] = a->in_same[k];
      for (int d = 0; d < a->rank; d++) b.in_strides[k][d] = a->in_strides[k][d];
    }
    for (int j = 0; j < a->n_ins; j++) b.prog[j] = a->inline_prog[j];
    fbx::launch(ew_small_kernel, (unsigned)blocks, 256, 0, s, b);
  } else {
    fbx::launch(ew_kernel, (unsigned)blocks, 256, 0, s, *a);
  }
  return (int)cudaGetLastError();
}
