/* CONV, depthwise (group == C == M), parallel over (n, c) planes:
 *   2D, strides 1|2, dilation 1: the plane copied into a zero-padded
 *     per-worker buffer, 2 rows x 16 outputs per step in AVX2 registers
 *     (2 rows x 32 in zmm registers where AVX-512 is on: cpu_conv_dw_avx512.c;
 *     square 3x3 / 5x5 with column stride 1: up to 4 rows x 32 in 8 zmm
 *     accumulators, each input row loaded once per block: cpu_conv_dw_rows512.c);
 *   otherwise a scalar direct loop (any dims, strides, dilations).
 * The epilogue runs on each finished plane. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu_conv.h"
#include "cpu_gemm_avx512.h"

/* ---- depthwise ---- */
typedef struct fbx__dw_job {
  const fbx_cpu_conv_geom *g;
  const float *x, *w, *b;
  float *y;
  fbx_cpu_epi *epi;
} fbx__dw_job;

static void fbx__dw_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__dw_job *j = arg;
  const fbx_cpu_conv_geom *g = j->g;
  int64_t ID = g->in[0], IH = g->in[1], IW = g->in[2], OD = g->out[0], OH = g->out[1], OW = g->out[2];
  int64_t KD = g->k[0], KH = g->k[1], KW = g->k[2];
  for (int64_t p = p0; p < p1; p++) {
    int64_t ch = p % g->C;
    const float *x = j->x + p * ID * IH * IW;
    const float *w = j->w + ch * KD * KH * KW;
    float *y = j->y + p * OD * OH * OW;
    float bias = j->b ? j->b[ch] : 0.f;
    for (int64_t od = 0; od < OD; od++)
      for (int64_t oh = 0; oh < OH; oh++) {
        float *yr = y + (od * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ow++) yr[ow] = bias;
        for (int64_t kd = 0; kd < KD; kd++) {
          int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
          if (id < 0 || id >= ID) continue;
          for (int64_t kh = 0; kh < KH; kh++) {
            int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
            if (ih < 0 || ih >= IH) continue;
            const float *xr = x + (id * IH + ih) * IW;
            for (int64_t kw = 0; kw < KW; kw++) {
              float wv = w[(kd * KH + kh) * KW + kw];
              int64_t off = kw * g->d[2] - g->pb[2], s = g->s[2];
              /* valid ow: 0 <= ow*s + off < IW */
              int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
              int64_t hi = IW - off <= 0 ? 0 : (IW - off + s - 1) / s;
              if (hi > OW) hi = OW;
              if (s == 1) {
                const float *xs = xr + off;
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xs[ow];
              } else {
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow * s + off];
              }
            }
          }
        }
      }
    fbx_cpu_epi_apply(j->epi, p * OD * OH * OW, (p + 1) * OD * OH * OW, worker);
  }
}

/* 2D depthwise, strides 1 or 2 (each axis), dilation 1: the plane is copied into a
 * zero-padded per-worker buffer, then 8 outputs of a row are accumulated in
 * one AVX2 register over the KHxKW taps (no bounds checks in the loop). */
typedef struct fbx__dw2_job {
  const fbx_cpu_conv_geom *g;
  const float *x, *w, *b;
  float *y;
  float *pad;          /* per worker: PH * PW */
  int64_t PH, PW;
  fbx_cpu_epi *epi;
  bool avx512;         /* planes through fbx_cpu_conv_dw2_plane_avx512 */
  bool rows512;        /* planes through fbx_cpu_conv_dw_rows_avx512 (takes precedence) */
} fbx__dw2_job;

/* 8 floats q[0], q[2], ..., q[14] */
static inline __m256 fbx__even8(const float *q) {
  __m256 lo = _mm256_loadu_ps(q), hi = _mm256_loadu_ps(q + 8);
  __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
}

static void fbx__dw2_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__dw2_job *j = arg;
  const fbx_cpu_conv_geom *g = j->g;
  const int64_t IH = g->in[1], IW = g->in[2], OH = g->out[1], OW = g->out[2];
  const int64_t KH = g->k[1], KW = g->k[2], s = g->s[2], sh = g->s[1], PW = j->PW, PH = j->PH;
  const int64_t pt = g->pb[1], pl = g->pb[2];
  float *xp = j->pad + (size_t)worker * (size_t)(PH * PW);
  memset(xp, 0, (size_t)(PH * PW) * sizeof(float));
  for (int64_t p = p0; p < p1; p++) {
    int64_t ch = p % g->C;
    const float *x = j->x + p * IH * IW;
    const float *w = j->w + ch * KH * KW;
    float *y = j->y + p * OH * OW;
    float bias = j->b ? j->b[ch] : 0.f;
    for (int64_t ih = 0; ih < IH; ih++) memcpy(xp + (ih + pt) * PW + pl, x + ih * IW, (size_t)IW * sizeof(float));
    if (j->rows512) {
      fbx_cpu_conv_dw_rows_avx512(xp, PW, w, KH, sh, bias, y, OH, OW);
      fbx_cpu_epi_apply(j->epi, p * OH * OW, (p + 1) * OH * OW, worker);
      continue;
    }
    if (j->avx512) {
      fbx_cpu_conv_dw2_plane_avx512(xp, PW, w, KH, KW, sh, s, bias, y, OH, OW);
      fbx_cpu_epi_apply(j->epi, p * OH * OW, (p + 1) * OH * OW, worker);
      continue;
    }
    /* 2 output rows x 16 outputs per step: each weight broadcast feeds 4
     * FMAs; partial blocks are computed in full (the padded plane covers
     * their reads) and stored with masks / skipped */
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t oh = 0; oh < OH; oh += 2) {
      const bool two = oh + 1 < OH;
      float *yr0 = y + oh * OW, *yr1 = yr0 + OW;
      for (int64_t ow = 0; ow < OW; ow += 16) {
        __m256 a00 = _mm256_set1_ps(bias), a01 = a00, a10 = a00, a11 = a00;
        for (int64_t kh = 0; kh < KH; kh++) {
          const float *r0 = xp + (oh * sh + kh) * PW + ow * s, *r1 = r0 + sh * PW;
          const float *wr = w + kh * KW;
          for (int64_t kw = 0; kw < KW; kw++) {
            __m256 wv = _mm256_broadcast_ss(wr + kw);
            __m256 x00, x01, x10, x11;
            if (s == 1) {
              x00 = _mm256_loadu_ps(r0 + kw), x01 = _mm256_loadu_ps(r0 + kw + 8);
              x10 = _mm256_loadu_ps(r1 + kw), x11 = _mm256_loadu_ps(r1 + kw + 8);
            } else {
              x00 = fbx__even8(r0 + kw), x01 = fbx__even8(r0 + kw + 16);
              x10 = fbx__even8(r1 + kw), x11 = fbx__even8(r1 + kw + 16);
            }
            a00 = _mm256_fmadd_ps(wv, x00, a00);
            a01 = _mm256_fmadd_ps(wv, x01, a01);
            a10 = _mm256_fmadd_ps(wv, x10, a10);
            a11 = _mm256_fmadd_ps(wv, x11, a11);
          }
        }
        if (ow + 16 <= OW) {
          _mm256_storeu_ps(yr0 + ow, a00);
          _mm256_storeu_ps(yr0 + ow + 8, a01);
          if (two) {
            _mm256_storeu_ps(yr1 + ow, a10);
            _mm256_storeu_ps(yr1 + ow + 8, a11);
          }
        } else {
          __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(OW - ow)), lane);
          __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(OW - ow - 8)), lane);
          _mm256_maskstore_ps(yr0 + ow, m0, a00);
          _mm256_maskstore_ps(yr0 + ow + 8, m1, a01);
          if (two) {
            _mm256_maskstore_ps(yr1 + ow, m0, a10);
            _mm256_maskstore_ps(yr1 + ow + 8, m1, a11);
          }
        }
      }
    }
    fbx_cpu_epi_apply(j->epi, p * OH * OW, (p + 1) * OH * OW, worker);
  }
}

fbx_status *fbx_cpu_conv_dw_run(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                fbx_tensor *out, const fbx_cpu_conv_geom *gp, fbx_kernel_info *info) {
  const fbx_cpu_conv_geom g = *gp;
  const float *x = in[0].data, *w = in[1].data;
  const float *b = fbx_cpu_present(in, n_in, 2) ? in[2].data : NULL;
  float *y = out[0].data;
  fbx_cpu_epi epi;
  void *mem = NULL;
  info->variant = "conv_depthwise_direct";
  info->reason = "group == C == M";
  bool fast2d = g.k[0] == 1 && g.in[0] == 1 && g.out[0] == 1 && g.d[1] == 1 && g.d[2] == 1 &&
                (g.s[1] == 1 || g.s[1] == 2) && (g.s[2] == 1 || g.s[2] == 2) && g.pb[1] >= 0 && g.pb[2] >= 0;
  if (fast2d) {
    /* padded plane: every tap of every (vector) output lies inside it */
    int64_t PH = g.in[1] + g.pb[1], PW = g.in[2] + g.pb[2];
    int64_t needh = (g.out[1] + 1) * g.s[1] + g.k[1], needw = (g.out[2] + 15) / 16 * 16 * g.s[2] + g.k[2] + 16;
    /* 32-wide blocks only where they waste no more lanes than 16-wide ones
     * (an even number of 16-lane blocks, or wide rows): a 40-wide row computes
     * 64 outputs in zmm against 48 in ymm, and measured no faster */
    int64_t lanes16 = (g.out[2] + 15) / 16;
    bool rows512 = fbx_cpu_avx512_enabled() && fbx_cpu_conv_dw_rows_ok(g.k[1], g.k[2], g.s[1], g.s[2]);
    bool avx512 = !rows512 && fbx_cpu_avx512_enabled() && (lanes16 % 2 == 0 || lanes16 >= 8);
    if (avx512) { /* 32-wide blocks (cpu_conv.h) */
      int64_t need512 = (g.out[2] + 31) / 32 * 32 * g.s[2] + g.k[2] + 32;
      if (needw < need512) needw = need512;
    }
    if (PH < needh) PH = needh;
    if (PW < needw) PW = needw;
    FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], (size_t)(PH * PW) * sizeof(float) * (size_t)c->threads,
                              &mem, &epi));
    info->variant = rows512 ? "conv_depthwise_rows_avx512" : avx512 ? "conv_depthwise_avx512" : "conv_depthwise_avx2";
    fbx__dw2_job j = {.g = &g, .x = x, .w = w, .b = b, .y = y, .pad = mem, .PH = PH, .PW = PW, .epi = &epi,
                      .avx512 = avx512, .rows512 = rows512};
    fbx_cpu_par(c, g.N * g.C, 1, fbx__dw2_task, &j);
    return fbx_cpu_epi_end(&epi);
  }
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], 0, &mem, &epi));
  fbx__dw_job j = {.g = &g, .x = x, .w = w, .b = b, .y = y, .epi = &epi};
  fbx_cpu_par(c, g.N * g.C, 1, fbx__dw_task, &j);
  return fbx_cpu_epi_end(&epi);
}
