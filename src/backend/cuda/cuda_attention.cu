// GroupQueryAttention (decode and causal prefill) and RotaryEmbedding.
//
// GQA is at most three launches on the stream (bench/bench_cuda_genai times them):
//   1. kv_write (unless past and present share their buffers, where attend
//      stores the new rows itself): the new keys (rotated) and values into
//      present rows [past_b, past_b + S), the past rows copied and the rows
//      after the new ones zeroed.
//   2. attend: one block per (b, kv group g, query row s, key split). The
//      group's hpg query heads are rotated into shared memory (on a decode
//      step the split's K and V rows are copied there too); each thread
//      scores one key row against all of them (the K row is read once per
//      group, as the CPU kernel does), a warp per head takes the split's
//      softmax, and the block accumulates p * V. With one split the result
//      is written; otherwise (max, sum, o) partials go to scratch, and the
//      blocks of a (b, g, s) count in on one int of a.counters: the last to
//      finish merges its group's heads (merge_group, flash-decoding).
//   3. combine, only when there are more splits than that block can merge:
//      per (b, s, head) the splits' partials merged by a launch of its own.
// A decode step is latency-bound (a KV group's cache is a few hundred KB),
// so no loop waits on one load at a time: an earlier version (a warp per key
// row, serial loops over the splits) took 30 us a layer at Qwen's shapes.
// The per-batch lengths come from seqlens_k / total_sequence_length read on
// the device, so no host wait is needed and the launch parameters do not
// change from one decode step to the next on a shared buffer (capturable).
#include <math.h>

#include <cuda_pipeline.h>

#include "cuda_attention.cuh"

namespace {

using namespace fbx::attn;
constexpr int kHeadChunk = 8;  // at most this many query heads scored per K row load
constexpr int kPvHeads = 4;    // query heads per p * V pass

using fbx::grid_for;

// ---------------------------------------------------------------- ROTARY --
__global__ void rope_kernel(const fbx_cuda_rope_args a) {
  fbx::pdl_enter();
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
// thread per element of the rows written: (b, g, row, i); both K and V
__global__ void kv_write_kernel(const fbx_cuda_gqa_args a) {
  fbx::pdl_enter();
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

// Floats of shared memory before the tiles (q, scores, per head max and sum),
// rounded up to 4 so that the tiles start on 16 bytes.
__host__ __device__ constexpr int head_floats(int hpg, int H, int SL) { return (hpg * H + hpg * SL + 2 * hpg + 3) & ~3; }
// Floats of the K tile's area, which the p * V reduction (kThreads * kPvHeads * 4 floats) reuses
// (without tiles: the reduction alone); the V tile follows it, then the one flag int.
__host__ __device__ constexpr int kt_area(int H, int SL, bool tile) {
  return tile && SL * tile_stride(H) > kThreads * kPvHeads * 4 ? SL * tile_stride(H) : kThreads * kPvHeads * 4;
}
__host__ __device__ constexpr int flag_at(int hpg, int H, int SL, bool tile) {
  return head_floats(hpg, H, SL) + kt_area(H, SL, tile) + (tile ? SL * tile_stride(H) : 0);
}

// One split of one (b, g, s): the scores, softmax and p * V of keys
// [t0, t0 + n), written to out (one split) or as a partial (attend_kernel's
// comment says how the work is spread). TILE (a.tile: the host's choice when
// the tiles fit): the split's K and V rows are copied to shared memory first
// (cp.async, all in flight at once, while q is rotated), since a decode block
// is latency-bound and reading them from global memory in the loops cost a
// round trip per few rows; otherwise (the long splits of a prefill) the
// loops read them from global memory.
template <int VEC, bool TILE>
__device__ __forceinline__ void attend_split(const fbx_cuda_gqa_args &a, float *sm, long long b, int s, int g,
                                             int split, long long t0, int n, long long pos, const float *K,
                                             const float *V, bool ok, float *part_bs) {
  const int H = (int)a.H, S = (int)a.S, hpg = (int)(a.nh / a.kvh), SL = a.split_len, tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31;
  const long long half = a.rot / 2;
  const int KS = tile_stride(H), kt_floats = kt_area(H, SL, TILE);
  float *qs = sm, *sc = qs + hpg * H, *mh = sc + hpg * SL, *lh = mh + hpg, *red = sm + head_floats(hpg, H, SL);
  float *kt = red, *vt = kt + kt_floats;  // kt: the K tile until the scores are taken, then red (p * V partials)
  if (TILE) {
    const float *kg = K + t0 * H, *vg = V + t0 * H;
    const int units = H / VEC;
    for (int e = tid; e < n * units; e += kThreads) {
      const int r = e / units, c = (e - r * units) * VEC;
      __pipeline_memcpy_async(kt + r * KS + c, kg + (long long)r * H + c, sizeof(float) * VEC);
      __pipeline_memcpy_async(vt + r * KS + c, vg + (long long)r * H + c, sizeof(float) * VEC);
    }
    __pipeline_commit();
  }
  const float *qtok = a.q + (b * S + s) * a.q_row + (long long)g * hpg * H;
  for (int e = tid; e < hpg * H; e += kThreads) {
    const int h = e / H, i = e - h * H;
    qs[e] = a.cs && ok ? rope_elem(qtok + h * H, i, a.rot, a.cs + pos * half, a.sn + pos * half, a.interleaved)
                       : qtok[h * H + i];
  }
  __pipeline_wait_prior(0);
  __syncthreads();  // q and the K / V tiles in shared memory
  // scores
  const int per_row = kThreads / (n > 0 ? n : 1) > 0 ? kThreads / (n > 0 ? n : 1) : 1;
  int hc = (hpg + per_row - 1) / per_row;
  hc = hc < 1 ? 1 : (hc > kHeadChunk ? kHeadChunk : hc);
  const int chunks = (hpg + hc - 1) / hc, items = n * chunks;
  for (int it = tid; it < items; it += kThreads) {
    const int c = it / n, r = it - c * n, h0 = c * hc;
    const float *kr = TILE ? kt + r * KS : K + (t0 + r) * H;
    float acc[kHeadChunk];
#pragma unroll
    for (int j = 0; j < kHeadChunk; j++) acc[j] = 0.f;
#pragma unroll 4
    for (int d = 0; d < H; d += VEC) {
      if constexpr (VEC == 4) {
        const float4 k4 = *(const float4 *)(kr + d);
#pragma unroll
        for (int j = 0; j < kHeadChunk; j++) {
          if (j >= hc || h0 + j >= hpg) break;
          const float4 q4 = *(const float4 *)(qs + (h0 + j) * H + d);
          acc[j] = fmaf(q4.x, k4.x, fmaf(q4.y, k4.y, fmaf(q4.z, k4.z, fmaf(q4.w, k4.w, acc[j]))));
        }
      } else {
        const float kv = kr[d];
#pragma unroll
        for (int j = 0; j < kHeadChunk; j++) {
          if (j >= hc || h0 + j >= hpg) break;
          acc[j] = fmaf(qs[(h0 + j) * H + d], kv, acc[j]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kHeadChunk; j++) {
      if (j >= hc || h0 + j >= hpg) break;
      float v = acc[j] * a.scale;
      if (a.softcap > 0.f) v = a.softcap * tanhf(v / a.softcap);
      sc[(h0 + j) * SL + r] = v;
    }
  }
  __syncthreads();
  // softmax over the split, warp per head: p in place, max and sum kept
  for (int h = warp; h < hpg; h += kWarps) {
    float *rw = sc + h * SL;
    float m = -INFINITY;
    for (int t = lane; t < n; t += 32) m = fmaxf(m, rw[t]);
    m = warp_max(m);
    float l = 0.f;
    for (int t = lane; t < n; t += 32) {
      const float e = expf(rw[t] - m);
      rw[t] = e;
      l += e;
    }
    l = warp_sum(l);
    if (lane == 0) mh[h] = m, lh[h] = l;
  }
  __syncthreads();
  // o[h][d] = sum_t p[h][t] V[t][d]: CW column units of VEC floats, CWB of
  // them per pass, TG key subsets
  const int CW = H / VEC, CWB = CW < kThreads ? CW : kThreads, TG = kThreads / CWB;
  const int cu = tid % CWB, tg = tid / CWB;
  for (int c0 = 0; c0 < CW; c0 += CWB) {
    for (int h0 = 0; h0 < hpg; h0 += kPvHeads) {
      float acc[kPvHeads][VEC];
#pragma unroll
      for (int j = 0; j < kPvHeads; j++)
#pragma unroll
        for (int e = 0; e < VEC; e++) acc[j][e] = 0.f;
      const int c = c0 + cu;
      if (tg < TG && c < CW) {
#pragma unroll 4
        for (int t = tg; t < n; t += TG) {
          float vv[VEC];
          if constexpr (VEC == 4) {
            const float4 v4 = TILE ? *((const float4 *)(vt + t * KS) + c) : *((const float4 *)(V + (t0 + t) * H) + c);
            vv[0] = v4.x, vv[1] = v4.y, vv[2] = v4.z, vv[3] = v4.w;
          } else {
            vv[0] = TILE ? vt[t * KS + c] : V[(t0 + t) * H + c];
          }
#pragma unroll
          for (int j = 0; j < kPvHeads; j++) {
            if (h0 + j >= hpg) break;
            const float p = sc[(h0 + j) * SL + t];
#pragma unroll
            for (int e = 0; e < VEC; e++) acc[j][e] = fmaf(p, vv[e], acc[j][e]);
          }
        }
      }
      if (tg < TG)
#pragma unroll
        for (int j = 0; j < kPvHeads; j++)
#pragma unroll
          for (int e = 0; e < VEC; e++) red[(tg * kPvHeads + j) * CWB * VEC + cu * VEC + e] = acc[j][e];
      __syncthreads();
      const int W = CWB * VEC;
      for (int e = tid; e < kPvHeads * W; e += kThreads) {
        const int j = e / W, cc = e - j * W, h = h0 + j, d = c0 * VEC + cc;
        if (h >= hpg || d >= H) continue;
        float o = 0.f;
        for (int k = 0; k < TG; k++) o += red[(k * kPvHeads + j) * W + cc];
        if (a.n_split == 1) {
          const float l = lh[h];
          a.out[(b * S + s) * a.nh * a.H + (long long)(g * hpg + h) * H + d] = l > 0.f ? o / l : 0.f;
        } else {
          float *pt = part_bs + ((long long)h * a.n_split + split) * (H + 2);
          pt[d] = o;
          if (d == 0) pt[H] = mh[h], pt[H + 1] = lh[h];
        }
      }
      __syncthreads();
    }
  }
}

// The merge of combine_kernel for the hpg heads of one (b, g, s), by the
// group's last attend block: warp per head for the splits' weights (max-
// shifted, in shared memory: hpg * (n_split + 1) floats, which the host
// checked fit in the attend block's q and score area), then thread per output
// column summing over the splits in index order (the same result whichever
// block is last). Partials written by other blocks are read with __ldcg (L2,
// not this SM's L1), the loads of a column issued before their sums so that
// they wait on memory once, not once per split.
__device__ __forceinline__ void merge_group(const fbx_cuda_gqa_args &a, float *sm, long long b, int s, int g,
                                            const float *part_bs) {
  const int H = (int)a.H, S = (int)a.S, hpg = (int)(a.nh / a.kvh), ns = a.n_split, tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31, stride = H + 2;
  float *w = sm, *lsum = w + hpg * ns;
  for (int h = warp; h < hpg; h += kWarps) {
    const float *ph = part_bs + (long long)h * ns * stride + H;  // (max, sum) of split i at i * stride
    float m = -INFINITY;
    for (int i = lane; i < ns; i += 32) {
      const float2 ml = __ldcg((const float2 *)(ph + (long long)i * stride));
      if (ml.y > 0.f) m = fmaxf(m, ml.x);
    }
    m = warp_max(m);
    float l = 0.f;
    for (int i = lane; i < ns; i += 32) {
      const float2 ml = __ldcg((const float2 *)(ph + (long long)i * stride));
      const float e = ml.y > 0.f ? expf(ml.x - m) : 0.f;
      w[h * ns + i] = e;
      l += e * ml.y;
    }
    l = warp_sum(l);
    if (lane == 0) lsum[h] = l;
  }
  __syncthreads();
  constexpr int kBatch = 8;  // splits whose partials are loaded together
  float *out = a.out + (b * S + s) * a.nh * a.H + (long long)g * hpg * H;
  for (int e = tid; e < hpg * H; e += kThreads) {
    const int h = e / H, d = e - h * H;
    const float *ph = part_bs + (long long)h * ns * stride + d;
    const float *wh = w + h * ns;
    float o = 0.f;
    for (int i0 = 0; i0 < ns; i0 += kBatch) {
      float v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; j++)  // an empty split's o is never written: not loaded (weight 0)
        v[j] = i0 + j < ns && wh[i0 + j] != 0.f ? __ldcg(ph + (long long)(i0 + j) * stride) : 0.f;
#pragma unroll
      for (int j = 0; j < kBatch; j++)
        if (i0 + j < ns) o = fmaf(wh[i0 + j], v[j], o);
    }
    const float l = lsum[h];
    out[e] = l > 0.f ? o / l : 0.f;
  }
}

// grid (B * kvh * S, n_split); dynamic shared memory (fbx_cuda_gqa_smem): q
// (hpg, H), scores (hpg, split_len), per head max and sum (head_floats),
// the K tile (split_len rows of tile_stride(H)) that the p * V reduction
// (kThreads * kPvHeads * 4 floats) reuses, the V tile, one flag. A decode block's time is its
// longest warp's instruction chain (one warp per scheduler, each instruction
// waiting on the last): so 32-bit index arithmetic without divisions in the
// loops, vector loads, and the work of every phase spread over all threads:
//   fused write (a.fuse_kv: shared buffers): the block stores the new rows
//           of its own key range (rotated K, V) before reading them; blocks
//           that share a row store the same values;
//   tiles:  the split's K and V rows copied to shared memory (cp.async);
//   scores: thread per (key row, chunk of hc heads), hc chosen so that the
//           split's rows times the chunks fill the block; the row and q are
//           read in VEC-float reads of shared memory;
//   softmax: warp per head over the split;
//   p * V:  thread per (VEC columns of V, key subset), kPvHeads heads a
//           pass; the key subsets meet in shared memory in a fixed order
//           (bit-identical from run to run).
// A split past the group's last key writes an empty partial (sum 0) and
// does no work (it still counts in when a.counters is set).
template <int VEC, bool TILE>
__global__ void __launch_bounds__(kThreads) attend_kernel(const fbx_cuda_gqa_args a) {
  fbx::pdl_enter();
  extern __shared__ __align__(16) float sm[];
  const int H = (int)a.H, S = (int)a.S, hpg = (int)(a.nh / a.kvh), SL = a.split_len, tid = threadIdx.x;
  const long long x = blockIdx.x;
  const int s = (int)(x % S), g = (int)((x / S) % a.kvh);
  const long long b = x / (S * a.kvh);
  const int split = blockIdx.y;
  long long pb, tb;
  const bool ok = gqa_lens(a, b, &pb, &tb);
  long long nk = pb + s + 1;
  if (nk > tb) nk = tb;
  if (!ok) nk = 0;
  const long long t0 = (long long)split * SL;
  const int n = (int)(t0 + SL < nk ? SL : (nk > t0 ? nk - t0 : 0));  // keys [t0, t0 + n) of this split
  float *part_bs = a.part + ((b * S + s) * a.nh + (long long)g * hpg) * a.n_split * (a.H + 2);
  const long long pos = pb + s, half = a.rot / 2;  // half: the rotary cache's row length
  float *K = a.pk + (b * a.kvh + g) * a.L * a.H, *V = a.pv + (b * a.kvh + g) * a.L * a.H;
  if (a.fuse_kv && ok) {  // the new rows [pb, pb + S) that this block reads (the last query row's blocks: all of
                          // their split's, padding included, as kv_write would): stored here, read below
    const long long hi = t0 + (s == S - 1 ? SL : n);
    const long long r0 = pb > t0 ? pb : t0, r1 = pb + S < hi ? pb + S : hi;
    for (long long e = r0 * H + tid; e < r1 * H; e += kThreads) {
      const long long row = e / H;
      const int i = (int)(e - row * H);
      const long long tok = b * S + (row - pb);
      const float *kt = (a.k ? a.k + tok * a.kv_row : a.q + tok * a.q_row + a.k_off) + (long long)g * H;
      const float *vt = (a.v ? a.v + tok * a.kv_row : a.q + tok * a.q_row + a.v_off) + (long long)g * H;
      K[e] = a.cs ? rope_elem(kt, i, a.rot, a.cs + row * half, a.sn + row * half, a.interleaved) : kt[i];
      V[e] = vt[i];
    }
  }
  __syncthreads();  // the fused rows, stored above, visible to the block's tile copies
  if (n == 0 && a.n_split > 1) {  // an empty split: sum 0, never read further by combine
    for (int h = tid; h < hpg; h += kThreads) part_bs[((long long)h * a.n_split + split) * (H + 2) + H + 1] = 0.f;
  } else {
    attend_split<VEC, TILE>(a, sm, b, s, g, split, t0, n, pos, K, V, ok, part_bs);
  }
  int *flag = (int *)(sm + flag_at(hpg, H, SL, TILE));  // fbx_cuda_gqa_smem's last
  if (a.n_split > 1 && a.counters && last_to_finish(a.counters + x, a.n_split, flag))
    merge_group(a, sm, b, s, g, part_bs);
}

__device__ __forceinline__ float block_reduce(float v, float *scr, bool is_max) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
  v = is_max ? warp_max(v) : warp_sum(v);
  if (lane == 0) scr[warp] = v;
  __syncthreads();
  float r = scr[0];
  for (int w = 1; w < nw; w++) r = is_max ? fmaxf(r, scr[w]) : r + scr[w];
  __syncthreads();
  return r;
}

// one block of kThreads per (b, s, head): merge the n_split partials. The
// splits' max-shifted weights go to shared memory (threads over the splits);
// then thread (column, split subset) sums weight * o, the subsets meeting in
// shared memory in a fixed order. Dynamic shared memory: n_split + kThreads +
// kWarps floats.
__global__ void __launch_bounds__(kThreads) combine_kernel(const fbx_cuda_gqa_args a) {
  fbx::pdl_enter();
  extern __shared__ __align__(16) float sm[];
  float *w = sm, *red = w + a.n_split, *scr = red + kThreads;
  const long long H = a.H, x = blockIdx.x, ns = a.n_split;  // x = (b * S + s) * nh + head
  const float *pt = a.part + x * ns * (H + 2);
  float m = -INFINITY;
  for (long long i = threadIdx.x; i < ns; i += kThreads)
    if (pt[i * (H + 2) + H + 1] > 0.f) m = fmaxf(m, pt[i * (H + 2) + H]);
  const float M = block_reduce(m, scr, true);
  float l = 0.f;
  for (long long i = threadIdx.x; i < ns; i += kThreads) {
    const float li = pt[i * (H + 2) + H + 1];
    const float e = li > 0.f ? expf(pt[i * (H + 2) + H] - M) : 0.f;
    w[i] = e;
    l += e * li;
  }
  const float L = block_reduce(l, scr, false);  // its barrier also publishes w
  const long long DG = H < kThreads ? H : kThreads, G = kThreads / DG, dd = threadIdx.x % DG, gi = threadIdx.x / DG;
  for (long long d0 = 0; d0 < H; d0 += DG) {
    float o = 0.f;
    if (gi < G && d0 + dd < H)
#pragma unroll 4
      for (long long i = gi; i < ns; i += G)
        if (w[i] != 0.f) o = fmaf(w[i], pt[i * (H + 2) + d0 + dd], o);
    red[threadIdx.x] = o;
    __syncthreads();
    if (threadIdx.x < DG && d0 + threadIdx.x < H) {
      float t = 0.f;
      for (long long k = 0; k < G; k++) t += red[k * DG + threadIdx.x];
      a.out[x * H + d0 + threadIdx.x] = L > 0.f ? t / L : 0.f;
    }
    __syncthreads();
  }
}

}  // namespace

extern "C" int fbx_cuda_launch_rope(const fbx_cuda_rope_args *a, cudaStream_t s) {
  const long long n = a->B * a->S * a->N * a->H;
  if (n <= 0) return 0;
  fbx::launch(rope_kernel, grid_for(n), 256, 0, s, *a);
  return (int)cudaGetLastError();
}

extern "C" size_t fbx_cuda_gqa_smem(int64_t hpg, int64_t H, int64_t split_len, int tile_kv) {
  return sizeof(float) * (size_t)(flag_at((int)hpg, (int)H, (int)split_len, tile_kv != 0) + 1);
}

extern "C" size_t fbx_cuda_gqa_combine_smem(int64_t n_split) {
  return sizeof(float) * (size_t)(n_split + kThreads + kWarps);
}

extern "C" int fbx_cuda_launch_gqa(const fbx_cuda_gqa_args *a, cudaStream_t s) {
  if (a->B <= 0 || a->S <= 0) return 0;
  const long long rows = a->shared ? a->S : a->L;
  int e = 0;
  if (!a->fuse_kv) {
    fbx::launch(kv_write_kernel, grid_for(a->B * a->kvh * rows * a->H), 256, 0, s, *a);
    e = (int)cudaGetLastError();
    if (e) return e;
  }
  const long long hpg = a->nh / a->kvh, nblk = a->B * a->kvh * a->S;
  if (nblk > 2147483647LL || a->n_split > 65535) return (int)cudaErrorInvalidValue;
  const size_t smem = fbx_cuda_gqa_smem(hpg, a->H, a->split_len, a->tile);
  /* float4 loads: rows of H floats at 16-byte aligned bases */
  const bool vec4 = a->H % 4 == 0 && ((uintptr_t)a->pk & 15) == 0 && ((uintptr_t)a->pv & 15) == 0;
  const dim3 grid((unsigned)nblk, (unsigned)a->n_split);
  if (a->warps) fbx_cuda_launch_gqa_decode(a, s);
  else if (vec4 && a->tile) fbx::launch(attend_kernel<4, true>, grid, kThreads, smem, s, *a);
  else if (vec4) fbx::launch(attend_kernel<4, false>, grid, kThreads, smem, s, *a);
  else if (a->tile) fbx::launch(attend_kernel<1, true>, grid, kThreads, smem, s, *a);
  else fbx::launch(attend_kernel<1, false>, grid, kThreads, smem, s, *a);
  e = (int)cudaGetLastError();
  if (e || a->n_split == 1 || a->counters) return e;
  const long long nout = a->B * a->S * a->nh;
  if (nout > 2147483647LL) return (int)cudaErrorInvalidValue;
  fbx::launch(combine_kernel, (unsigned)nout, kThreads, fbx_cuda_gqa_combine_smem(a->n_split), s, *a);
  return (int)cudaGetLastError();
}
