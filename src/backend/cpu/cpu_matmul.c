/* MATMUL: batched numpy matmul with broadcasting of batch dims, 1-D operands,
 * trans_a/trans_b/alpha (alpha 0 is taken as "unset" = 1).
 *   M == 1 (decode)          : our GEMV (packed constant B when node_prepare packed it); small
 *                              dynamic matrices in batches (attention): one per thread
 *   N == 1, A not transposed : the same GEMV with A as its matrix (dot products of A's rows)
 *   small M, constant B      : the small-M kernel on the packed B (prefetching, no K blocking):
 *                              2 <= M <= 12 with AVX-512, 2 <= M <= 160 with AVX2 only
 *   otherwise                : the blocked GEMM (cpu_gemm.c), all batches in one call
 *                              (attention heads are work items of one parallel-for);
 *                              a constant B stays packed (one batch matrix: the prepacked-B
 *                              GEMM of cpu_gemm_packed.c, A in k-major slivers shared by the
 *                              workers); a batch-free B folds A's batch into M
 *   F64                      : plain loops. */
#include <string.h>

#include "cpu_gemm.h"
#include "cpu_gemm_avx512.h"
#include "cpu_internal.h"

/* Largest M for the small-M kernel. AVX2: up to here its A rows (M x K) stay
 * in L2 across the panels and it outruns the blocked GEMM (bench_gemm, M =
 * 128, also against the prepacked-B GEMM's 6x16 kernel on Zen 4). AVX-512:
 * the prepacked-B GEMM's 12x32 kernel on k-major A slivers is ahead from M =
 * 16 (Zen 4, 1 thread: 93-97% of the FMA peak against 89-93% at M = 16..128);
 * at M <= 12 (one sliver) the small-M kernel, which packs no A, is. */
#define FBX__MM_SMALL_M 160
#define FBX__MM_SMALL_M_AVX512 12

int64_t fbx_cpu_small_m_max(void) { return fbx_cpu_avx512_enabled() ? FBX__MM_SMALL_M_AVX512 : FBX__MM_SMALL_M; }

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

/* Batched GEMV on a dynamic B (decode attention: q (1,64) x K^T (64, past)
 * per head; 12 heads x 2 products x 12 layers per token): one parallel-for
 * over the batch, each matrix on one thread, instead of one parallel-for
 * per matrix (288 dispatches of ~30 KiB each per decode step). */
typedef struct fbx__mm_bgemv {
  const fbx_matmul_geom *g;
  const float *a, *b;
  float *y;
  int64_t a_mat, b_mat, y_mat, K, N;
  bool tb;
  float alpha;
} fbx__mm_bgemv;

static void fbx__mm_bgemv_task(void *arg, int64_t b0, int64_t b1, int worker) {
  (void)worker;
  const fbx__mm_bgemv *j = arg;
  for (int64_t bi = b0; bi < b1; bi++) {
    int64_t oa, ob;
    fbx_matmul_geom_batch(j->g, bi, &oa, &ob);
    fbx_cpu_gemv_plain_st(j->a + oa * j->a_mat, j->b + ob * j->b_mat, j->y + bi * j->y_mat, j->K, j->N, j->tb,
                          j->alpha);
  }
}

/* Below this many bytes of B per matrix, batches run one matrix per thread. */
#define FBX__MM_BGEMV_BYTES (256 * 1024)

fbx_status *fbx_cpu_k_MATMUL(FBX_CPU_KERNEL_ARGS) {
  if (n_in < 2 || n_out < 1) return FBX_ERR_ARG("MATMUL: needs 2 inputs, 1 output");
  const fbx_tensor *A = &in[0], *B = &in[1];
  fbx_tensor *Y = &out[0];
  if (A->dtype != B->dtype || A->dtype != Y->dtype ||
      (A->dtype != FBX_DTYPE_F32 && A->dtype != FBX_DTYPE_F64))
    return FBX_ERR_NOTIMPL("MATMUL: dtype %s x %s -> %s not implemented on cpu (F32, F64)",
                           fbx_dtype_name(A->dtype), fbx_dtype_name(B->dtype), fbx_dtype_name(Y->dtype));
  fbx_matmul_geom g;
  FBX_TRY(fbx_matmul_geom_get(node, A, B, Y, &g));
  const bool ta = g.ta, tb = g.tb;
  const float alpha = g.alpha;
  const int obr = g.obr;
  const int64_t sa = g.sa, sb = g.sb;
  int64_t M = g.M, N = g.N, K = g.K, nbatch = g.nbatch; /* M and nbatch change when the batch folds into M */
  int64_t a_mat = M * K, b_mat = K * N, y_mat = M * N;
  info->flops = 2.0 * (double)M * (double)N * (double)K * (double)nbatch;
  if (fbx_cpu_numel(Y) == 0) return NULL;
  if (A->dtype == FBX_DTYPE_F64) {
    info->variant = "matmul_f64_naive";
    info->reason = "F64: plain loops";
    for (int64_t bi = 0; bi < nbatch; bi++) {
      int64_t oa, ob;
      fbx_matmul_geom_batch(&g, bi, &oa, &ob);
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
  const int64_t small_m = fbx_cpu_small_m_max();
  if (M > 1 && !mat_vec && !(packed && !ta && M <= small_m)) {
    fbx_cpu_gemm_desc d = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = alpha, .A = a, .lda = ta ? M : K,
                           .B = b, .ldb = tb ? K : N, .Bpk = packed ? st->packed : NULL, .C = y, .ldc = N,
                           .nbatch = nbatch, .brank = obr, .c_batch = y_mat};
    for (int i = 0; i < obr; i++) {
      d.bdims[i] = g.odims[i];
      d.a_st[i] = g.ast[i] * a_mat;
      d.b_st[i] = g.bst[i] * b_mat;
    }
    info->variant = packed ? "gemm_f32_blocked_packed_b" : "gemm_f32_blocked";
    info->reason = !packed      ? "M>1: blocked GEMM, A and B packed per block into the GEMM workspace"
                   : nbatch == 1 ? "M>1: prepacked-B GEMM, constant B packed at compile, A packed once into "
                                   "k-major slivers shared by the workers"
                                 : "M>1: blocked GEMM, constant B packed at compile, A packed per K block";
    return fbx_cpu_gemm(c, &d);
  }
  if (M == 1 && !packed && nbatch > 1 && K * N * (int64_t)sizeof(float) < FBX__MM_BGEMV_BYTES) {
    info->variant = "gemv_f32_batched";
    info->reason = "M=1, dynamic B, small matrices: one matrix per thread, all batches in one parallel-for";
    fbx__mm_bgemv j = {.g = &g, .a = a, .b = b, .y = y, .a_mat = a_mat, .b_mat = b_mat, .y_mat = y_mat,
                       .K = K, .N = N, .tb = tb, .alpha = alpha};
    fbx_cpu_par(c, nbatch, 1 + 16384 / (K * N + 1), fbx__mm_bgemv_task, &j);
    return NULL;
  }
  for (int64_t bi = 0; bi < nbatch; bi++) {
    int64_t oa, ob;
    fbx_matmul_geom_batch(&g, bi, &oa, &ob);
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
