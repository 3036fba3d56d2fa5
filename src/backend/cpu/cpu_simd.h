/* AVX2 helpers shared by the CPU kernels. */
#ifndef FBX_BACKEND_CPU_SIMD_H
#define FBX_BACKEND_CPU_SIMD_H

#include <immintrin.h>

/* exp(x) for 8 floats, ~2 ulp (Cephes polynomial); NaN propagates, large
 * inputs clamp (exp(88.38) ~ FLT_MAX); below -87.33 (result < FLT_MIN) it
 * returns 0: never a denormal (softmax rows feed GEMMs, and denormal inputs
 * make x86 FMAs ~100x slower: a masked 32x32 attention PV matmul took 1 ms). */
static inline __m256 fbx__exp256(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365447504f);
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
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  __m256 res = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  res = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), res); /* underflow -> +0 */
  return _mm256_blendv_ps(res, x, nanmask);
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
