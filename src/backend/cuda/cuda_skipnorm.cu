// SKIP_NORM: (skip +) (bias +) RMSNorm / LayerNorm over the last dim, one
// block per row. The sum s is written to y first (and to the optional sum
// output); after the block reduction of sum(s) and sum(s^2) (float, warp
// shuffles) each thread rescales the elements it wrote itself, so the second
// pass needs no barrier. ORT's formulas: var = mean(s^2) - mean^2 for
// LayerNorm, mean(s^2) for RMSNorm.
#include "cuda_launch.cuh"

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// block-wide sums of a and b (every thread gets both)
__device__ void block_sum2(float &a, float &b) {
  __shared__ float sa[kThreads / 32], sb[kThreads / 32];
  a = warp_sum(a);
  b = warp_sum(b);
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) sa[w] = a, sb[w] = b;
  __syncthreads();
  a = lane < (int)(blockDim.x >> 5) ? sa[lane] : 0.f;
  b = lane < (int)(blockDim.x >> 5) ? sb[lane] : 0.f;
  a = warp_sum(a);
  b = warp_sum(b);
}

__global__ void __launch_bounds__(kThreads) skipnorm_kernel(const fbx_cuda_skipnorm_args a) {
  fbx::pdl_enter();
  for (long long r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const long long h = a.h;
    const float *x = a.x + r * h;
    const float *sk = a.skip ? a.skip + (r * h) % a.skip_n : nullptr;
    float *y = a.y + r * h, *so = a.sum ? a.sum + r * h : nullptr;
    float s1 = 0.f, s2 = 0.f;
    for (long long i = threadIdx.x; i < h; i += blockDim.x) {
      float v = x[i];
      if (sk) v += sk[i];
      if (a.bias) v += a.bias[i];
      y[i] = v;
      if (so) so[i] = v;
      s1 += v;
      s2 = fmaf(v, v, s2);
    }
    block_sum2(s1, s2);
    const float mean = s1 / (float)h, msq = s2 / (float)h;
    const float rms = a.simplified ? sqrtf(msq + a.eps) : sqrtf(msq - mean * mean + a.eps);
    const float inv = 1.0f / rms;
    for (long long i = threadIdx.x; i < h; i += blockDim.x) {
      float v = a.simplified ? y[i] : y[i] - mean;
      v = v * inv * a.gamma[i];
      if (a.beta && !a.simplified) v += a.beta[i];
      y[i] = v;
    }
    if (a.inv && threadIdx.x == 0) a.inv[r] = inv;
    __syncthreads();  // the reduction's shared slots are reused by the next row
  }
}

}  // namespace

extern "C" int fbx_cuda_launch_skipnorm(const fbx_cuda_skipnorm_args *a, cudaStream_t s) {
  if (a->rows <= 0 || a->h <= 0) return 0;
  const int threads = a->h >= kThreads ? kThreads : (int)((a->h + 31) / 32) * 32;
  const long long g = a->rows > 65535LL * 16 ? 65535LL * 16 : a->rows;
  fbx::launch(skipnorm_kernel, (unsigned)g, threads, 0, s, *a);
  return (int)cudaGetLastError();
}
