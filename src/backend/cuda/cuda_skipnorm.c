/* SKIP_NORM on CUDA (kernel in cuda_skipnorm.cu): SimplifiedLayerNormalization,
 * SkipSimplifiedLayerNormalization and SkipLayerNormalization as one fused
 * pass per row, float32, with the optional outputs (the skip + bias sum,
 * inv_std_var). Same semantics as cpu_skipnorm.c; the sums are a block tree
 * instead of ORT's left-to-right order, so results agree to float rounding
 * (the CPU keeps ORT's order for its int8 quantiser; this device's
 * MatMulNBits has none). */
#include "cuda_internal.h"

bool fbx_cuda_s_skipnorm(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size) {
  (void)node;
  if (n_in < 3 || in[0].rank < 1 || in[2].rank < 0) {
    snprintf(why, why_size, "SKIP_NORM needs X and gamma");
    return false;
  }
  for (int i = 0; i < n_in; i++)
    if (in[i].rank >= 0 && in[i].dtype != FBX_DTYPE_F32) {
      snprintf(why, why_size, "SKIP_NORM with input %d of dtype %s (float32 only)", i, fbx_dtype_name(in[i].dtype));
      return false;
    }
  return true;
}

fbx_status *fbx_cuda_k_skipnorm(FBX_CUDA_KERNEL_ARGS) {
  const fbx_ir_params *p = &node->params;
  if (n_in < 3 || !fbx_cuda_present(in, n_in, 0) || !fbx_cuda_present(in, n_in, 2))
    return FBX_ERR_ARG("device 'cuda': SKIP_NORM: needs X and gamma");
  const fbx_tensor *x = &in[0];
  fbx_cuda_skipnorm_args a = {.x = x->data, .gamma = in[2].data, .y = out[0].data, .h = x->dims[x->rank - 1],
                              .eps = p->skipnorm.epsilon, .simplified = p->skipnorm.simplified};
  if (fbx_cuda_present(in, n_in, 1)) a.skip = in[1].data, a.skip_n = fbx_tensor_numel(&in[1]);
  if (fbx_cuda_present(in, n_in, 3)) a.beta = in[3].data;
  if (fbx_cuda_present(in, n_in, 4)) a.bias = in[4].data;
  if (p->skipnorm.has_sum && n_out > 1) a.sum = out[1].data;
  if (p->skipnorm.has_inv && n_out > 1) a.inv = out[n_out - 1].data;
  if (fbx_tensor_numel(&in[2]) != a.h) return FBX_ERR_ARG("device 'cuda': SKIP_NORM: gamma shape");
  if (a.beta && fbx_tensor_numel(&in[3]) != a.h) return FBX_ERR_ARG("device 'cuda': SKIP_NORM: beta shape");
  if (a.bias && fbx_tensor_numel(&in[4]) != a.h) return FBX_ERR_ARG("device 'cuda': SKIP_NORM: bias shape");
  a.rows = a.h ? fbx_tensor_numel(x) / a.h : 0;
  if (a.skip && (a.skip_n < a.h || a.skip_n % a.h))
    return FBX_ERR_ARG("device 'cuda': SKIP_NORM: skip has %lld elements", (long long)a.skip_n);
  info->variant = a.skip ? (a.simplified ? "skip_rmsnorm_rows" : "skip_layernorm_rows") : "rmsnorm_rows";
  info->reason = "one block per row: skip + bias + norm in one pass";
  info->flops = 6.0 * (double)a.rows * (double)a.h;
  return fbx_cuda_launched(fbx_cuda_launch_skipnorm(&a, c->stream), "SKIP_NORM");
}
