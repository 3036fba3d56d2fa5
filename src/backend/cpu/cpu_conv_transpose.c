/* CONV_TRANSPOSE, 1-3 spatial dims:
 *   kernel == stride, no pad (FPN upsampling): one GEMM per kernel offset,
 *     scattered (every output pixel gets one tap);
 *   otherwise sgemm (W^T X) into columns, then col2im parallel over output
 *     channels, bias + epilogue per finished channel. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu_conv.h"

/* col2im of CONV_TRANSPOSE, parallel over output channels (disjoint writes). */
typedef struct fbx__c2i_job {
  const fbx_cpu_conv_geom *g;
  const float *col;   /* (Mg*KV, IS) */
  float *y;           /* (Mg, OS) */
  const float *bias;  /* (Mg) or NULL */
  int64_t KV, IS, OS;
  fbx_cpu_epi *epi;
  int64_t ybase;      /* flattened output index of y[0] (for the epilogue) */
} fbx__c2i_job;

static void fbx__c2i_task(void *arg, int64_t m0, int64_t m1, int worker) {
  const fbx__c2i_job *j = arg;
  const fbx_cpu_conv_geom *g = j->g;
  for (int64_t m = m0; m < m1; m++) {
    float *ym = j->y + m * j->OS;
    for (int64_t r = m * j->KV; r < (m + 1) * j->KV; r++) {
      int64_t kw = r % g->k[2], kh = (r / g->k[2]) % g->k[1], kd = (r / (g->k[2] * g->k[1])) % g->k[0];
      const float *cr = j->col + r * j->IS;
      for (int64_t id = 0; id < g->in[0]; id++) {
        int64_t od = id * g->s[0] - g->pb[0] + kd * g->d[0];
        if (od < 0 || od >= g->out[0]) continue;
        for (int64_t ih = 0; ih < g->in[1]; ih++) {
          int64_t oh = ih * g->s[1] - g->pb[1] + kh * g->d[1];
          if (oh < 0 || oh >= g->out[1]) continue;
          const float *cc = cr + (id * g->in[1] + ih) * g->in[2];
          float *yr = ym + (od * g->out[1] + oh) * g->out[2];
          for (int64_t iw = 0; iw < g->in[2]; iw++) {
            int64_t ow = iw * g->s[2] - g->pb[2] + kw * g->d[2];
            if (ow >= 0 && ow < g->out[2]) yr[ow] += cc[iw];
          }
        }
      }
    }
    /* channel m is complete: bias + epilogue while it is in cache */
    if (j->bias)
      for (int64_t i = 0; i < j->OS; i++) ym[i] += j->bias[m];
    fbx_cpu_epi_apply(j->epi, j->ybase + m * j->OS, j->ybase + (m + 1) * j->OS, worker);
  }
}

/* CONV_TRANSPOSE with kernel == stride, no padding / dilation / groups (the
 * FPN upsampling): every output pixel gets exactly one tap, so per kernel
 * offset (a, b) it is one GEMM Y_ab (M, IS) = W_ab (M, C) @ X (C, IS), with
 * W_ab[m][c] = W[c][m][a][b] packed per call, scattered to rows i*sh + a,
 * columns j*sw + b. Parallel over tiles of input rows. */
typedef struct fbx__ctk_job {
  const fbx_cpu_conv_geom *g;
  const float *x;        /* (C, IS) of image n */
  const float *wab;      /* (KV, M, C) */
  const float *bias;     /* (M) or NULL */
  float *y;              /* (M, OS) of image n */
  float *work;           /* per worker: packed B (C, tpad) then tmp (KV, M, tpad) */
  int64_t rows, tpad, wstride;
  fbx_cpu_epi *epi;
  int64_t ybase;
} fbx__ctk_job;

static void fbx__ctk_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__ctk_job *j = arg;
  const fbx_cpu_conv_geom *g = j->g;
  const int64_t C = g->C, M = g->M, IH = g->in[1], IW = g->in[2], IS = IH * IW;
  const int64_t KH = g->k[1], KW = g->k[2], KV = KH * KW, OW = g->out[2], OS = g->out[1] * OW;
  float *pk = j->work + (size_t)worker * (size_t)j->wstride;
  float *tmp = pk + C * j->tpad;
  for (int64_t t = t0; t < t1; t++) {
    int64_t i0 = t * j->rows, i1 = i0 + j->rows < IH ? i0 + j->rows : IH;
    int64_t q0 = i0 * IW, width = (i1 - i0) * IW;
    for (int64_t c = 0; c < C; c++) fbx_cpu_conv_pack_row(pk, C, c, j->x + c * IS + q0, width);
    for (int64_t v = 0; v < KV; v++)
      fbx_cpu_conv_gemm(j->wab + v * M * C, C, j->bias, pk, C, width, 0, M, tmp + v * M * j->tpad, j->tpad);
    for (int64_t m = 0; m < M; m++) {
      float *ym = j->y + m * OS;
      for (int64_t i = i0; i < i1; i++)
        for (int64_t a = 0; a < KH; a++) {
          float *yr = ym + (i * KH + a) * OW;
          for (int64_t b = 0; b < KW; b++) {
            const float *tr = tmp + ((a * KW + b) * M + m) * j->tpad + (i - i0) * IW;
            for (int64_t jj = 0; jj < IW; jj++) yr[jj * KW + b] = tr[jj];
          }
        }
      fbx_cpu_epi_apply(j->epi, j->ybase + m * OS + i0 * KH * OW, j->ybase + m * OS + i1 * KH * OW, worker);
    }
  }
}

static bool fbx__ctk_ok(const fbx_cpu_conv_geom *g) {
  return g->G == 1 && g->k[0] == 1 && g->in[0] == 1 && g->out[0] == 1 && g->k[1] == g->s[1] &&
         g->k[2] == g->s[2] && g->d[1] == 1 && g->d[2] == 1 && g->pb[1] == 0 && g->pb[2] == 0 &&
         g->out[1] == g->in[1] * g->s[1] && g->out[2] == g->in[2] * g->s[2];
}

static fbx_status *fbx__ctk_run(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                fbx_tensor *out, const fbx_cpu_conv_geom *g, fbx_kernel_info *info) {
  const float *x = in[0].data, *w = in[1].data;
  const float *b = fbx_cpu_present(in, n_in, 2) ? in[2].data : NULL;
  float *y = out[0].data;
  const int64_t C = g->C, M = g->M, IH = g->in[1], IW = g->in[2], IS = IH * IW;
  const int64_t KV = g->k[1] * g->k[2], OS = g->out[1] * g->out[2];
  int64_t nt = c->threads > 1 ? c->threads : 1;
  /* input-row tiles: ~4 per thread, per-worker work area <= ~512 KiB */
  int64_t rows = (IH + 4 * nt - 1) / (4 * nt);
  int64_t rmax = (128 * 1024) / ((C + KV * M) * IW);
  if (rmax < 1) rmax = 1;
  if (rows > rmax) rows = rmax;
  if (rows < 1) rows = 1;
  int64_t ntiles = (IH + rows - 1) / rows;
  int64_t tpad = (rows * IW + 15) / 16 * 16;
  int64_t wstride = (C + KV * M) * tpad;
  int64_t wab_n = (KV * M * C + 15) / 16 * 16; /* keeps the work areas 64-byte aligned */
  size_t bytes = ((size_t)wab_n + (size_t)wstride * (size_t)c->threads) * sizeof(float);
  void *mem = NULL;
  fbx_cpu_epi epi;
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], bytes, &mem, &epi));
  if (!mem) return FBX_ERR_OOM();
  float *wab = mem, *work = wab + wab_n;
  for (int64_t cc = 0; cc < C; cc++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t v = 0; v < KV; v++) wab[(v * M + m) * C + cc] = w[(cc * M + m) * KV + v];
  info->variant = "convtranspose_kernel_eq_stride_gemm";
  info->reason = "kernel == stride, no pad: one GEMM per kernel offset, scattered (no col2im overlap)";
  for (int64_t n = 0; n < g->N; n++) {
    fbx__ctk_job j = {.g = g, .x = x + n * C * IS, .wab = wab, .bias = b, .y = y + n * M * OS, .work = work,
                      .rows = rows, .tpad = tpad, .wstride = wstride, .epi = &epi, .ybase = n * M * OS};
    double flops = 2.0 * (double)M * (double)KV * (double)IS * (double)C;
    if (ntiles > 1 && nt > 1 && flops > 4e5)
      fbx_cpu_par(c, ntiles, 1, fbx__ctk_task, &j);
    else
      fbx__ctk_task(&j, 0, ntiles, 0);
  }
  return fbx_cpu_epi_end(&epi);
}

fbx_status *fbx_cpu_k_CONV_TRANSPOSE(FBX_CPU_KERNEL_ARGS) {
  if (n_in < 2) return FBX_ERR_ARG("CONV_TRANSPOSE: needs X and W");
  fbx_cpu_conv_geom g;
  FBX_TRY(fbx_cpu_conv_geom_fill(node, &in[0], &in[1], &out[0], &g));
  const float *x = in[0].data, *w = in[1].data;
  const float *b = fbx_cpu_present(in, n_in, 2) ? in[2].data : NULL;
  float *y = out[0].data;
  int64_t Cg = g.C / g.G, Mg = g.M / g.G;
  int64_t IS = g.in[0] * g.in[1] * g.in[2], OS = g.out[0] * g.out[1] * g.out[2];
  int64_t KV = g.k[0] * g.k[1] * g.k[2];
  if (in[1].dims[0] != g.C || in[1].dims[1] != Mg) return FBX_ERR_ARG("CONV_TRANSPOSE: W shape");
  info->variant = "convtranspose_sgemm_col2im";
  info->flops = 2.0 * (double)g.N * (double)g.C * (double)IS * (double)Mg * (double)KV;
  if (g.N * g.M * OS > 0 && fbx__ctk_ok(&g)) return fbx__ctk_run(c, node, in, n_in, out, &g, info);
  fbx_cpu_epi epi;
  void *mem = NULL;
  if (g.N * g.M * OS == 0) return NULL;
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], (size_t)(Mg * KV * IS + 16) * sizeof(float), &mem, &epi));
  float *col = mem;
  if (!col) return FBX_ERR_OOM();
  memset(y, 0, (size_t)(g.N * g.M * OS) * sizeof(float));
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t gi = 0; gi < g.G; gi++) {
      const float *xg = x + (n * g.C + gi * Cg) * IS;
      const float *wg = w + gi * Cg * Mg * KV; /* (Cg, Mg*KV) */
      float *yg = y + (n * g.M + gi * Mg) * OS;
      /* col (Mg*KV, IS) = wg^T (Mg*KV, Cg) x xg (Cg, IS) */
      FBX_TRY(fbx_cpu_sgemm_par(c, true, false, Mg * KV, IS, Cg, 1.f, wg, Mg * KV, xg, IS, 0.f, col, IS, NULL));
      fbx__c2i_job cj = {.g = &g, .col = col, .y = yg, .bias = b ? b + gi * Mg : NULL, .KV = KV, .IS = IS,
                         .OS = OS, .epi = &epi, .ybase = (n * g.M + gi * Mg) * OS};
      fbx_cpu_par(c, Mg, 1, fbx__c2i_task, &cj);
    }
  return fbx_cpu_epi_end(&epi);
}
