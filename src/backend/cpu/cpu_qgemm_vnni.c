/* Integer GEMM, AVX-512 VNNI path (cpu_qgemm.h): vpdpbusd multiplies u8 (B,
 * the vector operand) by s8 (A, broadcast 4 k at a time) and adds groups of
 * four products into int32 without saturation. The inputs are moved into
 * those domains exactly (x ^ 0x80 = x -/+ 128) and the offsets are paid back
 * by the row/column-sum terms. Register blocking 8 rows x 32 columns (16 zmm
 * accumulators; two 16-column panels), or 8 x 16 for a last odd panel. */
#include <immintrin.h>
#include <string.h>

#include "cpu_qgemm.h"
#include "cpu_simd.h"
#include "cpu_simd512.h"

#define FBX__QV_TGT __attribute__((target("avx512f,avx512bw,avx512vnni")))

FBX__QV_TGT void fbx__qg_pack_b_vnni(const uint8_t *const *rows, bool b_signed, int64_t K, int64_t kp,
                                     int64_t width, void *panels, int32_t *cs) {
  int64_t np = (width + FBX_QG_NR - 1) / FBX_QG_NR;
  const __m128i flip = _mm_set1_epi8(b_signed ? (char)0x80 : 0);
  const __m512i ones = _mm512_set1_epi8(1);
  uint8_t tmp[4][16];
  for (int64_t q = 0; q < np; q++) {
    uint8_t *pan = (uint8_t *)panels + q * kp * FBX_QG_NR;
    int64_t c0 = q * FBX_QG_NR, w = width - c0 < FBX_QG_NR ? width - c0 : FBX_QG_NR;
    __m512i s = _mm512_setzero_si512();
    for (int64_t k = 0; k < kp; k += 4) {
      __m128i r[4];
      for (int i = 0; i < 4; i++) {
        if (k + i >= K) { r[i] = _mm_setzero_si128(); continue; }
        const uint8_t *src = rows[k + i] + c0;
        if (w < FBX_QG_NR) {
          memset(tmp[i], b_signed ? 0x80 : 0, 16); /* padding is b' = 0 after the flip */
          memcpy(tmp[i], src, (size_t)w);
          src = tmp[i];
        }
        r[i] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)src), flip);
      }
      __m128i t0 = _mm_unpacklo_epi8(r[0], r[1]), t1 = _mm_unpackhi_epi8(r[0], r[1]);
      __m128i t2 = _mm_unpacklo_epi8(r[2], r[3]), t3 = _mm_unpackhi_epi8(r[2], r[3]);
      uint8_t *d = pan + k * FBX_QG_NR;
      _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi16(t0, t2));
      _mm_storeu_si128((__m128i *)(d + 16), _mm_unpackhi_epi16(t0, t2));
      _mm_storeu_si128((__m128i *)(d + 32), _mm_unpacklo_epi16(t1, t3));
      _mm_storeu_si128((__m128i *)(d + 48), _mm_unpackhi_epi16(t1, t3));
      s = _mm512_dpbusd_epi32(s, _mm512_loadu_si512(d), ones);
    }
    _mm512_storeu_si512(cs + c0, s);
  }
}

/* The float epilogue of cpu_qgemm.h on n (1..4) vectors at once: rows r0 .. r0+n-1, columns
 * col .. col+15, mask mk. Each vector goes through the same ops in the same order as alone (bit for
 * bit); n at a time amortises the steps' dispatch and gives the core n independent chains to
 * overlap: an Erf step is ~40 dependent vector ops, latency-bound on one vector (measured on a
 * quantized BERT's FFN up projection, GELU in the epilogue: 3x the time of the same-sized down
 * projection with one vector at a time). The empty asm after each op keeps the compiler from
 * contracting a Mul and an Add into one FMA; Erf is fbx__erf512, bit for bit the interpreter's
 * fbx__erf256 on 16 lanes. */
static inline __attribute__((always_inline)) FBX__QV_TGT void fbx__qv_out(const fbx_qg_out *o, const int n,
                                                                          __m512 v[4], int64_t r0, int64_t col,
                                                                          __mmask16 mk) {
  __m512 sl[FBX_QG_OUT_SLOTS][4];
  for (int s = 0; s < o->n_steps; s++) {
    int kind = o->step[s].kind, src = o->step[s].src;
    if (kind == FBX_QG_OUT_SAVE) {
      _Pragma("GCC unroll 4") for (int i = 0; i < n; i++) sl[o->step[s].slot][i] = v[i];
      continue;
    }
    if (kind == FBX_QG_OUT_ERF) {
      _Pragma("GCC unroll 4") for (int i = 0; i < n; i++) v[i] = fbx__erf512(v[i]);
      continue;
    }
    __m512 k[4];
    _Pragma("GCC unroll 4") for (int i = 0; i < n; i++)
      k[i] = src == FBX_QG_OUT_SLOT     ? sl[o->step[s].slot][i]
             : src == FBX_QG_OUT_TENSOR ? _mm512_maskz_loadu_ps(mk, o->step[s].p + col + (r0 + i) * o->ldt)
             : src == FBX_QG_OUT_SCALAR ? _mm512_set1_ps(o->step[s].p[0])
                                        : _mm512_maskz_loadu_ps(mk, o->step[s].p + col);
    _Pragma("GCC unroll 4") for (int i = 0; i < n; i++) {
      switch (o->step[s].op) {
        case FBX_QG_OUT_MUL: v[i] = _mm512_mul_ps(v[i], k[i]); break;
        case FBX_QG_OUT_ADD: v[i] = _mm512_add_ps(v[i], k[i]); break;
        case FBX_QG_OUT_SUB: v[i] = _mm512_sub_ps(v[i], k[i]); break;
        case FBX_QG_OUT_RSUB: v[i] = _mm512_sub_ps(k[i], v[i]); break;
        case FBX_QG_OUT_DIV: v[i] = _mm512_div_ps(v[i], k[i]); break;
        default: v[i] = _mm512_div_ps(k[i], v[i]); break;
      }
      __asm__("" : "+v"(v[i]));
    }
  }
}

/* Rows r0 .. r0+n-1 (n 1..4) of panel h of a block: sum_k a'b' (acc[i]) + beta * rs_r + alpha_r *
 * cb (be, cv: that panel's beta and cb), the epilogue o or none, stored under mask mk at y (row
 * stride ldy; y is row r0's). */
static inline __attribute__((always_inline)) FBX__QV_TGT void fbx__qv_store(const int n, const __m512i acc[4],
                                                                            __m512i be, __m512i cv,
                                                                            const int32_t *rs, const int32_t *alpha,
                                                                            const fbx_qg_out *o, int r0, int h,
                                                                            __mmask16 mk, int32_t *y, int64_t ldy) {
  __m512i t[4];
  _Pragma("GCC unroll 4") for (int i = 0; i < n; i++)
    t[i] = _mm512_add_epi32(acc[i], _mm512_add_epi32(_mm512_mullo_epi32(be, _mm512_set1_epi32(rs[i])),
                                                     _mm512_mullo_epi32(cv, _mm512_set1_epi32(alpha[i]))));
  if (!o) {
    _Pragma("GCC unroll 4") for (int i = 0; i < n; i++) _mm512_mask_storeu_epi32(y + i * ldy, mk, t[i]);
    return;
  }
  __m512 v[4];
  _Pragma("GCC unroll 4") for (int i = 0; i < n; i++) v[i] = _mm512_cvtepi32_ps(t[i]);
  fbx__qv_out(o, n, v, r0, h * FBX_QG_NR, mk);
  _Pragma("GCC unroll 4") for (int i = 0; i < n; i++) _mm512_mask_storeu_ps((float *)(void *)(y + i * ldy), mk, v[i]);
}

/* acc += u8 x s8 (vpdpbusd) with the accumulator tied to its register: through the intrinsic, GCC 12
 * copied all 16 accumulators of the 8x32 block to other registers every k step (and spilled two). */
#define FBX__QV_DPBUSD(acc, u8, s8) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8))

static inline __attribute__((always_inline)) FBX__QV_TGT void
fbx__qv_block(const int MR, const int NP, const uint8_t *a, int64_t kp, const int32_t *rs, const int32_t *alpha,
              const uint8_t *p0, const uint8_t *p1, int64_t w, const int32_t *beta, const int32_t *cb, int32_t *y,
              int64_t ldy, const fbx_qg_out *o) {
  __m512i c0[8], c1[8];
  _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++) c0[r] = c1[r] = _mm512_setzero_si512();
  for (int64_t k = 0; k < kp; k += 4) {
    __m512i b0 = _mm512_loadu_si512(p0 + k * FBX_QG_NR);
    __m512i b1 = NP == 2 ? _mm512_loadu_si512(p1 + k * FBX_QG_NR) : b0;
    _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++) {
      int32_t q;
      memcpy(&q, a + r * kp + k, 4);
      __m512i av = _mm512_set1_epi32(q);
      FBX__QV_DPBUSD(c0[r], b0, av);
      if (NP == 2) FBX__QV_DPBUSD(c1[r], b1, av);
    }
  }
  _Pragma("GCC unroll 2") for (int h = 0; h < NP; h++) {
    int64_t wh = w - h * FBX_QG_NR;
    __mmask16 mk = wh >= FBX_QG_NR ? (__mmask16)0xffff : (__mmask16)((1u << wh) - 1u);
    __m512i be = _mm512_loadu_si512(beta + h * FBX_QG_NR), cv = _mm512_loadu_si512(cb + h * FBX_QG_NR);
    const __m512i *c = h ? c1 : c0;
    int r = 0;
    _Pragma("GCC unroll 2") for (; r + 4 <= MR; r += 4)
      fbx__qv_store(4, c + r, be, cv, rs + r, alpha + r, o, r, h, mk, y + r * ldy + h * FBX_QG_NR, ldy);
    _Pragma("GCC unroll 3") for (; r < MR; r++)
      fbx__qv_store(1, c + r, be, cv, rs + r, alpha + r, o, r, h, mk, y + r * ldy + h * FBX_QG_NR, ldy);
  }
}

FBX__QV_TGT void fbx__qg_finish_vnni(const int32_t *acc, int mr, int np, int64_t w, const int32_t *rs,
                                     const int32_t *alpha, const int32_t *beta, const int32_t *cb, int32_t *y,
                                     int64_t ldy, const fbx_qg_out *o) {
  for (int h = 0; h < np; h++) {
    int64_t wh = w - h * FBX_QG_NR;
    if (wh <= 0) break;
    __mmask16 mk = wh >= FBX_QG_NR ? (__mmask16)0xffff : (__mmask16)((1u << wh) - 1u);
    __m512i be = _mm512_loadu_si512(beta + h * FBX_QG_NR), cv = _mm512_loadu_si512(cb + h * FBX_QG_NR);
    __m512i a[4];
    int r = 0;
    for (; r + 4 <= mr; r += 4) {
      for (int i = 0; i < 4; i++) a[i] = _mm512_loadu_si512(acc + (r + i) * 32 + h * FBX_QG_NR);
      fbx__qv_store(4, a, be, cv, rs + r, alpha + r, o, r, h, mk, y + r * ldy + h * FBX_QG_NR, ldy);
    }
    for (; r < mr; r++) {
      a[0] = _mm512_loadu_si512(acc + r * 32 + h * FBX_QG_NR);
      fbx__qv_store(1, a, be, cv, rs + r, alpha + r, o, r, h, mk, y + r * ldy + h * FBX_QG_NR, ldy);
    }
  }
}

/* One out-of-line function per block shape (16 small functions behind the switch instead of one
 * that inlines all of them). */
#define FBX__QV_FN(R, NPV)                                                                                  \
  static __attribute__((noinline)) FBX__QV_TGT void fbx__qv_b##R##_##NPV(                                   \
      const uint8_t *a, int64_t kp, const int32_t *rs, const int32_t *alpha, const uint8_t *p0,             \
      const uint8_t *p1, int64_t w, const int32_t *beta, const int32_t *cb, int32_t *y, int64_t ldy,        \
      const fbx_qg_out *o) {                                                                                \
    fbx__qv_block(R, NPV, a, kp, rs, alpha, p0, p1, w, beta, cb, y, ldy, o);                                \
  }
FBX__QV_FN(1, 1) FBX__QV_FN(2, 1) FBX__QV_FN(3, 1) FBX__QV_FN(4, 1)
FBX__QV_FN(5, 1) FBX__QV_FN(6, 1) FBX__QV_FN(7, 1) FBX__QV_FN(8, 1)
FBX__QV_FN(1, 2) FBX__QV_FN(2, 2) FBX__QV_FN(3, 2) FBX__QV_FN(4, 2)
FBX__QV_FN(5, 2) FBX__QV_FN(6, 2) FBX__QV_FN(7, 2) FBX__QV_FN(8, 2)
#undef FBX__QV_FN

FBX__QV_TGT void fbx__qg_kernel_vnni(const void *ap, int64_t M, int64_t kp, const int32_t *rs, const int32_t *alpha,
                                     const void *panels, int64_t width, const int32_t *beta, const int32_t *cb,
                                     int32_t *y, int64_t ldy, const fbx_qg_out *o) {
  int64_t np = (width + FBX_QG_NR - 1) / FBX_QG_NR;
  size_t pb = (size_t)kp * FBX_QG_NR;
  const uint8_t *A = ap, *P = panels;
  for (int64_t m = 0; m < M; m += 8) {
    int mr = M - m < 8 ? (int)(M - m) : 8;
    const uint8_t *a = A + m * kp;
    for (int64_t q = 0; q < np; q += 2) {
      int64_t c0 = q * FBX_QG_NR, w = width - c0;
      const uint8_t *p0 = P + (size_t)q * pb, *p1 = p0 + pb;
      int32_t *yy = y + m * ldy + c0;
      fbx_qg_out ob; /* the epilogue's operands moved to this block */
      const fbx_qg_out *oo = fbx_cpu_qg_out_at(o, o ? m * o->ldt + c0 : 0, c0, &ob);
      if (q + 1 < np) {
        switch (mr) {
#define FBX__QV_CASE(R) \
  case R: fbx__qv_b##R##_2(a, kp, rs + m, alpha + m, p0, p1, w, beta + c0, cb + c0, yy, ldy, oo); break;
          FBX__QV_CASE(1) FBX__QV_CASE(2) FBX__QV_CASE(3) FBX__QV_CASE(4)
          FBX__QV_CASE(5) FBX__QV_CASE(6) FBX__QV_CASE(7) FBX__QV_CASE(8)
#undef FBX__QV_CASE
        }
      } else {
        switch (mr) {
#define FBX__QV_CASE(R) \
  case R: fbx__qv_b##R##_1(a, kp, rs + m, alpha + m, p0, p0, w, beta + c0, cb + c0, yy, ldy, oo); break;
          FBX__QV_CASE(1) FBX__QV_CASE(2) FBX__QV_CASE(3) FBX__QV_CASE(4)
          FBX__QV_CASE(5) FBX__QV_CASE(6) FBX__QV_CASE(7) FBX__QV_CASE(8)
#undef FBX__QV_CASE
        }
      }
    }
  }
}
