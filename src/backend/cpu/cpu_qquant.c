/* DYN_QUANT (DynamicQuantizeLinear, uint8) in two parallel passes over X:
 *   1. min and max of X (per-thread partials, AVX2 where present);
 *   2. y = saturate(round_half_even(x / scale) + zp) (AVX2: vdivps, vroundps, vcvtps2dq, packs).
 * The scalars in the spec's formula and order (float32 throughout):
 *   lo = min(0, min x), hi = max(0, max x), scale = (hi - lo) / 255,
 *   zp = saturate(round_half_even(0 - lo / scale)),
 * so the result is bit-identical to the composed float ops (and to ONNX Runtime, which divides
 * as well). Undefined corners, fixed here: a NaN in X makes scale NaN and every y and zp 0; an
 * all-zero X (scale 0, 0/0 = NaN) gives y = 0, zp = 0, scale = 0. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

#define FBX__DQ_TGT __attribute__((target("avx2")))
#define FBX__DQ_CHUNK 16384

typedef struct fbx__dq_job {
  const float *x;
  uint8_t *y;
  int64_t n;
  int64_t nchunks;
  float *pmin, *pmax, *pnan;
  float scale, zp;
  bool avx2;
} fbx__dq_job;

static FBX__DQ_TGT void fbx__dq_minmax_avx2(const float *x, int64_t n, float *mn, float *mx, bool *nan) {
  __m256 vmn = _mm256_set1_ps(INFINITY), vmx = _mm256_set1_ps(-INFINITY), vnan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    vmn = _mm256_min_ps(vmn, v);
    vmx = _mm256_max_ps(vmx, v);
    vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  float a[8], b[8];
  _mm256_storeu_ps(a, vmn);
  _mm256_storeu_ps(b, vmx);
  float lo = a[0], hi = b[0];
  for (int k = 1; k < 8; k++) {
    lo = a[k] < lo ? a[k] : lo;
    hi = b[k] > hi ? b[k] : hi;
  }
  bool isn = _mm256_movemask_ps(vnan) != 0;
  for (; i < n; i++) {
    float v = x[i];
    if (v != v) isn = true;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  *mn = lo;
  *mx = hi;
  *nan = isn;
}

static void fbx__dq_minmax_scalar(const float *x, int64_t n, float *mn, float *mx, bool *nan) {
  float lo = INFINITY, hi = -INFINITY;
  bool isn = false;
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    if (v != v) isn = true;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  *mn = lo;
  *mx = hi;
  *nan = isn;
}

static void fbx__dq_pass1(void *arg, int64_t c0, int64_t c1, int worker) {
  (void)worker;
  fbx__dq_job *j = arg;
  for (int64_t ci = c0; ci < c1; ci++) {
    int64_t b = ci * FBX__DQ_CHUNK, e = b + FBX__DQ_CHUNK < j->n ? b + FBX__DQ_CHUNK : j->n;
    bool nan;
    if (j->avx2) fbx__dq_minmax_avx2(j->x + b, e - b, &j->pmin[ci], &j->pmax[ci], &nan);
    else fbx__dq_minmax_scalar(j->x + b, e - b, &j->pmin[ci], &j->pmax[ci], &nan);
    j->pnan[ci] = nan ? 1.f : 0.f;
  }
}

static inline uint8_t fbx__dq_one(float x, float scale, float zp) {
  float r = rintf(x / scale) + zp; /* rint: round half to even in the default rounding mode */
  if (!(r >= 0.f)) return 0;       /* also NaN */
  return r > 255.f ? 255 : (uint8_t)r;
}

static FBX__DQ_TGT void fbx__dq_quant_avx2(const float *x, uint8_t *y, int64_t n, float scale, float zp) {
  const __m256 vs = _mm256_set1_ps(scale), vz = _mm256_set1_ps(zp), v0 = _mm256_setzero_ps(),
               v255 = _mm256_set1_ps(255.f);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i q[4];
    for (int k = 0; k < 4; k++) {
      __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i + 8 * k), vs);
      v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
      v = _mm256_min_ps(_mm256_max_ps(v, v0), v255); /* max(NaN, 0) = 0 (second operand) */
      q[k] = _mm256_cvtps_epi32(v);
    }
    __m256i p01 = _mm256_packus_epi32(q[0], q[1]), p23 = _mm256_packus_epi32(q[2], q[3]);
    __m256i b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23), perm);
    _mm256_storeu_si256((__m256i *)(y + i), b);
  }
  for (; i < n; i++) y[i] = fbx__dq_one(x[i], scale, zp);
}

static void fbx__dq_pass2(void *arg, int64_t c0, int64_t c1, int worker) {
  (void)worker;
  fbx__dq_job *j = arg;
  for (int64_t ci = c0; ci < c1; ci++) {
    int64_t b = ci * FBX__DQ_CHUNK, e = b + FBX__DQ_CHUNK < j->n ? b + FBX__DQ_CHUNK : j->n;
    if (j->avx2) {
      fbx__dq_quant_avx2(j->x + b, j->y + b, e - b, j->scale, j->zp);
    } else {
      for (int64_t i = b; i < e; i++) j->y[i] = fbx__dq_one(j->x[i], j->scale, j->zp);
    }
  }
}

fbx_status *fbx_cpu_k_DYN_QUANT(FBX_CPU_KERNEL_ARGS) {
  (void)state;
  if (n_in < 1 || n_out < 3) return FBX_ERR_ARG("DYN_QUANT: needs X and 3 outputs");
  if (in[0].dtype != FBX_DTYPE_F32 || out[0].dtype != FBX_DTYPE_U8 || out[1].dtype != FBX_DTYPE_F32 ||
      out[2].dtype != FBX_DTYPE_U8)
    return FBX_ERR_NOTIMPL("DYN_QUANT: float32 -> uint8 only");
  fbx__dq_job j;
  memset(&j, 0, sizeof j);
  j.x = in[0].data;
  j.y = out[0].data;
  j.n = fbx_cpu_numel(&in[0]);
  j.avx2 = __builtin_cpu_supports("avx2");
  j.nchunks = (j.n + FBX__DQ_CHUNK - 1) / FBX__DQ_CHUNK;
  float *parts = fbx_cpu_scratch(c, sizeof(float) * (size_t)(3 * j.nchunks + 3));
  if (!parts) return FBX_ERR_OOM();
  j.pmin = parts;
  j.pmax = parts + j.nchunks;
  j.pnan = parts + 2 * j.nchunks;
  info->variant = j.avx2 ? "dynquant_avx2" : "dynquant_scalar";
  info->reason = "min/max pass + quantize pass (x / scale, round half to even, saturate)";
  info->flops = 3.0 * (double)j.n;
  if (j.nchunks > 0) fbx_cpu_par(c, j.nchunks, 4, fbx__dq_pass1, &j);
  float lo = 0.f, hi = 0.f; /* the range always holds 0 */
  bool nan = false;
  for (int64_t ci = 0; ci < j.nchunks; ci++) {
    lo = j.pmin[ci] < lo ? j.pmin[ci] : lo;
    hi = j.pmax[ci] > hi ? j.pmax[ci] : hi;
    nan = nan || j.pnan[ci] != 0.f;
  }
  float scale = nan ? NAN : (hi - lo) / 255.f;
  float zq = rintf(0.f - lo / scale);
  float zp = !(zq >= 0.f) ? 0.f : zq > 255.f ? 255.f : zq;
  j.scale = scale;
  j.zp = zp;
  if (nan) memset(j.y, 0, (size_t)j.n);
  else if (j.nchunks > 0) fbx_cpu_par(c, j.nchunks, 2, fbx__dq_pass2, &j);
  *(float *)out[1].data = scale;
  *(uint8_t *)out[2].data = (uint8_t)zp;
  return NULL;
}
