/* Conv and pooling on CUDA, float32, 1-D and 2-D. Geometry (kernel, pads
 * from auto_pad, output size) comes from the IR's one definition,
 * fbx_ir_conv_geometry. Conv: a direct kernel when each output reduces
 * over few taps (depthwise, Cg*KH*KW <= 16), else im2col per image (skipped
 * for 1x1/stride-1 convolutions) and one cuBLASLt GEMM batched over groups. */
#include <string.h>

#include "../../exec/exec_compiled.h"
#include "cuda_internal.h"

#define FBX__CONV_DIRECT_MAX_TAPS 16

bool fbx_cuda_s_conv(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size) {
  if (!fbx_cuda_s_f32(node, in, n_in, why, why_size)) return false;
  if (node->params.conv.nd < 1 || node->params.conv.nd > 2) {
    snprintf(why, why_size, "%s with %d spatial dims (1-D and 2-D only)", fbx_ir_op_name(node->op), node->params.conv.nd);
    return false;
  }
  if ((node->op == FBX_IR_OP_CONV || node->op == FBX_IR_OP_CONV_TRANSPOSE) && node->params.conv.epilogue) {
    snprintf(why, why_size, "%s with a fused epilogue", fbx_ir_op_name(node->op));
    return false;
  }
  if (node->op == FBX_IR_OP_MAXPOOL && node->n_outputs > 1 && node->outputs[1] != FBX_IR_NONE) {
    snprintf(why, why_size, "MAXPOOL with an Indices output");
    return false;
  }
  return true;
}

/* NC[H]W geometry of x with weight w (NULL for pools); end pads in *pe_h, *pe_w */
static fbx_status *fbx__conv_geom(const fbx_ir_node *node, const fbx_tensor *x, const fbx_tensor *w,
                                  fbx_cuda_conv_geom *g, int64_t *pe_h, int64_t *pe_w) {
  const int nd = node->params.conv.nd;
  if (nd < 1 || nd > 2 || x->rank != nd + 2)
    return FBX_ERR_NOTIMPL("device 'cuda': %s: %d spatial dims", fbx_ir_op_name(node->op), nd);
  int64_t k[3], pads[6], os[3];
  FBX_TRY(fbx_ir_conv_geometry(node, x, w, k, pads, os));
  memset(g, 0, sizeof *g);
  const int64_t *s = node->params.conv.strides, *d = node->params.conv.dilations;
  g->N = x->dims[0];
  g->C = x->dims[1];
  g->group = node->params.conv.group > 0 ? node->params.conv.group : 1;
  g->M = w ? w->dims[0] : g->C;
  if (nd == 1) {
    g->H = 1; g->OH = 1; g->KH = 1; g->sh = 1; g->dh = 1; g->ph = 0; *pe_h = 0;
    g->W = x->dims[2]; g->OW = os[0]; g->KW = k[0];
    g->sw = s[0] ? s[0] : 1; g->dw = d[0] ? d[0] : 1; g->pw = pads[0]; *pe_w = pads[1];
  } else {
    g->H = x->dims[2]; g->W = x->dims[3]; g->OH = os[0]; g->OW = os[1]; g->KH = k[0]; g->KW = k[1];
    g->sh = s[0] ? s[0] : 1; g->sw = s[1] ? s[1] : 1; g->dh = d[0] ? d[0] : 1; g->dw = d[1] ? d[1] : 1;
    g->ph = pads[0]; g->pw = pads[1]; *pe_h = pads[2]; *pe_w = pads[3];
  }
  return NULL;
}

fbx_status *fbx_cuda_k_conv(FBX_CUDA_KERNEL_ARGS) {
  if (n_in < 2) return FBX_ERR_ARG("device 'cuda': CONV: needs X and W");
  const fbx_tensor *x = &in[0], *w = &in[1];
  fbx_cuda_conv_geom g;
  int64_t pe_h = 0, pe_w = 0;
  FBX_TRY(fbx__conv_geom(node, x, w, &g, &pe_h, &pe_w));
  if (g.C % g.group || g.M % g.group) return FBX_ERR_ARG("device 'cuda': CONV: channels not divisible by group");
  const float *bias = fbx_cuda_present(in, n_in, 2) ? in[2].data : NULL;
  float *y = out[0].data;
  int64_t Cg = g.C / g.group, Mg = g.M / g.group, KK = g.KH * g.KW, S = g.OH * g.OW, HW = g.H * g.W;
  info->flops = 2.0 * (double)g.N * (double)g.M * (double)S * (double)(Cg * KK);
  if (fbx_tensor_numel(&out[0]) == 0) return NULL;
  if (Cg * KK <= FBX__CONV_DIRECT_MAX_TAPS) {
    info->variant = "conv_direct";
    info->reason = "few taps per output (depthwise-like): one thread per output";
    return fbx_cuda_launched(fbx_cuda_launch_conv_direct(x->data, w->data, bias, y, &g, c->stream), "CONV");
  }
  bool pointwise = KK == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && pe_h == 0 && pe_w == 0 &&
                   g.OH == g.H && g.OW == g.W;
  float *col = NULL;
  if (!pointwise) FBX_TRY(fbx_cuda_scratch(c, sizeof(float) * (size_t)(g.C * KK * S), (void **)&col));
  info->variant = pointwise ? "conv_1x1_cublaslt" : "conv_im2col_cublaslt";
  info->reason = pointwise ? "1x1 stride 1: the input is the GEMM operand" : "im2col per image, GEMM batched over groups";
  for (int64_t n = 0; n < g.N; n++) {
    const float *xn = (const float *)x->data + n * g.C * HW;
    const float *b = xn;
    if (!pointwise) {
      FBX_TRY(fbx_cuda_launched(fbx_cuda_launch_im2col(xn, col, &g, c->stream), "CONV im2col"));
      b = col;
    }
    /* per group: y (Mg x S) = w (Mg x Cg*KK) * col (Cg*KK x S) */
    FBX_TRY(fbx_cuda_gemm_f32(c, false, false, Mg, S, Cg * KK, 1.f, w->data, Cg * KK, Mg * Cg * KK, b, S, Cg * KK * S,
                              0.f, y + n * g.M * S, S, Mg * S, g.group));
  }
  if (bias) FBX_TRY(fbx_cuda_launched(fbx_cuda_launch_bias_add(y, bias, g.N, g.M, S, c->stream), "CONV bias"));
  return NULL;
}

/* ConvTranspose: per image, col (M*KK, H*W) = W_g^T X_g per group (one batched
 * GEMM; W is (C, M/G, KH, KW)), then a gather-form col2im adds the taps and bias. */
fbx_status *fbx_cuda_k_conv_transpose(FBX_CUDA_KERNEL_ARGS) {
  if (n_in < 2) return FBX_ERR_ARG("device 'cuda': CONV_TRANSPOSE: needs X and W");
  const fbx_tensor *x = &in[0], *w = &in[1];
  fbx_cuda_conv_geom g;
  int64_t pe_h = 0, pe_w = 0;
  FBX_TRY(fbx__conv_geom(node, x, w, &g, &pe_h, &pe_w));
  if (w->rank != x->rank || w->dims[0] != g.C || g.C % g.group)
    return FBX_ERR_ARG("device 'cuda': CONV_TRANSPOSE: weight shape does not match the input channels");
  int64_t Cg = g.C / g.group, Mg = w->dims[1], KK = g.KH * g.KW, HW = g.H * g.W;
  g.M = Mg * g.group;
  if (out[0].rank != x->rank || out[0].dims[1] != g.M) return FBX_ERR_ARG("device 'cuda': CONV_TRANSPOSE: output channels");
  const float *bias = fbx_cuda_present(in, n_in, 2) ? in[2].data : NULL;
  float *y = out[0].data, *col = NULL;
  info->flops = 2.0 * (double)g.N * (double)g.C * (double)HW * (double)(Mg * KK);
  if (fbx_tensor_numel(&out[0]) == 0) return NULL;
  FBX_TRY(fbx_cuda_scratch(c, sizeof(float) * (size_t)(g.M * KK * HW), (void **)&col));
  info->variant = "convtranspose_cublaslt_col2im";
  info->reason = "GEMM W^T X batched over groups, then col2im";
  for (int64_t n = 0; n < g.N; n++) {
    const float *xn = (const float *)x->data + n * g.C * HW;
    FBX_TRY(fbx_cuda_gemm_f32(c, true, false, Mg * KK, HW, Cg, 1.f, w->data, Mg * KK, Cg * Mg * KK, xn, HW, Cg * HW, 0.f,
                              col, HW, Mg * KK * HW, g.group));
    FBX_TRY(fbx_cuda_launched(fbx_cuda_launch_col2im(col, bias, y + n * g.M * g.OH * g.OW, &g, c->stream),
                              "CONV_TRANSPOSE col2im"));
  }
  return NULL;
}

fbx_status *fbx_cuda_k_pool(FBX_CUDA_KERNEL_ARGS) {
  if (n_out > 1 && out[1].data) return FBX_ERR_NOTIMPL("device 'cuda': MAXPOOL: Indices output not implemented");
  fbx_cuda_pool_args a;
  memset(&a, 0, sizeof a);
  FBX_TRY(fbx__conv_geom(node, &in[0], NULL, &a.g, &a.pe_h, &a.pe_w));
  a.op = node->op;
  a.count_include_pad = node->params.conv.count_include_pad;
  a.p = (float)(node->params.conv.p ? node->params.conv.p : 2);
  info->variant = "pool_direct";
  return fbx_cuda_launched(fbx_cuda_launch_pool(in[0].data, out[0].data, &a, c->stream), fbx_ir_op_name(node->op));
}

fbx_status *fbx_cuda_k_global_pool(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (x->rank < 2) return FBX_ERR_ARG("device 'cuda': %s: rank < 2", fbx_ir_op_name(node->op));
  int64_t S = 1;
  for (int d = 2; d < x->rank; d++) S *= x->dims[d];
  info->variant = "global_pool_rows";
  return fbx_cuda_launched(fbx_cuda_launch_global_pool(x->data, out[0].data, x->dims[0] * x->dims[1], S,
                                                       node->op == FBX_IR_OP_GLOBAL_MAXPOOL, c->stream),
                           fbx_ir_op_name(node->op));
}
