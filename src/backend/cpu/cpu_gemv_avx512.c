/* AVX-512 packed GEMV (decode's weight stream). The function carries its
 * target attribute (no per-file ISA flags), so this file builds for any
 * x86-64 and the code runs only after fbx_cpu_avx512_enabled() said yes.
 *
 * A 16-column panel is one contiguous run of K lines of 64 bytes; each line
 * is one zmm load and one FMA with x[k] broadcast from memory. Eight
 * accumulators (8 consecutive k) hide the FMA latency; every line is
 * prefetched FBX_CPU_GEMV_PF_LINES ahead (the stream runs on into the next
 * panel, so the prefetch crosses panel edges for free). */
#include <immintrin.h>

#include "cpu_gemv.h"

#define FBX__T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define FBX__PF(p) _mm_prefetch((const char *)(p) + FBX_CPU_GEMV_PF_LINES * 64, _MM_HINT_T0)

FBX__T512 void fbx_cpu_gemv_panels_avx512(const float *x, const float *packed, float *y, int64_t K, int64_t N,
                                          float alpha, int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; p++) {
    const float *bp = packed + p * K * 16; /* (K, 16) */
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8, bp += 128) {
      FBX__PF(bp);
      FBX__PF(bp + 16);
      FBX__PF(bp + 32);
      FBX__PF(bp + 48);
      FBX__PF(bp + 64);
      FBX__PF(bp + 80);
      FBX__PF(bp + 96);
      FBX__PF(bp + 112);
      c0 = _mm512_fmadd_ps(_mm512_load_ps(bp), _mm512_set1_ps(x[k]), c0);
      c1 = _mm512_fmadd_ps(_mm512_load_ps(bp + 16), _mm512_set1_ps(x[k + 1]), c1);
      c2 = _mm512_fmadd_ps(_mm512_load_ps(bp + 32), _mm512_set1_ps(x[k + 2]), c2);
      c3 = _mm512_fmadd_ps(_mm512_load_ps(bp + 48), _mm512_set1_ps(x[k + 3]), c3);
      c4 = _mm512_fmadd_ps(_mm512_load_ps(bp + 64), _mm512_set1_ps(x[k + 4]), c4);
      c5 = _mm512_fmadd_ps(_mm512_load_ps(bp + 80), _mm512_set1_ps(x[k + 5]), c5);
      c6 = _mm512_fmadd_ps(_mm512_load_ps(bp + 96), _mm512_set1_ps(x[k + 6]), c6);
      c7 = _mm512_fmadd_ps(_mm512_load_ps(bp + 112), _mm512_set1_ps(x[k + 7]), c7);
    }
    for (; k < K; k++, bp += 16) c0 = _mm512_fmadd_ps(_mm512_load_ps(bp), _mm512_set1_ps(x[k]), c0);
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    s = _mm512_mul_ps(s, _mm512_set1_ps(alpha));
    int64_t n0 = p * 16, w = N - n0 < 16 ? N - n0 : 16;
    _mm512_mask_storeu_ps(y + n0, (__mmask16)((1u << w) - 1u), s);
  }
}
