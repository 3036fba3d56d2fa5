/* Convolution GEMM micro-kernel: Y(M, P) = W(M, K) @ Bpk + bias, where the
 * column block Bpk (K, P) was packed by the conv kernel into panels of 16
 * output positions, K-major (bpk[(q*K + k)*16 + j] = B[k, q*16 + j]), so
 * each panel is one contiguous stream. Register blocking: 6 output channels x
 * 16 positions in 12 AVX2 accumulators, W broadcast straight from its
 * row-major rows (no per-call packing of W, unlike sgemm), the result stored
 * straight into the NCHW output rows, bias folded into the accumulator init.
 * Loop order per call: 6-row block of W outer (it stays in L1/L2), panels
 * inner (the packed block stays in L2). */
#include <immintrin.h>
#include <string.h>

#include "cpu_gemm_avx512.h"
#include "cpu_internal.h"

#define P 16

/* B row k of the 16-column block: bp + 16*k (packed panel, koff NULL) or
 * bp + koff[k] (direct from the input, unaligned). */
static inline __attribute__((always_inline)) void fbx__cg_block(const int MR, const float *w, int64_t ldw,
                                                                const float *bias, const float *bp, int64_t K,
                                                                float *y, int64_t ldy, int64_t width,
                                                                const int32_t *koff, int acc) {
  __m256 c0[6], c1[6];
  if (acc) /* Y += (a later K chunk; bias ignored) */
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
      float t[P] = {0};
      memcpy(t, y + r * ldy, (size_t)(width < P ? width : P) * sizeof(float));
      c0[r] = _mm256_loadu_ps(t);
      c1[r] = _mm256_loadu_ps(t + 8);
    }
  else
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) c0[r] = c1[r] = bias ? _mm256_set1_ps(bias[r]) : _mm256_setzero_ps();
  int64_t k = 0;
  if (koff) {
    for (; k < K; k++) {
      const float *b = bp + koff[k];
      __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
      _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
        __m256 av = _mm256_broadcast_ss(w + r * ldw + k);
        c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
        c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
      }
    }
  }
  for (; k + 2 <= K; k += 2, bp += 2 * P) {
    __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
    __m256 b2 = _mm256_load_ps(bp + 16), b3 = _mm256_load_ps(bp + 24);
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
      __m256 av = _mm256_broadcast_ss(w + r * ldw + k);
      c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
    }
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
      __m256 av = _mm256_broadcast_ss(w + r * ldw + k + 1);
      c0[r] = _mm256_fmadd_ps(av, b2, c0[r]);
      c1[r] = _mm256_fmadd_ps(av, b3, c1[r]);
    }
  }
  for (; k < K; k++, bp += P) {
    __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
      __m256 av = _mm256_broadcast_ss(w + r * ldw + k);
      c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
    }
  }
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
    float *yr = y + r * ldy;
    if (width >= P) {
      _mm256_storeu_ps(yr, c0[r]);
      _mm256_storeu_ps(yr + 8, c1[r]);
    } else {
      float t[P];
      _mm256_storeu_ps(t, c0[r]);
      _mm256_storeu_ps(t + 8, c1[r]);
      memcpy(yr, t, (size_t)width * sizeof(float));
    }
  }
}

/* The same for a last block of <= 8 columns (half the work). */
static inline __attribute__((always_inline)) void fbx__cg_block8(const int MR, const float *w, int64_t ldw,
                                                                 const float *bias, const float *bp, int64_t K,
                                                                 float *y, int64_t ldy, int64_t width,
                                                                 const int32_t *koff, int acc) {
  __m256 c0[6];
  if (acc)
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
      float t[8] = {0};
      memcpy(t, y + r * ldy, (size_t)width * sizeof(float));
      c0[r] = _mm256_loadu_ps(t);
    }
  else
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) c0[r] = bias ? _mm256_set1_ps(bias[r]) : _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    __m256 b0 = koff ? _mm256_loadu_ps(bp + koff[k]) : _mm256_load_ps(bp + k * P);
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++)
      c0[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(w + r * ldw + k), b0, c0[r]);
  }
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
    float t[8];
    _mm256_storeu_ps(t, c0[r]);
    memcpy(y + r * ldy, t, (size_t)width * sizeof(float));
  }
}

static inline __attribute__((always_inline)) void fbx__cg_any(const int MR, const float *w, int64_t ldw,
                                                              const float *bias, const float *bp, int64_t K,
                                                              float *y, int64_t ldy, int64_t width,
                                                              const int32_t *koff, int acc) {
  if (width <= 8)
    fbx__cg_block8(MR, w, ldw, bias, bp, K, y, ldy, width, koff, acc);
  else
    fbx__cg_block(MR, w, ldw, bias, bp, K, y, ldy, width, koff, acc);
}

static inline __attribute__((always_inline)) void fbx__cg_run(const float *w, int64_t ldw, const float *bias,
                                                              const float *b, const int32_t *koff, int64_t K,
                                                              int64_t width, int64_t m0, int64_t m1, float *y,
                                                              int64_t ldy, int acc) {
  int64_t np = (width + P - 1) / P;
  int64_t qs = koff ? P : K * P; /* B step per 16-column block */
  int64_t m = m0;
  for (; m + 6 <= m1; m += 6)
    for (int64_t q = 0; q < np; q++)
      fbx__cg_any(6, w + m * ldw, ldw, bias ? bias + m : NULL, b + q * qs, K, y + m * ldy + q * P, ldy,
                    width - q * P, koff, acc);
  if (m >= m1) return;
  const float *wm = w + m * ldw, *bm = bias ? bias + m : NULL;
  float *ym = y + m * ldy;
  for (int64_t q = 0; q < np; q++) {
    const float *bp = b + q * qs;
    float *yq = ym + q * P;
    int64_t wd = width - q * P;
    switch (m1 - m) {
      case 5: fbx__cg_any(5, wm, ldw, bm, bp, K, yq, ldy, wd, koff, acc); break;
      case 4: fbx__cg_any(4, wm, ldw, bm, bp, K, yq, ldy, wd, koff, acc); break;
      case 3: fbx__cg_any(3, wm, ldw, bm, bp, K, yq, ldy, wd, koff, acc); break;
      case 2: fbx__cg_any(2, wm, ldw, bm, bp, K, yq, ldy, wd, koff, acc); break;
      case 1: fbx__cg_any(1, wm, ldw, bm, bp, K, yq, ldy, wd, koff, acc); break;
      default: break;
    }
  }
}

void fbx_cpu_conv_gemm(const float *w, int64_t ldw, const float *bias, const float *bpk, int64_t K,
                       int64_t width, int64_t m0, int64_t m1, float *y, int64_t ldy) {
  if (fbx_cpu_avx512_enabled()) {
    fbx_cpu_conv_gemm_avx512(w, ldw, bias, bpk, NULL, K, width, m0, m1, y, ldy, 0);
    return;
  }
  fbx__cg_run(w, ldw, bias, bpk, NULL, K, width, m0, m1, y, ldy, 0);
}

void fbx_cpu_conv_gemm_off(const float *w, int64_t ldw, const float *bias, const float *xb, const int32_t *koff,
                           int64_t K, int64_t width, int64_t m0, int64_t m1, float *y, int64_t ldy, int acc) {
  if (fbx_cpu_avx512_enabled()) {
    fbx_cpu_conv_gemm_avx512(w, ldw, bias, xb, koff, K, width, m0, m1, y, ldy, acc);
    return;
  }
  fbx__cg_run(w, ldw, bias, xb, koff, K, width, m0, m1, y, ldy, acc);
}

void fbx_cpu_conv_pack_row(float *bpk, int64_t K, int64_t r, const float *src, int64_t width) {
  int64_t q = 0;
  for (; (q + 1) * P <= width; q++) {
    float *d = bpk + (q * K + r) * P;
    const float *s = src + q * P;
    _mm256_store_ps(d, _mm256_loadu_ps(s));
    _mm256_store_ps(d + 8, _mm256_loadu_ps(s + 8));
  }
  int64_t rem = width - q * P;
  if (rem > 0) {
    float *d = bpk + (q * K + r) * P;
    memcpy(d, src + q * P, (size_t)rem * sizeof(float));
    memset(d + rem, 0, (size_t)(P - rem) * sizeof(float));
  }
}
