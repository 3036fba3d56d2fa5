/* MATMUL_NBITS on CUDA (kernels in cuda_mnb.cu): Y (M, N) = A (M, K) @
 * dequant(B)^T (+ bias), ORT's MatMulNBits, float32 A.
 *
 * node_prepare uploads the constant weights once: B as ORT packs it, each
 * column padded to a multiple of 16 bytes (the GEMV's uint4 loads), and per
 * (column, block) the scale and scale * zero point (default zero point
 * 2^(bits-1); packed uint8 or float zero points as given).
 *
 * M <= FBX__MNB_GEMV_M: the register-dequantising GEMV (bandwidth-bound: the
 * packed weights are read once per 8 rows). Larger M (prefill): column chunks
 * are dequantised to float scratch and multiplied with cuBLASLt.
 * accuracy_level 4 uses the same float arithmetic: ORT's CUDA EP does too
 * (only its CPU EP quantises A to int8), so level 4 on this device matches
 * the float64 reference within the level-0 tolerance.
 * glu (params.nbits.glu, ir_pack_nbits.c: N weight columns, gate then up, Y
 * (M, N/2) = silu(gate) * up): M == 1 in one GEMV launch that takes each
 * output's gate and up column together; other M compute the N columns into
 * scratch as above and a second launch combines them. */
#include <string.h>

#include "../../base/alloc.h"
#include "cuda_internal.h"

#define FBX__MNB_GEMV_M 16
#define FBX__MNB_CHUNK_BYTES ((size_t)64 << 20) /* float scratch of one dequantised column chunk */

struct fbx_cuda_mnb_state {
  int64_t K, N, kb, col_stride;
  int bits, block_size;
  uint8_t *w;        /* device (N, col_stride) */
  float *scale, *sz; /* device (N, kb) */
};

bool fbx_cuda_s_mnb(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size) {
  const int64_t K = node->params.nbits.K, N = node->params.nbits.N;
  const int bits = node->params.nbits.bits, bs = node->params.nbits.block_size;
  if (n_in < 3 || K < 1 || N < 1) {
    snprintf(why, why_size, "MATMUL_NBITS needs A, B, scales and K, N >= 1");
    return false;
  }
  if ((bits != 4 && bits != 8) || bs < 16 || bs > 128 || (bs & (bs - 1))) {
    snprintf(why, why_size, "MATMUL_NBITS bits %d block_size %d (bits 4/8, block_size 16..128 powers of two)", bits, bs);
    return false;
  }
  if (in[0].dtype != FBX_DTYPE_F32) {
    snprintf(why, why_size, "MATMUL_NBITS with A of dtype %s (float32 only)", fbx_dtype_name(in[0].dtype));
    return false;
  }
  if (in[1].dtype != FBX_DTYPE_U8 || in[2].dtype != FBX_DTYPE_F32) {
    snprintf(why, why_size, "MATMUL_NBITS with B %s / scales %s (uint8 / float32 only)", fbx_dtype_name(in[1].dtype),
             fbx_dtype_name(in[2].dtype));
    return false;
  }
  if (n_in > 3 && in[3].rank >= 0 && in[3].dtype != FBX_DTYPE_U8 && in[3].dtype != FBX_DTYPE_F32) {
    snprintf(why, why_size, "MATMUL_NBITS with zero_points of dtype %s", fbx_dtype_name(in[3].dtype));
    return false;
  }
  if (n_in > 4 && in[4].rank >= 0 && in[4].dtype != FBX_DTYPE_F32) {
    snprintf(why, why_size, "MATMUL_NBITS with bias of dtype %s (float32 only)", fbx_dtype_name(in[4].dtype));
    return false;
  }
  return true;
}

/* q value k of a packed row (bits 4: low nibble first). */
static unsigned fbx__cmnb_q(const uint8_t *row, int bits, int64_t k) {
  if (bits == 8) return row[k];
  return (k & 1) ? row[k >> 1] >> 4 : row[k >> 1] & 15u;
}

void fbx_cuda_mnb_release(fbx_backend *be, fbx_cuda_mnb_state *s) {
  if (!s) return;
  be->vt->buffer_free(be, s->w);
  be->vt->buffer_free(be, s->scale);
  be->vt->buffer_free(be, s->sz);
  fbx_free(s);
}

fbx_status *fbx_cuda_mnb_prepare(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                 fbx_cuda_mnb_state **out) {
  *out = NULL;
  const fbx_ir_params *p = &node->params;
  /* not constant: run_node declines with a reason */
  if (!const_inputs || node->n_inputs < 3 || !const_inputs[1] || !const_inputs[2]) return NULL;
  const bool has_z = node->n_inputs > 3 && node->inputs[3] != FBX_IR_NONE;
  const fbx_tensor *B = const_inputs[1], *S = const_inputs[2], *Z = has_z ? const_inputs[3] : NULL;
  if (has_z && !Z) return NULL;
  const int64_t K = p->nbits.K, N = p->nbits.N, bs = p->nbits.block_size, kb = (K + bs - 1) / bs;
  const int bits = p->nbits.bits;
  if (K < 1 || N < 1 || (bits != 4 && bits != 8) || bs < 16) return NULL; /* supports() declines these */
  const int64_t col_bytes = kb * bs * bits / 8, stride = (col_bytes + 15) & ~(int64_t)15;
  if (B->dtype != FBX_DTYPE_U8 || fbx_tensor_numel(B) != N * col_bytes || S->dtype != FBX_DTYPE_F32 ||
      fbx_tensor_numel(S) != N * kb)
    return FBX_ERR_ARG("device 'cuda': MATMUL_NBITS: B (%lld bytes) / scales (%lld) do not match N=%lld K=%lld "
                       "block_size=%lld", (long long)fbx_tensor_numel(B), (long long)fbx_tensor_numel(S), (long long)N,
                       (long long)K, (long long)bs);
  const int64_t zrow = p->nbits.zp_u8 ? (kb * bits + 7) / 8 : kb;
  if (Z && (fbx_tensor_numel(Z) != N * zrow || Z->dtype != (p->nbits.zp_u8 ? FBX_DTYPE_U8 : FBX_DTYPE_F32)))
    return FBX_ERR_ARG("device 'cuda': MATMUL_NBITS: zero_points have %lld elements, want %lld",
                       (long long)fbx_tensor_numel(Z), (long long)(N * zrow));
  fbx_cuda_mnb_state *s = fbx_calloc(1, sizeof *s);
  uint8_t *hw = fbx_calloc((size_t)(N * stride), 1);
  float *hs = fbx_malloc(sizeof(float) * (size_t)(N * kb)), *hz = fbx_malloc(sizeof(float) * (size_t)(N * kb));
  fbx_status *st = NULL;
  if (!s || !hw || !hs || !hz) {
    st = FBX_ERR_OOM();
    goto done;
  }
  *s = (fbx_cuda_mnb_state){.K = K, .N = N, .kb = kb, .col_stride = stride, .bits = bits, .block_size = (int)bs};
  for (int64_t n = 0; n < N; n++) {
    memcpy(hw + n * stride, (const uint8_t *)B->data + n * col_bytes, (size_t)col_bytes);
    for (int64_t b = 0; b < kb; b++) {
      float z = (float)(1 << (bits - 1));
      if (Z && p->nbits.zp_u8) z = (float)fbx__cmnb_q((const uint8_t *)Z->data + n * zrow, bits, b);
      else if (Z) z = ((const float *)Z->data)[n * kb + b];
      float sc = ((const float *)S->data)[n * kb + b];
      hs[n * kb + b] = sc;
      hz[n * kb + b] = sc * z;
    }
  }
  const size_t wb = (size_t)(N * stride), fb = sizeof(float) * (size_t)(N * kb);
  if ((st = be->vt->buffer_alloc(be, wb, (void **)&s->w))) goto done;
  if ((st = be->vt->buffer_alloc(be, fb, (void **)&s->scale))) goto done;
  if ((st = be->vt->buffer_alloc(be, fb, (void **)&s->sz))) goto done;
  if ((st = be->vt->copy_from_host(be, s->w, hw, wb))) goto done;
  if ((st = be->vt->copy_from_host(be, s->scale, hs, fb))) goto done;
  st = be->vt->copy_from_host(be, s->sz, hz, fb); /* synchronous: the host buffers may go */
done:
  fbx_free(hw);
  fbx_free(hs);
  fbx_free(hz);
  if (st) fbx_cuda_mnb_release(be, s);
  else *out = s;
  return st;
}

fbx_status *fbx_cuda_k_mnb(FBX_CUDA_KERNEL_ARGS) {
  const fbx_cuda_mnb_state *s = c->node_state;
  if (!s) return FBX_ERR_NOTIMPL("device 'cuda': MATMUL_NBITS: B, scales and zero_points must be constants "
                                 "(uploaded at compile)");
  (void)n_out;
  const fbx_tensor *A = &in[0];
  if (A->rank < 1 || A->dims[A->rank - 1] != s->K)
    return FBX_ERR_ARG("device 'cuda': MATMUL_NBITS: A's last dim is not K=%lld", (long long)s->K);
  const float *bias = NULL;
  if (fbx_cuda_present(in, n_in, 4)) {
    if (fbx_tensor_numel(&in[4]) != s->N) return FBX_ERR_ARG("device 'cuda': MATMUL_NBITS: bias shape");
    bias = in[4].data;
  }
  const int64_t M = fbx_tensor_numel(A) / s->K, N = s->N, K = s->K;
  const bool glu = node->params.nbits.glu;
  if (glu && N % 2) return FBX_ERR_ARG("device 'cuda': MATMUL_NBITS: glu with an odd N=%lld", (long long)N);
  info->flops = 2.0 * (double)M * (double)N * (double)K;
  if (M == 0) return NULL;
  /* scratch, one piece per node: M > FBX__MNB_GEMV_M: a chunk of columns dequantised to float (chunk,
   * K); glu with M > 1: the N columns (M, N) after it, combined into Y at the end */
  int64_t chunk = (int64_t)(FBX__MNB_CHUNK_BYTES / (sizeof(float) * (size_t)K));
  chunk = chunk < 64 ? 64 : chunk & ~(int64_t)63;
  if (chunk > N) chunk = N;
  const size_t wf_bytes = M > FBX__MNB_GEMV_M ? ((sizeof(float) * (size_t)(chunk * K) + 255) & ~(size_t)255) : 0;
  const size_t gu_bytes = glu && M > 1 ? sizeof(float) * (size_t)(M * N) : 0;
  char *scratch = NULL;
  if (wf_bytes + gu_bytes) FBX_TRY(fbx_cuda_scratch(c, wf_bytes + gu_bytes, (void **)&scratch));
  float *wf = (float *)scratch, *gu = gu_bytes ? (float *)(scratch + wf_bytes) : NULL;
  fbx_cuda_mnb_args a = {.a = A->data, .w = s->w, .scale = s->scale, .sz = s->sz, .bias = bias,
                         .y = gu ? gu : out[0].data,
                         .M = M, .N = N, .K = K, .kb = s->kb, .col_stride = s->col_stride, .bits = s->bits,
                         .block_size = s->block_size,
                         .a_vec = (K % 4 == 0) && ((uintptr_t)A->data % 16 == 0), .ksplit = c->mnb_ksplit,
                         .glu = glu && M == 1};
  const bool lvl4 = node->params.nbits.accuracy_level == 4;
  if (glu && M == 1) {
    info->variant = s->bits == 4 ? "mnb_int4_gemv_glu" : "mnb_int8_gemv_glu";
    info->reason = "glu, M = 1: each output's gate and up columns dequantised in registers by one warp, silu(gate) * "
                   "up written by it (one launch)";
    return fbx_cuda_launched(fbx_cuda_launch_mnb_gemv(&a, c->stream), "MATMUL_NBITS");
  }
  if (M <= FBX__MNB_GEMV_M) {
    info->variant = s->bits == 4 ? "mnb_int4_gemv_reg" : "mnb_int8_gemv_reg";
    info->reason = lvl4 ? "M <= 16: dequantised in registers, one warp per 2-4 columns; accuracy_level 4 in float "
                          "(as ORT's CUDA EP)"
                        : "M <= 16: dequantised in registers, one warp per 2-4 columns";
    FBX_TRY(fbx_cuda_launched(fbx_cuda_launch_mnb_gemv(&a, c->stream), "MATMUL_NBITS"));
    return gu ? fbx_cuda_launched(fbx_cuda_launch_mnb_glu_rows(gu, M, N / 2, out[0].data, c->stream), "MATMUL_NBITS glu")
              : NULL;
  }
  /* prefill: chunks of columns dequantised to float, one cuBLASLt GEMM per chunk
   * (y[:, n0:n0+nn] = A @ chunk^T; rows of y are N apart) */
  info->variant = s->bits == 4 ? "mnb_int4_dequant_gemm" : "mnb_int8_dequant_gemm";
  info->reason = lvl4 ? "M > 16: column chunks dequantised to float + cuBLASLt; accuracy_level 4 in float "
                        "(as ORT's CUDA EP)"
                      : "M > 16: column chunks dequantised to float + cuBLASLt";
  float *y = a.y;
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t nn = N - n0 < chunk ? N - n0 : chunk;
    FBX_TRY(fbx_cuda_launched(fbx_cuda_launch_mnb_dequant(&a, n0, nn, wf, c->stream), "MATMUL_NBITS dequantise"));
    FBX_TRY(fbx_cuda_gemm_f32(c, false, true, M, nn, K, 1.0f, A->data, K, 0, wf, K, 0, 0.0f, y + n0, N, 0, 1));
  }
  if (bias) /* y (M rows, N) += bias[n]: the bias kernel's (N images, M channels, S = 1) */
    FBX_TRY(fbx_cuda_launched(fbx_cuda_launch_bias_add(y, bias, M, N, 1, c->stream), "MATMUL_NBITS bias"));
  if (gu) FBX_TRY(fbx_cuda_launched(fbx_cuda_launch_mnb_glu_rows(gu, M, N / 2, out[0].data, c->stream), "MATMUL_NBITS glu"));
  return NULL;
}
