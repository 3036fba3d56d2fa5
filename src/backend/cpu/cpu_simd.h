/* AVX2 helpers shared by the CPU kernels. */
#ifndef FBX_BACKEND_CPU_SIMD_H
#define FBX_BACKEND_CPU_SIMD_H

#include <immintrin.h>

/* exp(x) for 8 floats: n = round(x / ln2), r = x - n ln2 (|r| <= ln2/2,
 * two-constant Cody-Waite), e^r by the Cephes degree-6 polynomial, then
 * e^r * 2^n applied as two exact power-of-two scalings 2^(n>>1) * 2^(n-(n>>1))
 * so that the one rounding happens in the last multiply: results past
 * FLT_MAX become +inf (exp(x) = +inf for x > 88.7228), results below FLT_MIN
 * become the correctly scaled subnormal, and below ~-103.97 +0.
 * exp(+inf) = +inf, exp(-inf) = +0, NaN -> NaN. Max error over the float
 * range 1.25 ulp (measured by tests/backend/test_cpu_math_ulp.c). */
static inline __m256 fbx__exp256(__m256 x) {
  /* clamp so n stays in [-150, 128]: both half-scalings are normal floats */
  const __m256 hi = _mm256_set1_ps(89.f), lo = _mm256_set1_ps(-104.f);
  __m256 nanmask = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  __m256 xc = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201E-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  __m256i n = _mm256_cvtps_epi32(fx);
  __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 res = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
  return _mm256_blendv_ps(res, x, nanmask);
}

/* exp(x) for softmax numerators (x = v - max <= 0): as fbx__exp256, but
 * results below FLT_MIN (x < -87.3365) flush to +0. Softmax probabilities
 * that small are flushed anyway (cpu_norm.c): denormal inputs make the x86
 * FMAs of the next GEMM ~100x slower (a masked 32x32 attention PV matmul took
 * 1 ms), so no denormal may leave the softmax. */
static inline __m256 fbx__exp256_ftz(__m256 x) {
  __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3365447504f), _CMP_LT_OQ);
  return _mm256_andnot_ps(tiny, fbx__exp256(x));
}

static inline float fbx__hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

static inline float fbx__hmax256(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

#endif
