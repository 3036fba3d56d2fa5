/* Blocked f32 GEMM for every M (interface and layouts: cpu_gemm.h).
 *
 * Per work item (one batch matrix, rows [m0, m1), columns [n0, n1)):
 *   for each K block (KC):           B block (KC x n1-n0) packed (or prepacked, or in place)
 *     for each M block (MC):         A block copied, padded row stride (L2)
 *       for each 32-column pair:     B micro-panel (KC x 32, 32 KiB) stays in L1
 *         for each MR-row sliver:    micro-kernel MR x 32
 * The first K block stores (or scales C by beta), later ones accumulate.
 * Items split N first (each worker packs only its own B columns), then M,
 * until there are >= 3 per thread (the pool balances them dynamically). */
#include <immintrin.h>
#include <string.h>

#include "cpu_gemm.h"
#include "cpu_gemm_avx512.h"
#include "cpu_simd.h"

#define P 16
#define FBX__GM_KC 256   /* K block: B micro-panel 32 x 256 floats = 32 KiB */
#define FBX__GM_MC 144   /* M block: multiple of 12 and 6; A block 144 x 256 floats = 144 KiB */
#define FBX__GM_NC 512   /* most columns per work item (multiple of 32) */
#define FBX__GM_INLINE_FLOPS 2e6  /* below this, one thread: a pool dispatch costs more */

/* ---- AVX2 micro-kernel: up to 6 rows x 16 columns in 12 ymm accumulators,
 * one panel at a time (a second pass over the A rows for columns 16..31);
 * partial columns by masked loads (no access past width). ---- */
static inline __attribute__((always_inline)) void fbx__gm_avx2_panel(const int MR, const float *a, int64_t lda,
                                                                     const float *b, int64_t bks, int64_t kb,
                                                                     float alpha, float beta_c, float *c,
                                                                     int64_t ldc, int64_t width) {
  __m256 lo[FBX_CPU_GEMM_MR_AVX2], hi[FBX_CPU_GEMM_MR_AVX2];
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) lo[r] = hi[r] = _mm256_setzero_ps();
  if (width >= P) {
    int64_t k = 0;
    for (; k + 2 <= kb; k += 2, b += 2 * bks) {
      __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
      _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
        __m256 av = _mm256_broadcast_ss(a + r * lda + k);
        lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);
        hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);
      }
      b0 = _mm256_loadu_ps(b + bks);
      b1 = _mm256_loadu_ps(b + bks + 8);
      _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
        __m256 av = _mm256_broadcast_ss(a + r * lda + k + 1);
        lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);
        hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);
      }
    }
    if (k < kb) {
      __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
      _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
        __m256 av = _mm256_broadcast_ss(a + r * lda + k);
        lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);
        hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);
      }
    }
  } else {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)width), lane);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)width - 8), lane);
    for (int64_t k = 0; k < kb; k++, b += bks) {
      __m256 b0 = _mm256_maskload_ps(b, m0), b1 = _mm256_maskload_ps(b + 8, m1);
      _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
        __m256 av = _mm256_broadcast_ss(a + r * lda + k);
        lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);
        hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);
      }
    }
  }
  const __m256 al = _mm256_set1_ps(alpha), bc = _mm256_set1_ps(beta_c);
  if (width >= P) {
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
      float *cr = c + r * ldc;
      __m256 o0 = _mm256_mul_ps(al, lo[r]), o1 = _mm256_mul_ps(al, hi[r]);
      if (beta_c != 0.f) {
        o0 = _mm256_fmadd_ps(bc, _mm256_loadu_ps(cr), o0);
        o1 = _mm256_fmadd_ps(bc, _mm256_loadu_ps(cr + 8), o1);
      }
      _mm256_storeu_ps(cr, o0);
      _mm256_storeu_ps(cr + 8, o1);
    }
    return;
  }
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
    float t[P], *cr = c + r * ldc;
    _mm256_storeu_ps(t, _mm256_mul_ps(al, lo[r]));
    _mm256_storeu_ps(t + 8, _mm256_mul_ps(al, hi[r]));
    if (beta_c != 0.f)
      for (int64_t j = 0; j < width; j++) t[j] += beta_c * cr[j];
    memcpy(cr, t, (size_t)width * sizeof(float));
  }
}

#define FBX__GM_AVX2_CASE(MR)                                                                           \
  case MR:                                                                                              \
    fbx__gm_avx2_panel(MR, a, lda, b0, bks, kb, alpha, beta_c, c, ldc, width);                          \
    if (width > P) fbx__gm_avx2_panel(MR, a, lda, b1, bks, kb, alpha, beta_c, c + P, ldc, width - P);   \
    break;

void fbx_cpu_gemm_ukr_avx2(const float *a, int64_t lda, const float *b0, const float *b1, int64_t bks,
                           int64_t kb, float alpha, float beta_c, float *c, int64_t ldc, int mr, int64_t width) {
  switch (mr) {
    FBX__GM_AVX2_CASE(6)
    FBX__GM_AVX2_CASE(5)
    FBX__GM_AVX2_CASE(4)
    FBX__GM_AVX2_CASE(3)
    FBX__GM_AVX2_CASE(2)
    FBX__GM_AVX2_CASE(1)
    default: break;
  }
}

/* ---- packing ---- */

/* dst (mb rows, row stride ldp) <- rows [m0, m0+mb) x k [k0, k0+kb) of
 * op(A). A copy even without transA: the kernel broadcasts from 12 rows at
 * once, and rows of the caller's A a multiple of 4 KiB apart (K = 1024,
 * 3072, ...) would all fall into one L1 set; ldp = kb + 16 spreads them. */
static void fbx__gm_pack_a(const fbx_cpu_gemm_desc *d, const float *A, int64_t m0, int64_t mb, int64_t k0,
                           int64_t kb, int64_t ldp, float *dst) {
  if (!d->ta) {
    for (int64_t r = 0; r < mb; r++) memcpy(dst + r * ldp, A + (m0 + r) * d->lda + k0, (size_t)kb * sizeof(float));
    return;
  }
  /* A stored (K, M): 8x8 blocks transposed in registers, scalar tails */
  const float *a0 = A + k0 * d->lda + m0;
  int64_t r8 = mb / 8 * 8, k8 = kb / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t k = 0; k < k8; k += 8) fbx__transpose8x8_ps(a0 + k * d->lda + r, d->lda, dst + r * ldp + k, ldp);
  for (int64_t r = 0; r < mb; r++)
    for (int64_t k = r < r8 ? k8 : 0; k < kb; k++) dst[r * ldp + k] = a0[k * d->lda + r];
}

/* dst <- op(B) k [k0, k0+kb) x columns [n0, n0+nb) as 16-column panels,
 * panel q at dst + q*kb*16, element (k, j) at k*16 + j; columns past nb zero.
 * Reads follow B's rows (one sequential stream per row, not one per panel). */
static void fbx__gm_pack_b(const fbx_cpu_gemm_desc *d, const float *B, int64_t n0, int64_t nb, int64_t k0,
                           int64_t kb, float *dst) {
  int64_t full = nb / P, w = nb - full * P; /* full panels, width of the last partial one */
  if (!d->tb) {
    for (int64_t k = 0; k < kb; k++) {
      const float *src = B + (k0 + k) * d->ldb + n0;
      float *o = dst + k * P;
      for (int64_t q = 0; q < full; q++, src += P, o += kb * P) {
        _mm256_storeu_ps(o, _mm256_loadu_ps(src));
        _mm256_storeu_ps(o + 8, _mm256_loadu_ps(src + 8));
      }
      if (w) {
        memcpy(o, src, (size_t)w * sizeof(float));
        memset(o + w, 0, (size_t)(P - w) * sizeof(float));
      }
    }
    return;
  }
  /* B stored (N, K): column j of a panel is contiguous in k; 8x8 blocks
   * transposed in registers, scalar tails */
  int64_t k8 = kb / 8 * 8;
  for (int64_t q = 0; q * P < nb; q++, dst += kb * P) {
    int64_t wq = q < full ? P : w, j8 = wq / 8 * 8;
    const float *bq = B + (n0 + q * P) * d->ldb + k0;
    for (int64_t j = 0; j < j8; j += 8)
      for (int64_t k = 0; k < k8; k += 8) fbx__transpose8x8_ps(bq + j * d->ldb + k, d->ldb, dst + k * P + j, P);
    for (int64_t j = 0; j < wq; j++)
      for (int64_t k = j < j8 ? k8 : 0; k < kb; k++) dst[k * P + j] = bq[j * d->ldb + k];
    for (int64_t j = wq; j < P; j++)
      for (int64_t k = 0; k < kb; k++) dst[k * P + j] = 0.f;
  }
}

/* ---- driver ---- */

typedef void (*fbx__gm_ukr_fn)(const float *, int64_t, const float *, const float *, int64_t, int64_t, float,
                               float, float *, int64_t, int, int64_t);

typedef struct fbx__gm_job {
  const fbx_cpu_gemm_desc *d;
  fbx__gm_ukr_fn ukr;
  int mr;
  int64_t mchunk, nchunk, mitems, nitems;
  float *ws;
  size_t ws_a, ws_b;   /* floats per worker: packed A block, packed B block */
} fbx__gm_job;

static void fbx__gm_batch_off(const fbx_cpu_gemm_desc *d, int64_t b, int64_t *ao, int64_t *bo) {
  *ao = *bo = 0;
  for (int i = d->brank - 1; i >= 0; i--) {
    int64_t ix = b % d->bdims[i];
    b /= d->bdims[i];
    *ao += ix * d->a_st[i];
    *bo += ix * d->b_st[i];
  }
}

/* Rows of the next sliver: mr, but a last remainder of mr+1 .. 2mr-1 rows is
 * split evenly (16 -> 8 + 8, not 12 + 4: a 4-row tile wastes most FMA slots). */
static inline int fbx__gm_rows(int64_t left, int mr) {
  if (left <= mr) return (int)left;
  if (left < 2 * mr) return (int)((left + 1) / 2);
  return mr;
}

static void fbx__gm_item(const fbx__gm_job *j, int64_t item, int worker) {
  const fbx_cpu_gemm_desc *d = j->d;
  int64_t per_b = j->mitems * j->nitems, bi = item / per_b, r = item % per_b;
  int64_t m0 = (r / j->nitems) * j->mchunk, n0 = (r % j->nitems) * j->nchunk;
  int64_t m1 = m0 + j->mchunk < d->M ? m0 + j->mchunk : d->M;
  int64_t n1 = n0 + j->nchunk < d->N ? n0 + j->nchunk : d->N, nb = n1 - n0;
  int64_t ao, bo;
  fbx__gm_batch_off(d, bi, &ao, &bo);
  const float *A = d->A + ao, *B = d->B ? d->B + bo : NULL;
  float *C = d->C + bi * d->c_batch;
  float *wa = j->ws + (size_t)worker * (j->ws_a + j->ws_b), *wb = wa + j->ws_a;
  const int mr = j->mr;
  /* B read in place when every element is used by at most two slivers (small
   * M: packing would cost as much as the product) */
  bool direct = !d->Bpk && !d->tb && m1 - m0 <= 2 * mr;
  for (int64_t k0 = 0; k0 < d->K; k0 += FBX__GM_KC) {
    int64_t kb = d->K - k0 < FBX__GM_KC ? d->K - k0 : FBX__GM_KC;
    float beta_c = k0 == 0 ? d->beta : 1.f;
    const float *bp;
    int64_t pstep, bks; /* floats between 16-column groups; between k rows */
    if (d->Bpk) {
      bp = d->Bpk + (n0 / P) * d->K * P + k0 * P;
      pstep = d->K * P;
      bks = P;
    } else if (direct) {
      bp = B + k0 * d->ldb + n0;
      pstep = P;
      bks = d->ldb;
    } else {
      fbx__gm_pack_b(d, B, n0, nb, k0, kb, wb);
      bp = wb;
      pstep = kb * P;
      bks = P;
    }
    for (int64_t mc = m0; mc < m1; mc += FBX__GM_MC) {
      int64_t mb = m1 - mc < FBX__GM_MC ? m1 - mc : FBX__GM_MC;
      const int64_t lda = kb + P;
      fbx__gm_pack_a(d, A, mc, mb, k0, kb, lda, wa);
      const float *a = wa;
      for (int64_t jp = 0; jp < nb; jp += 2 * P) {
        const float *b0 = bp + (jp / P) * pstep;
        int64_t width = nb - jp < 2 * P ? nb - jp : 2 * P;
        for (int64_t m = 0; m < mb;) {
          int rows = fbx__gm_rows(mb - m, mr);
          j->ukr(a + m * lda, lda, b0, b0 + pstep, bks, kb, d->alpha, beta_c, C + (mc + m) * d->ldc + n0 + jp,
                 d->ldc, rows, width);
          m += rows;
        }
      }
    }
  }
  if (d->row_bias)
    for (int64_t m = m0; m < m1; m++)
      for (int64_t n = n0; n < n1; n++) C[m * d->ldc + n] += d->row_bias[m];
}

static void fbx__gm_task(void *arg, int64_t i0, int64_t i1, int worker) {
  for (int64_t i = i0; i < i1; i++) fbx__gm_item(arg, i, worker);
}

/* K == 0: C = beta * C (+ bias), never reading C when beta is 0. */
static void fbx__gm_scale(const fbx_cpu_gemm_desc *d, int64_t nbatch) {
  for (int64_t b = 0; b < nbatch; b++)
    for (int64_t m = 0; m < d->M; m++) {
      float *row = d->C + b * d->c_batch + m * d->ldc, add = d->row_bias ? d->row_bias[m] : 0.f;
      for (int64_t n = 0; n < d->N; n++) row[n] = (d->beta == 0.f ? 0.f : d->beta * row[n]) + add;
    }
}

static inline int64_t fbx__gm_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

fbx_status *fbx_cpu_gemm(fbx_cpu_ctx *c, const fbx_cpu_gemm_desc *d) {
  int64_t nbatch = d->nbatch > 0 ? d->nbatch : 1;
  if (d->M <= 0 || d->N <= 0) return NULL;
  if (d->K <= 0) {
    fbx__gm_scale(d, nbatch);
    return NULL;
  }
  if (d->Bpk && nbatch == 1) return fbx_cpu_gemm_prepacked(c, d);
  bool z = fbx_cpu_avx512_enabled();
  fbx__gm_job j = {.d = d, .ukr = z ? fbx_cpu_gemm_ukr_avx512 : fbx_cpu_gemm_ukr_avx2,
                   .mr = z ? FBX_CPU_GEMM_MR_AVX512 : FBX_CPU_GEMM_MR_AVX2};
  int nt = c ? c->threads : 1;
  double flops = 2.0 * (double)d->M * (double)d->N * (double)d->K * (double)nbatch;
  if (flops < FBX__GM_INLINE_FLOPS) nt = 1;
  /* chunks: N in multiples of 32 (a prepacked B needs n0 on a panel edge), M in multiples of mr */
  j.nchunk = fbx__gm_cdiv(d->N < FBX__GM_NC ? d->N : FBX__GM_NC, 2 * P) * 2 * P;
  j.mchunk = d->M <= 2 * FBX__GM_MC ? d->M : 2 * FBX__GM_MC;
  int64_t want = 3 * (int64_t)nt;
  for (;;) {
    j.mitems = fbx__gm_cdiv(d->M, j.mchunk);
    j.nitems = fbx__gm_cdiv(d->N, j.nchunk);
    if (nt <= 1 || nbatch * j.mitems * j.nitems >= want) break;
    if (j.nchunk > 2 * 2 * P)
      j.nchunk = fbx__gm_cdiv(j.nchunk / 2, 2 * P) * 2 * P;
    else if (j.mchunk > 4 * j.mr)
      j.mchunk = fbx__gm_cdiv(j.mchunk / 2, j.mr) * j.mr;
    else
      break;
  }
  int64_t kc = d->K < FBX__GM_KC ? d->K : FBX__GM_KC;
  int64_t mcap = j.mchunk < FBX__GM_MC ? j.mchunk : FBX__GM_MC;
  j.ws_a = (size_t)(mcap * (kc + P));
  j.ws_b = d->Bpk ? 0 : (size_t)(fbx__gm_cdiv(j.nchunk, P) * P * kc);
  j.ws_a = (j.ws_a + 15) / 16 * 16; /* keep every worker's part 64-byte aligned */
  j.ws_b = (j.ws_b + 15) / 16 * 16;
  size_t bytes = (size_t)nt * (j.ws_a + j.ws_b) * sizeof(float);
  void *own = NULL;
  j.ws = c ? fbx_cpu_gemm_ws(c, bytes) : (own = fbx_malloc_aligned(bytes));
  if (!j.ws) return FBX_ERR_OOM();
  int64_t items = nbatch * j.mitems * j.nitems;
  if (nt <= 1)
    fbx__gm_task(&j, 0, items, 0);
  else
    fbx_cpu_par(c, items, 1, fbx__gm_task, &j);
  fbx_free_aligned(own);
  return NULL;
}
