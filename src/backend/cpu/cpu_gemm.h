/* Blocked f32 GEMM for every M (cpu_gemm.c): Fusebox's own, so prefill,
 * attention and im2col-shaped products do not depend on a BLAS that may not
 * recognise the CPU (DESIGN.md, "Dependencies").
 *
 *   C(M,N) = alpha * op(A)(M,K) @ op(B)(K,N) + beta * C  (+ row_bias[m])
 *
 * op(A) = A (row-major, row stride lda) or A^T (A stored (K,M)); the same for
 * B. B may instead come packed once by fbx_cpu_gemv_pack (constant weights,
 * node_prepare): 16-column panels over the whole K. Batches: matrix b of the
 * batch reads A at a + aoff(b), B at b + boff(b), C at c + b * c_batch, the
 * offsets decomposed over up to FBX_MAX_RANK broadcast dims.
 *
 * Blocking: K in blocks of KC (B micro-panels stay in L1), M in blocks of MC
 * (the A block stays in L2); A copied per block with a padded row stride (the
 * kernels broadcast from MR = 12 AVX-512 / 6 AVX2 rows at once), B packed per
 * block unless prepacked, or read in place at small M. Work items
 * are (batch, M chunk, N chunk) tiles run on the pool; each worker packs into
 * its own part of one workspace held by the context (grown once, reused, no
 * allocation in the steady state). */
#ifndef FBX_BACKEND_CPU_GEMM_H
#define FBX_BACKEND_CPU_GEMM_H

#include "cpu_internal.h"

typedef struct fbx_cpu_gemm_desc {
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;          /* beta 0: C is not read (may be uninitialised) */
  const float *A;
  int64_t lda;
  const float *B;             /* ignored when Bpk is set */
  int64_t ldb;
  const float *Bpk;           /* fbx_cpu_gemv_pack layout of op(B) (K,N), or NULL */
  float *C;
  int64_t ldc;
  const float *row_bias;      /* (M) added to every row, or NULL */
  /* batches: nbatch >= 1 (0 is taken as 1); batch index decomposed over
   * bdims[0..brank) (row-major), element offsets a_st/b_st per dim (0 =
   * broadcast); C matrices are c_batch elements apart. */
  int64_t nbatch;
  int brank;
  int64_t bdims[FBX_MAX_RANK], a_st[FBX_MAX_RANK], b_st[FBX_MAX_RANK];
  int64_t c_batch;
} fbx_cpu_gemm_desc;

/* Runs d on c's pool (c may be NULL: single-threaded, workspace malloc'd and
 * freed in the call - for tests and tools only). Error only on OOM. */
fbx_status *fbx_cpu_gemm(fbx_cpu_ctx *c, const fbx_cpu_gemm_desc *d);

/* The micro-kernels (cpu_gemm.c AVX2, cpu_gemm_avx512.c): mr x width tile
 * (mr <= MR, width <= 32) of C = alpha * A @ B (+ beta_c * C; beta_c 0: C
 * not read). A element (r, k) at a[r*lda + k]; B row k of columns 0..15 at
 * b0 + k*bks, of columns 16..31 at b1 + k*bks (b1 unused when width <= 16);
 * nothing past width is read or written. */
#define FBX_CPU_GEMM_MR_AVX512 12
#define FBX_CPU_GEMM_MR_AVX2 6
void fbx_cpu_gemm_ukr_avx512(const float *a, int64_t lda, const float *b0, const float *b1, int64_t bks,
                             int64_t kb, float alpha, float beta_c, float *c, int64_t ldc, int mr, int64_t width);
void fbx_cpu_gemm_ukr_avx2(const float *a, int64_t lda, const float *b0, const float *b1, int64_t bks,
                           int64_t kb, float alpha, float beta_c, float *c, int64_t ldc, int mr, int64_t width);

/* The prepacked-B path (cpu_gemm_packed.c): fbx_cpu_gemm takes it when Bpk is
 * set and there is one batch matrix. A is packed once per call into k-major
 * slivers shared by all workers, B is read from its compile-time panels. */
fbx_status *fbx_cpu_gemm_prepacked(fbx_cpu_ctx *c, const fbx_cpu_gemm_desc *d);
/* For bench_gemm's sweep only: the most K per block of that path (0: its
 * default, FBX__GP_KC). Process-wide; set it between products, not during. */
void fbx_cpu_gemm_prepacked_set_kc(int64_t kc);

/* Its micro-kernels (AVX-512: cpu_gemm_avx512.c, mr <= 12, width <= 32; AVX2:
 * cpu_gemm_packed.c, mr <= 6, width <= 16): mr x width tile of C = alpha *
 * A @ B (+ beta_c * C; beta_c 0: C not read) over kb steps of k. A element
 * (r, k) at a[k*mr + r] (a packed sliver); B row k of panel i at b + i*pstep +
 * k*16 (full 16-float rows: packed panels are zero padded); nothing of C past
 * width is read or written. The first npf steps prefetch (into L2) the line
 * pf + k*16 of each panel of the next micro-panel (panel i at pf + i*pstep). */
typedef void (*fbx_cpu_gemm_kukr_fn)(const float *a, const float *b, int64_t pstep, int64_t kb, float alpha,
                                     float beta_c, float *c, int64_t ldc, int mr, int64_t width, const float *pf,
                                     int64_t npf);
void fbx_cpu_gemm_kukr_avx512(const float *a, const float *b, int64_t pstep, int64_t kb, float alpha, float beta_c,
                              float *c, int64_t ldc, int mr, int64_t width, const float *pf, int64_t npf);
void fbx_cpu_gemm_kukr_avx2(const float *a, const float *b, int64_t pstep, int64_t kb, float alpha, float beta_c,
                            float *c, int64_t ldc, int mr, int64_t width, const float *pf, int64_t npf);

#endif
