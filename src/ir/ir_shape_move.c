/* Shape inference, part 2: data movement (reshape, squeeze, transpose,
 * concat, split, slice, gather*, shape, expand, tile, pad, range, ...). */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "ir_shape_util.h"

static void fbx__ir_set_dims(fbx_tensor *t, const int64_t *d, int r) {
  t->rank = r;
  if (r) memcpy(t->dims, d, sizeof(int64_t) * (size_t)r);
}

static fbx_status *fbx__ir_reshape(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 2);
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 1));
  const fbx_tensor *x = &in[0], *s = &in[1];
  if (s->rank != 1) return FBX__IR_FAIL(node, "shape input must be 1-D");
  if (s->dims[0] > FBX_MAX_RANK) return FBX__IR_FAIL(node, "target rank %lld too large", (long long)s->dims[0]);
  int r = (int)s->dims[0];
  int64_t numel = fbx__ir_numel(x), known = 1;
  int neg = -1;
  for (int i = 0; i < r; i++) {
    int64_t d = fbx__ir_read_i64(s, i);
    if (d == 0 && !node->params.reshape.allowzero) {
      if (i >= x->rank) return FBX__IR_FAIL(node, "0 at dim %d copies a dim the input lacks", i);
      d = x->dims[i];
    }
    if (d == -1) {
      if (neg >= 0) return FBX__IR_FAIL(node, "more than one -1");
      neg = i;
      d = 1;
    } else if (d < 0) {
      return FBX__IR_FAIL(node, "bad target dim %lld", (long long)d);
    } else if (!fbx_i64_mul(known, d, &known)) {
      return FBX__IR_FAIL(node, "target shape: element count overflows int64 at dim %d (%lld)", i, (long long)d);
    }
    out->dims[i] = d;
  }
  if (neg >= 0) {
    if (known == 0 || numel % known) return FBX__IR_FAIL(node, "cannot infer -1: %lld elements into %lld", (long long)numel, (long long)known);
    out->dims[neg] = numel / known;
  } else if (known != numel) {
    return FBX__IR_FAIL(node, "element count %lld != %lld", (long long)numel, (long long)known);
  }
  out->rank = r;
  out->dtype = x->dtype;
  return NULL;
}

static int fbx__ir_popcount(uint32_t m) { return __builtin_popcount(m); }

static fbx_status *fbx__ir_squeeze(const fbx_ir_node *node, const fbx_tensor *x, fbx_tensor *out) {
  uint32_t m = node->params.axes.axes_mask;
  int r = 0;
  if (x->rank < 32 && (m >> x->rank)) return FBX__IR_FAIL(node, "axes mask outside rank %d", x->rank);
  for (int i = 0; i < x->rank; i++) {
    bool drop = m ? (m >> i) & 1u : x->dims[i] == 1;
    if (drop && x->dims[i] != 1) return FBX__IR_FAIL(node, "dim %d is %lld, not 1", i, (long long)x->dims[i]);
    if (!drop) out->dims[r++] = x->dims[i];
  }
  out->rank = r;
  return NULL;
}

static fbx_status *fbx__ir_unsqueeze(const fbx_ir_node *node, const fbx_tensor *x, fbx_tensor *out) {
  uint32_t m = node->params.axes.axes_mask;
  int r = x->rank + fbx__ir_popcount(m);
  if (r > FBX_MAX_RANK || (m >> r)) return FBX__IR_FAIL(node, "axes mask 0x%x invalid for output rank %d", m, r);
  for (int i = 0, j = 0; i < r; i++) out->dims[i] = (m >> i) & 1u ? 1 : x->dims[j++];
  out->rank = r;
  return NULL;
}

static fbx_status *fbx__ir_transpose(const fbx_ir_node *node, const fbx_tensor *x, fbx_tensor *out) {
  const int *perm = node->params.transpose.perm;
  int seen = 0, r = x->rank;
  bool all_zero = true;
  for (int i = 0; i < r; i++) {
    if (perm[i]) all_zero = false;
    if (perm[i] < 0 || perm[i] >= r || (seen >> perm[i]) & 1) { seen = -1; break; }
    seen |= 1 << perm[i];
  }
  for (int i = 0; i < r; i++) {
    int p = seen < 0 ? (all_zero ? r - 1 - i : -1) : perm[i]; /* perm all zero = default reverse */
    if (p < 0) return FBX__IR_FAIL(node, "perm is not a permutation of %d dims", r);
    out->dims[i] = x->dims[p];
  }
  out->rank = r;
  return NULL;
}

static fbx_status *fbx__ir_concat(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  int axis = node->params.axis.axis, first = -1;
  for (int i = 0; i < n_in; i++) {
    if (in[i].rank < 0) continue;
    if (first < 0) {
      first = i;
      if (axis < 0 || axis >= in[i].rank) return FBX__IR_FAIL(node, "axis %d outside rank %d", axis, in[i].rank);
      *out = in[i];
      out->data = NULL;
      continue;
    }
    if (in[i].rank != out->rank) return FBX__IR_FAIL(node, "input %d rank %d != %d", i, in[i].rank, out->rank);
    for (int d = 0; d < out->rank; d++) {
      if (d == axis) {
        if (!fbx_i64_add(out->dims[d], in[i].dims[d], &out->dims[d]))
          return FBX__IR_FAIL(node, "concatenated dim %d overflows int64", d);
      } else if (in[i].dims[d] != out->dims[d])
        return FBX__IR_FAIL(node, "input %d dim %d is %lld, expected %lld", i, d, (long long)in[i].dims[d],
                            (long long)out->dims[d]);
    }
  }
  if (first < 0) return FBX__IR_FAIL(node, "no inputs");
  return NULL;
}

static fbx_status *fbx__ir_split(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out, int n_out) {
  const fbx_tensor *x = &in[0];
  int axis = node->params.axis.axis;
  if (axis < 0 || axis >= x->rank) return FBX__IR_FAIL(node, "axis %d outside rank %d", axis, x->rank);
  int64_t dim = x->dims[axis], total = 0;
  bool sizes = fbx__ir_present(in, n_in, 1) && fbx__ir_numel(&in[1]) > 0;
  if (sizes) FBX_TRY(fbx__ir_need_data(node, in, n_in, 1));
  if (sizes && fbx__ir_numel(&in[1]) != n_out)
    return FBX__IR_FAIL(node, "%lld sizes for %d outputs", (long long)fbx__ir_numel(&in[1]), n_out);
  int64_t chunk = (dim + n_out - 1) / n_out; /* opset 18: last part may be smaller */
  for (int o = 0; o < n_out; o++) {
    int64_t s;
    if (sizes) s = fbx__ir_read_i64(&in[1], o);
    else s = dim - total < chunk ? dim - total : chunk;
    if (s < 0) return FBX__IR_FAIL(node, "negative split size");
    out[o] = *x;
    out[o].data = NULL;
    out[o].dims[axis] = s;
    if (!fbx_i64_add(total, s, &total)) return FBX__IR_FAIL(node, "split sizes overflow int64");
  }
  if (total != dim) return FBX__IR_FAIL(node, "split sizes sum to %lld, dim is %lld", (long long)total, (long long)dim);
  return NULL;
}

/* ONNX Slice for one axis of size dim >= 0 (opset 13 text): negative starts
 * and ends count from the end (x + dim: cannot overflow, x < 0 <= dim); then
 * step > 0 clamps start and end to [0, dim], step < 0 clamps start to
 * [0, dim-1] and end to [-1, dim-1]; the count is ceil(|end - start| / |step|)
 * when the range runs the step's way, else 0. The span and |step| are taken
 * as uint64 so that step = INT64_MIN or -(2^63-1) and starts/ends of
 * INT64_MIN/INT64_MAX work exactly (e.g. dim 5, start -1, end INT64_MIN,
 * step INT64_MIN: one element, index 4). step != 0 (the caller checks).
 * Returns the element count; *start_out (may be NULL): the first index, in
 * [0, dim-1] whenever the count is > 0. */
int64_t fbx_ir_slice_resolve(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *start_out) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  uint64_t span, ustep = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
  if (step > 0) {
    start = start < 0 ? 0 : start > dim ? dim : start;
    end = end < 0 ? 0 : end > dim ? dim : end;
    span = end > start ? (uint64_t)end - (uint64_t)start : 0;
  } else {
    start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start; /* dim 0: start -1, count 0 */
    end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
    span = start > end ? (uint64_t)start - (uint64_t)end : 0;
  }
  if (start_out) *start_out = start;
  return span ? (int64_t)((span - 1) / ustep + 1) : 0;
}

static fbx_status *fbx__ir_slice(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 3);
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 1));
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 2));
  const fbx_tensor *x = &in[0];
  int64_t n = fbx__ir_numel(&in[1]);
  if (fbx__ir_numel(&in[2]) != n) return FBX__IR_FAIL(node, "starts/ends lengths differ");
  bool has_axes = fbx__ir_present(in, n_in, 3) && fbx__ir_numel(&in[3]) > 0;
  bool has_steps = fbx__ir_present(in, n_in, 4) && fbx__ir_numel(&in[4]) > 0;
  if (has_axes) FBX_TRY(fbx__ir_need_data(node, in, n_in, 3));
  if (has_steps) FBX_TRY(fbx__ir_need_data(node, in, n_in, 4));
  if ((has_axes && fbx__ir_numel(&in[3]) != n) || (has_steps && fbx__ir_numel(&in[4]) != n))
    return FBX__IR_FAIL(node, "axes/steps lengths differ from starts");
  *out = *x;
  out->data = NULL;
  unsigned seen = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t ax = has_axes ? fbx__ir_read_i64(&in[3], i) : i;
    if (ax < 0) ax += x->rank;
    if (ax < 0 || ax >= x->rank || (seen >> ax) & 1u) return FBX__IR_FAIL(node, "bad or repeated axis %lld", (long long)ax);
    seen |= 1u << ax;
    int64_t step = has_steps ? fbx__ir_read_i64(&in[4], i) : 1;
    if (step == 0) return FBX__IR_FAIL(node, "step 0");
    out->dims[ax] = fbx_ir_slice_resolve(x->dims[ax], fbx__ir_read_i64(&in[1], i), fbx__ir_read_i64(&in[2], i), step, NULL);
  }
  return NULL;
}

static fbx_status *fbx__ir_gather(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 2);
  const fbx_tensor *x = &in[0], *ix = &in[1];
  int axis = node->params.axis.axis;
  if (axis < 0 || axis >= x->rank) return FBX__IR_FAIL(node, "axis %d outside rank %d", axis, x->rank);
  int r = x->rank - 1 + ix->rank;
  if (r > FBX_MAX_RANK) return FBX__IR_FAIL(node, "output rank %d too large", r);
  int k = 0;
  for (int i = 0; i < axis; i++) out->dims[k++] = x->dims[i];
  for (int i = 0; i < ix->rank; i++) out->dims[k++] = ix->dims[i];
  for (int i = axis + 1; i < x->rank; i++) out->dims[k++] = x->dims[i];
  out->rank = r;
  out->dtype = x->dtype;
  return NULL;
}

static fbx_status *fbx__ir_gather_nd(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 2);
  const fbx_tensor *x = &in[0], *ix = &in[1];
  int b = node->params.axis.axis, q = ix->rank, r = x->rank;
  if (q < 1) return FBX__IR_FAIL(node, "indices rank must be >= 1");
  int64_t last = ix->dims[q - 1];
  if (b < 0 || b >= q || b >= r || last < 1 || last > r - b) return FBX__IR_FAIL(node, "bad batch_dims/index depth");
  for (int i = 0; i < b; i++)
    if (x->dims[i] != ix->dims[i]) return FBX__IR_FAIL(node, "batch dim %d differs", i);
  int k = 0;
  for (int i = 0; i < q - 1; i++) out->dims[k++] = ix->dims[i];
  for (int i = b + (int)last; i < r; i++) out->dims[k++] = x->dims[i];
  out->rank = k;
  out->dtype = x->dtype;
  return NULL;
}

static fbx_status *fbx__ir_shape_op(const fbx_ir_node *node, const fbx_tensor *x, fbx_tensor *out) {
  int64_t r = x->rank, s = node->params.shape.start, e = node->params.shape.has_end ? node->params.shape.end : r;
  if (s < 0) s += r;
  if (e < 0) e += r;
  s = s < 0 ? 0 : s > r ? r : s;
  e = e < 0 ? 0 : e > r ? r : e;
  out->rank = 1;
  out->dims[0] = e > s ? e - s : 0;
  out->dtype = FBX_DTYPE_I64;
  return NULL;
}

static fbx_status *fbx__ir_expand(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 2);
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 1));
  const fbx_tensor *x = &in[0], *s = &in[1];
  int sr = (int)fbx__ir_numel(s);
  int r = x->rank > sr ? x->rank : sr;
  if (s->rank != 1 || r > FBX_MAX_RANK) return FBX__IR_FAIL(node, "bad shape input");
  for (int i = 0; i < r; i++) {
    int ia = i - (r - x->rank), ib = i - (r - sr);
    int64_t a = ia >= 0 ? x->dims[ia] : 1, b = ib >= 0 ? fbx__ir_read_i64(s, ib) : 1;
    if (a == b || b == 1) out->dims[i] = a;
    else if (a == 1) out->dims[i] = b;
    else return FBX__IR_FAIL(node, "cannot expand dim %d: %lld to %lld", i, (long long)a, (long long)b);
  }
  out->rank = r;
  out->dtype = x->dtype;
  return NULL;
}

static fbx_status *fbx__ir_from_shape_data(const fbx_ir_node *node, const fbx_tensor *s, fbx_tensor *out) {
  int64_t n = fbx__ir_numel(s);
  if (s->rank > 1 || n > FBX_MAX_RANK) return FBX__IR_FAIL(node, "bad shape input");
  for (int64_t i = 0; i < n; i++) out->dims[i] = fbx__ir_read_i64(s, i);
  out->rank = (int)n;
  return NULL;
}

static fbx_status *fbx__ir_range(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 3);
  for (int i = 0; i < 3; i++) {
    FBX_TRY(fbx__ir_need_data(node, in, n_in, i));
    if (fbx__ir_numel(&in[i]) != 1) return FBX__IR_FAIL(node, "input %d must be a scalar", i);
  }
  int64_t n;
  if (fbx_dtype_is_float(in[0].dtype)) {
    double s = fbx__ir_read_f64(&in[0], 0), l = fbx__ir_read_f64(&in[1], 0), d = fbx__ir_read_f64(&in[2], 0);
    if (d == 0) return FBX__IR_FAIL(node, "delta 0");
    double c = ceil((l - s) / d);
    if (!(c < 1e15)) return FBX__IR_FAIL(node, "range too long");
    n = c > 0 ? (int64_t)c : 0;
  } else {
    int64_t s = fbx__ir_read_i64(&in[0], 0), l = fbx__ir_read_i64(&in[1], 0), d = fbx__ir_read_i64(&in[2], 0);
    if (d == 0) return FBX__IR_FAIL(node, "delta 0");
    /* 128-bit: l - s and -d overflow int64 for extreme operands */
    __int128 span = (__int128)l - s, step = d, c;
    if (d > 0) c = span > 0 ? (span + step - 1) / step : 0;
    else c = span < 0 ? (-span + (-step) - 1) / (-step) : 0;
    if (c > INT64_MAX) return FBX__IR_FAIL(node, "range too long");
    n = (int64_t)c;
  }
  out->rank = 1;
  out->dims[0] = n;
  out->dtype = in[0].dtype;
  return NULL;
}

static fbx_status *fbx__ir_tile(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 2);
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 1));
  const fbx_tensor *x = &in[0];
  if (fbx__ir_numel(&in[1]) != x->rank) return FBX__IR_FAIL(node, "repeats length != rank %d", x->rank);
  *out = *x;
  out->data = NULL;
  for (int i = 0; i < x->rank; i++) {
    int64_t rep = fbx__ir_read_i64(&in[1], i);
    if (rep < 0) return FBX__IR_FAIL(node, "negative repeat");
    if (!fbx_i64_mul(x->dims[i], rep, &out->dims[i]))
      return FBX__IR_FAIL(node, "dim %d x %lld repeats overflows int64", i, (long long)rep);
  }
  return NULL;
}

static fbx_status *fbx__ir_pad(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 2);
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 1));
  const fbx_tensor *x = &in[0];
  int64_t np = fbx__ir_numel(&in[1]);
  int axes[FBX_MAX_RANK], na = x->rank;
  if (fbx__ir_present(in, n_in, 3) && fbx__ir_numel(&in[3]) > 0) {
    FBX_TRY(fbx__ir_need_data(node, in, n_in, 3));
    na = (int)fbx__ir_numel(&in[3]);
    if (na > x->rank) return FBX__IR_FAIL(node, "too many axes");
    for (int i = 0; i < na; i++) {
      int64_t a = fbx__ir_read_i64(&in[3], i);
      if (a < 0) a += x->rank;
      if (a < 0 || a >= x->rank) return FBX__IR_FAIL(node, "bad axis");
      axes[i] = (int)a;
    }
  } else {
    for (int i = 0; i < na; i++) axes[i] = i;
  }
  if (np != 2 * na) return FBX__IR_FAIL(node, "pads has %lld values, expected %d", (long long)np, 2 * na);
  *out = *x;
  out->data = NULL;
  for (int i = 0; i < na; i++) {
    int64_t d;
    if (!fbx_i64_add(x->dims[axes[i]], fbx__ir_read_i64(&in[1], i), &d) ||
        !fbx_i64_add(d, fbx__ir_read_i64(&in[1], na + i), &d))
      return FBX__IR_FAIL(node, "padded dim %d overflows int64", axes[i]);
    if (d < 0) return FBX__IR_FAIL(node, "padded dim %d is negative", axes[i]);
    out->dims[axes[i]] = d;
  }
  return NULL;
}

static fbx_status *fbx__ir_one_hot(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 3);
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 1));
  const fbx_tensor *x = &in[0];
  if (fbx__ir_numel(&in[1]) != 1) return FBX__IR_FAIL(node, "depth must be a scalar");
  double dv = fbx__ir_read_f64(&in[1], 0);
  if (!(dv > -1.0 && dv < 9.2e18)) return FBX__IR_FAIL(node, "depth %g is negative or too large", dv);
  int64_t depth = (int64_t)dv;
  int axis = node->params.axis.axis, r = x->rank + 1;
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r || r > FBX_MAX_RANK) return FBX__IR_FAIL(node, "bad axis");
  if (depth < 0) return FBX__IR_FAIL(node, "negative depth");
  for (int i = 0, j = 0; i < r; i++) out->dims[i] = i == axis ? depth : x->dims[j++];
  out->rank = r;
  out->dtype = in[2].dtype;
  return NULL;
}

static fbx_status *fbx__ir_d2s(const fbx_ir_node *node, const fbx_tensor *x, fbx_tensor *out) {
  int64_t b = node->params.d2s.blocksize;
  int64_t bb;
  if (x->rank != 4 || b < 1) return FBX__IR_FAIL(node, "needs a 4-D input and blocksize >= 1");
  if (!fbx_i64_mul(b, b, &bb)) return FBX__IR_FAIL(node, "blocksize %lld too large", (long long)b);
  *out = *x;
  out->data = NULL;
  if (node->op == FBX_IR_OP_DEPTH_TO_SPACE) {
    if (x->dims[1] % bb) return FBX__IR_FAIL(node, "channels not divisible by blocksize^2");
    out->dims[1] = x->dims[1] / bb;
    if (!fbx_i64_mul(x->dims[2], b, &out->dims[2]) || !fbx_i64_mul(x->dims[3], b, &out->dims[3]))
      return FBX__IR_FAIL(node, "output dims overflow int64");
  } else {
    if (x->dims[2] % b || x->dims[3] % b) return FBX__IR_FAIL(node, "spatial dims not divisible by blocksize");
    if (!fbx_i64_mul(x->dims[1], bb, &out->dims[1])) return FBX__IR_FAIL(node, "output channels overflow int64");
    out->dims[2] = x->dims[2] / b;
    out->dims[3] = x->dims[3] / b;
  }
  return NULL;
}

static fbx_status *fbx__ir_non_zero(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 0));
  const fbx_tensor *x = &in[0];
  int64_t n = fbx__ir_numel(x), nz = 0;
  size_t es = fbx_dtype_size(x->dtype);
  const unsigned char *p = x->data;
  for (int64_t i = 0; i < n; i++) {
    if (fbx_dtype_is_float(x->dtype)) {
      if (fbx__ir_read_f64(x, i) != 0.0) nz++;
    } else {
      for (size_t b = 0; b < es; b++)
        if (p[(size_t)i * es + b]) { nz++; break; }
    }
  }
  out->rank = 2;
  out->dims[0] = x->rank;
  out->dims[1] = nz;
  out->dtype = FBX_DTYPE_I64;
  return NULL;
}

fbx_status *fbx__ir_infer_move(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out,
                               int n_out) {
  fbx_ir_op op = node->op;
  bool needs_x = op != FBX_IR_OP_CONCAT && op != FBX_IR_OP_RANGE && op != FBX_IR_OP_CONSTANT_OF_SHAPE;
  if (needs_x) {
    FBX__IR_NEED_IN(node, n_in, 1);
    if (in[0].rank < 0) return FBX__IR_FAIL(node, "input 0 missing");
    out[0].dtype = in[0].dtype;
  }
  switch (op) {
    case FBX_IR_OP_RESHAPE: return fbx__ir_reshape(node, in, n_in, out);
    case FBX_IR_OP_SQUEEZE: return fbx__ir_squeeze(node, &in[0], out);
    case FBX_IR_OP_UNSQUEEZE: return fbx__ir_unsqueeze(node, &in[0], out);
    case FBX_IR_OP_FLATTEN: {
      int axis = node->params.axis.axis;
      if (axis < 0 || axis > in[0].rank) return FBX__IR_FAIL(node, "axis %d outside 0..%d", axis, in[0].rank);
      int64_t a = 1, b = 1;
      for (int i = 0; i < in[0].rank; i++) *(i < axis ? &a : &b) *= in[0].dims[i];
      int64_t d[2] = {a, b};
      fbx__ir_set_dims(out, d, 2);
      return NULL;
    }
    case FBX_IR_OP_TRANSPOSE: return fbx__ir_transpose(node, &in[0], out);
    case FBX_IR_OP_CONCAT: return fbx__ir_concat(node, in, n_in, out);
    case FBX_IR_OP_SPLIT: return fbx__ir_split(node, in, n_in, out, n_out);
    case FBX_IR_OP_SLICE: return fbx__ir_slice(node, in, n_in, out);
    case FBX_IR_OP_GATHER: return fbx__ir_gather(node, in, n_in, out);
    case FBX_IR_OP_GATHER_ELEMENTS:
      FBX__IR_NEED_IN(node, n_in, 2);
      if (in[1].rank != in[0].rank) return FBX__IR_FAIL(node, "indices rank != data rank");
      fbx__ir_set_dims(out, in[1].dims, in[1].rank);
      return NULL;
    case FBX_IR_OP_GATHER_ND: return fbx__ir_gather_nd(node, in, n_in, out);
    case FBX_IR_OP_SHAPE: return fbx__ir_shape_op(node, &in[0], out);
    case FBX_IR_OP_EXPAND: return fbx__ir_expand(node, in, n_in, out);
    case FBX_IR_OP_CONSTANT_OF_SHAPE:
      FBX_TRY(fbx__ir_need_data(node, in, n_in, 0));
      FBX_TRY(fbx__ir_from_shape_data(node, &in[0], out));
      out->dtype = node->params.fill.dtype ? node->params.fill.dtype : FBX_DTYPE_F32;
      return NULL;
    case FBX_IR_OP_RANGE: return fbx__ir_range(node, in, n_in, out);
    case FBX_IR_OP_TILE: return fbx__ir_tile(node, in, n_in, out);
    case FBX_IR_OP_PAD: return fbx__ir_pad(node, in, n_in, out);
    case FBX_IR_OP_ONE_HOT: return fbx__ir_one_hot(node, in, n_in, out);
    case FBX_IR_OP_DEPTH_TO_SPACE:
    case FBX_IR_OP_SPACE_TO_DEPTH: return fbx__ir_d2s(node, &in[0], out);
    case FBX_IR_OP_NON_ZERO: return fbx__ir_non_zero(node, in, n_in, out);
    default: return FBX_ERR_NOTIMPL("not a data-movement op");
  }
}
