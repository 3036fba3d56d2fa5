/* CONV and CONV_TRANSPOSE (cpu_conv_transpose.c), 1-3 spatial dims (missing
 * dims are 1); one file per algorithm (cpu_conv.h lists them).
 *   depthwise (group == C == M): direct kernel on a zero-padded plane (2 rows x
 *                                16 outputs per step in AVX2, x 32 in AVX-512),
 *                                parallel over (n, c)
 *   2D, constant W, AVX-512    : output channels in the lanes (cpu_conv_oc512.c):
 *                                W packed in 32-channel blocks at the first run,
 *                                14 positions x 32 channels per tile, parallel
 *                                over (channel block, output rows); the ResNet 3x3s
 *                                (fbx_cpu_conv_oc_ok says which convs)
 *   2D (not 1x1 stride 1)      : direct: X repacked once into zero-padded
 *                                stride-phase planes, then the conv GEMM (12x32
 *                                AVX-512 / 6x16 AVX2) reads B at per-tap offsets
 *                                (no im2col), K in chunks of ~144 taps,
 *                                parallel over output-row tiles (x channel blocks)
 *   few positions / small maps : columns built transposed (OS, K) times W packed at
 *                                compile: the small-M kernel or the prepacked-B GEMM
 *                                (cpu_conv_small.c; maps up to FBX_CPU_CONV_COLS_MAX_OS)
 *   1x1 stride 1 pad 0, 3D     : per tile of output positions, X (or im2col)
 *                                packed into 16-wide panels + the same GEMM
 *                                (cpu_conv_gemm.c), parallel over tiles
 * CONV_TRANSPOSE: kernel == stride, no pad (FPN upsampling): one GEMM per
 * kernel offset, scattered; else sgemm (W^T X) into columns, then col2im
 * (parallel over output channels; bias + epilogue per finished channel).
 * Bias is folded into the GEMM accumulators.
 * Epilogue (params.conv.epilogue, inputs 3..): the fused elementwise program
 * runs on each block of output (per channel row x spatial range) right after
 * it is computed, by the same worker (fbx_cpu_epi_*, cpu_ew.c). */
#include <string.h>

#include "cpu_conv.h"


fbx_status *fbx_cpu_conv_geom_fill(const fbx_ir_node *node, const fbx_tensor *x, const fbx_tensor *w,
                                   const fbx_tensor *y, fbx_cpu_conv_geom *g) {
  const char *op = fbx_ir_op_name(node->op);
  int nd = x->rank - 2;
  if (nd < 1 || nd > 3 || w->rank != x->rank || y->rank != x->rank)
    return FBX_ERR_NOTIMPL("%s: %d spatial dims (1..3 supported)", op, nd);
  if (x->dtype != FBX_DTYPE_F32 || w->dtype != FBX_DTYPE_F32 || y->dtype != FBX_DTYPE_F32)
    return FBX_ERR_NOTIMPL("%s: dtype %s (F32 only)", op, fbx_dtype_name(x->dtype));
  const typeof(node->params.conv) *p = &node->params.conv;
  int64_t kern[3], pads[6], os[3]; /* the one geometry (ir_geometry.c), shared with shape inference */
  FBX_TRY(fbx_ir_conv_geometry(node, x, w, kern, pads, os));
  for (int i = 0; i < nd; i++)
    if (kern[i] != w->dims[2 + i] || os[i] != y->dims[2 + i])
      return FBX_ERR_ARG("%s: kernel/output dim %d (%lld, %lld) does not match the geometry (%lld, %lld)", op, i,
                         (long long)w->dims[2 + i], (long long)y->dims[2 + i], (long long)kern[i], (long long)os[i]);
  g->N = x->dims[0];
  g->C = x->dims[1];
  g->M = y->dims[1];
  g->G = p->group > 0 ? p->group : 1;
  for (int i = 0; i < 3; i++) {
    int sd = i - (3 - nd); /* spatial index in the node, or < 0 for a padded dim */
    if (sd < 0) {
      g->in[i] = g->out[i] = g->k[i] = g->s[i] = g->d[i] = 1;
      g->pb[i] = 0;
      continue;
    }
    g->in[i] = x->dims[2 + sd];
    g->out[i] = y->dims[2 + sd];
    g->k[i] = w->dims[2 + sd];
    g->s[i] = p->strides[sd] > 0 ? p->strides[sd] : 1;
    g->d[i] = p->dilations[sd] > 0 ? p->dilations[sd] : 1;
    g->pb[i] = pads[sd];
  }
  if (g->C % g->G || g->M % g->G) return FBX_ERR_ARG("%s: channels not divisible by group", op);
  return NULL;
}

fbx_status *fbx_cpu_k_CONV(FBX_CPU_KERNEL_ARGS) {
  (void)n_out;
  if (n_in < 2) return FBX_ERR_ARG("CONV: needs X and W");
  fbx_cpu_conv_geom g;
  FBX_TRY(fbx_cpu_conv_geom_fill(node, &in[0], &in[1], &out[0], &g));
  int64_t Cg = g.C / g.G, OS = g.out[0] * g.out[1] * g.out[2], KV = g.k[0] * g.k[1] * g.k[2];
  if (in[1].dims[1] != Cg) return FBX_ERR_ARG("CONV: W has %lld input channels, expected %lld", (long long)in[1].dims[1], (long long)Cg);
  info->flops = 2.0 * (double)g.N * (double)g.M * (double)OS * (double)Cg * (double)KV;
  if (g.N * g.M * OS == 0) return NULL;
  if (g.G == g.C && g.M == g.C) return fbx_cpu_conv_dw_run(c, node, in, n_in, out, &g, info);
  if (OS > FBX_CPU_CONV_SMALL_MAX_OS && fbx_cpu_conv_oc_ok(state, &g))
    return fbx_cpu_conv_oc_run(c, node, state, in, n_in, out, &g, info);
  if (OS <= FBX_CPU_CONV_SMALL_MAX_OS || fbx_cpu_conv_cols_ok(state, &g, c->threads))
    return fbx_cpu_conv_small_run(c, node, state, in, n_in, out, &g, info);
  if (fbx_cpu_conv_direct_ok(&g)) return fbx_cpu_conv_direct_run(c, node, in, n_in, out, &g, info);
  return fbx_cpu_conv_tiled_run(c, node, in, n_in, out, &g, info);
}
