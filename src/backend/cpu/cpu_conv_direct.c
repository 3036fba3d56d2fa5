/* CONV, 2D direct (every 2D conv but depthwise and 1x1 stride 1): no im2col.
 * X is repacked once per image into zero-padded stride-phase planes; the
 * conv GEMM then reads its B rows straight from them at per-tap offsets, K in
 * chunks of whole input channels accumulated in the tile's result (so a
 * chunk's W rows and B rows stay in L1 while the tile's columns stream past);
 * parallel over output-row tiles (x output-channel blocks for small maps). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu_conv.h"
#include "cpu_gemm_avx512.h" /* fbx_cpu_avx512_enabled */

/* ---- direct 2D conv (no im2col): X is repacked once per call into s*s
 * phase planes per channel, zero padded: xr[c][a][b][i][j] =
 * xpad[s*i + a][s*j + b] (PH2 x PW2 each). Then output (oh, ow) of tap
 * (c, kh, kw) reads plane (c, kh*d % s, kw*d % s) at q + koff, with
 * q = oh*PW2 + ow and koff = (kh*d / s)*PW2 + kw*d / s: the GEMM B matrix is
 * the repacked input itself at per-tap offsets (cpu_conv_gemm.c), over
 * flattened q (columns ow >= OW of each row are computed and dropped). ---- */
typedef struct fbx__dcv_job {
  const fbx_cpu_conv_geom *g;
  const float *x;        /* (C, IH, IW) of image n */
  float *xr;             /* (C, nph, npw, PH2, PW2) + slack */
  const float *w, *bias; /* of the group: (Mg, K), (Mg) */
  const int32_t *koff;   /* (K) relative to the group's first channel plane */
  float *y;              /* (Mg, OS) of the group */
  float *tmp;            /* per worker: (Mg, tmpld) */
  int64_t Mg, K, PH2, PW2, rows, mblocks, tmpld, xoff;
  int64_t kc;            /* taps per K chunk (the GEMM accumulates over chunks in tmp) */
  int64_t nph, npw;      /* stride phases used (only those are repacked) */
  int8_t ph[4], pw[4];   /* used phase index -> phase (a or b) */
  fbx_cpu_epi *epi;
  int64_t ybase;
  /* local mode (large images): each task repacks only its tile's plane rows
   * into the worker's xr area (xr + worker*lstride, planes of prows rows),
   * so the planes stay in L2 instead of making a DRAM round trip */
  bool local;
  int64_t lstride, prows;
} fbx__dcv_job;

/* Plane rows [i0, i1) of channels [c0, c1) into dst: channel c, phase (ia, ib)
 * at dst + ((c*nph + ia)*npw + ib)*pstride, row i at (i - i0)*PW2 in it. */
static void fbx__dcv_repack(const fbx__dcv_job *j, int64_t c0, int64_t c1, int64_t i0, int64_t i1, float *dst0,
                            int64_t pstride) {
  const fbx_cpu_conv_geom *g = j->g;
  const int64_t s = g->s[2], sh = g->s[1], IH = g->in[1], IW = g->in[2], PW2 = j->PW2;
  const int64_t pt = g->pb[1], pl = g->pb[2];
  for (int64_t c = c0; c < c1; c++)
    for (int64_t ia = 0; ia < j->nph; ia++)
      for (int64_t ib = 0; ib < j->npw; ib++) {
        const int64_t a = j->ph[ia], b = j->pw[ib];
        float *pl_ = dst0 + ((c * j->nph + ia) * j->npw + ib) * pstride;
        /* valid j: 0 <= s*j + b - pl < IW */
        int64_t off = b - pl;
        int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
        int64_t hi = IW - off <= 0 ? 0 : (IW - off + s - 1) / s;
        if (hi > PW2) hi = PW2;
        if (lo > hi) lo = hi;
        for (int64_t i = i0; i < i1; i++) {
          float *dst = pl_ + (i - i0) * PW2;
          int64_t ih = sh * i + a - pt;
          if (ih < 0 || ih >= IH) {
            memset(dst, 0, (size_t)PW2 * sizeof(float));
            continue;
          }
          const float *src = j->x + (c * IH + ih) * IW;
          if (lo > 0) memset(dst, 0, (size_t)lo * sizeof(float));
          if (s == 1)
            memcpy(dst + lo, src + lo + off, (size_t)(hi - lo) * sizeof(float));
          else
            for (int64_t q = lo; q < hi; q++) dst[q] = src[s * q + off];
          if (hi < PW2) memset(dst + hi, 0, (size_t)(PW2 - hi) * sizeof(float));
        }
      }
}

/* the whole image's planes, channels [c0, c1) (global mode) */
static void fbx__dcv_repack_task(void *arg, int64_t c0, int64_t c1, int worker) {
  const fbx__dcv_job *j = arg;
  (void)worker;
  fbx__dcv_repack(j, c0, c1, 0, j->PH2, j->xr, j->PH2 * j->PW2);
}

static void fbx__dcv_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__dcv_job *j = arg;
  const fbx_cpu_conv_geom *g = j->g;
  const int64_t OH = g->out[1], OW = g->out[2], OS = OH * OW, PW2 = j->PW2;
  float *tmp = j->tmp + (size_t)worker * (size_t)(j->Mg * j->tmpld);
  for (int64_t task = t0; task < t1; task++) {
    int64_t t = task / j->mblocks, mb = task % j->mblocks;
    int64_t m0 = 0, m1 = j->Mg;
    if (j->mblocks > 1) {
      m0 = (j->Mg * mb / j->mblocks) / 6 * 6;
      m1 = mb + 1 == j->mblocks ? j->Mg : (j->Mg * (mb + 1) / j->mblocks) / 6 * 6;
    }
    int64_t oh0 = t * j->rows, oh1 = oh0 + j->rows < OH ? oh0 + j->rows : OH;
    int64_t width = (oh1 - oh0) * PW2;
    const float *xb = j->xr + j->xoff + oh0 * PW2;
    if (j->local) {
      float *xl = j->xr + (size_t)worker * (size_t)j->lstride;
      int64_t i1 = oh0 + j->prows < j->PH2 ? oh0 + j->prows : j->PH2;
      fbx__dcv_repack(j, 0, g->C, oh0, i1, xl, j->prows * PW2);
      xb = xl;
    }
    for (int64_t k0 = 0; k0 < j->K; k0 += j->kc) {
      int64_t kn = j->K - k0 < j->kc ? j->K - k0 : j->kc;
      fbx_cpu_conv_gemm_off(j->w + k0, j->K, j->bias, xb, j->koff + k0, kn, width, m0, m1, tmp, j->tmpld, k0 > 0);
    }
    for (int64_t m = m0; m < m1; m++) {
      float *ym = j->y + m * OS;
      const float *tm = tmp + m * j->tmpld;
      if (PW2 == OW)
        memcpy(ym + oh0 * OW, tm, (size_t)(width) * sizeof(float));
      else
        for (int64_t oh = oh0; oh < oh1; oh++)
          memcpy(ym + oh * OW, tm + (oh - oh0) * PW2, (size_t)OW * sizeof(float));
      fbx_cpu_epi_apply(j->epi, j->ybase + m * OS + oh0 * OW, j->ybase + m * OS + oh1 * OW, worker);
    }
  }
}

/* Direct path for 2D convs; false when not applicable (then im2col). */
bool fbx_cpu_conv_direct_ok(const fbx_cpu_conv_geom *g) {
  if (g->k[0] != 1 || g->in[0] != 1 || g->out[0] != 1) return false;
  if (g->pb[1] < 0 || g->pb[2] < 0) return false;
  if (g->s[1] > 4 || g->s[2] > 4) return false;
  if ((g->k[2] - 1) * g->d[2] / g->s[2] > 32) return false; /* tail reads stay in the 64-float slack */
  int64_t KV = g->k[1] * g->k[2];
  if (KV == 1 && g->s[1] == 1 && g->s[2] == 1) return false; /* 1x1 stride 1: packed path */
  return true;
}

fbx_status *fbx_cpu_conv_direct_run(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                    fbx_tensor *out, const fbx_cpu_conv_geom *g, fbx_kernel_info *info) {
  const float *x = in[0].data, *w = in[1].data;
  const float *b = fbx_cpu_present(in, n_in, 2) ? in[2].data : NULL;
  float *y = out[0].data;
  const int64_t sh = g->s[1], sw = g->s[2], dh = g->d[1], dw = g->d[2];
  const int64_t KH = g->k[1], KW = g->k[2], OH = g->out[1], OW = g->out[2], OS = OH * OW;
  const int64_t Cg = g->C / g->G, Mg = g->M / g->G, K = Cg * KH * KW;
  const int64_t PH2 = OH + ((KH - 1) * dh) / sh, PW2 = OW + ((KW - 1) * dw) / sw;
  /* stride phases used by some tap, and their compact index */
  int8_t ph[4], pw[4], iph[4] = {-1, -1, -1, -1}, ipw[4] = {-1, -1, -1, -1};
  int64_t nph = 0, npw = 0;
  for (int64_t a = 0; a < sh; a++)
    for (int64_t kh = 0; kh < KH; kh++)
      if ((kh * dh) % sh == a) { iph[a] = (int8_t)nph; ph[nph++] = (int8_t)a; break; }
  for (int64_t bb = 0; bb < sw; bb++)
    for (int64_t kw = 0; kw < KW; kw++)
      if ((kw * dw) % sw == bb) { ipw[bb] = (int8_t)npw; pw[npw++] = (int8_t)bb; break; }
  const int64_t xr_full = g->C * nph * npw * PH2 * PW2 + 64;
  if (xr_full > INT32_MAX) return FBX_ERR_NOTIMPL("CONV: direct path too large");
  int64_t nt = c->threads > 1 ? c->threads : 1;
  double flops = 2.0 * (double)Mg * (double)OS * (double)K;
  /* row tiles: ~4 per thread, at least ~48 columns each (the last 16-column
   * block is partial), the per-worker (Mg, rows*PW2) result <= 128 KiB;
   * too few tiles (small maps) -> split the output channels too */
  int64_t rows = (OH + 4 * nt - 1) / (4 * nt), rmin = (48 + PW2 - 1) / PW2;
  if (rows < rmin) rows = rmin;
  int64_t rmax = (32 * 1024) / (Mg * PW2);
  if (rmax < 1) rmax = 1;
  if (rows > rmax) rows = rmax;
  if (rows > OH) rows = OH;
  int64_t ntiles = (OH + rows - 1) / rows, mblocks = 1;
  if (flops < 4e5 || nt == 1) {
    rows = OH < rmax ? OH : rmax;
    ntiles = (OH + rows - 1) / rows;
  } else if (ntiles < 2 * nt && Mg >= 12 * nt) {
    mblocks = (2 * nt + ntiles - 1) / ntiles;
    if (mblocks > Mg / 6) mblocks = Mg / 6;
  }
  int64_t tmpld = (rows * PW2 + 15) / 16 * 16;
  /* planes bigger than the L2s (96 x 162x162 is 10 MiB): repack per tile
   * (each tile's rows of every channel, ~0.6 MiB for the PP-OCR det neck)
   * instead of the whole image up front; one group and no channel split, so
   * every tile is repacked exactly once */
  const int64_t prows = rows + ((KH - 1) * dh) / sh;
  const bool local = g->G == 1 && mblocks == 1 && ntiles >= 2 && (size_t)xr_full * sizeof(float) > (2u << 20);
  const int64_t plane = local ? prows * PW2 : PH2 * PW2;
  const int64_t lstride = (g->C * nph * npw * plane + 64 + 15) / 16 * 16;
  const int64_t xr_n = local ? lstride * (int64_t)c->threads : xr_full;
  /* K in chunks of whole input channels, ~144 taps (16 channels of a 3x3):
   * W's 12-row block of a chunk (7 KiB) and the chunk's B rows of a 32-column
   * block (18 KiB) stay in L1 while the tile's columns stream past; without
   * chunks a large plane (96 x 160x160 -> 24) ran at 46 GFLOP/CPU-s against
   * 65 with them (bench_conv, 1 thread) */
  int64_t kc = (144 / (KH * KW) > 0 ? 144 / (KH * KW) : 1) * KH * KW;
  size_t koff_n = (size_t)(K + 15) / 16 * 16;
  size_t bytes = ((size_t)xr_n + koff_n + (size_t)(Mg * tmpld) * (size_t)c->threads) * sizeof(float);
  void *mem = NULL;
  fbx_cpu_epi epi;
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], bytes, &mem, &epi));
  if (!mem) return FBX_ERR_OOM();
  float *xr = mem;
  int32_t *koff = (int32_t *)(xr + xr_n);
  float *tmp = xr + xr_n + koff_n;
  if (local) /* the 64-float slack after each worker's planes */
    for (int wk = 0; wk < c->threads; wk++) memset(xr + wk * lstride + lstride - 64, 0, 64 * sizeof(float));
  else
    memset(xr + xr_n - 64, 0, 64 * sizeof(float));
  for (int64_t cc = 0; cc < Cg; cc++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++) {
        int64_t a = iph[(kh * dh) % sh], bb = ipw[(kw * dw) % sw];
        koff[(cc * KH + kh) * KW + kw] =
            (int32_t)(((cc * nph + a) * npw + bb) * plane + ((kh * dh) / sh) * PW2 + (kw * dw) / sw);
      }
  info->variant = local ? "conv_direct_gemm_tile_repack" : "conv_direct_gemm";
  info->reason = fbx_cpu_avx512_enabled()
                     ? "2D: input repacked into zero-padded stride-phase planes, 12x32 AVX-512 GEMM on per-tap offsets"
                     : "2D: input repacked into zero-padded stride-phase planes, 6x16 AVX2 GEMM on per-tap offsets";
  for (int64_t n = 0; n < g->N; n++) {
    fbx__dcv_job j = {.g = g, .x = x + n * g->C * g->in[1] * g->in[2], .xr = xr, .koff = koff, .tmp = tmp,
                      .Mg = Mg, .K = K, .PH2 = PH2, .PW2 = PW2, .rows = rows, .mblocks = mblocks,
                      .tmpld = tmpld, .epi = &epi, .nph = nph, .npw = npw, .kc = kc, .local = local,
                      .lstride = lstride, .prows = prows};
    memcpy(j.ph, ph, sizeof ph);
    memcpy(j.pw, pw, sizeof pw);
    if (local)
      ; /* per tile, in fbx__dcv_task */
    else if (g->C * plane * nph * npw > 32768 && nt > 1)
      fbx_cpu_par(c, g->C, 1, fbx__dcv_repack_task, &j);
    else
      fbx__dcv_repack_task(&j, 0, g->C, 0);
    for (int64_t gi = 0; gi < g->G; gi++) {
      j.w = w + gi * Mg * K;
      j.bias = b ? b + gi * Mg : NULL;
      j.y = y + (n * g->M + gi * Mg) * OS;
      j.ybase = (n * g->M + gi * Mg) * OS;
      j.xoff = gi * Cg * nph * npw * plane;
      if (ntiles * mblocks > 1)
        fbx_cpu_par(c, ntiles * mblocks, 1, fbx__dcv_task, &j);
      else
        fbx__dcv_task(&j, 0, 1, 0);
    }
  }
  return fbx_cpu_epi_end(&epi);
}
