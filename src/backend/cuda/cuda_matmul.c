/* MATMUL (and the convolutions' GEMMs) through cuBLASLt, fp32; TF32 tensor
 * cores only when the backend was opened with tf32 (fp32 stays fp32 by
 * default).
 *
 * cuBLASLt is column-major; a row-major C (M x N) = op(A) op(B) is the
 * column-major C^T (N x M) = op(B)^T op(A)^T, so the operands swap and the
 * layouts are the row-major buffers read as column-major. */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

static fbx_status *fbx__lt(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS) return NULL;
  return FBX_ERR("device 'cuda': cuBLASLt %s failed (status %d)", what, (int)s);
}

static cublasStatus_t fbx__lt_layout(cublasLtMatrixLayout_t *l, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                     int64_t stride) {
  cublasStatus_t s = cublasLtMatrixLayoutCreate(l, CUDA_R_32F, (uint64_t)rows, (uint64_t)cols, ld);
  if (s != CUBLAS_STATUS_SUCCESS || batch <= 1) return s;
  int32_t b = (int32_t)batch;
  s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
  return s;
}

/* Largest power of two (4..256 bytes) dividing p and every batch's offset: the
 * heuristic assumes 256-byte aligned operands unless told otherwise, and our
 * operands are often views (a batch, an image, a row block) of a buffer. */
static uint32_t fbx__lt_align(const void *p, int64_t stride_elems, int64_t batch) {
  uintptr_t a = (uintptr_t)p | (batch > 1 ? (uintptr_t)(stride_elems * 4) : 0);
  uint32_t r = 256;
  while (r > 4 && (a % r)) r >>= 1;
  return r;
}

/* Descriptors, layouts and the heuristic's algorithm, kept per GEMM shape
 * (a few dozen distinct shapes per model): a repeated GEMM is one
 * cublasLtMatmul call. Round-robin replacement. */
#define FBX__GEMM_PLANS 64

typedef struct fbx__gemm_key {
  int64_t ta, tb, M, N, K, lda, ldb, ldc, sa, sb, sc, batch;
  uint32_t al_a, al_b, al_c, tf32;
} fbx__gemm_key;

struct fbx_cuda_gemm_plan {
  fbx__gemm_key key;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;   /* cuBLASLt's A (our B), B (our A), C = D */
  cublasLtMatmulAlgo_t algo;
};

static void fbx__gemm_plan_clear(struct fbx_cuda_gemm_plan *p) {
  if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
  if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
  if (p->la) cublasLtMatrixLayoutDestroy(p->la);
  if (p->desc) cublasLtMatmulDescDestroy(p->desc);
  memset(p, 0, sizeof *p);
}

void fbx_cuda_gemm_plans_destroy(fbx_cuda_ctx *c) {
  for (int i = 0; i < c->n_gemm_plans; i++) fbx__gemm_plan_clear(&c->gemm_plans[i]);
  free(c->gemm_plans);
  c->gemm_plans = NULL;
  c->n_gemm_plans = 0;
}

/* Builds p for key k (p is cleared first); on failure p stays cleared. */
static fbx_status *fbx__gemm_plan_build(fbx_cuda_ctx *c, const fbx__gemm_key *k, struct fbx_cuda_gemm_plan *p) {
  fbx__gemm_plan_clear(p);
  cublasLtMatmulPreference_t pref = NULL;
  fbx_status *st = NULL;
  cublasComputeType_t ct = k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  /* first operand: B, giving op(B)^T (N x K) */
  cublasOperation_t op1 = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N, op2 = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  int64_t M = k->M, N = k->N, K = k->K;
  if ((st = fbx__lt(cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F), "descriptor"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op1, sizeof op1), "transA"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op2, sizeof op2), "transB"))) goto done;
  if ((st = fbx__lt(fbx__lt_layout(&p->la, k->tb ? K : N, k->tb ? N : K, k->ldb, k->batch, k->sb), "layout B"))) goto done;
  if ((st = fbx__lt(fbx__lt_layout(&p->lb, k->ta ? M : K, k->ta ? K : M, k->lda, k->batch, k->sa), "layout A"))) goto done;
  if ((st = fbx__lt(fbx__lt_layout(&p->lc, N, M, k->ldc, k->batch, k->sc), "layout C"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceCreate(&pref), "preference"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &c->lt_ws_size,
                                                         sizeof c->lt_ws_size), "workspace preference"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &k->al_a, sizeof k->al_a), "alignment A"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &k->al_b, sizeof k->al_b), "alignment B"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &k->al_c, sizeof k->al_c), "alignment C"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &k->al_c, sizeof k->al_c), "alignment D"))) goto done;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  memset(&res, 0, sizeof res);
  if ((st = fbx__lt(cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found), "heuristic"))) goto done;
  if (found < 1) {
    st = FBX_ERR_NOTIMPL("device 'cuda': cuBLASLt has no algorithm for GEMM %lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
    goto done;
  }
  p->algo = res.algo;
  p->key = *k;
done:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (st) fbx__gemm_plan_clear(p);
  return st;
}

fbx_status *fbx_cuda_gemm_f32(fbx_cuda_ctx *c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                              const float *A, int64_t lda, int64_t stride_a, const float *B, int64_t ldb,
                              int64_t stride_b, float beta, float *C, int64_t ldc, int64_t stride_c,
                              int64_t batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return NULL;
  if (batch > INT32_MAX) return FBX_ERR_NOTIMPL("device 'cuda': GEMM batch %lld too large", (long long)batch);
  fbx__gemm_key k;
  memset(&k, 0, sizeof k); /* padding too: keys compare with memcmp */
  bool b1 = batch > 1;
  k = (fbx__gemm_key){.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
                      .sa = b1 ? stride_a : 0, .sb = b1 ? stride_b : 0, .sc = b1 ? stride_c : 0, .batch = batch,
                      /* cuBLASLt's A is our B (operands swap for row-major) */
                      .al_a = fbx__lt_align(B, stride_b, batch), .al_b = fbx__lt_align(A, stride_a, batch),
                      .al_c = fbx__lt_align(C, stride_c, batch), .tf32 = c->tf32};
  struct fbx_cuda_gemm_plan *p = NULL;
  for (int i = 0; i < c->n_gemm_plans && !p; i++)
    if (c->gemm_plans[i].desc && memcmp(&c->gemm_plans[i].key, &k, sizeof k) == 0) p = &c->gemm_plans[i];
  if (!p) {
    if (!c->gemm_plans) {
      c->gemm_plans = calloc(FBX__GEMM_PLANS, sizeof *c->gemm_plans);
      if (!c->gemm_plans) return FBX_ERR_OOM();
    }
    if (c->n_gemm_plans < FBX__GEMM_PLANS) {
      p = &c->gemm_plans[c->n_gemm_plans++];
    } else {
      p = &c->gemm_plans[c->next_gemm_plan];
      c->next_gemm_plan = (c->next_gemm_plan + 1) % FBX__GEMM_PLANS;
    }
    FBX_TRY(fbx__gemm_plan_build(c, &k, p));
  }
  return fbx__lt(cublasLtMatmul(c->lt, p->desc, &alpha, B, p->la, A, p->lb, &beta, C, p->lc, C, p->lc, &p->algo,
                                c->lt_ws, c->lt_ws_size, c->stream), "matmul");
}

/* MATMUL: numpy batched matmul with broadcast batch dims and 1-D operands,
 * params.matmul trans_a/trans_b/alpha (Gemm), as the CPU kernel reads them. */
fbx_status *fbx_cuda_k_matmul(FBX_CUDA_KERNEL_ARGS) {
  if (n_in < 2 || n_out < 1) return FBX_ERR_ARG("device 'cuda': MATMUL: needs 2 inputs, 1 output");
  const fbx_tensor *A = &in[0], *B = &in[1];
  fbx_tensor *Y = &out[0];
  fbx_matmul_geom g;
  FBX_TRY(fbx_matmul_geom_get(node, A, B, Y, &g));
  const bool ta = g.ta, tb = g.tb;
  const float alpha = g.alpha;
  const int64_t M = g.M, N = g.N, K = g.K, nbatch = g.nbatch, sa = g.sa, sb = g.sb;
  info->flops = 2.0 * (double)M * (double)N * (double)K * (double)nbatch;
  info->variant = c->tf32 ? "cublaslt_tf32" : "cublaslt_f32";
  if (fbx_tensor_numel(Y) == 0) return NULL;
  if (K == 0) return fbx_cuda_check(cudaMemsetAsync(Y->data, 0, fbx_tensor_nbytes(Y), c->stream), "MATMUL K=0");
  int64_t lda = ta ? M : K, ldb = tb ? K : N;
  const float *a = A->data, *b = B->data;
  float *y = Y->data;
  /* one row of A per batch (decode): our GEMV (cuda_gemv.cu) when the batches are all
   * distinct or all shared; a constant weight reads its transposed copy (node_prepare) */
  bool a_ok = sa == nbatch || sa == 1, b_ok = sb == nbatch || sb == 1;
  if (M == 1 && !ta && a_ok && b_ok && nbatch <= 65535 && (nbatch <= 4 || sb == nbatch)) {
    const float *bt = sb == 1 && !tb ? fbx_cuda_mirror_bt(c->mirror, b, K, N) : NULL;
    int64_t sx = sa == 1 ? 0 : K, sbb = sb == 1 ? 0 : K * N;
    bool nk = bt || tb;
    info->variant = nk ? "gemv_nk_f32" : "gemv_kn_f32";
    info->reason = bt ? "M=1: weight transposed at prepare, one warp per output"
                      : tb ? "M=1: B^T rows, one warp per output" : "M=1: columns of B, k split in the block";
    return fbx_cuda_launched(fbx_cuda_launch_gemv(a, bt ? bt : b, y, N, K, nbatch, sx, sbb, N, alpha, nk, c->stream),
                             "MATMUL gemv");
  }
  /* B shared by every batch and A not transposed: one GEMM with M * batch rows */
  if (sb == 1 && !ta && nbatch > 1 && sa == nbatch) {
    info->reason = "batch folded into M";
    return fbx_cuda_gemm_f32(c, ta, tb, M * nbatch, N, K, alpha, a, lda, 0, b, ldb, 0, 0.f, y, N, 0, 1);
  }
  /* plain batches (no broadcast): one strided-batched call */
  if (nbatch == 1 || (sa == nbatch && sb == nbatch)) {
    info->reason = nbatch > 1 ? "strided batched" : "single GEMM";
    return fbx_cuda_gemm_f32(c, ta, tb, M, N, K, alpha, a, lda, M * K, b, ldb, K * N, 0.f, y, N, M * N, nbatch);
  }
  info->reason = "broadcast batches: one GEMM per batch";
  for (int64_t bi = 0; bi < nbatch; bi++) {
    int64_t oa, ob;
    fbx_matmul_geom_batch(&g, bi, &oa, &ob);
    FBX_TRY(fbx_cuda_gemm_f32(c, ta, tb, M, N, K, alpha, a + oa * M * K, lda, 0, b + ob * K * N, ldb, 0, 0.f,
                              y + bi * M * N, N, 0, 1));
  }
  return NULL;
}
