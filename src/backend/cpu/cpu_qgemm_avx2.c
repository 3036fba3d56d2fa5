/* Integer GEMM, AVX2 path (cpu_qgemm.h): values widened to int16 and
 * multiplied with vpmaddwd (pairs of k summed into int32, exact: |a|,|b| <=
 * 255). vpmaddubsw is not used: its int16 pair sums saturate for u8 x s8.
 * Register blocking 6 rows x 16 columns (12 ymm accumulators), A broadcast
 * as int16 pairs from its packed rows, B from 16-column panels. */
#include <immintrin.h>
#include <string.h>

#include "cpu_qgemm.h"
#include "cpu_simd.h"

#define FBX__QA_TGT __attribute__((target("avx2")))

/* Rows k0, k0+1 of columns [16q, 16q+16) widened to int16 pairs (8 columns per vector). */
static inline __attribute__((always_inline)) FBX__QA_TGT void fbx__qa_pair(const uint8_t *r0, const uint8_t *r1,
                                                                           bool sgn, __m256i *lo, __m256i *hi) {
  __m128i x0 = _mm_loadu_si128((const __m128i *)r0), x1 = r1 ? _mm_loadu_si128((const __m128i *)r1) : _mm_setzero_si128();
  __m128i l = _mm_unpacklo_epi8(x0, x1), h = _mm_unpackhi_epi8(x0, x1);
  *lo = sgn ? _mm256_cvtepi8_epi16(l) : _mm256_cvtepu8_epi16(l);
  *hi = sgn ? _mm256_cvtepi8_epi16(h) : _mm256_cvtepu8_epi16(h);
}

FBX__QA_TGT void fbx__qg_pack_b_avx2(const uint8_t *const *rows, bool b_signed, int64_t K, int64_t width,
                                     void *panels, int32_t *cs) {
  int64_t kp = fbx_cpu_qg_kpad(FBX_QG_AVX2, K), np = (width + FBX_QG_NR - 1) / FBX_QG_NR;
  const __m256i ones = _mm256_set1_epi16(1);
  uint8_t t0[16], t1[16];
  for (int64_t q = 0; q < np; q++) {
    int16_t *pan = (int16_t *)panels + q * kp * FBX_QG_NR;
    int64_t c0 = q * FBX_QG_NR, w = width - c0 < FBX_QG_NR ? width - c0 : FBX_QG_NR;
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int64_t k = 0; k < kp; k += 2) {
      const uint8_t *r0 = rows[k] + c0, *r1 = k + 1 < K ? rows[k + 1] + c0 : NULL;
      if (w < FBX_QG_NR) { /* partial panel: zero-padded copies */
        memset(t0, 0, 16);
        memset(t1, 0, 16);
        memcpy(t0, r0, (size_t)w);
        if (r1) memcpy(t1, r1, (size_t)w);
        r0 = t0;
        r1 = r1 ? t1 : NULL;
      }
      __m256i lo, hi;
      fbx__qa_pair(r0, r1, b_signed, &lo, &hi);
      _mm256_storeu_si256((__m256i *)(pan + k * FBX_QG_NR), lo);
      _mm256_storeu_si256((__m256i *)(pan + k * FBX_QG_NR + 16), hi);
      s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(lo, ones));
      s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(hi, ones));
    }
    _mm256_storeu_si256((__m256i *)(cs + c0), s0);
    _mm256_storeu_si256((__m256i *)(cs + c0 + 8), s1);
  }
}

/* The float epilogue of cpu_qgemm.h on the first min(w, 16) accumulators t of row r; written as
 * float over the int32 output yr. The empty asm after each op keeps a Mul and an Add apart (no FMA). */
static FBX__QA_TGT void fbx__qa_out(const fbx_qg_out *o, const int32_t *t, int64_t r, int64_t w, int32_t *yr) {
  int64_t n = w < FBX_QG_NR ? w : FBX_QG_NR;
  float buf[FBX_QG_NR];
  for (int h = 0; h < 2; h++) {
    __m256 v = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(t + 8 * h))), sl[FBX_QG_OUT_SLOTS];
    for (int s = 0; s < o->n_steps; s++) {
      int kind = o->step[s].kind, src = o->step[s].src;
      if (kind == FBX_QG_OUT_SAVE) {
        sl[o->step[s].slot] = v;
        continue;
      }
      if (kind == FBX_QG_OUT_ERF) {
        v = fbx__erf256(v);
        continue;
      }
      __m256 k;
      if (src == FBX_QG_OUT_SLOT) {
        k = sl[o->step[s].slot];
      } else if (src == FBX_QG_OUT_SCALAR) {
        k = _mm256_set1_ps(o->step[s].p[0]);
      } else { /* COL, TENSOR: only n entries of the row are readable */
        const float *p = o->step[s].p + 8 * h + (src == FBX_QG_OUT_TENSOR ? r * o->ldt : 0);
        int64_t nh = n - 8 * h < 0 ? 0 : n - 8 * h > 8 ? 8 : n - 8 * h;
        if (nh == 8) {
          k = _mm256_loadu_ps(p);
        } else {
          float kt[8];
          memset(kt, 0, sizeof kt);
          memcpy(kt, p, (size_t)nh * sizeof(float));
          k = _mm256_loadu_ps(kt);
        }
      }
      switch (o->step[s].op) {
        case FBX_QG_OUT_MUL: v = _mm256_mul_ps(v, k); break;
        case FBX_QG_OUT_ADD: v = _mm256_add_ps(v, k); break;
        case FBX_QG_OUT_SUB: v = _mm256_sub_ps(v, k); break;
        case FBX_QG_OUT_RSUB: v = _mm256_sub_ps(k, v); break;
        case FBX_QG_OUT_DIV: v = _mm256_div_ps(v, k); break;
        default: v = _mm256_div_ps(k, v); break;
      }
      __asm__("" : "+x"(v));
    }
    _mm256_storeu_ps(buf + 8 * h, v);
  }
  memcpy(yr, buf, (size_t)n * sizeof(float));
}

static inline __attribute__((always_inline)) FBX__QA_TGT void
fbx__qa_block(const int MR, const int16_t *a, int64_t kp, const int32_t *rs, const int32_t *alpha, const int16_t *pan,
              int64_t w, const int32_t *beta, const int32_t *cb, int32_t *y, int64_t ldy, const fbx_qg_out *o) {
  __m256i c0[6], c1[6];
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) c0[r] = c1[r] = _mm256_setzero_si256();
  for (int64_t k = 0; k < kp; k += 2) {
    __m256i b0 = _mm256_loadu_si256((const __m256i *)(pan + k * FBX_QG_NR));
    __m256i b1 = _mm256_loadu_si256((const __m256i *)(pan + k * FBX_QG_NR + 16));
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
      int32_t pr;
      memcpy(&pr, a + r * kp + k, 4);
      __m256i av = _mm256_set1_epi32(pr);
      c0[r] = _mm256_add_epi32(c0[r], _mm256_madd_epi16(b0, av));
      c1[r] = _mm256_add_epi32(c1[r], _mm256_madd_epi16(b1, av));
    }
  }
  __m256i be0 = _mm256_loadu_si256((const __m256i *)beta), be1 = _mm256_loadu_si256((const __m256i *)(beta + 8));
  __m256i cb0 = _mm256_loadu_si256((const __m256i *)cb), cb1 = _mm256_loadu_si256((const __m256i *)(cb + 8));
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
    __m256i vr = _mm256_set1_epi32(rs[r]), va = _mm256_set1_epi32(alpha[r]);
    __m256i v0 = _mm256_add_epi32(c0[r], _mm256_add_epi32(_mm256_mullo_epi32(be0, vr), _mm256_mullo_epi32(cb0, va)));
    __m256i v1 = _mm256_add_epi32(c1[r], _mm256_add_epi32(_mm256_mullo_epi32(be1, vr), _mm256_mullo_epi32(cb1, va)));
    int32_t *yr = y + r * ldy;
    if (o) {
      int32_t t[FBX_QG_NR];
      _mm256_storeu_si256((__m256i *)t, v0);
      _mm256_storeu_si256((__m256i *)(t + 8), v1);
      fbx__qa_out(o, t, r, w, yr);
      continue;
    }
    if (w >= FBX_QG_NR) {
      _mm256_storeu_si256((__m256i *)yr, v0);
      _mm256_storeu_si256((__m256i *)(yr + 8), v1);
    } else {
      int32_t t[FBX_QG_NR];
      _mm256_storeu_si256((__m256i *)t, v0);
      _mm256_storeu_si256((__m256i *)(t + 8), v1);
      memcpy(yr, t, (size_t)w * sizeof(int32_t));
    }
  }
}

FBX__QA_TGT void fbx__qg_kernel_avx2(const void *ap, int64_t M, int64_t K, const int32_t *rs, const int32_t *alpha,
                                     const void *panels, int64_t width, const int32_t *beta, const int32_t *cb,
                                     int32_t *y, int64_t ldy, const fbx_qg_out *o) {
  int64_t kp = fbx_cpu_qg_kpad(FBX_QG_AVX2, K), np = (width + FBX_QG_NR - 1) / FBX_QG_NR;
  const int16_t *A = ap;
  for (int64_t m = 0; m < M; m += 6) {
    int mr = M - m < 6 ? (int)(M - m) : 6;
    for (int64_t q = 0; q < np; q++) {
      const int16_t *pan = (const int16_t *)panels + q * kp * FBX_QG_NR;
      int64_t c0 = q * FBX_QG_NR, w = width - c0;
      const int16_t *a = A + m * kp;
      int32_t *yy = y + m * ldy + c0;
      fbx_qg_out ob; /* the epilogue's operands moved to this block */
      const fbx_qg_out *oo = fbx_cpu_qg_out_at(o, o ? m * o->ldt + c0 : 0, c0, &ob);
      switch (mr) {
#define FBX__QA_CASE(R) \
  case R: fbx__qa_block(R, a, kp, rs + m, alpha + m, pan, w, beta + c0, cb + c0, yy, ldy, oo); break;
        FBX__QA_CASE(1) FBX__QA_CASE(2) FBX__QA_CASE(3) FBX__QA_CASE(4) FBX__QA_CASE(5) FBX__QA_CASE(6)
#undef FBX__QA_CASE
      }
    }
  }
}
