/* test_cpu_mnb: the CPU backend's MATMUL_NBITS kernels against a naive reference
 * written here from ORT's contrib-op definition (w = (q - zero_point) * scale, q packed
 * low nibble first along K per block, default zero point 2^(bits-1)), over bits 4 / 8,
 * block sizes 16..128, zero points absent / packed uint8 / float, K a multiple of the
 * block or not, odd N, M 1..64 (decode GEMV, the 4-row kernels, the prefill paths),
 * bias or not, prefill sizes that cross the GEMMs' blocks (M 45 / 300, K 900 / 1000, N 97 / 301),
 * accuracy_level 0 and 4, glu (the packed gate/up form: output silu(gate) * up of the
 * two halves of N, ir_pack_nbits.c), and every instruction-set path the CPU has,
 * forced one by one with fbx_cpu_mnb_isa_cap (portable C, AVX2, AVX-512, AVX-512 VNNI).
 *
 * References and tolerances, per output element:
 *   level 0: y = sum_k a_k (q_k - z_b) s_b + bias in double. Our float32 arithmetic
 *     computes sum_b s_b sum_k q_k a_k - sum_b s_b z_b sum_k a_k, so rounding scales
 *     with the magnitudes of both terms: |err| <= 4e-6 * sum_k |a_k| s_b (q_k + |z_b|)
 *     + 1e-5 (each of the <= K/8 partial sums and block sums rounds once; 4e-6 is
 *     ~32 ulp of that magnitude). The level-0 prefill GEMM (M >= 8) dequantises each
 *     weight to float first (q s - s z: two roundings of at most s (q + |z|) 2^-24) and
 *     sums a_k w_k in float32 FMAs: inside the same bound.
 *   (level 4 with M >= 8, 4-bit weights and integer zero points runs the int8 GEMM
 *   of cpu_mnb_gemm512.c (VNNI) or cpu_mnb_gemm_avx2.c: same bound.)
 *   level 4: A is quantised per block exactly as ORT's CPU kernel does it (scale_a =
 *     max|a| / 127 in float, codes = nearbyintf(a * (127 / max|a|)) clamped to +-127),
 *     then y = sum_b s_b scale_a,b sum_k (q_k - z_b) qa_k + bias in double: the integer
 *     block sums are exact, only the float scaling rounds: the same bound with |a_k|
 *     replaced by scale_a,b |qa_k|. A wrong rounding of one code moves y by about
 *     scale_a s_b (q - z), far above that bound for these magnitudes.
 *   glu: out = silu(g) * u from the references g, u of the two halves, bounded by the
 *     propagated column bounds (|silu'| <= 1.1) plus 8 ulp of the product (the sigmoid's
 *     2.35 ulp and three roundings). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_gemm_avx512.h"
#include "backend/cpu/cpu_mnb.h"
#include "cpu_test_util.h"

typedef struct mnb_case {
  int64_t M, K, N;
  int bits, bs, zp, bias, level; /* zp: 0 none, 1 packed u8, 2 float */
  int glu;                       /* 1: N weight columns give N / 2 outputs silu(gate) * up */
} mnb_case;

static uint64_t g_q = 0x2545F4914F6CDD1Dull;
static uint32_t qrand(void) {
  g_q ^= g_q << 13, g_q ^= g_q >> 7, g_q ^= g_q << 17;
  return (uint32_t)(g_q >> 20);
}

/* Runs one case on the current ISA cap; want: a substring the kernel variant must hold. */
static void run_case(const mnb_case *c, const char *want, const char *isa_name) {
  char what[200];
  snprintf(what, sizeof what, "%s M=%lld K=%lld N=%lld bits=%d bs=%d zp=%d bias=%d level=%d glu=%d", isa_name,
           (long long)c->M, (long long)c->K, (long long)c->N, c->bits, c->bs, c->zp, c->bias, c->level, c->glu);
  const int64_t M = c->M, K = c->K, N = c->N, bs = c->bs, kb = (K + bs - 1) / bs, blob = bs * c->bits / 8;
  const int qmax = (1 << c->bits) - 1;
  const int64_t zrow = (kb * c->bits + 7) / 8;
  uint8_t *q = calloc((size_t)(N * kb * bs), 1);
  double *zv = calloc((size_t)(N * kb), sizeof(double));
  fbx_tensor A = T(FBX_DTYPE_F32, M, K), B = T(FBX_DTYPE_U8, N, kb, blob), S = T(FBX_DTYPE_F32, N, kb);
  fbx_tensor Z = c->zp == 1 ? T(FBX_DTYPE_U8, N, zrow) : c->zp == 2 ? T(FBX_DTYPE_F32, N, kb) : tabsent();
  const int64_t NO = c->glu ? N / 2 : N; /* output columns */
  fbx_tensor bias = c->bias ? T(FBX_DTYPE_F32, N) : tabsent(), Y = T(FBX_DTYPE_F32, M, NO);
  for (int64_t i = 0; i < M * K; i++) F(&A)[i] = (float)(rnd() * (1.0 + (i % 5)));
  for (int64_t i = 0; i < N * kb; i++) F(&S)[i] = (float)(0.002 + 0.05 * fabs(rnd()));
  if (c->bias) frand(&bias);
  uint8_t *bp = B.data;
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < kb * bs; k++) { /* past K the blob holds padding values: they must not matter */
      uint8_t v = (uint8_t)(qrand() % (uint32_t)(qmax + 1));
      q[n * kb * bs + k] = v;
      if (c->bits == 8) bp[n * kb * blob + k] = v;
      else bp[n * kb * blob + k / 2] |= (uint8_t)(k & 1 ? v << 4 : v);
    }
  for (int64_t n = 0; n < N; n++)
    for (int64_t b = 0; b < kb; b++) {
      double z = (double)(1 << (c->bits - 1));
      if (c->zp == 1) {
        uint8_t v = (uint8_t)(qrand() % (uint32_t)(qmax + 1));
        z = v;
        if (c->bits == 8) ((uint8_t *)Z.data)[n * zrow + b] = v;
        else ((uint8_t *)Z.data)[n * zrow + b / 2] |= (uint8_t)(b & 1 ? v << 4 : v);
      } else if (c->zp == 2) {
        z = (double)(qrand() % (uint32_t)(qmax + 1)) + 0.25 * (qrand() % 4);
        F(&Z)[n * kb + b] = (float)z;
      }
      zv[n * kb + b] = z;
    }
  /* the activations the reference multiplies: a itself (level 0) or scale_a * codes (level 4) */
  double *x = malloc(sizeof(double) * (size_t)(M * K));
  for (int64_t m = 0; m < M; m++)
    for (int64_t b = 0; b < kb; b++) {
      const float *a = F(&A) + m * K;
      int64_t k0 = b * bs, k1 = k0 + bs < K ? k0 + bs : K;
      if (c->level != 4) {
        for (int64_t k = k0; k < k1; k++) x[m * K + k] = a[k];
        continue;
      }
      float amax = 0;
      for (int64_t k = k0; k < k1; k++) amax = fmaxf(amax, fabsf(a[k]));
      float sa = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
      for (int64_t k = k0; k < k1; k++) {
        float r = nearbyintf(a[k] * inv);
        r = r > 127 ? 127 : r < -127 ? -127 : r;
        x[m * K + k] = (double)sa * (double)r;
      }
    }
  fbx_ir_params p = {.nbits = {.K = K, .N = N, .bits = c->bits, .block_size = c->bs, .accuracy_level = c->level,
                               .zp_u8 = c->zp == 1, .glu = c->glu}};
  int ids[5] = {0, 1, 2, c->zp ? 3 : FBX_IR_NONE, c->bias ? 4 : FBX_IR_NONE}, oid[1] = {5};
  fbx_ir_node nd = {.op = FBX_IR_OP_MATMUL_NBITS, .n_inputs = 5, .n_outputs = 1, .inputs = ids, .outputs = oid,
                    .params = p};
  fbx_tensor in[5] = {A, B, S, Z, bias};
  const fbx_tensor *ci[5] = {NULL, &B, &S, c->zp ? &Z : NULL, NULL};
  void *state = NULL;
  fbx_status *st = g_be->vt->node_prepare(g_be, &nd, ci, in, &state);
  check(!st && state, "%s: prepare %s", what, st ? fbx_status_message(st) : "(no state)");
  fbx_status_free(st);
  fbx_kernel_info info = {0};
  st = g_be->vt->run_node(g_be, &nd, state, in, 5, &Y, 1, &info);
  check(!st, "%s: run %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  check(info.variant && strstr(info.variant, want), "%s: variant %s, want *%s*", what,
        info.variant ? info.variant : "(none)", want);
  double worst = 0;
  int64_t bad = 0;
  double *ref = malloc(sizeof(double) * (size_t)(M * N)), *tol = malloc(sizeof(double) * (size_t)(M * N));
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double r = c->bias ? F(&bias)[n] : 0.0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        int64_t b = k / bs;
        double s = F(&S)[n * kb + b], qk = q[n * kb * bs + k], z = zv[n * kb + b];
        r += x[m * K + k] * (qk - z) * s;
        mag += fabs(x[m * K + k]) * s * (qk + fabs(z));
      }
      ref[m * N + n] = r, tol[m * N + n] = 4e-6 * mag + 1e-5;
    }
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < NO; n++) {
      double want = ref[m * N + n], bound = tol[m * N + n];
      if (c->glu) {
        const double gg = ref[m * N + n], uu = ref[m * N + NO + n], sg = gg / (1.0 + exp(-gg));
        want = sg * uu;
        bound = 1.1 * fabs(uu) * tol[m * N + n] + fabs(sg) * tol[m * N + NO + n] + 8 * 6e-8 * fabs(want) + 1e-6;
      }
      double err = fabs((double)F(&Y)[m * NO + n] - want);
      if (!(err <= bound)) bad++;
      if (err / bound > worst) worst = err / bound;
    }
  free(ref), free(tol);
  check(bad == 0, "%s: %lld of %lld outside the bound (worst err/bound %.3g)", what, (long long)bad,
        (long long)(M * NO), worst);
  g_be->vt->node_release(g_be, &nd, state);
  tfree(&A), tfree(&B), tfree(&S), tfree(&Y);
  if (c->zp) tfree(&Z);
  if (c->bias) tfree(&bias);
  free(q), free(zv), free(x);
}

/* The kernel variant a case must take on an ISA (substring of info.variant). */
static const char *want_variant(const mnb_case *c, fbx__mnb_isa isa) {
  if (c->level != 4 && c->M >= 8) return "sliver_gemm";
  if (isa == FBX__MNB_PORTABLE) return "portable";
  if (c->level == 4 && c->M >= 8 && c->bits == 4 && c->zp != 2)
    return isa >= FBX__MNB_VNNI512 ? "int8_gemm_vnni512" : "int8_gemm_avx2";
  int c32 = c->bits == 4 && c->bs >= 32;
  if (c->level == 4) return c32 ? (isa >= FBX__MNB_VNNI512 ? "int4_int8_vnni512" : "int4_int8_avx2") : "int8_avx2";
  return c32 && isa >= FBX__MNB_AVX512 ? "f32_avx512" : "f32_avx2";
}

int main(void) {
  static const char *names[] = {"portable", "avx2", "avx512", "vnni512"};
  fbx__mnb_isa top = fbx__mnb_isa_now();
  printf("test_cpu_mnb: best ISA here %s; every one up to it is forced in turn\n", names[top]);
  test_setup(2);
  static const int64_t Ms[] = {1, 2, 3, 4, 5, 8, 17, 64};
  static const int bss[] = {16, 32, 64, 128};
  int cases = 0;
  for (int isa = FBX__MNB_PORTABLE; isa <= (int)top; isa++) {
    fbx_cpu_mnb_isa_cap(isa);
    check(fbx__mnb_isa_now() == (fbx__mnb_isa)isa, "cap %s not taken", names[isa]);
    int idx = 0;
    for (int bits = 4; bits <= 8; bits += 4)
      for (int bi = 0; bi < 4; bi++)
        for (int zp = 0; zp < 3; zp++)
          for (int level = 0; level <= 4; level += 4)
            for (int mi = 0; mi < 8; mi++, idx++) {
              /* K: 3 or 5 blocks, every other case a partial last block; N odd */
              int bs = bss[bi];
              int64_t K = (int64_t)bs * (idx % 4 < 2 ? 3 : 5) - (idx % 2 ? 7 : 0);
              mnb_case c = {.M = Ms[mi], .K = K, .N = 13 + 2 * (idx % 5), .bits = bits, .bs = bs, .zp = zp,
                            .bias = idx % 3 == 0, .level = level};
              run_case(&c, want_variant(&c, isa), names[isa]);
              cases++;
            }
    /* large enough to be split over the pool's threads (N * K * M >= 2^16) */
    for (int level = 0; level <= 4; level += 4)
      for (int zp = 0; zp < 3; zp++) {
        mnb_case c = {.M = 1 + 2 * (zp == 2), .K = 900, .N = 301, .bits = 4, .bs = 32, .zp = zp, .bias = 1,
                      .level = level};
        run_case(&c, want_variant(&c, isa), names[isa]);
        c.bits = 8, c.bs = 64, c.K = 1000;
        run_case(&c, want_variant(&c, isa), names[isa]);
        cases += 2;
      }
    /* glu: decode, small M and prefill through every path, with and without bias */
    for (int level = 0; level <= 4; level += 4)
      for (int mi = 0; mi < 8; mi += 3) {
        mnb_case c = {.M = Ms[mi], .K = 900, .N = 2 * 151, .bits = 4, .bs = 32, .zp = mi % 2, .bias = mi == 3,
                      .level = level, .glu = 1};
        run_case(&c, want_variant(&c, isa), names[isa]);
        c.bits = 8, c.bs = 16, c.K = 200, c.N = 2 * 9;
        run_case(&c, want_variant(&c, isa), names[isa]);
        cases += 2;
      }
    /* the prefill GEMMs at sizes that cross their blocks: M over the level-0 GEMM's 256-row
     * blocks and 32-row pairs (45, 300), N over its 48-column tasks and 12 / 6-column slivers,
     * K over its 256-value blocks, a partial last quant block (K 900 = 28 x 32 + 4) */
    for (int level = 0; level <= 4; level += 4)
      for (int zp = 0; zp < 3; zp++) {
        mnb_case c = {.M = zp == 1 ? 300 : 45, .K = 900, .N = 301, .bits = 4, .bs = 32, .zp = zp, .bias = zp != 2,
                      .level = level};
        run_case(&c, want_variant(&c, isa), names[isa]);
        c.bits = 8, c.bs = 64, c.K = 1000, c.N = 97;
        run_case(&c, want_variant(&c, isa), names[isa]);
        cases += 2;
      }
  }
  fbx_cpu_mnb_isa_cap(FBX__MNB_VNNI512);
  /* the prefill GEMMs' per-worker scratch and task split on other pool sizes */
  static const int pools[] = {1, 3};
  for (int pi = 0; pi < 2; pi++) {
    fbx_backend_destroy(g_be);
    test_setup(pools[pi]);
    for (int level = 0; level <= 4; level += 4) {
      mnb_case c = {.M = 45, .K = 900, .N = 301, .bits = 4, .bs = 32, .zp = 1, .bias = 1, .level = level};
      run_case(&c, want_variant(&c, top), pools[pi] == 1 ? "1 thread" : "3 threads");
      c.N = 128, c.M = 8, c.zp = 0;
      run_case(&c, want_variant(&c, top), pools[pi] == 1 ? "1 thread" : "3 threads");
      cases += 2;
    }
  }
  fbx_backend_destroy(g_be);
  printf("test_cpu_mnb: %d cases, %d checks passed, %d failed\n", cases, g_pass, g_fail);
  return g_fail ? 1 : 0;
}
