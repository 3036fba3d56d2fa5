/* CONV by tiles of output positions (1x1 stride 1 pad 0, 3D, and what the
 * direct path declines): per tile, X (pointwise) or its im2col is packed
 * into 16-wide panels in the worker's scratch (stays in L2) and the conv GEMM
 * (cpu_conv_gemm.c) runs over it, bias folded in, epilogue per finished
 * 12-channel block; parallel over tiles (x output-channel blocks for small
 * maps). Pointwise with AVX-512: no packing, the GEMM reads X in place. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu_conv.h"
#include "cpu_gemm_avx512.h" /* fbx_cpu_avx512_enabled */

/* ---- tiled im2col + sgemm: parallel over tiles of output positions; each
 * worker builds the (Cg*KV, tile) column block in its own scratch (stays in
 * L2) and runs a single-threaded sgemm + bias on it. ---- */
typedef struct fbx__tcv_job {
  const fbx_cpu_conv_geom *g;
  const float *x;     /* (Cg, ID, IH, IW) of this (n, group) */
  const float *w;     /* (Mg, Cg*KV) */
  const float *bias;  /* (Mg) or NULL */
  float *y;           /* (Mg, OS) */
  float *col;         /* per worker: (Cg*KV, tile); unused when pointwise */
  int64_t Cg, Mg, KV, OS, tile;
  int64_t mblocks;    /* output-channel blocks per tile (task = tile * mblocks + block) */
  bool pointwise;     /* 1x1 stride 1 pad 0: X is the column matrix (ld OS) */
  fbx_cpu_epi *epi;
  int64_t ybase;      /* flattened output index of y[0] (for the epilogue) */
  const int32_t *koff; /* pointwise read in place: row k of X at x + koff[k] (= k * OS), or NULL: pack */
} fbx__tcv_job;

/* pk (packed panels, see fbx_cpu_conv_gemm) <- im2col rows for output
 * positions [p0, p1); each row is built in rowbuf (p1-p0 floats) first. */
static void fbx__tcv_im2col(const fbx__tcv_job *j, float *pk, float *rowbuf, int64_t p0, int64_t p1) {
  const fbx_cpu_conv_geom *g = j->g;
  int64_t KD = g->k[0], KH = g->k[1], KW = g->k[2], OH = g->out[1], OW = g->out[2];
  int64_t ID = g->in[0], IH = g->in[1], IW = g->in[2];
  int64_t nb = p1 - p0, rows = j->Cg * j->KV;
  for (int64_t r = 0; r < rows; r++) {
    int64_t kw = r % KW, kh = (r / KW) % KH, kd = (r / (KW * KH)) % KD, cc = r / (KW * KH * KD);
    const float *x = j->x + cc * ID * IH * IW;
    float *cr = rowbuf;
    int64_t off = kw * g->d[2] - g->pb[2], s = g->s[2];
    int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t hi = IW - off <= 0 ? 0 : (IW - off + s - 1) / s;
    if (hi > OW) hi = OW;
    if (lo > hi) lo = hi;
    int64_t p = p0;
    while (p < p1) {
      int64_t ow0 = p % OW, orow = p / OW, oh = orow % OH, od = orow / OH;
      int64_t ow1 = OW - ow0 < p1 - p ? OW : ow0 + (p1 - p);
      float *dst = cr + (p - p0) - ow0; /* indexable by ow */
      int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
      int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
      if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
        memset(dst + ow0, 0, (size_t)(ow1 - ow0) * sizeof(float));
      } else {
        const float *xr = x + (id * IH + ih) * IW;
        int64_t a = ow0 < lo ? lo : ow0, b = ow1 > hi ? hi : ow1;
        if (a > b) a = b;
        for (int64_t ow = ow0; ow < a; ow++) dst[ow] = 0.f;
        if (s == 1) {
          memcpy(dst + a, xr + a + off, (size_t)(b - a) * sizeof(float));
        } else {
          int64_t ow = a;
          if (s == 2) /* even lanes of 16 (reads stay inside the row: 2*(ow+8)+off <= IW) */
            for (; ow + 8 <= b && 2 * (ow + 8) + off <= IW; ow += 8) {
              const float *q = xr + 2 * ow + off;
              __m256 lo = _mm256_loadu_ps(q), hi = _mm256_loadu_ps(q + 8);
              __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
              _mm256_storeu_ps(dst + ow, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e),
                                                                                 _MM_SHUFFLE(3, 1, 2, 0))));
            }
          for (; ow < b; ow++) dst[ow] = xr[ow * s + off];
        }
        for (int64_t ow = b > ow0 ? b : ow0; ow < ow1; ow++) dst[ow] = 0.f;
      }
      p += ow1 - ow0;
    }
    fbx_cpu_conv_pack_row(pk, rows, r, rowbuf, nb);
  }
}

#define FBX__CV_EPI_ROWS 12

static void fbx__tcv_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__tcv_job *j = arg;
  int64_t K = j->Cg * j->KV, tpad = (j->tile + 15) / 16 * 16;
  float *pk = j->col + (size_t)worker * (size_t)(K * tpad + tpad);
  float *rowbuf = pk + K * tpad;
  int64_t built = -1; /* tile whose columns are in pk */
  for (int64_t task = t0; task < t1; task++) {
    int64_t t = task / j->mblocks, mb = task % j->mblocks;
    int64_t m0 = j->Mg * mb / j->mblocks, m1 = j->Mg * (mb + 1) / j->mblocks;
    if (j->mblocks > 1) { /* keep blocks of 6 rows whole */
      m0 = m0 / 6 * 6;
      m1 = mb + 1 == j->mblocks ? j->Mg : m1 / 6 * 6;
    }
    int64_t p0 = t * j->tile, p1 = p0 + j->tile < j->OS ? p0 + j->tile : j->OS;
    if (j->koff) {
      const float *xb = j->x + p0;
      for (int64_t mb0 = m0; mb0 < m1; mb0 += FBX__CV_EPI_ROWS) {
        int64_t mb1 = mb0 + FBX__CV_EPI_ROWS < m1 ? mb0 + FBX__CV_EPI_ROWS : m1;
        fbx_cpu_conv_gemm_off(j->w, K, j->bias, xb, j->koff, K, p1 - p0, mb0, mb1, j->y + p0, j->OS, 0);
        if (j->epi->prog)
          for (int64_t m = mb0; m < mb1; m++)
            fbx_cpu_epi_apply(j->epi, j->ybase + m * j->OS + p0, j->ybase + m * j->OS + p1, worker);
      }
      continue;
    }
    if (built != t) {
      if (j->pointwise)
        for (int64_t r = 0; r < K; r++) fbx_cpu_conv_pack_row(pk, K, r, j->x + r * j->OS + p0, p1 - p0);
      else
        fbx__tcv_im2col(j, pk, rowbuf, p0, p1);
      built = t;
    }
    if (!j->epi->prog) {
      fbx_cpu_conv_gemm(j->w, K, j->bias, pk, K, p1 - p0, m0, m1, j->y + p0, j->OS);
      continue;
    }
    /* with an epilogue: 12 output channels at a time (the GEMM's row block on
     * both ISAs: 12 = 2 x 6), so the epilogue reads rows the GEMM has just
     * written, from L1 (12 x 480 floats = 23 KiB for rec's 240x240 1x1), not
     * the whole tile back from L2 */
    for (int64_t mb0 = m0; mb0 < m1; mb0 += FBX__CV_EPI_ROWS) {
      int64_t mb1 = mb0 + FBX__CV_EPI_ROWS < m1 ? mb0 + FBX__CV_EPI_ROWS : m1;
      fbx_cpu_conv_gemm(j->w, K, j->bias, pk, K, p1 - p0, mb0, mb1, j->y + p0, j->OS);
      for (int64_t m = mb0; m < mb1; m++)
        fbx_cpu_epi_apply(j->epi, j->ybase + m * j->OS + p0, j->ybase + m * j->OS + p1, worker);
    }
  }
}

/* Output positions per tile: a packed K x tile column block of ~512 KiB
 * (stays in the 2 MiB L2 while every 6-row block of W streams over it); a
 * multiple of 16. */
#define FBX__CV_PACK_BYTES (512 * 1024)
#define FBX__CV_INPLACE_MAX_OS 4096 /* row stride 16 KiB */
static int64_t fbx__cv_tile(int64_t rows, int64_t bytes, int64_t OS) {
  int64_t tile = (bytes / 4) / (rows > 0 ? rows : 1);
  tile = tile < 64 ? 64 : (tile / 16) * 16;
  return tile > OS ? OS : tile;
}

fbx_status *fbx_cpu_conv_tiled_run(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                   fbx_tensor *out, const fbx_cpu_conv_geom *gp, fbx_kernel_info *info) {
  const fbx_cpu_conv_geom g = *gp;
  const float *x = in[0].data, *w = in[1].data;
  const float *b = fbx_cpu_present(in, n_in, 2) ? in[2].data : NULL;
  float *y = out[0].data;
  int64_t Cg = g.C / g.G, Mg = g.M / g.G;
  int64_t IS = g.in[0] * g.in[1] * g.in[2], OS = g.out[0] * g.out[1] * g.out[2];
  int64_t KV = g.k[0] * g.k[1] * g.k[2];
  fbx_cpu_epi epi;
  void *mem = NULL;
  bool pointwise = KV == 1 && g.s[0] == 1 && g.s[1] == 1 && g.s[2] == 1 && g.pb[0] == 0 && g.pb[1] == 0 &&
                   g.pb[2] == 0 && OS == IS;
  int64_t K = Cg * KV;
  int64_t tile = fbx__cv_tile(K, FBX__CV_PACK_BYTES, OS);
  int64_t ntiles = (OS + tile - 1) / tile, mblocks = 1;
  /* Work split for the threads: fewer tiles than threads (deep layers:
   * 512x7x7 is a single tile) -> split the output channels too; else a
   * multiple of the thread count of equal tiles. */
  int64_t nt = c->threads > 1 ? c->threads : 1;
  if (nt > 1 && ntiles < nt && Mg >= 12 * nt && 2.0 * (double)Mg * (double)OS * (double)K > 4e5) {
    mblocks = nt;
    tile = (OS + ntiles - 1) / ntiles;
  } else if (nt > 1 && OS >= 32 * nt && 2.0 * (double)Mg * (double)OS * (double)K > 4e5) {
    ntiles = (ntiles + nt - 1) / nt * nt;
    tile = (OS + ntiles - 1) / ntiles;
    tile = (tile + 15) / 16 * 16;
    ntiles = (OS + tile - 1) / tile;
  }
  int64_t tpad = (tile + 15) / 16 * 16;
  /* Pointwise with AVX-512: the GEMM reads X in place (row k at k * OS, masked
   * loads at the tile's last columns, so nothing past a row is touched) instead
   * of packing each tile into 16-wide panels first. Measured on Zen 4
   * (bench_conv 1x1 shapes of PP-OCR det/rec): 2-14% more GFLOP per CPU-second
   * than pack + GEMM on maps up to 40x40 / 24x160, but 20-30% fewer on det's
   * 48->48 at 160x160: a panel pair then spans K rows 100 KiB apart (a page
   * each; TLB misses), so planes over FBX__CV_INPLACE_MAX_OS positions keep
   * packing. The AVX2 GEMM loads whole 16-column blocks, so it keeps the
   * packed panels (a tail block would read past the end of X). */
  bool inplace = pointwise && fbx_cpu_avx512_enabled() && OS <= FBX__CV_INPLACE_MAX_OS &&
                 (double)K * (double)OS < 2e9; /* koff in int32 */
  size_t col_bytes = inplace ? (size_t)K * sizeof(int32_t)
                             : (size_t)(K * tpad + tpad) * sizeof(float) * (size_t)c->threads;
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], col_bytes, &mem, &epi));
  if (!mem) return FBX_ERR_OOM();
  int32_t *koff = inplace ? (int32_t *)mem : NULL;
  if (koff)
    for (int64_t k = 0; k < K; k++) koff[k] = (int32_t)(k * OS);
  if (inplace) {
    info->variant = "conv_1x1_inplace_gemm";
    info->reason = "1x1 stride 1 pad 0, AVX-512: 12x32 GEMM reading X in place per output tile (+bias, epilogue in cache)";
  } else if (pointwise) {
    info->variant = "conv_1x1_packed_gemm";
    info->reason = "1x1 stride 1 pad 0: per output tile, pack X + 6x16 AVX2 GEMM (+bias, epilogue in cache)";
  } else {
    info->variant = "conv_im2col_packed_gemm";
    info->reason = "im2col per output tile into 16-wide panels (in cache) + 6x16 AVX2 GEMM, parallel over tiles";
  }
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t gi = 0; gi < g.G; gi++) {
      fbx__tcv_job j = {.g = &g, .x = x + (n * g.C + gi * Cg) * IS, .w = w + gi * Mg * Cg * KV,
                        .bias = b ? b + gi * Mg : NULL, .y = y + (n * g.M + gi * Mg) * OS,
                        .col = mem, .Cg = Cg, .Mg = Mg, .KV = KV, .OS = OS, .tile = tile,
                        .pointwise = pointwise, .epi = &epi, .ybase = (n * g.M + gi * Mg) * OS,
                        .mblocks = mblocks, .koff = koff};
      fbx_cpu_par(c, ntiles * mblocks, 1, fbx__tcv_task, &j);
    }
  return fbx_cpu_epi_end(&epi);
}
