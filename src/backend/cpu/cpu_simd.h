/* AVX2 helpers shared by the CPU kernels. */
#ifndef FBX_BACKEND_CPU_SIMD_H
#define FBX_BACKEND_CPU_SIMD_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

/* dst[i*ldd + c] = src[c*lds + i] for an 8x8 float block, in registers (the
 * GEMMs' packing of transposed operands). */
static inline void fbx__transpose8x8_ps(const float *src, int64_t lds, float *dst, int64_t ldd) {
  __m256 v[8], t[8];
  for (int i = 0; i < 8; i++) v[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    v[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    v[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    v[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    v[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  /* v[c], c < 4: element c of source rows 0..3 (low lane) and element c+4 (high
   * lane); v[c+4]: the same for source rows 4..7 */
  for (int c = 0; c < 4; c++) {
    _mm256_storeu_ps(dst + c * ldd, _mm256_permute2f128_ps(v[c], v[c + 4], 0x20));
    _mm256_storeu_ps(dst + (c + 4) * ldd, _mm256_permute2f128_ps(v[c], v[c + 4], 0x31));
  }
}

/* exp(x) for 8 floats: n = round(x / ln2), r = x - n ln2 (|r| <= ln2/2,
 * two-constant Cody-Waite), e^r by the Cephes degree-6 polynomial, then
 * e^r * 2^n applied as two exact power-of-two scalings 2^(n>>1) * 2^(n-(n>>1))
 * so that the one rounding happens in the last multiply: results past
 * FLT_MAX become +inf (exp(x) = +inf for x > 88.7228), results below FLT_MIN
 * become the correctly scaled subnormal, and below ~-103.97 +0.
 * exp(+inf) = +inf, exp(-inf) = +0, NaN -> NaN. Max error over the float
 * range 1.25 ulp (measured by tests/backend/test_cpu_math_ulp.c). */
/* Coefficients shared with the 16-lane forms (cpu_simd512.h): exp's Cody-Waite ln2 split and
 * polynomial (highest degree first), erf's R (of x^2) and Q (of |x|), highest degree first. */
static const float fbx__exp_ln2[2] = {0.693359375f, -2.12194440e-4f};
static const float fbx__exp_p[6] = {1.9875691500E-4f, 1.3981999507E-3f, 8.3334519073E-3f,
                                    4.1665795894E-2f, 1.6666665459E-1f, 5.0000001201E-1f};
static const float fbx__erf_r[8] = {-1.0713973653e-05f, 1.1566204516e-04f, -8.5179291301e-04f, 5.2229236664e-03f,
                                    -2.6865972916e-02f, 1.1283789881e-01f, -3.7612638845e-01f, 1.2837916709e-01f};
static const float fbx__erf_q[11] = {-3.8737065833e-07f, 8.0580487822e-06f, -7.2741810827e-05f, 3.5489135084e-04f,
                                     -8.0002279715e-04f, -1.4762803561e-03f, 2.1152449933e-02f, -1.0438564980e-01f,
                                     -6.3579047091e-01f, -1.1286288381e+00f, 3.3481911373e-05f};

static inline __m256 fbx__exp256(__m256 x) {
  /* clamp so n stays in [-150, 128]: both half-scalings are normal floats */
  const __m256 hi = _mm256_set1_ps(89.f), lo = _mm256_set1_ps(-104.f);
  __m256 nanmask = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  __m256 xc = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(fbx__exp_ln2[0]), xc);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(fbx__exp_ln2[1]), r);
  __m256 y = _mm256_set1_ps(fbx__exp_p[0]);
  for (int i = 1; i < 6; i++) y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(fbx__exp_p[i]));
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

/* erf(x) for 8 floats, on |x| with the sign copied back:
 *   |x| < 0.875:        erf = x + x * R(x^2), R a degree-7 fit of erf(x)/x - 1 (the last step one FMA);
 *   0.875 <= |x| < 3.95: erf = 1 - exp(Q(|x|)), Q a degree-10 fit of log(erfc(x)) (weighted by erfc/erf,
 *                        the weight of its error in erf), exp = fbx__exp256;
 *   |x| >= 3.95:         1 (erf rounds to 1 in float from 3.92 on).
 * Coefficients: weighted least-squares fits in double over Chebyshev nodes of each interval (numpy,
 * relative error for R). erf(-0) = -0, erf(+-inf) = +-1, NaN -> NaN. Max error 0.98 ulp (measured by
 * tests/backend/test_cpu_math_ulp.c; glibc's erff: 0.88). */
static inline __m256 fbx__erf256(__m256 x) {
  const __m256 sgn = _mm256_set1_ps(-0.f), one = _mm256_set1_ps(1.f);
  __m256 ax = _mm256_andnot_ps(sgn, x), s = _mm256_mul_ps(x, x);
  __m256 r = _mm256_set1_ps(fbx__erf_r[0]);
  for (int i = 1; i < 8; i++) r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(fbx__erf_r[i]));
  __m256 small = _mm256_fmadd_ps(x, r, x);
  __m256 q = _mm256_set1_ps(fbx__erf_q[0]);
  for (int i = 1; i < 11; i++) q = _mm256_fmadd_ps(q, ax, _mm256_set1_ps(fbx__erf_q[i]));
  __m256 big = _mm256_sub_ps(one, fbx__exp256(q));
  big = _mm256_blendv_ps(big, one, _mm256_cmp_ps(ax, _mm256_set1_ps(3.95f), _CMP_GE_OQ));
  big = _mm256_or_ps(big, _mm256_and_ps(x, sgn)); /* big >= 0 (or NaN): the sign of x */
  return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.875f), _CMP_LT_OQ));
}

/* 1/(1+e^-x) as (x >= 0 ? 1 : e) / (1 + e), e = e^-|x|: e never overflows and the tiny results of
 * very negative x (down to subnormals) keep their precision. max 2.35 ulp (measured by
 * tests/backend/test_cpu_math_ulp.c); sigmoid(-inf) = 0, sigmoid(+inf) = 1, NaN -> NaN. */
static inline __m256 fbx__sigmoid256(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f);
  __m256 e = fbx__exp256(_mm256_or_ps(x, _mm256_set1_ps(-0.f))); /* e^-|x| */
  __m256 num = _mm256_blendv_ps(e, one, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ));
  return _mm256_div_ps(num, _mm256_add_ps(one, e));
}
/* The scalar form with glibc's expf (the vector loops' tails; max 1.84 ulp). */
static inline float fbx__sigmoid1(float x) {
  float e = expf(-fabsf(x));
  return (x >= 0 ? 1.f : e) / (1.f + e);
}

/* Taylor coefficients of tanh(x) / x - 1 in x^2, highest first (x^19 .. x^3) */
static const float fbx__tanh_c[9] = {-443861162.f / 1856156927625.f, 6404582.f / 10854718875.f,
                                     -929569.f / 638512875.f,        21844.f / 6081075.f,
                                     -1382.f / 155925.f,             62.f / 2835.f,
                                     -17.f / 315.f,                  2.f / 15.f,
                                     -1.f / 3.f};
/* |x| < ln(3)/2 (where tanh = 1/2): odd Taylor polynomial through x^19 (truncation < 0.01 ulp);
 * above: 1 - 2/(e^2|x| + 1), where the subtraction is exact (Sterbenz) so only the quotient's ~1.5
 * ulp remain. max 1.43 ulp; tanh(+-inf) = +-1, tanh(-0) = -0, NaN -> NaN. */
static inline __m256 fbx__tanh256(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f), two = _mm256_set1_ps(2.f), sgn = _mm256_set1_ps(-0.f);
  __m256 ax = _mm256_andnot_ps(sgn, x);
  __m256 e = fbx__exp256(_mm256_mul_ps(two, ax));
  __m256 t = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(e, one)));
  __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(fbx__tanh_c[0]);
  for (int k = 1; k < 9; k++) p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(fbx__tanh_c[k]));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, x2), ax, ax);
  __m256 small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.549306144f), _CMP_LT_OQ);
  /* both branches computed on |x|, x's sign put back last (keeps tanh(-0) = -0) */
  __m256 r = _mm256_or_ps(_mm256_blendv_ps(t, p, small), _mm256_and_ps(sgn, x));
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
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
