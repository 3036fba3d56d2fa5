/* CONV depthwise, AVX-512 plane kernel (called by cpu_conv_dw.c only after
 * fbx_cpu_avx512_enabled() said yes): one zero-padded plane (the caller's
 * layout, row stride PW, covering every tap of every 32-wide block: see
 * fbx_cpu_conv_dw2_pad_w) -> OH x OW outputs, strides 1|2 per axis, dilation 1.
 * 2 output rows x 32 outputs per step in 4 zmm accumulators: each weight
 * broadcast feeds 4 FMAs over twice the width of the AVX2 kernel; stride 2
 * takes the even lanes of 64 loaded floats with one permute per 16; tails by
 * masked stores. Function target attributes (no file-wide pragma), so the
 * rest of the library keeps its baseline ISA. */
#include <immintrin.h>
#include <stdint.h>

#include "cpu_conv.h"

#define FBX__DW512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

static inline FBX__DW512 __mmask16 fbx__dw512_mask(int64_t n) {
  if (n <= 0) return 0;
  return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* 16 floats q[0], q[2], ..., q[30] */
static inline FBX__DW512 __m512 fbx__dw512_even(const float *q, __m512i idx) {
  return _mm512_permutex2var_ps(_mm512_loadu_ps(q), idx, _mm512_loadu_ps(q + 16));
}

FBX__DW512 void fbx_cpu_conv_dw2_plane_avx512(const float *xp, int64_t PW, const float *w, int64_t KH, int64_t KW,
                                              int64_t sh, int64_t sw, float bias, float *y, int64_t OH,
                                              int64_t OW) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int64_t oh = 0; oh < OH; oh += 2) {
    const int two = oh + 1 < OH;
    float *yr0 = y + oh * OW, *yr1 = yr0 + OW;
    for (int64_t ow = 0; ow < OW; ow += 32) {
      __m512 a00 = _mm512_set1_ps(bias), a01 = a00, a10 = a00, a11 = a00;
      for (int64_t kh = 0; kh < KH; kh++) {
        const float *r0 = xp + (oh * sh + kh) * PW + ow * sw, *r1 = r0 + sh * PW;
        const float *wr = w + kh * KW;
        for (int64_t kw = 0; kw < KW; kw++) {
          __m512 wv = _mm512_set1_ps(wr[kw]), x00, x01, x10, x11;
          if (sw == 1) {
            x00 = _mm512_loadu_ps(r0 + kw), x01 = _mm512_loadu_ps(r0 + kw + 16);
            x10 = _mm512_loadu_ps(r1 + kw), x11 = _mm512_loadu_ps(r1 + kw + 16);
          } else {
            x00 = fbx__dw512_even(r0 + kw, even), x01 = fbx__dw512_even(r0 + kw + 32, even);
            x10 = fbx__dw512_even(r1 + kw, even), x11 = fbx__dw512_even(r1 + kw + 32, even);
          }
          a00 = _mm512_fmadd_ps(wv, x00, a00);
          a01 = _mm512_fmadd_ps(wv, x01, a01);
          a10 = _mm512_fmadd_ps(wv, x10, a10);
          a11 = _mm512_fmadd_ps(wv, x11, a11);
        }
      }
      __mmask16 m0 = fbx__dw512_mask(OW - ow), m1 = fbx__dw512_mask(OW - ow - 16);
      _mm512_mask_storeu_ps(yr0 + ow, m0, a00);
      _mm512_mask_storeu_ps(yr0 + ow + 16, m1, a01);
      if (two) {
        _mm512_mask_storeu_ps(yr1 + ow, m0, a10);
        _mm512_mask_storeu_ps(yr1 + ow + 16, m1, a11);
      }
    }
  }
}
