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
  const float *x;
  void *y;                     /* float, or int64 for ARGMAX/ARGMIN */
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

#ifdef __cplusplus
}
#endif

#endif
