/* CONV and CONV_TRANSPOSE, 1-3 spatial dims (missing dims are 1).
 *   depthwise (group == C == M): direct AVX2 kernel on a zero-padded plane
 *                                (2 rows x 16 outputs per step), parallel over (n, c)
 *   2D (not 1x1 stride 1)      : direct: X repacked once into zero-padded
 *                                stride-phase planes, then our 6x16 AVX2 GEMM
 *                                reads B at per-tap offsets (no im2col),
 *                                parallel over output-row tiles (x channel blocks)
 *   <= 16 output positions     : columns built transposed, dot products of
 *                                contiguous weight rows (fbx__scv_*)
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
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_simd.h"

/* Geometry normalised to 3 spatial dims (D, H, W). */
typedef struct fbx__cv_geom {
  int64_t N, C, M, G;
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
} fbx__cv_geom;

static fbx_status *fbx__cv_geom_fill(const fbx_ir_node *node, const fbx_tensor *x, const fbx_tensor *w,
                                     const fbx_tensor *y, fbx__cv_geom *g) {
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

/* ---- depthwise ---- */
typedef struct fbx__dw_job {
  const fbx__cv_geom *g;
  const float *x, *w, *b;
  float *y;
  fbx_cpu_epi *epi;
} fbx__dw_job;

static void fbx__dw_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__dw_job *j = arg;
  const fbx__cv_geom *g = j->g;
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
  const fbx__cv_geom *g;
  const float *x, *w, *b;
  float *y;
  float *pad;          /* per worker: PH * PW */
  int64_t PH, PW;
  fbx_cpu_epi *epi;
} fbx__dw2_job;

/* 8 floats q[0], q[2], ..., q[14] */
static inline __m256 fbx__even8(const float *q) {
  __m256 lo = _mm256_loadu_ps(q), hi = _mm256_loadu_ps(q + 8);
  __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
}

static void fbx__dw2_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__dw2_job *j = arg;
  const fbx__cv_geom *g = j->g;
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

/* ---- tiled im2col + sgemm: parallel over tiles of output positions; each
 * worker builds the (Cg*KV, tile) column block in its own scratch (stays in
 * L2) and runs a single-threaded sgemm + bias on it. ---- */
typedef struct fbx__tcv_job {
  const fbx__cv_geom *g;
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
} fbx__tcv_job;

/* pk (packed panels, see fbx_cpu_conv_gemm) <- im2col rows for output
 * positions [p0, p1); each row is built in rowbuf (p1-p0 floats) first. */
static void fbx__tcv_im2col(const fbx__tcv_job *j, float *pk, float *rowbuf, int64_t p0, int64_t p1) {
  const fbx__cv_geom *g = j->g;
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
    if (built != t) {
      if (j->pointwise)
        for (int64_t r = 0; r < K; r++) fbx_cpu_conv_pack_row(pk, K, r, j->x + r * j->OS + p0, p1 - p0);
      else
        fbx__tcv_im2col(j, pk, rowbuf, p0, p1);
      built = t;
    }
    fbx_cpu_conv_gemm(j->w, K, j->bias, pk, K, p1 - p0, m0, m1, j->y + p0, j->OS);
    if (j->epi->pl)
      for (int64_t m = m0; m < m1; m++)
        fbx_cpu_epi_apply(j->epi, j->ybase + m * j->OS + p0, j->ybase + m * j->OS + p1, worker);
  }
}

/* ---- direct 2D conv (no im2col): X is repacked once per call into s*s
 * phase planes per channel, zero padded: xr[c][a][b][i][j] =
 * xpad[s*i + a][s*j + b] (PH2 x PW2 each). Then output (oh, ow) of tap
 * (c, kh, kw) reads plane (c, kh*d % s, kw*d % s) at q + koff, with
 * q = oh*PW2 + ow and koff = (kh*d / s)*PW2 + kw*d / s: the GEMM B matrix is
 * the repacked input itself at per-tap offsets (cpu_conv_gemm.c), over
 * flattened q (columns ow >= OW of each row are computed and dropped). ---- */
typedef struct fbx__dcv_job {
  const fbx__cv_geom *g;
  const float *x;        /* (C, IH, IW) of image n */
  float *xr;             /* (C, nph, npw, PH2, PW2) + slack */
  const float *w, *bias; /* of the group: (Mg, K), (Mg) */
  const int32_t *koff;   /* (K) relative to the group's first channel plane */
  float *y;              /* (Mg, OS) of the group */
  float *tmp;            /* per worker: (Mg, tmpld) */
  int64_t Mg, K, PH2, PW2, rows, mblocks, tmpld, xoff;
  int64_t nph, npw;      /* stride phases used (only those are repacked) */
  int8_t ph[4], pw[4];   /* used phase index -> phase (a or b) */
  fbx_cpu_epi *epi;
  int64_t ybase;
} fbx__dcv_job;

static void fbx__dcv_repack_task(void *arg, int64_t c0, int64_t c1, int worker) {
  const fbx__dcv_job *j = arg;
  const fbx__cv_geom *g = j->g;
  const int64_t s = g->s[2], sh = g->s[1], IH = g->in[1], IW = g->in[2], PH2 = j->PH2, PW2 = j->PW2;
  const int64_t pt = g->pb[1], pl = g->pb[2];
  for (int64_t c = c0; c < c1; c++)
    for (int64_t ia = 0; ia < j->nph; ia++)
      for (int64_t ib = 0; ib < j->npw; ib++) {
        const int64_t a = j->ph[ia], b = j->pw[ib];
        float *pl_ = j->xr + ((c * j->nph + ia) * j->npw + ib) * PH2 * PW2;
        /* valid j: 0 <= s*j + b - pl < IW */
        int64_t off = b - pl;
        int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
        int64_t hi = IW - off <= 0 ? 0 : (IW - off + s - 1) / s;
        if (hi > PW2) hi = PW2;
        if (lo > hi) lo = hi;
        for (int64_t i = 0; i < PH2; i++) {
          float *dst = pl_ + i * PW2;
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

static void fbx__dcv_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__dcv_job *j = arg;
  const fbx__cv_geom *g = j->g;
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
    fbx_cpu_conv_gemm_off(j->w, j->K, j->bias, j->xr + j->xoff + oh0 * PW2, j->koff, j->K, width, m0, m1, tmp,
                          j->tmpld);
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
static bool fbx__dcv_ok(const fbx__cv_geom *g) {
  if (g->k[0] != 1 || g->in[0] != 1 || g->out[0] != 1) return false;
  if (g->pb[1] < 0 || g->pb[2] < 0) return false;
  if (g->s[1] > 4 || g->s[2] > 4) return false;
  if ((g->k[2] - 1) * g->d[2] / g->s[2] > 32) return false; /* tail reads stay in the 64-float slack */
  int64_t KV = g->k[1] * g->k[2];
  if (KV == 1 && g->s[1] == 1 && g->s[2] == 1) return false; /* 1x1 stride 1: packed path */
  return true;
}

static fbx_status *fbx__dcv_run(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                fbx_tensor *out, const fbx__cv_geom *g, fbx_kernel_info *info) {
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
  const int64_t plane = PH2 * PW2, xr_n = g->C * nph * npw * plane + 64;
  if (xr_n > INT32_MAX) return FBX_ERR_NOTIMPL("CONV: direct path too large");
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
  size_t koff_n = (size_t)(K + 15) / 16 * 16;
  size_t bytes = ((size_t)xr_n + koff_n + (size_t)(Mg * tmpld) * (size_t)c->threads) * sizeof(float);
  void *mem = NULL;
  fbx_cpu_epi epi;
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], bytes, &mem, &epi));
  if (!mem) return FBX_ERR_OOM();
  float *xr = mem;
  int32_t *koff = (int32_t *)(xr + xr_n);
  float *tmp = xr + xr_n + koff_n;
  memset(xr + xr_n - 64, 0, 64 * sizeof(float));
  for (int64_t cc = 0; cc < Cg; cc++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++) {
        int64_t a = iph[(kh * dh) % sh], bb = ipw[(kw * dw) % sw];
        koff[(cc * KH + kh) * KW + kw] =
            (int32_t)(((cc * nph + a) * npw + bb) * plane + ((kh * dh) / sh) * PW2 + (kw * dw) / sw);
      }
  info->variant = "conv_direct_gemm";
  info->reason = "2D: input repacked into zero-padded stride-phase planes, 6x16 AVX2 GEMM on per-tap offsets";
  for (int64_t n = 0; n < g->N; n++) {
    fbx__dcv_job j = {.g = g, .x = x + n * g->C * g->in[1] * g->in[2], .xr = xr, .koff = koff, .tmp = tmp,
                      .Mg = Mg, .K = K, .PH2 = PH2, .PW2 = PW2, .rows = rows, .mblocks = mblocks,
                      .tmpld = tmpld, .epi = &epi, .nph = nph, .npw = npw};
    memcpy(j.ph, ph, sizeof ph);
    memcpy(j.pw, pw, sizeof pw);
    if (g->C * plane * nph * npw > 32768 && nt > 1)
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

/* Output positions per tile: a packed K x tile column block of ~512 KiB
 * (stays in the 2 MiB L2 while every 6-row block of W streams over it); a
 * multiple of 16. */
#define FBX__CV_PACK_BYTES (512 * 1024)
/* ---- few output positions (OS <= 16 per image: the 1-D convs of streaming
 * audio models on one chunk, deep layers of tiny maps): the GEMM kernels
 * vectorise over output positions and would run 16-wide panels mostly
 * empty. Instead the columns are built transposed, colT (OS, K), and every
 * output channel m takes OS dot products of its contiguous weight row W[m, :]
 * with the colT rows (4 at a time, AVX2), parallel over channels. ---- */
#define FBX__SCV_MAX_OS 16
typedef struct fbx__scv_job {
  const float *w, *bias, *colT; /* (Mg, K), (Mg) or NULL, (OS, K) */
  float *y;                     /* (Mg, OS) */
  int64_t K, OS;
  fbx_cpu_epi *epi;
  int64_t ybase;
} fbx__scv_job;

static void fbx__scv_task(void *arg, int64_t m0, int64_t m1, int worker) {
  const fbx__scv_job *j = arg;
  const int64_t K = j->K, OS = j->OS;
  for (int64_t m = m0; m < m1; m++) {
    const float *wr = j->w + m * K;
    const float bias = j->bias ? j->bias[m] : 0.f;
    float *yr = j->y + m * OS;
    int64_t p = 0;
    for (; p + 4 <= OS; p += 4) {
      const float *c0 = j->colT + p * K, *c1 = c0 + K, *c2 = c1 + K, *c3 = c2 + K;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) {
        __m256 wv = _mm256_loadu_ps(wr + k);
        a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(c0 + k), a0);
        a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(c1 + k), a1);
        a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(c2 + k), a2);
        a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(c3 + k), a3);
      }
      float s0 = fbx__hsum256(a0), s1 = fbx__hsum256(a1), s2 = fbx__hsum256(a2), s3 = fbx__hsum256(a3);
      for (; k < K; k++) s0 += wr[k] * c0[k], s1 += wr[k] * c1[k], s2 += wr[k] * c2[k], s3 += wr[k] * c3[k];
      yr[p] = s0 + bias, yr[p + 1] = s1 + bias, yr[p + 2] = s2 + bias, yr[p + 3] = s3 + bias;
    }
    for (; p < OS; p++) {
      const float *c0 = j->colT + p * K;
      __m256 a0 = _mm256_setzero_ps();
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + k), _mm256_loadu_ps(c0 + k), a0);
      float s0 = fbx__hsum256(a0);
      for (; k < K; k++) s0 += wr[k] * c0[k];
      yr[p] = s0 + bias;
    }
    if (j->epi->pl) fbx_cpu_epi_apply(j->epi, j->ybase + m * OS, j->ybase + m * OS + OS, worker);
  }
}

/* colT[p, r] = X tap r (channel, kd, kh, kw) of output position p, 0 in the padding. */
static void fbx__scv_cols(const fbx__cv_geom *g, const float *x, int64_t Cg, float *colT) {
  const int64_t K = Cg * g->k[0] * g->k[1] * g->k[2];
  for (int64_t od = 0, p = 0; od < g->out[0]; od++)
    for (int64_t oh = 0; oh < g->out[1]; oh++)
      for (int64_t ow = 0; ow < g->out[2]; ow++, p++) {
        float *cr = colT + p * K;
        for (int64_t cc = 0, r = 0; cc < Cg; cc++)
          for (int64_t kd = 0; kd < g->k[0]; kd++) {
            int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
            for (int64_t kh = 0; kh < g->k[1]; kh++) {
              int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
              bool row_in = id >= 0 && id < g->in[0] && ih >= 0 && ih < g->in[1];
              const float *xr = x + ((cc * g->in[0] + (row_in ? id : 0)) * g->in[1] + (row_in ? ih : 0)) * g->in[2];
              for (int64_t kw = 0; kw < g->k[2]; kw++, r++) {
                int64_t iw = ow * g->s[2] - g->pb[2] + kw * g->d[2];
                cr[r] = row_in && iw >= 0 && iw < g->in[2] ? xr[iw] : 0.f;
              }
            }
          }
      }
}

/* node_prepare state of a group-1 CONV with a constant W: W^T (K, M) in
 * fbx_cpu_gemv_pack panels for the few-positions path, packed at the first
 * run that takes that path (the plan's shapes decide it; a conv that never
 * does costs no memory). The run lock of the backend serialises run_node,
 * so the one-time packing needs no lock of its own. */
typedef struct fbx__scv_pack {
  int64_t K, M;
  float *wt;    /* NULL until packed */
  bool failed;  /* packing ran out of memory once: stay on the dot path */
} fbx__scv_pack;

void fbx_cpu_conv_release(void *state) {
  fbx__scv_pack *s = state;
  if (!s) return;
  fbx_free_aligned(s->wt);
  fbx_free(s);
}

fbx_status *fbx_cpu_conv_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                 const fbx_tensor *inputs, void **state) {
  (void)c, (void)inputs;
  *state = NULL;
  if (node->op != FBX_IR_OP_CONV || !const_inputs || !const_inputs[1] || node->params.conv.group > 1) return NULL;
  const fbx_tensor *w = const_inputs[1];
  if (w->dtype != FBX_DTYPE_F32 || w->rank < 3) return NULL;
  fbx__scv_pack *s = fbx_calloc(1, sizeof *s);
  if (!s) return FBX_ERR_OOM();
  s->M = w->dims[0];
  s->K = 1;
  for (int i = 1; i < w->rank; i++) s->K *= w->dims[i];
  *state = s;
  return NULL;
}

static fbx_status *fbx__scv_run(fbx_cpu_ctx *c, const fbx_ir_node *node, void *state, const fbx_tensor *in,
                                int n_in, fbx_tensor *out, const fbx__cv_geom *g, fbx_kernel_info *info) {
  const int64_t Cg = g->C / g->G, Mg = g->M / g->G, KV = g->k[0] * g->k[1] * g->k[2], K = Cg * KV;
  const int64_t IS = g->in[0] * g->in[1] * g->in[2], OS = g->out[0] * g->out[1] * g->out[2];
  const float *x = in[0].data, *w = in[1].data, *b = fbx_cpu_present(in, n_in, 2) ? in[2].data : NULL;
  fbx__scv_pack *pk = state;
  if (pk && (g->G != 1 || pk->K != K || pk->M != g->M || pk->failed)) pk = NULL;
  if (pk && !pk->wt) { /* first run on this path: pack W once (allocation outside the steady state) */
    fbx_status *st = fbx_cpu_gemv_pack(w, K, g->M, true, &pk->wt);
    if (st) {
      fbx_status_free(st);
      pk->failed = true;
      pk = NULL;
    }
  }
  fbx_cpu_epi epi;
  void *mem = NULL;
  size_t extra = pk ? (size_t)(OS * g->M) : 0; /* yT (OS, M) */
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], ((size_t)(OS * K) + extra) * sizeof(float), &mem, &epi));
  if (!mem) return FBX_ERR_OOM();
  if (pk) {
    /* Y^T (OS, M) = colT (OS, K) @ W^T: the small-M packed kernel, vectorised over channels */
    float *colT = mem, *yT = colT + OS * K;
    for (int64_t n = 0; n < g->N; n++) {
      float *y = (float *)out[0].data + n * g->M * OS;
      fbx__scv_cols(g, x + n * g->C * IS, Cg, colT);
      fbx_cpu_gemm_packed(c, colT, K, pk->wt, yT, g->M, OS, K, g->M, 1.f);
      for (int64_t m = 0; m < g->M; m++) {
        const float bias = b ? b[m] : 0.f;
        for (int64_t p = 0; p < OS; p++) y[m * OS + p] = yT[p * g->M + m] + bias;
      }
      if (epi.pl) fbx_cpu_epi_apply(&epi, n * g->M * OS, (n + 1) * g->M * OS, 0);
    }
    info->variant = "conv_small_out_packed";
    info->reason = "<= 16 output positions: transposed columns x W packed at compile (small-M kernel over channels)";
    return fbx_cpu_epi_end(&epi);
  }
  /* each chunk of channels at least ~64K multiply-adds: smaller ones stay on one thread */
  int64_t grain = 65536 / (K * OS > 0 ? K * OS : 1);
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t gi = 0; gi < g->G; gi++) {
      fbx__scv_cols(g, x + (n * g->C + gi * Cg) * IS, Cg, mem);
      fbx__scv_job j = {.w = w + gi * Mg * K, .bias = b ? b + gi * Mg : NULL, .colT = mem,
                        .y = (float *)out[0].data + (n * g->M + gi * Mg) * OS, .K = K, .OS = OS, .epi = &epi,
                        .ybase = (n * g->M + gi * Mg) * OS};
      fbx_cpu_par(c, Mg, grain < 1 ? 1 : grain, fbx__scv_task, &j);
    }
  info->variant = "conv_small_out_dot";
  info->reason = "<= 16 output positions: columns built transposed, one dot product per channel and position";
  return fbx_cpu_epi_end(&epi);
}

static int64_t fbx__cv_tile(int64_t rows, int64_t bytes, int64_t OS) {
  int64_t tile = (bytes / 4) / (rows > 0 ? rows : 1);
  tile = tile < 64 ? 64 : (tile / 16) * 16;
  return tile > OS ? OS : tile;
}

fbx_status *fbx_cpu_k_CONV(FBX_CPU_KERNEL_ARGS) {
  if (n_in < 2) return FBX_ERR_ARG("CONV: needs X and W");
  fbx__cv_geom g;
  FBX_TRY(fbx__cv_geom_fill(node, &in[0], &in[1], &out[0], &g));
  const float *x = in[0].data, *w = in[1].data;
  const float *b = fbx_cpu_present(in, n_in, 2) ? in[2].data : NULL;
  float *y = out[0].data;
  int64_t Cg = g.C / g.G, Mg = g.M / g.G;
  int64_t IS = g.in[0] * g.in[1] * g.in[2], OS = g.out[0] * g.out[1] * g.out[2];
  int64_t KV = g.k[0] * g.k[1] * g.k[2];
  if (in[1].dims[1] != Cg) return FBX_ERR_ARG("CONV: W has %lld input channels, expected %lld", (long long)in[1].dims[1], (long long)Cg);
  info->flops = 2.0 * (double)g.N * (double)g.M * (double)OS * (double)Cg * (double)KV;
  if (g.N * g.M * OS == 0) return NULL;
  fbx_cpu_epi epi;
  void *mem = NULL;
  if (g.G == g.C && g.M == g.C) {
    info->variant = "conv_depthwise_direct";
    info->reason = "group == C == M";
    bool fast2d = g.k[0] == 1 && g.in[0] == 1 && g.out[0] == 1 && g.d[1] == 1 && g.d[2] == 1 &&
                  (g.s[1] == 1 || g.s[1] == 2) && (g.s[2] == 1 || g.s[2] == 2) && g.pb[1] >= 0 && g.pb[2] >= 0;
    if (fast2d) {
      /* padded plane: every tap of every (vector) output lies inside it */
      int64_t PH = g.in[1] + g.pb[1], PW = g.in[2] + g.pb[2];
      int64_t needh = (g.out[1] + 1) * g.s[1] + g.k[1], needw = (g.out[2] + 15) / 16 * 16 * g.s[2] + g.k[2] + 16;
      if (PH < needh) PH = needh;
      if (PW < needw) PW = needw;
      FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], (size_t)(PH * PW) * sizeof(float) * (size_t)c->threads,
                                &mem, &epi));
      info->variant = "conv_depthwise_avx2";
      fbx__dw2_job j = {.g = &g, .x = x, .w = w, .b = b, .y = y, .pad = mem, .PH = PH, .PW = PW, .epi = &epi};
      fbx_cpu_par(c, g.N * g.C, 1, fbx__dw2_task, &j);
      return fbx_cpu_epi_end(&epi);
    }
    FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], 0, &mem, &epi));
    fbx__dw_job j = {.g = &g, .x = x, .w = w, .b = b, .y = y, .epi = &epi};
    fbx_cpu_par(c, g.N * g.C, 1, fbx__dw_task, &j);
    return fbx_cpu_epi_end(&epi);
  }
  if (OS <= FBX__SCV_MAX_OS) return fbx__scv_run(c, node, state, in, n_in, out, &g, info);
  if (fbx__dcv_ok(&g)) return fbx__dcv_run(c, node, in, n_in, out, &g, info);
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
  size_t col_bytes = (size_t)(K * tpad + tpad) * sizeof(float) * (size_t)c->threads;
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], col_bytes, &mem, &epi));
  if (!mem) return FBX_ERR_OOM();
  if (pointwise) {
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
                        .mblocks = mblocks};
      fbx_cpu_par(c, ntiles * mblocks, 1, fbx__tcv_task, &j);
    }
  return fbx_cpu_epi_end(&epi);
}

/* col2im of CONV_TRANSPOSE, parallel over output channels (disjoint writes). */
typedef struct fbx__c2i_job {
  const fbx__cv_geom *g;
  const float *col;   /* (Mg*KV, IS) */
  float *y;           /* (Mg, OS) */
  const float *bias;  /* (Mg) or NULL */
  int64_t KV, IS, OS;
  fbx_cpu_epi *epi;
  int64_t ybase;      /* flattened output index of y[0] (for the epilogue) */
} fbx__c2i_job;

static void fbx__c2i_task(void *arg, int64_t m0, int64_t m1, int worker) {
  const fbx__c2i_job *j = arg;
  const fbx__cv_geom *g = j->g;
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
  const fbx__cv_geom *g;
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
  const fbx__cv_geom *g = j->g;
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

static bool fbx__ctk_ok(const fbx__cv_geom *g) {
  return g->G == 1 && g->k[0] == 1 && g->in[0] == 1 && g->out[0] == 1 && g->k[1] == g->s[1] &&
         g->k[2] == g->s[2] && g->d[1] == 1 && g->d[2] == 1 && g->pb[1] == 0 && g->pb[2] == 0 &&
         g->out[1] == g->in[1] * g->s[1] && g->out[2] == g->in[2] * g->s[2];
}

static fbx_status *fbx__ctk_run(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                fbx_tensor *out, const fbx__cv_geom *g, fbx_kernel_info *info) {
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
  fbx__cv_geom g;
  FBX_TRY(fbx__cv_geom_fill(node, &in[0], &in[1], &out[0], &g));
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
