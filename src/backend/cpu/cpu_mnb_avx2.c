/* AVX2 + FMA column kernels of MATMUL_NBITS (the library's baseline ISA; layouts in
 * cpu_mnb.h, the arithmetic in cpu_mnb.c's header comment). */
#include <immintrin.h>

#include "cpu_mnb.h"
#include "cpu_simd.h"

/* sum_b<kb (s_b z_b) x_b; x is padded with zeros to a multiple of 16 (so is z8 per column). */
float fbx__mnb_corr_avx2(const fbx__mnb_state *s, int64_t n, const float *x) {
  const float *sc = s->scale + n * s->ks;
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  if (s->sz) {
    const float *sz = s->sz + n * s->ks;
    for (; b + 8 <= s->kb; b += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(sz + b), _mm256_loadu_ps(x + b), acc);
    float t = fbx__hsum256(acc);
    for (; b < s->kb; b++) t += sz[b] * x[b];
    return t;
  }
  const uint8_t *z = s->z8 + n * s->kz;
  for (; b + 8 <= s->kb; b += 8) {
    __m256 zf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(z + b))));
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(sc + b), zf), _mm256_loadu_ps(x + b), acc);
  }
  if (b < s->kb) { /* tail: z8 and x are zero past kb; scales are masked (the next column's follow) */
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(s->kb - b)), lane);
    __m256 zf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(z + b))));
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_maskload_ps(sc + b, m), zf), _mm256_loadu_ps(x + b), acc);
  }
  return fbx__hsum256(acc);
}

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
/* 16 values of block data w at k (multiple of 16) as u8. */
static inline __m128i fbx__mnb_u8x16(const fbx__mnb_state *s, const uint8_t *w, int64_t k) {
  if (s->bits == 8) return _mm_loadu_si128((const __m128i *)(w + k));
  if (s->ch == 16) return fbx__mnb_u4x16(w + k / 2);
  __m256i q = fbx__mnb_u4x32(w + (k / 32) * 16);
  return k % 32 ? _mm256_extracti128_si256(q, 1) : _mm256_castsi256_si128(q);
}
/* 16 u8 -> two vectors of 8 floats. */
static inline void fbx__mnb_u8x16_f32(__m128i q, __m256 *f0, __m256 *f1) {
  *f0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
  *f1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(q, q)));
}

/* ------------------------------------------------------------ float path -- */

/* 4-bit, 32-chunks: sum_b s_b (sum_k q_k a_k) for one row, the block sums kept in
 * float lanes and scaled there (one horizontal sum per column, not per block). */
static inline float fbx__mnb_f32_c32(const fbx__mnb_state *s, const uint8_t *w, const float *sc, const float *a) {
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

static void fbx__mnb_col_f32_avx2_1(const fbx__mnb_state *s, int64_t n, const fbx__mnb_row *rows, int R, float *acc) {
  const uint8_t *col = s->w + n * s->col_bytes;
  const float *sc = s->scale + n * s->ks;
  const int64_t bs = s->bs, blk = bs * s->bits / 8;
  for (int r = 0; r < R; r++) {
    float t = 0;
    if (s->bits == 4 && s->ch == 32) {
      t = fbx__mnb_f32_c32(s, col, sc, rows[r].a);
    } else {
      for (int64_t b = 0; b < s->kb; b++) {
        const uint8_t *w = col + b * blk;
        const float *a = rows[r].a + b * bs;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), f0, f1;
        for (int64_t k = 0; k < bs; k += 16) {
          fbx__mnb_u8x16_f32(fbx__mnb_u8x16(s, w, k), &f0, &f1);
          acc0 = _mm256_fmadd_ps(f0, _mm256_loadu_ps(a + k), acc0);
          acc1 = _mm256_fmadd_ps(f1, _mm256_loadu_ps(a + k + 8), acc1);
        }
        t += sc[b] * fbx__hsum256(_mm256_add_ps(acc0, acc1));
      }
    }
    acc[r] = t - fbx__mnb_corr_avx2(s, n, rows[r].asum);
  }
}

void fbx__mnb_col_f32_avx2(const fbx__mnb_state *s, int64_t n, int C, const fbx__mnb_row *rows, int R, float *acc) {
  for (int c = 0; c < C; c++) fbx__mnb_col_f32_avx2_1(s, n + c, rows, R, acc + 4 * c);
}

/* ------------------------------------------------------------- int8 path -- */

/* Exact sum_k qa_k q_k over one block, one row (|sum| < 2^31 for bs <= 128 and 8 bits). */
static inline int32_t fbx__mnb_block_i8(const fbx__mnb_state *s, const uint8_t *w, const int8_t *qa) {
  __m128i acc = _mm_setzero_si128();
  const __m128i ones = _mm_set1_epi16(1);
  for (int64_t k = 0; k < s->bs; k += 16) {
    if (s->bits == 4) { /* u8 (0..15) x s8: pair sums <= 2*15*127 fit int16 */
      __m128i p = _mm_maddubs_epi16(fbx__mnb_u8x16(s, w, k), _mm_loadu_si128((const __m128i *)(qa + k)));
      acc = _mm_add_epi32(acc, _mm_madd_epi16(p, ones));
    } else { /* 8-bit weights overflow maddubs' int16 pairs: widen to int16 first */
      __m256i d = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w + k))),
                                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qa + k))));
      acc = _mm_add_epi32(acc, _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1)));
    }
  }
  acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0x4e));
  acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0xb1));
  return _mm_cvtsi128_si32(acc);
}

static void fbx__mnb_col_i8_avx2_1(const fbx__mnb_state *s, int64_t n, const fbx__mnb_row *rows, int R, float *acc) {
  const uint8_t *col = s->w + n * s->col_bytes;
  const float *sc = s->scale + n * s->ks;
  const int64_t blk = s->bs * s->bits / 8;
  for (int r = 0; r < R; r++) {
    float t = 0;
    for (int64_t b = 0; b < s->kb; b++)
      t += (float)fbx__mnb_block_i8(s, col + b * blk, rows[r].qa + b * s->bs) * (rows[r].sa[b] * sc[b]);
    acc[r] = t - fbx__mnb_corr_avx2(s, n, rows[r].sq);
  }
}

void fbx__mnb_col_i8_avx2(const fbx__mnb_state *s, int64_t n, int C, const fbx__mnb_row *rows, int R, float *acc) {
  for (int c = 0; c < C; c++) fbx__mnb_col_i8_avx2_1(s, n + c, rows, R, acc + 4 * c);
}

/* The 4-bit int8 group kernel (groups of 2 chunks = 64 values; the AVX-512 VNNI one
 * takes 4). One 32-byte load holds two adjacent 32-value chunks; AND / shift give
 * their low and high nibbles, which meet the row's codes in the same (permuted)
 * order, so lanes 0-3 sum the first chunk and lanes 4-7 the second; each lane is
 * scaled by its block's weight scale times the row's block scale. */
static inline __attribute__((always_inline)) void fbx__mnb_i4g2(const fbx__mnb_state *s, int64_t n,
                                                                const fbx__mnb_row *rows, const int R, float *y) {
  const uint8_t *w = s->w + n * s->col_bytes;
  const float *sc = s->scale + n * s->ks;
  const __m256i lo4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  const __m256i pick = _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0);
  /* two accumulators per row (even / odd groups): the FMA chain, not the loads, bounds a column */
  __m256 facc[2][4];
  for (int r = 0; r < 4; r++) facc[0][r] = facc[1][r] = _mm256_setzero_ps();
  const int64_t pairs = (s->kpad + 63) / 64, bs = s->bs;
  for (int64_t g = 0; g < pairs; g++, w += 32) {
    __m256i v = _mm256_loadu_si256((const __m256i *)w);
    __m256i lo = _mm256_and_si256(v, lo4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
    /* lane scales: the two blocks' (bs 32) or the one block's; loadl_epi64 reads 8 unaligned bytes
     * (ks pads each column's scales to a multiple of 4 with zeros) */
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
  for (int r = 0; r < R; r++)
    y[r] = fbx__hsum256(_mm256_add_ps(facc[0][r], facc[1][r])) - fbx__mnb_corr_avx2(s, n, rows[r].sq);
}

static void fbx__mnb_col_i4g2_avx2_1(const fbx__mnb_state *s, int64_t n, const fbx__mnb_row *rows, int R, float *acc) {
  switch (R) { /* R constant inside: the row loop unrolls and the accumulators stay in registers */
    case 4: fbx__mnb_i4g2(s, n, rows, 4, acc); break;
    case 3: fbx__mnb_i4g2(s, n, rows, 3, acc); break;
    case 2: fbx__mnb_i4g2(s, n, rows, 2, acc); break;
    default: fbx__mnb_i4g2(s, n, rows, 1, acc); break;
  }
}

void fbx__mnb_col_i4g2_avx2(const fbx__mnb_state *s, int64_t n, int C, const fbx__mnb_row *rows, int R, float *acc) {
  for (int c = 0; c < C; c++) fbx__mnb_col_i4g2_avx2_1(s, n + c, rows, R, acc + 4 * c);
}
