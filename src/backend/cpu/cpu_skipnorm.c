/* SKIP_NORM: (skip +) (bias +) LayerNorm / RMSNorm over the last dim in one
 * pass per row, with ORT's CPU arithmetic (contrib_ops skip_layer_norm and
 * layer_norm_impl, float32): s = x + skip + bias in that order, float sums of
 * s and s*s accumulated left to right, rms = sqrt(sum_sq / H + eps) (LayerNorm:
 * sqrt(sum_sq / H - mean^2 + eps)), y = s / rms * gamma (LayerNorm:
 * (s - mean) / rms * gamma + beta). Matching it bit for bit matters: the
 * result feeds MatMulNBits' int8 quantiser (accuracy_level 4), which turns a
 * last-bit difference into a different bucket.
 *
 * The serial sums cost ~4 cycles per element (one dependent add chain):
 * about 1 us for a 896-wide row, small next to the GEMV that follows. */
/* no FMA: s*s is rounded before it is added, as in ORT (gcc and clang spell it differently) */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include <string.h>

#include "cpu_internal.h"

typedef struct fbx__sn_job {
  const float *x, *skip, *gamma, *beta, *bias;
  float *y, *sum, *inv;
  int64_t h, skip_n; /* row width; skip elements (rows of x wrap around it) */
  float eps;
  int simplified;
} fbx__sn_job;

static void fbx__sn_rows(void *arg, int64_t r0, int64_t r1, int worker) {
  (void)worker;
  const fbx__sn_job *j = arg;
  const int64_t h = j->h;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * h;
    const float *sk = j->skip ? j->skip + (r * h) % j->skip_n : NULL;
    float *y = j->y + r * h, *s_out = j->sum ? j->sum + r * h : NULL;
    float mean = 0.0f, mean_sq = 0.0f;
    for (int64_t i = 0; i < h; i++) {
      float v = x[i];
      if (sk) v += sk[i];
      if (j->bias) v += j->bias[i];
      if (s_out) s_out[i] = v;
      y[i] = v;
      mean += v;
      mean_sq += v * v;
    }
    mean = mean / (float)h;
    float rms = j->simplified ? sqrtf(mean_sq / (float)h + j->eps) : sqrtf(mean_sq / (float)h - mean * mean + j->eps);
    if (j->simplified)
      for (int64_t i = 0; i < h; i++) y[i] = y[i] / rms * j->gamma[i];
    else if (!j->beta)
      for (int64_t i = 0; i < h; i++) y[i] = (y[i] - mean) / rms * j->gamma[i];
    else
      for (int64_t i = 0; i < h; i++) y[i] = (y[i] - mean) / rms * j->gamma[i] + j->beta[i];
    if (j->inv) j->inv[r] = 1.0f / rms;
  }
}

fbx_status *fbx_cpu_k_SKIP_NORM(FBX_CPU_KERNEL_ARGS) {
  const fbx_ir_params *p = &node->params;
  if (n_in < 3 || !fbx_cpu_present(in, n_in, 0) || !fbx_cpu_present(in, n_in, 2))
    return FBX_ERR_ARG("SKIP_NORM: needs X and gamma");
  for (int i = 0; i < n_in; i++)
    if (fbx_cpu_present(in, n_in, i) && in[i].dtype != FBX_DTYPE_F32)
      return FBX_ERR_NOTIMPL("SKIP_NORM: input %d dtype %s (float32 only)", i, fbx_dtype_name(in[i].dtype));
  const fbx_tensor *x = &in[0];
  fbx__sn_job j = {.x = x->data, .gamma = in[2].data, .y = out[0].data, .h = x->dims[x->rank - 1],
                   .eps = p->skipnorm.epsilon, .simplified = p->skipnorm.simplified};
  if (fbx_cpu_present(in, n_in, 1)) j.skip = in[1].data, j.skip_n = fbx_cpu_numel(&in[1]);
  if (fbx_cpu_present(in, n_in, 3)) j.beta = in[3].data;
  if (fbx_cpu_present(in, n_in, 4)) j.bias = in[4].data;
  if (p->skipnorm.has_sum && n_out > 1) j.sum = out[1].data;
  if (p->skipnorm.has_inv) j.inv = out[n_out - 1].data;
  int64_t rows = j.h ? fbx_cpu_numel(x) / j.h : 0;
  if (j.skip && (j.skip_n < j.h || j.skip_n % j.h))
    return FBX_ERR_ARG("SKIP_NORM: skip has %lld elements", (long long)j.skip_n);
  info->variant = j.skip ? (j.simplified ? "skip_rmsnorm_fused" : "skip_layernorm_fused") : "rmsnorm";
  info->reason = "one pass per row, ORT's float order (feeds int8 quantisers bit-identically)";
  info->flops = 6.0 * (double)rows * (double)j.h;
  if (rows * j.h >= 65536) fbx_cpu_par(c, rows, 1 + 16384 / (j.h + 1), fbx__sn_rows, &j);
  else fbx__sn_rows(&j, 0, rows, 0);
  return NULL;
}
