// GroupQueryAttention, one decode step (S == 1): a warp per query head.
//
// grid (B * kvh, n_split), kThreads threads. Block (b, g, split) takes keys
// [t0, t0 + split_len) of KV group g for its hpg query heads:
//   1. its split's K and V rows are copied to shared memory (cp.async, all in
//      flight at once, issued before anything else: the rows are known from
//      the block index, rows past the valid length are copied and never used),
//      while the lengths are read and the group's query heads are rotated
//      into shared memory; the block whose range holds the new row computes
//      it (rotated K, V), stores it to the present buffer (fused write, shared
//      buffers) and into its tiles;
//   2. warp per head (heads w, w + 8, ...): lane j scores keys j, j + 32, ...
//      (a K row of the tile against q, float4 reads, q broadcast), the split's
//      softmax by shuffles, then p * V with lane j holding dims
//      [j * DPL, (j + 1) * DPL) and p read back broadcast from shared memory;
//      the result (one split) or the (o, max, sum) partial is written from the
//      warp's registers;
//   3. with several splits, the last block of (b, g) to finish (a.counters)
//      merges the active splits' partials: warp per head again, the (max, sum)
//      of the splits and their o columns loaded together (one wait on memory).
// Against attend_kernel (cuda_attention.cu), which spreads every phase over
// the whole block, this has one barrier between the copy and the scores
// instead of ~10: a decode block is latency-bound (its group's cache rows are
// tens of KB) and its time is its serial chain of memory waits and barriers.
// Partials use attend_kernel's layout, empty splits write sum 0: the combine
// launch of cuda_attention.cu merges them when a.counters is NULL.
#include <cuda_pipeline.h>

#include "cuda_attention.cuh"

namespace {

using namespace fbx::attn;

constexpr int kMaxKeysPerLane = 4;  // split_len <= 128

// shared memory (floats): K tile, V tile (split_len rows of tile_stride(H)), q (hpg, H),
// p (kWarps, split_len), one flag
__host__ __device__ constexpr int dec_floats(int hpg, int H, int SL) {
  return 2 * SL * tile_stride(H) + hpg * H + kWarps * SL + 1;
}

// DPL floats at p: from shared memory (vector loads), or CG: a partial's columns from global
// memory through L2 (rows of H + 2 floats: 8-byte aligned only)
template <int DPL, bool CG = false>
__device__ __forceinline__ void load_dpl(const float *p, float *v) {
  if constexpr (CG && DPL == 4) {
    const float2 t = __ldcg((const float2 *)p), u = __ldcg((const float2 *)(p + 2));
    v[0] = t.x, v[1] = t.y, v[2] = u.x, v[3] = u.y;
  } else if constexpr (CG && DPL == 2) {
    const float2 t = __ldcg((const float2 *)p);
    v[0] = t.x, v[1] = t.y;
  } else if constexpr (CG) {
    v[0] = __ldcg(p);
  } else if constexpr (DPL == 4) {
    const float4 t = *(const float4 *)p;
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
  } else if constexpr (DPL == 2) {
    const float2 t = *(const float2 *)p;
    v[0] = t.x, v[1] = t.y;
  } else {
    v[0] = *p;
  }
}

// The last block of (b, g): the n_act active splits' partials of each head
// merged into out, warp per head, 32 splits at a time (online: a later
// chunk's larger max rescales what is summed so far). Every split below n_act
// holds keys, so a chunk's (max, sum) and o columns are loaded together, not
// one after the other; lane j sums dims [j * DPL, (j + 1) * DPL) over the
// splits in index order (the same result whichever block is last).
template <int DPL>
__device__ __forceinline__ void merge_heads(const fbx_cuda_gqa_args &a, const float *part_bs, float *out, int hpg,
                                            int n_act) {
  constexpr int H = 32 * DPL, ST = H + 2, kBatch = 8;  // kBatch: splits whose o columns are loaded together
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, ns = a.n_split;
  for (int h = warp; h < hpg; h += kWarps) {
    const float *ph = part_bs + (long long)h * ns * ST;
    float M = -INFINITY, l = 0.f, o[DPL] = {};
    for (int i0 = 0; i0 < n_act; i0 += 32) {
      const int cnt = n_act - i0 < 32 ? n_act - i0 : 32;
      float2 ml = make_float2(-INFINITY, 0.f);
      if (lane < cnt) ml = __ldcg((const float2 *)(ph + (long long)(i0 + lane) * ST + H));
      const float mc = warp_max(ml.y > 0.f ? ml.x : -INFINITY);
      const float Mn = fmaxf(M, mc);
      if (Mn == -INFINITY) continue;  // warp-uniform: nothing summed yet
      const float r = M == -INFINITY ? 0.f : expf(M - Mn);
      l *= r;
#pragma unroll
      for (int e = 0; e < DPL; e++) o[e] *= r;
      const float w = ml.y > 0.f ? expf(ml.x - Mn) : 0.f;
      l += w * ml.y;
      M = Mn;
      for (int j0 = 0; j0 < cnt; j0 += kBatch) {
        float v[kBatch][DPL], wj[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; j++) {
          wj[j] = __shfl_sync(0xffffffffu, w, (j0 + j) & 31);
          if (j0 + j < cnt) load_dpl<DPL, true>(ph + (long long)(i0 + j0 + j) * ST + lane * DPL, v[j]);
          else
#pragma unroll
            for (int e = 0; e < DPL; e++) v[j][e] = 0.f;
        }
#pragma unroll
        for (int j = 0; j < kBatch; j++)
#pragma unroll
          for (int e = 0; e < DPL; e++) o[e] = fmaf(j0 + j < cnt ? wj[j] : 0.f, v[j][e], o[e]);
      }
    }
    l = warp_sum(l);
#pragma unroll
    for (int e = 0; e < DPL; e++) out[(long long)h * H + lane * DPL + e] = l > 0.f ? o[e] / l : 0.f;
  }
}

template <int DPL>
__global__ void __launch_bounds__(kThreads) decode_kernel(const fbx_cuda_gqa_args a) {
  fbx::pdl_enter();
  constexpr int H = 32 * DPL, KS = tile_stride(H), U = H / 4;  // U: float4 units of a row
  extern __shared__ __align__(16) float sm[];
  const int hpg = (int)(a.nh / a.kvh), SL = a.split_len, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int x = blockIdx.x, g = x % (int)a.kvh, split = blockIdx.y;
  const long long b = x / a.kvh, t0 = (long long)split * SL;
  float *kt = sm, *vt = kt + SL * KS, *qs = vt + SL * KS, *ps = qs + hpg * H;
  int *flag = (int *)(ps + kWarps * SL);
  float *K = a.pk + (b * a.kvh + g) * a.L * H, *V = a.pv + (b * a.kvh + g) * a.L * H;
  // 1. the split's rows in flight
  const int rows = (int)(a.L - t0 < SL ? a.L - t0 : SL);
  for (int e = tid; e < rows * U; e += kThreads) {
    const int r = e / U, c = (e - r * U) * 4;
    __pipeline_memcpy_async(kt + r * KS + c, K + (t0 + r) * H + c, 16);
    __pipeline_memcpy_async(vt + r * KS + c, V + (t0 + r) * H + c, 16);
  }
  __pipeline_commit();
  long long pb, tb;
  const bool ok = gqa_lens(a, b, &pb, &tb);
  long long nk = pb + 1 < tb ? pb + 1 : tb;  // keys of the query row
  if (!ok) nk = 0;
  const int n = (int)(nk > t0 ? (nk - t0 < SL ? nk - t0 : SL) : 0);
  const long long half = a.rot / 2;
  const float *qtok = a.q + b * a.q_row + (long long)g * hpg * H;
  for (int e = tid; e < hpg * H; e += kThreads) {
    const int h = e / H, i = e - h * H;
    qs[e] = a.cs && ok ? rope_elem(qtok + h * H, i, a.rot, a.cs + pb * half, a.sn + pb * half, a.interleaved)
                       : qtok[h * H + i];
  }
  const bool new_row = a.fuse_kv && ok && pb >= t0 && pb < t0 + SL;  // block-uniform
  float nkv = 0.f, nvv = 0.f;
  if (new_row && tid < H) {
    const float *kn = (a.k ? a.k + b * a.kv_row : a.q + b * a.q_row + a.k_off) + (long long)g * H;
    const float *vn = (a.v ? a.v + b * a.kv_row : a.q + b * a.q_row + a.v_off) + (long long)g * H;
    nkv = a.cs ? rope_elem(kn, tid, a.rot, a.cs + pb * half, a.sn + pb * half, a.interleaved) : kn[tid];
    nvv = vn[tid];
    K[pb * H + tid] = nkv;
    V[pb * H + tid] = nvv;
  }
  __pipeline_wait_prior(0);
  __syncthreads();  // tiles and q in shared memory
  if (new_row) {    // the tiles' copy of the new row was read before it was stored
    const int r = (int)(pb - t0);
    if (tid < H) kt[r * KS + tid] = nkv, vt[r * KS + tid] = nvv;
    __syncthreads();
  }
  float *part_bs = a.part + (b * a.nh + (long long)g * hpg) * a.n_split * (H + 2);
  float *out = a.out + b * a.nh * H + (long long)g * hpg * H;
  // 2. warp per head
  float *pw = ps + warp * SL;
  for (int h = warp; h < hpg; h += kWarps) {
    float o[DPL] = {}, m = -INFINITY, l = 0.f;
    if (n > 0) {
      const float *qh = qs + h * H;
      float sc[kMaxKeysPerLane];
#pragma unroll
      for (int j = 0; j < kMaxKeysPerLane; j++) {
        const int t = j * 32 + lane;
        sc[j] = -INFINITY;
        if (j * 32 >= SL) break;
        if (t < n) {
          const float *kr = kt + t * KS;
          float a0 = 0.f, a1 = 0.f;
#pragma unroll
          for (int d = 0; d < H; d += 8) {
            const float4 k0 = *(const float4 *)(kr + d), q0 = *(const float4 *)(qh + d);
            const float4 k1 = *(const float4 *)(kr + d + 4), q1 = *(const float4 *)(qh + d + 4);
            a0 = fmaf(q0.x, k0.x, fmaf(q0.y, k0.y, fmaf(q0.z, k0.z, fmaf(q0.w, k0.w, a0))));
            a1 = fmaf(q1.x, k1.x, fmaf(q1.y, k1.y, fmaf(q1.z, k1.z, fmaf(q1.w, k1.w, a1))));
          }
          float v = (a0 + a1) * a.scale;
          if (a.softcap > 0.f) v = a.softcap * tanhf(v / a.softcap);
          sc[j] = v;
        }
        m = fmaxf(m, sc[j]);
      }
      m = warp_max(m);
#pragma unroll
      for (int j = 0; j < kMaxKeysPerLane; j++) {
        const int t = j * 32 + lane;
        if (j * 32 >= SL) break;
        const float p = t < n ? expf(sc[j] - m) : 0.f;
        l += p;
        pw[t] = p;
      }
      l = warp_sum(l);
      __syncwarp();
      float o2[DPL] = {};
      int t = 0;
      for (; t + 1 < n; t += 2) {
        float v0[DPL], v1[DPL];
        load_dpl<DPL>(vt + t * KS + lane * DPL, v0);
        load_dpl<DPL>(vt + (t + 1) * KS + lane * DPL, v1);
        const float p0 = pw[t], p1 = pw[t + 1];
#pragma unroll
        for (int e = 0; e < DPL; e++) o[e] = fmaf(p0, v0[e], o[e]), o2[e] = fmaf(p1, v1[e], o2[e]);
      }
      if (t < n) {
        float v0[DPL];
        load_dpl<DPL>(vt + t * KS + lane * DPL, v0);
#pragma unroll
        for (int e = 0; e < DPL; e++) o[e] = fmaf(pw[t], v0[e], o[e]);
      }
#pragma unroll
      for (int e = 0; e < DPL; e++) o[e] += o2[e];
      __syncwarp();  // pw is the next head's
    }
    if (a.n_split == 1) {
#pragma unroll
      for (int e = 0; e < DPL; e++) out[(long long)h * H + lane * DPL + e] = l > 0.f ? o[e] / l : 0.f;
    } else {
      float *pt = part_bs + ((long long)h * a.n_split + split) * (H + 2);
      if (n > 0)
#pragma unroll
        for (int e = 0; e < DPL; e++) pt[lane * DPL + e] = o[e];
      if (lane == 0) pt[H] = m, pt[H + 1] = l;  // an empty split: sum 0, never read further
    }
  }
  // 3. the merge
  if (a.n_split > 1 && a.counters && last_to_finish(a.counters + x, a.n_split, flag)) {
    const int n_act = (int)((nk + SL - 1) / SL);
    merge_heads<DPL>(a, part_bs, out, hpg, n_act < a.n_split ? n_act : a.n_split);
  }
}

}  // namespace

extern "C" size_t fbx_cuda_gqa_decode_smem(int64_t hpg, int64_t H, int64_t split_len) {
  return sizeof(float) * (size_t)dec_floats((int)hpg, (int)H, (int)split_len);
}

extern "C" int fbx_cuda_gqa_decode_fits(const fbx_cuda_gqa_args *a) {
  const int64_t H = a->H, hpg = a->nh / a->kvh;
  if (a->S != 1 || !(H == 32 || H == 64 || H == 128)) return 0;
  if (a->split_len % 32 || a->split_len > 32 * kMaxKeysPerLane) return 0;
  if (((uintptr_t)a->pk & 15) || ((uintptr_t)a->pv & 15)) return 0;
  return fbx_cuda_gqa_decode_smem(hpg, H, a->split_len) <= FBX_CUDA_GQA_SMEM_MAX;
}

extern "C" int fbx_cuda_launch_gqa_decode(const fbx_cuda_gqa_args *a, cudaStream_t s) {
  const long long nblk = a->B * a->kvh;
  if (nblk > 2147483647LL || a->n_split > 65535) return (int)cudaErrorInvalidValue;
  const dim3 grid((unsigned)nblk, (unsigned)a->n_split);
  const size_t smem = fbx_cuda_gqa_decode_smem(a->nh / a->kvh, a->H, a->split_len);
  if (a->H == 128) fbx::launch(decode_kernel<4>, grid, kThreads, smem, s, *a);
  else if (a->H == 64) fbx::launch(decode_kernel<2>, grid, kThreads, smem, s, *a);
  else fbx::launch(decode_kernel<1>, grid, kThreads, smem, s, *a);
  return (int)cudaGetLastError();
}
