/* CONV depthwise, AVX-512 plane kernel for square 3x3 / 5x5 kernels, stride
 * (sh, 1) with sh 1 or 2, dilation 1 (PP-LCNet's 5x5 at 12x80 / 6x80 / 3x80,
 * the 3x3 blocks of PP-OCR rec and det). Called by cpu_conv_dw.c only after
 * fbx_cpu_avx512_enabled() said yes, on its zero-padded plane.
 *
 * Why a second kernel: the 2-row x 32-column kernel (cpu_conv_dw_avx512.c)
 * keeps 4 accumulators, so with a 4-cycle FMA latency it issues at most one
 * FMA per cycle (half of Zen 4's and a quarter of a 2-FMA-port Xeon's rate),
 * and it loads every input row once per output row. Here a block is up to 4
 * output rows x 32 columns in 8 zmm accumulators (8 independent chains), and
 * each input row of the block is loaded once per tap column and fed to every
 * output row that uses it: for 5x5 and 4 rows, 8 input rows x 5 x 2 = 80
 * loads feed 200 FMAs (the old kernel: 4 loads per 4 FMAs). Row tails take
 * 3-, 2- and 1-row blocks, a last column block of <= 16 one vector, so no
 * output is computed twice or thrown away. */
#include <immintrin.h>
#include <stdint.h>

#include "cpu_conv.h"

#define FBX__DWR __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define FBX__DWR_INLINE static inline FBX__DWR __attribute__((always_inline))

bool fbx_cpu_conv_dw_rows_ok(int64_t KH, int64_t KW, int64_t sh, int64_t sw) {
  return KH == KW && (KH == 3 || KH == 5) && (sh == 1 || sh == 2) && sw == 1;
}

FBX__DWR_INLINE __mmask16 fbx__dwr_mask(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* R output rows x V vectors of 16 columns at column ow; xp points at the
 * block's first input row (output row oh * SH), y at output row oh. mlast:
 * store mask of the last vector. */
FBX__DWR_INLINE void fbx__dwr_block(const int K, const int SH, const int R, const int V, const float *xp,
                                    int64_t PW, const float *w, float bias, float *y, int64_t OW, int64_t ow,
                                    __mmask16 mlast) {
  __m512 acc[4][2];
  _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
    _Pragma("GCC unroll 2") for (int v = 0; v < V; v++) acc[r][v] = _mm512_set1_ps(bias);
  /* input row ir of the block is tap row kh = ir - r*SH of output row r */
  _Pragma("GCC unroll 16") for (int ir = 0; ir < (R - 1) * SH + K; ir++) {
    const float *xr = xp + ir * PW + ow;
    _Pragma("GCC unroll 8") for (int kw = 0; kw < K; kw++) {
      __m512 xv[2];
      _Pragma("GCC unroll 2") for (int v = 0; v < V; v++) xv[v] = _mm512_loadu_ps(xr + kw + 16 * v);
      _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
        const int kh = ir - r * SH;
        if (kh < 0 || kh >= K) continue;
        const __m512 wv = _mm512_set1_ps(w[kh * K + kw]);
        _Pragma("GCC unroll 2") for (int v = 0; v < V; v++) acc[r][v] = _mm512_fmadd_ps(wv, xv[v], acc[r][v]);
      }
    }
  }
  _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
    _Pragma("GCC unroll 2") for (int v = 0; v < V; v++)
      _mm512_mask_storeu_ps(y + r * OW + ow + 16 * v, v == V - 1 ? mlast : (__mmask16)0xFFFF, acc[r][v]);
}

/* One row block of R rows across the whole width. */
FBX__DWR_INLINE void fbx__dwr_rows(const int K, const int SH, const int R, const float *xp, int64_t PW,
                                   const float *w, float bias, float *y, int64_t OW) {
  int64_t ow = 0;
  for (; ow + 16 < OW; ow += 32)
    fbx__dwr_block(K, SH, R, 2, xp, PW, w, bias, y, OW, ow, fbx__dwr_mask(OW - ow - 16));
  if (ow < OW) fbx__dwr_block(K, SH, R, 1, xp, PW, w, bias, y, OW, ow, fbx__dwr_mask(OW - ow));
}

/* Row blocks of 4, but 6 = 3 + 3 and 5 = 3 + 2 (rec's 6x80 and 3x80 planes):
 * a 2- or 1-row block keeps only 4 or 2 FMA chains busy. */
FBX__DWR_INLINE void fbx__dwr_plane(const int K, const int SH, const float *xp, int64_t PW, const float *w,
                                    float bias, float *y, int64_t OH, int64_t OW) {
  for (int64_t oh = 0; oh < OH;) {
    int64_t left = OH - oh;
    const float *xb = xp + oh * SH * PW;
    float *yb = y + oh * OW;
    if (left >= 7 || left == 4) {
      fbx__dwr_rows(K, SH, 4, xb, PW, w, bias, yb, OW);
      oh += 4;
    } else if (left >= 3) {
      fbx__dwr_rows(K, SH, 3, xb, PW, w, bias, yb, OW);
      oh += 3;
    } else if (left == 2) {
      fbx__dwr_rows(K, SH, 2, xb, PW, w, bias, yb, OW);
      oh += 2;
    } else {
      fbx__dwr_rows(K, SH, 1, xb, PW, w, bias, yb, OW);
      oh += 1;
    }
  }
}

FBX__DWR void fbx_cpu_conv_dw_rows_avx512(const float *xp, int64_t PW, const float *w, int64_t K, int64_t sh,
                                          float bias, float *y, int64_t OH, int64_t OW) {
  if (K == 5 && sh == 1) fbx__dwr_plane(5, 1, xp, PW, w, bias, y, OH, OW);
  else if (K == 5) fbx__dwr_plane(5, 2, xp, PW, w, bias, y, OH, OW);
  else if (sh == 1) fbx__dwr_plane(3, 1, xp, PW, w, bias, y, OH, OW);
  else fbx__dwr_plane(3, 2, xp, PW, w, bias, y, OH, OW);
}
