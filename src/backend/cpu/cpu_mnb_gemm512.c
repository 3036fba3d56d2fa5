/* Prefill of MATMUL_NBITS at accuracy_level 4 (M >= 8 rows), 4-bit weights with
 * integer zero points, AVX-512 VNNI: an int8 GEMM on panels of 32 columns.
 *
 * Same arithmetic as the decode kernels (ORT's): y = sum_b s_b sa_b I_b + bias,
 * I_b = sum_{k in b} qa_k (q_k - z_b) exact in int32. vpdpbusd multiplies unsigned
 * by signed bytes, so A goes in as au = qa + 128 (u8; 0 past K) and the weights as
 * q - z (s8, -15..15): sum au (q - z) = I_b + 128 sum (q - z), the second term a
 * per (column, block) constant of the panel. Per panel (one task): the 32 columns
 * are unpacked once into the worker's scratch (quads of 4 k-values x 32 columns,
 * 128 bytes each), then every group of up to 4 rows runs through it with a
 * (4 rows x 32 columns) register tile: per k-quad 2 weight loads, one broadcast
 * per row, 2 vpdpbusd per row; per block one conversion and one FMA per
 * (row, 16 columns). Everything here runs only after fbx__mnb_isa_now() said VNNI. */
#include <string.h>

#include <immintrin.h>

#include "cpu_mnb.h"

#define FBX__TVNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

size_t fbx__mnb_i8gemm_panel_bytes(const fbx__mnb_state *s) {
  /* weights (kpad/4 quads x 128 B) + 128 sum(q - z) (kb x 32 int32) + scales (kb x 32 float) */
  return (size_t)s->kpad * 32 + (size_t)s->kb * 32 * 8 + 64;
}

/* Unpacks columns [n0, n0 + 32) (zero past N) into the panel (AVX2: the AVX2 GEMM of
 * cpu_mnb_gemm_avx2.c reads the same panels). */
void fbx__mnb_i8panel_build(const fbx__mnb_state *s, int64_t n0, int8_t *wq, int32_t *cb, float *sc) {
  const int64_t bs = s->bs, blk = bs / 2, kb = s->kb, K = s->K;
  const __m128i lo4 = _mm_set1_epi8(15);
  memset(wq, 0, (size_t)s->kpad * 32);
  memset(cb, 0, (size_t)kb * 32 * 4);
  memset(sc, 0, (size_t)kb * 32 * 4);
  for (int c = 0; c < 32 && n0 + c < s->N; c++) {
    const int64_t n = n0 + c;
    const uint8_t *col = s->w + n * s->col_bytes;
    for (int64_t b = 0; b < kb; b++) {
      const int z = s->z8[n * s->kz + b];
      sc[b * 32 + c] = s->scale[n * s->ks + b];
      const int64_t kend = (b + 1) * bs <= K ? bs : K - b * bs; /* values of this block below K */
      if (kend == bs && s->ch == 32) {
        const __m128i zv = _mm_set1_epi8((char)z);
        int32_t t = 0;
        for (int64_t k = 0; k < bs; k += 32) {
          __m128i v = _mm_loadu_si128((const __m128i *)(col + b * blk + k / 2));
          __m128i lo = _mm_sub_epi8(_mm_and_si128(v, lo4), zv), hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), lo4), zv);
          /* sum of the 32 signed values: widen to int16, madd with ones */
          __m256i w16 = _mm256_add_epi16(_mm256_cvtepi8_epi16(lo), _mm256_cvtepi8_epi16(hi));
          __m256i s32 = _mm256_madd_epi16(w16, _mm256_set1_epi16(1));
          __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
          s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
          s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
          t += _mm_cvtsi128_si32(s4);
          /* value k0 + u (u < 16) = lo byte u, k0 + 16 + u = hi byte u: quad (k0 + u) / 4 */
          int8_t *d = wq + ((b * bs + k) / 4) * 128 + 4 * c;
          for (int i = 0; i < 4; i++) {
            _mm_storeu_si32(d + i * 128, lo);
            _mm_storeu_si32(d + (4 + i) * 128, hi);
            lo = _mm_srli_si128(lo, 4), hi = _mm_srli_si128(hi, 4);
          }
        }
        cb[b * 32 + c] = 128 * t;
      } else { /* 16-value chunks or the block that K ends in: value by value */
        int32_t t = 0;
        for (int64_t k = 0; k < kend; k++) {
          int v = (int)fbx__mnb_val(s, col + b * blk, k) - z;
          wq[((b * bs + k) / 4) * 128 + 4 * c + (k & 3)] = (int8_t)v;
          t += v;
        }
        cb[b * 32 + c] = 128 * t;
      }
    }
  }
}

/* R (<= 4) rows of au / sa through the panel: y[r][0..32) (ld N), columns below nn. */
static inline __attribute__((always_inline)) FBX__TVNNI void fbx__mnb_i8gemm_tile(
    const fbx__mnb_state *s, const int8_t *wq, const int32_t *cb, const float *sc, const uint8_t *au, int64_t lda,
    const float *sa, int64_t ldsa, const int R, float *y, int64_t ldy, int64_t nn, const float *bias) {
  const int64_t bs = s->bs, quads = bs / 4;
  __m512 f[4][2];
  for (int r = 0; r < 4; r++) f[r][0] = f[r][1] = _mm512_setzero_ps();
  for (int64_t b = 0; b < s->kb; b++) {
    __m512i acc[4][2];
    for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    const int8_t *wb = wq + b * quads * 128;
    const uint8_t *ab = au + b * bs;
    for (int64_t q = 0; q < quads; q++) {
      const __m512i w0 = _mm512_loadu_si512((const void *)(wb + q * 128));
      const __m512i w1 = _mm512_loadu_si512((const void *)(wb + q * 128 + 64));
      for (int r = 0; r < R; r++) {
        int32_t a4;
        memcpy(&a4, ab + r * lda + 4 * q, 4);
        const __m512i av = _mm512_set1_epi32(a4);
        acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, w0);
        acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, w1);
      }
    }
    const __m512i c0 = _mm512_loadu_si512((const void *)(cb + b * 32)), c1 = _mm512_loadu_si512((const void *)(cb + b * 32 + 16));
    const __m512 s0 = _mm512_loadu_ps(sc + b * 32), s1 = _mm512_loadu_ps(sc + b * 32 + 16);
    for (int r = 0; r < R; r++) {
      const __m512 sab = _mm512_set1_ps(sa[r * ldsa + b]);
      f[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][0], c0)), _mm512_mul_ps(s0, sab), f[r][0]);
      f[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][1], c1)), _mm512_mul_ps(s1, sab), f[r][1]);
    }
  }
  const __mmask16 m0 = nn >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nn) - 1);
  const __mmask16 m1 = nn >= 32 ? (__mmask16)0xffff : nn <= 16 ? 0 : (__mmask16)((1u << (nn - 16)) - 1);
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
  for (int r = 0; r < R; r++) {
    _mm512_mask_storeu_ps(y + r * ldy, m0, _mm512_add_ps(f[r][0], b0));
    _mm512_mask_storeu_ps(y + r * ldy + 16, m1, _mm512_add_ps(f[r][1], b1));
  }
}

/* Panels [p0, p1) of 32 columns; the panel scratch is the worker's. */
FBX__TVNNI void fbx__mnb_i8gemm_vnni512(const fbx__mnb_i8gemm *g, int64_t p0, int64_t p1, int worker) {
  const fbx__mnb_state *s = g->s;
  const fbx__mnb_i8panel pn = fbx__mnb_i8panel_scratch(g, worker);
  int8_t *wq = pn.wq;
  int32_t *cb = pn.cb;
  float *sc = pn.sc;
  for (int64_t p = p0; p < p1; p++) {
    const int64_t n0 = 32 * p, nn = s->N - n0 < 32 ? s->N - n0 : 32;
    fbx__mnb_i8panel_build(s, n0, wq, cb, sc);
    const float *bias = g->bias ? g->bias + n0 : NULL;
    for (int64_t m = 0; m < g->M; m += 4) {
      const uint8_t *au = g->au + m * s->kpad;
      const float *sa = g->sa + m * g->ldsa;
      float *y = g->y + m * s->N + n0;
      switch (g->M - m < 4 ? (int)(g->M - m) : 4) {
        case 4: fbx__mnb_i8gemm_tile(s, wq, cb, sc, au, s->kpad, sa, g->ldsa, 4, y, s->N, nn, bias); break;
        case 3: fbx__mnb_i8gemm_tile(s, wq, cb, sc, au, s->kpad, sa, g->ldsa, 3, y, s->N, nn, bias); break;
        case 2: fbx__mnb_i8gemm_tile(s, wq, cb, sc, au, s->kpad, sa, g->ldsa, 2, y, s->N, nn, bias); break;
        default: fbx__mnb_i8gemm_tile(s, wq, cb, sc, au, s->kpad, sa, g->ldsa, 1, y, s->N, nn, bias); break;
      }
    }
  }
}
