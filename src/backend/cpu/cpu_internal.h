/* Internal interface of the CPU backend: context, thread pool, scratch memory,
 * the kernel signature and one kernel declaration per IR op (generated from
 * the op X-macro, so an op without a kernel fails to link/compile). */
#ifndef FBX_BACKEND_CPU_INTERNAL_H
#define FBX_BACKEND_CPU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../base/alloc.h"
#include "../../base/status.h"
#include "../backend.h"

/* ---- thread pool (cpu_pool.c) ----
 * Persistent workers; the caller participates as worker 0. A parallel-for
 * splits [0, n) into at most `threads` contiguous chunks. fn must not call
 * fbx_cpu_pool_for itself (no nesting). */
typedef void (*fbx_cpu_task_fn)(void *arg, int64_t begin, int64_t end, int worker);
typedef struct fbx_cpu_pool fbx_cpu_pool;

fbx_status *fbx_cpu_pool_create(int threads, fbx_cpu_pool **out);
void fbx_cpu_pool_destroy(fbx_cpu_pool *p);
int fbx_cpu_pool_threads(const fbx_cpu_pool *p);
/* Runs fn over [0, n) split in chunks of at least `grain` items; name labels
 * the per-thread trace spans (cat "op.worker"). Single chunk -> inline call. */
void fbx_cpu_pool_for(fbx_cpu_pool *p, int64_t n, int64_t grain, fbx_cpu_task_fn fn, void *arg,
                      const char *name);

/* ---- backend context ---- */
typedef struct fbx_cpu_ctx {
  fbx_cpu_pool *pool;
  int threads;
  pthread_mutex_t run_lock;     /* run_node is serialised: one scratch, one pool */
  void *scratch;                /* 64-byte aligned, grows geometrically */
  size_t scratch_size;
  void *gemm_ws;                /* blocked GEMM packing workspace (cpu_gemm.c), grows geometrically */
  size_t gemm_ws_size;
  void *stage;                  /* a kernel's staged output (fbx_cpu_stage), grows geometrically */
  size_t stage_size;
  _Atomic size_t mem_in_use;    /* bytes held by buffer_alloc */
  const char *op_name;          /* name of the op being run (trace spans) */
} fbx_cpu_ctx;

/* Scratch of at least `bytes` (64-byte aligned), valid until the next call;
 * never freed by the kernel. NULL on OOM. */
void *fbx_cpu_scratch(fbx_cpu_ctx *c, size_t bytes);

/* The blocked GEMM's own workspace (separate from scratch, which a caller
 * such as ConvTranspose may hold across its GEMM call); same contract. */
void *fbx_cpu_gemm_ws(fbx_cpu_ctx *c, size_t bytes);

/* A third workspace, for a kernel that computes into a staging buffer while
 * its inner paths use scratch and the GEMM workspace (MATMUL_NBITS with glu:
 * gate and up columns, then silu(gate) * up into the output); same contract. */
void *fbx_cpu_stage(fbx_cpu_ctx *c, size_t bytes);

/* Parallel-for with the op name as trace label. */
static inline void fbx_cpu_par(fbx_cpu_ctx *c, int64_t n, int64_t grain, fbx_cpu_task_fn fn,
                               void *arg) {
  fbx_cpu_pool_for(c->pool, n, grain, fn, arg, c->op_name);
}

/* ---- kernels ---- */
#define FBX_CPU_KERNEL_ARGS                                                                   \
  fbx_cpu_ctx *c, const fbx_ir_node *node, void *state, const fbx_tensor *in, int n_in,       \
      fbx_tensor *out, int n_out, fbx_kernel_info *info

typedef fbx_status *(*fbx_cpu_kernel_fn)(FBX_CPU_KERNEL_ARGS);

/* Every elementwise op (EW1/EW2/EW3 classes) runs through the program
 * interpreter as a one-instruction program (cpu_ew.c). */
fbx_status *fbx_cpu_ew_run(FBX_CPU_KERNEL_ARGS);

/* ---- epilogues (cpu_ew.c) ----
 * A kernel whose node carries params.conv.epilogue applies that elementwise
 * program in place to ranges of its output right after computing them (hot
 * in cache). Program register params.conv.epilogue_reg reads the output
 * itself; the other registers, in order, are the node inputs in[first_extra..]
 * (broadcast to the output shape). Nodes without an epilogue: epi->prog NULL
 * and fbx_cpu_epi_apply does nothing. */
typedef struct fbx_cpu_epi {
  struct fbx__ew_plan *pl;
  struct fbx_cpu_epi_chain *chain; /* the register-chain form (cpu_epi_chain.h), or NULL: pl */
  const fbx_ir_ew_program *prog;   /* NULL: no epilogue */
  const fbx_tensor *out;
} fbx_cpu_epi;
/* Plans the epilogue in scratch; *caller_mem gets caller_bytes of scratch
 * for the kernel itself (NULL when 0), valid together with the plan (do not
 * call fbx_cpu_scratch again until the kernel is done). */
fbx_status *fbx_cpu_epi_begin(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                              int first_extra, fbx_tensor *out, size_t caller_bytes, void **caller_mem,
                              fbx_cpu_epi *epi);
/* Apply to flattened output elements [begin, end), as pool worker `worker`. */
void fbx_cpu_epi_apply(fbx_cpu_epi *epi, int64_t begin, int64_t end, int worker);
/* After the kernel: error if an instruction was unsupported. */
fbx_status *fbx_cpu_epi_end(fbx_cpu_epi *epi);

/* One kernel per op: fbx_cpu_k_<OP NAME>. Only the OTHER-class ones are defined. */
#define X(name, cls, mask) fbx_status *fbx_cpu_k_##name(FBX_CPU_KERNEL_ARGS);
FBX_IR_OP_LIST(X)
#undef X

/* node_prepare / node_release hooks per op family (NULL state = nothing). */
fbx_status *fbx_cpu_matmul_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node,
                                   const fbx_tensor *const *const_inputs, const fbx_tensor *inputs,
                                   void **state);
void fbx_cpu_matmul_release(void *state);
/* MATMUL_NBITS (cpu_mnb.c): constant B / scales / zero points repacked once. */
fbx_status *fbx_cpu_mnb_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                const fbx_tensor *inputs, void **state);
void fbx_cpu_mnb_release(void *state);

/* MATMUL_INT (cpu_qmatmul.c): constant 8-bit B (K, N) packed once into the integer GEMM's panels. */
fbx_status *fbx_cpu_qmatmul_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                    const fbx_tensor *inputs, void **state);
void fbx_cpu_qmatmul_release(void *state);

/* CONV (cpu_conv.c): constant W packed for the few-output-positions path. */
fbx_status *fbx_cpu_conv_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                 const fbx_tensor *inputs, void **state);
void fbx_cpu_conv_release(void *state);
/* LSTM / GRU / RNN (cpu_rnn.c): constant W / R packed once per direction. */
fbx_status *fbx_cpu_rnn_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                const fbx_tensor *inputs, void **state);
void fbx_cpu_rnn_release(void *state);

/* ---- GEMV (cpu_gemv.c) ---- */
#define FBX_CPU_GEMV_PANEL 16
/* Packed B: panels of 16 columns, K-major: packed[(p*K + k)*16 + j] = B[k, p*16+j]
 * (zero padded). Caller frees with fbx_free_aligned. */
fbx_status *fbx_cpu_gemv_pack(const float *b, int64_t K, int64_t N, bool trans_b, float **out);
/* y(N) = alpha * x(K) @ B, B packed as above. */
void fbx_cpu_gemv_packed(fbx_cpu_ctx *c, const float *x, const float *packed, float *y, int64_t K,
                         int64_t N, float alpha);
/* Y(M,N) (row stride ldy) = alpha * A(M,K) (row stride lda) @ B, B packed as
 * above: register-blocked kernel for small M (prefill): 12x32 AVX-512 where the CPU has it
 * (cpu_gemm_avx512.c), else 6x16 AVX2. */
/* The largest M that the small-M packed kernel (fbx_cpu_gemm_packed) takes over the prepacked-B
 * GEMM on this CPU (cpu_matmul.c says why). */
int64_t fbx_cpu_small_m_max(void);
void fbx_cpu_gemm_packed(fbx_cpu_ctx *c, const float *a, int64_t lda, const float *packed, float *y,
                         int64_t ldy, int64_t M, int64_t K, int64_t N, float alpha);
/* y(N) = alpha * x(K) @ B with B row-major (K,N) (trans_b = 0) or (N,K) (trans_b = 1). */
void fbx_cpu_gemv_plain(fbx_cpu_ctx *c, const float *x, const float *b, float *y, int64_t K,
                        int64_t N, bool trans_b, float alpha);
/* The same on the calling thread (a caller parallel over batches). */
void fbx_cpu_gemv_plain_st(const float *x, const float *b, float *y, int64_t K, int64_t N, bool trans_b,
                           float alpha);

/* ---- conv GEMM (cpu_conv_gemm.c) ----
 * bpk: column block (K, width) packed in panels of 16 positions, K-major:
 * bpk[(q*K + k)*16 + j] = B[k, q*16 + j] (32-byte aligned, last panel zero padded).
 * Y rows [m0, m1) (row stride ldy, y = column 0 of the block) =
 * W rows (row stride ldw) @ B + bias[m] (bias may be NULL). */
void fbx_cpu_conv_gemm(const float *w, int64_t ldw, const float *bias, const float *bpk, int64_t K,
                       int64_t width, int64_t m0, int64_t m1, float *y, int64_t ldy);
/* The same with B row k of column block q read straight from xb + 16*q + koff[k]
 * (unaligned; every full 16-column block must be readable, also past width).
 * acc 1: Y += W @ B, bias ignored (a later chunk of K); acc 0: Y = W @ B + bias. */
void fbx_cpu_conv_gemm_off(const float *w, int64_t ldw, const float *bias, const float *xb, const int32_t *koff,
                           int64_t K, int64_t width, int64_t m0, int64_t m1, float *y, int64_t ldy, int acc);
/* Pack row r of B (width contiguous floats at src) into bpk. */
void fbx_cpu_conv_pack_row(float *bpk, int64_t K, int64_t r, const float *src, int64_t width);

/* The elementwise kernels' float32 Sigmoid and Tanh over n floats (cpu_ew.c;
 * a == o allowed), for kernels that apply them inside (the recurrent cells). */
void fbx_cpu_sigmoid_f32(const float *a, float *o, int64_t n);
void fbx_cpu_tanh_f32(const float *a, float *o, int64_t n);

/* ---- shared helpers (cpu_util.c) ---- */
int64_t fbx_cpu_numel(const fbx_tensor *t);
/* Row-major strides of t in elements. */
void fbx_cpu_strides(const fbx_tensor *t, int64_t *strides);
/* Read element i of an integer (or float) host tensor as int64. */
int64_t fbx_cpu_read_i64(const fbx_tensor *t, int64_t i);
double fbx_cpu_read_f64(const fbx_tensor *t, int64_t i);
/* Write a double into element i of t, converted to t's dtype. */
void fbx_cpu_write_f64(fbx_tensor *t, int64_t i, double v);
/* dst (contiguous, dims[0..rank)) <- src elements at sum(i_d * sstrides[d])
 * (strides in elements, may be 0 or negative). rank <= 2*FBX_MAX_RANK.
 * Parallel over the pool for large copies. */
void fbx_cpu_strided_copy(fbx_cpu_ctx *c, void *dst, const void *src, size_t esz, int rank,
                          const int64_t *dims, const int64_t *sstrides);
/* C(M,N) = alpha * op(A) @ op(B) + beta * C, then C[m, :] += row_bias[m]
 * (row_bias may be NULL), row-major with leading dims; the blocked GEMM of
 * cpu_gemm.c on c's pool. Error only on OOM of its workspace. */
fbx_status *fbx_cpu_sgemm_par(fbx_cpu_ctx *c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                              int64_t ldc, const float *row_bias);

static inline bool fbx_cpu_present(const fbx_tensor *in, int n_in, int i) {
  return i < n_in && in[i].data != NULL && in[i].rank >= 0;
}

#endif
