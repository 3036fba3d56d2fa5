// Device helpers of the attention kernels (cuda_attention.cu: GQA prefill and
// the general decode kernel, RotaryEmbedding; cuda_attention_decode.cu: the
// warp-per-head decode kernel).
#ifndef FBX_CUDA_ATTENTION_CUH
#define FBX_CUDA_ATTENTION_CUH

#include <math.h>

#include "cuda_launch.cuh"

namespace fbx {
namespace attn {

constexpr int kThreads = 256;  // attention block: 8 warps
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// element i of rotary(x) (H values at one position; cs/sn: that position's row)
__device__ __forceinline__ float rope_elem(const float *x, long long i, long long rot, const float *cs,
                                           const float *sn, int interleaved) {
  if (i >= rot) return x[i];
  if (interleaved) {
    const long long j = i >> 1;
    const float a = x[2 * j], b = x[2 * j + 1];
    return (i & 1) ? b * cs[j] + a * sn[j] : a * cs[j] - b * sn[j];
  }
  const long long half = rot / 2;
  if (i < half) return x[i] * cs[i] - x[i + half] * sn[i];
  const long long j = i - half;
  return x[i] * cs[j] + x[j] * sn[j];
}

// past_b and total_b of batch entry b; false (and the error flag) when they
// do not fit, as the CPU kernel checks them.
__device__ inline bool gqa_lens(const fbx_cuda_gqa_args &a, long long b, long long *pb, long long *tb) {
  const long long total = *a.total, S = a.S;
  const bool first = S == total;
  const long long t = (long long)a.seqlens[b] + 1, p = first ? 0 : t - S;
  bool ok = !(p < 0 || p + S > a.L || (first && t > S) || t > a.L);
  if (!a.shared && p > a.P) ok = false;
  if (!first && S > 1 && a.B != 1) ok = false;
  if (a.cs && p + S > a.max_pos) ok = false;
  if (!ok) {
    *a.err_flag = FBX_CUDA_ERR_GQA;
    *pb = 0;
    *tb = 0;
    return false;
  }
  *pb = p;
  *tb = t;
  return true;
}

// Floats between rows of the K / V tiles in shared memory: padded so that
// the threads of a warp, one key row each, read different banks.
__host__ __device__ constexpr int tile_stride(int H) { return H % 4 == 0 ? H + 4 : H + 1; }
// Whether this block is the last of n to count in on *ctr (which it then
// sets back to 0 for the next launch). Every thread's global writes before
// the call are visible to the block that gets true (fence, barrier, atomic).
// flag: one int of the block's shared memory.
__device__ __forceinline__ bool last_to_finish(int *ctr, int n, volatile int *flag) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const bool last = atomicAdd(ctr, 1) == n - 1;
    if (last) atomicExch(ctr, 0);
    *flag = last;
  }
  __syncthreads();
  const bool last = *flag != 0;
  if (last) __threadfence();
  return last;
}

}  // namespace attn
}  // namespace fbx

#endif
