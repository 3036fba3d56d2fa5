// GroupQueryAttention (decode and causal prefill) and RotaryEmbedding.
//
// GQA is three launches on the stream:
//   1. kv_write: the new keys (rotated) and values into present rows
//      [past_b, past_b + S); unless past and present share their buffers,
//      the past rows are copied and the rows after the new ones zeroed.
//   2. attend: one block per (b, kv group g, query row s, key split). The
//      group's hpg query heads are rotated into shared memory; each warp
//      scores one key row against all of them (the K row is read once per
//      group, as the CPU kernel does), a warp per head takes the split's
//      softmax, and the block accumulates p * V. With one split the result
//      is written; otherwise (max, sum, o) partials go to scratch.
//   3. combine (n_split > 1): per (b, s, head) the splits' partials are
//      merged with their max-shifted weights (flash-decoding).
// The per-batch lengths come from seqlens_k / total_sequence_length read on
// the device, so no host wait is needed and the launch parameters do not
// change from one decode step to the next on a shared buffer (capturable).
#include <math.h>

#include "cuda_kernels.h"

namespace {

constexpr int kThreads = 128;  // attention block: 4 warps
constexpr int kWarps = kThreads / 32;
constexpr int kHeadChunk = 8;  // query heads scored together per K row load

inline unsigned grid_for(long long n) {
  long long b = (n + 255) / 256;
  return (unsigned)(b > 65535LL * 16 ? 65535LL * 16 : (b < 1 ? 1 : b));
}

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

// ---------------------------------------------------------------- ROTARY --
__global__ void rope_kernel(const fbx_cuda_rope_args a) {
  const long long n = a.B * a.S * a.N * a.H;
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n;
       t += (long long)gridDim.x * blockDim.x) {
    const long long i = t % a.H;
    long long s, b;
    if (a.bnsh) {  // (B, N, S, H)
      s = (t / a.H) % a.S;
      b = t / (a.H * a.S * a.N);
    } else {       // (B, S, N*H)
      s = (t / (a.H * a.N)) % a.S;
      b = t / (a.H * a.N * a.S);
    }
    const long long ps = a.n_pos == 1 ? a.pos[0] + s : a.pos[b * a.S + s];
    if (ps < 0 || ps >= a.max_pos) {
      *a.err_flag = FBX_CUDA_ERR_ROPE;
      a.y[t] = 0.f;
      continue;
    }
    const float *row = a.x + (t - i);
    a.y[t] = rope_elem(row, i, a.rot, a.cs + ps * a.half_cache, a.sn + ps * a.half_cache, a.interleaved);
  }
}

// ------------------------------------------------------------------- GQA --
// past_b and total_b of batch entry b; false (and the error flag) when they
// do not fit, as the CPU kernel checks them.
__device__ bool gqa_lens(const fbx_cuda_gqa_args &a, long long b, long long *pb, long long *tb) {
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

// thread per element of the rows written: (b, g, row, i); both K and V
__global__ void kv_write_kernel(const fbx_cuda_gqa_args a) {
  const long long H = a.H, rows = a.shared ? a.S : a.L, n = a.B * a.kvh * rows * H;
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n;
       t += (long long)gridDim.x * blockDim.x) {
    const long long i = t % H, r = (t / H) % rows, g = (t / (H * rows)) % a.kvh, b = t / (H * rows * a.kvh);
    long long pb, tb;
    if (!gqa_lens(a, b, &pb, &tb)) continue;
    const long long row = a.shared ? pb + r : r;  // present row
    const long long dst = ((b * a.kvh + g) * a.L + row) * H + i;
    if (row >= pb && row < pb + a.S) {
      const long long s = row - pb, tok = b * a.S + s;
      const float *kt = (a.k ? a.k + tok * a.kv_row : a.q + tok * a.q_row + a.k_off) + g * H;
      const float *vt = (a.v ? a.v + tok * a.kv_row : a.q + tok * a.q_row + a.v_off) + g * H;
      const long long half = a.rot / 2;
      a.pk[dst] = a.cs ? rope_elem(kt, i, a.rot, a.cs + row * half, a.sn + row * half, a.interleaved) : kt[i];
      a.pv[dst] = vt[i];
    } else if (row < pb) {
      const long long src = ((b * a.kvh + g) * a.P + row) * H + i;
      a.pk[dst] = a.past_k[src];
      a.pv[dst] = a.past_v[src];
    } else {
      a.pk[dst] = 0.f;
      a.pv[dst] = 0.f;
    }
  }
}

// grid (B * kvh * S, n_split); dynamic shared memory: q (hpg, H), scores
// (hpg, split_len), then per head max and sum
__global__ void __launch_bounds__(kThreads) attend_kernel(const fbx_cuda_gqa_args a) {
  extern __shared__ float sm[];
  const long long H = a.H, S = a.S, hpg = a.nh / a.kvh, SL = a.split_len;
  float *qs = sm, *sc = qs + hpg * H, *mh = sc + hpg * SL, *lh = mh + hpg;
  const long long x = blockIdx.x, s = x % S, g = (x / S) % a.kvh, b = x / (S * a.kvh);
  const int split = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long pb, tb;
  const bool ok = gqa_lens(a, b, &pb, &tb);
  long long nk = pb + s + 1;
  if (nk > tb) nk = tb;
  if (!ok) nk = 0;
  const long long t0 = split * SL, t1 = t0 + SL < nk ? t0 + SL : nk;  // keys [t0, t1) of this split
  const long long pos = pb + s, half = a.rot / 2;
  const float *qtok = a.q + (b * S + s) * a.q_row + g * hpg * H;
  for (long long e = threadIdx.x; e < hpg * H; e += blockDim.x) {
    const long long h = e / H, i = e % H;
    qs[e] = a.cs && ok ? rope_elem(qtok + h * H, i, a.rot, a.cs + pos * half, a.sn + pos * half, a.interleaved)
                       : qtok[h * H + i];
  }
  __syncthreads();
  const float *K = a.pk + (b * a.kvh + g) * a.L * H, *V = a.pv + (b * a.kvh + g) * a.L * H;
  // scores: warp per key row, up to kHeadChunk heads per pass over the row
  for (long long t = t0 + warp; t < t1; t += kWarps) {
    const float *kr = K + t * H;
    for (long long h0 = 0; h0 < hpg; h0 += kHeadChunk) {
      float acc[kHeadChunk];
#pragma unroll
      for (int j = 0; j < kHeadChunk; j++) acc[j] = 0.f;
      for (long long d = lane; d < H; d += 32) {
        const float kd = kr[d];
#pragma unroll
        for (int j = 0; j < kHeadChunk; j++)
          if (h0 + j < hpg) acc[j] = fmaf(qs[(h0 + j) * H + d], kd, acc[j]);
      }
#pragma unroll
      for (int j = 0; j < kHeadChunk; j++) {
        float v = warp_sum(acc[j]);
        if (lane == 0 && h0 + j < hpg) {
          v *= a.scale;
          if (a.softcap > 0.f) v = a.softcap * tanhf(v / a.softcap);
          sc[(h0 + j) * SL + (t - t0)] = v;
        }
      }
    }
  }
  __syncthreads();
  // softmax over the split, warp per head: p in place, max and sum kept
  for (long long h = warp; h < hpg; h += kWarps) {
    float *r = sc + h * SL;
    float m = -INFINITY;
    for (long long t = lane; t < t1 - t0; t += 32) m = fmaxf(m, r[t]);
    m = warp_max(m);
    float l = 0.f;
    for (long long t = lane; t < t1 - t0; t += 32) {
      const float e = expf(r[t] - m);
      r[t] = e;
      l += e;
    }
    l = warp_sum(l);
    if (lane == 0) mh[h] = m, lh[h] = l;
  }
  __syncthreads();
  // o[h][d] = sum_t p[h][t] V[t][d] (the other heads' reads of a V row hit L1)
  for (long long e = threadIdx.x; e < hpg * H; e += blockDim.x) {
    const long long h = e / H, d = e % H;
    const float *p = sc + h * SL;
    float o = 0.f;
    for (long long t = t0; t < t1; t++) o = fmaf(p[t - t0], V[t * H + d], o);
    const long long head = g * hpg + h;
    if (a.n_split == 1) {
      const float l = lh[h];
      a.out[(b * S + s) * a.nh * H + head * H + d] = l > 0.f ? o / l : 0.f;
    } else {
      float *pt = a.part + (((b * S + s) * a.nh + head) * a.n_split + split) * (H + 2);
      pt[d] = o;
      if (d == 0) pt[H] = mh[h], pt[H + 1] = lh[h];
    }
  }
}

// one block per (b, s, head): merge the n_split partials
__global__ void combine_kernel(const fbx_cuda_gqa_args a) {
  const long long H = a.H, x = blockIdx.x;  // x = (b * S + s) * nh + head
  const float *pt = a.part + x * a.n_split * (H + 2);
  float M = -INFINITY;
  for (int i = 0; i < a.n_split; i++)
    if (pt[i * (H + 2) + H + 1] > 0.f) M = fmaxf(M, pt[i * (H + 2) + H]);
  float L = 0.f;
  for (int i = 0; i < a.n_split; i++) {
    const float l = pt[i * (H + 2) + H + 1];
    if (l > 0.f) L += expf(pt[i * (H + 2) + H] - M) * l;
  }
  for (long long d = threadIdx.x; d < H; d += blockDim.x) {
    float o = 0.f;
    for (int i = 0; i < a.n_split; i++) {
      const float l = pt[i * (H + 2) + H + 1];
      if (l > 0.f) o += expf(pt[i * (H + 2) + H] - M) * pt[i * (H + 2) + d];
    }
    a.out[x * H + d] = L > 0.f ? o / L : 0.f;
  }
}

}  // namespace

extern "C" int fbx_cuda_launch_rope(const fbx_cuda_rope_args *a, cudaStream_t s) {
  const long long n = a->B * a->S * a->N * a->H;
  if (n <= 0) return 0;
  rope_kernel<<<grid_for(n), 256, 0, s>>>(*a);
  return (int)cudaGetLastError();
}

extern "C" size_t fbx_cuda_gqa_smem(int64_t hpg, int64_t H, int64_t split_len) {
  return sizeof(float) * (size_t)(hpg * H + hpg * split_len + 2 * hpg);
}

extern "C" int fbx_cuda_launch_gqa(const fbx_cuda_gqa_args *a, cudaStream_t s) {
  if (a->B <= 0 || a->S <= 0) return 0;
  const long long rows = a->shared ? a->S : a->L;
  kv_write_kernel<<<grid_for(a->B * a->kvh * rows * a->H), 256, 0, s>>>(*a);
  int e = (int)cudaGetLastError();
  if (e) return e;
  const long long hpg = a->nh / a->kvh, nblk = a->B * a->kvh * a->S;
  if (nblk > 2147483647LL || a->n_split > 65535) return (int)cudaErrorInvalidValue;
  const size_t smem = fbx_cuda_gqa_smem(hpg, a->H, a->split_len);
  attend_kernel<<<dim3((unsigned)nblk, (unsigned)a->n_split), kThreads, smem, s>>>(*a);
  e = (int)cudaGetLastError();
  if (e || a->n_split == 1) return e;
  const long long nout = a->B * a->S * a->nh;
  if (nout > 2147483647LL) return (int)cudaErrorInvalidValue;
  combine_kernel<<<(unsigned)nout, a->H >= 128 ? 128 : 32 * (unsigned)((a->H + 31) / 32), 0, s>>>(*a);
  return (int)cudaGetLastError();
}
