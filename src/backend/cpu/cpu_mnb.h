/* Internal to the MATMUL_NBITS kernels (cpu_mnb.c, cpu_mnb_avx512.c): the
 * repacked weights, a prepared row of A, and the 4-bit int8 column kernel
 * that is compiled twice (cpu_mnb_i4.inc: AVX2 maddubs, AVX-512 VNNI dpbusd). */
#ifndef FBX_BACKEND_CPU_MNB_H
#define FBX_BACKEND_CPU_MNB_H

#include <stdint.h>

typedef struct fbx__mnb_state {
  int64_t K, N, kb, bs, kpad; /* k_blocks, block_size, kb * bs */
  int64_t ks;                 /* row stride of scale / sz: kb, rounded up to even when bs == 32 (zero padded) */
  int64_t pairs;              /* 64-value groups per column: ceil(kpad / 64) */
  int bits, ch;               /* ch: values per 4-bit chunk (16 or 32) */
  int64_t col_bytes;          /* repacked bytes per column: kb * bs * bits / 8 */
  uint8_t *w;                 /* (N, col_bytes), 64 bytes of slack at the end */
  float *scale, *sz;          /* (N, ks): scale, scale * zero point */
} fbx__mnb_state;

/* One row of A, prepared (zero padded). Float path: a (kpad), asum (kb).
 * int8 path: qa codes (pairs * 64; for the pair kernel each 64-value group is
 * stored as values 0-15, 32-47, 16-31, 48-63, the order of the nibbles of two
 * adjacent 32-chunks), sa (kb) block scales, sq (kb) sa * sum(qa), sav
 * (pairs * 8) the block scale of each int32 lane of the pair kernel. */
typedef struct fbx__mnb_row {
  const float *a, *asum;
  const int8_t *qa;
  const float *sa, *sq, *sav;
} fbx__mnb_row;

/* The pair kernel over columns [n0, n1) and all M rows: y(M, N) = sum_b s_b sa_b
 * (sum_k q qa) - sum_b s_b z_b sq_b + bias. 4-bit weights with ch == 32 only. */
typedef struct fbx__mnb_i4_job {
  const fbx__mnb_state *s;
  const fbx__mnb_row *rows;
  int64_t M;
  const float *bias;
  float *y;
} fbx__mnb_i4_job;

void fbx__mnb_i4_cols_avx2(const fbx__mnb_i4_job *j, int64_t n0, int64_t n1);
void fbx__mnb_i4_cols_vnni(const fbx__mnb_i4_job *j, int64_t n0, int64_t n1);
int fbx__mnb_vnni_enabled(void); /* AVX-512 VNNI + VL present (and AVX-512 not disabled) */
/* The float path's column sum for 4-bit 32-chunks (cpu_mnb_avx512.c; when fbx_cpu_avx512_enabled()). */
float fbx__mnb_col_f32_avx512(const fbx__mnb_state *s, const uint8_t *w, const float *sc, const float *a);

#endif
