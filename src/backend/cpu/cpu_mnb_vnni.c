/* The MATMUL_NBITS 4-bit int8 pair kernel (cpu_mnb_i4.inc) with AVX-512 VNNI:
 * one vpdpbusd (256-bit, AVX512VL) per 32 bytes instead of maddubs + madd + add.
 * Called only after fbx__mnb_vnni_enabled() said yes. */
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
