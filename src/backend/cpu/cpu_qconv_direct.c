/* CONV_INT, direct AVX-512 VNNI kernel for 2-D, group 1, stride 1 (any
 * kernel size, dilation, pads): no im2col.
 *
 * X is repacked once into zero-point-padded planes of 4-channel groups in
 * the VNNI B domain (u8; s8 input flipped by ^0x80):
 *   xp[((cg * PH + iy) * PW + ix) * 4 + ci] = x'[4cg + ci, iy - pt, ix - pl]
 * (x_zp' in the padding, 0 for channels past C), so the 16 output positions
 * ox..ox+15 of a tap (ky, kx) and channel group cg are ONE contiguous 64-byte
 * load at row oy + ky*d, column ox + kx*d: vpdpbusd multiplies it straight
 * with 4 weights broadcast from W repacked as (m, ky, kx, cg, 4) in the s8
 * A domain. A ninth "row" of ones gives the column sums of B' in the same
 * loop (needed for the domain shifts and zero points: cpu_qgemm.h).
 * Register blocking: 8 output channels x 32 positions (16 + 2 accumulators).
 * Parallel over (output row, 8-channel block); the conv epilogue (int32 ->
 * float) runs on each finished row segment. */
#include <immintrin.h>
#include <string.h>

#include "cpu_qconv_direct.h"
#include "cpu_qgemm.h"

#define FBX__QD_TGT __attribute__((target("avx512f,avx512bw,avx512vnni")))

typedef struct fbx__qd_job {
  const fbx_qconv_direct *p;
  uint8_t *xp;       /* repacked X of one image */
  int8_t *ap;        /* repacked W: M rows of KD bytes */
  int32_t *rs, *alpha;
  int64_t CG, PH, PW, KD, n;
  uint8_t pad, flip;
} fbx__qd_job;

/* Padded row r = cg * PH + iy of xp: the 4 channel rows interleaved byte by byte
 * (punpcklbw/punpcklwd of 16-byte pieces), in the B domain, fill outside. */
static FBX__QD_TGT void fbx__qd_repack_task(void *arg, int64_t r0, int64_t r1, int worker) {
  (void)worker;
  const fbx__qd_job *j = arg;
  const fbx_qconv_direct *p = j->p;
  const uint8_t *x = (const uint8_t *)p->x + j->n * p->C * p->H * p->W;
  const __m128i flip = _mm_set1_epi8((char)j->flip);
  for (int64_t r = r0; r < r1; r++) {
    int64_t cg = r / j->PH, iy = r % j->PH - p->pt;
    uint8_t *d = j->xp + r * j->PW * 4;
    const uint8_t *src[4];
    uint8_t fill[4];
    for (int ci = 0; ci < 4; ci++) {
      int64_t c = cg * 4 + ci;
      fill[ci] = c < p->C ? j->pad : 0;
      src[ci] = c < p->C && iy >= 0 && iy < p->H ? x + (c * p->H + iy) * p->W : NULL;
    }
    int64_t ix = 0, end = p->pl + p->W; /* [pl, end): data; elsewhere fill */
    for (; ix < p->pl; ix++)
      for (int ci = 0; ci < 4; ci++) d[ix * 4 + ci] = fill[ci];
    for (; ix + 16 <= end; ix += 16) {
      __m128i v[4];
      for (int ci = 0; ci < 4; ci++)
        v[ci] = src[ci] ? _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src[ci] + ix - p->pl)), flip)
                        : _mm_set1_epi8((char)fill[ci]);
      __m128i t0 = _mm_unpacklo_epi8(v[0], v[1]), t1 = _mm_unpackhi_epi8(v[0], v[1]);
      __m128i t2 = _mm_unpacklo_epi8(v[2], v[3]), t3 = _mm_unpackhi_epi8(v[2], v[3]);
      _mm_storeu_si128((__m128i *)(d + ix * 4), _mm_unpacklo_epi16(t0, t2));
      _mm_storeu_si128((__m128i *)(d + ix * 4 + 16), _mm_unpackhi_epi16(t0, t2));
      _mm_storeu_si128((__m128i *)(d + ix * 4 + 32), _mm_unpacklo_epi16(t1, t3));
      _mm_storeu_si128((__m128i *)(d + ix * 4 + 48), _mm_unpackhi_epi16(t1, t3));
    }
    for (; ix < end; ix++)
      for (int ci = 0; ci < 4; ci++) d[ix * 4 + ci] = src[ci] ? src[ci][ix - p->pl] ^ j->flip : fill[ci];
    for (; ix < j->PW; ix++)
      for (int ci = 0; ci < 4; ci++) d[ix * 4 + ci] = fill[ci];
  }
}

static inline __attribute__((always_inline)) FBX__QD_TGT void
fbx__qd_block(const int MR, const int NP, const fbx__qd_job *j, int64_t m0, int64_t oy, int64_t ox, int64_t w,
              int32_t *y) {
  const fbx_qconv_direct *p = j->p;
  __m512i c0[8], c1[8], s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
  const __m512i ones = _mm512_set1_epi8(1);
  _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++) c0[r] = c1[r] = _mm512_setzero_si512();
  const int8_t *a = j->ap + m0 * j->KD;
  size_t plane = (size_t)(j->PH * j->PW * 4);
  for (int64_t ky = 0; ky < p->kh; ky++)
    for (int64_t kx = 0; kx < p->kw; kx++) {
      const uint8_t *b = j->xp + ((oy + ky * p->dh) * j->PW + ox + kx * p->dw) * 4;
      const int8_t *at = a + (ky * p->kw + kx) * j->CG * 4;
      for (int64_t cg = 0; cg < j->CG; cg++, b += plane, at += 4) {
        __m512i b0 = _mm512_loadu_si512(b), b1 = NP == 2 ? _mm512_loadu_si512(b + 64) : b0;
        s0 = _mm512_dpbusd_epi32(s0, b0, ones);
        if (NP == 2) s1 = _mm512_dpbusd_epi32(s1, b1, ones);
        _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++) {
          int32_t q;
          memcpy(&q, at + r * j->KD, 4);
          __m512i av = _mm512_set1_epi32(q);
          c0[r] = _mm512_dpbusd_epi32(c0[r], b0, av);
          if (NP == 2) c1[r] = _mm512_dpbusd_epi32(c1[r], b1, av);
        }
      }
    }
  /* C = raw + beta * rs[m] + alpha[m] * (cs + K * beta) */
  const __m512i vb = _mm512_set1_epi32(p->beta), kb = _mm512_set1_epi32((int32_t)((uint32_t)p->K * (uint32_t)p->beta));
  _Pragma("GCC unroll 2") for (int h = 0; h < NP; h++) {
    int64_t wh = w - h * 16;
    __mmask16 mk = wh >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << wh) - 1u);
    __m512i cb = _mm512_add_epi32(h ? s1 : s0, kb);
    _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++) {
      __m512i v = _mm512_add_epi32(h ? c1[r] : c0[r],
                                   _mm512_add_epi32(_mm512_mullo_epi32(vb, _mm512_set1_epi32(j->rs[m0 + r])),
                                                    _mm512_mullo_epi32(cb, _mm512_set1_epi32(j->alpha[m0 + r]))));
      _mm512_mask_storeu_epi32(y + r * p->OH * p->OW + h * 16, mk, v);
    }
  }
}

static FBX__QD_TGT void fbx__qd_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__qd_job *j = arg;
  const fbx_qconv_direct *p = j->p;
  int64_t nmb = (p->M + 7) / 8;
  for (int64_t t = t0; t < t1; t++) {
    int64_t oy = t / nmb, m0 = (t % nmb) * 8;
    int mr = p->M - m0 < 8 ? (int)(p->M - m0) : 8;
    int32_t *yrow = (int32_t *)p->y + ((j->n * p->M + m0) * p->OH + oy) * p->OW;
    for (int64_t ox = 0; ox < p->OW; ox += 32) {
      int64_t w = p->OW - ox < 32 ? p->OW - ox : 32;
      int32_t *yy = yrow + ox;
      if (w > 16) {
        switch (mr) {
#define FBX__QD_CASE(R) \
  case R: fbx__qd_block(R, 2, j, m0, oy, ox, w, yy); break;
          FBX__QD_CASE(1) FBX__QD_CASE(2) FBX__QD_CASE(3) FBX__QD_CASE(4)
          FBX__QD_CASE(5) FBX__QD_CASE(6) FBX__QD_CASE(7) FBX__QD_CASE(8)
#undef FBX__QD_CASE
        }
      } else {
        switch (mr) {
#define FBX__QD_CASE(R) \
  case R: fbx__qd_block(R, 1, j, m0, oy, ox, w, yy); break;
          FBX__QD_CASE(1) FBX__QD_CASE(2) FBX__QD_CASE(3) FBX__QD_CASE(4)
          FBX__QD_CASE(5) FBX__QD_CASE(6) FBX__QD_CASE(7) FBX__QD_CASE(8)
#undef FBX__QD_CASE
        }
      }
    }
    if (p->epi && p->epi->prog)
      for (int r = 0; r < mr; r++) {
        int64_t b = ((j->n * p->M + m0 + r) * p->OH + oy) * p->OW;
        fbx_cpu_epi_apply(p->epi, b, b + p->OW, worker);
      }
  }
}

bool fbx_cpu_qconv_direct_ok(const fbx_qconv_direct *p) {
  /* measured (bench_qconv): ahead of im2col + GEMM from OW = 48 on (at OW <= 32 the 32-wide
   * blocks run half empty); a 1x1 conv needs no im2col anyway */
  return fbx_cpu_qg_best() >= FBX_QG_VNNI && p->OW >= 48 && p->kh * p->kw > 1;
}

size_t fbx_cpu_qconv_direct_ws(const fbx_qconv_direct *p) {
  int64_t CG = (p->C + 3) / 4, PW = (p->OW + 31) / 32 * 32 + (p->kw - 1) * p->dw + 1;
  int64_t PH = p->OH + (p->kh - 1) * p->dh + 1;
  if (PW < p->pl + p->W) PW = p->pl + p->W;
  if (PH < p->pt + p->H) PH = p->pt + p->H;
  size_t xp = (size_t)(CG * PH * PW * 4 + 64), ap = (size_t)(p->M * p->kh * p->kw * CG * 4 + 64);
  return (xp + 63) / 64 * 64 + (ap + 63) / 64 * 64 + 2 * (size_t)p->M * sizeof(int32_t) + 64;
}

void fbx_cpu_qconv_direct_run(fbx_cpu_ctx *c, const fbx_qconv_direct *p, void *ws) {
  fbx__qd_job j;
  memset(&j, 0, sizeof j);
  j.p = p;
  j.CG = (p->C + 3) / 4;
  j.PW = (p->OW + 31) / 32 * 32 + (p->kw - 1) * p->dw + 1; /* every 32-wide block's taps inside the row */
  j.PH = p->OH + (p->kh - 1) * p->dh + 1;
  if (j.PW < p->pl + p->W) j.PW = p->pl + p->W;
  if (j.PH < p->pt + p->H) j.PH = p->pt + p->H;
  j.KD = p->kh * p->kw * j.CG * 4;
  size_t xp_b = ((size_t)(j.CG * j.PH * j.PW * 4 + 64) + 63) / 64 * 64;
  size_t ap_b = ((size_t)(p->M * j.KD + 64) + 63) / 64 * 64;
  j.xp = ws;
  j.ap = (int8_t *)((uint8_t *)ws + xp_b);
  j.rs = (int32_t *)(void *)((uint8_t *)ws + xp_b + ap_b);
  j.alpha = j.rs + p->M;
  j.flip = p->x_signed ? 0x80 : 0;
  j.pad = (uint8_t)(p->xz ^ j.flip);
  /* W (M, C, kh, kw) -> (M, kh, kw, CG, 4) in the s8 domain (u8 weights: ^0x80, oa = 128) */
  const uint8_t *w = p->w;
  uint8_t wflip = p->w_signed ? 0 : 0x80;
  int oa = p->w_signed ? 0 : 128;
  for (int64_t m = 0; m < p->M; m++) {
    int8_t *d = j.ap + m * j.KD;
    uint32_t s = 0;
    for (int64_t ky = 0; ky < p->kh; ky++)
      for (int64_t kx = 0; kx < p->kw; kx++)
        for (int64_t c4 = 0; c4 < j.CG * 4; c4++) {
          int8_t v = 0;
          if (c4 < p->C) v = (int8_t)(w[((m * p->C + c4) * p->kh + ky) * p->kw + kx] ^ wflip);
          d[((ky * p->kw + kx) * j.CG) * 4 + c4] = v;
          s += (uint32_t)(int32_t)v;
        }
    j.rs[m] = (int32_t)s;
    j.alpha[m] = oa - p->wz[m];
  }
  int64_t nmb = (p->M + 7) / 8;
  for (j.n = 0; j.n < p->N; j.n++) {
    fbx_cpu_par(c, j.CG * j.PH, 16, fbx__qd_repack_task, &j);
    fbx_cpu_par(c, p->OH * nmb, 1, fbx__qd_task, &j);
  }
}
