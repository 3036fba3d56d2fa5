/* Prefill of MATMUL_NBITS at accuracy_level 0..3 (M >= FBX__MNB_GEMM_M rows): a float
 * GEMM that dequantises the weights straight into its register tile's operand.
 *
 * Computed transposed, Y^T(N, M) = W(N, K) @ A^T, so that a sliver of MR columns of W
 * (dequantised in k order, exactly as the weights are stored: no transpose of W) is the
 * micro-kernel's broadcast operand and A is its packed one:
 *   - A^T is packed once per call into panels of 16 rows of A, K-major
 *     (apk[(p kpad + k) 16 + j] = A[16 p + j, k], zero past M and K): the layout of
 *     fbx_cpu_gemm_ukr_*'s B operand;
 *   - a task owns NB columns of W and an M block; per K block (KC values, a multiple of
 *     the quant block) it dequantises each MR-column sliver into a small buffer
 *     (MR x KC floats, L1) and runs the micro-kernel over the 32-row pairs of the M
 *     block (the packed A of one K block, KC x MC floats, stays in L2 across the
 *     task's slivers), accumulating into the task's tile ct (NB x MC floats);
 *   - after the last K block ct is transposed into Y (+ bias).
 * So every weight is dequantised once per M block and nothing is expanded to float in
 * memory beyond one sliver. Micro-kernel: 12 x 32 AVX-512 or 6 x 16 (x2) AVX2 (cpu_gemm.h),
 * as the ISA says; the dequantisation AVX2 (or plain C on the portable path). */
#include <string.h>

#include <immintrin.h>

#include "cpu_gemm.h"
#include "cpu_gemm_avx512.h"
#include "cpu_mnb.h"

#define FBX__MNBP_KC 256 /* K block: a multiple of every block size (16..128) */
#define FBX__MNBP_MC 256 /* M block: a multiple of 32 (the micro-kernel's row pairs) */
#define FBX__MNBP_NB 48  /* most columns per task: a multiple of 12 and 6 */
#define FBX__MNBP_LDW (FBX__MNBP_KC + 16) /* sliver row stride: rows not 1 KiB apart in L1 */

/* dst[k - b0 bs] for k in blocks [b0, b1) of column n: q s - s z (float32). */
static void fbx__mnb_dequant_blocks(const fbx__mnb_state *s, int64_t n, int64_t b0, int64_t b1, float *dst,
                                    int simd) {
  const int64_t bs = s->bs, blk = bs * s->bits / 8;
  const uint8_t *col = s->w + n * s->col_bytes;
  for (int64_t b = b0; b < b1; b++) {
    const float sc = s->scale[n * s->ks + b];
    const float off = -(s->sz ? s->sz[n * s->ks + b] : sc * (float)s->z8[n * s->kz + b]);
    const uint8_t *w = col + b * blk;
    float *d = dst + (b - b0) * bs;
    if (!simd) {
      for (int64_t k = 0; k < bs; k++) d[k] = (float)fbx__mnb_val(s, w, k) * sc + off;
      continue;
    }
    const __m256 vs = _mm256_set1_ps(sc), vo = _mm256_set1_ps(off);
    const __m128i lo4 = _mm_set1_epi8(15);
    for (int64_t k = 0; k < bs; k += 16) {
      __m128i q;
      if (s->bits == 8) {
        q = _mm_loadu_si128((const __m128i *)(w + k));
      } else if (s->ch == 32) { /* chunk of 32: bytes 0..15, low nibbles k 0..15, high 16..31 */
        __m128i v = _mm_loadu_si128((const __m128i *)(w + (k / 32) * 16));
        q = k % 32 ? _mm_and_si128(_mm_srli_epi16(v, 4), lo4) : _mm_and_si128(v, lo4);
      } else { /* chunk of 16 in 8 bytes */
        __m128i v = _mm_loadl_epi64((const __m128i *)(w + k / 2));
        q = _mm_unpacklo_epi64(_mm_and_si128(v, lo4), _mm_and_si128(_mm_srli_epi16(v, 4), lo4));
      }
      __m256 f0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
      __m256 f1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(q, q)));
      _mm256_storeu_ps(d + k, _mm256_fmadd_ps(f0, vs, vo));
      _mm256_storeu_ps(d + k + 8, _mm256_fmadd_ps(f1, vs, vo));
    }
  }
}

#define FBX__T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

/* The same for 4-bit 32-chunks and 8-bit weights with 16-float lanes: a chunk's 16 bytes
 * widen to 16 dwords; the AND gives values 0..15 of the chunk, the shift values 16..31. */
static FBX__T512 void fbx__mnb_dequant_blocks512(const fbx__mnb_state *s, int64_t n, int64_t b0, int64_t b1,
                                                 float *dst) {
  const int64_t bs = s->bs, blk = bs * s->bits / 8;
  const uint8_t *col = s->w + n * s->col_bytes;
  const __m512i lo4 = _mm512_set1_epi32(15);
  for (int64_t b = b0; b < b1; b++) {
    const float sc = s->scale[n * s->ks + b];
    const __m512 vs = _mm512_set1_ps(sc),
                 vo = _mm512_set1_ps(-(s->sz ? s->sz[n * s->ks + b] : sc * (float)s->z8[n * s->kz + b]));
    const uint8_t *w = col + b * blk;
    float *d = dst + (b - b0) * bs;
    if (s->bits == 8) {
      for (int64_t k = 0; k < bs; k += 16) {
        __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + k))));
        _mm512_storeu_ps(d + k, _mm512_fmadd_ps(f, vs, vo));
      }
      continue;
    }
    for (int64_t k = 0; k < bs; k += 32) {
      __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + k / 2)));
      _mm512_storeu_ps(d + k, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, lo4)), vs, vo));
      _mm512_storeu_ps(d + k + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)), vs, vo));
    }
  }
}

/* r[i][j] <- r[j][i], 16 x 16 floats in registers. */
static inline FBX__T512 void fbx__mnbp_t16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; i++) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
    t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xDD);
    t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xDD);
  }
  for (int i = 0; i < 8; i++) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
  }
}

/* Y[m, n + r] = ct[r ldc + m - m0] + bias[n + r], r < nr (<= 16), m in [m0, m1): 16 x 16
 * register transposes (ct's rows are readable to a multiple of 16 past m1 - m0). */
static FBX__T512 void fbx__mnbp_store512(float *y, int64_t N, const float *bias, const float *ct, int64_t ldc,
                                         int64_t n, int64_t nr, int64_t m0, int64_t m1) {
  const __mmask16 mk = (__mmask16)((1u << nr) - 1);
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(mk, bias + n) : _mm512_setzero_ps();
  for (int64_t m = m0; m < m1; m += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; i++) r[i] = i < nr ? _mm512_loadu_ps(ct + i * ldc + (m - m0)) : _mm512_setzero_ps();
    fbx__mnbp_t16(r);
    const int rows = m1 - m < 16 ? (int)(m1 - m) : 16;
    for (int i = 0; i < rows; i++) _mm512_mask_storeu_ps(y + (m + i) * N + n, mk, _mm512_add_ps(r[i], bv));
  }
}

typedef struct fbx__mnbp_job {
  const fbx__mnb_state *s;
  const float *A;   /* (M, K) */
  int64_t M, mpad;  /* mpad: M rounded up to 16 */
  float *apk;       /* (mpad / 16 panels, kpad, 16) */
  const float *bias;
  float *y;         /* (M, N) */
  unsigned char *ws;
  size_t ws_bytes;  /* per worker: wt (wt_floats) + ct (NB x MC) */
  int64_t wt_floats; /* AVX-512: MR x kpad (a whole sliver); AVX2: MR x LDW (one K block of it) */
  int mr, simd, avx512;
  int64_t nb;       /* columns per task (<= FBX__MNBP_NB, a multiple of 12) */
  int64_t ntask_n;  /* tasks along N; task t: N part t % ntask_n, M block t / ntask_n */
} fbx__mnbp_job;

/* Panels [p0, p1) of A^T: apk panel p row k = A[16 p .. 16 p + 15, k]. */
static void fbx__mnbp_pack(void *arg, int64_t p0, int64_t p1, int worker) {
  (void)worker;
  const fbx__mnbp_job *j = arg;
  const int64_t K = j->s->K, kpad = j->s->kpad;
  for (int64_t p = p0; p < p1; p++) {
    float *dst = j->apk + p * kpad * 16;
    const int64_t rows = j->M - 16 * p < 16 ? j->M - 16 * p : 16;
    if (rows < 16 || kpad > K) memset(dst, 0, (size_t)(kpad * 16) * sizeof(float));
    for (int64_t k0 = 0; k0 < K; k0 += 16) { /* 16 x 16 blocks: the writes stay in one 1 KiB stretch */
      const int64_t kn = K - k0 < 16 ? K - k0 : 16;
      for (int64_t r = 0; r < rows; r++) {
        const float *src = j->A + (16 * p + r) * K + k0;
        for (int64_t k = 0; k < kn; k++) dst[(k0 + k) * 16 + r] = src[k];
      }
    }
  }
}

/* Y[m, n0 + r] = ct[r ldc + m - m0] + bias[n0 + r] for r < nr, m in [m0, m1). */
static void fbx__mnbp_store(const fbx__mnbp_job *j, const float *ct, int64_t ldc, int64_t n0, int64_t nr, int64_t m0,
                            int64_t m1) {
  const int64_t N = j->s->N;
  for (int64_t m = m0; m < m1; m++) {
    float *yr = j->y + m * N + n0;
    for (int64_t r = 0; r < nr; r++) yr[r] = ct[r * ldc + (m - m0)] + (j->bias ? j->bias[n0 + r] : 0.0f);
  }
}

/* AVX-512: per sliver of 12 columns, all of K at once (the whole-K 12 x 32 kernel of
 * fbx_cpu_gemm_packed, which streams the packed operand with prefetch and stores its tile
 * once): the sliver (12 x kpad floats, L2) is dequantised, then multiplied with the M
 * block's panels of A^T. */
static FBX__T512 void fbx__mnbp_task512(const fbx__mnbp_job *j, int64_t n0, int64_t n1, int64_t m0, int64_t m1, float *wt,
                              float *ct) {
  const fbx__mnb_state *s = j->s;
  const int64_t kpad = s->kpad, MR = j->mr;
  for (int64_t n = n0; n < n1; n += MR) {
    const int64_t mr = n1 - n < MR ? n1 - n : MR;
    for (int64_t r = 0; r < mr; r++)
      if (j->simd && (s->bits == 8 || s->ch == 32)) fbx__mnb_dequant_blocks512(s, n + r, 0, s->kb, wt + r * kpad);
      else fbx__mnb_dequant_blocks(s, n + r, 0, s->kb, wt + r * kpad, j->simd);
    const int64_t cols = m1 - m0;
    const int64_t pairs = ((cols + 15) / 16 + 1) / 2, ns = (mr + 11) / 12; /* every unit of the 2-D split */
    fbx_cpu_gemm_packed_units_avx512(wt, kpad, j->apk + (m0 / 16) * kpad * 16, ct, FBX__MNBP_MC, mr, kpad, cols, 1.0f,
                                     ns, 0, pairs * ns);
    fbx__mnbp_store512(j->y, s->N, j->bias, ct, FBX__MNBP_MC, n, mr, m0, m1);
  }
}

/* AVX2: K blocks of KC, each sliver's block dequantised into wt (MR x LDW) and multiplied
 * into the task's tile ct (NB x MC) with the blocked GEMM's micro-kernel. */
static void fbx__mnbp_task_kc(const fbx__mnbp_job *j, int64_t n0, int64_t n1, int64_t m0, int64_t m1, float *wt,
                              float *ct) {
  const fbx__mnb_state *s = j->s;
  const int64_t kpad = s->kpad, bs = s->bs, MR = j->mr;
  for (int64_t k0 = 0; k0 < kpad; k0 += FBX__MNBP_KC) {
    const int64_t kl = kpad - k0 < FBX__MNBP_KC ? kpad - k0 : FBX__MNBP_KC;
    const float beta = k0 ? 1.0f : 0.0f;
    for (int64_t n = n0; n < n1; n += MR) {
      const int mr = n1 - n < MR ? (int)(n1 - n) : (int)MR;
      for (int r = 0; r < mr; r++)
        fbx__mnb_dequant_blocks(s, n + r, k0 / bs, (k0 + kl) / bs, wt + r * FBX__MNBP_LDW, j->simd);
      float *c = ct + (n - n0) * FBX__MNBP_MC;
      for (int64_t m = m0; m < m1; m += 32) { /* rows m .. m + 31 of A: panels m / 16 and m / 16 + 1 */
        const float *b0 = j->apk + ((m / 16) * kpad + k0) * 16, *b1 = b0 + kpad * 16;
        const int64_t width = m1 - m < 32 ? m1 - m : 32;
        fbx_cpu_gemm_ukr_avx2(wt, FBX__MNBP_LDW, b0, b1, 16, kl, 1.0f, beta, c + (m - m0), FBX__MNBP_MC, mr, width);
      }
    }
  }
  fbx__mnbp_store(j, ct, FBX__MNBP_MC, n0, n1 - n0, m0, m1);
}

static void fbx__mnbp_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__mnbp_job *j = arg;
  const int64_t N = j->s->N;
  float *wt = (float *)(j->ws + (size_t)worker * j->ws_bytes);
  float *ct = wt + j->wt_floats;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t n0 = (t % j->ntask_n) * j->nb, n1 = n0 + j->nb < N ? n0 + j->nb : N;
    const int64_t m0 = (t / j->ntask_n) * FBX__MNBP_MC, m1 = m0 + FBX__MNBP_MC < j->M ? m0 + FBX__MNBP_MC : j->M;
    if (j->avx512) fbx__mnbp_task512(j, n0, n1, m0, m1, wt, ct);
    else fbx__mnbp_task_kc(j, n0, n1, m0, m1, wt, ct);
  }
}

fbx_status *fbx__mnb_prefill_f32(fbx_cpu_ctx *c, const fbx__mnb_state *s, const float *A, int64_t M,
                                 const float *bias, float *y, fbx__mnb_isa isa, fbx_kernel_info *info) {
  const int avx512 = isa >= FBX__MNB_AVX512;
  const int mr = avx512 ? FBX_CPU_GEMM_MR_AVX512 : FBX_CPU_GEMM_MR_AVX2;
  const int threads = c->threads > 0 ? c->threads : 1;
  const int64_t mpad = (M + 15) & ~(int64_t)15, npan = mpad / 16;
  const size_t apk_bytes = ((size_t)(npan * s->kpad * 16) * sizeof(float) + 63) & ~(size_t)63;
  const int64_t wt_floats = ((avx512 ? mr * s->kpad : mr * FBX__MNBP_LDW) + 15) & ~(int64_t)15;
  const size_t ws_bytes = ((size_t)(wt_floats + FBX__MNBP_NB * FBX__MNBP_MC) * sizeof(float) + 63) & ~(size_t)63;
  unsigned char *mem = fbx_cpu_scratch(c, apk_bytes + (size_t)threads * ws_bytes);
  if (!mem) return FBX_ERR_OOM();
  fbx__mnbp_job j = {.s = s, .A = A, .M = M, .mpad = mpad, .apk = (float *)mem, .bias = bias, .y = y,
                     .ws = mem + apk_bytes, .ws_bytes = ws_bytes, .wt_floats = wt_floats, .mr = mr, .simd = isa >= FBX__MNB_AVX2,
                     .avx512 = avx512};
  /* narrower tasks where N is small (k / v projections): at least 4 per thread to balance */
  j.nb = FBX__MNBP_NB;
  while (j.nb > 12 && (s->N + j.nb - 1) / j.nb < 4 * threads) j.nb -= 12;
  j.ntask_n = (s->N + j.nb - 1) / j.nb;
  info->variant = s->bits == 4 ? "mnb_int4_sliver_gemm" : "mnb_int8_sliver_gemm";
  info->reason = "accuracy_level 0, M >= 8: W dequantised per sliver into the GEMM micro-kernel's operand";
  fbx_cpu_par(c, npan, 1, fbx__mnbp_pack, &j);
  const int64_t mblocks = (M + FBX__MNBP_MC - 1) / FBX__MNBP_MC;
  fbx_cpu_par(c, j.ntask_n * mblocks, 1, fbx__mnbp_task, &j);
  return NULL;
}
