/* Blocked f32 GEMM on a prepacked B (constant weights; interface: cpu_gemm.h,
 * fbx_cpu_gemm with Bpk set and one batch matrix).
 *
 *   C(M,N) = alpha * op(A)(M,K) @ Bpk(K,N) + beta * C  (+ row_bias[m])
 *
 * B was packed once at compile (fbx_cpu_gemv_pack: 16-column panels, K-major
 * over the whole K), so a call packs nothing of B. A is packed once per call,
 * by all workers together, into k-major slivers shared by every worker:
 *   sliver s = rows [r0, r0+mr) (mr <= MR; a last remainder of MR+1..2MR-1
 *   rows split evenly), element (r, k) at ap[r0*K + k*mr + r].
 * The micro-kernel then reads, per k, mr consecutive floats of A and one
 * 64-byte row of each B panel: no strided A rows (the 4 KiB L1-set aliasing
 * of row-major A at K = 1024, 2048, ... cannot occur) and one sequential
 * stream per operand for the hardware prefetcher.
 *
 * Per work item (a range of column groups x a range of slivers):
 *   for each K block (<= KC):           A block (the item's slivers x KC) stays in L2
 *     for each column group (NR cols):  B micro-panel (KC x NR) read from L2 once per sliver
 *       for each sliver:                micro-kernel mr x NR over the K block
 * The first K block stores C (alpha, beta), later ones add to it. While a
 * group's slivers run, each one prefetches (into L2) its share of the next
 * micro-panel of the item, so a B streamed from memory (the lm_head's 98 MB)
 * arrives before it is needed. Items: column groups in chunks, rows split in
 * sliver ranges only when the columns alone give fewer than 3 items per
 * thread (16 threads at N = 768: 24 column pairs). */
#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu_gemm.h"
#include "cpu_gemm_avx512.h"
#include "cpu_simd.h"

#define P 16
/* Most K per block (blocks balanced: K = 2048 in 2 of 1024). Measured on Zen 4
 * (bench_gemm, 1 thread): K blocks of 128 (B micro-panel in L1) ran at 84-92% of
 * the FMA peak, 256 at 87-95%, 768 at 90-97%, 1024 at 92-97%: the L2 feeds the
 * B stream fast enough, and every K block costs a C reload and a short loop.
 * An A block (M x KC) of 128 x 1024 floats is 512 KiB: half of Zen 4's L2. */
#define FBX__GP_KC 1024
#define FBX__GP_NC 512    /* most columns per work item */
#define FBX__GP_INLINE_FLOPS 2e6 /* below this, one thread: a pool dispatch costs more */

/* ---- AVX2 k-major micro-kernel: mr (<= 6) rows x one 16-column panel in 12
 * ymm accumulators ---- */
static inline __attribute__((always_inline)) void fbx__gp_avx2_tile(const int MR, const float *a, const float *b,
                                                                    int64_t kb, float alpha, float beta_c, float *c,
                                                                    int64_t ldc, int64_t width, const float *pf,
                                                                    int64_t npf) {
  __m256 lo[FBX_CPU_GEMM_MR_AVX2], hi[FBX_CPU_GEMM_MR_AVX2];
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) lo[r] = hi[r] = _mm256_setzero_ps();
  int64_t k = 0;
#define FBX__GP_AVX2_STEP                                                     \
  {                                                                           \
    __m256 b0 = _mm256_loadu_ps(b + k * P), b1 = _mm256_loadu_ps(b + k * P + 8); \
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {                    \
      __m256 av = _mm256_broadcast_ss(a + k * MR + r);                        \
      lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);                                 \
      hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);                                 \
    }                                                                         \
  }
  if (npf > kb) npf = kb; /* the next block may be longer than this one */
  for (; k < npf; k++) {
    _mm_prefetch((const char *)(pf + k * P), _MM_HINT_T1);
    FBX__GP_AVX2_STEP
  }
  for (; k < kb; k++) FBX__GP_AVX2_STEP
#undef FBX__GP_AVX2_STEP
  const __m256 al = _mm256_set1_ps(alpha), bc = _mm256_set1_ps(beta_c);
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
    float *cr = c + r * ldc;
    __m256 o0 = _mm256_mul_ps(al, lo[r]), o1 = _mm256_mul_ps(al, hi[r]);
    if (width >= P) {
      if (beta_c != 0.f) {
        o0 = _mm256_fmadd_ps(bc, _mm256_loadu_ps(cr), o0);
        o1 = _mm256_fmadd_ps(bc, _mm256_loadu_ps(cr + 8), o1);
      }
      _mm256_storeu_ps(cr, o0);
      _mm256_storeu_ps(cr + 8, o1);
    } else {
      float t[P];
      _mm256_storeu_ps(t, o0);
      _mm256_storeu_ps(t + 8, o1);
      if (beta_c != 0.f)
        for (int64_t j = 0; j < width; j++) t[j] += beta_c * cr[j];
      memcpy(cr, t, (size_t)width * sizeof(float));
    }
  }
}

#define FBX__GP_AVX2_CASE(MR) \
  case MR: fbx__gp_avx2_tile(MR, a, b, kb, alpha, beta_c, c, ldc, width, pf, npf); break;

void fbx_cpu_gemm_kukr_avx2(const float *a, const float *b, int64_t pstep, int64_t kb, float alpha, float beta_c,
                            float *c, int64_t ldc, int mr, int64_t width, const float *pf, int64_t npf) {
  (void)pstep; /* one panel per call */
  switch (mr) {
    FBX__GP_AVX2_CASE(6)
    FBX__GP_AVX2_CASE(5)
    FBX__GP_AVX2_CASE(4)
    FBX__GP_AVX2_CASE(3)
    FBX__GP_AVX2_CASE(2)
    FBX__GP_AVX2_CASE(1)
    default: break;
  }
}

/* ---- slivers ---- */

/* Rows of the sliver starting at row m (MR, but a last remainder of MR+1 ..
 * 2MR-1 rows splits evenly: 16 -> 8 + 8, not 12 + 4). */
static inline int64_t fbx__gp_rows(int64_t left, int64_t mr) {
  if (left <= mr) return left;
  if (left < 2 * mr) return (left + 1) / 2;
  return mr;
}

/* Sliver s starts at row s*mr for every s but possibly the last (the even
 * split of the remainder only shortens the last two), so the start of
 * sliver s is min(s*mr, the start of the second-to-last sliver + its rows). */
typedef struct fbx__gp_slivers {
  int64_t M, mr, ns;
  int64_t last0; /* first row of the last sliver */
} fbx__gp_slivers;

static fbx__gp_slivers fbx__gp_slivers_of(int64_t M, int64_t mr) {
  fbx__gp_slivers s = {.M = M, .mr = mr, .ns = 0, .last0 = 0};
  for (int64_t m = 0; m < M; s.ns++) {
    int64_t r = fbx__gp_rows(M - m, mr);
    s.last0 = m;
    m += r;
  }
  return s;
}

static inline int64_t fbx__gp_sliver_row(const fbx__gp_slivers *s, int64_t i) {
  if (i >= s->ns) return s->M;
  return i == s->ns - 1 ? s->last0 : i * s->mr;
}

/* ---- A packing: one sliver per task item ---- */

/* dst[k*ldd + r] = src[r*lds + k] for a 4x8 block (rows r, k): the rows of a
 * sliver past its multiple of 8 (12 = 8 + 4). */
static inline void fbx__gp_t4x8(const float *src, int64_t lds, float *dst, int64_t ldd) {
  __m256 v0 = _mm256_loadu_ps(src), v1 = _mm256_loadu_ps(src + lds), v2 = _mm256_loadu_ps(src + 2 * lds),
         v3 = _mm256_loadu_ps(src + 3 * lds);
  __m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1); /* a0 b0 a1 b1 | a4 b4 a5 b5, ... */
  __m256 t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
  __m256 u[4] = {_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)),
                 _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2))};
  /* u[c]: column k = c in the low lane, k = c + 4 in the high one */
  for (int c = 0; c < 4; c++) {
    _mm_storeu_ps(dst + c * ldd, _mm256_castps256_ps128(u[c]));
    _mm_storeu_ps(dst + (c + 4) * ldd, _mm256_extractf128_ps(u[c], 1));
  }
}

typedef struct fbx__gp_job {
  const fbx_cpu_gemm_desc *d;
  fbx__gp_slivers sl;
  float *ap;                 /* packed A: M x K floats in slivers */
  int64_t nr;                /* columns per group: 32 (AVX-512) or 16 (AVX2) */
  int64_t groups, gchunk, srange, gitems, sitems;
  int64_t nkb;               /* K blocks (balanced, <= FBX__GP_KC each) */
  fbx_cpu_gemm_kukr_fn ukr;
} fbx__gp_job;

static void fbx__gp_pack_task(void *arg, int64_t s0, int64_t s1, int worker) {
  (void)worker;
  const fbx__gp_job *j = arg;
  const fbx_cpu_gemm_desc *d = j->d;
  const int64_t K = d->K;
  for (int64_t s = s0; s < s1; s++) {
    int64_t m0 = fbx__gp_sliver_row(&j->sl, s), mr = fbx__gp_sliver_row(&j->sl, s + 1) - m0;
    float *dst = j->ap + m0 * K;
    if (d->ta) { /* A stored (K, M): row k of the sliver is contiguous */
      for (int64_t k = 0; k < K; k++) memcpy(dst + k * mr, d->A + k * d->lda + m0, (size_t)mr * sizeof(float));
      continue;
    }
    /* 8x8 and 4x8 blocks transposed in registers, scalar tails */
    const float *src = d->A + m0 * d->lda;
    int64_t r8 = mr / 8 * 8, r4 = mr / 4 * 4, k8 = K / 8 * 8;
    for (int64_t k = 0; k < k8; k += 8) {
      for (int64_t r = 0; r < r8; r += 8) fbx__transpose8x8_ps(src + r * d->lda + k, d->lda, dst + k * mr + r, mr);
      if (r4 > r8) fbx__gp_t4x8(src + r8 * d->lda + k, d->lda, dst + k * mr + r8, mr);
    }
    for (int64_t k = 0; k < K; k++)
      for (int64_t r = k < k8 ? r4 : 0; r < mr; r++) dst[k * mr + r] = src[r * d->lda + k];
  }
}

/* ---- the product ---- */

/* K block i of nkb: [fbx__gp_kat(i), fbx__gp_kat(i+1)), balanced (K = 2048: 2 x 1024,
 * not 1024 + 1024 + 0; 3000: 3 x 1000) and starting on a multiple of 16. */
static inline int64_t fbx__gp_kat(int64_t K, int64_t nkb, int64_t i) {
  return i >= nkb ? K : (i * K / nkb) & ~(int64_t)15;
}

static void fbx__gp_item(const fbx__gp_job *j, int64_t item) {
  const fbx_cpu_gemm_desc *d = j->d;
  const int64_t K = d->K, pstep = K * P, nkb = j->nkb;
  int64_t gi = item / j->sitems, si = item % j->sitems;
  int64_t g0 = gi * j->gchunk, g1 = g0 + j->gchunk < j->groups ? g0 + j->gchunk : j->groups;
  int64_t s0 = si * j->srange, s1 = s0 + j->srange < j->sl.ns ? s0 + j->srange : j->sl.ns;
  int64_t nsl = s1 - s0;
  for (int64_t kbi = 0; kbi < nkb; kbi++) {
    int64_t k0 = fbx__gp_kat(K, nkb, kbi), kb = fbx__gp_kat(K, nkb, kbi + 1) - k0;
    float beta_c = k0 == 0 ? d->beta : 1.f;
    for (int64_t g = g0; g < g1; g++) {
      int64_t n0 = g * j->nr, width = d->N - n0 < j->nr ? d->N - n0 : j->nr;
      const float *b = d->Bpk + (n0 / P) * pstep + k0 * P;
      /* the item's next micro-panel: the next group of this K block, else the
       * first group of the next K block; its kb (or next kb) lines per panel
       * are shared out over this group's slivers */
      const float *next = NULL;
      int64_t nkl = 0;
      if (g + 1 < g1) {
        next = b + (j->nr / P) * pstep;
        nkl = kb;
      } else if (kbi + 1 < nkb) {
        next = d->Bpk + (g0 * j->nr / P) * pstep + (k0 + kb) * P;
        nkl = fbx__gp_kat(K, nkb, kbi + 2) - k0 - kb;
      }
      for (int64_t s = s0; s < s1; s++) {
        int64_t m0 = fbx__gp_sliver_row(&j->sl, s), mr = fbx__gp_sliver_row(&j->sl, s + 1) - m0;
        int64_t p0 = nkl * (s - s0) / nsl, p1 = nkl * (s - s0 + 1) / nsl;
        j->ukr(j->ap + m0 * K + k0 * mr, b, pstep, kb, d->alpha, beta_c, d->C + m0 * d->ldc + n0, d->ldc, (int)mr,
               width, next ? next + p0 * P : NULL, p1 - p0);
      }
    }
  }
  if (d->row_bias) {
    int64_t m0 = fbx__gp_sliver_row(&j->sl, s0), m1 = fbx__gp_sliver_row(&j->sl, s1);
    int64_t n0 = g0 * j->nr, n1 = g1 * j->nr < d->N ? g1 * j->nr : d->N;
    for (int64_t m = m0; m < m1; m++)
      for (int64_t n = n0; n < n1; n++) d->C[m * d->ldc + n] += d->row_bias[m];
  }
}

static void fbx__gp_task(void *arg, int64_t i0, int64_t i1, int worker) {
  (void)worker;
  for (int64_t i = i0; i < i1; i++) fbx__gp_item(arg, i);
}

static inline int64_t fbx__gp_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static _Atomic int64_t fbx__gp_kc_override; /* bench_gemm's K-block sweep; 0: FBX__GP_KC */

void fbx_cpu_gemm_prepacked_set_kc(int64_t kc) { fbx__gp_kc_override = kc > 0 ? kc : 0; }

fbx_status *fbx_cpu_gemm_prepacked(fbx_cpu_ctx *c, const fbx_cpu_gemm_desc *d) {
  bool z = fbx_cpu_avx512_enabled();
  fbx__gp_job j = {.d = d, .nr = z ? 2 * P : P, .ukr = z ? fbx_cpu_gemm_kukr_avx512 : fbx_cpu_gemm_kukr_avx2};
  j.sl = fbx__gp_slivers_of(d->M, z ? FBX_CPU_GEMM_MR_AVX512 : FBX_CPU_GEMM_MR_AVX2);
  j.groups = fbx__gp_cdiv(d->N, j.nr);
  int64_t kc = fbx__gp_kc_override;
  j.nkb = fbx__gp_cdiv(d->K, kc > 0 ? kc : FBX__GP_KC);
  int nt = c ? c->threads : 1;
  if (2.0 * (double)d->M * (double)d->N * (double)d->K < FBX__GP_INLINE_FLOPS) nt = 1;
  /* columns first (every item reads its own B once), then rows, until >= 3 items per thread */
  j.gchunk = FBX__GP_NC / j.nr;
  j.srange = j.sl.ns;
  int64_t want = 3 * (int64_t)nt;
  for (;;) {
    j.gitems = fbx__gp_cdiv(j.groups, j.gchunk);
    j.sitems = fbx__gp_cdiv(j.sl.ns, j.srange);
    if (nt <= 1 || j.gitems * j.sitems >= want) break;
    if (j.gchunk > 1)
      j.gchunk = fbx__gp_cdiv(j.gchunk, 2);
    else if (j.srange > 2)
      j.srange = fbx__gp_cdiv(j.srange, 2);
    else
      break;
  }
  size_t bytes = (size_t)(d->M * d->K) * sizeof(float);
  void *own = NULL;
  j.ap = c ? fbx_cpu_gemm_ws(c, bytes) : (own = fbx_malloc_aligned(bytes));
  if (!j.ap) return FBX_ERR_OOM();
  int64_t items = j.gitems * j.sitems;
  if (nt <= 1) {
    fbx__gp_pack_task(&j, 0, j.sl.ns, 0);
    fbx__gp_task(&j, 0, items, 0);
  } else {
    fbx_cpu_par(c, j.sl.ns, 1, fbx__gp_pack_task, &j);
    fbx_cpu_par(c, items, 1, fbx__gp_task, &j);
  }
  fbx_free_aligned(own);
  return NULL;
}
