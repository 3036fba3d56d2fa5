/* MATMUL_NBITS: Y(M, N) = A(M, K) @ W^T (+ bias), W(N, K) stored as 4- or 8-bit
 * blocks (ORT's MatMulNBits): column n, block b (block_size values of k) holds
 * q in [0, 2^bits) with scale s[n, b] and zero point z[n, b]; w = (q - z) * s.
 *
 * Weights are repacked once at compile (node_prepare) and dequantised in
 * registers; nothing is expanded to float in memory on the decode path:
 *   4-bit: per block, chunks of CH = min(block_size, 32) values in CH/2 bytes:
 *          byte i holds value i (low nibble) and value i + CH/2 (high nibble),
 *          so one AND and one shift give two runs of consecutive k (ORT packs
 *          the pairs (2i, 2i+1) in one byte instead). 8-bit: as given.
 *   scales (N, k_blocks); scale * zero point (N, k_blocks), the correction.
 * Both paths compute sum_b s_b (sum_k q_k x_k) - sum_b s_b z_b xsum_b, the
 * second term one short dot over the blocks per row and column:
 * accuracy_level 0..3: x = a (float FMAs on the converted nibbles).
 * accuracy_level 4: as ORT does on the CPU, A is quantised per block to int8
 *   (scale_a = max|a| / 127, codes rounded to nearest even of a * 127/max|a|),
 *   x = qa * scale_a: each block's sum_k q_k qa_k is an exact integer
 *   (maddubs u8 x s8), scaled by s_b * scale_a,b. Up to 4 rows of A share every
 *   unpacked weight chunk (prefill).
 * Columns are split over the pool. At accuracy_level 0 with M >= 8 (prefill),
 * panels of columns are dequantised once to float and multiplied with sgemm. */
#include <math.h>
#include <string.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "cpu_gemm_avx512.h"
#include "cpu_internal.h"
#include "cpu_mnb.h"
#include "cpu_simd.h"


/* q value k of column n's ORT blob (bits 4: low nibble first). */
static inline unsigned fbx__mnb_q(const uint8_t *col, int bits, int64_t k) {
  if (bits == 8) return col[k];
  uint8_t byte = col[k >> 1];
  return (k & 1) ? byte >> 4 : byte & 15u;
}

/* Value i (< ch) of a repacked 4-bit chunk. */
static inline unsigned fbx__mnb_chunk_q(const uint8_t *w, int ch, int i) {
  int h = ch / 2;
  return i < h ? w[i] & 15u : w[i - h] >> 4;
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
  *s = (fbx__mnb_state){.K = K, .N = N, .kb = kb, .bs = bs, .kpad = kb * bs, .ks = (kb + 3) & ~(int64_t)3,
                        .bits = bits, .ch = bs < 32 ? (int)bs : 32,
                        .col_bytes = blob * kb};
  s->w = fbx_malloc_aligned((size_t)(N * s->col_bytes) + 64);
  s->scale = fbx_calloc((size_t)(N * s->ks), sizeof(float));
  s->sz = fbx_calloc((size_t)(N * s->ks), sizeof(float));
  if (!s->w || !s->scale || !s->sz) {
    fbx_cpu_mnb_release(s);
    return FBX_ERR_OOM();
  }
  const uint8_t *bsrc = B->data;
  const int ch = s->ch, half = ch / 2;
  for (int64_t n = 0; n < N; n++) {
    const uint8_t *col = bsrc + n * s->col_bytes;
    uint8_t *dst = s->w + n * s->col_bytes;
    if (bits == 8) memcpy(dst, col, (size_t)s->col_bytes);
    else
      for (int64_t k0 = 0; k0 < s->kpad; k0 += ch, dst += half)
        for (int i = 0; i < half; i++)
          dst[i] = (uint8_t)(fbx__mnb_q(col, 4, k0 + i) | fbx__mnb_q(col, 4, k0 + half + i) << 4);
    for (int64_t b = 0; b < kb; b++) {
      float z = (float)(1 << (bits - 1));
      if (Z && p->nbits.zp_u8) z = (float)fbx__mnb_q((const uint8_t *)Z->data + n * zrow, bits, b);
      else if (Z) z = ((const float *)Z->data)[n * kb + b];
      float sc = ((const float *)S->data)[n * kb + b];
      s->scale[n * s->ks + b] = sc;
      s->sz[n * s->ks + b] = sc * z;
    }
  }
  *state = s;
  return NULL;
}

void fbx_cpu_mnb_release(void *state) {
  fbx__mnb_state *s = state;
  if (!s) return;
  fbx_free_aligned(s->w);
  fbx_free(s->scale);
  fbx_free(s->sz);
  fbx_free(s);
}

static inline float fbx__mnb_dot(const float *a, const float *b, int64_t n) {
  int64_t i = 0;
  float s = 0;
#if defined(__AVX2__)
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  s = fbx__hsum256(acc);
#endif
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

#if defined(__AVX2__)
/* 32 4-bit values of a repacked 32-chunk as 32 u8, in k order. */
static inline __m256i fbx__mnb_u4x32(const uint8_t *w) {
  const __m128i lo4 = _mm_set1_epi8(15);
  __m128i v = _mm_loadu_si128((const __m128i *)w);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), lo4), _mm_and_si128(v, lo4));
}
/* 16 4-bit values of a repacked 16-chunk as 16 u8, in k order. */
static inline __m128i fbx__mnb_u4x16(const uint8_t *w) {
  const __m128i lo4 = _mm_set1_epi8(15);
  __m128i v = _mm_loadl_epi64((const __m128i *)w);
  return _mm_unpacklo_epi64(_mm_and_si128(v, lo4), _mm_and_si128(_mm_srli_epi16(v, 4), lo4));
}
/* 16 u8 -> two vectors of 8 floats. */
static inline void fbx__mnb_u8x16_f32(__m128i q, __m256 *f0, __m256 *f1) {
  *f0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
  *f1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(q, q)));
}
#endif

/* 16 consecutive values of block data w (4-bit chunks of s->ch, or 8-bit) starting at value k
 * (unused on some ISA paths under clang). */
__attribute__((unused)) static inline void fbx__mnb_vals16(const fbx__mnb_state *s, const uint8_t *w, int64_t k, unsigned *q) {
  for (int i = 0; i < 16; i++)
    q[i] = s->bits == 8 ? w[k + i] : fbx__mnb_chunk_q(w + (k / s->ch) * (s->ch / 2), s->ch, (int)(k % s->ch) + i);
}

/* ------------------------------------------------------------ float path -- */

/* sum_k q_k a_k over one block of bs values. */
static inline float fbx__mnb_block_f32(const fbx__mnb_state *s, const uint8_t *w, const float *a) {
  const int64_t bs = s->bs;
#if defined(__AVX2__)
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), f0, f1;
  if (s->bits == 4 && s->ch == 32) {
    for (int64_t k = 0; k < bs; k += 32, w += 16) {
      __m256i q = fbx__mnb_u4x32(w);
      fbx__mnb_u8x16_f32(_mm256_castsi256_si128(q), &f0, &f1);
      acc0 = _mm256_fmadd_ps(f0, _mm256_loadu_ps(a + k), acc0);
      acc1 = _mm256_fmadd_ps(f1, _mm256_loadu_ps(a + k + 8), acc1);
      fbx__mnb_u8x16_f32(_mm256_extracti128_si256(q, 1), &f0, &f1);
      acc0 = _mm256_fmadd_ps(f0, _mm256_loadu_ps(a + k + 16), acc0);
      acc1 = _mm256_fmadd_ps(f1, _mm256_loadu_ps(a + k + 24), acc1);
    }
  } else {
    for (int64_t k = 0; k < bs; k += 16) {
      __m128i q = s->bits == 4 ? fbx__mnb_u4x16(w + k / 2) : _mm_loadu_si128((const __m128i *)(w + k));
      fbx__mnb_u8x16_f32(q, &f0, &f1);
      acc0 = _mm256_fmadd_ps(f0, _mm256_loadu_ps(a + k), acc0);
      acc1 = _mm256_fmadd_ps(f1, _mm256_loadu_ps(a + k + 8), acc1);
    }
  }
  return fbx__hsum256(_mm256_add_ps(acc0, acc1));
#else
  float acc = 0;
  unsigned q[16];
  for (int64_t k = 0; k < bs; k += 16) {
    fbx__mnb_vals16(s, w, k, q);
    for (int i = 0; i < 16; i++) acc += (float)q[i] * a[k + i];
  }
  return acc;
#endif
}

#if defined(__AVX2__)
/* 4-bit, 32-chunks: sum_b s_b (sum_k q_k a_k) for one row, the block sums kept in
 * float lanes and scaled there (one horizontal sum per column, not per block). */
static inline float fbx__mnb_col_f32_c32(const fbx__mnb_state *s, const uint8_t *w, const float *sc, const float *a) {
  __m256 f[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}, q0, q1;
  const int64_t bs = s->bs;
  for (int64_t b = 0; b < s->kb; b++, a += bs) {
    __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    for (int64_t k = 0; k < bs; k += 32, w += 16) {
      __m256i q = fbx__mnb_u4x32(w);
      fbx__mnb_u8x16_f32(_mm256_castsi256_si128(q), &q0, &q1);
      b0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(a + k), b0);
      b1 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(a + k + 8), b1);
      fbx__mnb_u8x16_f32(_mm256_extracti128_si256(q, 1), &q0, &q1);
      b0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(a + k + 16), b0);
      b1 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(a + k + 24), b1);
    }
    __m256 sb = _mm256_broadcast_ss(&sc[b]);
    f[2 * (b & 1)] = _mm256_fmadd_ps(b0, sb, f[2 * (b & 1)]); /* even / odd blocks: separate FMA chains */
    f[2 * (b & 1) + 1] = _mm256_fmadd_ps(b1, sb, f[2 * (b & 1) + 1]);
  }
  return fbx__hsum256(_mm256_add_ps(_mm256_add_ps(f[0], f[1]), _mm256_add_ps(f[2], f[3])));
}
#endif

/* ------------------------------------------------------------- int8 path -- */

/* Exact sum_k qa_k q_k over one block, one row (|sum| < 2^31 for bs <= 128 and 8 bits). */
static inline int32_t fbx__mnb_block_i8(const fbx__mnb_state *s, const uint8_t *w, const int8_t *qa) {
  const int64_t bs = s->bs;
#if defined(__AVX2__)
  __m128i acc = _mm_setzero_si128();
  const __m128i ones = _mm_set1_epi16(1);
  if (s->bits == 4) { /* u8 (0..15) x s8: pair sums <= 2*15*127 fit int16 */
    for (int64_t k = 0; k < bs; k += 16) {
      __m128i q = s->ch == 32 ? (k % 32 ? _mm256_extracti128_si256(fbx__mnb_u4x32(w + (k / 32) * 16), 1)
                                        : _mm256_castsi256_si128(fbx__mnb_u4x32(w + (k / 32) * 16)))
                              : fbx__mnb_u4x16(w + k / 2);
      acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_maddubs_epi16(q, _mm_loadu_si128((const __m128i *)(qa + k))), ones));
    }
  } else { /* 8-bit weights overflow maddubs' int16 pairs: widen to int16 first */
    for (int64_t k = 0; k < bs; k += 16) {
      __m256i d = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w + k))),
                                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qa + k))));
      acc = _mm_add_epi32(acc, _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1)));
    }
  }
  acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0x4e));
  acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0xb1));
  return _mm_cvtsi128_si32(acc);
#else
  int32_t acc = 0;
  unsigned q[16];
  for (int64_t k = 0; k < bs; k += 16) {
    fbx__mnb_vals16(s, w, k, q);
    for (int i = 0; i < 16; i++) acc += (int32_t)q[i] * qa[k + i];
  }
  return acc;
#endif
}

#if defined(__AVX2__)
/* The 4-bit int8 group kernel, AVX2 (groups of 2 chunks = 64 values; the AVX-512
 * VNNI one in cpu_mnb_avx512.c takes 4). One 32-byte load holds two adjacent
 * 32-value chunks; AND / shift give their low and high nibbles, which meet the
 * row's codes in the same (permuted) order, so lanes 0-3 sum the first chunk and
 * lanes 4-7 the second; each lane is scaled by its block's weight scale times
 * the row's block scale. */
static inline __attribute__((always_inline)) void fbx__mnb_col_i4_avx2(
    const fbx__mnb_state *s, const uint8_t *w, const float *sc, const fbx__mnb_row *rows, const int R, float *y) {
  const __m256i lo4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  const __m256i pick = _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0);
  /* two accumulators per row (even / odd groups): the FMA chain, not the loads, bounds a column */
  __m256 facc[2][4];
  for (int r = 0; r < 4; r++) facc[0][r] = facc[1][r] = _mm256_setzero_ps();
  const int64_t pairs = (s->kpad + 63) / 64, bs = s->bs;
  for (int64_t g = 0; g < pairs; g++, w += 32) {
    __m256i v = _mm256_loadu_si256((const __m256i *)w);
    __m256i lo = _mm256_and_si256(v, lo4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
    /* lane scales: the two blocks' (bs 32) or the one block's; loadl_epi64 reads 8 unaligned bytes */
    __m256 swv;
    if (bs == 32) {
      __m128 two = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(sc + 2 * g)));
      swv = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two), pick);
    } else {
      swv = _mm256_broadcast_ss(&sc[(64 * g) / bs]);
    }
    for (int r = 0; r < R; r++) {
      const int8_t *x = rows[r].qa + 64 * g;
      /* u8 (0..15) x s8 pairs fit int16; madd with ones gives 4 adjacent bytes per lane */
      __m256i d0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)x));
      __m256i d1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(x + 32)));
      __m256i acc = _mm256_add_epi32(_mm256_madd_epi16(d0, ones), _mm256_madd_epi16(d1, ones));
      __m256 lane_scale = _mm256_mul_ps(swv, _mm256_loadu_ps(rows[r].sav + 8 * g));
      facc[g & 1][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), lane_scale, facc[g & 1][r]);
    }
  }
  for (int r = 0; r < R; r++) y[r] = fbx__hsum256(_mm256_add_ps(facc[0][r], facc[1][r]));
}

static void fbx__mnb_i4_cols_avx2(const fbx__mnb_i4_job *j, int64_t n0, int64_t n1) {
  const fbx__mnb_state *s = j->s;
  const int64_t N = s->N, ks = s->ks;
  for (int64_t n = n0; n < n1; n++) {
    const uint8_t *col = s->w + n * s->col_bytes;
    const float *sc = s->scale + n * ks, *sz = s->sz + n * ks;
    const float bias = j->bias ? j->bias[n] : 0.0f;
    for (int64_t m = 0; m < j->M; m += 4) { /* up to 4 rows share each unpacked chunk */
      float acc[4];
      int R = j->M - m < 4 ? (int)(j->M - m) : 4;
      switch (R) {
        case 4: fbx__mnb_col_i4_avx2(s, col, sc, j->rows + m, 4, acc); break;
        case 3: fbx__mnb_col_i4_avx2(s, col, sc, j->rows + m, 3, acc); break;
        case 2: fbx__mnb_col_i4_avx2(s, col, sc, j->rows + m, 2, acc); break;
        default: fbx__mnb_col_i4_avx2(s, col, sc, j->rows + m, 1, acc); break;
      }
      for (int r = 0; r < R; r++)
        j->y[(m + r) * N + n] = acc[r] - fbx__mnb_dot(sz, j->rows[m + r].sq, s->kb) + bias;
    }
  }
}
#endif

/* ------------------------------------------------------------ the kernel -- */

typedef struct fbx__mnb_job {
  const fbx__mnb_state *s;
  const fbx__mnb_row *rows;
  int64_t M;
  const float *bias;
  float *y; /* (M, N) */
  int int8, group; /* group: chunks per group of the 4-bit int8 group kernel (2 AVX2, 4 VNNI), 0 none */
} fbx__mnb_job;

static void fbx__mnb_cols(void *arg, int64_t n0, int64_t n1, int worker) {
  (void)worker;
  const fbx__mnb_job *j = arg;
  const fbx__mnb_state *s = j->s;
  const int64_t kb = s->kb, blk_bytes = s->bs * s->bits / 8, N = s->N;
#if defined(__AVX2__)
  if (j->group) {
    fbx__mnb_i4_job ij = {.s = s, .rows = j->rows, .M = j->M, .bias = j->bias, .y = j->y};
    if (j->group == 4) fbx__mnb_i4_cols_vnni512(&ij, n0, n1);
    else fbx__mnb_i4_cols_avx2(&ij, n0, n1);
    return;
  }
#endif
#if defined(__AVX2__)
  const int f32_avx512 = fbx_cpu_avx512_enabled();
#endif
  for (int64_t n = n0; n < n1; n++) {
    const uint8_t *col = s->w + n * s->col_bytes;
    const float *sc = s->scale + n * s->ks, *sz = s->sz + n * s->ks;
    const float bias = j->bias ? j->bias[n] : 0.0f;
    for (int64_t m = 0; m < j->M; m++) {
      const fbx__mnb_row *r = &j->rows[m];
      float acc = 0;
      if (j->int8)
        for (int64_t b = 0; b < kb; b++)
          acc += (float)fbx__mnb_block_i8(s, col + b * blk_bytes, r->qa + b * s->bs) * (r->sa[b] * sc[b]);
#if defined(__AVX2__)
      else if (s->bits == 4 && s->ch == 32)
        acc = f32_avx512 ? fbx__mnb_col_f32_avx512(s, col, sc, r->a) : fbx__mnb_col_f32_c32(s, col, sc, r->a);
#endif
      else
        for (int64_t b = 0; b < kb; b++) acc += sc[b] * fbx__mnb_block_f32(s, col + b * blk_bytes, r->a + b * s->bs);
      j->y[m * N + n] = acc - fbx__mnb_dot(sz, j->int8 ? r->sq : r->asum, kb) + bias;
    }
  }
}

/* Prepare a row of A into scratch: float copy padded to kpad and block sums, or
 * int8 codes per block (ORT's CPU quantiser: scale max|a|/127, codes rne(a * 127/max|a|)). */
static void fbx__mnb_row_prep(const fbx__mnb_state *s, const float *a, int int8, int J, fbx__mnb_row *r,
                              float *af, float *f1, int8_t *qa, float *f2, float *sav) {
  const int64_t K = s->K, bs = s->bs, V = 32 * (int64_t)J, groups = J ? (s->kpad + V - 1) / V : 0;
  if (int8 && J) memset(qa + (groups - 1) * V, 0, (size_t)V); /* the last group may be part padding */
  for (int64_t b = 0; b < s->kb; b++) {
    int64_t k0 = b * bs, k1 = k0 + bs < K ? k0 + bs : K;
    if (!int8) {
      float t = 0;
      for (int64_t k = k0; k < k0 + bs; k++) t += af[k] = k < k1 ? a[k] : 0.0f;
      f1[b] = t;
      continue;
    }
    float amax = 0;
    for (int64_t k = k0; k < k1; k++) amax = fmaxf(amax, fabsf(a[k]));
    float scale = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
    int32_t t = 0;
    for (int64_t k = k0; k < k0 + bs; k++) {
      int q = k < k1 ? (int)nearbyintf(a[k] * inv) : 0;
      q = q > 127 ? 127 : q < -127 ? -127 : q;
      /* group order (cpu_mnb.h): low halves of the J chunks, then their high halves */
      int64_t tg = J ? k % V : 0, u = tg & 31; /* position in the group, in its chunk */
      int64_t pos = J ? (k - tg) + (u >= 16 ? 16 * J : 0) + 16 * (tg >> 5) + (u & 15) : k;
      qa[pos] = (int8_t)q;
      t += q;
    }
    f1[b] = scale;
    f2[b] = scale * (float)t;
  }
  if (int8 && J) { /* lane scales: lanes 4j..4j+3 of a group sum chunk j (a padding chunk's are zero) */
    for (int64_t g = 0; g < groups; g++)
      for (int l = 0; l < 4 * J; l++) {
        int64_t b = (V * g + 32 * (l / 4)) / bs;
        sav[4 * J * g + l] = b < s->kb ? f1[b] : 0.0f;
      }
    r->sav = sav;
  }
  if (int8) r->qa = qa, r->sa = f1, r->sq = f2;
  else r->a = af, r->asum = f1;
}

/* ------------------------------------------------- prefill: panels + GEMM -- */

/* accuracy_level 0 with M >= FBX__MNB_GEMM_M rows: each task dequantises a panel of
 * FBX__MNB_PANEL columns to float (worker scratch, (cols, K) row-major, hot in L2) and
 * runs a single-threaded sgemm on it, so the dequantisation is paid once per panel
 * and not once per row; below that M the register-dequantising GEMV above wins. */
#define FBX__MNB_PANEL 64
#define FBX__MNB_GEMM_M 8

/* dst(kpad) = column n of W as float32 (q * s - s * z). */
static void fbx__mnb_dequant_col(const fbx__mnb_state *s, int64_t n, float *dst) {
  const int64_t kb = s->kb, bs = s->bs, blk = bs * s->bits / 8;
  const uint8_t *col = s->w + n * s->col_bytes;
  for (int64_t b = 0; b < kb; b++) {
    const float sc = s->scale[n * s->ks + b], off = -s->sz[n * s->ks + b];
    const uint8_t *w = col + b * blk;
    float *d = dst + b * bs;
#if defined(__AVX2__)
    const __m256 vs = _mm256_set1_ps(sc), vo = _mm256_set1_ps(off);
    for (int64_t k = 0; k < bs; k += 16) {
      __m128i q = s->bits == 8 ? _mm_loadu_si128((const __m128i *)(w + k))
                  : s->ch == 32 ? (k % 32 ? _mm256_extracti128_si256(fbx__mnb_u4x32(w + (k / 32) * 16), 1)
                                          : _mm256_castsi256_si128(fbx__mnb_u4x32(w + (k / 32) * 16)))
                                : fbx__mnb_u4x16(w + k / 2);
      __m256 f0, f1;
      fbx__mnb_u8x16_f32(q, &f0, &f1);
      _mm256_storeu_ps(d + k, _mm256_fmadd_ps(f0, vs, vo));
      _mm256_storeu_ps(d + k + 8, _mm256_fmadd_ps(f1, vs, vo));
    }
#else
    unsigned q[16];
    for (int64_t k = 0; k < bs; k += 16) {
      fbx__mnb_vals16(s, w, k, q);
      for (int i = 0; i < 16; i++) d[k + i] = (float)q[i] * sc + off;
    }
#endif
  }
}

typedef struct fbx__mnb_dequant_job {
  const fbx__mnb_state *s;
  float *wbuf; /* (columns of this chunk, kpad): column n0 + i at wbuf + i * kpad */
  int64_t n0;
} fbx__mnb_dequant_job;

/* Dequantises columns [n0 + i0, n0 + i1) of B into the chunk buffer. */
static void fbx__mnb_dequant_cols(void *arg, int64_t i0, int64_t i1, int worker) {
  (void)worker;
  const fbx__mnb_dequant_job *j = arg;
  for (int64_t i = i0; i < i1; i++) fbx__mnb_dequant_col(j->s, j->n0 + i, j->wbuf + i * j->s->kpad);
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
  const int int8 = node->params.nbits.accuracy_level == 4;
  const int64_t M = s->K ? fbx_cpu_numel(A) / s->K : 0, kpad = s->kpad, kb = s->kb;
  info->flops = 2.0 * (double)M * (double)s->N * (double)s->K;
  if (!int8 && M >= FBX__MNB_GEMM_M) {
    /* Chunks of 4 panels per thread: dequantised in parallel into one (chunk, kpad)
     * buffer, then one blocked GEMM on the pool: y[:, n0:n0+nn] = A @ chunk^T (+ bias). */
    const int64_t threads = c->threads > 0 ? c->threads : 1, chunk = FBX__MNB_PANEL * 4 * threads;
    float *wbuf = fbx_cpu_scratch(c, (size_t)(chunk * kpad) * sizeof(float));
    if (!wbuf) return FBX_ERR_OOM();
    info->variant = s->bits == 4 ? "mnb_int4_panel_sgemm" : "mnb_int8_panel_sgemm";
    info->reason = "accuracy_level 0, M >= 8: column chunks dequantised once, blocked sgemm per chunk";
    float *y = out[0].data;
    for (int64_t n0 = 0; n0 < s->N; n0 += chunk) {
      const int64_t nn = s->N - n0 < chunk ? s->N - n0 : chunk;
      fbx__mnb_dequant_job dj = {.s = s, .wbuf = wbuf, .n0 = n0};
      fbx_cpu_par(c, nn, 16, fbx__mnb_dequant_cols, &dj);
      FBX_TRY(fbx_cpu_sgemm_par(c, false, true, M, nn, s->K, 1.0f, A->data, s->K, wbuf, kpad, 0.0f, y + n0, s->N,
                                NULL));
    }
    if (bias)
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < s->N; n++) y[m * s->N + n] += bias[n];
    return NULL;
  }
  const int J = int8 && s->bits == 4 && s->ch == 32 ? (fbx__mnb_vnni_enabled() ? 4 : 2) : 0;
  const int64_t V = J ? 32 * J : 64, groups = (kpad + V - 1) / V;
  /* scratch: rows, then per row: float path kpad floats + kb sums; int8 path groups*V codes
   * + 2 kb + 4 J groups floats */
  size_t per_row = int8 ? (size_t)(groups * V) + (size_t)(2 * kb + 4 * J * groups) * 4 + 128
                        : (size_t)(kpad + kb) * 4 + 64;
  per_row = (per_row + 63) & ~(size_t)63;
  size_t need = (size_t)M * (sizeof(fbx__mnb_row) + per_row) + 128;
  unsigned char *mem = fbx_cpu_scratch(c, need);
  if (!mem) return FBX_ERR_OOM();
  fbx__mnb_row *rows = (fbx__mnb_row *)mem;
  unsigned char *p = mem + (((size_t)M * sizeof *rows + 63) & ~(size_t)63);
  for (int64_t m = 0; m < M; m++, p += per_row) {
    fbx__mnb_row *r = &rows[m];
    memset(r, 0, sizeof *r);
    const float *a = (const float *)A->data + m * s->K;
    if (int8) {
      float *f1 = (float *)(p + groups * V);
      fbx__mnb_row_prep(s, a, 1, J, r, NULL, f1, (int8_t *)p, f1 + kb, f1 + 2 * kb);
    } else {
      fbx__mnb_row_prep(s, a, 0, 0, r, (float *)p, (float *)p + kpad, NULL, NULL, NULL);
    }
  }
  fbx__mnb_job j = {.s = s, .rows = rows, .M = M, .bias = bias, .y = out[0].data, .int8 = int8, .group = J};
  info->variant = J ? (J == 4 ? "mnb_int4_int8_vnni512" : "mnb_int4_int8_avx2")
                  : int8 ? (s->bits == 4 ? "mnb_int4_int8_avx2_b16" : "mnb_int8_int8_avx2")
                  : s->bits == 4 && s->ch == 32 && fbx_cpu_avx512_enabled() ? "mnb_int4_f32_avx512"
                  : (s->bits == 4 ? "mnb_int4_f32_avx2" : "mnb_int8_f32_avx2");
  info->reason = int8 ? "accuracy_level 4: A quantised to int8 per block, exact integer block dots"
                      : "accuracy_level 0: float, dequantised in registers";
  int64_t grain = 16 + 65536 / (s->K * (M ? M : 1) + 1);
  if (s->N * s->K * M >= 1 << 16) fbx_cpu_par(c, s->N, grain, fbx__mnb_cols, &j);
  else fbx__mnb_cols(&j, 0, s->N, 0);
  return NULL;
}
