/* MAXPOOL / AVGPOOL / LPPOOL (1-3 spatial dims, pads, strides, dilations,
 * ceil_mode via the given output shape, count_include_pad) and the global
 * pools. F32. Parallel over (n, c) planes. MAXPOOL of a window holding a NaN
 * is NaN (np.max; ORT's CPU EP skips NaNs), its index output the first
 * NaN's. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

typedef struct fbx__pl_job {
  const float *x;
  float *y;
  int64_t *idx;          /* MAXPOOL indices output or NULL */
  fbx_ir_op op;
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  int include_pad;
  double p;
} fbx__pl_job;

static void fbx__pl_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__pl_job *j = arg;
  int64_t IS = j->in[0] * j->in[1] * j->in[2], OS = j->out[0] * j->out[1] * j->out[2];
  for (int64_t p = p0; p < p1; p++) {
    const float *x = j->x + p * IS;
    float *y = j->y + p * OS;
    for (int64_t od = 0; od < j->out[0]; od++)
      for (int64_t oh = 0; oh < j->out[1]; oh++)
        for (int64_t ow = 0; ow < j->out[2]; ow++) {
          int64_t o[3] = {od, oh, ow}, st[3], en[3], lo[3], hi[3];
          int64_t pad_count = 1;
          for (int q = 0; q < 3; q++) {
            st[q] = o[q] * j->s[q] - j->pb[q];
            en[q] = st[q] + (j->k[q] - 1) * j->d[q] + 1;
            /* window limited to the padded extent (ceil_mode windows may pass it) */
            int64_t pe = en[q] < j->in[q] + j->pe[q] ? en[q] : j->in[q] + j->pe[q];
            pad_count *= pe - st[q];
            lo[q] = st[q];
            hi[q] = en[q];
          }
          double acc = j->op == FBX_IR_OP_MAXPOOL ? -INFINITY : 0.0;
          int64_t cnt = 0, arg = -1;
          for (int64_t a = lo[0]; a < hi[0]; a += j->d[0]) {
            if (a < 0 || a >= j->in[0]) continue;
            for (int64_t b = lo[1]; b < hi[1]; b += j->d[1]) {
              if (b < 0 || b >= j->in[1]) continue;
              for (int64_t c = lo[2]; c < hi[2]; c += j->d[2]) {
                if (c < 0 || c >= j->in[2]) continue;
                int64_t off = (a * j->in[1] + b) * j->in[2] + c;
                float v = x[off];
                if (j->op == FBX_IR_OP_MAXPOOL) {
                  if (arg < 0 || v > acc || (v != v && acc == acc)) { acc = v; arg = off; }
                } else if (j->op == FBX_IR_OP_LPPOOL) {
                  acc += pow(fabs(v), j->p);
                } else {
                  acc += v;
                }
                cnt++;
              }
            }
          }
          int64_t oi = (od * j->out[1] + oh) * j->out[2] + ow;
          if (j->op == FBX_IR_OP_AVGPOOL) acc = acc / (double)(j->include_pad ? pad_count : (cnt ? cnt : 1));
          else if (j->op == FBX_IR_OP_LPPOOL) acc = pow(acc, 1.0 / j->p);
          y[oi] = (float)acc;
          if (j->idx) j->idx[p * OS + oi] = p * IS + (arg < 0 ? 0 : arg);
        }
  }
}

/* 2-D MAXPOOL fast path (dilation 1, no indices): per output row, the
 * vertical max of its valid input rows goes into a -inf padded per-worker row
 * (AVX2), then the horizontal max over the kw taps (stride 1/2 vectorised). */
typedef struct fbx__mp2_job {
  const float *x;
  float *y;
  int64_t IH, IW, OH, OW, KH, KW, SH, SW, PT, PL, PW;
  float *rows;  /* per worker: PW floats */
} fbx__mp2_job;

static inline __m256 fbx__mp2_even(const float *p) { /* p[0], p[2], ..., p[14] */
  __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
  __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* max(a, b) that keeps a NaN from either side (maxps alone returns b when
 * one is NaN): the unordered mask ORed in makes the lane an all-ones NaN. */
static inline __m256 fbx__mp2_max(__m256 a, __m256 b) {
  return _mm256_or_ps(_mm256_max_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}
static inline float fbx__mp2_max1(float m, float v) { return (v > m || v != v) ? v : m; }

static void fbx__mp2_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__mp2_job *j = arg;
  float *vb = j->rows + (size_t)worker * (size_t)j->PW;
  const int64_t IW = j->IW, PL = j->PL, PW = j->PW, KW = j->KW, SW = j->SW, OW = j->OW;
  for (int64_t i = 0; i < PW; i++) vb[i] = -INFINITY;
  for (int64_t p = p0; p < p1; p++) {
    const float *x = j->x + p * j->IH * IW;
    float *y = j->y + p * j->OH * OW;
    for (int64_t oh = 0; oh < j->OH; oh++) {
      int64_t h0 = oh * j->SH - j->PT, h1 = h0 + j->KH;
      if (h0 < 0) h0 = 0;
      if (h1 > j->IH) h1 = j->IH;
      float *v = vb + PL;
      if (h0 >= h1) {
        for (int64_t i = 0; i < IW; i++) v[i] = -INFINITY;
      } else {
        const float *r0 = x + h0 * IW;
        int64_t i = 0;
        for (; i + 8 <= IW; i += 8) {
          __m256 m = _mm256_loadu_ps(r0 + i);
          for (int64_t h = h0 + 1; h < h1; h++) m = fbx__mp2_max(m, _mm256_loadu_ps(x + h * IW + i));
          _mm256_storeu_ps(v + i, m);
        }
        for (; i < IW; i++) {
          float m = r0[i];
          for (int64_t h = h0 + 1; h < h1; h++) m = fbx__mp2_max1(m, x[h * IW + i]);
          v[i] = m;
        }
      }
      float *yr = y + oh * OW;
      int64_t ow = 0;
      if (SW == 1) {
        for (; ow + 8 <= OW; ow += 8) {
          __m256 m = _mm256_loadu_ps(vb + ow);
          for (int64_t k = 1; k < KW; k++) m = fbx__mp2_max(m, _mm256_loadu_ps(vb + ow + k));
          _mm256_storeu_ps(yr + ow, m);
        }
      } else if (SW == 2) {
        for (; ow + 8 <= OW; ow += 8) {
          __m256 m = fbx__mp2_even(vb + 2 * ow);
          for (int64_t k = 1; k < KW; k++) m = fbx__mp2_max(m, fbx__mp2_even(vb + 2 * ow + k));
          _mm256_storeu_ps(yr + ow, m);
        }
      }
      for (; ow < OW; ow++) {
        const float *w = vb + ow * SW;
        float m = w[0];
        for (int64_t k = 1; k < KW; k++) m = fbx__mp2_max1(m, w[k]);
        yr[ow] = m;
      }
    }
  }
}

/* 2-D AVGPOOL whose every window lies inside the input (no pads, no partial
 * ceil_mode window, dilation 1): every window has KH*KW inputs, so
 * count_include_pad does not matter and the generic per-output setup (clipping,
 * padded counts) is skipped. Same double sums in the same (kh, kw) order and
 * the same division as fbx__pl_task: identical results. PP-OCR rec's
 * 480x3x80 -> 480x1x40 pool (kernel 3x2) was ~10 ns per output there. */
typedef struct fbx__ap2_job {
  const float *x;
  float *y;
  int64_t IH, IW, OH, OW, KH, KW, SH, SW;
} fbx__ap2_job;

static void fbx__ap2_task(void *arg, int64_t p0, int64_t p1, int worker) {
  (void)worker;
  const fbx__ap2_job *j = arg;
  const double cnt = (double)(j->KH * j->KW);
  for (int64_t p = p0; p < p1; p++) {
    const float *x = j->x + p * j->IH * j->IW;
    float *y = j->y + p * j->OH * j->OW;
    for (int64_t oh = 0; oh < j->OH; oh++)
      for (int64_t ow = 0; ow < j->OW; ow++) {
        const float *w = x + oh * j->SH * j->IW + ow * j->SW;
        double acc = 0.0;
        for (int64_t kh = 0; kh < j->KH; kh++)
          for (int64_t kw = 0; kw < j->KW; kw++) acc += w[kh * j->IW + kw];
        y[oh * j->OW + ow] = (float)(acc / cnt);
      }
  }
}

static fbx_status *fbx__pool(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_tensor *y = &out[0];
  const char *op = fbx_ir_op_name(node->op);
  int nd = x->rank - 2;
  if (nd < 1 || nd > 3 || x->dtype != FBX_DTYPE_F32) return FBX_ERR_NOTIMPL("%s: F32 with 1..3 spatial dims only", op);
  const typeof(node->params.conv) *p = &node->params.conv;
  fbx__pl_job j = {.x = x->data, .y = y->data, .op = node->op, .include_pad = p->count_include_pad,
                   .p = p->p > 0 ? (double)p->p : 2.0};
  /* pads: the one geometry (ir_geometry.c), shared with shape inference; the
   * windows follow the given output shape (windows are clipped to the padded extent) */
  int64_t kern[3], pads[6], os[3];
  FBX_TRY(fbx_ir_conv_geometry(node, x, NULL, kern, pads, os));
  for (int i = 0; i < 3; i++) {
    int sd = i - (3 - nd);
    if (sd < 0) {
      j.in[i] = j.out[i] = j.k[i] = j.s[i] = j.d[i] = 1;
      j.pb[i] = j.pe[i] = 0;
      continue;
    }
    j.in[i] = x->dims[2 + sd];
    j.out[i] = y->dims[2 + sd];
    j.k[i] = p->kernel[sd];
    j.s[i] = p->strides[sd] > 0 ? p->strides[sd] : 1;
    j.d[i] = p->dilations[sd] > 0 ? p->dilations[sd] : 1;
    j.pb[i] = pads[sd];
    j.pe[i] = pads[nd + sd];
    if (j.k[i] < 1) return FBX_ERR_ARG("%s: kernel size %lld", op, (long long)j.k[i]);
  }
  if (node->op == FBX_IR_OP_MAXPOOL && n_out > 1 && out[1].data && out[1].dtype == FBX_DTYPE_I64) j.idx = out[1].data;
  int64_t planes = x->dims[0] * x->dims[1];
  /* an empty output (a window wider than the input: ir_geometry.c gives 0) has nothing to
   * write, and its data pointer may be NULL */
  if (fbx_tensor_numel(y) == 0) {
    info->variant = "pool_empty";
    return NULL;
  }
  if (node->op == FBX_IR_OP_MAXPOOL && !j.idx && j.in[0] == 1 && j.out[0] == 1 && j.k[0] == 1 &&
      j.d[1] == 1 && j.d[2] == 1 && j.pb[1] >= 0 && j.pb[2] >= 0) {
    /* padded row: covers [-PL, ...) up to the last tap of the last vector of 8 outputs */
    int64_t need = (j.out[2] + 8) * j.s[2] + j.k[2] + 16;
    int64_t PW = j.pb[2] + j.in[2] + 16;
    if (PW < need) PW = need;
    fbx__mp2_job mj = {.x = j.x, .y = j.y, .IH = j.in[1], .IW = j.in[2], .OH = j.out[1], .OW = j.out[2],
                       .KH = j.k[1], .KW = j.k[2], .SH = j.s[1], .SW = j.s[2], .PT = j.pb[1], .PL = j.pb[2], .PW = PW};
    mj.rows = fbx_cpu_scratch(c, (size_t)PW * sizeof(float) * (size_t)c->threads);
    if (!mj.rows) return FBX_ERR_OOM();
    info->variant = "maxpool2d_avx2";
    int64_t per = j.in[1] * j.in[2];
    fbx_cpu_par(c, planes, 1 + 8192 / (per + 1), fbx__mp2_task, &mj);
    return NULL;
  }
  if (node->op == FBX_IR_OP_AVGPOOL && j.in[0] == 1 && j.out[0] == 1 && j.k[0] == 1 && j.d[1] == 1 &&
      j.d[2] == 1 && j.pb[1] == 0 && j.pb[2] == 0 && (j.out[1] - 1) * j.s[1] + j.k[1] <= j.in[1] &&
      (j.out[2] - 1) * j.s[2] + j.k[2] <= j.in[2]) {
    fbx__ap2_job aj = {.x = j.x, .y = j.y, .IH = j.in[1], .IW = j.in[2], .OH = j.out[1], .OW = j.out[2],
                       .KH = j.k[1], .KW = j.k[2], .SH = j.s[1], .SW = j.s[2]};
    info->variant = "avgpool2d_inside";
    int64_t per = j.out[1] * j.out[2] * j.k[1] * j.k[2];
    fbx_cpu_par(c, planes, 1 + 8192 / (per + 1), fbx__ap2_task, &aj);
    return NULL;
  }
  info->variant = "pool_direct";
  fbx_cpu_par(c, planes, 1, fbx__pl_task, &j);
  return NULL;
}

fbx_status *fbx_cpu_k_MAXPOOL(FBX_CPU_KERNEL_ARGS) { return fbx__pool(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_AVGPOOL(FBX_CPU_KERNEL_ARGS) { return fbx__pool(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_LPPOOL(FBX_CPU_KERNEL_ARGS) { return fbx__pool(c, node, state, in, n_in, out, n_out, info); }

typedef struct fbx__gp_job { const float *x; float *y; int64_t S; bool max; } fbx__gp_job;

static void fbx__gp_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__gp_job *j = arg;
  for (int64_t p = p0; p < p1; p++) {
    const float *x = j->x + p * j->S;
    if (j->max) {
      float m = -INFINITY;
      for (int64_t i = 0; i < j->S; i++) m = fbx__mp2_max1(m, x[i]);
      j->y[p] = m;
    } else { /* 16 float lanes per chunk of 1024, chunks summed in double (the SE blocks' pools: AVX2) */
      __m256d acc = _mm256_setzero_pd();
      int64_t i = 0;
      while (i + 16 <= j->S) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        int64_t e = i + 1024 < j->S ? i + 1024 : j->S;
        for (; i + 16 <= e; i += 16) {
          a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
          a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
        }
        __m256 a = _mm256_add_ps(a0, a1);
        acc = _mm256_add_pd(acc, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)),
                                               _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1))));
      }
      double lanes[4], sum = 0;
      _mm256_storeu_pd(lanes, acc);
      for (; i < j->S; i++) sum += x[i];
      sum += (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
      j->y[p] = (float)(sum / (double)(j->S ? j->S : 1));
    }
  }
}

static fbx_status *fbx__gpool(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (x->dtype != FBX_DTYPE_F32 || x->rank < 2) return FBX_ERR_NOTIMPL("%s: F32 NC... only", fbx_ir_op_name(node->op));
  fbx__gp_job j = {.x = x->data, .y = out[0].data, .S = 1, .max = node->op == FBX_IR_OP_GLOBAL_MAXPOOL};
  for (int d = 2; d < x->rank; d++) j.S *= x->dims[d];
  int64_t planes = x->dims[0] * x->dims[1];
  if (planes * j.S >= 65536) fbx_cpu_par(c, planes, 1 + 16384 / (j.S + 1), fbx__gp_task, &j);
  else fbx__gp_task(&j, 0, planes, 0);
  return NULL;
}

fbx_status *fbx_cpu_k_GLOBAL_AVGPOOL(FBX_CPU_KERNEL_ARGS) { return fbx__gpool(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_GLOBAL_MAXPOOL(FBX_CPU_KERNEL_ARGS) { return fbx__gpool(c, node, state, in, n_in, out, n_out, info); }
