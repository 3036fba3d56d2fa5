/* CONV_INT and MATMUL_INT: 8-bit integer convolution / matmul with int32
 * accumulation over the integer GEMM of cpu_qgemm.c (path chosen at run time:
 * VNNI, AVX2, scalar).
 *
 * CONV_INT (X, W[, x_zp][, w_zp]) -> int32, NC(D)HW, 1-3 spatial dims, group,
 * pads, strides, dilations: Y[n, g*Mg+m, p] = sum_k (W[m,k] - w_zp[m]) *
 * (col[k,p] - x_zp), col = im2col of X with the padding filled with x_zp
 * (so padded taps add nothing, as the spec's (x - x_zp) with zero padding).
 * GEMM operands: A = W rows of the group (packed once per run), B = the
 * im2col block of one tile of output positions, built and packed by the
 * worker that computes it (1x1 stride 1 pad 0: X rows read in place).
 * Parallel over (batch, group, tile, output-channel block).
 */
#include <string.h>

#include "cpu_internal.h"
#include "cpu_qconv_direct.h"
#include "cpu_qgemm.h"
#include "cpu_qint.h"

int32_t fbx_cpu_q_zp(const fbx_tensor *in, int n_in, int idx, int64_t i) {
  if (!fbx_cpu_present(in, n_in, idx)) return 0;
  const fbx_tensor *z = &in[idx];
  int64_t n = fbx_cpu_numel(z);
  int64_t j = n == 1 ? 0 : i;
  return z->dtype == FBX_DTYPE_I8 ? (int32_t)((const int8_t *)z->data)[j] : (int32_t)((const uint8_t *)z->data)[j];
}

fbx_status *fbx_cpu_q_zp_check(const char *op, const fbx_tensor *in, int n_in, int idx, fbx_dtype dt, int64_t n,
                                   const char *what) {
  if (!fbx_cpu_present(in, n_in, idx)) return NULL;
  const fbx_tensor *z = &in[idx];
  if (z->dtype != dt) return FBX_ERR_ARG("%s: %s dtype %s differs from its data", op, what, fbx_dtype_name(z->dtype));
  int64_t k = fbx_cpu_numel(z);
  if (k != 1 && (k != n || z->rank != 1))
    return FBX_ERR_ARG("%s: %s has %lld entries (1 or %lld allowed)", op, what, (long long)k, (long long)n);
  return NULL;
}

bool fbx_cpu_q_dt(fbx_dtype d) { return d == FBX_DTYPE_U8 || d == FBX_DTYPE_I8; }

/* ======================= CONV_INT ======================= */

typedef struct fbx__qc_job {
  fbx_qg_path path;
  const uint8_t *x;
  int32_t *y;
  int64_t N, G, Cg, Mg, KV, K, kp;
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
  int64_t IS, OS, T, ntiles, mblocks, mstep;
  bool pointwise, x_signed;
  uint8_t xz;        /* raw x zero point byte (padding value) */
  int32_t beta;      /* ob - x_zp */
  const uint8_t *ap; /* packed W: G * Mg rows */
  const int32_t *rs, *alpha;
  uint8_t *ws;       /* per-worker workspace */
  fbx_cpu_epi *epi;  /* elementwise epilogue (int32 -> float in place), pl NULL = none */
  size_t ws_each, col_off, rows_off, pan_off, vec_off;
} fbx__qc_job;

/* im2col row k of the tile [p0, p0 + width): x values at the tap, x_zp outside. */
static void fbx__qc_row(const fbx__qc_job *j, const uint8_t *xc, int64_t kz, int64_t ky, int64_t kx, int64_t p0,
                        int64_t width, uint8_t *dst) {
  int64_t OHW = j->out[1] * j->out[2], OW = j->out[2], IH = j->in[1], IW = j->in[2];
  int64_t p = p0, end = p0 + width;
  while (p < end) {
    int64_t oz = p / OHW, rem = p % OHW, oy = rem / OW, ox = rem % OW;
    int64_t seg = OW - ox < end - p ? OW - ox : end - p;
    int64_t iz = oz * j->s[0] - j->pb[0] + kz * j->d[0], iy = oy * j->s[1] - j->pb[1] + ky * j->d[1];
    if (iz < 0 || iz >= j->in[0] || iy < 0 || iy >= IH) {
      memset(dst, j->xz, (size_t)seg);
    } else {
      const uint8_t *srow = xc + (iz * IH + iy) * IW;
      int64_t ix0 = ox * j->s[2] - j->pb[2] + kx * j->d[2];
      if (j->s[2] == 1) {
        int64_t lo = ix0 < 0 ? -ix0 : 0, hi = IW - ix0 < seg ? IW - ix0 : seg;
        if (hi < lo) hi = lo;
        if (lo > seg) lo = hi = seg;
        if (lo) memset(dst, j->xz, (size_t)lo);
        if (hi > lo) memcpy(dst + lo, srow + ix0 + lo, (size_t)(hi - lo));
        if (seg > hi) memset(dst + hi, j->xz, (size_t)(seg - hi));
      } else {
        for (int64_t q = 0; q < seg; q++) {
          int64_t ix = ix0 + q * j->s[2];
          dst[q] = ix >= 0 && ix < IW ? srow[ix] : j->xz;
        }
      }
    }
    dst += seg;
    p += seg;
  }
}

static void fbx__qc_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__qc_job *j = arg;
  uint8_t *ws = j->ws + (size_t)worker * j->ws_each;
  uint8_t *col = ws + j->col_off;
  const uint8_t **rows = (const uint8_t **)(void *)(ws + j->rows_off);
  void *pan = ws + j->pan_off;
  int64_t TP = (j->T + FBX_QG_NR - 1) / FBX_QG_NR * FBX_QG_NR;
  int32_t *cs = (int32_t *)(void *)(ws + j->vec_off), *beta = cs + TP, *cb = beta + TP;
  size_t esz = fbx_cpu_qg_esz(j->path);
  for (int64_t t = t0; t < t1; t++) {
    int64_t mb = t % j->mblocks, rest = t / j->mblocks;
    int64_t tile = rest % j->ntiles, ng = rest / j->ntiles;
    int64_t n = ng / j->G, g = ng % j->G;
    int64_t p0 = tile * j->T, width = j->OS - p0 < j->T ? j->OS - p0 : j->T;
    const uint8_t *xg = j->x + (n * j->G + g) * j->Cg * j->IS;
    if (j->pointwise) {
      for (int64_t k = 0; k < j->K; k++) rows[k] = xg + k * j->IS + p0;
    } else {
      int64_t k = 0;
      for (int64_t c = 0; c < j->Cg; c++)
        for (int64_t kz = 0; kz < j->k[0]; kz++)
          for (int64_t ky = 0; ky < j->k[1]; ky++)
            for (int64_t kx = 0; kx < j->k[2]; kx++, k++) {
              uint8_t *dst = col + k * j->T;
              fbx__qc_row(j, xg + c * j->IS, kz, ky, kx, p0, width, dst);
              rows[k] = dst;
            }
    }
    fbx_cpu_qg_pack_b(j->path, rows, j->x_signed, j->K, width, pan, cs);
    int64_t wp = (width + FBX_QG_NR - 1) / FBX_QG_NR * FBX_QG_NR;
    for (int64_t q = 0; q < wp; q++) {
      beta[q] = j->beta;
      cb[q] = (int32_t)((uint32_t)cs[q] + (uint32_t)j->K * (uint32_t)j->beta);
    }
    int64_t m0 = mb * j->mstep, m1 = m0 + j->mstep < j->Mg ? m0 + j->mstep : j->Mg;
    if (m1 <= m0) continue;
    int64_t row0 = g * j->Mg + m0;
    int64_t ybase = (n * j->G * j->Mg + row0) * j->OS + p0;
    fbx_cpu_qg_kernel(j->path, j->ap + (size_t)row0 * (size_t)j->kp * esz, m1 - m0, j->K, j->rs + row0,
                      j->alpha + row0, pan, width, beta, cb, j->y + ybase, j->OS);
    if (j->epi->prog) /* the block is still in cache: the epilogue turns it into the float output */
      for (int64_t m = 0; m < m1 - m0; m++) fbx_cpu_epi_apply(j->epi, ybase + m * j->OS, ybase + m * j->OS + width, worker);
  }
}

fbx_status *fbx_cpu_k_CONV_INT(FBX_CPU_KERNEL_ARGS) {
  (void)state;
  (void)n_out;
  if (n_in < 2) return FBX_ERR_ARG("CONV_INT: needs X and W");
  const fbx_tensor *x = &in[0], *w = &in[1], *y = &out[0];
  int nd = x->rank - 2;
  if (nd < 1 || nd > 3 || w->rank != x->rank || y->rank != x->rank)
    return FBX_ERR_NOTIMPL("CONV_INT: %d spatial dims (1..3 supported)", nd);
  bool has_epi = node->params.conv.epilogue != NULL;
  if (!fbx_cpu_q_dt(x->dtype) || !fbx_cpu_q_dt(w->dtype) || (y->dtype != FBX_DTYPE_I32 && !has_epi))
    return FBX_ERR_NOTIMPL("CONV_INT: dtypes %s x %s -> %s (u8/s8 -> int32 only)", fbx_dtype_name(x->dtype),
                           fbx_dtype_name(w->dtype), fbx_dtype_name(y->dtype));
  int64_t kern[3], pads[6], os[3];
  FBX_TRY(fbx_ir_conv_geometry(node, x, w, kern, pads, os));
  fbx__qc_job j;
  memset(&j, 0, sizeof j);
  j.N = x->dims[0];
  int64_t C = x->dims[1], M = y->dims[1];
  j.G = node->params.conv.group > 0 ? node->params.conv.group : 1;
  if (C % j.G || M % j.G || w->dims[0] != M || w->dims[1] * j.G != C)
    return FBX_ERR_ARG("CONV_INT: channels %lld / %lld do not fit W and group %lld", (long long)C, (long long)M,
                       (long long)j.G);
  for (int i = 0; i < 3; i++) {
    int sd = i - (3 - nd);
    if (sd < 0) {
      j.in[i] = j.out[i] = j.k[i] = j.s[i] = j.d[i] = 1;
      continue;
    }
    if (kern[sd] != w->dims[2 + sd] || os[sd] != y->dims[2 + sd])
      return FBX_ERR_ARG("CONV_INT: kernel/output dim %d does not match the geometry", sd);
    j.in[i] = x->dims[2 + sd];
    j.out[i] = y->dims[2 + sd];
    j.k[i] = w->dims[2 + sd];
    j.s[i] = node->params.conv.strides[sd] > 0 ? node->params.conv.strides[sd] : 1;
    j.d[i] = node->params.conv.dilations[sd] > 0 ? node->params.conv.dilations[sd] : 1;
    j.pb[i] = pads[sd];
  }
  j.Cg = C / j.G;
  j.Mg = M / j.G;
  j.KV = j.k[0] * j.k[1] * j.k[2];
  j.K = j.Cg * j.KV;
  j.IS = j.in[0] * j.in[1] * j.in[2];
  j.OS = j.out[0] * j.out[1] * j.out[2];
  FBX_TRY(fbx_cpu_q_zp_check("CONV_INT", in, n_in, 2, x->dtype, 1, "x_zero_point"));
  FBX_TRY(fbx_cpu_q_zp_check("CONV_INT", in, n_in, 3, w->dtype, M, "w_zero_point"));
  info->flops = 2.0 * (double)j.N * (double)M * (double)j.OS * (double)j.K;
  if (j.N * M * j.OS == 0) return NULL;
  if (j.K == 0) return FBX_ERR_NOTIMPL("CONV_INT: empty reduction (no input channels)");
  j.path = fbx_cpu_qg_best();
  j.x_signed = x->dtype == FBX_DTYPE_I8;
  bool w_signed = w->dtype == FBX_DTYPE_I8;
  int32_t xz = fbx_cpu_q_zp(in, n_in, 2, 0);
  j.xz = (uint8_t)xz;
  j.beta = fbx_cpu_qg_ob(j.path, j.x_signed) - xz;
  j.kp = fbx_cpu_qg_kpad(j.path, j.K);
  j.pointwise = j.KV == 1 && j.s[0] == 1 && j.s[1] == 1 && j.s[2] == 1 && j.pb[0] == 0 && j.pb[1] == 0 && j.pb[2] == 0 && j.OS == j.IS;
  size_t esz = fbx_cpu_qg_esz(j.path);
  /* 2-D, group 1, stride 1 on VNNI: the direct kernel (no im2col) */
  fbx_qconv_direct dp = {.x = x->data, .w = w->data, .y = y->data, .N = j.N, .C = C, .M = M, .H = j.in[1],
                         .W = j.in[2], .OH = j.out[1], .OW = j.out[2], .kh = j.k[1], .kw = j.k[2], .dh = j.d[1],
                         .dw = j.d[2], .pt = j.pb[1], .pl = j.pb[2], .K = j.K, .x_signed = j.x_signed,
                         .w_signed = w_signed, .xz = xz, .beta = j.beta};
  if (nd == 2 && j.G == 1 && j.s[1] == 1 && j.s[2] == 1 && fbx_cpu_qconv_direct_ok(&dp)) {
    fbx_cpu_epi epi;
    void *vmem = NULL;
    size_t wsb = fbx_cpu_qconv_direct_ws(&dp);
    FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 4, &out[0], wsb + (size_t)M * sizeof(int32_t) + 64, &vmem, &epi));
    if (!vmem) return FBX_ERR_OOM();
    int32_t *wz = (int32_t *)(void *)((uint8_t *)vmem + wsb);
    for (int64_t m = 0; m < M; m++) wz[m] = fbx_cpu_q_zp(in, n_in, 3, m);
    dp.wz = wz;
    dp.epi = &epi;
    info->variant = "conv_int_direct_vnni512";
    info->reason = "2-D stride 1: X repacked once into padded 4-channel planes, vpdpbusd straight from them (no im2col)";
    fbx_cpu_qconv_direct_run(c, &dp, vmem);
    return fbx_cpu_epi_end(&epi);
  }
  /* tile: the packed block (kp x T) about 128 KiB, so it stays in L2 */
  int64_t T = (int64_t)(128 * 1024 / ((size_t)j.kp * esz));
  T = T < 64 ? 64 : T / 16 * 16;
  if (T > j.OS) T = (j.OS + 15) / 16 * 16;
  int64_t nt = c->threads > 1 ? c->threads : 1;
  j.ntiles = (j.OS + T - 1) / T;
  j.mblocks = 1;
  int64_t units = j.N * j.G * j.ntiles;
  if (nt > 1 && units < nt * 2 && j.Mg >= 16 * nt) {
    j.mblocks = nt;
  } else if (nt > 1 && units % nt && j.OS >= 64 * nt) { /* a multiple of the threads of equal tiles */
    int64_t want = (j.ntiles + nt - 1) / nt * nt;
    T = ((j.OS + want - 1) / want + 15) / 16 * 16;
    j.ntiles = (j.OS + T - 1) / T;
  }
  j.T = T;
  j.mstep = (j.Mg + j.mblocks - 1) / j.mblocks;
  j.mstep = j.mblocks > 1 ? (j.mstep + 7) / 8 * 8 : j.mstep;
  int64_t TP = (T + FBX_QG_NR - 1) / FBX_QG_NR * FBX_QG_NR;
  size_t col_b = j.pointwise ? 0 : (size_t)(j.K * T + 64) / 64 * 64;
  size_t rows_b = (size_t)(j.K * (int64_t)sizeof(void *) + 63) / 64 * 64;
  size_t pan_b = (size_t)(TP / FBX_QG_NR) * fbx_cpu_qg_panel_bytes(j.path, j.K);
  size_t vec_b = (size_t)(3 * TP) * sizeof(int32_t);
  j.col_off = 0;
  j.rows_off = col_b;
  j.pan_off = j.rows_off + rows_b;
  j.vec_off = j.pan_off + (pan_b + 63) / 64 * 64;
  j.ws_each = (j.vec_off + vec_b + 63) / 64 * 64;
  size_t a_b = ((size_t)(M * j.kp) * esz + 63) / 64 * 64;
  size_t total = a_b + 2 * (size_t)M * sizeof(int32_t) + 64 + j.ws_each * (size_t)nt;
  fbx_cpu_epi epi;
  void *vmem = NULL;
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 4, &out[0], total, &vmem, &epi));
  uint8_t *mem = vmem;
  if (!mem) return FBX_ERR_OOM();
  j.epi = &epi;
  uint8_t *ap = mem;
  int32_t *rs = (int32_t *)(void *)(mem + a_b), *alpha = rs + M;
  j.ws = mem + (a_b + 2 * (size_t)M * sizeof(int32_t) + 63) / 64 * 64;
  /* W (M, Cg*KV) rows, every group at once: rows are independent */
  fbx_cpu_qg_pack_a(j.path, w->data, j.K, w_signed, M, j.K, ap, rs);
  int oa = fbx_cpu_qg_oa(j.path, w_signed);
  for (int64_t m = 0; m < M; m++) alpha[m] = oa - fbx_cpu_q_zp(in, n_in, 3, m);
  j.ap = ap;
  j.rs = rs;
  j.alpha = alpha;
  j.x = x->data;
  j.y = y->data;
  info->variant = j.path == FBX_QG_AMX ? "conv_int_amx" : j.path == FBX_QG_VNNI ? "conv_int_vnni512" : j.path == FBX_QG_AVX2 ? "conv_int_avx2" : "conv_int_scalar";
  info->reason = j.pointwise ? "1x1: X rows packed in place + int GEMM (int32 accumulation, exact)"
                             : "im2col per output tile (padding = x_zero_point) + int GEMM (int32 accumulation, exact)";
  fbx_cpu_par(c, j.N * j.G * j.ntiles * j.mblocks, 1, fbx__qc_task, &j);
  return fbx_cpu_epi_end(&epi);
}
