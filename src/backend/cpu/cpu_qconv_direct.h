/* CONV_INT's direct AVX-512 VNNI kernel (cpu_qconv_direct.c): 2-D, group 1,
 * stride 1, one image after another. */
#ifndef FBX_BACKEND_CPU_QCONV_DIRECT_H
#define FBX_BACKEND_CPU_QCONV_DIRECT_H

#include "cpu_internal.h"

typedef struct fbx_qconv_direct {
  const void *x, *w;          /* X (N, C, H, W) u8/s8; W (M, C, kh, kw) u8/s8 */
  void *y;                    /* (N, M, OH, OW) int32 (the epilogue converts it in place) */
  int64_t N, C, M, H, W, OH, OW, kh, kw, dh, dw, pt, pl;
  int64_t K;                  /* C * kh * kw */
  bool x_signed, w_signed;
  int32_t xz;                 /* x zero point */
  int32_t beta;               /* ob - x_zp (cpu_qgemm.h) */
  const int32_t *wz;          /* M weight zero points */
  fbx_cpu_epi *epi;           /* or NULL */
} fbx_qconv_direct;

/* Whether the direct kernel runs this geometry on this CPU (the VNNI path is the one chosen). */
bool fbx_cpu_qconv_direct_ok(const fbx_qconv_direct *p);
/* Scratch bytes it needs. */
size_t fbx_cpu_qconv_direct_ws(const fbx_qconv_direct *p);
void fbx_cpu_qconv_direct_run(fbx_cpu_ctx *c, const fbx_qconv_direct *p, void *ws);

#endif
