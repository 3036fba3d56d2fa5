/* Internal to the MATMUL_NBITS kernels: cpu_mnb.c (prepare, row preparation, the
 * shared column driver, the portable kernels, prefill), cpu_mnb_avx2.c and
 * cpu_mnb_avx512.c (the SIMD column kernels, chosen at run time). */
#ifndef FBX_BACKEND_CPU_MNB_H
#define FBX_BACKEND_CPU_MNB_H

#include <stdint.h>

#include "cpu_internal.h"

/* The repacked weights (made once at node_prepare). Per column n:
 *   w + n col_bytes: the blocks' values; 4-bit in chunks of ch = min(bs, 32)
 *     values in ch/2 bytes, byte i = value i (low nibble) | value i + ch/2 (high);
 *     8-bit as given;
 *   scale + n ks: (kb) float block scales, zero padded to ks (a multiple of 4);
 *   z8 + n kz: (kb) integer zero points as bytes, zero padded to kz (a multiple of
 *     16); NULL when the zero points are float (then sz + n ks = scale * zp).
 * Bytes a decode step reads per block of 32 4-bit values: 16 + 4 + 1 (ORT's
 * layout: 16 + 4 + 0.5). */
typedef struct fbx__mnb_state {
  int64_t K, N, kb, bs, kpad; /* k_blocks, block_size, kb * bs */
  int64_t ks, kz;             /* row strides of scale / sz and of z8 */
  int bits, ch;
  int64_t col_bytes; /* kb * bs * bits / 8 */
  uint8_t *w;        /* (N, col_bytes), 64 bytes of slack at the end; owns scale / sz / z8 too */
  float *scale, *sz; /* (N, ks); sz NULL unless the zero points are float (both inside w's buffer) */
  uint8_t *z8;       /* (N, kz) or NULL (inside w's buffer) */
} fbx__mnb_state;

/* One row of A, prepared (zero padded). Float path: a (kpad), asum (kb, padded
 * to a multiple of 16 with zeros). int8 path: qa codes, sa (kb) block scales, sq
 * (kb, padded like asum) sa * sum(qa). For a group kernel of J chunks (32 values
 * each) the codes of each 32*J-value group are stored low halves first: value u of
 * chunk j at 16 j + u (u < 16) or 16 J + 16 j + u - 16, the order of the nibbles
 * of J adjacent chunks; sav holds the block scale of each int32 lane (4 J per
 * group). J = 0: codes in k order. */
typedef struct fbx__mnb_row {
  const float *a, *asum;
  const int8_t *qa;
  const float *sa, *sq, *sav;
} fbx__mnb_row;

/* One column kernel call: acc[4 c + r] = sum_k dequant(W)[n + c, k] x_r[k] for
 * columns n .. n + C - 1 (C <= 4) and rows rows[0..R) (R <= 4), where x is a (float
 * path) or qa * sa (int8 path): sum_b s_b (sum_k q_k x_k) - sum_b s_b z_b (sum_k x_k).
 * Bias is the driver's. A tile of columns shares the rows' loads and the reductions. */
typedef void (*fbx__mnb_col_fn)(const fbx__mnb_state *s, int64_t n, int C, const fbx__mnb_row *rows, int R,
                                float *acc);

/* Decode (one row) prefetches the weights, scales and zero points this many column tiles
 * ahead into L2 (16 tiles of 4 columns: 28 KiB ahead at K = 896, 152 KiB at K = 4864). */
#define FBX__MNB_PF_L2 16

/* Instruction sets, ordered: each includes the ones before it. */
typedef enum fbx__mnb_isa {
  FBX__MNB_PORTABLE = 0, /* plain C */
  FBX__MNB_AVX2 = 1,     /* AVX2 + FMA (what the library is built for) */
  FBX__MNB_AVX512 = 2,   /* + AVX-512 F/BW/VL/DQ (fbx_cpu_avx512_enabled) */
  FBX__MNB_VNNI512 = 3,  /* + AVX-512 VNNI */
} fbx__mnb_isa;

/* The best the CPU has (CPUID once; FUSEBOX_AVX512=0 stops at AVX2), capped by
 * fbx_cpu_mnb_isa_cap. */
fbx__mnb_isa fbx__mnb_isa_now(void);
/* Tests: caps the kernels at isa (FBX__MNB_PORTABLE forces the portable path;
 * FBX__MNB_VNNI512 = no cap). Returns the previous cap. Not for the hot path:
 * one relaxed atomic, read once per kernel call. */
int fbx_cpu_mnb_isa_cap(int isa);

/* Column kernels. Portable (cpu_mnb.c): any bits / block size, both paths (the
 * int8 one where the rows carry codes). */
void fbx__mnb_col_portable(const fbx__mnb_state *s, int64_t n, int C, const fbx__mnb_row *rows, int R, float *acc);
/* AVX2 (cpu_mnb_avx2.c): any bits / block size; i4g2: 4-bit ch 32, int8 path,
 * rows in the J = 2 group order. */
void fbx__mnb_col_f32_avx2(const fbx__mnb_state *s, int64_t n, int C,
                              const fbx__mnb_row *rows, int R, float *acc);
void fbx__mnb_col_i8_avx2(const fbx__mnb_state *s, int64_t n, int C,
                              const fbx__mnb_row *rows, int R, float *acc);
void fbx__mnb_col_i4g2_avx2(const fbx__mnb_state *s, int64_t n, int C,
                              const fbx__mnb_row *rows, int R, float *acc);
/* AVX-512 (cpu_mnb_avx512.c): f32c32: 4-bit ch 32, float path; i4g4: 4-bit
 * ch 32, int8 path, J = 4 group order, VNNI. */
void fbx__mnb_col_f32c32_avx512(const fbx__mnb_state *s, int64_t n, int C,
                              const fbx__mnb_row *rows, int R, float *acc);
void fbx__mnb_col_i4g4_vnni512(const fbx__mnb_state *s, int64_t n, int C,
                              const fbx__mnb_row *rows, int R, float *acc);
int fbx__mnb_vnni512_present(void); /* CPUID: AVX-512 F/BW/VL/DQ usable (fbx_cpu_avx512_enabled) and VNNI */

/* Prefill at accuracy_level 4, 4-bit weights with integer zero points (z8), VNNI
 * (cpu_mnb_gemm512.c) or AVX2 (cpu_mnb_gemm_avx2.c): panels of 32 columns, each unpacked once into the worker's
 * scratch (ws + worker * ws_bytes, ws_bytes >= fbx__mnb_i8gemm_panel_bytes). */
typedef struct fbx__mnb_i8gemm {
  const fbx__mnb_state *s;
  const uint8_t *au; /* (M, kpad): qa + 128 in k order below K, 0 past it */
  const float *sa;   /* (M, ldsa): the rows' block scales */
  int64_t M, ldsa;
  const float *bias; /* (N) or NULL */
  float *y;          /* (M, N) */
  unsigned char *ws;
  size_t ws_bytes;
} fbx__mnb_i8gemm;
size_t fbx__mnb_i8gemm_panel_bytes(const fbx__mnb_state *s);
/* The panel of columns [n0, n0 + 32) (zero past N): wq (kpad / 4 quads, 32 columns, 4 k)
 * s8 q - z, cb (kb, 32) 128 sum_block (q - z), sc (kb, 32) scales. AVX2. */
void fbx__mnb_i8panel_build(const fbx__mnb_state *s, int64_t n0, int8_t *wq, int32_t *cb, float *sc);
/* A worker's panel scratch, laid out as fbx__mnb_i8gemm_panel_bytes counts it: wq, then cb, then sc. */
typedef struct fbx__mnb_i8panel {
  int8_t *wq;
  int32_t *cb;
  float *sc;
} fbx__mnb_i8panel;
static inline fbx__mnb_i8panel fbx__mnb_i8panel_scratch(const fbx__mnb_i8gemm *g, int worker) {
  unsigned char *ws = g->ws + (size_t)worker * g->ws_bytes;
  fbx__mnb_i8panel pn = {.wq = (int8_t *)ws, .cb = (int32_t *)(ws + (size_t)g->s->kpad * 32)};
  pn.sc = (float *)(pn.cb + g->s->kb * 32);
  return pn;
}
void fbx__mnb_i8gemm_vnni512(const fbx__mnb_i8gemm *g, int64_t p0, int64_t p1, int worker);
/* The same GEMM without VNNI (cpu_mnb_gemm_avx2.c): vpmaddubsw + vpmaddwd, 4 x 8 tiles. */
void fbx__mnb_i8gemm_avx2(const fbx__mnb_i8gemm *g, int64_t p0, int64_t p1, int worker);

/* Prefill at accuracy_level 0..3 (cpu_mnb_prefill.c): Y(M, N) = A(M, K) @ W^T + bias
 * (bias may be NULL) as a float GEMM on slivers of W dequantised into the micro-kernel's
 * operand; AVX-512 micro-kernel where isa >= FBX__MNB_AVX512, else AVX2. Uses c's
 * scratch. Error only on OOM. */
fbx_status *fbx__mnb_prefill_f32(fbx_cpu_ctx *c, const fbx__mnb_state *s, const float *A, int64_t M,
                                 const float *bias, float *y, fbx__mnb_isa isa, fbx_kernel_info *info);

/* sum_b<kb (s_b z_b) x_b for column n: the zero-point correction (x = asum or sq). */
float fbx__mnb_corr_portable(const fbx__mnb_state *s, int64_t n, const float *x);
float fbx__mnb_corr_avx2(const fbx__mnb_state *s, int64_t n, const float *x);

/* The value of block data w (4-bit chunks of s->ch, or 8-bit) at k (< bs). */
static inline unsigned fbx__mnb_val(const fbx__mnb_state *s, const uint8_t *w, int64_t k) {
  if (s->bits == 8) return w[k];
  const uint8_t *c = w + (k / s->ch) * (s->ch / 2);
  int i = (int)(k % s->ch), h = s->ch / 2;
  return i < h ? c[i] & 15u : c[i - h] >> 4;
}

#endif
