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

/* The 4 horizontal sums of a, b, c, d as one xmm [sum a, sum b, sum c, sum d]. */
static inline FBX__T512 __m128 fbx__mnb_hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b)); /* a0+a2 b0+b2 a1+a3 b1+b3 */
  __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  __m512 t = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xee)); /* per 128: a b c d */
  __m256 h = _mm256_add_ps(_mm512_castps512_ps256(t), _mm512_extractf32x8_ps(t, 1));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* acc[4 c + r] = sum_b s_b sa_rb (sum_k q_k qa_rk) - correction, for C columns and
 * R rows (C R <= 8 accumulators), 4-bit 32-chunks in groups of 4 (128 values, 64
 * weight bytes per zmm load): AND / shift give the 4 chunks' low and high nibbles,
 * the row's codes are stored in that order (cpu_mnb.h), vpdpbusd sums 4 adjacent
 * bytes per lane, so lanes 4j..4j+3 hold chunk j; each lane is scaled by its block's
 * weight scale times the row's block scale. The columns of a tile share every load
 * of the rows' codes and lane scales, and one reduction per 4 sums. */
static inline __attribute__((always_inline)) FBX__TVNNI void fbx__mnb_i4g4(const fbx__mnb_state *s, int64_t n,
                                                                           const int C, const fbx__mnb_row *rows,
                                                                           const int R, float *y) {
  const __m512i lo4 = _mm512_set1_epi8(15);
  const int64_t bs = s->bs, groups = (s->kpad + 127) / 128;
  /* lane -> block within the group's scales: bs 32: 4 blocks, 64: 2, >= 128: 1 */
  const __m512i pick = bs == 32   ? _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)
                       : bs == 64 ? _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0)
                                  : _mm512_setzero_si512();
  __m512 facc[4][4];
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < 4; r++) facc[c][r] = _mm512_setzero_ps();
  const uint8_t *w = s->w + n * s->col_bytes;
  if (R == 1) /* the scales and zero points of the tile two ahead (L1) and FBX__MNB_PF_L2 ahead (L2) */
    for (int64_t o = 0; o < C * s->ks * 4; o += 64) {
      _mm_prefetch((const char *)(s->scale + (n + 2 * C) * s->ks) + o, _MM_HINT_T0);
      _mm_prefetch((const char *)(s->scale + (n + FBX__MNB_PF_L2 * C) * s->ks) + o, _MM_HINT_T1);
      if (s->z8) _mm_prefetch((const char *)(s->z8 + (n + 2 * C) * s->kz) + o / 4, _MM_HINT_T0);
      if (s->z8) _mm_prefetch((const char *)(s->z8 + (n + FBX__MNB_PF_L2 * C) * s->kz) + o / 4, _MM_HINT_T1);
    }
  for (int64_t g = 0; g < groups; g++, w += 64) {
    __m512i lo[4], hi[4];
    __m512 swv[4];
    for (int c = 0; c < C; c++) {
      /* decode streams the weights once: fetch the tile FBX__MNB_PF_L2 ahead into L2 and
       * the tile two ahead into L1 (the hardware prefetchers alone do not keep 4 column
       * streams and their scales in flight: without the L2 fetch one core streams ~12
       * GB/s per CPU-second from DRAM, with it ~17-18; bench/RESULTS.md) */
      if (R == 1) {
        _mm_prefetch((const char *)(w + (FBX__MNB_PF_L2 * C + c) * s->col_bytes), _MM_HINT_T1);
        _mm_prefetch((const char *)(w + (2 * C + c) * s->col_bytes), _MM_HINT_T0);
      }
      __m512i v = _mm512_loadu_si512((const void *)(w + c * s->col_bytes));
      lo[c] = _mm512_and_si512(v, lo4), hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
      const float *sc = s->scale + (n + c) * s->ks;
      __m128 sc4 = bs == 32   ? _mm_loadu_ps(sc + 4 * g)
                   : bs == 64 ? _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(sc + 2 * g)))
                              : _mm_set1_ps(sc[(128 * g) / bs]);
      swv[c] = _mm512_permutexvar_ps(pick, _mm512_castps128_ps512(sc4));
    }
    for (int r = 0; r < R; r++) {
      const int8_t *x = rows[r].qa + 128 * g;
      const __m512i x0 = _mm512_loadu_si512((const void *)x), x1 = _mm512_loadu_si512((const void *)(x + 64));
      const __m512 sav = _mm512_loadu_ps(rows[r].sav + 16 * g);
      for (int c = 0; c < C; c++) {
        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[c], x0);
        acc = _mm512_dpbusd_epi32(acc, hi[c], x1);
        facc[c][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(swv[c], sav), facc[c][r]);
      }
    }
  }
  for (int c = 0; c < C; c++)
    for (int r = 0; r < R; r++) facc[c][r] = fbx__mnb_corr512(s, n + c, rows[r].sq, _mm512_sub_ps(_mm512_setzero_ps(), facc[c][r]));
  /* facc now holds -(sum - corr) per lane: reduce 4 at a time and negate */
  const __m128 neg = _mm_set1_ps(-1.0f);
  if (R == 1) {
    float t[4];
    _mm_storeu_ps(t, _mm_mul_ps(neg, fbx__mnb_hsum4(facc[0][0], facc[1][0], facc[2][0], facc[3][0])));
    for (int c = 0; c < C; c++) y[4 * c] = t[c];
  } else {
    for (int c = 0; c < C; c++) {
      float t[4];
      _mm_storeu_ps(t, _mm_mul_ps(neg, fbx__mnb_hsum4(facc[c][0], facc[c][1], facc[c][2], facc[c][3])));
      for (int r = 0; r < R; r++) y[4 * c + r] = t[r];
    }
  }
}

FBX__TVNNI void fbx__mnb_col_i4g4_vnni512(const fbx__mnb_state *s, int64_t n, int C, const fbx__mnb_row *rows,
                                          int R, float *acc) {
  /* C and R constant inside each case: loops unroll, accumulators stay in registers
   * (at most 8 of them: 4 columns x 1-2 rows, 2 columns x 3-4 rows) */
  if (R <= 2 && C == 4) {
    if (R == 2) fbx__mnb_i4g4(s, n, 4, rows, 2, acc);
    else fbx__mnb_i4g4(s, n, 4, rows, 1, acc);
    return;
  }
  for (int c = 0; c < C; c += 2) {
    const int cc = C - c >= 2 ? 2 : 1;
    float *y = acc + 4 * c;
    switch (R * 2 + cc - 1) {
      case 8 + 1: fbx__mnb_i4g4(s, n + c, 2, rows, 4, y); break;
      case 8 + 0: fbx__mnb_i4g4(s, n + c, 1, rows, 4, y); break;
      case 6 + 1: fbx__mnb_i4g4(s, n + c, 2, rows, 3, y); break;
      case 6 + 0: fbx__mnb_i4g4(s, n + c, 1, rows, 3, y); break;
      case 4 + 1: fbx__mnb_i4g4(s, n + c, 2, rows, 2, y); break;
      case 4 + 0: fbx__mnb_i4g4(s, n + c, 1, rows, 2, y); break;
      case 2 + 1: fbx__mnb_i4g4(s, n + c, 2, rows, 1, y); break;
      default: fbx__mnb_i4g4(s, n + c, 1, rows, 1, y); break;
    }
  }
}

/* acc[4 c + r] = sum_b s_b (sum_k q_k a_k) - correction for C columns and R rows,
 * 4-bit 32-chunks: vpmovzxbd widens a chunk's 16 bytes straight from memory; AND
 * gives values 0..15 (low nibbles), a shift values 16..31, each one zmm of floats
 * after the conversion, so a chunk costs 7 vector ops per column and row; the
 * columns of a tile share the rows' loads. */
static inline __attribute__((always_inline)) FBX__T512 void fbx__mnb_f32t(const fbx__mnb_state *s, int64_t n,
                                                                          const int C, const fbx__mnb_row *rows,
                                                                          const int R, float *y) {
  const __m512i lo4 = _mm512_set1_epi32(15);
  const int64_t bs = s->bs;
  __m512 f[4][2];
  for (int c = 0; c < 4; c++) f[c][0] = f[c][1] = _mm512_setzero_ps();
  for (int r = 0; r < R; r++) {
    for (int c = 0; c < 4; c++) f[c][0] = f[c][1] = _mm512_setzero_ps();
    const uint8_t *w = s->w + n * s->col_bytes;
    const float *a = rows[r].a;
    for (int64_t b = 0; b < s->kb; b++, a += bs) {
      __m512 bsum[4];
      for (int c = 0; c < C; c++) bsum[c] = _mm512_setzero_ps();
      for (int64_t k = 0; k < bs; k += 32, w += 16) {
        const __m512 a0 = _mm512_loadu_ps(a + k), a1 = _mm512_loadu_ps(a + k + 16);
        for (int c = 0; c < C; c++) {
          if (R == 1) _mm_prefetch((const char *)(w + (2 * C + c) * s->col_bytes), _MM_HINT_T0);
          __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + c * s->col_bytes)));
          bsum[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, lo4)), a0, bsum[c]);
          bsum[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)), a1, bsum[c]);
        }
      }
      for (int c = 0; c < C; c++) /* even / odd blocks: two FMA chains */
        f[c][b & 1] = _mm512_fmadd_ps(bsum[c], _mm512_set1_ps(s->scale[(n + c) * s->ks + b]), f[c][b & 1]);
    }
    __m512 t[4];
    for (int c = 0; c < 4; c++)
      t[c] = c < C ? fbx__mnb_corr512(s, n + c, rows[r].asum, _mm512_sub_ps(_mm512_setzero_ps(),
                                                                              _mm512_add_ps(f[c][0], f[c][1])))
                   : _mm512_setzero_ps();
    float o[4];
    _mm_storeu_ps(o, _mm_mul_ps(_mm_set1_ps(-1.0f), fbx__mnb_hsum4(t[0], t[1], t[2], t[3])));
    for (int c = 0; c < C; c++) y[4 * c + r] = o[c];
  }
}

FBX__T512 void fbx__mnb_col_f32c32_avx512(const fbx__mnb_state *s, int64_t n, int C, const fbx__mnb_row *rows, int R,
                                          float *acc) {
  switch (C * 8 + (R == 1)) { /* C constant inside: the column loops unroll */
    case 4 * 8 + 1: fbx__mnb_f32t(s, n, 4, rows, 1, acc); break;
    case 4 * 8: fbx__mnb_f32t(s, n, 4, rows, R, acc); break;
    case 3 * 8 + 1: fbx__mnb_f32t(s, n, 3, rows, 1, acc); break;
    case 3 * 8: fbx__mnb_f32t(s, n, 3, rows, R, acc); break;
    case 2 * 8 + 1: fbx__mnb_f32t(s, n, 2, rows, 1, acc); break;
    case 2 * 8: fbx__mnb_f32t(s, n, 2, rows, R, acc); break;
    case 1 * 8 + 1: fbx__mnb_f32t(s, n, 1, rows, 1, acc); break;
    default: fbx__mnb_f32t(s, n, 1, rows, R, acc); break;
  }
}
