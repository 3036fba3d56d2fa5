/* Internal to the MATMUL_NBITS kernels (cpu_mnb.c, cpu_mnb_avx512.c): the
 * repacked weights, a prepared row of A, and the 4-bit int8 group kernels
 * (AVX2 maddubs on groups of 2 chunks in cpu_mnb.c, AVX-512 VNNI dpbusd on
 * groups of 4 chunks in cpu_mnb_avx512.c). */
#ifndef FBX_BACKEND_CPU_MNB_H
#define FBX_BACKEND_CPU_MNB_H

#include <stdint.h>

typedef struct fbx__mnb_state {
  int64_t K, N, kb, bs, kpad; /* k_blocks, block_size, kb * bs */
  int64_t ks;                 /* row stride of scale / sz: kb rounded up to a multiple of 4 (zero padded) */
  int bits, ch;               /* ch: values per 4-bit chunk (16 or 32) */
  int64_t col_bytes;          /* repacked bytes per column: kb * bs * bits / 8 */
  uint8_t *w;                 /* (N, col_bytes), 64 bytes of slack at the end */
  float *scale, *sz;          /* (N, ks): scale, scale * zero point */
} fbx__mnb_state;

/* One row of A, prepared (zero padded). Float path: a (kpad), asum (kb).
 * int8 path: qa codes, sa (kb) block scales, sq (kb) sa * sum(qa). For a group
 * kernel of J chunks (32 values each) the codes of each 32*J-value group are
 * stored low halves first: value u of chunk j at 16 j + u (u < 16) or
 * 16 J + 16 j + u - 16, the order of the nibbles of J adjacent chunks; sav
 * holds the block scale of each int32 lane (4 J per group). */
typedef struct fbx__mnb_row {
  const float *a, *asum;
  const int8_t *qa;
  const float *sa, *sq, *sav;
} fbx__mnb_row;

/* A group kernel over columns [n0, n1) and all M rows: y(M, N) = sum_b s_b sa_b
 * (sum_k q qa) - sum_b s_b z_b sq_b + bias. 4-bit weights with ch == 32 only. */
typedef struct fbx__mnb_i4_job {
  const fbx__mnb_state *s;
  const fbx__mnb_row *rows;
  int64_t M;
  const float *bias;
  float *y;
} fbx__mnb_i4_job;

void fbx__mnb_i4_cols_vnni512(const fbx__mnb_i4_job *j, int64_t n0, int64_t n1); /* groups of 4 chunks */
int fbx__mnb_vnni_enabled(void); /* AVX-512 VNNI + VL present (and AVX-512 not disabled) */
/* The float path's column sum for 4-bit 32-chunks (cpu_mnb_avx512.c; when fbx_cpu_avx512_enabled()). */
float fbx__mnb_col_f32_avx512(const fbx__mnb_state *s, const uint8_t *w, const float *sc, const float *a);

#endif
