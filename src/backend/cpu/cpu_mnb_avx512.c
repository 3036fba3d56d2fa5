/* AVX-512 flavours of the MATMUL_NBITS kernels, chosen at run time:
 *   - the 4-bit int8 pair kernel (cpu_mnb_i4.inc) with VNNI: one vpdpbusd
 *     (256-bit, AVX512VL) per 32 bytes instead of maddubs + madd + add
 *     (only after fbx__mnb_vnni_enabled() said yes);
 *   - the 4-bit float column kernel with 16-float lanes (after
 *     fbx_cpu_avx512_enabled()). */
#include <stdatomic.h>

#include "cpu_gemm_avx512.h"
#include "cpu_mnb.h"

int fbx__mnb_vnni_enabled(void) {
  static _Atomic int state = -1;
  int s = atomic_load_explicit(&state, memory_order_relaxed);
  if (s >= 0) return s;
  __builtin_cpu_init();
  s = fbx_cpu_avx512_enabled() && __builtin_cpu_supports("avx512vnni");
  atomic_store_explicit(&state, s, memory_order_relaxed);
  return s;
}

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#include <immintrin.h>

#include "cpu_simd.h"

#define FBX__MNB_PASTE2(a, b) a##b
#define FBX__MNB_I4_PASTE(a, b) FBX__MNB_PASTE2(a, b)
#define FBX__MNB_I4_COLS fbx__mnb_i4_cols_vnni
#define FBX__MNB_DOT(acc, w, x) ((acc) = _mm256_dpbusd_epi32((acc), (w), (x)))
#include "cpu_mnb_i4.inc"

/* sum_b s_b (sum_k q_k a_k) for one row and column, 4-bit 32-chunks: the two
 * nibble runs of a chunk are 16 consecutive k each, one zmm apiece. */
float fbx__mnb_col_f32_avx512(const fbx__mnb_state *s, const uint8_t *w, const float *sc, const float *a) {
  const __m128i lo4 = _mm_set1_epi8(15);
  __m512 f[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}; /* even / odd blocks: two FMA chains */
  const int64_t bs = s->bs;
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
  return _mm512_reduce_add_ps(_mm512_add_ps(f[0], f[1]));
}
