/* MATMUL_NBITS: Y(M, N) = A(M, K) @ W^T (+ bias), W(N, K) stored as 4- or 8-bit
 * blocks (ORT's MatMulNBits): column n, block b (block_size values of k) holds
 * q in [0, 2^bits) with scale s[n, b] and zero point z[n, b]; w = (q - z) * s.
 *
 * Weights are repacked once at compile (node_prepare) and dequantised in
 * registers; nothing is expanded to float in memory:
 *   4-bit: per block, chunks of 16 values in 8 bytes: low nibbles = values
 *          0..7, high nibbles = values 8..15 of the chunk (ORT packs pairs
 *          (2i, 2i+1) in one byte; this order lets one AND and one shift give
 *          two runs of 8 consecutive k). 8-bit: as given.
 *   scales and zero points as float (N, k_blocks); integer zero points also
 *   as int32 for the int8 path.
 * accuracy_level 0..3: float. Per block, acc += s * (sum_k q_k a_k) and, once
 *   per row of A, sum_b s z asum_b is subtracted (asum_b = sum of a over the
 *   block, shared by every column): FMAs on the nibbles themselves.
 * accuracy_level 4: as ORT does on the CPU, A is quantised per block to int8
 *   (scale_a = max|a| / 127, round to nearest) and each block is an exact
 *   integer dot sum_k qa_k (q_k - z); acc += scale_a * s * dot.
 * Columns are split over the pool; every row of A is run against a column
 * chunk while it is in cache. At accuracy_level 0 with M >= 8 (prefill), panels
 * of columns are dequantised once to float and multiplied with sgemm instead. */
#include <math.h>
#include <string.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "cpu_internal.h"
#include "cpu_simd.h"

typedef struct fbx__mnb_state {
  int64_t K, N, kb, bs, kpad; /* k_blocks, block_size, kb * bs */
  int bits;
  int64_t col_bytes;          /* repacked bytes per column: kb * bs * bits / 8 */
  uint8_t *w;                 /* (N, col_bytes) */
  float *scale, *zp;          /* (N, kb) */
  int32_t *zpi;               /* (N, kb): integer zero points (int8 path); NULL when fractional */
} fbx__mnb_state;

/* q value k of column n's ORT blob (bits 4: low nibble first). */
static inline unsigned fbx__mnb_q(const uint8_t *col, int bits, int64_t k) {
  if (bits == 8) return col[k];
  uint8_t byte = col[k >> 1];
  return (k & 1) ? byte >> 4 : byte & 15u;
}

fbx_status *fbx_cpu_mnb_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                const fbx_tensor *inputs, void **state) {
  (void)c, (void)inputs;
  *state = NULL;
  const fbx_ir_params *p = &node->params;
  if (!const_inputs || !const_inputs[1] || !const_inputs[2]) return NULL; /* run_node reports it */
  const fbx_tensor *B = const_inputs[1], *S = const_inputs[2];
  const fbx_tensor *Z = node->n_inputs > 3 ? const_inputs[3] : NULL;
  if (node->n_inputs > 3 && node->inputs[3] != FBX_IR_NONE && !Z) return NULL;
  int64_t K = p->nbits.K, N = p->nbits.N, bs = p->nbits.block_size, kb = (K + bs - 1) / bs;
  int bits = p->nbits.bits;
  int64_t blob = bs * bits / 8;
  if (B->dtype != FBX_DTYPE_U8 || fbx_cpu_numel(B) != N * kb * blob || S->dtype != FBX_DTYPE_F32 ||
      fbx_cpu_numel(S) != N * kb)
    return FBX_ERR_ARG("MATMUL_NBITS: B (%lld bytes) / scales (%lld) do not match N=%lld K=%lld block_size=%lld",
                       (long long)fbx_cpu_numel(B), (long long)fbx_cpu_numel(S), (long long)N, (long long)K,
                       (long long)bs);
  int64_t zrow = p->nbits.zp_u8 ? (kb * bits + 7) / 8 : kb;
  if (Z && (fbx_cpu_numel(Z) != N * zrow || Z->dtype != (p->nbits.zp_u8 ? FBX_DTYPE_U8 : FBX_DTYPE_F32)))
    return FBX_ERR_ARG("MATMUL_NBITS: zero_points have %lld elements, want %lld", (long long)fbx_cpu_numel(Z),
                       (long long)(N * zrow));
  fbx__mnb_state *s = fbx_calloc(1, sizeof *s);
  if (!s) return FBX_ERR_OOM();
  *s = (fbx__mnb_state){.K = K, .N = N, .kb = kb, .bs = bs, .kpad = kb * bs, .bits = bits, .col_bytes = blob * kb};
  s->w = fbx_malloc_aligned((size_t)(N * s->col_bytes) + 64);
  s->scale = fbx_malloc((size_t)(N * kb) * sizeof(float));
  s->zp = fbx_malloc((size_t)(N * kb) * sizeof(float));
  s->zpi = fbx_malloc((size_t)(N * kb) * sizeof(int32_t));
  if (!s->w || !s->scale || !s->zp || !s->zpi) {
    fbx_cpu_mnb_release(s);
    return FBX_ERR_OOM();
  }
  const uint8_t *bsrc = B->data;
  bool integral = true;
  for (int64_t n = 0; n < N; n++) {
    const uint8_t *col = bsrc + n * s->col_bytes;
    uint8_t *dst = s->w + n * s->col_bytes;
    if (bits == 8) memcpy(dst, col, (size_t)s->col_bytes);
    else
      for (int64_t k0 = 0; k0 < s->kpad; k0 += 16, dst += 8) /* chunk of 16 k -> 8 bytes */
        for (int i = 0; i < 8; i++)
          dst[i] = (uint8_t)(fbx__mnb_q(col, 4, k0 + i) | fbx__mnb_q(col, 4, k0 + 8 + i) << 4);
    for (int64_t b = 0; b < kb; b++) {
      float z = (float)(1 << (bits - 1));
      if (Z && p->nbits.zp_u8) z = (float)fbx__mnb_q((const uint8_t *)Z->data + n * zrow, bits, b);
      else if (Z) z = ((const float *)Z->data)[n * kb + b];
      s->scale[n * kb + b] = ((const float *)S->data)[n * kb + b];
      s->zp[n * kb + b] = z;
      s->zpi[n * kb + b] = (int32_t)z;
      integral &= z == (float)(int32_t)z;
    }
  }
  if (!integral) {
    fbx_free(s->zpi);
    s->zpi = NULL;
  }
  *state = s;
  return NULL;
}

void fbx_cpu_mnb_release(void *state) {
  fbx__mnb_state *s = state;
  if (!s) return;
  fbx_free_aligned(s->w);
  fbx_free(s->scale);
  fbx_free(s->zp);
  fbx_free(s->zpi);
  fbx_free(s);
}

/* ------------------------------------------------------------ float path -- */

/* sum_k q_k a_k over one block of bs values (chunks of 16). */
static inline float fbx__mnb_block_f32(const uint8_t *w, const float *a, int64_t bs, int bits) {
#if defined(__AVX2__)
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  if (bits == 4) {
    const __m128i lo4 = _mm_set1_epi8(15);
    for (int64_t k = 0; k < bs; k += 16, w += 8) {
      __m128i v = _mm_loadl_epi64((const __m128i *)w);
      __m128i lo = _mm_and_si128(v, lo4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), lo4);
      acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), _mm256_loadu_ps(a + k), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), _mm256_loadu_ps(a + k + 8), acc1);
    }
  } else {
    for (int64_t k = 0; k < bs; k += 16, w += 16) {
      __m128i v = _mm_loadu_si128((const __m128i *)w);
      acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)), _mm256_loadu_ps(a + k), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))),
                             _mm256_loadu_ps(a + k + 8), acc1);
    }
  }
  return fbx__hsum256(_mm256_add_ps(acc0, acc1));
#else
  float acc = 0;
  for (int64_t k = 0; k < bs; k += 16)
    for (int i = 0; i < 16; i++) {
      unsigned q = bits == 8 ? w[k + i] : i < 8 ? w[k / 2 + i] & 15u : w[k / 2 + i - 8] >> 4;
      acc += (float)q * a[k + i];
    }
  return acc;
#endif
}

/* ------------------------------------------------------------- int8 path -- */

/* Exact sum_k qa_k q_k over one block (|sum| < 2^31 for bs <= 128 and 8 bits). */
static inline int32_t fbx__mnb_block_i8(const uint8_t *w, const int8_t *qa, int64_t bs, int bits) {
#if defined(__AVX2__)
  __m128i acc = _mm_setzero_si128();
  const __m128i ones = _mm_set1_epi16(1);
  if (bits == 4) { /* u8 (0..15) x s8: pair sums <= 2*15*127 fit int16 */
    const __m128i lo4 = _mm_set1_epi8(15);
    for (int64_t k = 0; k < bs; k += 16, w += 8) {
      __m128i v = _mm_loadl_epi64((const __m128i *)w);
      __m128i q = _mm_unpacklo_epi64(_mm_and_si128(v, lo4), _mm_and_si128(_mm_srli_epi16(v, 4), lo4));
      __m128i d = _mm_maddubs_epi16(q, _mm_loadu_si128((const __m128i *)(qa + k)));
      acc = _mm_add_epi32(acc, _mm_madd_epi16(d, ones));
    }
  } else { /* 8-bit weights overflow maddubs' int16 pairs: widen to int16 first */
    for (int64_t k = 0; k < bs; k += 16, w += 16) {
      __m256i q = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)w));
      __m256i x = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qa + k)));
      __m256i d = _mm256_madd_epi16(q, x);
      acc = _mm_add_epi32(acc, _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1)));
    }
  }
  acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0x4e));
  acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0xb1));
  return _mm_cvtsi128_si32(acc);
#else
  int32_t acc = 0;
  for (int64_t k = 0; k < bs; k += 16)
    for (int i = 0; i < 16; i++) {
      unsigned q = bits == 8 ? w[k + i] : i < 8 ? w[k / 2 + i] & 15u : w[k / 2 + i - 8] >> 4;
      acc += (int32_t)q * qa[k + i];
    }
  return acc;
#endif
}

/* ------------------------------------------------- prefill: panels + GEMM -- */

/* accuracy_level 0 with M >= FBX__MNB_GEMM_M rows: each task dequantises a panel of
 * FBX__MNB_PANEL columns to float (worker scratch, (cols, K) row-major, hot in L2) and
 * runs a single-threaded sgemm on it, so the dequantisation is paid once per panel
 * and not once per row; below that M the register-dequantising GEMV above wins. */
#define FBX__MNB_PANEL 64
#define FBX__MNB_GEMM_M 8

/* dst(K) = column n of W as float32. */
static void fbx__mnb_dequant_col(const fbx__mnb_state *s, int64_t n, float *dst) {
  const int64_t kb = s->kb, bs = s->bs, blk = bs * s->bits / 8;
  const uint8_t *col = s->w + n * s->col_bytes;
  for (int64_t b = 0; b < kb; b++) {
    const float sc = s->scale[n * kb + b], off = -s->zp[n * kb + b] * sc;
    const uint8_t *w = col + b * blk;
    int64_t k0 = b * bs, kend = k0 + bs < s->K ? bs : s->K - k0;
    float tmp[128];
    for (int64_t c = 0; c < bs; c += 16) {
      for (int i = 0; i < 16; i++) {
        unsigned q = s->bits == 8 ? w[c + i] : i < 8 ? w[c / 2 + i] & 15u : w[c / 2 + i - 8] >> 4;
        tmp[c + i] = (float)q * sc + off;
      }
    }
    memcpy(dst + k0, tmp, sizeof(float) * (size_t)kend);
  }
}

typedef struct fbx__mnb_gemm_job {
  const fbx__mnb_state *s;
  const float *a, *bias;
  float *y, *wbuf; /* wbuf: per worker FBX__MNB_PANEL * K floats */
  int64_t M;
} fbx__mnb_gemm_job;

static void fbx__mnb_gemm_panels(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__mnb_gemm_job *j = arg;
  const fbx__mnb_state *s = j->s;
  float *wb = j->wbuf + (size_t)worker * (size_t)(FBX__MNB_PANEL * s->K);
  for (int64_t p = p0; p < p1; p++) {
    int64_t n0 = p * FBX__MNB_PANEL, nn = s->N - n0 < FBX__MNB_PANEL ? s->N - n0 : FBX__MNB_PANEL;
    for (int64_t n = 0; n < nn; n++) fbx__mnb_dequant_col(s, n0 + n, wb + n * s->K);
    fbx_cpu_sgemm(false, true, j->M, nn, s->K, 1.0f, j->a, s->K, wb, s->K, 0.0f, j->y + n0, s->N);
    if (j->bias)
      for (int64_t m = 0; m < j->M; m++)
        for (int64_t n = 0; n < nn; n++) j->y[m * s->N + n0 + n] += j->bias[n0 + n];
  }
}

/* ------------------------------------------------------------ the kernel -- */

/* One row of A, prepared: float path a (kpad, zero padded) and per-block sums;
 * int8 path qa (kpad), its per-block scales and sums. */
typedef struct fbx__mnb_row {
  const float *a, *asum;
  const int8_t *qa;
  const float *sa;
  const int32_t *qsum;
} fbx__mnb_row;

typedef struct fbx__mnb_job {
  const fbx__mnb_state *s;
  const fbx__mnb_row *rows;
  int64_t M;
  const float *bias;
  float *y; /* (M, N) */
  int int8;
} fbx__mnb_job;

static void fbx__mnb_cols(void *arg, int64_t n0, int64_t n1, int worker) {
  (void)worker;
  const fbx__mnb_job *j = arg;
  const fbx__mnb_state *s = j->s;
  const int64_t kb = s->kb, bs = s->bs, blk_bytes = bs * s->bits / 8;
  for (int64_t n = n0; n < n1; n++) {
    const uint8_t *col = s->w + n * s->col_bytes;
    const float *sc = s->scale + n * kb, *zp = s->zp + n * kb;
    const int32_t *zi = s->zpi ? s->zpi + n * kb : NULL;
    float bias = j->bias ? j->bias[n] : 0.0f;
    for (int64_t m = 0; m < j->M; m++) {
      const fbx__mnb_row *r = &j->rows[m];
      float acc = 0, corr = 0;
      if (j->int8)
        for (int64_t b = 0; b < kb; b++) {
          int32_t d = fbx__mnb_block_i8(col + b * blk_bytes, r->qa + b * bs, bs, s->bits) - zi[b] * r->qsum[b];
          acc += (float)d * (r->sa[b] * sc[b]);
        }
      else
        for (int64_t b = 0; b < kb; b++) {
          acc += sc[b] * fbx__mnb_block_f32(col + b * blk_bytes, r->a + b * bs, bs, s->bits);
          corr += sc[b] * zp[b] * r->asum[b];
        }
      j->y[m * s->N + n] = acc - corr + bias;
    }
  }
}

/* Prepare row m of A into scratch (float copy padded to kpad, or int8 blocks). */
static void fbx__mnb_row_prep(const fbx__mnb_state *s, const float *a, int int8, float *af, float *asum, int8_t *qa,
                              float *sa, int32_t *qsum) {
  const int64_t K = s->K, bs = s->bs;
  for (int64_t b = 0; b < s->kb; b++) {
    int64_t k0 = b * bs, k1 = k0 + bs < K ? k0 + bs : K;
    if (!int8) {
      float t = 0;
      for (int64_t k = k0; k < k0 + bs; k++) t += af[k] = k < k1 ? a[k] : 0.0f;
      asum[b] = t;
      continue;
    }
    float amax = 0;
    for (int64_t k = k0; k < k1; k++) amax = fmaxf(amax, fabsf(a[k]));
    float scale = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
    int32_t t = 0;
    for (int64_t k = k0; k < k0 + bs; k++) {
      int q = k < k1 ? (int)nearbyintf(a[k] * inv) : 0;
      q = q > 127 ? 127 : q < -127 ? -127 : q;
      qa[k] = (int8_t)q;
      t += q;
    }
    sa[b] = scale;
    qsum[b] = t;
  }
}

fbx_status *fbx_cpu_k_MATMUL_NBITS(FBX_CPU_KERNEL_ARGS) {
  const fbx__mnb_state *s = state;
  if (!s) return FBX_ERR_NOTIMPL("MATMUL_NBITS: B, scales and zero_points must be constants (packed at compile)");
  const fbx_tensor *A = &in[0];
  if (A->dtype != FBX_DTYPE_F32 || out[0].dtype != FBX_DTYPE_F32)
    return FBX_ERR_NOTIMPL("MATMUL_NBITS: A dtype %s (float32 only)", fbx_dtype_name(A->dtype));
  if (A->rank < 1 || A->dims[A->rank - 1] != s->K)
    return FBX_ERR_ARG("MATMUL_NBITS: A's last dim is not K=%lld", (long long)s->K);
  const float *bias = NULL;
  if (fbx_cpu_present(in, n_in, 4)) {
    if (in[4].dtype != FBX_DTYPE_F32 || fbx_cpu_numel(&in[4]) != s->N) return FBX_ERR_ARG("MATMUL_NBITS: bias shape");
    bias = in[4].data;
  }
  int int8 = node->params.nbits.accuracy_level == 4 && s->zpi;
  int64_t M = s->K ? fbx_cpu_numel(A) / s->K : 0, kpad = s->kpad, kb = s->kb;
  info->flops = 2.0 * (double)M * (double)s->N * (double)s->K;
  if (!int8 && M >= FBX__MNB_GEMM_M) {
    int64_t panels = (s->N + FBX__MNB_PANEL - 1) / FBX__MNB_PANEL, threads = c->threads > 0 ? c->threads : 1;
    float *wbuf = fbx_cpu_scratch(c, (size_t)(threads * FBX__MNB_PANEL * s->K) * sizeof(float));
    if (!wbuf) return FBX_ERR_OOM();
    fbx__mnb_gemm_job g = {.s = s, .a = A->data, .bias = bias, .y = out[0].data, .wbuf = wbuf, .M = M};
    info->variant = s->bits == 4 ? "mnb_int4_panel_sgemm" : "mnb_int8_panel_sgemm";
    info->reason = "accuracy_level 0, M >= 8: 64-column panels dequantised once, OpenBLAS sgemm per panel";
    fbx_cpu_par(c, panels, 1, fbx__mnb_gemm_panels, &g);
    return NULL;
  }
  /* scratch: rows, then per row kpad floats + kb sums (float path) or kpad int8 + kb scales + kb sums */
  size_t per_row = int8 ? (size_t)kpad + (size_t)kb * 8 + 64 : (size_t)(kpad + kb) * 4 + 64;
  size_t need = (size_t)M * (sizeof(fbx__mnb_row) + per_row) + 64;
  unsigned char *mem = fbx_cpu_scratch(c, need);
  if (!mem) return FBX_ERR_OOM();
  fbx__mnb_row *rows = (fbx__mnb_row *)mem;
  unsigned char *p = mem + (((size_t)M * sizeof *rows + 63) & ~(size_t)63);
  for (int64_t m = 0; m < M; m++, p += per_row) {
    fbx__mnb_row *r = &rows[m];
    memset(r, 0, sizeof *r);
    if (int8) {
      int8_t *qa = (int8_t *)p;
      float *sa = (float *)(p + ((kpad + 3) & ~(int64_t)3));
      int32_t *qs = (int32_t *)(sa + kb);
      fbx__mnb_row_prep(s, (const float *)A->data + m * s->K, 1, NULL, NULL, qa, sa, qs);
      r->qa = qa, r->sa = sa, r->qsum = qs;
    } else {
      float *af = (float *)p, *as = af + kpad;
      fbx__mnb_row_prep(s, (const float *)A->data + m * s->K, 0, af, as, NULL, NULL, NULL);
      r->a = af, r->asum = as;
    }
  }
  fbx__mnb_job j = {.s = s, .rows = rows, .M = M, .bias = bias, .y = out[0].data, .int8 = int8};
  info->variant = int8 ? (s->bits == 4 ? "mnb_int4_int8_avx2" : "mnb_int8_int8_avx2")
                       : (s->bits == 4 ? "mnb_int4_f32_avx2" : "mnb_int8_f32_avx2");
  info->reason = int8 ? "accuracy_level 4: A quantised to int8 per block, exact integer block dots"
                 : node->params.nbits.accuracy_level == 4 ? "accuracy_level 4 with fractional zero points: float"
                                                          : "accuracy_level 0: float, dequantised in registers";
  int64_t grain = 16 + 65536 / (s->K * (M ? M : 1) + 1);
  if (s->N * s->K * M >= 1 << 16) fbx_cpu_par(c, s->N, grain, fbx__mnb_cols, &j);
  else fbx__mnb_cols(&j, 0, s->N, 0);
  return NULL;
}
