// MatMulNBits kernels: the small-M GEMV that dequantises 4- or 8-bit weights
// in registers, and the dequantisation of column chunks to float for the
// large-M path (a cuBLASLt GEMM on the host side, cuda_mnb.c).
//
// GEMV: one warp per group of NC output columns; lane l loads the 16-byte
// chunks l, l + 32, ... of each column (coalesced 512 bytes per warp step), i.e. 32
// (4-bit) or 16 (8-bit) consecutive k, as four 32-bit words of 8 resp. 4
// values. A word never straddles a quantisation block (block_size >= 16), so
// each word reads its block's scale and scale * zero point once (L1 hits
// for the other words of the block). A value becomes a float without the
// int-to-float unit: byte_perm places the byte under the exponent of 2^23
// (0x4B0000xx = 2^23 + q, exact) and one subtraction removes 2^23. The
// dequantised weight w = q * s - s * z (one FMA) is shared by MT rows of A.
//
// glu (M == 1, params.nbits.glu: the weights are gate columns [0, N/2) then up
// columns [N/2, N)): a warp's NC accumulators are NC/2 gate columns and the
// NC/2 up columns of the same outputs (warp_cols), loaded together, and the
// warp writes silu(gate) * up; other M compute the N columns into scratch and
// glu_rows_kernel combines them (cuda_mnb.c).
#include "cuda_launch.cuh"

namespace {

constexpr int kWarps = 4;  // warps per block of the GEMV

// byte i (0..3) of x as an exact float
__device__ __forceinline__ float byte_f(unsigned x, int i) {
  return __uint_as_float(__byte_perm(x, 0x4B000000u, 0x7440u + (unsigned)i)) - 8388608.0f;
}

// 8 (4-bit) or 4 (8-bit) dequantised weights of word wd, values k0.. of its block
template <int BITS>
__device__ __forceinline__ void word_vals(unsigned wd, float s, float sz, float *v) {
  if (BITS == 4) {
    unsigned lo = wd & 0x0F0F0F0Fu, hi = (wd >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int b = 0; b < 4; b++) {
      v[2 * b] = fmaf(byte_f(lo, b), s, -sz);
      v[2 * b + 1] = fmaf(byte_f(hi, b), s, -sz);
    }
  } else {
#pragma unroll
    for (int b = 0; b < 4; b++) v[b] = fmaf(byte_f(wd, b), s, -sz);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The weight columns of a warp's NC accumulators: NC consecutive columns from n0,
// or with GLU the NC/2 gate columns from output column n0 and the NC/2 up
// columns of the same outputs (N/2 further on); -1: past the last column.
template <int NC, bool GLU>
__device__ __forceinline__ void warp_cols(const fbx_cuda_mnb_args &a, long long n0, long long (&col)[NC]) {
  const long long half = a.N / 2;
#pragma unroll
  for (int c = 0; c < NC; c++) {
    if (!GLU) {
      col[c] = n0 + c < a.N ? n0 + c : -1;
    } else {
      const long long j = n0 + c % (NC / 2);
      col[c] = j < half ? j + (c >= NC / 2 ? half : 0) : -1;
    }
  }
}

// silu(g) * u in the order of the unfused Sigmoid, Mul, Mul (cuda_ew_ops.cuh's sigmoid)
__device__ __forceinline__ float glu(float g, float u) { return (g * (1.f / (1.f + expf(-g)))) * u; }

// Partial sums acc[c][r] of rows m0 .. m0 + MT - 1 (those < M) of the columns
// col[c] (those >= 0: warp_cols) over the 16-byte chunks ch0, ch0 + step, ...
// of each column (ch0: the lane, plus 32 per K-split warp). A warp takes NC
// columns so that each value of A loaded into registers (from L1) serves NC
// columns: with one column per warp the A traffic (4 bytes per weight per
// row) would exceed L1's bandwidth before the packed weights reach HBM's.
template <int BITS, int MT, int NC>
__device__ __forceinline__ void gemv_acc(const fbx_cuda_mnb_args &a, const long long (&col)[NC], long long m0,
                                         long long ch0, long long step, float (&acc)[NC][MT]) {
  constexpr int VPW = BITS == 4 ? 8 : 4;  // values per 32-bit word
  const long long K = a.K, kb = a.kb;
  const int bsh = __ffs(a.block_size) - 1;  // block_size is a power of two (claim): k / bs = k >> bsh
  const long long chunks = a.col_stride / 16;
  for (long long ch = ch0; ch < chunks; ch += step) {
    unsigned words[NC][4];
    float sc[NC][4], szs[NC][4];
#pragma unroll
    for (int c = 0; c < NC; c++) {  // all loads first: NC independent 16-byte requests in flight
      uint4 q4 = make_uint4(0u, 0u, 0u, 0u);
      if (col[c] >= 0) q4 = __ldg((const uint4 *)(a.w + col[c] * a.col_stride) + ch);
      words[c][0] = q4.x, words[c][1] = q4.y, words[c][2] = q4.z, words[c][3] = q4.w;
    }
    // the words' scales and scale * zero points, loaded beside the words (no branch between: an
    // earlier version loaded them word by word after the words arrived, one more round trip)
#pragma unroll
    for (int c = 0; c < NC; c++)
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const long long k0 = (ch * 4 + j) * VPW, at = col[c] * kb + (k0 >> bsh);
        const bool ok = col[c] >= 0 && k0 < K;
        sc[c][j] = ok ? __ldg(a.scale + at) : 0.f;
        szs[c][j] = ok ? __ldg(a.sz + at) : 0.f;
      }
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const long long k0 = (ch * 4 + j) * VPW;
      if (k0 >= K) break;  // column padding (the rest of the chunk is padding too)
      const bool full = k0 + VPW <= K;
      float x[MT][VPW];
#pragma unroll
      for (int r = 0; r < MT; r++) {
        const float *ar = a.a + (m0 + r) * K + k0;
        if (m0 + r >= a.M) {
#pragma unroll
          for (int i = 0; i < VPW; i++) x[r][i] = 0.f;
        } else if (full && a.a_vec) {
#pragma unroll
          for (int i = 0; i < VPW / 4; i++) {
            float4 t = __ldg((const float4 *)ar + i);
            x[r][4 * i] = t.x, x[r][4 * i + 1] = t.y, x[r][4 * i + 2] = t.z, x[r][4 * i + 3] = t.w;
          }
        } else {
#pragma unroll
          for (int i = 0; i < VPW; i++) x[r][i] = k0 + i < K ? __ldg(ar + i) : 0.f;
        }
      }
#pragma unroll
      for (int c = 0; c < NC; c++) {
        if (col[c] < 0) continue;
        float v[VPW];
        word_vals<BITS>(words[c][j], sc[c][j], szs[c][j], v);
#pragma unroll
        for (int r = 0; r < MT; r++)
#pragma unroll
          for (int i = 0; i < VPW; i++) acc[c][r] = fmaf(v[i], x[r][i], acc[c][r]);
      }
    }
  }
}

// Before pdl_enter (cuda_launch.cuh): the columns col[c] (>= 0) of the packed
// weights and their scales into L2, 128-byte lines t, t + nt, ... of each, so
// that the loads after the wait find them there while the kernel before is
// still finishing. L2 is the point of coherence: a prefetch cannot read stale
// data even where the weights are not constants.
template <int NC>
__device__ __forceinline__ void prefetch_cols(const fbx_cuda_mnb_args &a, const long long (&col)[NC], long long t,
                                              long long nt) {
#pragma unroll
  for (int c = 0; c < NC; c++) {
    if (col[c] < 0) continue;
    const uint8_t *w = a.w + col[c] * a.col_stride;
    for (long long off = t * 128; off < a.col_stride; off += nt * 128) fbx::prefetch_l2(w + off);
    const float *sc = a.scale + col[c] * a.kb, *sz = a.sz + col[c] * a.kb;
    for (long long off = t * 32; off < a.kb; off += nt * 32) {
      fbx::prefetch_l2(sc + off);
      fbx::prefetch_l2(sz + off);
    }
  }
}

template <int BITS, int MT, int NC>
__device__ void gemv_cols(const fbx_cuda_mnb_args &a, long long n0, long long m0, int lane) {
  float acc[NC][MT];
#pragma unroll
  for (int c = 0; c < NC; c++)
#pragma unroll
    for (int r = 0; r < MT; r++) acc[c][r] = 0.f;
  long long col[NC];
  warp_cols<NC, false>(a, n0, col);
  gemv_acc<BITS, MT, NC>(a, col, m0, lane, 32, acc);
#pragma unroll
  for (int c = 0; c < NC; c++) {
    const float b = a.bias && n0 + c < a.N ? __ldg(a.bias + n0 + c) : 0.f;
#pragma unroll
    for (int r = 0; r < MT; r++) {
      float t = warp_sum(acc[c][r]);
      if (lane == 0 && m0 + r < a.M && n0 + c < a.N) a.y[(m0 + r) * a.N + n0 + c] = t + b;
    }
  }
}

// M == 1 with a long K (e.g. an FFN's down projection: N = hidden, K = ffn): the
// kWarps warps of a block split K, WK of them per group of NC columns, so a
// small N still spreads over every SM with enough loads in flight per SM
// (one warp per column group would leave most SMs idle and each warp
// latency-bound); the WK partial sums meet in shared memory, in a fixed order.
// GLU: a group's NC columns are NC/2 gate and NC/2 up columns (warp_cols).
template <int BITS, int NC, int WK, bool GLU>
__global__ void __launch_bounds__(kWarps * 32) gemv_ksplit_kernel(const fbx_cuda_mnb_args a) {
  constexpr int G = kWarps / WK;  // column groups per block
  constexpr int NO = GLU ? NC / 2 : NC;  // outputs per group
  __shared__ float part[kWarps][NC];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, grp = w / WK, wk = w % WK;
  const long long n0 = ((long long)blockIdx.x * G + grp) * NO;
  long long col[NC];
  warp_cols<NC, GLU>(a, n0, col);
  prefetch_cols<NC>(a, col, lane + 32LL * wk, 32LL * WK);
  fbx::pdl_enter();
  float acc[NC][1];
#pragma unroll
  for (int c = 0; c < NC; c++) acc[c][0] = 0.f;
  if (col[0] >= 0) gemv_acc<BITS, 1, NC>(a, col, 0, lane + 32LL * wk, 32LL * WK, acc);
#pragma unroll
  for (int c = 0; c < NC; c++) {
    float t = warp_sum(acc[c][0]);
    if (lane == 0) part[w][c] = t;
  }
  __syncthreads();
  if (wk != 0) return;  // warp-uniform: the shuffle below stays full-warp
  long long cl = -1;
#pragma unroll
  for (int c = 0; c < NC; c++)
    if (lane == c) cl = col[c];
  float t = 0.f;
  if (lane < NC && cl >= 0) {
#pragma unroll
    for (int j = 0; j < WK; j++) t += part[grp * WK + j][lane];
    t += a.bias ? __ldg(a.bias + cl) : 0.f;
  }
  if (GLU) {
    const float u = __shfl_down_sync(0xffffffffu, t, NO);
    if (lane < NO && cl >= 0) a.y[n0 + lane] = glu(t, u);
  } else if (lane < NC && cl >= 0) {
    a.y[cl] = t;
  }
}

// M == 1, glu, K short enough for one warp per column group: a warp takes NC/2 outputs, i.e. their
// NC/2 gate and NC/2 up columns, and writes silu(gate) * up.
template <int BITS, int NC>
__global__ void __launch_bounds__(kWarps * 32) gemv_glu_kernel(const fbx_cuda_mnb_args a) {
  const int lane = threadIdx.x & 31;
  const long long n0 = ((long long)blockIdx.x * kWarps + (threadIdx.x >> 5)) * (NC / 2);
  long long col[NC];
  warp_cols<NC, true>(a, n0, col);
  prefetch_cols<NC>(a, col, lane, 32);
  fbx::pdl_enter();
  if (col[0] < 0) return;  // whole warps leave together (the shuffles stay full-warp)
  float acc[NC][1];
#pragma unroll
  for (int c = 0; c < NC; c++) acc[c][0] = 0.f;
  gemv_acc<BITS, 1, NC>(a, col, 0, lane, 32, acc);
  float t[NC];
#pragma unroll
  for (int c = 0; c < NC; c++) t[c] = warp_sum(acc[c][0]) + (a.bias && col[c] >= 0 ? __ldg(a.bias + col[c]) : 0.f);
  if (lane == 0)
#pragma unroll
    for (int c = 0; c < NC / 2; c++)
      if (col[c] >= 0) a.y[n0 + c] = glu(t[c], t[c + NC / 2]);
}

// y (M, F) = silu(gu[:, :F]) * gu[:, F:] of gu (M, 2F): glu for M > 1
__global__ void glu_rows_kernel(const float *gu, long long M, long long F, float *y) {
  fbx::pdl_enter();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < M * F; i += (long long)gridDim.x * blockDim.x) {
    const long long m = i / F, n = i - m * F;
    y[i] = glu(gu[m * 2 * F + n], gu[m * 2 * F + F + n]);
  }
}

template <int BITS, int MT, int NC>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const fbx_cuda_mnb_args a) {
  const int lane = threadIdx.x & 31;
  const long long n0 = ((long long)blockIdx.x * kWarps + (threadIdx.x >> 5)) * NC;
  if (blockIdx.y == 0) {
    long long col[NC];
    warp_cols<NC, false>(a, n0, col);
    prefetch_cols<NC>(a, col, lane, 32);
  }
  fbx::pdl_enter();
  if (n0 >= a.N) return;  // whole warps leave together (the shuffles stay full-warp)
  for (long long m0 = (long long)blockIdx.y * MT; m0 < a.M; m0 += (long long)gridDim.y * MT)
    gemv_cols<BITS, MT, NC>(a, n0, m0, lane);
}

// one thread per (column, 32-bit word): VPW floats of wf (nn, K)
template <int BITS>
__global__ void dequant_kernel(const fbx_cuda_mnb_args a, long long n0, long long nn, float *wf) {
  fbx::pdl_enter();
  constexpr int VPW = BITS == 4 ? 8 : 4;
  const long long wpc = (a.K + VPW - 1) / VPW;  // words per column that hold values < K
  const long long total = nn * wpc;
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    const long long i = t / wpc, wi = t % wpc, n = n0 + i, k0 = wi * VPW, blk = k0 >> (__ffs(a.block_size) - 1);
    const unsigned wd = __ldg((const unsigned *)(a.w + n * a.col_stride) + wi);
    float v[VPW];
    word_vals<BITS>(wd, __ldg(a.scale + n * a.kb + blk), __ldg(a.sz + n * a.kb + blk), v);
    float *d = wf + i * a.K + k0;
#pragma unroll
    for (int j = 0; j < VPW; j++)
      if (k0 + j < a.K) d[j] = v[j];
  }
}

template <int BITS, int MT, int NC>
void launch_mt(const fbx_cuda_mnb_args &a, unsigned gy, cudaStream_t s) {
  const unsigned gx = (unsigned)((a.N + kWarps * NC - 1) / (kWarps * NC));
  fbx::launch(gemv_kernel<BITS, MT, NC>, dim3(gx, gy), dim3(kWarps * 32), 0, s, a);
}

template <int BITS, int WK, bool GLU>
void launch_ksplit(const fbx_cuda_mnb_args &a, cudaStream_t s) {
  constexpr int NC = 4, G = kWarps / WK, NO = GLU ? NC / 2 : NC;
  const long long outs = GLU ? a.N / 2 : a.N;
  const unsigned gx = (unsigned)((outs + G * NO - 1) / (G * NO));
  fbx::launch(gemv_ksplit_kernel<BITS, NC, WK, GLU>, gx, kWarps * 32, 0, s, a);
}

template <int BITS>
int launch_glu(const fbx_cuda_mnb_args &a, cudaStream_t s) {
  constexpr int NC = 8;
  const long long chunks = a.col_stride / 16;
  if (a.ksplit && chunks >= 96) launch_ksplit<BITS, 4, true>(a, s);
  else if (a.ksplit && chunks >= 48) launch_ksplit<BITS, 2, true>(a, s);
  else fbx::launch(gemv_glu_kernel<BITS, NC>, (unsigned)((a.N / 2 + kWarps * NC / 2 - 1) / (kWarps * NC / 2)),
                   kWarps * 32, 0, s, a);
  return (int)cudaGetLastError();
}

template <int BITS>
int launch_gemv(const fbx_cuda_mnb_args &a, cudaStream_t s) {
  const long long chunks = a.col_stride / 16; /* 16-byte chunks per column: 32 per warp pass */
  if (a.M == 1 && a.ksplit && chunks >= 96) launch_ksplit<BITS, 4, false>(a, s);
  else if (a.M == 1 && a.ksplit && chunks >= 48) launch_ksplit<BITS, 2, false>(a, s);
  else if (a.M == 1) launch_mt<BITS, 1, 4>(a, 1, s);
  else if (a.M == 2) launch_mt<BITS, 2, 4>(a, 1, s);
  else if (a.M <= 4) launch_mt<BITS, 4, 4>(a, 1, s);
  else {
    long long tiles = (a.M + 7) / 8;
    launch_mt<BITS, 8, 2>(a, (unsigned)(tiles > 65535 ? 65535 : tiles), s);
  }
  return (int)cudaGetLastError();
}

}  // namespace

extern "C" int fbx_cuda_launch_mnb_gemv(const fbx_cuda_mnb_args *a, cudaStream_t s) {
  if (a->M <= 0 || a->N <= 0) return 0;
  if (a->N / kWarps >= 2147483647LL) return (int)cudaErrorInvalidValue;
  if (a->glu) {
    if (a->M != 1 || a->N % 2) return (int)cudaErrorInvalidValue;
    return a->bits == 4 ? launch_glu<4>(*a, s) : launch_glu<8>(*a, s);
  }
  return a->bits == 4 ? launch_gemv<4>(*a, s) : launch_gemv<8>(*a, s);
}

extern "C" int fbx_cuda_launch_mnb_glu_rows(const float *gu, int64_t M, int64_t F, float *y, cudaStream_t s) {
  if (M <= 0 || F <= 0) return 0;
  fbx::launch(glu_rows_kernel, fbx::grid_for(M * F), 256, 0, s, gu, (long long)M, (long long)F, y);
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_mnb_dequant(const fbx_cuda_mnb_args *a, int64_t n0, int64_t nn, float *wf,
                                           cudaStream_t s) {
  if (nn <= 0) return 0;
  const long long vpw = a->bits == 4 ? 8 : 4, total = nn * ((a->K + vpw - 1) / vpw);
  long long blocks = (total + 255) / 256;
  const unsigned g = (unsigned)(blocks > 65535LL * 16 ? 65535LL * 16 : blocks);
  if (a->bits == 4) fbx::launch(dequant_kernel<4>, g, 256, 0, s, *a, n0, nn, wf);
  else fbx::launch(dequant_kernel<8>, g, 256, 0, s, *a, n0, nn, wf);
  return (int)cudaGetLastError();
}
