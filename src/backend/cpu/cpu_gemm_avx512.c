/* AVX-512F variants of the two register-blocked GEMM micro-kernels on
 * 16-column K-major panels (the layout of fbx_cpu_conv_pack_row and
 * fbx_cpu_gemv_pack, unchanged):
 *   - conv GEMM: Y(M, P) = W(M, K) @ Bpk + bias (fbx_cpu_conv_gemm[_off]),
 *   - small-M GEMM on packed weights: Y(M, N) = alpha * A(M, K) @ Bpk.
 * Tile: up to 12 rows x 32 columns (two adjacent panels) in 24 zmm
 * accumulators, the row operand broadcast straight from its row-major rows
 * (embedded {1to16} broadcast), partial panels by masked loads/stores.
 * The whole file is compiled for AVX-512 (pragma below); its functions are
 * only called after fbx_cpu_avx512_enabled() said yes (CPUID once, env
 * FUSEBOX_AVX512=0 turns it off), so the library still runs on AVX2-only
 * x86-64. */
/* Plain x86-64 code: runs before we know the CPU has AVX-512. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_gemm.h"
#include "cpu_gemm_avx512.h"

int fbx_cpu_avx512_enabled(void) {
  static _Atomic int state = -1; /* -1 unknown, 0 off, 1 on */
  int s = atomic_load_explicit(&state, memory_order_relaxed);
  if (s >= 0) return s;
  __builtin_cpu_init();
  s = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const char *e = getenv("FUSEBOX_AVX512");
  if (e && e[0] == '0') s = 0;
  atomic_store_explicit(&state, s, memory_order_relaxed);
  return s;
}

/* Everything below is compiled for AVX-512. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
#include <immintrin.h>

#define P 16
#define MRMAX 12

static inline __mmask16 fbx__z_mask(int64_t w) {
  if (w <= 0) return 0;
  return w >= P ? (__mmask16)0xFFFF : (__mmask16)((1u << w) - 1u);
}

/* One tile: MR rows of a (row stride lda) x NP (1 or 2) panels.
 * Panel i row k: packed (koff NULL): bq[i] + 16*k; else bq[i] + koff[k].
 * width: columns of the tile still inside the output (>= 1). */
static inline __attribute__((always_inline)) void fbx__z_tile(const int MR, const int NP, const float *a, int64_t lda,
                                                              const float *b0, const float *b1, const int32_t *koff,
                                                              int64_t K, const float *bias, float alpha, float *y,
                                                              int64_t ldy, int64_t width, const float *pf0,
                                                              const float *pf1, int acc) {
  __m512 c0[MRMAX], c1[MRMAX];
  const __mmask16 mk0 = fbx__z_mask(width), mk1 = fbx__z_mask(width - P);
  if (acc) /* Y += (bias ignored): a later K chunk */
    _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {
      c0[r] = _mm512_maskz_loadu_ps(mk0, y + r * ldy);
      if (NP == 2) c1[r] = _mm512_maskz_loadu_ps(mk1, y + r * ldy + P);
    }
  else
    _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {
      c0[r] = bias ? _mm512_set1_ps(bias[r]) : _mm512_setzero_ps();
      if (NP == 2) c1[r] = c0[r];
    }
  if (koff) {
    for (int64_t k = 0; k < K; k++) {
      __m512 v0 = _mm512_maskz_loadu_ps(mk0, b0 + koff[k]);
      __m512 v1 = NP == 2 ? _mm512_maskz_loadu_ps(mk1, b1 + koff[k]) : v0;
      _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {
        __m512 av = _mm512_set1_ps(a[r * lda + k]);
        c0[r] = _mm512_fmadd_ps(av, v0, c0[r]);
        if (NP == 2) c1[r] = _mm512_fmadd_ps(av, v1, c1[r]);
      }
    }
  } else {
    for (int64_t k = 0; k < K; k++) {
      if (pf0) {
        _mm_prefetch((const char *)(pf0 + k * P), _MM_HINT_T0);
        if (NP == 2) _mm_prefetch((const char *)(pf0 + K * P + k * P), _MM_HINT_T0);
      }
      if (pf1) {
        _mm_prefetch((const char *)(pf1 + k * P), _MM_HINT_T1);
        if (NP == 2) _mm_prefetch((const char *)(pf1 + K * P + k * P), _MM_HINT_T1);
      }
      __m512 v0 = _mm512_loadu_ps(b0 + k * P);
      __m512 v1 = NP == 2 ? _mm512_loadu_ps(b1 + k * P) : v0;
      _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {
        __m512 av = _mm512_set1_ps(a[r * lda + k]);
        c0[r] = _mm512_fmadd_ps(av, v0, c0[r]);
        if (NP == 2) c1[r] = _mm512_fmadd_ps(av, v1, c1[r]);
      }
    }
  }
  const __m512 al = _mm512_set1_ps(alpha);
  const int scale = alpha != 1.0f;
  _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {
    float *yr = y + r * ldy;
    __m512 o0 = scale ? _mm512_mul_ps(al, c0[r]) : c0[r];
    if (mk0 == 0xFFFF)
      _mm512_storeu_ps(yr, o0);
    else
      _mm512_mask_storeu_ps(yr, mk0, o0);
    if (NP == 2) {
      __m512 o1 = scale ? _mm512_mul_ps(al, c1[r]) : c1[r];
      if (mk1 == 0xFFFF)
        _mm512_storeu_ps(yr + P, o1);
      else
        _mm512_mask_storeu_ps(yr + P, mk1, o1);
    }
  }
}

#define FBX__Z_CASE(MR)                                                                                   \
  case MR:                                                                                                \
    if (two)                                                                                              \
      fbx__z_tile(MR, 2, a, lda, b0, b1, koff, K, bias, alpha, y, ldy, width, pf0, pf1, acc);             \
    else                                                                                                  \
      fbx__z_tile(MR, 1, a, lda, b0, b1, koff, K, bias, alpha, y, ldy, width, pf0, pf1, acc);             \
    break;

static void fbx__z_tile_any(int mr, int two, const float *a, int64_t lda, const float *b0, const float *b1,
                            const int32_t *koff, int64_t K, const float *bias, float alpha, float *y, int64_t ldy,
                            int64_t width, const float *pf0, const float *pf1, int acc) {
  switch (mr) {
    FBX__Z_CASE(12)
    FBX__Z_CASE(11)
    FBX__Z_CASE(10)
    FBX__Z_CASE(9)
    FBX__Z_CASE(8)
    FBX__Z_CASE(7)
    FBX__Z_CASE(6)
    FBX__Z_CASE(5)
    FBX__Z_CASE(4)
    FBX__Z_CASE(3)
    FBX__Z_CASE(2)
    FBX__Z_CASE(1)
    default: break;
  }
}

/* Rows per block: 12, but a last remainder of 13..23 rows is split evenly
 * (e.g. 16 -> 8 + 8 rather than 12 + 4). */
static inline int fbx__z_rows(int64_t left) {
  if (left <= MRMAX) return (int)left;
  if (left < 2 * MRMAX) return (int)((left + 1) / 2);
  return MRMAX;
}

void fbx_cpu_conv_gemm_avx512(const float *w, int64_t ldw, const float *bias, const float *b, const int32_t *koff,
                              int64_t K, int64_t width, int64_t m0, int64_t m1, float *y, int64_t ldy, int acc) {
  int64_t np = (width + P - 1) / P;
  int64_t qs = koff ? P : K * P; /* B step per 16-column panel */
  for (int64_t m = m0; m < m1;) {
    int mr = fbx__z_rows(m1 - m);
    for (int64_t q = 0; q < np; q += 2) {
      int two = q + 1 < np;
      fbx__z_tile_any(mr, two, w + m * ldw, ldw, b + q * qs, b + (q + 1) * qs, koff, K, bias ? bias + m : NULL,
                      1.0f, y + m * ldy + q * P, ldy, width - q * P, NULL, NULL, acc);
    }
    m += mr;
  }
}

/* Work units [u0, u1) of fbx_cpu_gemm_packed: unit u = (column pair u / ns,
 * row sliver u % ns); sliver s covers rows [s*M/ns, (s+1)*M/ns) (ns =
 * ceil(M/12): every sliver has 12 rows or one less, so no sliver is a short
 * tail). A thread's consecutive units walk the slivers of one pair, so the
 * pair (K*128 bytes) is fetched once and reused from L1/L2; the first sliver
 * of a pair streams it ahead into L1 (pf0), the second pulls the next pair
 * into L2 (pf1) when the range continues there. */
void fbx_cpu_gemm_packed_units_avx512(const float *a, int64_t lda, const float *packed, float *y, int64_t ldy,
                                      int64_t M, int64_t K, int64_t N, float alpha, int64_t ns, int64_t u0,
                                      int64_t u1) {
  int64_t np = (N + P - 1) / P;
  for (int64_t u = u0; u < u1;) {
    int64_t q = u / ns, s0 = u % ns, s1 = s0 + (u1 - u) < ns ? s0 + (u1 - u) : ns;
    int64_t p = 2 * q, n0 = p * P;
    int two = p + 1 < np;
    const float *bp = packed + p * K * P;
    /* the next pair only when this range goes on to it (another thread's pair would be
     * fetched into this core's L2 for nothing) */
    const float *ahead = bp + 64 * P, *next = p + 2 < np && (q + 1) * ns < u1 ? bp + 2 * K * P : NULL;
    for (int64_t s = s0; s < s1; s++) {
      int64_t m0 = s * M / ns, m1 = (s + 1) * M / ns;
      fbx__z_tile_any((int)(m1 - m0), two, a + m0 * lda, lda, bp, bp + K * P, NULL, K, NULL, alpha,
                      y + m0 * ldy + n0, ldy, N - n0, s == s0 ? ahead : NULL, s == s0 + 1 ? next : NULL, 0);
    }
    u += s1 - s0;
  }
}

/* ---- blocked-GEMM micro-kernel (cpu_gemm.h): up to 12 rows x 32 columns
 * in 24 zmm accumulators; A broadcast from its rows (element (r, k) at
 * a[r*lda + k]), B row k of the two 16-column panels at b0/b1 + k*bks
 * (bks 16: packed panels; ldb: B read in place). Partial columns by masked
 * loads (never touching memory past width) and stores. ---- */
static inline __attribute__((always_inline)) void fbx__zk_tile(const int MR, const int NP, const float *a,
                                                               int64_t lda, const float *b0, const float *b1,
                                                               int64_t bks, int64_t kb, float alpha, float beta_c,
                                                               float *c, int64_t ldc, int64_t width) {
  __m512 c0[MRMAX], c1[MRMAX];
  _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) c0[r] = c1[r] = _mm512_setzero_ps();
  const __mmask16 mk0 = fbx__z_mask(width), mk1 = fbx__z_mask(width - P);
  if (mk0 == 0xFFFF && (NP == 1 || mk1 == 0xFFFF)) {
    for (int64_t k = 0; k < kb; k++) {
      __m512 v0 = _mm512_loadu_ps(b0 + k * bks), v1 = NP == 2 ? _mm512_loadu_ps(b1 + k * bks) : v0;
      _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {
        __m512 av = _mm512_set1_ps(a[r * lda + k]);
        c0[r] = _mm512_fmadd_ps(av, v0, c0[r]);
        if (NP == 2) c1[r] = _mm512_fmadd_ps(av, v1, c1[r]);
      }
    }
  } else {
    for (int64_t k = 0; k < kb; k++) {
      __m512 v0 = _mm512_maskz_loadu_ps(mk0, b0 + k * bks);
      __m512 v1 = NP == 2 ? _mm512_maskz_loadu_ps(mk1, b1 + k * bks) : v0;
      _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {
        __m512 av = _mm512_set1_ps(a[r * lda + k]);
        c0[r] = _mm512_fmadd_ps(av, v0, c0[r]);
        if (NP == 2) c1[r] = _mm512_fmadd_ps(av, v1, c1[r]);
      }
    }
  }
  const __m512 al = _mm512_set1_ps(alpha), bc = _mm512_set1_ps(beta_c);
  _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {
    float *cr = c + r * ldc;
    __m512 o0 = _mm512_mul_ps(al, c0[r]);
    if (beta_c != 0.f) o0 = _mm512_fmadd_ps(bc, _mm512_maskz_loadu_ps(mk0, cr), o0);
    _mm512_mask_storeu_ps(cr, mk0, o0);
    if (NP == 2) {
      __m512 o1 = _mm512_mul_ps(al, c1[r]);
      if (beta_c != 0.f) o1 = _mm512_fmadd_ps(bc, _mm512_maskz_loadu_ps(mk1, cr + P), o1);
      _mm512_mask_storeu_ps(cr + P, mk1, o1);
    }
  }
}

#define FBX__ZK_CASE(MR)                                                                 \
  case MR:                                                                               \
    if (width > P)                                                                       \
      fbx__zk_tile(MR, 2, a, lda, b0, b1, bks, kb, alpha, beta_c, c, ldc, width);        \
    else                                                                                 \
      fbx__zk_tile(MR, 1, a, lda, b0, b0, bks, kb, alpha, beta_c, c, ldc, width);        \
    break;

void fbx_cpu_gemm_ukr_avx512(const float *a, int64_t lda, const float *b0, const float *b1, int64_t bks,
                             int64_t kb, float alpha, float beta_c, float *c, int64_t ldc, int mr, int64_t width) {
  switch (mr) {
    FBX__ZK_CASE(12)
    FBX__ZK_CASE(11)
    FBX__ZK_CASE(10)
    FBX__ZK_CASE(9)
    FBX__ZK_CASE(8)
    FBX__ZK_CASE(7)
    FBX__ZK_CASE(6)
    FBX__ZK_CASE(5)
    FBX__ZK_CASE(4)
    FBX__ZK_CASE(3)
    FBX__ZK_CASE(2)
    FBX__ZK_CASE(1)
    default: break;
  }
}

/* ---- k-major micro-kernel of the prepacked-B GEMM (cpu_gemm_packed.c, cpu_gemm.h):
 * up to 12 rows x 32 columns in 24 zmm accumulators; A element (r, k) at
 * a[k*MR + r] (a packed sliver: MR consecutive floats per k), B row k of the
 * two panels at b + k*16 and b + pstep + k*16 (always 16 floats: packed panels
 * are zero padded); C stored under the width mask. The first npf k steps also
 * prefetch (T1) one line of each panel of the next micro-panel. ---- */
static inline __attribute__((always_inline)) void fbx__zp_tile(const int MR, const int NP, const float *a,
                                                               const float *b, int64_t pstep, int64_t kb,
                                                               float alpha, float beta_c, float *c, int64_t ldc,
                                                               int64_t width, const float *pf, int64_t npf) {
  __m512 c0[MRMAX], c1[MRMAX];
  const __mmask16 mk0 = fbx__z_mask(width), mk1 = fbx__z_mask(width - P);
  /* a later K block at alpha 1: the accumulators start from C (no epilogue arithmetic) */
  const int from_c = beta_c == 1.f && alpha == 1.f;
  if (from_c)
    _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {
      c0[r] = _mm512_maskz_loadu_ps(mk0, c + r * ldc);
      if (NP == 2) c1[r] = _mm512_maskz_loadu_ps(mk1, c + r * ldc + P);
    }
  else
    _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) c0[r] = c1[r] = _mm512_setzero_ps();
  const float *b1 = b + pstep;
  int64_t k = 0;
#define FBX__ZP_STEP                                                               \
  {                                                                                \
    __m512 v0 = _mm512_loadu_ps(b + k * P), v1 = NP == 2 ? _mm512_loadu_ps(b1 + k * P) : v0; \
    _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {                        \
      __m512 av = _mm512_set1_ps(a[k * MR + r]);                                   \
      c0[r] = _mm512_fmadd_ps(av, v0, c0[r]);                                      \
      if (NP == 2) c1[r] = _mm512_fmadd_ps(av, v1, c1[r]);                         \
    }                                                                              \
  }
  if (npf > kb) npf = kb; /* the next block may be longer than this one */
  for (; k < npf; k++) {
    _mm_prefetch((const char *)(pf + k * P), _MM_HINT_T1);
    if (NP == 2) _mm_prefetch((const char *)(pf + pstep + k * P), _MM_HINT_T1);
    FBX__ZP_STEP
  }
  for (; k < kb; k++) FBX__ZP_STEP
#undef FBX__ZP_STEP
  const __m512 al = _mm512_set1_ps(alpha), bc = _mm512_set1_ps(beta_c);
  const int scale = alpha != 1.f;
  _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {
    float *cr = c + r * ldc;
    __m512 o0 = c0[r], o1 = c1[r];
    if (!from_c) {
      if (scale) o0 = _mm512_mul_ps(al, o0);
      if (beta_c != 0.f) o0 = _mm512_fmadd_ps(bc, _mm512_maskz_loadu_ps(mk0, cr), o0);
      if (NP == 2) {
        if (scale) o1 = _mm512_mul_ps(al, o1);
        if (beta_c != 0.f) o1 = _mm512_fmadd_ps(bc, _mm512_maskz_loadu_ps(mk1, cr + P), o1);
      }
    }
    _mm512_mask_storeu_ps(cr, mk0, o0);
    if (NP == 2) _mm512_mask_storeu_ps(cr + P, mk1, o1);
  }
}

#define FBX__ZP_CASE(MR)                                                                  \
  case MR:                                                                                \
    if (width > P)                                                                        \
      fbx__zp_tile(MR, 2, a, b, pstep, kb, alpha, beta_c, c, ldc, width, pf, npf);        \
    else                                                                                  \
      fbx__zp_tile(MR, 1, a, b, pstep, kb, alpha, beta_c, c, ldc, width, pf, npf);        \
    break;

void fbx_cpu_gemm_kukr_avx512(const float *a, const float *b, int64_t pstep, int64_t kb, float alpha, float beta_c,
                              float *c, int64_t ldc, int mr, int64_t width, const float *pf, int64_t npf) {
  switch (mr) {
    FBX__ZP_CASE(12)
    FBX__ZP_CASE(11)
    FBX__ZP_CASE(10)
    FBX__ZP_CASE(9)
    FBX__ZP_CASE(8)
    FBX__ZP_CASE(7)
    FBX__ZP_CASE(6)
    FBX__ZP_CASE(5)
    FBX__ZP_CASE(4)
    FBX__ZP_CASE(3)
    FBX__ZP_CASE(2)
    FBX__ZP_CASE(1)
    default: break;
  }
}
