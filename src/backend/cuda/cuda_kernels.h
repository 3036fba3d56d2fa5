/* The interface between the CUDA backend's host code (.c, built by the C
 * compiler with -Werror) and its kernels (.cu, built by nvcc). Plain C
 * structs passed by value as kernel parameters (each well under CUDA's 4 KiB
 * parameter limit), and one extern "C" launcher per kernel family; every
 * launcher enqueues on the given stream and returns the launch's
 * cudaError_t (0 = success). No project header is included here: the .cu
 * side is C++ and sees only this file and ir_ops.h. */
#ifndef FBX_CUDA_KERNELS_H
#define FBX_CUDA_KERNELS_H

#include <stdint.h>
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 (default): kernels of the .cu files launch with programmatic stream
 * serialization (cuda_launch.cuh); 0: FUSEBOX_CUDA_PDL=0 at the first context
 * (fbx_cuda_pdl_init, cuda_util.c). */
#ifndef __CUDACC_RTC__
extern int fbx_cuda_pdl;
#endif

#define FBX_CUDA_RANK 8        /* = FBX_MAX_RANK (checked in cuda_internal.h) */
#define FBX_CUDA_EW_MAX_IN 16  /* fused programs with more inputs are declined */
#define FBX_CUDA_EW_MAX_REGS 128 /* inputs + instructions of one program */
#define FBX_CUDA_EW_INLINE 48    /* programs up to this long travel inside the kernel parameters */

/* Element kinds the kernels load and store (a subset of fbx_dtype). */
typedef enum fbx_cuda_ek_kind {
  FBX_CUDA_EK_F32, FBX_CUDA_EK_F16, FBX_CUDA_EK_I64, FBX_CUDA_EK_I32, FBX_CUDA_EK_I16,
  FBX_CUDA_EK_I8, FBX_CUDA_EK_U8, FBX_CUDA_EK_U16, FBX_CUDA_EK_U32, FBX_CUDA_EK_BOOL,
} fbx_cuda_ek_kind;

/* ---- elementwise programs (cuda_ew.cu) ----
 * Registers 0..n_in-1 are the inputs (broadcast through strides), register
 * n_in+i the result of instruction i. A register holds a float (F32/F16
 * kinds, computed in fp32 and rounded to half after each F16 instruction) or
 * an int64 (every integer kind and bool, wrapped to its width). */
typedef struct fbx_cuda_ew_ins {
  int op;                      /* fbx_ir_op */
  int a, b, c;                 /* operand registers */
  int ek;                      /* result kind */
  float alpha, beta, gamma;    /* params.ew */
} fbx_cuda_ew_ins;

typedef struct fbx_cuda_ew_args {
  int64_t n;                   /* output elements */
  int rank;
  int n_in, n_ins, out_reg;
  int64_t out_dims[FBX_CUDA_RANK];
  int64_t in_strides[FBX_CUDA_EW_MAX_IN][FBX_CUDA_RANK]; /* elements; 0 on broadcast dims */
  const void *in[FBX_CUDA_EW_MAX_IN];
  unsigned char in_ek[FBX_CUDA_EW_MAX_IN];
  unsigned char in_same[FBX_CUDA_EW_MAX_IN];  /* 1: input has the output's shape (offset = index) */
  void *out;
  int out_ek;
  const fbx_cuda_ew_ins *prog; /* device memory, n_ins entries; NULL: the program is in inline_prog */
  fbx_cuda_ew_ins inline_prog[FBX_CUDA_EW_INLINE];
} fbx_cuda_ew_args;

int fbx_cuda_launch_ew(const fbx_cuda_ew_args *a, cudaStream_t s);

/* ---- strided copy: y[i] = x[base + sum_d idx_d(i) * strides[d]] (cuda_movement.cu) ----
 * Transpose, Slice, Expand and Tile (mod_dims) are this one kernel. */
typedef struct fbx_cuda_copy_args {
  int64_t n;                   /* output elements */
  int rank;
  int esize;                   /* 1, 2, 4 or 8 bytes */
  int64_t out_dims[FBX_CUDA_RANK];
  int64_t strides[FBX_CUDA_RANK]; /* input element strides per output dim (may be negative) */
  int64_t mod_dims[FBX_CUDA_RANK];/* 0 = none, else input index = output index % mod (Tile) */
  int64_t base;                /* input element offset of output index 0 */
  const void *x;
  void *y;
} fbx_cuda_copy_args;

int fbx_cuda_launch_copy(const fbx_cuda_copy_args *a, cudaStream_t s);

/* Concat along one axis in one launch: the output viewed (outer, pitch) in
 * elements, part p filling columns [off[p], off[p+1]) of every row from its
 * own (outer, off[p+1] - off[p]) buffer. */
#define FBX_CUDA_CONCAT_MAX 16
typedef struct fbx_cuda_concat_args {
  int64_t n, pitch;            /* output elements; elements per output row */
  int n_parts, esize;          /* esize: 1, 2, 4 or 8 bytes */
  int64_t off[FBX_CUDA_CONCAT_MAX + 1];
  const void *src[FBX_CUDA_CONCAT_MAX];
  void *y;
} fbx_cuda_concat_args;

int fbx_cuda_launch_concat(const fbx_cuda_concat_args *a, cudaStream_t s);

/* Gather along one axis: x viewed (outer, axis_len, inner), indices n_idx
 * (I64 or I32), y (outer, n_idx, inner). Out-of-range indices write zeros
 * and set *err_flag to 1 (checked at synchronize). */
int fbx_cuda_launch_gather(const void *x, const void *idx, int idx_i64, void *y, int esize, int64_t outer,
                           int64_t axis_len, int64_t inner, int64_t n_idx, int *err_flag, cudaStream_t s);
/* y[i] = value (esize bytes, little-endian bit pattern in value_bits). */
int fbx_cuda_launch_fill(void *y, int esize, uint64_t value_bits, int64_t n, cudaStream_t s);
/* y[i] = start + i * delta, as kind ek (F32, I64, I32). */
int fbx_cuda_launch_range(void *y, int ek, double startf, double deltaf, int64_t starti, int64_t deltai,
                          int64_t n, cudaStream_t s);

/* ---- GEMV-shaped MatMul (cuda_gemv.cu), float32 ----
 * y[b*sy + n] = alpha * sum_k x[b*sx + k] * Bop(b, k, n) for n < N, b < batch (<= 65535), where
 * Bop(b, k, n) = B[b*sb + n*K + k] when b_nk (B stored (N, K)), else B[b*sb + k*N + n].
 * Strides in elements (0 = broadcast). */
int fbx_cuda_launch_gemv(const float *x, const float *B, float *y, int64_t N, int64_t K, int64_t batch,
                         int64_t sx, int64_t sb, int64_t sy, float alpha, int b_nk, cudaStream_t s);

/* ---- softmax / norms / reductions (cuda_norm.cu), float32 ---- */
/* x viewed (outer, n, inner); softmax over n. log_mode 1 = LogSoftmax, 2 = Hardmax. */
int fbx_cuda_launch_softmax(const float *x, float *y, int64_t outer, int64_t n, int64_t inner, int log_mode,
                            cudaStream_t s);
/* rows x cols; y = (x - mean) * rsqrt(var + eps) * scale[c % scale_n] + bias[c % bias_n] */
int fbx_cuda_launch_layernorm(const float *x, const float *scale, int64_t scale_n, const float *bias,
                              int64_t bias_n, float *y, int64_t rows, int64_t cols, float eps, cudaStream_t s);
/* x (N, C, S): per (n, c) row, scale/bias indexed by c. */
int fbx_cuda_launch_instnorm(const float *x, const float *scale, const float *bias, float *y, int64_t N,
                             int64_t C, int64_t S, float eps, cudaStream_t s);

/* Reduction: one output per kept-index tuple; reduced dims enumerated by red_dims/red_strides,
 * kept dims by out_dims/out_strides (input strides of the kept dims). */
typedef struct fbx_cuda_reduce_args {
  int op;                      /* fbx_ir_op: REDUCE_* or ARGMAX/ARGMIN */
  int n_out_dims, n_red_dims;
  int64_t n_out, n_red;
  int64_t out_dims[FBX_CUDA_RANK], out_strides[FBX_CUDA_RANK];
  int64_t red_dims[FBX_CUDA_RANK], red_strides[FBX_CUDA_RANK];
  int select_last;             /* ARGMAX/ARGMIN */
  int int_bytes;               /* REDUCE_SUM of integers: 4 (int32) or 8 (int64) for x and y, else 0 */
  const float *x;              /* (int_bytes: int32_t / int64_t) */
  void *y;                     /* float, or int64 for ARGMAX/ARGMIN, or x's integer type */
} fbx_cuda_reduce_args;

int fbx_cuda_launch_reduce(const fbx_cuda_reduce_args *a, cudaStream_t s);

/* ---- convolution and pooling (cuda_conv.cu), float32, 2-D (1-D as H = 1) ---- */
typedef struct fbx_cuda_conv_geom {
  int64_t N, C, H, W;          /* input */
  int64_t M, OH, OW;           /* output channels and size */
  int64_t KH, KW, sh, sw, ph, pw, dh, dw; /* ph/pw: begin pads */
  int64_t group;
} fbx_cuda_conv_geom;

/* col (C/group * KH * KW, OH * OW) per group, for one image n: col[g] at g * Cg*KH*KW*OH*OW */
int fbx_cuda_launch_im2col(const float *x_n, float *col, const fbx_cuda_conv_geom *g, cudaStream_t s);
/* Direct convolution, one thread per output (small Cg*KH*KW: depthwise and the like). bias may be NULL. */
int fbx_cuda_launch_conv_direct(const float *x, const float *w, const float *bias, float *y,
                                const fbx_cuda_conv_geom *g, cudaStream_t s);
/* y (N, M, S) += bias[m] */
int fbx_cuda_launch_bias_add(float *y, const float *bias, int64_t N, int64_t M, int64_t S, cudaStream_t s);

/* ConvTranspose, one image: y (M, OH, OW) = bias[m] + sum over taps of col (M*KH*KW, H*W),
 * the GEMM W^T X per group laid out group after group (g->H/W: input, g->OH/OW: output). */
int fbx_cuda_launch_col2im(const float *col, const float *bias, float *y_n, const fbx_cuda_conv_geom *g, cudaStream_t s);

/* pools: op = MAXPOOL / AVGPOOL / LPPOOL; pad_end_h/w: end pads (count_include_pad region) */
typedef struct fbx_cuda_pool_args {
  int op;
  fbx_cuda_conv_geom g;        /* M = C, group unused */
  int64_t pe_h, pe_w;          /* end pads */
  int count_include_pad;
  float p;                     /* LPPOOL */
} fbx_cuda_pool_args;

int fbx_cuda_launch_pool(const float *x, float *y, const fbx_cuda_pool_args *a, cudaStream_t s);
/* global pools: rows of S elements -> one value; is_max selects max over mean */
int fbx_cuda_launch_global_pool(const float *x, float *y, int64_t rows, int64_t S, int is_max, cudaStream_t s);

/* ---- resize (cuda_resize.cu), float32: per-dim tap tables built on the host ---- */
typedef struct fbx_cuda_resize_tap {
  int64_t i0, i1;              /* source indices (nearest: i0 == i1) */
  float w1;                    /* linear: weight of i1 */
  int outside;                 /* tf_crop_and_resize outside the roi: extrapolation value */
} fbx_cuda_resize_tap;

typedef struct fbx_cuda_resize_args {
  int64_t n;                   /* output elements */
  int rank, linear;
  float extrap;
  int64_t out_dims[FBX_CUDA_RANK], in_strides[FBX_CUDA_RANK], tap_off[FBX_CUDA_RANK];
  unsigned char interp[FBX_CUDA_RANK]; /* linear: the dims that interpolate */
  const fbx_cuda_resize_tap *taps;     /* device memory */
  const float *x;
  float *y;
} fbx_cuda_resize_args;

int fbx_cuda_launch_resize(const fbx_cuda_resize_args *a, cudaStream_t s);

/* ---- decoder ops (com.microsoft): MatMulNBits (cuda_mnb.cu), GQA and
 * RotaryEmbedding (cuda_attention.cu), skip + RMS/LayerNorm (cuda_skipnorm.cu).
 * Device-side validation failures (a seqlens_k or position outside the cache)
 * store a code into *err_flag (FBX_CUDA_ERR_*), reported at synchronize. */
#define FBX_CUDA_ERR_GATHER 1    /* GATHER: index out of range */
#define FBX_CUDA_ERR_GQA 2       /* GQA: seqlens_k / total_sequence_length do not fit the cache or cos/sin */
#define FBX_CUDA_ERR_ROPE 3      /* ROTARY: position_ids outside the cos/sin cache */

/* Y (M, N) = A (M, K) @ dequant(W)^T (+ bias). W column n: ORT's packing
 * (4-bit: value 2i in the low nibble of byte i, 2i + 1 in the high one;
 * 8-bit: one byte each), kb blocks of block_size values, the column padded
 * with zeros to col_stride bytes (a multiple of 16: one uint4 load per lane).
 * w = q * scale - sz, sz = scale * zero point, per (n, block). */
typedef struct fbx_cuda_mnb_args {
  const float *a;              /* (M, K) */
  const uint8_t *w;            /* (N, col_stride) */
  const float *scale, *sz;     /* (N, kb) */
  const float *bias;           /* (N) or NULL */
  float *y;                    /* (M, N) */
  int64_t M, N, K, kb, col_stride;
  int bits, block_size;
  int a_vec;                   /* 1: A rows are 16-byte aligned (float4 loads) */
  int ksplit;                  /* 1: M == 1 with a long K splits K over a block's warps */
  int glu;                     /* 1 (M == 1 only): N weight columns, gate then up; y (1, N/2) = silu(gate) * up */
} fbx_cuda_mnb_args;

/* Small M: one warp per 4 columns (2 for M > 4), the weights dequantised in registers and
 * shared by up to 8 rows of A per pass. */
int fbx_cuda_launch_mnb_gemv(const fbx_cuda_mnb_args *a, cudaStream_t s);
/* y (M, F) = silu(gu[:, :F]) * gu[:, F:] of gu (M, 2F) (MATMUL_NBITS glu with M > 1). */
int fbx_cuda_launch_mnb_glu_rows(const float *gu, int64_t M, int64_t F, float *y, cudaStream_t s);
/* wf (nn, K) row-major = dequantised columns [n0, n0 + nn) (for a GEMM). */
int fbx_cuda_launch_mnb_dequant(const fbx_cuda_mnb_args *a, int64_t n0, int64_t nn, float *wf, cudaStream_t s);

/* SKIP_NORM rows x h: s = x (+ skip[(r*h + i) % skip_n]) (+ bias); RMSNorm
 * (simplified) y = s / sqrt(mean(s^2) + eps) * gamma, LayerNorm
 * y = (s - mean) / sqrt(mean(s^2) - mean^2 + eps) * gamma (+ beta);
 * sum (rows, h) = s and inv (rows) = 1 / sqrt(...) when non-NULL. */
typedef struct fbx_cuda_skipnorm_args {
  const float *x, *skip, *gamma, *beta, *bias;
  float *y, *sum, *inv;
  int64_t rows, h, skip_n;
  float eps;
  int simplified;
} fbx_cuda_skipnorm_args;

int fbx_cuda_launch_skipnorm(const fbx_cuda_skipnorm_args *a, cudaStream_t s);

/* ROTARY: x (B, S, N*H) (bnsh 0) or (B, N, S, H) (bnsh 1); position of token
 * (b, s) = pos[b*S + s], or pos[0] + s when n_pos == 1; cos/sin (max_pos,
 * half_cache); pairs over the first rot dims (interleaved (2i, 2i+1) or
 * half-split (i, i + rot/2)), dims >= rot copied. */
typedef struct fbx_cuda_rope_args {
  const float *x;
  float *y;
  const int64_t *pos;
  int64_t n_pos;
  const float *cs, *sn;
  int64_t half_cache, max_pos;
  int64_t B, S, N, H, rot;
  int bnsh, interleaved;
  int *err_flag;
} fbx_cuda_rope_args;

int fbx_cuda_launch_rope(const fbx_cuda_rope_args *a, cudaStream_t s);

/* GQA (ORT's GroupQueryAttention, causal). Per batch entry b, read on the
 * device: total_b = seqlens[b] + 1; past_b = 0 on the first prompt
 * (S == *total), else total_b - S. The new (rotated) keys and values go to
 * present rows [past_b, past_b + S); unless shared (past and present are the
 * same buffers), present rows [0, past_b) are copied from past and the rest
 * zeroed. Query s attends to keys [0, min(past_b + s + 1, total_b)).
 * The attention runs one block per (b, kv group, query row, key split of
 * split_len keys): every head of the group against each key row; with
 * n_split > 1, partials (max, sum, o) go to part and a second kernel combines. */
typedef struct fbx_cuda_gqa_args {
  const float *q;              /* (B, S, q_row): the query, or packed q|k|v */
  const float *k, *v;          /* (B, S, kv_row), or q (packed: at k_off / v_off inside a token) */
  int64_t q_row, kv_row, k_off, v_off;
  const float *past_k, *past_v;/* (B, kvh, P, H) or NULL (P = 0) */
  float *pk, *pv;              /* present (B, kvh, L, H) */
  float *out;                  /* (B, S, nh*H) */
  const int32_t *seqlens;      /* (B) */
  const int32_t *total;        /* scalar */
  const float *cs, *sn;        /* (max_pos, rot/2) or NULL (no rotary) */
  int64_t rot, max_pos;
  int64_t B, S, nh, kvh, H, L, P;
  float scale, softcap;
  int interleaved, shared;
  int fuse_kv;                 /* shared: the attention kernel stores the new rows (no kv_write launch) */
  int split_len, n_split;
  int tile;                    /* the attention blocks copy their split's K / V rows to shared memory */
  int warps;                   /* the warp-per-head decode kernel (tile and fbx_cuda_gqa_decode_fits: the host's
                                  choice) */
  float *part;                 /* (B, S, nh, n_split, H + 2) when n_split > 1 */
  int *counters;               /* n_split > 1: B * kvh * S ints, zero, or NULL. Set: the last split block of
                                  each (b, g, s) to finish merges the partials itself (no combine launch) */
  int *err_flag;
} fbx_cuda_gqa_args;

/* Dynamic shared memory (bytes) one attention block needs (tile_kv: with the K / V tiles). */
size_t fbx_cuda_gqa_smem(int64_t hpg, int64_t H, int64_t split_len, int tile_kv);
/* Dynamic shared memory (bytes) of the combine kernel over n_split partials. */
size_t fbx_cuda_gqa_combine_smem(int64_t n_split);
int fbx_cuda_launch_gqa(const fbx_cuda_gqa_args *a, cudaStream_t s);
/* The warp-per-head decode kernel (cuda_attention_decode.cu), which fbx_cuda_launch_gqa takes when
 * a.warps is set: the host sets it for a decode step with tiles when it fits: S 1, H 32 / 64 / 128, split_len a multiple of 32 up to 128,
 * 16-byte aligned present buffers, its shared memory within FBX_CUDA_GQA_SMEM_MAX. */
#define FBX_CUDA_GQA_SMEM_MAX ((size_t)48 << 10) /* dynamic shared memory without an opt-in */
size_t fbx_cuda_gqa_decode_smem(int64_t hpg, int64_t H, int64_t split_len);
int fbx_cuda_gqa_decode_fits(const fbx_cuda_gqa_args *a);
int fbx_cuda_launch_gqa_decode(const fbx_cuda_gqa_args *a, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
