/* CONV, 2D direct with output channels in the vector lanes (AVX-512; the
 * ResNet 3x3 convs at 56x56..7x7, stride 1 and 2, and any other group-1 2D
 * conv with a constant W that fbx_cpu_conv_oc_ok admits).
 *
 * Why not the positions-in-lanes direct kernel (cpu_conv_direct.c): it
 * computes PW2 >= OW columns per output row (the pad columns are computed and
 * dropped: 22% of a 7x7 map, 12% of 14x14) in tiles of 32, and broadcasts W
 * from 12 rows K floats apart; on ResNet-18's 3x3 maps it ran 81..224 GFLOP/s
 * at 2 threads against ORT's ~290 (bench/RESULTS.md, session 8). Here:
 *   - W is packed once (first run, into the node state) as
 *     wo[mb][c][kh][kw][32]: block mb of 32 output channels (zero-padded past
 *     M), one 128-byte row per tap, read as 2 aligned zmm;
 *   - X is copied once per image into zero-padded planes xp (C, PH, PW)
 *     (no phase split: stride 2 reads every second float), or read in place
 *     when the conv has no padding (1x1 stride-2 projections);
 *   - a tile is Q <= 14 consecutive output positions of one output row (of
 *     two rows when the map has <= 7 columns) x 32 output channels in 2*Q zmm
 *     accumulators; per tap 2 W loads and Q broadcasts of X (x[q*S] at
 *     compile-time displacements) feed 2*Q FMAs;
 *   - the taps run in chunks of whole input channels, about FBX__OC_TAPS taps
 *     (16 channels of a 3x3, 144 of a 1x1: the chunk's W, 18 KiB, stays in L1
 *     while the task's tiles walk its rows), accumulating in the task's
 *     (positions, 32) buffer T;
 *     the chunk's first tile prefetches the next chunk's W into L2;
 *   - a task is (channel block, output rows); at its end T is transposed into
 *     the NCHW rows of Y (16x16 blocks in registers) and the epilogue runs on
 *     each channel's rows while they are in cache.
 * Numerics: one float FMA chain per output over the taps in (channel, kh, kw)
 * order, starting from the bias (as the direct kernel), so the error against
 * a double reference grows like sqrt(C * taps) (test_cpu_conv_oc.c).
 * Only compiled for AVX-512 (target attributes); called after
 * fbx_cpu_avx512_enabled() said yes. */
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_conv.h"
#include "cpu_gemm_avx512.h" /* fbx_cpu_avx512_enabled */

#define FBX__OC __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define FBX__OC_INLINE static inline FBX__OC __attribute__((always_inline))

#define FBX__OC_MB 32 /* output channels per block (2 zmm) */
#define FBX__OC_QMAX 14 /* output positions per tile: 28 accumulators + 2 W registers of 32 */
#define FBX__OC_TAPS 144 /* taps per K chunk (whole input channels, at least one) */

/* One tile: Q positions x 32 channels. x: the chunk's first plane at the
 * tile's first input position; toff[t]: tap t's offset (channel plane, kh,
 * kw); w: the chunk's packed W rows (ntaps, 32); t: the tile's (Q, 32) slice
 * of T; acc 0: start from bias (32 floats, or NULL: zero), 1: add to t. */
FBX__OC_INLINE void fbx__oc_tile(const int R, const int Q0, const int S, const float *x, int64_t xrow,
                                 const int32_t *toff, int64_t ntaps, const float *w, float *t, const float *bias,
                                 int acc, const float *pf, int64_t npf, const float *xn) {
  /* R rows of Q0 positions (R = 2 only for maps of <= 7 columns: the tile is
   * both rows, whose positions are adjacent in T); row r reads x + r*xrow */
  const int Q = R * Q0;
  __m512 c0[FBX__OC_QMAX], c1[FBX__OC_QMAX];
  if (acc) {
    _Pragma("GCC unroll 14") for (int q = 0; q < Q; q++) {
      c0[q] = _mm512_load_ps(t + q * 32);
      c1[q] = _mm512_load_ps(t + q * 32 + 16);
    }
  } else {
    __m512 b0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    __m512 b1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
    _Pragma("GCC unroll 14") for (int q = 0; q < Q; q++) c0[q] = b0, c1[q] = b1;
  }
  for (int64_t k = 0; k < ntaps; k++) {
    const float *xt = x + toff[k], *xt1 = xt + xrow;
    const __m512 w0 = _mm512_load_ps(w + k * 32), w1 = _mm512_load_ps(w + k * 32 + 16);
    if (xn) { /* this tap's X for the next tile row (see fbx__oc_task): its first and last line */
      const float *p = xn + toff[k];
      _mm_prefetch((const char *)p, _MM_HINT_T1);
      _mm_prefetch((const char *)(p + (Q0 - 1) * S), _MM_HINT_T1);
      if (R == 2) {
        _mm_prefetch((const char *)(p + xrow), _MM_HINT_T1);
        _mm_prefetch((const char *)(p + xrow + (Q0 - 1) * S), _MM_HINT_T1);
      }
    }
    if (k < npf) { /* W row k of this tile's share of the next chunk into L2 (see fbx__oc_task) */
      _mm_prefetch((const char *)(pf + k * 32), _MM_HINT_T1);
      _mm_prefetch((const char *)(pf + k * 32 + 16), _MM_HINT_T1);
    }
    _Pragma("GCC unroll 14") for (int q = 0; q < Q; q++) {
      const __m512 xv = _mm512_set1_ps(q < Q0 ? xt[q * S] : xt1[(q - Q0) * S]);
      c0[q] = _mm512_fmadd_ps(w0, xv, c0[q]);
      c1[q] = _mm512_fmadd_ps(w1, xv, c1[q]);
    }
  }
  _Pragma("GCC unroll 14") for (int q = 0; q < Q; q++) {
    _mm512_store_ps(t + q * 32, c0[q]);
    _mm512_store_ps(t + q * 32 + 16, c1[q]);
  }
}

typedef void (*fbx__oc_tile_fn)(const float *x, int64_t xrow, const int32_t *toff, int64_t ntaps, const float *w,
                                float *t, const float *bias, int acc, const float *pf, int64_t npf,
                                const float *xn);

#define FBX__OC_DEF(Q, S)                                                                                    \
  static FBX__OC void fbx__oc_tile_##Q##_##S(const float *x, int64_t xrow, const int32_t *toff, int64_t ntaps, \
                                             const float *w, float *t, const float *bias, int acc,           \
                                             const float *pf, int64_t npf, const float *xn) {                \
    fbx__oc_tile(1, Q, S, x, xrow, toff, ntaps, w, t, bias, acc, pf, npf, xn);                                       \
  }                                                                                                          \
  static FBX__OC void fbx__oc_tile2_##Q##_##S(const float *x, int64_t xrow, const int32_t *toff, int64_t ntaps, \
                                              const float *w, float *t, const float *bias, int acc,          \
                                              const float *pf, int64_t npf, const float *xn) {               \
    fbx__oc_tile(2, Q, S, x, xrow, toff, ntaps, w, t, bias, acc, pf, npf, xn);                                       \
  }
#define FBX__OC_DEF1(Q, S)                                                                                   \
  static FBX__OC void fbx__oc_tile_##Q##_##S(const float *x, int64_t xrow, const int32_t *toff, int64_t ntaps, \
                                             const float *w, float *t, const float *bias, int acc,           \
                                             const float *pf, int64_t npf, const float *xn) {                \
    fbx__oc_tile(1, Q, S, x, xrow, toff, ntaps, w, t, bias, acc, pf, npf, xn);                                       \
  }
#define FBX__OC_DEF_S(S)                                                                                     \
  FBX__OC_DEF(1, S) FBX__OC_DEF(2, S) FBX__OC_DEF(3, S) FBX__OC_DEF(4, S) FBX__OC_DEF(5, S) FBX__OC_DEF(6, S) \
  FBX__OC_DEF(7, S) FBX__OC_DEF1(8, S) FBX__OC_DEF1(9, S) FBX__OC_DEF1(10, S) FBX__OC_DEF1(11, S)          \
  FBX__OC_DEF1(12, S) FBX__OC_DEF1(13, S) FBX__OC_DEF1(14, S)
FBX__OC_DEF_S(1)
FBX__OC_DEF_S(2)

#define FBX__OC_ROW(S)                                                                                       \
  {fbx__oc_tile_1_##S,  fbx__oc_tile_2_##S,  fbx__oc_tile_3_##S,  fbx__oc_tile_4_##S,  fbx__oc_tile_5_##S,  \
   fbx__oc_tile_6_##S,  fbx__oc_tile_7_##S,  fbx__oc_tile_8_##S,  fbx__oc_tile_9_##S,  fbx__oc_tile_10_##S, \
   fbx__oc_tile_11_##S, fbx__oc_tile_12_##S, fbx__oc_tile_13_##S, fbx__oc_tile_14_##S}
static const fbx__oc_tile_fn fbx__oc_tiles[2][FBX__OC_QMAX] = {FBX__OC_ROW(1), FBX__OC_ROW(2)};
#define FBX__OC_ROW2(S)                                                                                      \
  {fbx__oc_tile2_1_##S, fbx__oc_tile2_2_##S, fbx__oc_tile2_3_##S, fbx__oc_tile2_4_##S, fbx__oc_tile2_5_##S, \
   fbx__oc_tile2_6_##S, fbx__oc_tile2_7_##S}
static const fbx__oc_tile_fn fbx__oc_tiles2[2][FBX__OC_QMAX / 2] = {FBX__OC_ROW2(1), FBX__OC_ROW2(2)};

/* ---- W packing (once per node, into its state) ---- */

/* The path's A/B knobs (runs and tests in one build), read once per process:
 *   FUSEBOX_CONV_OC=0        the path off;
 *   FUSEBOX_CONV_OC_LOCAL    0 the first version (one zero-padded copy of X per image in a pass of
 *                            its own, row groups halved until >= 4 tasks per thread); 1 (default)
 *                            the row groups of fbx__oc_rows, X as in 0; 2 as 1, and each task pads
 *                            its own input rows where they fit (fbx_cpu_conv_oc_run; measured no
 *                            better: bench/RESULTS.md); 3 as 2, task-local rows always;
 *   FUSEBOX_CONV_OC_PF=0     the next chunk's W prefetched by its first tile only;
 *   FUSEBOX_CONV_OC_XPF      software prefetch of X for the next tile row: 1 (default) for 1x1
 *                            convs only, 0 never, "all" every conv (in ResNet-18 it took the 1x1
 *                            stride-2 projections from 117 / 91 to 88 / 81 us, and made the stem
 *                            and the 3x3s 5-9% slower: their next row's taps are mostly this row's);
 *   FUSEBOX_CONV_OC_ROWS=sim the simulated row-group split (fbx__oc_rows). */
typedef struct fbx__oc_knobs {
  bool on, pf_spread, rows_sim;
  int local, xpf;
} fbx__oc_knobs;

static fbx__oc_knobs g_oc_knobs;
static pthread_once_t g_oc_once = PTHREAD_ONCE_INIT;

static void fbx__oc_knobs_read(void) {
  const char *e = getenv("FUSEBOX_CONV_OC");
  g_oc_knobs.on = !(e && e[0] == '0');
  e = getenv("FUSEBOX_CONV_OC_LOCAL");
  g_oc_knobs.local = e && e[0] >= '0' && e[0] <= '3' ? e[0] - '0' : 1;
  e = getenv("FUSEBOX_CONV_OC_PF");
  g_oc_knobs.pf_spread = !(e && e[0] == '0');
  e = getenv("FUSEBOX_CONV_OC_XPF");
  g_oc_knobs.xpf = !e ? 1 : e[0] == '0' ? 0 : e[0] == 'a' ? 2 : 1;
  e = getenv("FUSEBOX_CONV_OC_ROWS");
  g_oc_knobs.rows_sim = e && e[0] == 's';
}

static const fbx__oc_knobs *fbx__oc_knob(void) {
  pthread_once(&g_oc_once, fbx__oc_knobs_read);
  return &g_oc_knobs;
}

bool fbx_cpu_conv_oc_ok(const void *state, const fbx_cpu_conv_geom *g) {
  const fbx_cpu_conv_state *st = state;
  if (!st || st->oc_failed || !fbx_cpu_avx512_enabled() || !fbx__oc_knob()->on) return false;
  const int64_t KV = g->k[1] * g->k[2];
  if (g->G != 1 || st->M != g->M || st->K != g->C * KV) return false;
  if (g->k[0] != 1 || g->in[0] != 1 || g->out[0] != 1) return false; /* 2D only */
  if (g->s[2] < 1 || g->s[2] > 2 || g->pb[1] < 0 || g->pb[2] < 0) return false;
  if (KV == 1 && g->s[1] == 1 && g->s[2] == 1) return false; /* 1x1 stride 1: the packed 1x1 GEMM */
  /* channels past M in the last 32-channel block are computed and dropped: at most 1/8 of the work,
     unless the conv has so few taps (C * KV < 32: a stem on RGB) that the positions-in-lanes kernel
     runs its K loop nearly empty. PP-OCR det's 96->24 3x3 convs at 160x160 (25% dropped) ran 5%
     slower here than on the direct kernel; its 3->16 stem 10% faster */
  const int64_t padded = (g->M + FBX__OC_MB - 1) / FBX__OC_MB * FBX__OC_MB;
  if ((padded - g->M) * 8 > padded && g->C * KV >= 32) return false;
  /* the padded planes and the tap offsets in int32 */
  const int64_t PH = (g->out[1] - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1;
  const int64_t PW = (g->out[2] - 1) * g->s[2] + (g->k[2] - 1) * g->d[2] + 1;
  return g->C * PH * PW < INT32_MAX / 2;
}

/* wo[mb][c][kh][kw][32] = W[mb*32 + j][c][kh][kw] (0 past M) */
static fbx_status *fbx__oc_pack(fbx_cpu_conv_state *st, const float *w, int64_t C, int64_t KV) {
  const int64_t M = st->M, nmb = (M + FBX__OC_MB - 1) / FBX__OC_MB;
  float *wo = fbx_malloc_aligned((size_t)(nmb * C * KV * FBX__OC_MB) * sizeof(float));
  if (!wo) return FBX_ERR_OOM();
  for (int64_t mb = 0; mb < nmb; mb++)
    for (int64_t r = 0; r < C * KV; r++) {
      float *d = wo + (mb * C * KV + r) * FBX__OC_MB;
      for (int64_t j = 0; j < FBX__OC_MB; j++) {
        const int64_t m = mb * FBX__OC_MB + j;
        d[j] = m < M ? w[m * C * KV + r] : 0.f;
      }
    }
  st->wo = wo;
  return NULL;
}

/* ---- the run ---- */

typedef struct fbx__oc_job {
  const fbx_cpu_conv_geom *g;
  const float *x;     /* (C, IH, IW) of image n */
  float *xp;          /* (C, PH, PW) zero-padded planes (+ slack) */
  const float *xs;    /* what the tiles read: xp, or x itself when no padding is needed */
  int64_t rs, ps;     /* its row and plane strides */
  const float *wo, *wo_end; /* packed W (nmb, C, KV, 32) */
  const float *bias;  /* (M) or NULL */
  const int32_t *toff; /* (cc * KV): tap offsets of one chunk from its first plane */
  float *tbuf;        /* per worker: (rt * OW, 32) */
  float *xl;          /* local mode: per worker, the padded input rows of one row group (C, NR, PW) + slack */
  int64_t *xltag;     /* local mode: per worker, the row group its xl holds (-1: none) */
  int64_t xlstride, NR; /* floats between workers' xl; rows per plane in xl */
  float *y;           /* (M, OS) of image n */
  int64_t PH, PW, KV, nmb, rt, nrg, tstride, ybase;
  int64_t cc;          /* input channels per K chunk */
  bool pf_spread;      /* W prefetch spread over a chunk's tiles */
  bool xpf;            /* X prefetch of the next tile row */
  fbx_cpu_epi *epi;
} fbx__oc_job;

/* planes [c0, c1) of xp */
static void fbx__oc_pad_task(void *arg, int64_t c0, int64_t c1, int worker) {
  (void)worker;
  const fbx__oc_job *j = arg;
  const fbx_cpu_conv_geom *g = j->g;
  const int64_t IH = g->in[1], IW = g->in[2], PH = j->PH, PW = j->PW, pt = g->pb[1], pl = g->pb[2];
  /* input columns that land inside the plane: pl + iw < PW */
  const int64_t ncol = IW < PW - pl ? IW : PW - pl;
  for (int64_t c = c0; c < c1; c++) {
    float *dp = j->xp + c * PH * PW;
    for (int64_t i = 0; i < PH; i++) {
      float *d = dp + i * PW;
      const int64_t ih = i - pt;
      if (ih < 0 || ih >= IH || ncol <= 0) {
        memset(d, 0, (size_t)PW * sizeof(float));
        continue;
      }
      memset(d, 0, (size_t)pl * sizeof(float));
      memcpy(d + pl, j->x + (c * IH + ih) * IW, (size_t)ncol * sizeof(float));
      if (pl + ncol < PW) memset(d + pl + ncol, 0, (size_t)(PW - pl - ncol) * sizeof(float));
    }
  }
}

/* d[0, PW) = the row s shifted right by pl, zeros outside s[0, ncol) (s NULL: all zeros); masked
 * 16-float moves (rows of 7..58 floats: memcpy / memset calls per row cost more than the copy) */
FBX__OC_INLINE void fbx__oc_padrow(float *d, int64_t PW, const float *s, int64_t pl, int64_t ncol) {
  for (int64_t p = 0; p < PW; p += 16) {
    const int64_t n = PW - p < 16 ? PW - p : 16, lo = pl - p, hi = pl + ncol - p;
    const uint32_t keep = n >= 16 ? 0xFFFFu : (1u << n) - 1u;
    uint32_t valid = 0;
    if (s && hi > 0 && lo < 16) {
      valid = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
      if (lo > 0) valid &= ~((1u << lo) - 1u);
    }
    /* lanes outside valid are neither read nor faulted on; s + (p - pl) may lie before s: use the
       integer address */
    const float *src = s ? (const float *)((uintptr_t)s + (uintptr_t)((p - pl) * (int64_t)sizeof(float))) : d;
    const __m512 v = _mm512_maskz_loadu_ps((__mmask16)(valid & keep), src);
    _mm512_mask_storeu_ps(d + p, (__mmask16)keep, v);
  }
}

/* 16 x 16 floats: r[i] lane j -> r[j] lane i (4 rounds of 2-input shuffles, 64 in all: 0.25 a float) */
FBX__OC_INLINE void fbx__oc_tr16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) { /* 32-bit pairs */
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) { /* 64-bit pairs */
    u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  /* now each 128-bit lane of u holds a transposed 4x4 block; move block (a, l) to (l, a) */
  for (int i = 0; i < 4; i++) {
    t[i] = _mm512_shuffle_f32x4(u[i], u[i + 4], 0x88);      /* lanes 0, 2 of u[i], 0, 2 of u[i+4] */
    t[i + 4] = _mm512_shuffle_f32x4(u[i], u[i + 4], 0xdd);  /* lanes 1, 3 */
    t[i + 8] = _mm512_shuffle_f32x4(u[i + 8], u[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(u[i + 8], u[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; i++) {
    u[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    u[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    u[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    u[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
  }
  for (int i = 0; i < 16; i++) r[i] = u[i]; /* (checked by simulating the four rounds on (row, lane) labels) */
}

/* T (np positions, 32 channels) -> y[m * ldy + p] for m < mn: 16 x 16 blocks
 * through registers, a last partial block of positions by masked stores */
FBX__OC_INLINE void fbx__oc_untile(const float *T, int64_t np, int64_t mn, float *y, int64_t ldy) {
  for (int64_t mb = 0; mb < mn; mb += 16) {
    const int64_t mc = mn - mb < 16 ? mn - mb : 16;
    for (int64_t p = 0; p < np; p += 16) {
      const int64_t pc = np - p < 16 ? np - p : 16;
      const __mmask16 mk = (__mmask16)(pc >= 16 ? 0xFFFF : (1u << pc) - 1u);
      __m512 r[16];
      for (int i = 0; i < 16; i++) r[i] = i < pc ? _mm512_load_ps(T + (p + i) * FBX__OC_MB + mb) : _mm512_setzero_ps();
      fbx__oc_tr16(r);
      for (int64_t m = 0; m < mc; m++) _mm512_mask_storeu_ps(y + (mb + m) * ldy + p, mk, r[m]);
    }
  }
}

/* tasks: (channel block mb, row group rg), mb-major so a worker's
 * consecutive tasks reuse the block's W from L2 */
static FBX__OC void fbx__oc_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__oc_job *j = arg;
  const fbx_cpu_conv_geom *g = j->g;
  const int64_t C = g->C, M = g->M, OH = g->out[1], OW = g->out[2], OS = OH * OW;
  const int64_t sh = g->s[1], sw = g->s[2], PW = j->rs, PHW = j->ps, KV = j->KV;
  float *T = j->tbuf + (size_t)worker * (size_t)j->tstride;
  float *xl = j->xl ? j->xl + (size_t)worker * (size_t)j->xlstride : NULL;
  const int64_t IH = g->in[1], IW = g->in[2], pt = g->pb[1], pl = g->pb[2], KH = g->k[1];
  const int64_t ncol = IW < PW - pl ? IW : PW - pl; /* input columns that land inside a padded row */
  /* tiles along a row: nq of width Q, the last one narrower */
  const int64_t nq = (OW + FBX__OC_QMAX - 1) / FBX__OC_QMAX, Q = (OW + nq - 1) / nq;
  const fbx__oc_tile_fn *tiles = fbx__oc_tiles[sw - 1];
  for (int64_t task = t0; task < t1; task++) {
    /* local mode: row-group major, so that a chunk of consecutive tasks shares its padded rows */
    const int64_t mb = xl ? task % j->nmb : task / j->nrg, rg = xl ? task / j->nmb : task % j->nrg;
    const int64_t oh0 = rg * j->rt, oh1 = oh0 + j->rt < OH ? oh0 + j->rt : OH;
    if (xl && j->xltag[worker] != rg) { /* this row group's padded input rows, built here (this core's L2) */
      const int64_t ih0 = oh0 * sh - pt, nr = (oh1 - oh0 - 1) * sh + (KH - 1) * g->d[1] + 1;
      for (int64_t ci = 0; ci < C; ci++) {
        const float *xsrc = j->x + ci * IH * IW;
        for (int64_t r = 0; r < nr; r++) {
          const int64_t ih = ih0 + r;
          fbx__oc_padrow(xl + (ci * j->NR + r) * PW, PW, ih < 0 || ih >= IH ? NULL : xsrc + ih * IW, pl, ncol);
        }
      }
      j->xltag[worker] = rg;
    }
    const int64_t m0 = mb * FBX__OC_MB, mn = M - m0 < FBX__OC_MB ? M - m0 : FBX__OC_MB;
    float bb[FBX__OC_MB] = {0};
    const float *bias = NULL;
    if (j->bias) {
      memcpy(bb, j->bias + m0, (size_t)mn * sizeof(float));
      bias = bb;
    }
    for (int64_t c0 = 0; c0 < C; c0 += j->cc) {
      const int64_t cn = C - c0 < j->cc ? C - c0 : j->cc;
      const float *wc = j->wo + (mb * C + c0) * KV * FBX__OC_MB;
      const float *xc = j->xs + c0 * PHW;
      if (xl) xc = xl + c0 * PHW;
      const int64_t rbase = xl ? oh0 : 0; /* xl holds rows from output row oh0's first tap row */
      /* the first tile of the chunk pulls the next chunk's W into L2, one row per tap: inside a model
         W comes from DRAM (ResNet-18's 47 MB), and on demand it starved the 7x7 / 14x14 layers (9 MB of
         W each: 226 GFLOP/s with cold caches against 382 warm, bench_conv) */
      const float *pf = wc + cn * KV * FBX__OC_MB;
      /* spread over the chunk's tiles (FUSEBOX_CONV_OC_PF=0: all in its first tile, as first built):
         the deep layers have 4-14 tiles a chunk, and one tile's worth of time for 18 KiB of W from
         DRAM is a burst the prefetcher does not keep up with */
      int64_t pft = (j->wo_end - pf) / FBX__OC_MB, share, tile_i = 0;
      if (pft > j->cc * KV) pft = j->cc * KV;
      {
        const int64_t rows = oh1 - oh0;
        const int64_t ntile = OW <= FBX__OC_QMAX / 2 ? (rows + 1) / 2 : rows * nq;
        share = j->pf_spread ? (pft + ntile - 1) / ntile : pft;
      }
      /* X prefetch (FUSEBOX_CONV_OC_XPF=0: none): each tile pulls into L2 the lines its taps read for
         the tile one row (or one 2-row tile) below, the last row the first of the next K chunk: a
         tile's 16-144 taps read as many planes, more streams than the L2 prefetcher follows, and in a
         model those planes come from the other core's L2 or from L3 (the 1x1 stride-2 projections ran
         at 100-180 GFLOP/s there, 235 warm) */
      const float *xnext = j->xpf && c0 + cn < C ? (xl ? xl : j->xs) + (c0 + cn) * PHW : NULL;
      for (int64_t oh = oh0; oh < oh1; oh++) {
        const float *xr = xc + (oh - rbase) * sh * PW;
        const int64_t step = OW <= FBX__OC_QMAX / 2 && oh + 1 < oh1 ? 2 : 1;
        const float *xnr = !j->xpf ? NULL : oh + step < oh1 ? xr + step * sh * PW : xnext;
        float *tr = T + (oh - oh0) * OW * FBX__OC_MB;
        if (OW <= FBX__OC_QMAX / 2 && oh + 1 < oh1) { /* two whole rows in one tile */
          const int64_t np = pft - tile_i * share < share ? pft - tile_i * share : share;
          fbx__oc_tiles2[sw - 1][OW - 1](xr, sh * PW, j->toff, cn * KV, wc, tr, bias, c0 > 0,
                                         pf + (np > 0 ? tile_i * share * FBX__OC_MB : 0), np, xnr);
          tile_i++;
          oh++;
          continue;
        }
        for (int64_t ow = 0; ow < OW; ow += Q) {
          const int64_t q = OW - ow < Q ? OW - ow : Q;
          const int64_t np = pft - tile_i * share < share ? pft - tile_i * share : share;
          tiles[q - 1](xr + ow * sw, 0, j->toff, cn * KV, wc, tr + ow * FBX__OC_MB, bias, c0 > 0,
                       pf + (np > 0 ? tile_i * share * FBX__OC_MB : 0), np, xnr ? xnr + ow * sw : NULL);
          tile_i++;
        }
      }
    }
    /* T (positions, 32) -> Y rows (m, oh0..oh1), then the epilogue per channel */
    fbx__oc_untile(T, (oh1 - oh0) * OW, mn, j->y + m0 * OS + oh0 * OW, OS);
    for (int64_t m = 0; m < mn; m++)
      fbx_cpu_epi_apply(j->epi, j->ybase + (m0 + m) * OS + oh0 * OW, j->ybase + (m0 + m) * OS + oh1 * OW, worker);
  }
}

/* Rows per task (FUSEBOX_CONV_OC_ROWS=sim). The pool hands out chunks of ceil(n / (4 * nt)) consecutive tasks
 * (cpu_pool.c) to whichever worker is free; a split's cost is the finish time of that greedy schedule,
 * simulated, in output rows, plus for each 32-channel block a chunk touches the load of its W: a row
 * of OW positions is OW * C * taps cycles of FMAs at 64 FLOP a cycle, the block's 128 * C * taps bytes
 * at ~8 bytes a cycle from L3 / DRAM are 16 * C * taps cycles, half hidden by the prefetch: 8 / OW
 * rows. The old rule (halve until >= 4 tasks a thread) gave ResNet's 56x56 layers 7 chunks at 2
 * threads (one worker idle for a seventh of the run) and its 14x14 / 7x7 layers single-row tasks at
 * 16 threads (each W block read by 7-14 tasks, from L3). */
static int64_t fbx__oc_rows(int64_t nmb, int64_t OH, int64_t OW, int64_t rtmax, int64_t nt) {
  if (nt <= 1) return rtmax;
  const int64_t nw = nt < 256 ? nt : 256;
  double fin[256];
  int64_t best = rtmax;
  double best_cost = 0;
  for (int64_t nrg = (OH + rtmax - 1) / rtmax, prev = 0; nrg <= OH; nrg++) {
    /* for nrg groups the rows as even as they go (rt = 8 for 14 rows in 2 groups would give 8 + 6) */
    const int64_t rt = (OH + nrg - 1) / nrg, n = nmb * nrg;
    if (rt == prev || (OH + rt - 1) / rt != nrg) continue;
    prev = rt;
    const int64_t target = nt * 4, chunk = (n + target - 1) / target;
    for (int64_t i = 0; i < nw; i++) fin[i] = 0;
    for (int64_t t0 = 0; t0 < n; t0 += chunk) {
      double work = 0;
      for (int64_t t = t0; t < t0 + chunk && t < n; t++) {
        const int64_t rg = t % nrg, r = OH - rg * rt < rt ? OH - rg * rt : rt;
        work += (double)r + (t == t0 || rg == 0 ? 8.0 / (double)OW : 0.0);
      }
      int64_t w = 0;
      for (int64_t i = 1; i < nw; i++)
        if (fin[i] < fin[w]) w = i;
      fin[w] += work;
    }
    double cost = 0;
    for (int64_t i = 0; i < nw; i++) cost = fin[i] > cost ? fin[i] : cost;
    if (best_cost == 0 || cost < best_cost * 0.99) best = rt, best_cost = cost;
  }
  return best;
}

fbx_status *fbx_cpu_conv_oc_run(fbx_cpu_ctx *c, const fbx_ir_node *node, void *state, const fbx_tensor *in,
                                int n_in, fbx_tensor *out, const fbx_cpu_conv_geom *g, fbx_kernel_info *info) {
  fbx_cpu_conv_state *st = state;
  const int64_t C = g->C, M = g->M, KH = g->k[1], KW = g->k[2], KV = KH * KW;
  const int64_t OH = g->out[1], OW = g->out[2], OS = OH * OW;
  const int64_t PH = (OH - 1) * g->s[1] + (KH - 1) * g->d[1] + 1, PW = (OW - 1) * g->s[2] + (KW - 1) * g->d[2] + 1;
  if (!st->wo) { /* first run on this path: pack W once (allocation outside the steady state) */
    fbx_status *s = fbx__oc_pack(st, in[1].data, C, KV);
    if (s) { /* out of memory: this node stays on the other paths */
      fbx_status_free(s);
      st->oc_failed = true;
      return fbx_cpu_conv_direct_ok(g) ? fbx_cpu_conv_direct_run(c, node, in, n_in, out, g, info)
                                       : fbx_cpu_conv_tiled_run(c, node, in, n_in, out, g, info);
    }
  }
  const int64_t nmb = (M + FBX__OC_MB - 1) / FBX__OC_MB, nt = c->threads > 1 ? c->threads : 1;
  /* row groups: T (rt * OW, 32) <= 64 KiB per worker, then smaller until there are >= 4 tasks per
   * thread (or single rows); FUSEBOX_CONV_OC_ROWS=sim: the split of fbx__oc_rows instead (at 2
   * threads it measured neutral on the 56x56 layers and 4-6% slower on the 28x28 ones, in the model;
   * not measured on many cores: bench/RESULTS.md) */
  const fbx__oc_knobs *kn = fbx__oc_knob();
  const int local = kn->local;
  int64_t rt = 512 / OW;
  if (rt < 1) rt = 1;
  if (rt > OH) rt = OH;
  if (local && kn->rows_sim) { /* the choice is cached in the node state (a simulation of up to 2 sqrt(OH) splits) */
    const bool fits = OH < (1 << 20) && OW < (1 << 20) && nt < (1 << 9) && rt < (1 << 15);
    const uint64_t key = ((uint64_t)OH << 44) | ((uint64_t)OW << 24) | ((uint64_t)nt << 15);
    const uint64_t cached = atomic_load_explicit(&st->oc_rows, memory_order_relaxed);
    if (fits && cached && (cached & ~(uint64_t)0x7fff) == key)
      rt = (int64_t)(cached & 0x7fff);
    else {
      rt = fbx__oc_rows(nmb, OH, OW, rt, nt);
      if (fits) atomic_store_explicit(&st->oc_rows, key | (uint64_t)rt, memory_order_relaxed);
    }
  }
  else
    while (rt > 1 && nmb * ((OH + rt - 1) / rt) < 4 * nt) rt = (rt + 1) / 2;
  const int64_t nrg = (OH + rt - 1) / rt;
  const int64_t tstride = (rt * OW * FBX__OC_MB + 15) / 16 * 16;
  /* no padding at the start and the taps stay inside X (ResNet's 1x1 stride-2 projections): the tiles
     read X itself, no copy */
  const bool direct = g->pb[1] == 0 && g->pb[2] == 0 && PH <= g->in[1] && PW <= g->in[2];
  const int64_t cc = FBX__OC_TAPS / KV > 1 ? FBX__OC_TAPS / KV : 1;
  /* local mode: each worker pads the rows its row group reads (NR a plane, all C planes) into its own
     buffer, once for the consecutive tasks of that group (tasks row-group major), instead of one
     copy per image in a pass of its own (a barrier, and half the planes then in the other core's
     L2): where those rows fit in L2 beside W (<= 256 KiB) and few blocks share them (nmb <= 4; a
     copy per task for ResNet's 7x7 layers, 16 blocks, ran 10-35% slower) */
  const int64_t NR = (rt - 1) * g->s[1] + (KH - 1) * g->d[1] + 1;
  const bool xl_fits = C * NR * PW * (int64_t)sizeof(float) <= (256 << 10);
  const bool xlocal = !direct && xl_fits && (local == 3 || (local == 2 && nmb <= 4));
  const int64_t xlstride = xlocal ? (C * NR * PW + 64 + 15) / 16 * 16 : 0;
  const int64_t rs = direct ? g->in[2] : PW, ps = direct ? g->in[1] * g->in[2] : xlocal ? NR * PW : PH * PW;
  const int64_t xp_n = direct || xlocal ? 0 : (C * PH * PW + 64 + 15) / 16 * 16;
  const int64_t toff_n = (cc * KV + 15) / 16 * 16;
  size_t bytes = ((size_t)xp_n + (size_t)toff_n + (size_t)(tstride + xlstride + 2) * (size_t)nt) * sizeof(float);
  void *mem = NULL;
  fbx_cpu_epi epi;
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 3, &out[0], bytes, &mem, &epi));
  if (!mem) return FBX_ERR_OOM();
  float *xp = mem;
  int32_t *toff = (int32_t *)(xp + xp_n);
  float *tbuf = xp + xp_n + toff_n;
  float *xl = xlocal ? tbuf + tstride * nt : NULL;
  if (!direct && !xlocal) memset(xp + C * PH * PW, 0, 64 * sizeof(float));
  int64_t *xltag = (int64_t *)(tbuf + (tstride + xlstride) * nt); /* 8-byte aligned: the counts are multiples of 16 */
  for (int64_t w = 0; xl && w < nt; w++) memset(xl + w * xlstride + C * NR * PW, 0, 64 * sizeof(float));
  for (int64_t ci = 0; ci < cc; ci++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++)
        toff[(ci * KH + kh) * KW + kw] = (int32_t)(ci * ps + kh * g->d[1] * rs + kw * g->d[2]);
  const float *b = fbx_cpu_present(in, n_in, 2) ? in[2].data : NULL;
  info->variant = "conv_oc_avx512";
  info->reason = "2D, constant W: W packed in 32-channel blocks, X zero-padded, 14 positions x 32 channels "
                 "per AVX-512 tile";
  for (int64_t n = 0; n < g->N; n++) {
    const float *xn = (const float *)in[0].data + n * C * g->in[1] * g->in[2];
    fbx__oc_job j = {.g = g, .x = xn, .xp = xp, .xs = direct ? xn : xp, .rs = rs, .ps = ps, .wo = st->wo,
                     .wo_end = st->wo + nmb * C * KV * FBX__OC_MB, .bias = b, .toff = toff, .tbuf = tbuf,
                     .pf_spread = kn->pf_spread, .xpf = kn->xpf == 2 || (kn->xpf == 1 && KV == 1), .xl = xl,
                     .xltag = xltag, .xlstride = xlstride, .NR = NR,
                     .y = (float *)out[0].data + n * M * OS, .PH = PH, .PW = PW, .KV = KV, .nmb = nmb, .rt = rt,
                     .nrg = nrg, .tstride = tstride, .cc = cc, .ybase = n * M * OS, .epi = &epi};
    for (int64_t w = 0; w < nt; w++) xltag[w] = -1; /* image n: nothing held */
    if (direct || xlocal)
      ; /* nothing to copy (or each task pads its own rows) */
    else if (C * PH * PW > 32768 && nt > 1)
      fbx_cpu_par(c, C, 1, fbx__oc_pad_task, &j);
    else
      fbx__oc_pad_task(&j, 0, C, 0);
    if (nmb * nrg > 1)
      fbx_cpu_par(c, nmb * nrg, 1, fbx__oc_task, &j);
    else
      fbx__oc_task(&j, 0, 1, 0);
  }
  return fbx_cpu_epi_end(&epi);
}
