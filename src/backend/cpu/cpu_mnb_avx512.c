/* AVX-512 column kernels of MATMUL_NBITS, chosen at run time (fbx__mnb_isa_now):
 *   - the 4-bit int8 group kernel with VNNI: 4 chunks per zmm, one vpdpbusd
 *     per 64 bytes of codes;
 *   - the 4-bit float column kernel with 16-float lanes.
 * Every function that uses AVX-512 carries its target attribute (no file-wide
 * pragma, no per-file ISA flags), so any compiler builds this file for any
 * x86-64 and the code runs only after the CPUID checks said yes. */
#include <stdatomic.h>

#include <immintrin.h>

#include "cpu_gemm_avx512.h"
#include "cpu_mnb.h"

int fbx__mnb_vnni512_present(void) {
  static _Atomic int state = -1;
  int s = atomic_load_explicit(&state, memory_order_relaxed);
  if (s >= 0) return s;
  __builtin_cpu_init();
  s = fbx_cpu_avx512_enabled() && __builtin_cpu_supports("avx512vnni");
  atomic_store_explicit(&state, s, memory_order_relaxed);
  return s;
}

#define FBX__T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define FBX__TVNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

/* Adds sum_b<kb (s_b z_b) x_b for column n to acc's lanes (x padded with zeros to
 * a multiple of 16, as is z8; scales and sz are masked: the next column's follow). */
static inline FBX__T512 __m512 fbx__mnb_corr512(const fbx__mnb_state *s, int64_t n, const float *x, __m512 acc) {
  const float *sc = s->scale + n * s->ks;
  for (int64_t b = 0; b < s->kb; b += 16) {
    __mmask16 m = s->kb - b >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (s->kb - b)) - 1);
    __m512 szv = s->sz ? _mm512_maskz_loadu_ps(m, s->sz + n * s->ks + b)
                       : _mm512_mul_ps(_mm512_maskz_loadu_ps(m, sc + b),
                                       _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                           _mm_loadu_si128((const __m128i *)(s->z8 + n * s->kz + b)))));
    acc = _mm512_fmadd_ps(szv, _mm512_loadu_ps(x + b), acc);
  }
  return acc;
}

/* y[r] = sum_b s_b sa_rb (sum_k q_k qa_rk) - correction, for R rows of one column,
 * 4-bit 32-chunks in groups of 4 (128 values, 64 weight bytes per zmm load): AND /
 * shift give the 4 chunks' low and high nibbles, the row's codes are stored in
 * that order (cpu_mnb.h), vpdpbusd sums 4 adjacent bytes per lane, so lanes
 * 4j..4j+3 hold chunk j; each lane is scaled by its block's weight scale times
 * the row's block scale. Two accumulators per row break the FMA chain. */
static inline __attribute__((always_inline)) FBX__TVNNI void fbx__mnb_i4g4(const fbx__mnb_state *s, int64_t n,
                                                                           const fbx__mnb_row *rows, const int R,
                                                                           float *y) {
  const uint8_t *w = s->w + n * s->col_bytes;
  const float *sc = s->scale + n * s->ks;
  const __m512i lo4 = _mm512_set1_epi8(15);
  const int64_t bs = s->bs, groups = (s->kpad + 127) / 128;
  /* lane -> block within the group's scales: bs 32: 4 blocks, 64: 2, >= 128: 1 */
  const __m512i pick = bs == 32   ? _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)
                       : bs == 64 ? _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0)
                                  : _mm512_setzero_si512();
  __m512 facc[2][4];
  for (int r = 0; r < 4; r++) facc[0][r] = facc[1][r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; g++, w += 64) {
    __m512i v = _mm512_loadu_si512((const void *)w);
    __m512i lo = _mm512_and_si512(v, lo4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
    __m128 sc4 = bs == 32   ? _mm_loadu_ps(sc + 4 * g)
                 : bs == 64 ? _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(sc + 2 * g)))
                            : _mm_set1_ps(sc[(128 * g) / bs]);
    __m512 swv = _mm512_permutexvar_ps(pick, _mm512_castps128_ps512(sc4));
    for (int r = 0; r < R; r++) {
      const int8_t *x = rows[r].qa + 128 * g;
      __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512((const void *)x));
      acc = _mm512_dpbusd_epi32(acc, hi, _mm512_loadu_si512((const void *)(x + 64)));
      __m512 lane_scale = _mm512_mul_ps(swv, _mm512_loadu_ps(rows[r].sav + 16 * g));
      facc[g & 1][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), lane_scale, facc[g & 1][r]);
    }
  }
  for (int r = 0; r < R; r++) {
    __m512 corr = fbx__mnb_corr512(s, n, rows[r].sq, _mm512_setzero_ps());
    y[r] = _mm512_reduce_add_ps(_mm512_sub_ps(_mm512_add_ps(facc[0][r], facc[1][r]), corr));
  }
}

FBX__TVNNI void fbx__mnb_col_i4g4_vnni512(const fbx__mnb_state *s, int64_t n, const fbx__mnb_row *rows, int R,
                                          float *acc) {
  switch (R) { /* R constant inside: the row loop unrolls and the accumulators stay in registers */
    case 4: fbx__mnb_i4g4(s, n, rows, 4, acc); break;
    case 3: fbx__mnb_i4g4(s, n, rows, 3, acc); break;
    case 2: fbx__mnb_i4g4(s, n, rows, 2, acc); break;
    default: fbx__mnb_i4g4(s, n, rows, 1, acc); break;
  }
}

/* sum_b s_b (sum_k q_k a_k) - correction for R rows of one column, 4-bit
 * 32-chunks: the two nibble runs of a chunk are 16 consecutive k each, one zmm
 * apiece. */
FBX__T512 void fbx__mnb_col_f32c32_avx512(const fbx__mnb_state *s, int64_t n, const fbx__mnb_row *rows, int R,
                                          float *acc) {
  const __m128i lo4 = _mm_set1_epi8(15);
  const float *sc = s->scale + n * s->ks;
  const int64_t bs = s->bs;
  for (int r = 0; r < R; r++) {
    const uint8_t *w = s->w + n * s->col_bytes;
    const float *a = rows[r].a;
    __m512 f[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}; /* even / odd blocks: two FMA chains */
    for (int64_t b = 0; b < s->kb; b++, a += bs) {
      __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
      for (int64_t k = 0; k < bs; k += 32, w += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)w);
        __m128i lo = _mm_and_si128(v, lo4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), lo4);
        b0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo)), _mm512_loadu_ps(a + k), b0);
        b1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi)), _mm512_loadu_ps(a + k + 16), b1);
      }
      f[b & 1] = _mm512_fmadd_ps(_mm512_add_ps(b0, b1), _mm512_set1_ps(sc[b]), f[b & 1]);
    }
    __m512 corr = fbx__mnb_corr512(s, n, rows[r].asum, _mm512_setzero_ps());
    acc[r] = _mm512_reduce_add_ps(_mm512_sub_ps(_mm512_add_ps(f[0], f[1]), corr));
  }
}
