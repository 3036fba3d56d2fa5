/* GQA (GroupQueryAttention on the CPU, cpu_attention.c): one query row of one KV group,
 * every head of the group, AVX2.
 *
 * Scores: 8 key rows at a time per head, 8 dot accumulators reduced together (one
 * horizontal reduction per 8 scores instead of one per score). Softmax: vector max, the
 * vector exp (fbx__exp256_ftz: no denormal probabilities), vector sum. Output: per head
 * the row (H <= 64 floats at a time) stays in 8 registers over all keys, so o is written
 * once instead of loaded and stored per key. Head sizes that are not a multiple of 8 take
 * the plain loops. K and V rows 16 keys ahead are prefetched into L1 (a decode step reads
 * the cache once, from DRAM). The split decode (fbx__gqa_group_part, fbx__gqa_combine) runs
 * the same three steps on a chunk of the keys without the normalisation, and combines the
 * chunks' maxima, sums and outputs. */
#include <math.h>
#include <string.h>

#include <immintrin.h>

#include "cpu_gqa.h"
#include "cpu_simd.h"

/* [sum a0, sum a1, ..., sum a7] */
static inline __m256 fbx__gqa_hsum8(const __m256 a[8]) {
  __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  t0 = _mm256_hadd_ps(t0, t1); /* per 128-bit half: a0 a1 a2 a3 (low / high halves of each) */
  t2 = _mm256_hadd_ps(t2, t3); /* a4 a5 a6 a7 */
  __m256 lo = _mm256_permute2f128_ps(t0, t2, 0x20), hi = _mm256_permute2f128_ps(t0, t2, 0x31);
  return _mm256_add_ps(lo, hi);
}

static inline float fbx__gqa_dot(const float *a, const float *b, int64_t n) {
  int64_t i = 0;
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = fbx__hsum256(acc);
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

static inline float fbx__gqa_score(float x, float scale, float softcap) {
  x *= scale;
  return softcap > 0 ? softcap * tanhf(x / softcap) : x;
}

/* scores sc[h ldsc + t] = score(q_h . K[t]), t < n */
static void fbx__gqa_scores(const float *q, const float *K, int64_t n, int64_t hpg, int64_t H, float scale,
                            float softcap, float *sc, int64_t ldsc) {
  const int64_t n8 = n & ~(int64_t)7;
  const int vec = H % 8 == 0;
  for (int64_t t = 0; t < n8 && vec; t += 8) {
    /* the block of 8 keys two blocks ahead into L1: decode streams the cache once, from
     * DRAM (bench/RESULTS.md, branch decodebw: -13% CPU time at 513 keys) */
    for (int64_t o = 0; t + 16 < n && o < 8 * H; o += 16) _mm_prefetch((const char *)(K + (t + 16) * H + o), _MM_HINT_T0);
    for (int64_t h = 0; h < hpg; h++) {
      const float *qh = q + h * H;
      __m256 acc[8];
      for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
      for (int64_t d = 0; d < H; d += 8) {
        const __m256 qv = _mm256_loadu_ps(qh + d);
        for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(K + (t + j) * H + d), acc[j]);
      }
      __m256 s = _mm256_mul_ps(fbx__gqa_hsum8(acc), _mm256_set1_ps(scale));
      if (softcap > 0) { /* rare: scalar tanh */
        float tmp[8];
        _mm256_storeu_ps(tmp, s);
        for (int j = 0; j < 8; j++) tmp[j] = softcap * tanhf(tmp[j] / softcap);
        s = _mm256_loadu_ps(tmp);
      }
      _mm256_storeu_ps(sc + h * ldsc + t, s);
    }
  }
  for (int64_t t = vec ? n8 : 0; t < n; t++)
    for (int64_t h = 0; h < hpg; h++) sc[h * ldsc + t] = fbx__gqa_score(fbx__gqa_dot(q + h * H, K + t * H, H), scale, softcap);
}

/* Per head h: mh[h] = max_t sc, r[t] = exp(sc - mh), lh[h] = sum_t r[t]; then, when norm, r[t] /= lh
 * (a zero sum leaves zeros). mh / lh may be NULL. */
static void fbx__gqa_softmax(float *sc, int64_t ldsc, int64_t n, int64_t hpg, int norm, float *mh, float *lh) {
  const int64_t n8 = n & ~(int64_t)7;
  for (int64_t h = 0; h < hpg; h++) {
    float *r = sc + h * ldsc, mx = -INFINITY, sum = 0;
    int64_t t = 0;
    if (n8) {
      __m256 m = _mm256_set1_ps(-INFINITY);
      for (; t < n8; t += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(r + t));
      mx = fbx__hmax256(m);
    }
    for (t = n8; t < n; t++) mx = r[t] > mx ? r[t] : mx;
    __m256 vs = _mm256_setzero_ps();
    const __m256 vm = _mm256_set1_ps(mx);
    for (t = 0; t < n8; t += 8) {
      __m256 e = fbx__exp256_ftz(_mm256_sub_ps(_mm256_loadu_ps(r + t), vm));
      _mm256_storeu_ps(r + t, e);
      vs = _mm256_add_ps(vs, e);
    }
    sum = fbx__hsum256(vs);
    for (t = n8; t < n; t++) sum += r[t] = expf(r[t] - mx);
    if (mh) mh[h] = mx;
    if (lh) lh[h] = sum;
    if (!norm) continue;
    const float inv = sum > 0 ? 1.0f / sum : 0.0f;
    for (t = 0; t < n; t++) r[t] *= inv;
  }
}

/* o_h = sum_t p_ht V[t], t < n */
static void fbx__gqa_pv(const float *sc, int64_t ldsc, const float *V, int64_t n, int64_t hpg, int64_t H, float *o) {
  const int vec = H % 8 == 0;
  for (int64_t h = 0; h < hpg; h++) {
    const float *p = sc + h * ldsc;
    float *oh = o + h * H;
    if (!vec) {
      memset(oh, 0, sizeof(float) * (size_t)H);
      for (int64_t t = 0; t < n; t++)
        for (int64_t d = 0; d < H; d++) oh[d] += p[t] * V[t * H + d];
      continue;
    }
    for (int64_t d0 = 0; d0 < H; d0 += 64) { /* 64 floats of the row in 8 registers */
      const int nv = (int)((H - d0 < 64 ? H - d0 : 64) / 8);
      __m256 acc[8];
      for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
      for (int64_t t = 0; t < n; t++) {
        if (h == 0 && d0 == 0 && (t & 1) == 0 && t + 16 < n) /* head 0 streams V, 2 rows per prefetch step (the other heads find it in L2) */
          for (int64_t o = 0; o < 2 * H; o += 16) _mm_prefetch((const char *)(V + (t + 16) * H + o), _MM_HINT_T0);
        const __m256 pt = _mm256_set1_ps(p[t]);
        const float *vr = V + t * H + d0;
        for (int i = 0; i < nv; i++) acc[i] = _mm256_fmadd_ps(pt, _mm256_loadu_ps(vr + 8 * i), acc[i]);
      }
      for (int i = 0; i < nv; i++) _mm256_storeu_ps(oh + d0 + 8 * i, acc[i]);
    }
  }
}

void fbx__gqa_group_row(const float *q, const float *K, const float *V, int64_t n, int64_t hpg, int64_t H,
                        float scale, float softcap, float *sc, int64_t ldsc, float *o) {
  fbx__gqa_scores(q, K, n, hpg, H, scale, softcap, sc, ldsc);
  fbx__gqa_softmax(sc, ldsc, n, hpg, 1, NULL, NULL);
  fbx__gqa_pv(sc, ldsc, V, n, hpg, H, o);
}

void fbx__gqa_group_part(const float *q, const float *K, const float *V, int64_t n, int64_t hpg, int64_t H,
                         float scale, float softcap, float *sc, int64_t ldsc, float *o, float *mh, float *lh) {
  if (n <= 0) { /* an empty chunk: no weight in the combine */
    for (int64_t h = 0; h < hpg; h++) mh[h] = -INFINITY, lh[h] = 0.0f;
    memset(o, 0, sizeof(float) * (size_t)(hpg * H));
    return;
  }
  fbx__gqa_scores(q, K, n, hpg, H, scale, softcap, sc, ldsc);
  fbx__gqa_softmax(sc, ldsc, n, hpg, 0, mh, lh);
  fbx__gqa_pv(sc, ldsc, V, n, hpg, H, o);
}

void fbx__gqa_combine(const float *po, const float *pm, const float *pl, int64_t nc, int64_t hpg, int64_t H,
                      float *o) {
  for (int64_t h = 0; h < hpg; h++) {
    float mx = -INFINITY;
    for (int64_t c = 0; c < nc; c++) mx = pm[c * hpg + h] > mx ? pm[c * hpg + h] : mx;
    float w[64], sum = 0; /* nc <= FBX__GQA_MAX_CHUNKS */
    for (int64_t c = 0; c < nc; c++) {
      const float m = pm[c * hpg + h];
      w[c] = m == -INFINITY ? 0.0f : expf(m - mx);
      sum += w[c] * pl[c * hpg + h];
    }
    const float inv = sum > 0 ? 1.0f / sum : 0.0f;
    float *oh = o + h * H;
    for (int64_t d = 0; d < H; d++) oh[d] = 0.0f;
    for (int64_t c = 0; c < nc; c++) {
      const float wc = w[c] * inv;
      const float *src = po + (c * hpg + h) * H;
      for (int64_t d = 0; d < H; d++) oh[d] += wc * src[d];
    }
  }
}
