/* Data movement: reshape family, transpose, concat, split, slice, shape,
 * expand, constant_of_shape, range, tile, pad, trilu, depth/space. Element
 * size copies, so every dtype works. Output shapes are given (inference ran);
 * shape-data inputs are re-read here only where the kernel needs values. */
#include <string.h>

#include "cpu_internal.h"

static size_t fbx__esz(const fbx_tensor *t) { return fbx_dtype_size(t->dtype); }

static fbx_status *fbx__mv_copy(fbx_cpu_ctx *c, const fbx_tensor *x, fbx_tensor *y) {
  if (x->data == y->data) return NULL;
  size_t n = fbx_tensor_nbytes(x);
  if (n != fbx_tensor_nbytes(y)) return FBX_ERR_ARG("copy: %zu bytes into %zu", n, fbx_tensor_nbytes(y));
  int64_t dims[1] = {(int64_t)n}, st[1] = {1};
  fbx_cpu_strided_copy(c, y->data, x->data, 1, 1, dims, st);
  return NULL;
}

fbx_status *fbx_cpu_k_RESHAPE(FBX_CPU_KERNEL_ARGS) { return fbx__mv_copy(c, &in[0], &out[0]); }
fbx_status *fbx_cpu_k_SQUEEZE(FBX_CPU_KERNEL_ARGS) { return fbx__mv_copy(c, &in[0], &out[0]); }
fbx_status *fbx_cpu_k_UNSQUEEZE(FBX_CPU_KERNEL_ARGS) { return fbx__mv_copy(c, &in[0], &out[0]); }
fbx_status *fbx_cpu_k_FLATTEN(FBX_CPU_KERNEL_ARGS) { return fbx__mv_copy(c, &in[0], &out[0]); }

fbx_status *fbx_cpu_k_TRANSPOSE(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  int r = x->rank;
  int64_t xs[FBX_MAX_RANK], st[FBX_MAX_RANK], dims[FBX_MAX_RANK];
  fbx_cpu_strides(x, xs);
  unsigned seen = 0;
  for (int i = 0; i < r; i++) {
    int p = node->params.transpose.perm[i];
    if (p < 0 || p >= r || (seen & (1u << p))) return FBX_ERR_ARG("TRANSPOSE: bad perm");
    seen |= 1u << p;
    dims[i] = x->dims[p];
    st[i] = xs[p];
    if (out[0].dims[i] != dims[i]) return FBX_ERR_ARG("TRANSPOSE: output dim %d mismatch", i);
  }
  info->variant = "transpose_strided";
  fbx_cpu_strided_copy(c, out[0].data, x->data, fbx__esz(x), r, dims, st);
  return NULL;
}

/* (outer, axis*inner) views */
static void fbx__mv_outer_inner(const fbx_tensor *t, int axis, int64_t *outer, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < axis; d++) *outer *= t->dims[d];
  for (int d = axis; d < t->rank; d++) *inner *= t->dims[d];
}

/* Concat as (outer) rows of yrow bytes, each the inputs' rows side by side.
 * Work items: (row, block of FBX__CAT_BLK output bytes), so a KV-cache
 * concat (outer = heads = 12 rows of ~33 KiB at past 128) still spreads
 * over 16 threads; each item copies the pieces of the inputs that fall in
 * its block (inputs walked in order, absent ones skipped). */
#define FBX__CAT_BLK ((int64_t)16384)
typedef struct fbx__cat_job {
  const fbx_tensor *in;
  int n_in;
  unsigned char *y;
  int64_t yrow, blocks; /* bytes per output row, blocks per row */
  size_t e;
  int axis;
} fbx__cat_job;

static void fbx__cat_task(void *arg, int64_t t0, int64_t t1, int worker) {
  (void)worker;
  const fbx__cat_job *j = arg;
  for (int64_t t = t0; t < t1; t++) {
    int64_t r = t / j->blocks, b0 = (t % j->blocks) * FBX__CAT_BLK;
    int64_t b1 = b0 + FBX__CAT_BLK < j->yrow ? b0 + FBX__CAT_BLK : j->yrow;
    int64_t off = 0; /* bytes of the row before input i */
    for (int i = 0; i < j->n_in && off < b1; i++) {
      const fbx_tensor *x = &j->in[i];
      if (!x->data || x->rank < 0) continue;
      int64_t o, inner;
      fbx__mv_outer_inner(x, j->axis, &o, &inner);
      int64_t len = inner * (int64_t)j->e, lo = off > b0 ? off : b0, hi = off + len < b1 ? off + len : b1;
      if (lo < hi)
        memcpy(j->y + r * j->yrow + lo, (const unsigned char *)x->data + r * len + (lo - off), (size_t)(hi - lo));
      off += len;
    }
  }
}

fbx_status *fbx_cpu_k_CONCAT(FBX_CPU_KERNEL_ARGS) {
  fbx_tensor *y = &out[0];
  int axis = node->params.axis.axis;
  if (axis < 0 || axis >= y->rank) return FBX_ERR_ARG("CONCAT: axis %d", axis);
  size_t e = fbx__esz(y);
  int64_t outer, yinner;
  fbx__mv_outer_inner(y, axis, &outer, &yinner);
  fbx__cat_job j = {.in = in, .n_in = n_in, .y = y->data, .yrow = yinner * (int64_t)e, .e = e, .axis = axis};
  if (outer == 0 || j.yrow == 0) return NULL;
  j.blocks = (j.yrow + FBX__CAT_BLK - 1) / FBX__CAT_BLK;
  int64_t items = outer * j.blocks;
  /* under 256 KiB in all a dispatch costs more than the copy; grain: >= 16 KiB per chunk
   * (a prefill KV concat is 12 rows of 32 KiB: 24 items for 16 threads) */
  if (c && outer * j.yrow >= ((int64_t)1 << 18))
    fbx_cpu_par(c, items, j.blocks > 1 ? 1 : 1 + FBX__CAT_BLK / j.yrow, fbx__cat_task, &j);
  else
    fbx__cat_task(&j, 0, items, 0);
  return NULL;
}

fbx_status *fbx_cpu_k_SPLIT(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  int axis = node->params.axis.axis;
  if (axis < 0 || axis >= x->rank) return FBX_ERR_ARG("SPLIT: axis %d", axis);
  size_t e = fbx__esz(x);
  int64_t outer, xinner;
  fbx__mv_outer_inner(x, axis, &outer, &xinner);
  int64_t off = 0;
  for (int i = 0; i < n_out; i++) {
    int64_t o, inner;
    fbx__mv_outer_inner(&out[i], axis, &o, &inner);
    for (int64_t r = 0; r < outer && inner; r++)
      memcpy((unsigned char *)out[i].data + r * inner * (int64_t)e,
             (const unsigned char *)x->data + (r * xinner + off) * (int64_t)e, (size_t)inner * e);
    off += inner;
  }
  if (off != xinner) return FBX_ERR_ARG("SPLIT: parts cover %lld of %lld", (long long)off, (long long)xinner);
  return NULL;
}

fbx_status *fbx_cpu_k_SLICE(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  int r = x->rank;
  if (n_in < 3) return FBX_ERR_ARG("SLICE: needs starts and ends");
  int64_t n = fbx_cpu_numel(&in[1]);
  if (fbx_cpu_numel(&in[2]) != n) return FBX_ERR_ARG("SLICE: starts/ends lengths differ");
  int64_t xs[FBX_MAX_RANK], st[FBX_MAX_RANK];
  fbx_cpu_strides(x, xs);
  int64_t base = 0;
  for (int d = 0; d < r; d++) st[d] = xs[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t a = fbx_cpu_present(in, n_in, 3) ? fbx_cpu_read_i64(&in[3], i) : i;
    if (a < 0) a += r;
    if (a < 0 || a >= r) return FBX_ERR_ARG("SLICE: axis %lld out of range", (long long)a);
    int64_t step = fbx_cpu_present(in, n_in, 4) ? fbx_cpu_read_i64(&in[4], i) : 1;
    if (step == 0) return FBX_ERR_ARG("SLICE: step 0");
    int64_t s, cnt = fbx_ir_slice_resolve(x->dims[a], fbx_cpu_read_i64(&in[1], i), fbx_cpu_read_i64(&in[2], i),
                                          step, &s);
    if (cnt == 0) continue; /* empty output: nothing is read */
    base += s * xs[a];
    st[a] = cnt > 1 ? step * xs[a] : 0; /* |step| < dim here, so the product fits */
  }
  info->variant = "slice_strided";
  if (fbx_cpu_numel(&out[0]) == 0) return NULL;
  fbx_cpu_strided_copy(c, out[0].data, (const unsigned char *)x->data + base * (int64_t)fbx__esz(x),
                       fbx__esz(x), r, out[0].dims, st);
  return NULL;
}

fbx_status *fbx_cpu_k_SHAPE(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  int64_t r = x->rank, s = node->params.shape.start;
  if (s < 0) s += r;
  if (s < 0) s = 0;
  if (s > r) s = r;
  int64_t n = fbx_cpu_numel(&out[0]);
  if (s + n > r) return FBX_ERR_ARG("SHAPE: output length %lld too long", (long long)n);
  for (int64_t i = 0; i < n; i++) fbx_cpu_write_f64(&out[0], i, 0), ((int64_t *)out[0].data)[i] = x->dims[s + i];
  if (out[0].dtype != FBX_DTYPE_I64) return FBX_ERR_NOTIMPL("SHAPE: output dtype %s", fbx_dtype_name(out[0].dtype));
  return NULL;
}

/* src strides of x broadcast (right-aligned) to y's dims */
static fbx_status *fbx__mv_bcast_strides(const fbx_tensor *x, const fbx_tensor *y, int64_t *st) {
  int64_t xs[FBX_MAX_RANK];
  fbx_cpu_strides(x, xs);
  int off = y->rank - x->rank;
  if (off < 0) return FBX_ERR_ARG("broadcast: rank %d into %d", x->rank, y->rank);
  for (int d = 0; d < y->rank; d++) {
    int id = d - off;
    int64_t dim = id >= 0 ? x->dims[id] : 1;
    if (dim != 1 && dim != y->dims[d]) return FBX_ERR_ARG("broadcast: dim %lld to %lld", (long long)dim, (long long)y->dims[d]);
    st[d] = dim == 1 ? 0 : xs[id];
  }
  return NULL;
}

fbx_status *fbx_cpu_k_EXPAND(FBX_CPU_KERNEL_ARGS) {
  int64_t st[FBX_MAX_RANK];
  FBX_TRY(fbx__mv_bcast_strides(&in[0], &out[0], st));
  fbx_cpu_strided_copy(c, out[0].data, in[0].data, fbx__esz(&in[0]), out[0].rank, out[0].dims, st);
  return NULL;
}

/* Fill n elements of esz bytes with the pattern at p[0]. */
static void fbx__mv_fill(unsigned char *p, size_t esz, int64_t n) {
  if (n <= 1) return;
  int64_t have = 1;
  while (have < n) {
    int64_t m = have < n - have ? have : n - have;
    memcpy(p + have * (int64_t)esz, p, (size_t)m * esz);
    have += m;
  }
}

fbx_status *fbx_cpu_k_CONSTANT_OF_SHAPE(FBX_CPU_KERNEL_ARGS) {
  int64_t n = fbx_cpu_numel(&out[0]);
  if (n == 0) return NULL;
  if (out[0].dtype == FBX_DTYPE_I64) ((int64_t *)out[0].data)[0] = (int64_t)node->params.fill.value;
  else fbx_cpu_write_f64(&out[0], 0, node->params.fill.value);
  fbx__mv_fill(out[0].data, fbx__esz(&out[0]), n);
  return NULL;
}

fbx_status *fbx_cpu_k_RANGE(FBX_CPU_KERNEL_ARGS) {
  if (n_in < 3) return FBX_ERR_ARG("RANGE: needs start, limit, delta");
  int64_t n = fbx_cpu_numel(&out[0]);
  fbx_tensor *y = &out[0];
  switch (y->dtype) {
    case FBX_DTYPE_F32: {
      float s = (float)fbx_cpu_read_f64(&in[0], 0), d = (float)fbx_cpu_read_f64(&in[2], 0);
      for (int64_t i = 0; i < n; i++) ((float *)y->data)[i] = s + (float)i * d;
      break;
    }
    case FBX_DTYPE_F64: {
      double s = fbx_cpu_read_f64(&in[0], 0), d = fbx_cpu_read_f64(&in[2], 0);
      for (int64_t i = 0; i < n; i++) ((double *)y->data)[i] = s + (double)i * d;
      break;
    }
    case FBX_DTYPE_I16: case FBX_DTYPE_I32: case FBX_DTYPE_I64: {
      int64_t s = fbx_cpu_read_i64(&in[0], 0), d = fbx_cpu_read_i64(&in[2], 0);
      for (int64_t i = 0; i < n; i++) {
        int64_t v = s + i * d;
        if (y->dtype == FBX_DTYPE_I64) ((int64_t *)y->data)[i] = v;
        else if (y->dtype == FBX_DTYPE_I32) ((int32_t *)y->data)[i] = (int32_t)v;
        else ((int16_t *)y->data)[i] = (int16_t)v;
      }
      break;
    }
    default: return FBX_ERR_NOTIMPL("RANGE: dtype %s", fbx_dtype_name(y->dtype));
  }
  return NULL;
}

fbx_status *fbx_cpu_k_TILE(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  int r = x->rank;
  /* view y as (rep0, d0, rep1, d1, ...) with src strides (0, s0, 0, s1, ...) */
  int64_t xs[FBX_MAX_RANK], dims[2 * FBX_MAX_RANK], st[2 * FBX_MAX_RANK];
  fbx_cpu_strides(x, xs);
  for (int d = 0; d < r; d++) {
    if (x->dims[d] == 0) return NULL;
    dims[2 * d] = out[0].dims[d] / x->dims[d];
    dims[2 * d + 1] = x->dims[d];
    st[2 * d] = 0;
    st[2 * d + 1] = xs[d];
  }
  fbx_cpu_strided_copy(c, out[0].data, x->data, fbx__esz(x), 2 * r, dims, st);
  return NULL;
}

/* Source index along one dim for padded position i (-1 = constant). */
static int64_t fbx__pad_src(fbx_ir_pad_mode mode, int64_t i, int64_t before, int64_t dim) {
  int64_t s = i - before;
  if (s >= 0 && s < dim) return s;
  if (dim <= 0) return -1;
  switch (mode) {
    case FBX_IR_PADMODE_EDGE: return s < 0 ? 0 : dim - 1;
    case FBX_IR_PADMODE_WRAP: return ((s % dim) + dim) % dim;
    case FBX_IR_PADMODE_REFLECT: {
      if (dim == 1) return 0;
      int64_t p = 2 * (dim - 1);
      s = ((s % p) + p) % p;
      return s < dim ? s : p - s;
    }
    default: return -1;
  }
}

fbx_status *fbx_cpu_k_PAD(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_tensor *y = &out[0];
  int r = x->rank;
  if (n_in < 2 || fbx_cpu_numel(&in[1]) != 2 * r) return FBX_ERR_ARG("PAD: pads must have 2*rank values");
  fbx_ir_pad_mode mode = node->params.pad.mode;
  size_t e = fbx__esz(x);
  int64_t before[FBX_MAX_RANK];
  for (int d = 0; d < r; d++) before[d] = fbx_cpu_read_i64(&in[1], d);
  int64_t total = fbx_cpu_numel(y);
  if (total == 0) return NULL;
  /* the constant value element */
  unsigned char val[8] = {0};
  if (mode == FBX_IR_PADMODE_CONSTANT && fbx_cpu_present(in, n_in, 2) && fbx_cpu_numel(&in[2]) > 0)
    memcpy(val, in[2].data, e);
  /* per-dim index maps in scratch */
  int64_t sum = 0;
  for (int d = 0; d < r; d++) sum += y->dims[d];
  int64_t *map = fbx_cpu_scratch(c, (size_t)(sum + 1) * sizeof(int64_t));
  if (!map) return FBX_ERR_OOM();
  int64_t *m[FBX_MAX_RANK], xs[FBX_MAX_RANK];
  fbx_cpu_strides(x, xs);
  int64_t o = 0;
  for (int d = 0; d < r; d++) {
    m[d] = map + o;
    o += y->dims[d];
    for (int64_t i = 0; i < y->dims[d]; i++) m[d][i] = fbx__pad_src(mode, i, before[d], x->dims[d]);
  }
  if (r == 0) {
    memcpy(y->data, x->data, e);
    return NULL;
  }
  int64_t idx[FBX_MAX_RANK] = {0};
  int64_t inner = y->dims[r - 1];
  unsigned char *dp = y->data;
  const unsigned char *sp = x->data;
  for (int64_t row = 0; row < total / inner; row++) {
    int64_t off = 0;
    bool pad = false;
    for (int d = 0; d < r - 1; d++) {
      int64_t s = m[d][idx[d]];
      if (s < 0) pad = true;
      else off += s * xs[d];
    }
    for (int64_t i = 0; i < inner; i++) {
      int64_t s = m[r - 1][i];
      memcpy(dp + i * (int64_t)e, (pad || s < 0) ? val : sp + (off + s) * (int64_t)e, e);
    }
    dp += inner * (int64_t)e;
    for (int d = r - 2; d >= 0; d--) {
      if (++idx[d] < y->dims[d]) break;
      idx[d] = 0;
    }
  }
  return NULL;
}

fbx_status *fbx_cpu_k_TRILU(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (x->rank < 2) return FBX_ERR_ARG("TRILU: rank < 2");
  int64_t k = fbx_cpu_present(in, n_in, 1) ? fbx_cpu_read_i64(&in[1], 0) : 0;
  int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1];
  int64_t nb = (R > 0 && C > 0) ? fbx_cpu_numel(x) / (R * C) : 0;
  size_t e = fbx__esz(x);
  bool upper = node->params.trilu.upper != 0;
  unsigned char zero[8] = {0};
  for (int64_t b = 0; b < nb; b++)
    for (int64_t i = 0; i < R; i++)
      for (int64_t j = 0; j < C; j++) {
        int64_t o = (b * R + i) * C + j;
        bool keep = upper ? (j - i >= k) : (j - i <= k);
        memcpy((unsigned char *)out[0].data + o * (int64_t)e,
               keep ? (const unsigned char *)x->data + o * (int64_t)e : zero, e);
      }
  return NULL;
}

fbx_status *fbx_cpu_k_DEPTH_TO_SPACE(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (x->rank != 4) return FBX_ERR_NOTIMPL("DEPTH_TO_SPACE: rank %d (4 only)", x->rank);
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], b = node->params.d2s.blocksize;
  if (b <= 0 || C % (b * b)) return FBX_ERR_ARG("DEPTH_TO_SPACE: bad blocksize");
  int64_t Cp = C / (b * b), HW = H * W;
  /* y viewed as (N, C', H, b1, W, b2) */
  int64_t dims[6] = {N, Cp, H, b, W, b}, st[6];
  st[0] = C * HW;
  st[2] = W;
  st[4] = 1;
  if (node->params.d2s.crd) { /* c = c'*b*b + b1*b + b2 */
    st[1] = b * b * HW; st[3] = b * HW; st[5] = HW;
  } else {                    /* DCR: c = b1*b*C' + b2*C' + c' */
    st[1] = HW; st[3] = b * Cp * HW; st[5] = Cp * HW;
  }
  fbx_cpu_strided_copy(c, out[0].data, x->data, fbx__esz(x), 6, dims, st);
  return NULL;
}

fbx_status *fbx_cpu_k_SPACE_TO_DEPTH(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (x->rank != 4) return FBX_ERR_NOTIMPL("SPACE_TO_DEPTH: rank %d (4 only)", x->rank);
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], b = node->params.d2s.blocksize;
  if (b <= 0 || H % b || W % b) return FBX_ERR_ARG("SPACE_TO_DEPTH: bad blocksize");
  /* y (N, b1, b2, C, H/b, W/b) <- x (N, C, H/b, b1, W/b, b2) */
  int64_t dims[6] = {N, b, b, C, H / b, W / b};
  int64_t st[6] = {C * H * W, W, 1, H * W, b * W, b};
  fbx_cpu_strided_copy(c, out[0].data, x->data, fbx__esz(x), 6, dims, st);
  return NULL;
}
