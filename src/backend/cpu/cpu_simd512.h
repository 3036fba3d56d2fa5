/* AVX-512 forms of cpu_simd.h's vector math, for kernels compiled with an
 * avx512f target: the same operations in the same order on 16 lanes, so a
 * lane's result is bit-identical to the 8-lane function's (checked by
 * tests/backend/test_cpu_math_ulp.c). Integer ops stand in for the float
 * and/or/andnot (those need AVX512DQ). */
#ifndef FBX_BACKEND_CPU_SIMD512_H
#define FBX_BACKEND_CPU_SIMD512_H

#include <immintrin.h>

#include "cpu_simd.h" /* the coefficients */

#define FBX__S512_TGT __attribute__((target("avx512f")))

static inline FBX__S512_TGT __m512 fbx__and512(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
static inline FBX__S512_TGT __m512 fbx__or512(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
static inline FBX__S512_TGT __m512 fbx__andnot512(__m512 a, __m512 b) { /* ~a & b */
  return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

/* fbx__exp256 on 16 lanes. */
static inline FBX__S512_TGT __m512 fbx__exp512(__m512 x) {
  const __m512 hi = _mm512_set1_ps(89.f), lo = _mm512_set1_ps(-104.f);
  __mmask16 nanmask = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  __m512 xc = _mm512_max_ps(_mm512_min_ps(x, hi), lo);
  __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(fbx__exp_ln2[0]), xc);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(fbx__exp_ln2[1]), r);
  __m512 y = _mm512_set1_ps(fbx__exp_p[0]);
  for (int i = 1; i < 6; i++) y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(fbx__exp_p[i]));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  __m512i n = _mm512_cvtps_epi32(fx);
  __m512i n1 = _mm512_srai_epi32(n, 1), n2 = _mm512_sub_epi32(n, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  __m512 res = _mm512_mul_ps(_mm512_mul_ps(y, s1), s2);
  return _mm512_mask_blend_ps(nanmask, res, x);
}

/* fbx__erf256 on 16 lanes. */
static inline FBX__S512_TGT __m512 fbx__erf512(__m512 x) {
  const __m512 sgn = _mm512_set1_ps(-0.f), one = _mm512_set1_ps(1.f);
  __m512 ax = fbx__andnot512(sgn, x), s = _mm512_mul_ps(x, x);
  __m512 r = _mm512_set1_ps(fbx__erf_r[0]);
  for (int i = 1; i < 8; i++) r = _mm512_fmadd_ps(r, s, _mm512_set1_ps(fbx__erf_r[i]));
  __m512 small = _mm512_fmadd_ps(x, r, x);
  __m512 q = _mm512_set1_ps(fbx__erf_q[0]);
  for (int i = 1; i < 11; i++) q = _mm512_fmadd_ps(q, ax, _mm512_set1_ps(fbx__erf_q[i]));
  __m512 big = _mm512_sub_ps(one, fbx__exp512(q));
  big = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(3.95f), _CMP_GE_OQ), big, one);
  big = fbx__or512(big, fbx__and512(x, sgn)); /* big >= 0 (or NaN): the sign of x */
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.875f), _CMP_LT_OQ), big, small);
}

/* fbx__sigmoid256 on 16 lanes. */
static inline FBX__S512_TGT __m512 fbx__sigmoid512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  __m512 e = fbx__exp512(fbx__or512(x, _mm512_set1_ps(-0.f))); /* e^-|x| */
  __m512 num = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), e, one);
  return _mm512_div_ps(num, _mm512_add_ps(one, e));
}

/* fbx__tanh256 on 16 lanes. */
static inline FBX__S512_TGT __m512 fbx__tanh512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f), two = _mm512_set1_ps(2.f), sgn = _mm512_set1_ps(-0.f);
  __m512 ax = fbx__andnot512(sgn, x);
  __m512 e = fbx__exp512(_mm512_mul_ps(two, ax));
  __m512 t = _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(e, one)));
  __m512 x2 = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(fbx__tanh_c[0]);
  for (int k = 1; k < 9; k++) p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(fbx__tanh_c[k]));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, x2), ax, ax);
  __mmask16 small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.549306144f), _CMP_LT_OQ);
  __m512 r = fbx__or512(_mm512_mask_blend_ps(small, t, p), fbx__and512(sgn, x));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, x);
}

#endif
