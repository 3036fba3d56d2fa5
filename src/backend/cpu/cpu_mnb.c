/* MATMUL_NBITS: Y(M, N) = A(M, K) @ W^T (+ bias), W(N, K) stored as 4- or 8-bit
 * blocks (ORT's MatMulNBits): column n, block b (block_size values of k) holds
 * q in [0, 2^bits) with scale s[n, b] and zero point z[n, b]; w = (q - z) * s.
 *
 * Weights are repacked once at compile (node_prepare, layout in cpu_mnb.h) and
 * dequantised in registers; nothing is expanded to float in memory on the decode
 * path. Every kernel computes sum_b s_b (sum_k q_k x_k) - sum_b s_b z_b xsum_b,
 * the second term one short dot over the blocks per row and column:
 * accuracy_level 0..3: x = a (float FMAs on the converted nibbles).
 * accuracy_level 4: as ORT does on the CPU, A is quantised per block to int8
 *   (scale_a = max|a| / 127, codes rounded to nearest even of a * 127/max|a|),
 *   x = qa * scale_a: each block's sum_k q_k qa_k is an exact integer, scaled by
 *   s_b * scale_a,b. Up to 4 rows of A share every unpacked weight chunk.
 * Columns are split over the pool (every thread streams its own range of N), in
 * tiles of up to 4 columns per kernel call. Prefill (M >= 8): at accuracy_level 0
 * a float GEMM whose micro-kernel reads slivers of W dequantised in k order
 * (cpu_mnb_prefill.c); at level 4 with 4-bit integer zero points, an int8 GEMM on panels
 * (cpu_mnb_gemm512.c with VNNI, cpu_mnb_gemm_avx2.c without).
 * The kernels are chosen per call from fbx__mnb_isa_now(): portable C here, AVX2
 * (cpu_mnb_avx2.c), AVX-512 / VNNI (cpu_mnb_avx512.c, cpu_mnb_gemm512.c); the level-0
 * prefill GEMM (cpu_mnb_prefill.c). */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include <immintrin.h>

#include "cpu_gemm_avx512.h"
#include "cpu_internal.h"
#include "cpu_mnb.h"
#include "cpu_simd.h"

/* ------------------------------------------------------------------ ISA -- */

static _Atomic int g_mnb_cap = FBX__MNB_VNNI512;

int fbx_cpu_mnb_isa_cap(int isa) {
  return atomic_exchange_explicit(&g_mnb_cap, isa, memory_order_relaxed);
}

fbx__mnb_isa fbx__mnb_isa_now(void) {
  /* the library is built with -mavx2 -mfma: AVX2 is the floor of the SIMD paths */
  fbx__mnb_isa have = fbx__mnb_vnni512_present() ? FBX__MNB_VNNI512
                      : fbx_cpu_avx512_enabled() ? FBX__MNB_AVX512
                                                 : FBX__MNB_AVX2;
  int cap = atomic_load_explicit(&g_mnb_cap, memory_order_relaxed);
  return (int)have < cap ? have : (fbx__mnb_isa)cap;
}

/* ------------------------------------------------------------- prepare -- */

/* q value k of column n's ORT blob (bits 4: low nibble first). */
static inline unsigned fbx__mnb_q(const uint8_t *col, int bits, int64_t k) {
  if (bits == 8) return col[k];
  uint8_t byte = col[k >> 1];
  return (k & 1) ? byte >> 4 : byte & 15u;
}

fbx_status *fbx_cpu_mnb_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                const fbx_tensor *inputs, void **state) {
  (void)c, (void)inputs;
  *state = NULL;
  const fbx_ir_params *p = &node->params;
  if (!const_inputs || !const_inputs[1] || !const_inputs[2]) return NULL; /* run_node reports it */
  const fbx_tensor *B = const_inputs[1], *S = const_inputs[2];
  const fbx_tensor *Z = node->n_inputs > 3 ? const_inputs[3] : NULL;
  if (node->n_inputs > 3 && node->inputs[3] != FBX_IR_NONE && !Z) return NULL;
  int64_t K = p->nbits.K, N = p->nbits.N, bs = p->nbits.block_size, kb = (K + bs - 1) / bs;
  int bits = p->nbits.bits;
  int64_t blob = bs * bits / 8;
  if (B->dtype != FBX_DTYPE_U8 || fbx_cpu_numel(B) != N * kb * blob || S->dtype != FBX_DTYPE_F32 ||
      fbx_cpu_numel(S) != N * kb)
    return FBX_ERR_ARG("MATMUL_NBITS: B (%lld bytes) / scales (%lld) do not match N=%lld K=%lld block_size=%lld",
                       (long long)fbx_cpu_numel(B), (long long)fbx_cpu_numel(S), (long long)N, (long long)K,
                       (long long)bs);
  int64_t zrow = p->nbits.zp_u8 ? (kb * bits + 7) / 8 : kb;
  if (Z && (fbx_cpu_numel(Z) != N * zrow || Z->dtype != (p->nbits.zp_u8 ? FBX_DTYPE_U8 : FBX_DTYPE_F32)))
    return FBX_ERR_ARG("MATMUL_NBITS: zero_points have %lld elements, want %lld", (long long)fbx_cpu_numel(Z),
                       (long long)(N * zrow));
  const int float_zp = Z && !p->nbits.zp_u8;
  fbx__mnb_state *s = fbx_calloc(1, sizeof *s);
  if (!s) return FBX_ERR_OOM();
  *s = (fbx__mnb_state){.K = K, .N = N, .kb = kb, .bs = bs, .kpad = kb * bs, .ks = (kb + 3) & ~(int64_t)3,
                        .kz = (kb + 15) & ~(int64_t)15, .bits = bits, .ch = bs < 32 ? (int)bs : 32,
                        .col_bytes = blob * kb};
  /* one buffer (w | scale | sz or z8, each 64-byte aligned, slack zeroed) on huge pages: a
   * decode step streams all of it once, and 4 KiB pages would cost a TLB miss per 4 KiB */
  const size_t w_bytes = ((size_t)(N * s->col_bytes) + 64 + 63) & ~(size_t)63;
  const size_t sc_bytes = ((size_t)(N * s->ks + 16) * sizeof(float) + 63) & ~(size_t)63;
  const size_t zp_bytes = float_zp ? sc_bytes : ((size_t)(N * s->kz + 64) + 63) & ~(size_t)63;
  s->w = fbx_malloc_huge_exact(w_bytes + sc_bytes + zp_bytes);
  if (!s->w) {
    fbx_cpu_mnb_release(s);
    return FBX_ERR_OOM();
  }
  memset(s->w + N * s->col_bytes, 0, w_bytes + sc_bytes + zp_bytes - (size_t)(N * s->col_bytes));
  s->scale = (float *)(s->w + w_bytes);
  if (float_zp) s->sz = (float *)(s->w + w_bytes + sc_bytes);
  else s->z8 = s->w + w_bytes + sc_bytes;
  const uint8_t *bsrc = B->data;
  const int ch = s->ch, half = ch / 2;
  for (int64_t n = 0; n < N; n++) {
    const uint8_t *col = bsrc + n * s->col_bytes;
    uint8_t *dst = s->w + n * s->col_bytes;
    if (bits == 8) memcpy(dst, col, (size_t)s->col_bytes);
    else
      for (int64_t k0 = 0; k0 < s->kpad; k0 += ch, dst += half)
        for (int i = 0; i < half; i++)
          dst[i] = (uint8_t)(fbx__mnb_q(col, 4, k0 + i) | fbx__mnb_q(col, 4, k0 + half + i) << 4);
    for (int64_t b = 0; b < kb; b++) {
      float sc = ((const float *)S->data)[n * kb + b];
      s->scale[n * s->ks + b] = sc;
      if (float_zp) s->sz[n * s->ks + b] = sc * ((const float *)Z->data)[n * kb + b];
      else s->z8[n * s->kz + b] = (uint8_t)(Z ? fbx__mnb_q((const uint8_t *)Z->data + n * zrow, bits, b)
                                              : 1u << (bits - 1));
    }
  }
  *state = s;
  return NULL;
}

void fbx_cpu_mnb_release(void *state) {
  fbx__mnb_state *s = state;
  if (!s) return;
  fbx_free_aligned(s->w); /* scale, sz and z8 live in the same buffer */
  fbx_free(s);
}

/* ---------------------------------------------------- portable kernels -- */

float fbx__mnb_corr_portable(const fbx__mnb_state *s, int64_t n, const float *x) {
  const float *sc = s->scale + n * s->ks;
  float t = 0;
  if (s->sz)
    for (int64_t b = 0; b < s->kb; b++) t += s->sz[n * s->ks + b] * x[b];
  else
    for (int64_t b = 0; b < s->kb; b++) t += sc[b] * (float)s->z8[n * s->kz + b] * x[b];
  return t;
}

/* Both paths, one column: the int8 path (rows carry codes) sums exact int32 block
 * dots scaled by sa_b s_b; the float path float block dots scaled by s_b. */
static void fbx__mnb_col_portable_1(const fbx__mnb_state *s, int64_t n, const fbx__mnb_row *rows, int R, float *acc) {
  const uint8_t *col = s->w + n * s->col_bytes;
  const float *sc = s->scale + n * s->ks;
  const int64_t blk = s->bs * s->bits / 8;
  for (int r = 0; r < R; r++) {
    const fbx__mnb_row *x = &rows[r];
    float t = 0;
    for (int64_t b = 0; b < s->kb; b++) {
      const uint8_t *w = col + b * blk;
      if (x->qa) {
        int32_t d = 0; /* exact: |d| <= 128 * 255 * 127 */
        for (int64_t k = 0; k < s->bs; k++) d += (int32_t)fbx__mnb_val(s, w, k) * x->qa[b * s->bs + k];
        t += (float)d * (x->sa[b] * sc[b]);
      } else {
        float bt = 0;
        for (int64_t k = 0; k < s->bs; k++) bt += (float)fbx__mnb_val(s, w, k) * x->a[b * s->bs + k];
        t += sc[b] * bt;
      }
    }
    acc[r] = t - fbx__mnb_corr_portable(s, n, x->qa ? x->sq : x->asum);
  }
}

void fbx__mnb_col_portable(const fbx__mnb_state *s, int64_t n, int C, const fbx__mnb_row *rows, int R, float *acc) {
  for (int c = 0; c < C; c++) fbx__mnb_col_portable_1(s, n + c, rows, R, acc + 4 * c);
}

/* ------------------------------------------------------------ the driver -- */

typedef struct fbx__mnb_job {
  const fbx__mnb_state *s;
  const fbx__mnb_row *rows;
  int64_t M;
  const float *bias;
  float *y; /* (M, N) */
  fbx__mnb_col_fn col;
} fbx__mnb_job;

/* Columns [n0, n1) in tiles of up to 4, all rows, 4 rows per kernel call (a tile's
 * columns and rows share the kernel's loads and unpacked weights). */
static void fbx__mnb_cols(void *arg, int64_t n0, int64_t n1, int worker) {
  (void)worker;
  const fbx__mnb_job *j = arg;
  const int64_t N = j->s->N;
  for (int64_t n = n0; n < n1; n += 4) {
    const int C = n1 - n < 4 ? (int)(n1 - n) : 4;
    for (int64_t m = 0; m < j->M; m += 4) {
      float acc[16];
      const int R = j->M - m < 4 ? (int)(j->M - m) : 4;
      j->col(j->s, n, C, j->rows + m, R, acc);
      for (int c = 0; c < C; c++) {
        const float bias = j->bias ? j->bias[n + c] : 0.0f;
        for (int r = 0; r < R; r++) j->y[(m + r) * N + n + c] = acc[4 * c + r] + bias;
      }
    }
  }
}

/* max |x[0..n)|, NaNs ignored (as fmaxf does: vmaxps returns its second operand when
 * either is NaN). */
static inline float fbx__mnb_absmax(const float *x, int64_t n) {
  const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m0 = _mm256_setzero_ps(), m1 = m0;
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    m0 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + k), abs), m0);
    m1 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + k + 8), abs), m1);
  }
  float t[8], r = 0;
  _mm256_storeu_ps(t, _mm256_max_ps(m0, m1));
  for (int i = 0; i < 8; i++) r = t[i] > r ? t[i] : r;
  for (; k < n; k++) {
    const float v = fabsf(x[k]);
    r = v > r ? v : r;
  }
  return r;
}

/* dst[0..16) = clamp(rne(x[u] * inv), -127, 127) as int8; returns their sum. */
static inline int32_t fbx__mnb_quant16(const float *x, __m256 vinv, int8_t *dst) {
  const __m256i hi = _mm256_set1_epi32(127), lo = _mm256_set1_epi32(-127);
  __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), vinv));
  __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), vinv));
  q0 = _mm256_max_epi32(_mm256_min_epi32(q0, hi), lo);
  q1 = _mm256_max_epi32(_mm256_min_epi32(q1, hi), lo);
  /* packs works per 128-bit lane: q0 0-3, q1 0-3, q0 4-7, q1 4-7; the permute restores k order */
  __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8);
  _mm_storeu_si128((__m128i *)dst, _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1)));
  __m256i sv = _mm256_add_epi32(q0, q1);
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sv), _mm256_extracti128_si256(sv, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
  return _mm_cvtsi128_si32(s4);
}

/* Prepare a row of A into scratch: float copy padded to kpad and block sums, or
 * int8 codes per block (ORT's CPU quantiser: scale max|a|/127, codes rne(a * 127/max|a|)).
 * f1 / f2 have kb16 = kb rounded up to 16 entries (the tail zeroed). */
static void fbx__mnb_row_prep(const fbx__mnb_state *s, const float *a, int int8, int J, fbx__mnb_row *r,
                              float *af, float *f1, int8_t *qa, float *f2, float *sav) {
  const int64_t K = s->K, bs = s->bs, V = 32 * (int64_t)J, groups = J ? (s->kpad + V - 1) / V : 0;
  const int64_t kb16 = (s->kb + 15) & ~(int64_t)15;
  if (int8 && J) memset(qa + (groups - 1) * V, 0, (size_t)V); /* the last group may be part padding */
  for (int64_t b = s->kb; b < kb16; b++) f1[b] = 0.0f;
  if (int8)
    for (int64_t b = s->kb; b < kb16; b++) f2[b] = 0.0f;
  for (int64_t b = 0; b < s->kb; b++) {
    int64_t k0 = b * bs, k1 = k0 + bs < K ? k0 + bs : K;
    if (!int8) {
      float t = 0;
      for (int64_t k = k0; k < k0 + bs; k++) t += af[k] = k < k1 ? a[k] : 0.0f;
      f1[b] = t;
      continue;
    }
    const float amax = fbx__mnb_absmax(a + k0, k1 - k0);
    float scale = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    int32_t t = 0;
    /* runs of 16 values: in k order, or (group order, cpu_mnb.h) the low / high half of
     * a 32-chunk j of its group at 16 j / 16 J + 16 j (J > 0 means bs >= 32: whole chunks) */
    for (int64_t k = k0; k < k0 + bs; k += 16) {
      int64_t pos = k;
      if (J) {
        int64_t g = k / V, j = (k % V) / 32;
        pos = g * V + 16 * j + ((k & 31) ? 16 * J : 0);
      }
      if (k + 16 <= k1) { /* the same codes 16 at a time: vcvtps2dq rounds to nearest even, as nearbyintf */
        t += fbx__mnb_quant16(a + k, vinv, qa + pos);
        continue;
      }
      for (int u = 0; u < 16; u++) {
        int q = k + u < k1 ? (int)nearbyintf(a[k + u] * inv) : 0;
        q = q > 127 ? 127 : q < -127 ? -127 : q;
        qa[pos + u] = (int8_t)q;
        t += q;
      }
    }
    f1[b] = scale;
    f2[b] = scale * (float)t;
  }
  if (int8 && J) { /* lane scales: lanes 4j..4j+3 of a group sum chunk j (a padding chunk's are zero) */
    const int64_t chunks = groups * J, cpb = bs / 32; /* chunks per block (J > 0: bs >= 32) */
    for (int64_t ci = 0; ci < chunks; ci++) {
      const int64_t b = ci / cpb;
      const float v = b < s->kb ? f1[b] : 0.0f;
      for (int l = 0; l < 4; l++) sav[4 * ci + l] = v;
    }
    r->sav = sav;
  }
  if (int8) r->qa = qa, r->sa = f1, r->sq = f2;
  else r->a = af, r->asum = f1;
}

/* ------------------------------------------------- prefill: panels + GEMM -- */

/* Below FBX__MNB_GEMM_M rows the register-dequantising kernels win: the prefill paths
 * (cpu_mnb_prefill.c, cpu_mnb_gemm512.c) pay the dequantisation once per column for
 * all rows. */
#define FBX__MNB_GEMM_M 8

static void fbx__mnb_i8gemm_task_vnni(void *arg, int64_t p0, int64_t p1, int worker) {
  fbx__mnb_i8gemm_vnni512(arg, p0, p1, worker);
}
static void fbx__mnb_i8gemm_task_avx2(void *arg, int64_t p0, int64_t p1, int worker) {
  fbx__mnb_i8gemm_avx2(arg, p0, p1, worker);
}

/* Rows [m0, m1) of A quantised for the int8 GEMM: ORT's quantiser (fbx__mnb_row_prep) into
 * the worker's codes, then the u8 offset into au (M, kpad), block scales into sa (M, kb16). */
typedef struct fbx__mnb_quant_job {
  const fbx__mnb_state *s;
  const float *A; /* (M, K) */
  uint8_t *au;
  float *sa;
  int64_t kb16;
  unsigned char *tmp; /* per worker: codes (kpad, rounded to 64) + block sums (kb16) */
  size_t tmp_bytes;
} fbx__mnb_quant_job;

static void fbx__mnb_quant_rows(void *arg, int64_t m0, int64_t m1, int worker) {
  const fbx__mnb_quant_job *j = arg;
  const fbx__mnb_state *s = j->s;
  const int64_t kpad = s->kpad;
  int8_t *qa = (int8_t *)(j->tmp + (size_t)worker * j->tmp_bytes);
  float *f2 = (float *)((unsigned char *)qa + (((size_t)kpad + 63) & ~(size_t)63));
  for (int64_t m = m0; m < m1; m++) {
    fbx__mnb_row r;
    fbx__mnb_row_prep(s, j->A + m * s->K, 1, 0, &r, NULL, j->sa + m * j->kb16, qa, f2, NULL);
    uint8_t *dst = j->au + m * kpad;
    for (int64_t k = 0; k < kpad; k++) dst[k] = k < s->K ? (uint8_t)(qa[k] + 128) : 0;
  }
}

/* accuracy_level 4, M >= 8, 4-bit integer zero points, AVX2 or VNNI: the rows quantised
 * as everywhere (k order; over the pool), offset to u8 (cpu_mnb_gemm512.c), then panels of
 * 32 columns over the pool. Scratch: au (M, kpad), sa (M, kb16), per thread one row's codes
 * + sums and one panel. */
static fbx_status *fbx__mnb_prefill_i8(fbx_cpu_ctx *c, const fbx__mnb_state *s, const float *A, int64_t M,
                                       const float *bias, float *y, fbx__mnb_isa isa, fbx_kernel_info *info) {
  const int64_t kpad = s->kpad, kb16 = (s->kb + 15) & ~(int64_t)15;
  const int threads = c->threads > 0 ? c->threads : 1;
  const size_t au_bytes = ((size_t)(M * kpad) + 63) & ~(size_t)63;
  const size_t sa_bytes = ((size_t)(M * kb16) * 4 + 63) & ~(size_t)63;
  const size_t row_bytes = ((((size_t)kpad + 63) & ~(size_t)63) + (size_t)kb16 * 4 + 63) & ~(size_t)63;
  const size_t ws_bytes = (fbx__mnb_i8gemm_panel_bytes(s) + 63) & ~(size_t)63;
  const size_t ws_at = au_bytes + sa_bytes + (size_t)threads * row_bytes;
  unsigned char *mem = fbx_cpu_scratch(c, ws_at + (size_t)threads * ws_bytes);
  if (!mem) return FBX_ERR_OOM();
  uint8_t *au = mem;
  float *sa = (float *)(mem + au_bytes);
  fbx__mnb_quant_job qj = {.s = s, .A = A, .au = au, .sa = sa, .kb16 = kb16, .tmp = mem + au_bytes + sa_bytes,
                           .tmp_bytes = row_bytes};
  fbx_cpu_par(c, M, 8, fbx__mnb_quant_rows, &qj);
  fbx__mnb_i8gemm g = {.s = s, .au = au, .sa = sa, .M = M, .ldsa = kb16, .bias = bias, .y = y,
                       .ws = mem + ws_at, .ws_bytes = ws_bytes};
  const int vnni = isa >= FBX__MNB_VNNI512;
  info->variant = vnni ? "mnb_int4_int8_gemm_vnni512" : "mnb_int4_int8_gemm_avx2";
  info->reason = "accuracy_level 4, M >= 8: A quantised to int8 per block, int8 GEMM on panels of 32 columns";
  fbx_cpu_par(c, (s->N + 31) / 32, 1, vnni ? fbx__mnb_i8gemm_task_vnni : fbx__mnb_i8gemm_task_avx2, &g);
  return NULL;
}

/* ------------------------------------------------------------ the kernel -- */

/* Y (M, s->N) = A @ W^T (+ bias): every path of the kernel. */
static fbx_status *fbx__mnb_run(fbx_cpu_ctx *c, const fbx__mnb_state *s, const fbx_ir_node *node, const float *Adata,
                                int64_t M, const float *bias, float *Y, fbx_kernel_info *info) {
  const int int8 = node->params.nbits.accuracy_level == 4;
  const int64_t kpad = s->kpad, kb = s->kb;
  const fbx__mnb_isa isa = fbx__mnb_isa_now();
  if (!int8 && M >= FBX__MNB_GEMM_M) return fbx__mnb_prefill_f32(c, s, Adata, M, bias, Y, isa, info);
  if (int8 && M >= FBX__MNB_GEMM_M && isa >= FBX__MNB_AVX2 && s->bits == 4 && s->z8)
    return fbx__mnb_prefill_i8(c, s, Adata, M, bias, Y, isa, info);

  /* the column kernel and the row layout it reads (J: chunks per group, 0 = k order) */
  const int c32 = s->bits == 4 && s->ch == 32;
  fbx__mnb_col_fn col;
  int J = 0;
  if (isa == FBX__MNB_PORTABLE) {
    col = fbx__mnb_col_portable;
    info->variant = int8 ? "mnb_int8act_portable" : "mnb_f32_portable";
  } else if (int8 && c32) {
    J = isa >= FBX__MNB_VNNI512 ? 4 : 2;
    col = J == 4 ? fbx__mnb_col_i4g4_vnni512 : fbx__mnb_col_i4g2_avx2;
    info->variant = J == 4 ? "mnb_int4_int8_vnni512" : "mnb_int4_int8_avx2";
  } else if (int8) {
    col = fbx__mnb_col_i8_avx2;
    info->variant = s->bits == 4 ? "mnb_int4_int8_avx2_b16" : "mnb_int8_int8_avx2";
  } else if (c32 && isa >= FBX__MNB_AVX512) {
    col = fbx__mnb_col_f32c32_avx512;
    info->variant = "mnb_int4_f32_avx512";
  } else {
    col = fbx__mnb_col_f32_avx2;
    info->variant = s->bits == 4 ? "mnb_int4_f32_avx2" : "mnb_int8_f32_avx2";
  }
  info->reason = int8 ? "accuracy_level 4: A quantised to int8 per block, exact integer block dots"
                      : "accuracy_level 0: float, dequantised in registers";
  const int64_t V = J ? 32 * J : 64, groups = (kpad + V - 1) / V, kb16 = (kb + 15) & ~(int64_t)15;
  /* scratch: rows, then per row: float path kpad floats + kb16 sums; int8 path groups*V codes
   * + 2 kb16 + 4 J groups floats */
  size_t per_row = int8 ? (size_t)(groups * V) + (size_t)(2 * kb16 + 4 * J * groups) * 4 + 128
                        : (size_t)(kpad + kb16) * 4 + 64;
  per_row = (per_row + 63) & ~(size_t)63;
  size_t need = (size_t)M * (sizeof(fbx__mnb_row) + per_row) + 128;
  unsigned char *mem = fbx_cpu_scratch(c, need);
  if (!mem) return FBX_ERR_OOM();
  fbx__mnb_row *rows = (fbx__mnb_row *)mem;
  unsigned char *p = mem + (((size_t)M * sizeof *rows + 63) & ~(size_t)63);
  for (int64_t m = 0; m < M; m++, p += per_row) {
    fbx__mnb_row *r = &rows[m];
    memset(r, 0, sizeof *r);
    const float *a = Adata + m * s->K;
    if (int8) {
      float *f1 = (float *)(p + ((groups * V + 63) & ~(int64_t)63));
      fbx__mnb_row_prep(s, a, 1, J, r, NULL, f1, (int8_t *)p, f1 + kb16, f1 + 2 * kb16);
    } else {
      fbx__mnb_row_prep(s, a, 0, 0, r, (float *)p, (float *)p + kpad, NULL, NULL, NULL);
    }
  }
  fbx__mnb_job j = {.s = s, .rows = rows, .M = M, .bias = bias, .y = Y, .col = col};
  int64_t grain = 16 + 65536 / (s->K * (M ? M : 1) + 1);
  if (s->N * s->K * M >= 1 << 16) fbx_cpu_par(c, s->N, grain, fbx__mnb_cols, &j);
  else fbx__mnb_cols(&j, 0, s->N, 0);
  return NULL;
}

/* glu: y (M, F) = silu(g) * u of the staged rows gu (M, 2F) = [g | u] per row, silu(g) = g *
 * sigmoid(g) in the order the unfused Sigmoid, Mul, Mul run in (the same sigmoid: cpu_simd.h). */
static void fbx__mnb_glu(const float *gu, int64_t M, int64_t F, float *y) {
  for (int64_t m = 0; m < M; m++) {
    const float *g = gu + m * 2 * F, *u = g + F;
    float *o = y + m * F;
    int64_t n = 0;
    for (; n + 8 <= F; n += 8) {
      __m256 gv = _mm256_loadu_ps(g + n);
      __m256 t = _mm256_mul_ps(gv, fbx__sigmoid256(gv));
      _mm256_storeu_ps(o + n, _mm256_mul_ps(t, _mm256_loadu_ps(u + n)));
    }
    for (; n < F; n++) o[n] = (g[n] * fbx__sigmoid1(g[n])) * u[n];
  }
}

fbx_status *fbx_cpu_k_MATMUL_NBITS(FBX_CPU_KERNEL_ARGS) {
  const fbx__mnb_state *s = state;
  if (!s) return FBX_ERR_NOTIMPL("MATMUL_NBITS: B, scales and zero_points must be constants (packed at compile)");
  const fbx_tensor *A = &in[0];
  if (A->dtype != FBX_DTYPE_F32 || out[0].dtype != FBX_DTYPE_F32)
    return FBX_ERR_NOTIMPL("MATMUL_NBITS: A dtype %s (float32 only)", fbx_dtype_name(A->dtype));
  if (A->rank < 1 || A->dims[A->rank - 1] != s->K)
    return FBX_ERR_ARG("MATMUL_NBITS: A's last dim is not K=%lld", (long long)s->K);
  const float *bias = NULL;
  if (fbx_cpu_present(in, n_in, 4)) {
    if (in[4].dtype != FBX_DTYPE_F32 || fbx_cpu_numel(&in[4]) != s->N) return FBX_ERR_ARG("MATMUL_NBITS: bias shape");
    bias = in[4].data;
  }
  const int64_t M = s->K ? fbx_cpu_numel(A) / s->K : 0;
  info->flops = 2.0 * (double)M * (double)s->N * (double)s->K;
  if (!node->params.nbits.glu) return fbx__mnb_run(c, s, node, A->data, M, bias, out[0].data, info);
  if (s->N % 2) return FBX_ERR_ARG("MATMUL_NBITS: glu with an odd N=%lld", (long long)s->N);
  float *gu = fbx_cpu_stage(c, sizeof(float) * (size_t)(M * s->N) + 64);
  if (!gu) return FBX_ERR_OOM();
  FBX_TRY(fbx__mnb_run(c, s, node, A->data, M, bias, gu, info));
  fbx__mnb_glu(gu, M, s->N / 2, out[0].data);
  info->reason = node->params.nbits.accuracy_level == 4
                     ? "glu: gate and up columns in one pass (accuracy_level 4: A as int8 per block), then silu(gate) * up"
                     : "glu: gate and up columns in one pass (float, dequantised in registers), then silu(gate) * up";
  return NULL;
}
