/* MATMUL (and the convolutions' GEMMs) through cuBLASLt, fp32; TF32 tensor
 * cores only when the backend was opened with tf32 (fp32 stays fp32 by
 * default).
 *
 * cuBLASLt is column-major; a row-major C (M x N) = op(A) op(B) is the
 * column-major C^T (N x M) = op(B)^T op(A)^T, so the operands swap and the
 * layouts are the row-major buffers read as column-major. Step 1 builds the
 * descriptors and asks the heuristic on every call (tens of microseconds);
 * caching them per node is the next step. */
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

fbx_status *fbx_cuda_gemm_f32(fbx_cuda_ctx *c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                              const float *A, int64_t lda, int64_t stride_a, const float *B, int64_t ldb,
                              int64_t stride_b, float beta, float *C, int64_t ldc, int64_t stride_c,
                              int64_t batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return NULL;
  if (batch > INT32_MAX) return FBX_ERR_NOTIMPL("device 'cuda': GEMM batch %lld too large", (long long)batch);
  cublasLtMatmulDesc_t desc = NULL;
  cublasLtMatrixLayout_t lb = NULL, la = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  fbx_status *st = NULL;
  cublasComputeType_t ct = c->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  /* first operand: B, giving op(B)^T (N x K) */
  cublasOperation_t op1 = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op2 = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  if ((st = fbx__lt(cublasLtMatmulDescCreate(&desc, ct, CUDA_R_32F), "descriptor"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op1, sizeof op1), "transA"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op2, sizeof op2), "transB"))) goto done;
  if ((st = fbx__lt(fbx__lt_layout(&lb, tb ? K : N, tb ? N : K, ldb, batch, stride_b), "layout B"))) goto done;
  if ((st = fbx__lt(fbx__lt_layout(&la, ta ? M : K, ta ? K : M, lda, batch, stride_a), "layout A"))) goto done;
  if ((st = fbx__lt(fbx__lt_layout(&lc, N, M, ldc, batch, stride_c), "layout C"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceCreate(&pref), "preference"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &c->lt_ws_size,
                                                         sizeof c->lt_ws_size), "workspace preference"))) goto done;
  /* cuBLASLt's A is our B (operands swap for row-major) */
  uint32_t al_a = fbx__lt_align(B, stride_b, batch), al_b = fbx__lt_align(A, stride_a, batch),
           al_c = fbx__lt_align(C, stride_c, batch);
  if ((st = fbx__lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a), "alignment A"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b), "alignment B"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c), "alignment C"))) goto done;
  if ((st = fbx__lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c), "alignment D"))) goto done;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  memset(&res, 0, sizeof res);
  if ((st = fbx__lt(cublasLtMatmulAlgoGetHeuristic(c->lt, desc, lb, la, lc, lc, pref, 1, &res, &found), "heuristic"))) goto done;
  if (found < 1) {
    st = FBX_ERR_NOTIMPL("device 'cuda': cuBLASLt has no algorithm for GEMM %lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
    goto done;
  }
  st = fbx__lt(cublasLtMatmul(c->lt, desc, &alpha, B, lb, A, la, &beta, C, lc, C, lc, &res.algo, c->lt_ws,
                              c->lt_ws_size, c->stream), "matmul");
done:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (desc) cublasLtMatmulDescDestroy(desc);
  return st;
}

/* MATMUL: numpy batched matmul with broadcast batch dims and 1-D operands,
 * params.matmul trans_a/trans_b/alpha (Gemm), as the CPU kernel reads them. */
fbx_status *fbx_cuda_k_matmul(FBX_CUDA_KERNEL_ARGS) {
  if (n_in < 2 || n_out < 1) return FBX_ERR_ARG("device 'cuda': MATMUL: needs 2 inputs, 1 output");
  const fbx_tensor *A = &in[0], *B = &in[1];
  fbx_tensor *Y = &out[0];
  if (A->rank < 1 || B->rank < 1) return FBX_ERR_ARG("device 'cuda': MATMUL: scalar operand");
  bool a1 = A->rank == 1, b1 = B->rank == 1;
  bool ta = !a1 && node->params.matmul.trans_a, tb = !b1 && node->params.matmul.trans_b;
  float alpha = node->params.matmul.alpha == 0.f ? 1.f : node->params.matmul.alpha;
  int64_t ar = a1 ? 1 : A->dims[A->rank - 2], ac = A->dims[A->rank - 1];
  int64_t br = b1 ? B->dims[0] : B->dims[B->rank - 2], bc = b1 ? 1 : B->dims[B->rank - 1];
  int64_t M = ta ? ac : ar, K = ta ? ar : ac, Kb = tb ? bc : br, N = tb ? br : bc;
  if (K != Kb) return FBX_ERR_ARG("device 'cuda': MATMUL: inner dims differ (%lld vs %lld)", (long long)K, (long long)Kb);
  int abr = a1 ? 0 : A->rank - 2, bbr = b1 ? 0 : B->rank - 2;
  int obr = Y->rank - (a1 ? 0 : 1) - (b1 ? 0 : 1);
  if (obr < 0 || obr < abr || obr < bbr) return FBX_ERR_ARG("device 'cuda': MATMUL: output rank %d inconsistent", Y->rank);
  int64_t ast[FBX_MAX_RANK], bst[FBX_MAX_RANK], odims[FBX_MAX_RANK];
  int64_t nbatch = 1, sa = 1, sb = 1;
  for (int d = obr - 1; d >= 0; d--) {
    int ia = d - (obr - abr), ib = d - (obr - bbr);
    int64_t da = ia >= 0 ? A->dims[ia] : 1, db = ib >= 0 ? B->dims[ib] : 1;
    odims[d] = Y->dims[d];
    ast[d] = da == 1 ? 0 : sa;
    bst[d] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
    nbatch *= odims[d];
  }
  info->flops = 2.0 * (double)M * (double)N * (double)K * (double)nbatch;
  info->variant = c->tf32 ? "cublaslt_tf32" : "cublaslt_f32";
  if (fbx_tensor_numel(Y) == 0) return NULL;
  if (K == 0) return fbx_cuda_check(cudaMemsetAsync(Y->data, 0, fbx_tensor_nbytes(Y), c->stream), "MATMUL K=0");
  int64_t lda = ta ? M : K, ldb = tb ? K : N;
  const float *a = A->data, *b = B->data;
  float *y = Y->data;
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
    int64_t rem = bi, oa = 0, ob = 0;
    for (int d = obr - 1; d >= 0; d--) {
      int64_t i = rem % odims[d];
      rem /= odims[d];
      oa += i * ast[d];
      ob += i * bst[d];
    }
    FBX_TRY(fbx_cuda_gemm_f32(c, ta, tb, M, N, K, alpha, a + oa * M * K, lda, 0, b + ob * K * N, ldb, 0, 0.f,
                              y + bi * M * N, N, 0, 1));
  }
  return NULL;
}
