/* CONV with few output positions (fbx_cpu_conv_small_run, OS <= FBX_CPU_CONV_SMALL_MAX_OS
 * per image): the 1-D convs of streaming audio models on one chunk, deep
 * layers of tiny maps; and, with W packed at compile, the small maps of many
 * channels that fbx_cpu_conv_cols_ok admits (a ResNet's 7x7 / 14x14 stages):
 * im2col rows times the packed W through the prepacked-B GEMM. */
#include <string.h>

#include "cpu_conv.h"
#include "cpu_gemm.h"
#include "cpu_simd.h"

/* ---- few output positions (OS <= 16 per image: the 1-D convs of streaming
 * audio models on one chunk, deep layers of tiny maps): the GEMM kernels
 * vectorise over output positions and would run 16-wide panels mostly
 * empty. Instead the columns are built transposed, colT (OS, K), and every
 * output channel m takes OS dot products of its contiguous weight row W[m, :]
 * with the colT rows (4 at a time, AVX2), parallel over channels. ---- */
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
    if (j->epi->prog) fbx_cpu_epi_apply(j->epi, j->ybase + m * OS, j->ybase + m * OS + OS, worker);
  }
}

/* colT[p, r] = X tap r (channel, kd, kh, kw) of output position p, 0 in the padding; positions [p0, p1). */
static void fbx__scv_cols(const fbx_cpu_conv_geom *g, const float *x, int64_t Cg, float *colT, int64_t p0,
                          int64_t p1) {
  const int64_t K = Cg * g->k[0] * g->k[1] * g->k[2], OW = g->out[2], OH = g->out[1];
  for (int64_t p = p0; p < p1; p++) {
    const int64_t ow = p % OW, oh = (p / OW) % OH, od = p / (OW * OH);
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

/* col[r, p] (K, OS): row r = tap (channel, kd, kh, kw) over every output position, 0 in the padding;
 * rows [r0, r1). Along an output row the taps read one input row, contiguous for stride 1 (a copy). */
static void fbx__scv_colsk(const fbx_cpu_conv_geom *g, const float *x, float *col, int64_t r0, int64_t r1) {
  const int64_t KD = g->k[0], KH = g->k[1], KW = g->k[2], OD = g->out[0], OH = g->out[1], OW = g->out[2];
  const int64_t OS = OD * OH * OW, sw = g->s[2];
  for (int64_t r = r0; r < r1; r++) {
    const int64_t kw = r % KW, kh = (r / KW) % KH, kd = (r / (KW * KH)) % KD, cc = r / (KW * KH * KD);
    /* output columns [lo, hi) read inside the input row: 0 <= ow * sw - pad + kw * d < IW */
    const int64_t off = kw * g->d[2] - g->pb[2], IW = g->in[2];
    int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw, hi = IW - off <= 0 ? 0 : (IW - off + sw - 1) / sw;
    if (hi > OW) hi = OW;
    if (lo > hi) lo = hi;
    float *dst = col + r * OS;
    for (int64_t od = 0; od < OD; od++) {
      const int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
      for (int64_t oh = 0; oh < OH; oh++, dst += OW) {
        const int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
        if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1] || lo == hi) {
          memset(dst, 0, sizeof(float) * (size_t)OW);
          continue;
        }
        const float *xr = x + ((cc * g->in[0] + id) * g->in[1] + ih) * IW + off;
        memset(dst, 0, sizeof(float) * (size_t)lo);
        if (sw == 1)
          memcpy(dst + lo, xr + lo, sizeof(float) * (size_t)(hi - lo));
        else
          for (int64_t ow = lo; ow < hi; ow++) dst[ow] = xr[ow * sw];
        memset(dst + hi, 0, sizeof(float) * (size_t)(OW - hi));
      }
    }
  }
}

/* The packed path's parallel steps: colT's rows, then Y (M, OS) = yT^T + bias and the epilogue per
 * channel row. */
typedef struct fbx__scv_pjob {
  const fbx_cpu_conv_geom *g;
  const float *x, *bias, *yT;
  float *colT, *y;
  int64_t Cg, OS, M, ybase;
  fbx_cpu_epi *epi;
} fbx__scv_pjob;

static void fbx__scv_cols_task(void *arg, int64_t p0, int64_t p1, int worker) {
  (void)worker;
  const fbx__scv_pjob *j = arg;
  fbx__scv_cols(j->g, j->x, j->Cg, j->colT, p0, p1);
}

static void fbx__scv_colsk_task(void *arg, int64_t r0, int64_t r1, int worker) {
  (void)worker;
  const fbx__scv_pjob *j = arg;
  fbx__scv_colsk(j->g, j->x, j->colT, r0, r1);
}

static void fbx__scv_out_task(void *arg, int64_t m0, int64_t m1, int worker) {
  const fbx__scv_pjob *j = arg;
  for (int64_t m = m0; m < m1; m++) {
    const float bias = j->bias ? j->bias[m] : 0.f;
    float *yr = j->y + m * j->OS;
    for (int64_t p = 0; p < j->OS; p++) yr[p] = j->yT[p * j->M + m] + bias;
    if (j->epi->prog) fbx_cpu_epi_apply(j->epi, j->ybase + m * j->OS, j->ybase + (m + 1) * j->OS, worker);
  }
}

void fbx_cpu_conv_release(void *state) {
  fbx_cpu_conv_state *s = state;
  if (!s) return;
  fbx_free_aligned(s->wt);
  fbx_free_aligned(s->wo);
  fbx_free(s);
}

fbx_status *fbx_cpu_conv_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                 const fbx_tensor *inputs, void **state) {
  (void)c, (void)inputs;
  *state = NULL;
  if (node->op != FBX_IR_OP_CONV || !const_inputs || !const_inputs[1] || node->params.conv.group > 1) return NULL;
  const fbx_tensor *w = const_inputs[1];
  if (w->dtype != FBX_DTYPE_F32 || w->rank < 3) return NULL;
  fbx_cpu_conv_state *s = fbx_calloc(1, sizeof *s);
  if (!s) return FBX_ERR_OOM();
  s->M = w->dims[0];
  s->K = 1;
  for (int i = 1; i < w->rank; i++) s->K *= w->dims[i];
  *state = s;
  return NULL;
}

bool fbx_cpu_conv_cols_ok(const void *state, const fbx_cpu_conv_geom *g, int threads) {
  const fbx_cpu_conv_state *pk = state;
  const int64_t OS = g->out[0] * g->out[1] * g->out[2], K = g->C * g->k[0] * g->k[1] * g->k[2];
  /* 3x3 taps or more, and enough work per thread: measured, ResNet-18's 7x7 / 14x14 stages at 2 threads
     (58-115 MFLOP a thread) 1.2-2.1x faster than the direct kernel, the same model at 16 threads (7-14)
     slower (its fixed steps - columns, A slivers, the transpose - do not shrink with threads);
     PP-OCR rec's 1x3 convs on 1x40 maps slower, kept direct */
  const int64_t KV = g->k[0] * g->k[1] * g->k[2];
  const double flops = 2.0 * (double)g->N * (double)g->M * (double)K * (double)OS;
  return pk && !pk->failed && g->G == 1 && pk->K == K && pk->M == g->M && KV >= 9 && OS <= FBX_CPU_CONV_COLS_MAX_OS &&
         OS * K <= FBX_CPU_CONV_COLS_MAX && flops >= FBX_CPU_CONV_COLS_MIN_FLOPS * (threads > 0 ? threads : 1);
}

fbx_status *fbx_cpu_conv_small_run(fbx_cpu_ctx *c, const fbx_ir_node *node, void *state, const fbx_tensor *in,
                                int n_in, fbx_tensor *out, const fbx_cpu_conv_geom *g, fbx_kernel_info *info) {
  const int64_t Cg = g->C / g->G, Mg = g->M / g->G, KV = g->k[0] * g->k[1] * g->k[2], K = Cg * KV;
  const int64_t IS = g->in[0] * g->in[1] * g->in[2], OS = g->out[0] * g->out[1] * g->out[2];
  const float *x = in[0].data, *w = in[1].data, *b = fbx_cpu_present(in, n_in, 2) ? in[2].data : NULL;
  fbx_cpu_conv_state *pk = state;
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
    /* Y^T (OS, M) = colT (OS, K) @ W^T: up to a few rows the small-M packed kernel, vectorised over
       channels; more rows (a deep layer's 7x7 or 14x14 map) the prepacked-B GEMM, whose A slivers
       the workers share (as MATMUL chooses, cpu_matmul.c) */
    float *colT = mem, *yT = colT + OS * K;
    const bool blocked = OS > fbx_cpu_small_m_max();
    for (int64_t n = 0; n < g->N; n++) {
      fbx__scv_pjob j = {.g = g, .x = x + n * g->C * IS, .bias = b, .yT = yT, .colT = colT,
                         .y = (float *)out[0].data + n * g->M * OS, .Cg = Cg, .OS = OS, .M = g->M,
                         .ybase = n * g->M * OS, .epi = &epi};
      if (blocked) { /* col (K, OS) as op(A) transposed: its rows are copies of input rows */
        fbx_cpu_par(c, K, 1 + 65536 / (OS + 1), fbx__scv_colsk_task, &j);
        fbx_cpu_gemm_desc d = {.ta = true, .tb = true, .M = OS, .N = g->M, .K = K, .alpha = 1.f, .A = colT,
                               .lda = OS, .B = w, .ldb = K, .Bpk = pk->wt, .C = yT, .ldc = g->M, .nbatch = 1};
        FBX_TRY(fbx_cpu_gemm(c, &d));
      } else {
        fbx_cpu_par(c, OS, 1 + 65536 / (K + 1), fbx__scv_cols_task, &j);
        fbx_cpu_gemm_packed(c, colT, K, pk->wt, yT, g->M, OS, K, g->M, 1.f);
      }
      fbx_cpu_par(c, g->M, 1 + 16384 / (OS + 1), fbx__scv_out_task, &j);
    }
    info->variant = blocked ? "conv_cols_packed_gemm" : "conv_small_out_packed";
    info->reason = blocked ? "small map: im2col columns x W packed at compile, the prepacked-B GEMM"
                           : "few output positions: transposed columns x W packed at compile (small-M kernel over "
                             "channels)";
    return fbx_cpu_epi_end(&epi);
  }
  /* each chunk of channels at least ~64K multiply-adds: smaller ones stay on one thread */
  int64_t grain = 65536 / (K * OS > 0 ? K * OS : 1);
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t gi = 0; gi < g->G; gi++) {
      fbx__scv_cols(g, x + (n * g->C + gi * Cg) * IS, Cg, mem, 0, OS);
      fbx__scv_job j = {.w = w + gi * Mg * K, .bias = b ? b + gi * Mg : NULL, .colT = mem,
                        .y = (float *)out[0].data + (n * g->M + gi * Mg) * OS, .K = K, .OS = OS, .epi = &epi,
                        .ybase = (n * g->M + gi * Mg) * OS};
      fbx_cpu_par(c, Mg, grain < 1 ? 1 : grain, fbx__scv_task, &j);
    }
  info->variant = "conv_small_out_dot";
  info->reason = "<= 16 output positions: columns built transposed, one dot product per channel and position";
  return fbx_cpu_epi_end(&epi);
}

