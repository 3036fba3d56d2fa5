/* Prefill of MATMUL_NBITS at accuracy_level 4 (M >= 8 rows), 4-bit weights with
 * integer zero points, AVX2 (no VNNI): the int8 GEMM of cpu_mnb_gemm512.c on the same
 * panels (fbx__mnb_i8panel_build: quads of 4 k-values x 32 columns, w = q - z as s8)
 * and the same arithmetic, y = sum_b s_b sa_b (sum_k au_k (q_k - z_b) - 128 sum (q - z))
 * + bias with au = qa + 128 (u8), every block sum exact in int32.
 *
 * Without vpdpbusd a product of 4 bytes takes vpmaddubsw (u8 x s8 -> s16 pairs) and
 * vpmaddwd (s16 pairs -> s32). The pairs cannot saturate: |au (q - z)| <= 255 x 15, so
 * a pair is <= 7650 and the sum of two quads' pairs (4 products) <= 15300 < 32767; two
 * quads share one vpmaddwd. Register tile: 4 rows x 8 columns (4 int32 block sums, 4
 * float accumulators, 2 weight vectors per quad pair: 16 ymm are enough). */
#include <string.h>

#include <immintrin.h>

#include "cpu_mnb.h"

/* R (<= 4) rows of au / sa through 8 columns of the panel (wq, cb, sc offset to them,
 * panel rows 128 bytes / 32 entries apart): y[r][0..nn) (ld ldy), nn <= 8. */
static inline __attribute__((always_inline)) void fbx__mnb_i8gemm_tile_avx2(
    const fbx__mnb_state *s, const int8_t *wq, const int32_t *cb, const float *sc, const uint8_t *au, int64_t lda,
    const float *sa, int64_t ldsa, const int R, float *y, int64_t ldy, int64_t nn, const float *bias) {
  const int64_t bs = s->bs, quads = bs / 4; /* bs >= 16: quads even */
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 f[4];
  for (int r = 0; r < 4; r++) f[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < s->kb; b++) {
    __m256i acc[4];
    for (int r = 0; r < 4; r++) acc[r] = _mm256_setzero_si256();
    const int8_t *wb = wq + b * quads * 128;
    const uint8_t *ab = au + b * bs;
    for (int64_t q = 0; q < quads; q += 2) {
      const __m256i w0 = _mm256_loadu_si256((const __m256i *)(wb + q * 128));
      const __m256i w1 = _mm256_loadu_si256((const __m256i *)(wb + q * 128 + 128));
      for (int r = 0; r < R; r++) {
        int32_t a0, a1;
        memcpy(&a0, ab + r * lda + 4 * q, 4);
        memcpy(&a1, ab + r * lda + 4 * q + 4, 4);
        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(a0), w0),
                                           _mm256_maddubs_epi16(_mm256_set1_epi32(a1), w1));
        acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(p, ones));
      }
    }
    const __m256i c = _mm256_loadu_si256((const __m256i *)(cb + b * 32));
    const __m256 scb = _mm256_loadu_ps(sc + b * 32);
    for (int r = 0; r < R; r++)
      f[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[r], c)),
                             _mm256_mul_ps(scb, _mm256_broadcast_ss(sa + r * ldsa + b)), f[r]);
  }
  float bv[8] = {0};
  if (bias)
    for (int64_t i = 0; i < nn; i++) bv[i] = bias[i];
  const __m256 vb = _mm256_loadu_ps(bv);
  for (int r = 0; r < R; r++) {
    if (nn == 8) {
      _mm256_storeu_ps(y + r * ldy, _mm256_add_ps(f[r], vb));
      continue;
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(f[r], vb));
    memcpy(y + r * ldy, t, sizeof(float) * (size_t)nn);
  }
}

/* Panels [p0, p1) of 32 columns; the panel scratch is the worker's. */
void fbx__mnb_i8gemm_avx2(const fbx__mnb_i8gemm *g, int64_t p0, int64_t p1, int worker) {
  const fbx__mnb_state *s = g->s;
  const fbx__mnb_i8panel pn = fbx__mnb_i8panel_scratch(g, worker);
  int8_t *wq = pn.wq;
  int32_t *cb = pn.cb;
  float *sc = pn.sc;
  for (int64_t p = p0; p < p1; p++) {
    const int64_t n0 = 32 * p, nn = s->N - n0 < 32 ? s->N - n0 : 32;
    fbx__mnb_i8panel_build(s, n0, wq, cb, sc);
    for (int64_t m = 0; m < g->M; m += 4) {
      const uint8_t *au = g->au + m * s->kpad;
      const float *sa = g->sa + m * g->ldsa;
      for (int64_t c = 0; c < nn; c += 8) { /* 8-column strips: the rows' codes stay in L1 */
        const int64_t cn = nn - c < 8 ? nn - c : 8;
        float *y = g->y + m * s->N + n0 + c;
        const float *bias = g->bias ? g->bias + n0 + c : NULL;
        const int8_t *w = wq + 4 * c;
        switch (g->M - m < 4 ? (int)(g->M - m) : 4) {
          case 4: fbx__mnb_i8gemm_tile_avx2(s, w, cb + c, sc + c, au, s->kpad, sa, g->ldsa, 4, y, s->N, cn, bias); break;
          case 3: fbx__mnb_i8gemm_tile_avx2(s, w, cb + c, sc + c, au, s->kpad, sa, g->ldsa, 3, y, s->N, cn, bias); break;
          case 2: fbx__mnb_i8gemm_tile_avx2(s, w, cb + c, sc + c, au, s->kpad, sa, g->ldsa, 2, y, s->N, cn, bias); break;
          default: fbx__mnb_i8gemm_tile_avx2(s, w, cb + c, sc + c, au, s->kpad, sa, g->ldsa, 1, y, s->N, cn, bias); break;
        }
      }
    }
  }
}
