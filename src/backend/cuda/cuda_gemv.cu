// GEMV-shaped MatMul (one row of A per batch: decode's projections and its
// attention against the cache), fp32 in and out, fp32 accumulation:
//   y[b, n] = alpha * sum_k x[b, k] * op(B[b])[k, n]
// Two layouts of B, both read once, coalesced, and without atomics (the
// result does not depend on the launch: bit-identical from run to run):
//   "nk": B stored (N, K) row-major (a weight transposed at node_prepare, or
//         op(B) = B^T): one warp per output, float4 loads along K, a warp
//         shuffle reduction — streams a weight at close to HBM bandwidth
//         with one warp per output row;
//   "kn": B stored (K, N) row-major (the attention's K^T and V, a weight
//         MatMul did not transpose): 32 columns by G k-groups per block,
//         partial sums reduced in shared memory; G = 32 when the columns
//         give fewer blocks than the device holds twice over (a long-K
//         projection with N = 896 has 28 blocks: with 8 groups each thread
//         waited on 600 loads in a row, 17 MB streamed at 0.59 TB/s).
// cuBLASLt picks gemv kernels for M = 1 too, but its heuristic call costs
// ~70 us of host time per new shape (the attention's N or K grows every
// decode step), and its fp32 gemv streamed 2-6 MB weights at 0.5-0.6 TB/s
// on the H200 (bench/RESULTS.md, "CUDA decode").
#include "cuda_launch.cuh"

namespace {

__global__ void gemv_nk_kernel(const float *__restrict__ x, const float *__restrict__ B, float *__restrict__ y,
                               long long N, long long K, long long sx, long long sb, long long sy, float alpha,
                               int vec4) {
  fbx::pdl_enter();
  long long n = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (n >= N) return;
  long long b = blockIdx.y;
  const float *xr = x + b * sx, *row = B + b * sb + n * K;
  float acc = 0.f;
  if (vec4) {
    const float4 *r4 = (const float4 *)row, *x4 = (const float4 *)xr;
    long long k4 = K >> 2;
#pragma unroll 4
    for (long long k = lane; k < k4; k += 32) {
      float4 w = __ldg(&r4[k]), v = __ldg(&x4[k]);
      acc = fmaf(w.x, v.x, acc);
      acc = fmaf(w.y, v.y, acc);
      acc = fmaf(w.z, v.z, acc);
      acc = fmaf(w.w, v.w, acc);
    }
  } else {
    for (long long k = lane; k < K; k += 32) acc = fmaf(__ldg(&row[k]), __ldg(&xr[k]), acc);
  }
  for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) y[b * sy + n] = alpha * acc;
}

enum { KN_COLS = 32, KN_FEW_BLOCKS = 264 /* 2 per SM on an H200 */ };

template <int KN_GROUPS>
__global__ void __launch_bounds__(KN_COLS *KN_GROUPS)
    gemv_kn_kernel(const float *__restrict__ x, const float *__restrict__ B, float *__restrict__ y, long long N,
                   long long K, long long sx, long long sb, long long sy, float alpha) {
  fbx::pdl_enter();
  __shared__ float part[KN_GROUPS][KN_COLS + 1];
  long long n = blockIdx.x * (long long)KN_COLS + threadIdx.x;
  long long b = blockIdx.y;
  const float *xr = x + b * sx, *Bb = B + b * sb;
  float acc = 0.f;
  if (n < N)
#pragma unroll 4
    for (long long k = threadIdx.y; k < K; k += KN_GROUPS) acc = fmaf(__ldg(&xr[k]), __ldg(&Bb[k * N + n]), acc);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && n < N) {
    float s = 0.f;
    for (int j = 0; j < KN_GROUPS; j++) s += part[j][threadIdx.x];
    y[b * sy + n] = alpha * s;
  }
}

}  // namespace

extern "C" int fbx_cuda_launch_gemv(const float *x, const float *B, float *y, int64_t N, int64_t K, int64_t batch,
                                    int64_t sx, int64_t sb, int64_t sy, float alpha, int b_nk, cudaStream_t s) {
  if (N <= 0 || batch <= 0) return 0;
  if (batch > 65535) return (int)cudaErrorInvalidValue;
  if (b_nk) {
    bool vec4 = K % 4 == 0 && sx % 4 == 0 && sb % 4 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)B & 15) == 0;
    long long blocks = (N + 7) / 8; /* 8 warps of 256 threads, one output each */
    fbx::launch(gemv_nk_kernel, dim3((unsigned)blocks, (unsigned)batch), 256, 0, s, x, B, y, N, K, sx, sb, sy, alpha, vec4);
  } else {
    long long blocks = (N + KN_COLS - 1) / KN_COLS;
    dim3 grid((unsigned)blocks, (unsigned)batch);
    if (blocks * batch < KN_FEW_BLOCKS && K >= 256)
      fbx::launch(gemv_kn_kernel<32>, grid, dim3(KN_COLS, 32), 0, s, x, B, y, N, K, sx, sb, sy, alpha);
    else
      fbx::launch(gemv_kn_kernel<8>, grid, dim3(KN_COLS, 8), 0, s, x, B, y, N, K, sx, sb, sy, alpha);
  }
  return (int)cudaGetLastError();
}
