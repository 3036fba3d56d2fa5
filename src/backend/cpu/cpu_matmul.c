/* MATMUL: batched numpy matmul with broadcasting of batch dims, 1-D operands,
 * trans_a/trans_b/alpha (alpha 0 is taken as "unset" = 1).
 *   M == 1 (decode)          : our GEMV (packed constant B when node_prepare packed it)
 *   N == 1, A not transposed : the same GEMV with A as its matrix (dot products of A's rows)
 *   2 <= M <= 160, constant B: the small-M kernel on the packed B (prefetching, no K blocking;
 *                              at prefill's M = 128 it beats the blocked GEMM, bench/RESULTS.md)
 *   otherwise                : the blocked GEMM (cpu_gemm.c), all batches in one call
 *                              (attention heads are work items of one parallel-for);
 *                              a constant B stays packed; a batch-free B folds A's batch into M
 *   F64                      : plain loops. */
#include <string.h>

#include "cpu_gemm.h"
#include "cpu_gemm_avx512.h"
#include "cpu_internal.h"

/* Largest M for the small-M kernel: up to here its A rows (M x K) stay in L2
 * across the panels and it outruns the blocked GEMM (bench_gemm, M = 128). */
#define FBX__MM_SMALL_M 160

typedef struct fbx__mm_state {
  float *packed;       /* (ceil(N/16), K, 16) */
  int64_t K, N;
  bool trans_b;
} fbx__mm_state;

fbx_status *fbx_cpu_matmul_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node,
                                   const fbx_tensor *const *const_inputs, const fbx_tensor *inputs,
                                   void **state) {
  *state = NULL;
  if (!const_inputs || !const_inputs[1]) return NULL;
  const fbx_tensor *b = const_inputs[1];
  if (b->dtype != FBX_DTYPE_F32 || b->rank != 2 || !b->data) return NULL;
  bool tb = node->params.matmul.trans_b != 0;
  int64_t K = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
  if (K <= 0 || N <= 0) return NULL;
  fbx__mm_state *s = fbx_calloc(1, sizeof(*s));
  if (!s) return FBX_ERR_OOM();
  fbx_status *st = fbx_cpu_gemv_pack(b->data, K, N, tb, &s->packed);
  if (st) {
    fbx_free(s);
    return st;
  }
  s->K = K;
  s->N = N;
  s->trans_b = tb;
  *state = s;
  return NULL;
}

void fbx_cpu_matmul_release(void *state) {
  fbx__mm_state *s = state;
  if (!s) return;
  fbx_free_aligned(s->packed);
  fbx_free(s);
}

static void fbx__mm_f64(const double *A, const double *B, double *C, int64_t M, int64_t N, int64_t K,
                        bool ta, bool tb, double alpha) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++)
        s += A[ta ? k * M + m : m * K + k] * B[tb ? n * K + k : k * N + n];
      C[m * N + n] = alpha * s;
    }
}

fbx_status *fbx_cpu_k_MATMUL(FBX_CPU_KERNEL_ARGS) {
  if (n_in < 2 || n_out < 1) return FBX_ERR_ARG("MATMUL: needs 2 inputs, 1 output");
  const fbx_tensor *A = &in[0], *B = &in[1];
  fbx_tensor *Y = &out[0];
  if (A->dtype != B->dtype || A->dtype != Y->dtype ||
      (A->dtype != FBX_DTYPE_F32 && A->dtype != FBX_DTYPE_F64))
    return FBX_ERR_NOTIMPL("MATMUL: dtype %s x %s -> %s not implemented on cpu (F32, F64)",
                           fbx_dtype_name(A->dtype), fbx_dtype_name(B->dtype), fbx_dtype_name(Y->dtype));
  if (A->rank < 1 || B->rank < 1) return FBX_ERR_ARG("MATMUL: scalar operand");
  bool a1 = A->rank == 1, b1 = B->rank == 1;
  bool ta = !a1 && node->params.matmul.trans_a, tb = !b1 && node->params.matmul.trans_b;
  float alpha = node->params.matmul.alpha == 0.f ? 1.f : node->params.matmul.alpha;
  int64_t ar = a1 ? 1 : A->dims[A->rank - 2], ac = A->dims[A->rank - 1];
  int64_t br = b1 ? B->dims[0] : B->dims[B->rank - 2], bc = b1 ? 1 : B->dims[B->rank - 1];
  int64_t M = ta ? ac : ar, K = ta ? ar : ac;
  int64_t Kb = tb ? bc : br, N = tb ? br : bc;
  if (K != Kb) return FBX_ERR_ARG("MATMUL: inner dims differ (%lld vs %lld)", (long long)K, (long long)Kb);
  int abr = a1 ? 0 : A->rank - 2, bbr = b1 ? 0 : B->rank - 2;
  int obr = Y->rank - (a1 ? 0 : 1) - (b1 ? 0 : 1);
  if (obr < 0 || obr < abr || obr < bbr) return FBX_ERR_ARG("MATMUL: output rank %d inconsistent", Y->rank);
  /* batch strides (in matrices), broadcast-aware */
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
  int64_t a_mat = M * K, b_mat = K * N, y_mat = M * N;
  info->flops = 2.0 * (double)M * (double)N * (double)K * (double)nbatch;
  if (fbx_cpu_numel(Y) == 0) return NULL;
  if (A->dtype == FBX_DTYPE_F64) {
    info->variant = "matmul_f64_naive";
    info->reason = "F64: plain loops";
    for (int64_t bi = 0; bi < nbatch; bi++) {
      int64_t rem = bi, oa = 0, ob = 0;
      for (int d = obr - 1; d >= 0; d--) {
        int64_t i = rem % odims[d];
        rem /= odims[d];
        oa += i * ast[d];
        ob += i * bst[d];
      }
      fbx__mm_f64((const double *)A->data + oa * a_mat, (const double *)B->data + ob * b_mat,
                  (double *)Y->data + bi * y_mat, M, N, K, ta, tb, alpha);
    }
    return NULL;
  }
  const float *a = A->data, *b = B->data;
  float *y = Y->data;
  /* B without batch dims and A not transposed: fold A's batch into M */
  if (sb == 1 && !ta && nbatch > 1 && sa == nbatch) {
    M *= nbatch;
    nbatch = 1;
  }
  const fbx__mm_state *st = state;
  bool packed = st && st->K == K && st->N == N && st->trans_b == tb && sb == 1;
  /* N == 1 (matrix x vector): y(M) = A(M,K) . b(K) is the GEMV with A as its
   * (N,K) matrix; the GEMM tiles would compute 32 columns to keep one */
  bool mat_vec = M > 1 && N == 1 && !ta;
  if (M > 1 && !mat_vec && !(packed && !ta && M <= FBX__MM_SMALL_M)) {
    fbx_cpu_gemm_desc d = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = alpha, .A = a, .lda = ta ? M : K,
                           .B = b, .ldb = tb ? K : N, .Bpk = packed ? st->packed : NULL, .C = y, .ldc = N,
                           .nbatch = nbatch, .brank = obr, .c_batch = y_mat};
    for (int i = 0; i < obr; i++) {
      d.bdims[i] = odims[i];
      d.a_st[i] = ast[i] * a_mat;
      d.b_st[i] = bst[i] * b_mat;
    }
    info->variant = packed ? "gemm_f32_blocked_packed_b" : "gemm_f32_blocked";
    info->reason = packed ? "M>1: blocked GEMM, constant B packed at compile, A packed per K block"
                          : "M>1: blocked GEMM, A and B packed per block into the GEMM workspace";
    return fbx_cpu_gemm(c, &d);
  }
  for (int64_t bi = 0; bi < nbatch; bi++) {
    int64_t rem = bi, oa = 0, ob = 0;
    for (int d = obr - 1; d >= 0; d--) {
      int64_t i = rem % odims[d];
      rem /= odims[d];
      oa += i * ast[d];
      ob += i * bst[d];
    }
    const float *ab = a + oa * a_mat, *bb = b + ob * b_mat;
    float *yb = y + bi * y_mat;
    if (mat_vec) {
      info->variant = "gemv_f32_mat_vec";
      info->reason = "N=1: A's rows dotted with the vector B (bandwidth-bound on A)";
      fbx_cpu_gemv_plain(c, bb, ab, yb, K, M, true, alpha);
    } else if (M == 1) {
      if (packed) {
        info->variant = "gemv_f32_packed";
        info->reason = "M=1: bandwidth-bound GEMV, constant B packed at compile";
        fbx_cpu_gemv_packed(c, ab, st->packed, yb, K, N, alpha);
      } else {
        info->variant = "gemv_f32";
        info->reason = "M=1: bandwidth-bound GEMV (B not constant)";
        fbx_cpu_gemv_plain(c, ab, bb, yb, K, N, tb, alpha);
      }
    } else {
      info->variant = "gemm_f32_packed_small_m";
      info->reason = fbx_cpu_avx512_enabled()
                         ? "small M (prefill): 12x32 AVX-512 kernel on the packed constant B (no per-call packing)"
                         : "small M (prefill): 6x16 AVX2 kernel on the packed constant B (no per-call packing)";
      fbx_cpu_gemm_packed(c, ab, K, st->packed, yb, N, M, K, N, alpha);
    }
  }
  return NULL;
}
