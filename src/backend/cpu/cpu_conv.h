/* CPU convolution, split by algorithm (one file each); this header is what
 * they share: the geometry every algorithm reads, and their entry points.
 *   cpu_conv.c           CONV: geometry, algorithm choice
 *   cpu_conv_dw.c        depthwise (group == C == M); its AVX-512 plane kernels in
 *                        cpu_conv_dw_avx512.c and cpu_conv_dw_rows512.c (3x3 / 5x5, column stride 1)
 *   cpu_conv_direct.c    2D direct: stride-phase planes + GEMM on per-tap offsets
 *   cpu_conv_oc512.c     2D, constant W, AVX-512: output channels in the lanes, W packed in
 *                        32-channel blocks (the ResNet 3x3 convs)
 *   cpu_conv_small.c     <= 16 output positions per image: transposed columns, dot products
 *                        or W packed once + the small-M kernel over channels
 *   cpu_conv_tiled.c     1x1 stride 1 and everything else (3D, negative pads): tiled im2col
 *   cpu_conv_transpose.c CONV_TRANSPOSE
 *   cpu_conv_gemm.c      the GEMM micro-kernel they call (fbx_cpu_conv_gemm*) */
#ifndef FBX_BACKEND_CPU_CONV_H
#define FBX_BACKEND_CPU_CONV_H

#include <stdatomic.h>
#include <stdint.h>

#include "cpu_internal.h"

/* Geometry normalised to 3 spatial dims (D, H, W); missing leading dims are 1. */
typedef struct fbx_cpu_conv_geom {
  int64_t N, C, M, G;
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3]; /* pb: pad at the beginning */
} fbx_cpu_conv_geom;

/* node_prepare state of a group-1 CONV with a constant W (fbx_cpu_conv_prepare,
 * cpu_conv_small.c): each path that wants W in its own layout packs it at its
 * first run (the plan's shapes decide the path; a conv that never takes it
 * costs no memory). The run lock of the backend serialises run_node, so the
 * one-time packing needs no lock of its own. Freed by fbx_cpu_conv_release. */
typedef struct fbx_cpu_conv_state {
  int64_t K, M;   /* W is (M, K) */
  float *wt;      /* W^T in fbx_cpu_gemv_pack panels (cpu_conv_small.c), NULL until packed */
  bool failed;    /* that packing ran out of memory once: stay on the dot path */
  float *wo;      /* W in 32-channel blocks (cpu_conv_oc512.c), NULL until packed */
  bool oc_failed; /* that packing ran out of memory once: stay off that path */
  _Atomic uint64_t oc_rows; /* that path's last row-group choice: OH, OW, threads -> rows (0: none) */
} fbx_cpu_conv_state;

/* Fills g from the node and its X, W, Y tensors (F32 only; checks the shapes
 * against the one geometry of ir_geometry.c). */
fbx_status *fbx_cpu_conv_geom_fill(const fbx_ir_node *node, const fbx_tensor *x, const fbx_tensor *w,
                                   const fbx_tensor *y, fbx_cpu_conv_geom *g);

/* The algorithms: each runs the whole CONV node (bias in[2], epilogue in[3..]). */
fbx_status *fbx_cpu_conv_dw_run(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                fbx_tensor *out, const fbx_cpu_conv_geom *g, fbx_kernel_info *info);
/* Depthwise 2D plane, AVX-512 (cpu_conv_dw_avx512.c; only when
 * fbx_cpu_avx512_enabled()): xp zero-padded, row stride PW, at least
 * (OH + 1) * sh + KH rows and (OW + 31) / 32 * 32 * sw + KW + 32 columns. */
void fbx_cpu_conv_dw2_plane_avx512(const float *xp, int64_t PW, const float *w, int64_t KH, int64_t KW,
                                   int64_t sh, int64_t sw, float bias, float *y, int64_t OH, int64_t OW);
/* Depthwise 2D plane, AVX-512, square 3x3 / 5x5, strides (sh 1|2, 1)
 * (cpu_conv_dw_rows512.c; only when fbx_cpu_avx512_enabled() and
 * fbx_cpu_conv_dw_rows_ok): xp zero-padded as for the kernel above (reads stay
 * inside (OH - 1) * sh + K rows and (OW + 15) / 16 * 16 + 16 + K columns). */
bool fbx_cpu_conv_dw_rows_ok(int64_t KH, int64_t KW, int64_t sh, int64_t sw);
void fbx_cpu_conv_dw_rows_avx512(const float *xp, int64_t PW, const float *w, int64_t K, int64_t sh, float bias,
                                 float *y, int64_t OH, int64_t OW);
/* Output channels in the lanes (cpu_conv_oc512.c): AVX-512, group 1, 2D, W
 * constant (state from fbx_cpu_conv_prepare), column stride 1 or 2, not 1x1
 * stride 1. */
bool fbx_cpu_conv_oc_ok(const void *state, const fbx_cpu_conv_geom *g);
fbx_status *fbx_cpu_conv_oc_run(fbx_cpu_ctx *c, const fbx_ir_node *node, void *state, const fbx_tensor *in,
                                int n_in, fbx_tensor *out, const fbx_cpu_conv_geom *g, fbx_kernel_info *info);
bool fbx_cpu_conv_direct_ok(const fbx_cpu_conv_geom *g);
fbx_status *fbx_cpu_conv_direct_run(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                    fbx_tensor *out, const fbx_cpu_conv_geom *g, fbx_kernel_info *info);
#define FBX_CPU_CONV_SMALL_MAX_OS 16
/* Small maps of many channels (a ResNet's 7x7 and 14x14 stages): im2col columns times the packed W
 * through the prepacked-B GEMM, when the columns (OS x K floats) stay within FBX_CPU_CONV_COLS_MAX,
 * the conv has 3x3 taps or more and enough work per thread, and the node has fbx_cpu_conv_prepare's
 * state (group 1, constant W). The direct kernel computes such maps in few, short tiles
 * (bench/RESULTS.md, session 8). */
#define FBX_CPU_CONV_COLS_MAX_OS 256
#define FBX_CPU_CONV_COLS_MAX ((int64_t)1 << 20)
#define FBX_CPU_CONV_COLS_MIN_FLOPS 32e6 /* per thread (fbx_cpu_conv_cols_ok says why) */
bool fbx_cpu_conv_cols_ok(const void *state, const fbx_cpu_conv_geom *g, int threads);
/* state: fbx_cpu_conv_prepare's (W packed at the first run on this path), or NULL */
fbx_status *fbx_cpu_conv_small_run(fbx_cpu_ctx *c, const fbx_ir_node *node, void *state, const fbx_tensor *in,
                                   int n_in, fbx_tensor *out, const fbx_cpu_conv_geom *g, fbx_kernel_info *info);
fbx_status *fbx_cpu_conv_tiled_run(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                   fbx_tensor *out, const fbx_cpu_conv_geom *g, fbx_kernel_info *info);

#endif
