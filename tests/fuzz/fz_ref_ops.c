// fz_ref_ops.c — the naive ops of the fuzz reference (fz_ref.h), written from the ONNX
// operator spec (opset 13-17) and, where the spec is silent on NaN and inf, the rules of the
// README's "Numerics" section (numpy's: NaN propagates through Max/Min/Clip/MaxPool/Shrink/
// ThresholdedRelu as through np.maximum/np.clip/np.max; ArgMax/ArgMin/Hardmax/TopK take NaN as
// the extreme value as np.argmax/np.sort do; the limits at +-inf of HardSwish and Softsign,
// not the inf*0 or inf/inf of their formulas). Plain loops
// in double over flat indices; slow and obviously right is the point. An input the spec
// calls invalid (an index out of range, a negative dim, a reflect pad wider than its dim)
// declines: the reference then has no value, and the harness judges by ORT alone.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/ref_bcast.h"
#include "fz_ref.h"

#define FZO_MAX_RANK 8

// ---- attributes and tensors ----

static const fz_rattr *fzo_attr(const fz_rnode *n, const char *name) {
  for (int i = 0; i < n->n_at; i++)
    if (!strcmp(n->at[i].name, name)) return &n->at[i];
  return NULL;
}
static int64_t fzo_ai(const fz_rnode *n, const char *name, int64_t def) {
  const fz_rattr *a = fzo_attr(n, name);
  return a ? a->i : def;
}
static double fzo_af(const fz_rnode *n, const char *name, double def) {
  const fz_rattr *a = fzo_attr(n, name);
  return a ? (double)a->f : def;
}
static const char *fzo_as(const fz_rnode *n, const char *name, const char *def) {
  const fz_rattr *a = fzo_attr(n, name);
  return a && a->s ? a->s : def;
}
// An INTS attribute: its count (values into v), or -1 when absent.
static int fzo_aints(const fz_rnode *n, const char *name, int64_t *v) {
  const fz_rattr *a = fzo_attr(n, name);
  if (!a) return -1;
  for (int i = 0; i < a->n; i++) v[i] = a->ints[i];
  return a->n;
}

static const char *fzo_alloc(fbx_host_tensor *y, int dtype, int rank, const int64_t *d) {
  if (rank < 0 || rank > FBX_HOST_MAX_RANK) return "output rank out of range";
  int64_t numel = 1;
  for (int i = 0; i < rank; i++) {
    if (d[i] < 0 || d[i] > (1 << 20)) return "output dim negative or huge";
    numel *= d[i];
    if (numel > (1 << 22)) return "output too large";
  }
  char *err = fbx_host_tensor_alloc(y, NULL, dtype, rank, d);
  fbx_host_err_free(err);
  return err ? "out of memory" : NULL;
}

static double fzo_get(const fbx_host_tensor *t, size_t i) { return fbx_host_tensor_get(t, i); }
// An integer tensor's element, exactly (int64 or int32).
static int64_t fzo_int(const fbx_host_tensor *t, size_t i) {
  return t->dtype == FBX_HOST_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}
static int fzo_is_int(const fbx_host_tensor *t) { return t && (t->dtype == FBX_HOST_I64 || t->dtype == FBX_HOST_I32); }

// flat index -> multi-index over d[r]
static void fzo_unravel(size_t flat, int r, const int64_t *d, int64_t *idx) {
  for (int k = r - 1; k >= 0; k--) {
    idx[k] = d[k] ? (int64_t)(flat % (size_t)d[k]) : 0;
    flat = d[k] ? flat / (size_t)d[k] : 0;
  }
}
static size_t fzo_ravel(int r, const int64_t *d, const int64_t *idx) {
  size_t f = 0;
  for (int k = 0; k < r; k++) f = f * (size_t)d[k] + (size_t)idx[k];
  return f;
}
// axis in [-r, r) -> [0, r); -1 when out of range
static int fzo_axis(int64_t a, int r) { return a < -r || a >= r ? -1 : (int)(a < 0 ? a + r : a); }

// numpy's maximum/minimum: a NaN on either side gives NaN
static double fzo_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : (a > b ? a : b); }
static double fzo_min(double a, double b) { return isnan(a) || isnan(b) ? NAN : (a < b ? a : b); }

// ---- elementwise ----

static const char *fzo_unary(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const char *op = n->op, *e = fzo_alloc(y, FBX_HOST_F32, x[0]->rank, x[0]->dims);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(x[0]);
  for (size_t i = 0; i < N; i++) {
    double v = fzo_get(x[0], i), r;
    if (!strcmp(op, "Relu")) r = v < 0 ? 0 : v;  // NaN stays NaN
    else if (!strcmp(op, "Sigmoid")) r = 1 / (1 + exp(-v));
    else if (!strcmp(op, "Tanh")) r = tanh(v);
    else if (!strcmp(op, "Abs")) r = fabs(v);
    else if (!strcmp(op, "Neg")) r = -v;
    else if (!strcmp(op, "Erf")) r = erf(v);
    else if (!strcmp(op, "Softplus")) r = v > 30 ? v : log1p(exp(v));
    else if (!strcmp(op, "Softsign")) r = isinf(v) ? copysign(1, v) : v / (1 + fabs(v));  // the limit at +-inf
    else if (!strcmp(op, "HardSwish")) {
      double t = fzo_max(0, fzo_min(1, v / 6 + 0.5));
      r = t == 0 ? 0 : v * t;  // 0 at -inf (the limit), not -inf * 0
    } else if (!strcmp(op, "ThresholdedRelu")) r = isnan(v) || v > fzo_af(n, "alpha", 1) ? v : 0;
    else if (!strcmp(op, "Shrink")) {
      double l = fzo_af(n, "lambd", 0.5), b = fzo_af(n, "bias", 0);
      r = isnan(v) ? v : v < -l ? v + b : v > l ? v - b : 0;
    } else if (!strcmp(op, "Sign")) r = isnan(v) ? v : (v > 0) - (v < 0);
    else if (!strcmp(op, "Floor")) r = floor(v);
    else if (!strcmp(op, "Ceil")) r = ceil(v);
    else if (!strcmp(op, "Round")) r = nearbyint(v);  // half to even (the default rounding mode)
    else if (!strcmp(op, "Sin")) r = sin(v);
    else if (!strcmp(op, "Cos")) r = cos(v);
    else if (!strcmp(op, "Atan")) r = atan(v);
    else if (!strcmp(op, "Identity")) r = v;
    else if (!strcmp(op, "HardSigmoid"))
      r = fzo_max(0, fzo_min(1, fzo_af(n, "alpha", 0.2) * v + fzo_af(n, "beta", 0.5)));
    else if (!strcmp(op, "Elu")) r = v < 0 ? fzo_af(n, "alpha", 1) * (exp(v) - 1) : v;
    else if (!strcmp(op, "Celu")) {
      double a = fzo_af(n, "alpha", 1);
      r = fzo_max(0, v) + fzo_min(0, a * (exp(v / a) - 1));
    } else if (!strcmp(op, "LeakyRelu")) r = v < 0 ? fzo_af(n, "alpha", 0.01) * v : v;
    else if (!strcmp(op, "Selu"))
      r = fzo_af(n, "gamma", 1.05070102214813232421875) *
          (v <= 0 ? fzo_af(n, "alpha", 1.67326319217681884765625) * (exp(v) - 1) : v);
    else if (!strcmp(op, "Exp")) r = exp(v);
    else if (!strcmp(op, "Log")) r = log(v);
    else if (!strcmp(op, "Sqrt")) r = sqrt(v);
    else if (!strcmp(op, "Reciprocal")) r = 1 / v;
    else if (!strcmp(op, "Acos")) r = acos(v);
    else if (!strcmp(op, "Asin")) r = asin(v);
    else if (!strcmp(op, "Atanh")) r = atanh(v);
    else if (!strcmp(op, "Acosh")) r = acosh(v);
    else if (!strcmp(op, "Tan")) r = tan(v);
    else return "unary op not implemented";
    fbx_host_tensor_set(y, i, r);
  }
  (void)n_x;
  return NULL;
}

static const char *fzo_binary(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *a = x[0], *b = x[1];
  int64_t od[FBX_HOST_MAX_RANK] = {0};
  int r = od_ref_bcast_shape(a->rank, a->dims, b->rank, b->dims, od);
  if (r < 0) return "shapes do not broadcast";
  int cmp = !strcmp(n->op, "Equal") || !strcmp(n->op, "Less") || !strcmp(n->op, "Greater");
  const char *e = fzo_alloc(y, cmp ? FBX_HOST_BOOL : FBX_HOST_F32, r, od);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(y);
  for (size_t i = 0; i < N; i++) {
    double u = fzo_get(a, od_ref_bcast_offset(a->rank, a->dims, r, od, i));
    double v = fzo_get(b, od_ref_bcast_offset(b->rank, b->dims, r, od, i)), w;
    if (!strcmp(n->op, "Add")) w = u + v;
    else if (!strcmp(n->op, "Sub")) w = u - v;
    else if (!strcmp(n->op, "Mul")) w = u * v;
    else if (!strcmp(n->op, "Div")) w = u / v;
    else if (!strcmp(n->op, "Pow")) w = pow(u, v);
    else if (!strcmp(n->op, "Max")) w = fzo_max(u, v);
    else if (!strcmp(n->op, "Min")) w = fzo_min(u, v);
    else if (!strcmp(n->op, "PRelu")) w = u < 0 ? v * u : u;
    else if (!strcmp(n->op, "Equal")) w = u == v;  // a NaN compares false
    else if (!strcmp(n->op, "Less")) w = u < v;
    else if (!strcmp(n->op, "Greater")) w = u > v;
    else return "binary op not implemented";
    fbx_host_tensor_set(y, i, w);
  }
  (void)n_x;
  return NULL;
}

// Clip(x, min, max): np.clip = minimum(maximum(x, min), max); a NaN bound gives NaN, and
// min > max gives max (the spec says so).
static const char *fzo_clip(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *lo = n_x > 1 ? x[1] : NULL, *hi = n_x > 2 ? x[2] : NULL;
  if ((lo && fbx_host_tensor_numel(lo) != 1) || (hi && fbx_host_tensor_numel(hi) != 1)) return "bounds not scalars";
  const char *e = fzo_alloc(y, FBX_HOST_F32, x[0]->rank, x[0]->dims);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(x[0]);
  for (size_t i = 0; i < N; i++) {
    double v = fzo_get(x[0], i);
    if (lo) v = fzo_max(v, fzo_get(lo, 0));
    if (hi) v = fzo_min(v, fzo_get(hi, 0));
    fbx_host_tensor_set(y, i, v);
  }
  (void)n;
  return NULL;
}

// ---- Slice (opset 13): starts, ends, axes, steps inputs ----

static const char *fzo_slice(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  if (n_x < 3 || !fzo_is_int(x[1]) || !fzo_is_int(x[2])) return "starts/ends missing";
  int r = X->rank;
  size_t k = fbx_host_tensor_numel(x[1]);
  if (fbx_host_tensor_numel(x[2]) != k || (n_x > 3 && x[3] && fbx_host_tensor_numel(x[3]) != k) ||
      (n_x > 4 && x[4] && fbx_host_tensor_numel(x[4]) != k))
    return "starts/ends/axes/steps of different lengths";
  __int128 start[FZO_MAX_RANK], step[FZO_MAX_RANK];
  int64_t od[FZO_MAX_RANK] = {0};
  int seen[FZO_MAX_RANK] = {0};
  for (int a = 0; a < r; a++) start[a] = 0, step[a] = 1, od[a] = X->dims[a];
  for (size_t i = 0; i < k; i++) {
    int64_t ax = n_x > 3 && x[3] ? fzo_int(x[3], i) : (int64_t)i;
    int a = fzo_axis(ax, r);
    if (a < 0 || seen[a]++) return "axis out of range or repeated";
    __int128 dim = X->dims[a], s = fzo_int(x[1], i), e = fzo_int(x[2], i);
    __int128 st = n_x > 4 && x[4] ? fzo_int(x[4], i) : 1;
    if (st == 0) return "step 0";
    // the spec: negative starts/ends count from the end, then clamp to [0, dim] (step > 0)
    // or [0, dim - 1] / [-1, dim - 1] (step < 0)
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (st > 0) {
      s = s < 0 ? 0 : (s > dim ? dim : s);
      e = e < 0 ? 0 : (e > dim ? dim : e);
    } else {
      s = s < 0 ? 0 : (s > dim - 1 ? dim - 1 : s);
      e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
    }
    __int128 cnt = st > 0 ? (e - s + st - 1) / st : (s - e + (-st) - 1) / (-st);
    if (cnt < 0) cnt = 0;
    start[a] = s;
    step[a] = st;
    od[a] = (int64_t)cnt;
  }
  const char *e = fzo_alloc(y, FBX_HOST_F32, r, od);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(y);
  int64_t idx[FZO_MAX_RANK] = {0};
  for (size_t i = 0; i < N; i++) {
    fzo_unravel(i, r, od, idx);
    for (int a = 0; a < r; a++) idx[a] = (int64_t)(start[a] + step[a] * idx[a]);
    fbx_host_tensor_set(y, i, fzo_get(X, fzo_ravel(r, X->dims, idx)));
  }
  (void)n;
  return NULL;
}

// ---- Pad (opset 13+): pads input [begin..., end...], modes constant / reflect / edge ----

static const char *fzo_pad(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  int r = X->rank;
  if (n_x < 2 || !fzo_is_int(x[1]) || fbx_host_tensor_numel(x[1]) != (size_t)(2 * r)) return "pads of the wrong length";
  const char *mode = fzo_as(n, "mode", "constant");
  double cv = n_x > 2 && x[2] ? fzo_get(x[2], 0) : 0;
  int64_t pb[FZO_MAX_RANK] = {0}, od[FZO_MAX_RANK] = {0};
  for (int a = 0; a < r; a++) {
    int64_t b = fzo_int(x[1], (size_t)a), e = fzo_int(x[1], (size_t)(a + r));
    if (b < -(1 << 20) || b > (1 << 20) || e < -(1 << 20) || e > (1 << 20)) return "pad out of range";
    pb[a] = b;
    od[a] = X->dims[a] + b + e;
    if (od[a] < 0) return "a dim padded below 0";
    // reflect needs pads < dim (the mirror must not pass the far edge); edge/reflect need data
    if (!strcmp(mode, "reflect") && (b >= X->dims[a] || e >= X->dims[a]) && (b > 0 || e > 0))
      return "reflect pad not smaller than its dim";
    if (strcmp(mode, "constant") && X->dims[a] == 0 && od[a] > 0) return "edge/reflect pad of an empty dim";
  }
  const char *e = fzo_alloc(y, FBX_HOST_F32, r, od);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(y);
  int64_t idx[FZO_MAX_RANK] = {0};
  for (size_t i = 0; i < N; i++) {
    fzo_unravel(i, r, od, idx);
    int outside = 0;
    for (int a = 0; a < r; a++) {
      int64_t s = idx[a] - pb[a], d = X->dims[a];
      if (s < 0 || s >= d) {
        if (!strcmp(mode, "edge")) s = s < 0 ? 0 : d - 1;
        else if (!strcmp(mode, "reflect")) {
          if (d == 1) s = 0;
          else {
            int64_t p = 2 * (d - 1);
            s = ((s % p) + p) % p;
            if (s >= d) s = p - s;
          }
        } else outside = 1;
      }
      idx[a] = s;
    }
    fbx_host_tensor_set(y, i, outside ? cv : fzo_get(X, fzo_ravel(r, X->dims, idx)));
  }
  return NULL;
}

// ---- pools: MaxPool / AveragePool / LpPool on N x C x spatial, and the global pools ----

// Output size and begin pad of one spatial axis, from the spec's formulas (MaxPool doc):
//   SAME_*: out = ceil(in / s), total = max(0, (out - 1) * s + ek - in), SAME_UPPER puts the
//           odd pad at the end, SAME_LOWER at the start;
//   VALID:  out = floor((in - ek) / s) + 1, no pads;
//   NOTSET: out = floor((in + pb + pe - ek) / s) + 1 (ceil with ceil_mode, where a last window
//           that would start in the end pad is dropped);
// an out <= 0 is an empty output (a window wider than the input).
static int64_t fzo_pool_out(const char *ap, int64_t in, int64_t k, int64_t s, int64_t d, int64_t *pb, int64_t *pe,
                            int ceil_mode) {
  int64_t ek = d * (k - 1) + 1, out;
  if (!strncmp(ap, "SAME", 4)) {
    out = (in + s - 1) / s;
    int64_t total = (out - 1) * s + ek - in;
    if (total < 0) total = 0;
    *pb = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
    *pe = total - *pb;
    return out;
  }
  if (!strcmp(ap, "VALID")) *pb = *pe = 0;
  int64_t num = in + *pb + *pe - ek;
  if (ceil_mode && strcmp(ap, "VALID")) {
    out = (num >= 0 ? (num + s - 1) / s : -((-num) / s)) + 1;
    if (out > 0 && (out - 1) * s >= in + *pb) out--;
  } else {
    out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  }
  return out < 0 ? 0 : out;
}

static const char *fzo_pool(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  int nd = X->rank - 2;
  if (nd < 1 || nd > 3) return "pool input not N x C x spatial";
  const char *op = n->op;
  int global = !strncmp(op, "Global", 6), max = strstr(op, "MaxPool") != NULL, lp = !strcmp(op, "LpPool");
  int64_t k[3] = {0}, s[3] = {0}, d[3] = {0}, pads[6] = {0}, pb[3] = {0}, pe[3] = {0}, od[FBX_HOST_MAX_RANK] = {0};
  for (int i = 0; i < nd; i++) k[i] = global ? X->dims[2 + i] : 0, s[i] = d[i] = 1, pb[i] = pe[i] = 0;
  if (!global) {
    if (fzo_aints(n, "kernel_shape", k) != nd) return "kernel_shape missing";
    if (fzo_aints(n, "strides", s) < 0)
      for (int i = 0; i < nd; i++) s[i] = 1;
    if (fzo_aints(n, "dilations", d) < 0)
      for (int i = 0; i < nd; i++) d[i] = 1;
    int np = fzo_aints(n, "pads", pads);
    for (int i = 0; i < nd; i++) {
      if (k[i] < 1 || s[i] < 1 || d[i] < 1) return "kernel, stride or dilation < 1";
      pb[i] = np == 2 * nd ? pads[i] : 0;
      pe[i] = np == 2 * nd ? pads[nd + i] : 0;
      // the spec: pads must be smaller than the kernel (ORT rejects the others)
      if (pb[i] >= k[i] || pe[i] >= k[i] || pb[i] < 0 || pe[i] < 0) return "pads not in [0, kernel)";
    }
  }
  const char *ap = fzo_as(n, "auto_pad", "NOTSET");
  int ceil_mode = (int)fzo_ai(n, "ceil_mode", 0), cip = (int)fzo_ai(n, "count_include_pad", 0);
  double p = (double)fzo_ai(n, "p", 2);
  od[0] = X->dims[0];
  od[1] = X->dims[1];
  for (int i = 0; i < nd; i++)
    od[2 + i] = global ? 1 : fzo_pool_out(ap, X->dims[2 + i], k[i], s[i], d[i], &pb[i], &pe[i], ceil_mode);
  const char *e = fzo_alloc(y, FBX_HOST_F32, X->rank, od);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(y);
  int64_t o[FBX_HOST_MAX_RANK] = {0}, in[FBX_HOST_MAX_RANK] = {0};
  for (size_t f = 0; f < N; f++) {
    fzo_unravel(f, X->rank, od, o);
    int64_t taps = 1;
    for (int i = 0; i < nd; i++) taps *= k[i];
    double acc = max ? -INFINITY : 0;
    int64_t cnt = 0, cnt_pad = 0;
    for (int64_t t = 0; t < taps; t++) {  // every tap of the window, in row-major order
      int64_t rem = t, inside = 1, in_pad = 1;
      for (int i = nd - 1; i >= 0; i--) {
        int64_t ki = rem % k[i];
        rem /= k[i];
        int64_t pos = o[2 + i] * s[i] - pb[i] + ki * d[i];
        inside &= pos >= 0 && pos < X->dims[2 + i];
        in_pad &= pos >= -pb[i] && pos < X->dims[2 + i] + pe[i];
        in[2 + i] = pos;
      }
      cnt_pad += in_pad;
      if (!inside) continue;
      in[0] = o[0];
      in[1] = o[1];
      double v = fzo_get(X, fzo_ravel(X->rank, X->dims, in));
      if (max) acc = fzo_max(acc, v);
      else if (lp) acc += pow(fabs(v), p);
      else acc += v;
      cnt++;
    }
    if (lp) acc = pow(acc, 1 / p);
    else if (!max) acc = acc / (double)(cip ? cnt_pad : cnt);  // a window with no input: 0/0
    fbx_host_tensor_set(y, f, acc);
  }
  (void)n_x;
  return NULL;
}

// ---- shapes and data movement ----

static const char *fzo_constant_of_shape(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x,
                                         fbx_host_tensor *y) {
  int64_t d[FBX_HOST_MAX_RANK] = {0};
  size_t r = fbx_host_tensor_numel(x[0]);
  if (!fzo_is_int(x[0]) || r > FBX_HOST_MAX_RANK) return "shape not int64 or too long";
  for (size_t i = 0; i < r; i++) d[i] = fzo_int(x[0], i);
  const char *e = fzo_alloc(y, FBX_HOST_F32, (int)r, d);
  if (e) return e;
  fbx_host_tensor_fill_const(y, fzo_af(n, "value", 0));
  (void)n_x;
  return NULL;
}

// y = x's data under a new shape d[r]
static const char *fzo_reshaped(const fbx_host_tensor *X, int r, const int64_t *d, fbx_host_tensor *y) {
  int64_t N = 1;
  for (int i = 0; i < r; i++) N *= d[i];
  if (N != (int64_t)fbx_host_tensor_numel(X)) return "element count changes";
  const char *e = fzo_alloc(y, X->dtype, r, d);
  if (e) return e;
  if (X->nbytes) memcpy(y->data, X->data, X->nbytes);
  return NULL;
}

static const char *fzo_reshape(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  if (n_x < 2 || !fzo_is_int(x[1]) || fbx_host_tensor_numel(x[1]) > FBX_HOST_MAX_RANK) return "shape input";
  int r = (int)fbx_host_tensor_numel(x[1]), minus = -1;
  int64_t d[FBX_HOST_MAX_RANK] = {0}, known = 1;
  for (int i = 0; i < r; i++) {
    d[i] = fzo_int(x[1], (size_t)i);
    if (d[i] == 0) {  // allowzero = 0: copy the input's dim
      if (i >= X->rank) return "0 past the input's rank";
      d[i] = X->dims[i];
    }
    if (d[i] == -1) {
      if (minus >= 0) return "two -1 entries";
      minus = i;
    } else if (d[i] < 0 || d[i] > (1 << 20)) {
      return "negative or huge dim";
    } else {
      known *= d[i];
    }
  }
  if (minus >= 0) {
    int64_t N = (int64_t)fbx_host_tensor_numel(X);
    if (known == 0 || N % known) return "-1 not inferable";
    d[minus] = N / known;
  }
  (void)n;
  return fzo_reshaped(X, r, d, y);
}

static const char *fzo_flatten(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  int64_t a = fzo_ai(n, "axis", 1), d[2] = {1, 1};
  if (a < 0) a += X->rank;
  if (a < 0 || a > X->rank) return "axis out of range";
  for (int i = 0; i < X->rank; i++) d[i < a ? 0 : 1] *= X->dims[i];
  (void)n_x;
  return fzo_reshaped(X, 2, d, y);
}

static const char *fzo_unsqueeze(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  if (n_x < 2 || !fzo_is_int(x[1])) return "axes input";
  int na = (int)fbx_host_tensor_numel(x[1]), r = X->rank + na, is1[FBX_HOST_MAX_RANK] = {0};
  if (r > FBX_HOST_MAX_RANK) return "rank too large";
  for (int i = 0; i < na; i++) {
    int a = fzo_axis(fzo_int(x[1], (size_t)i), r);
    if (a < 0 || is1[a]++) return "axis out of range or repeated";
  }
  int64_t d[FBX_HOST_MAX_RANK] = {0};
  for (int i = 0, j = 0; i < r; i++) d[i] = is1[i] ? 1 : X->dims[j++];
  (void)n;
  return fzo_reshaped(X, r, d, y);
}

static const char *fzo_transpose(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  int r = X->rank;
  int64_t perm[8], od[FBX_HOST_MAX_RANK] = {0}, o[FBX_HOST_MAX_RANK] = {0}, in[FBX_HOST_MAX_RANK] = {0};
  if (fzo_aints(n, "perm", perm) < 0)
    for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
  for (int i = 0; i < r; i++) {
    if (perm[i] < 0 || perm[i] >= r) return "perm out of range";
    od[i] = X->dims[perm[i]];
  }
  const char *e = fzo_alloc(y, X->dtype, r, od);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(y);
  for (size_t f = 0; f < N; f++) {
    fzo_unravel(f, r, od, o);
    for (int i = 0; i < r; i++) in[perm[i]] = o[i];
    fbx_host_tensor_set(y, f, fzo_get(X, fzo_ravel(r, X->dims, in)));
  }
  (void)n_x;
  return NULL;
}

static const char *fzo_concat(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  int r = x[0]->rank, a = fzo_axis(fzo_ai(n, "axis", 0), r);
  if (a < 0) return "axis out of range";
  int64_t od[FBX_HOST_MAX_RANK] = {0}, o[FBX_HOST_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) od[i] = x[0]->dims[i];
  for (int j = 1; j < n_x; j++) {
    if (x[j]->rank != r) return "ranks differ";
    for (int i = 0; i < r; i++)
      if (i != a && x[j]->dims[i] != od[i]) return "dims differ";
    od[a] += x[j]->dims[a];
  }
  const char *e = fzo_alloc(y, FBX_HOST_F32, r, od);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(y);
  for (size_t f = 0; f < N; f++) {
    fzo_unravel(f, r, od, o);
    int j = 0;
    while (o[a] >= x[j]->dims[a]) o[a] -= x[j++]->dims[a];
    fbx_host_tensor_set(y, f, fzo_get(x[j], fzo_ravel(r, x[j]->dims, o)));
  }
  return NULL;
}

// Gather(x, indices) along axis: negative indices count from the end; out of range declines.
static const char *fzo_gather(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0], *I = x[1];
  int r = X->rank, a = fzo_axis(fzo_ai(n, "axis", 0), r);
  if (a < 0 || !fzo_is_int(I) || r - 1 + I->rank > FBX_HOST_MAX_RANK) return "axis or indices";
  int64_t od[FBX_HOST_MAX_RANK] = {0}, o[FBX_HOST_MAX_RANK] = {0}, in[FBX_HOST_MAX_RANK] = {0}, ii[FBX_HOST_MAX_RANK] = {0};
  int orank = 0;
  for (int i = 0; i < a; i++) od[orank++] = X->dims[i];
  for (int i = 0; i < I->rank; i++) od[orank++] = I->dims[i];
  for (int i = a + 1; i < r; i++) od[orank++] = X->dims[i];
  size_t NI = fbx_host_tensor_numel(I);
  for (size_t i = 0; i < NI; i++) {
    int64_t v = fzo_int(I, i);
    if (v < -X->dims[a] || v >= X->dims[a]) return "index out of range";
  }
  const char *e = fzo_alloc(y, FBX_HOST_F32, orank, od);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(y);
  for (size_t f = 0; f < N; f++) {
    fzo_unravel(f, orank, od, o);
    for (int i = 0; i < a; i++) in[i] = o[i];
    for (int i = 0; i < I->rank; i++) ii[i] = o[a + i];
    int64_t v = fzo_int(I, fzo_ravel(I->rank, I->dims, ii));
    in[a] = v < 0 ? v + X->dims[a] : v;
    for (int i = a + 1; i < r; i++) in[i] = o[i - 1 + I->rank];
    fbx_host_tensor_set(y, f, fzo_get(X, fzo_ravel(r, X->dims, in)));
  }
  (void)n_x;
  return NULL;
}

// Expand(x, shape): numpy broadcasting of x and shape; Tile(x, repeats).
static const char *fzo_expand_tile(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  if (n_x < 2 || !fzo_is_int(x[1]) || fbx_host_tensor_numel(x[1]) > FBX_HOST_MAX_RANK) return "shape input";
  int k = (int)fbx_host_tensor_numel(x[1]), tile = !strcmp(n->op, "Tile"), r;
  int64_t s[FBX_HOST_MAX_RANK] = {0}, od[FBX_HOST_MAX_RANK] = {0}, o[FBX_HOST_MAX_RANK] = {0};
  for (int i = 0; i < k; i++) {
    s[i] = fzo_int(x[1], (size_t)i);
    if (s[i] < 0 || s[i] > 64) return "negative or huge shape entry";
  }
  if (tile) {
    if (k != X->rank) return "repeats of the wrong length";
    r = k;
    for (int i = 0; i < r; i++) od[i] = X->dims[i] * s[i];
  } else {
    r = od_ref_bcast_shape(X->rank, X->dims, k, s, od);
    if (r < 0) return "shape does not broadcast";
  }
  const char *e = fzo_alloc(y, FBX_HOST_F32, r, od);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(y);
  for (size_t f = 0; f < N; f++) {
    size_t src;
    if (tile) {
      fzo_unravel(f, r, od, o);
      for (int i = 0; i < r; i++) o[i] %= X->dims[i];
      src = fzo_ravel(r, X->dims, o);
    } else {
      src = od_ref_bcast_offset(X->rank, X->dims, r, od, f);
    }
    fbx_host_tensor_set(y, f, fzo_get(X, src));
  }
  return NULL;
}

// ---- reductions (axes attribute, or ReduceSum's axes input), Softmax / LogSoftmax ----

static const char *fzo_reduce(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  int r = X->rank, red[FBX_HOST_MAX_RANK] = {0}, na;
  int64_t axes[8];
  if (n_x > 1 && x[1]) {
    if (!fzo_is_int(x[1]) || fbx_host_tensor_numel(x[1]) > 8) return "axes input";
    na = (int)fbx_host_tensor_numel(x[1]);
    for (int i = 0; i < na; i++) axes[i] = fzo_int(x[1], (size_t)i);
  } else {
    na = fzo_aints(n, "axes", axes);
  }
  int keep = (int)fzo_ai(n, "keepdims", 1);
  for (int i = 0; i < na; i++) {
    int a = fzo_axis(axes[i], r);
    if (a < 0) return "axis out of range";
    red[a] = 1;
  }
  if (na <= 0)  // noop_with_empty_axes = 0: every axis
    for (int i = 0; i < r; i++) red[i] = 1;
  int64_t od[FBX_HOST_MAX_RANK] = {0}, kd[FBX_HOST_MAX_RANK] = {0}, o[FBX_HOST_MAX_RANK] = {0};
  int orank = 0;
  for (int i = 0; i < r; i++) {
    kd[i] = red[i] ? 1 : X->dims[i];
    if (!red[i] || keep) od[orank++] = kd[i];
  }
  const char *e = fzo_alloc(y, FBX_HOST_F32, orank, od);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(y), NX = fbx_host_tensor_numel(X);
  const char *op = n->op + 6;  // past "Reduce"
  for (size_t f = 0; f < N; f++) {
    double acc = 0, m = -INFINITY;
    size_t cnt = 0;
    if (!strcmp(op, "Prod")) acc = 1;
    if (!strcmp(op, "Max")) acc = -INFINITY;
    if (!strcmp(op, "Min")) acc = INFINITY;
    if (!strcmp(op, "LogSumExp"))  // max first, for a sum that does not overflow
      for (size_t i = 0; i < NX; i++) {
        fzo_unravel(i, r, X->dims, o);
        for (int k = 0; k < r; k++)
          if (red[k]) o[k] = 0;
        if (fzo_ravel(r, kd, o) == f) m = fzo_max(m, fzo_get(X, i));
      }
    for (size_t i = 0; i < NX; i++) {  // every input element that reduces into output f
      fzo_unravel(i, r, X->dims, o);
      for (int k = 0; k < r; k++)
        if (red[k]) o[k] = 0;
      if (fzo_ravel(r, kd, o) != f) continue;
      double v = fzo_get(X, i);
      cnt++;
      if (!strcmp(op, "Sum") || !strcmp(op, "Mean") || !strcmp(op, "LogSum")) acc += v;
      else if (!strcmp(op, "Max")) acc = fzo_max(acc, v);
      else if (!strcmp(op, "Min")) acc = fzo_min(acc, v);
      else if (!strcmp(op, "L1")) acc += fabs(v);
      else if (!strcmp(op, "L2") || !strcmp(op, "SumSquare")) acc += v * v;
      else if (!strcmp(op, "Prod")) acc *= v;
      else if (!strcmp(op, "LogSumExp")) acc += isinf(m) ? (v == m ? 1 : 0) : exp(v - m);
      else return "reduction not implemented";
    }
    if (!strcmp(op, "Mean")) acc /= (double)cnt;
    else if (!strcmp(op, "L2")) acc = sqrt(acc);
    else if (!strcmp(op, "LogSum")) acc = log(acc);
    else if (!strcmp(op, "LogSumExp")) acc = isnan(m) ? NAN : (isinf(m) ? m : m + log(acc));
    fbx_host_tensor_set(y, f, acc);
  }
  return NULL;
}

static const char *fzo_softmax(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  int r = X->rank, a = fzo_axis(fzo_ai(n, "axis", -1), r), logsm = !strcmp(n->op, "LogSoftmax");
  if (a < 0) return "axis out of range";
  const char *e = fzo_alloc(y, FBX_HOST_F32, r, X->dims);
  if (e) return e;
  int64_t A = X->dims[a], inner = 1, outer = 1;
  for (int i = 0; i < a; i++) outer *= X->dims[i];
  for (int i = a + 1; i < r; i++) inner *= X->dims[i];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double m = -INFINITY, sum = 0;
      for (int64_t t = 0; t < A; t++) m = fzo_max(m, fzo_get(X, (size_t)((o * A + t) * inner + i)));
      for (int64_t t = 0; t < A; t++) sum += exp(fzo_get(X, (size_t)((o * A + t) * inner + i)) - m);
      for (int64_t t = 0; t < A; t++) {
        size_t k = (size_t)((o * A + t) * inner + i);
        double d = fzo_get(X, k) - m;  // inf - inf: NaN, as x - max(x) is in numpy
        double p = exp(d) / sum;
        // README "Numerics": Softmax probabilities below FLT_MIN are flushed to +0 (no denormal
        // for the next GEMM); within any tolerance of the spec's value, but x / x downstream
        // tells 0 from 1e-39
        if (!logsm && p < 1.17549435e-38) p = 0;
        fbx_host_tensor_set(y, k, logsm ? d - log(sum) : p);
      }
    }
  (void)n_x;
  return NULL;
}

// ---- MatMul (x [..., K] by a 2-D [K, N]), Gemm, CumSum, Trilu ----

static const char *fzo_matmul(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *A = x[0], *B = x[1];
  if (A->rank < 1 || B->rank != 2 || A->dims[A->rank - 1] != B->dims[0]) return "shapes not [..., K] x [K, N]";
  int64_t K = B->dims[0], N = B->dims[1], od[FBX_HOST_MAX_RANK] = {0}, rows = 1;
  int r = A->rank;
  for (int i = 0; i < r - 1; i++) od[i] = A->dims[i], rows *= A->dims[i];
  od[r - 1] = N;
  const char *e = fzo_alloc(y, FBX_HOST_F32, r, od);
  if (e) return e;
  for (int64_t m = 0; m < rows; m++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++) acc += fzo_get(A, (size_t)(m * K + k)) * fzo_get(B, (size_t)(k * N + j));
      fbx_host_tensor_set(y, (size_t)(m * N + j), acc);
    }
  (void)n;
  (void)n_x;
  return NULL;
}

// Gemm: y = alpha * A' B' + beta * C, A' = transA ? A^T : A, C broadcast to [M, N]
static const char *fzo_gemm(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *A = x[0], *B = x[1], *C = n_x > 2 ? x[2] : NULL;
  int ta = (int)fzo_ai(n, "transA", 0), tb = (int)fzo_ai(n, "transB", 0);
  if (A->rank != 2 || B->rank != 2) return "A or B not 2-D";
  int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1];
  int64_t KB = tb ? B->dims[1] : B->dims[0], N = tb ? B->dims[0] : B->dims[1], od[2] = {M, N}, bd[2];
  if (K != KB) return "inner dims differ";
  if (C && (od_ref_bcast_shape(2, od, C->rank, C->dims, bd) != 2 || bd[0] != M || bd[1] != N))
    return "C does not broadcast to [M, N]";
  double alpha = fzo_af(n, "alpha", 1), beta = fzo_af(n, "beta", 1);
  const char *e = fzo_alloc(y, FBX_HOST_F32, 2, od);
  if (e) return e;
  for (int64_t m = 0; m < M; m++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += fzo_get(A, (size_t)(ta ? k * A->dims[1] + m : m * K + k)) *
               fzo_get(B, (size_t)(tb ? j * B->dims[1] + k : k * N + j));
      double c = C ? fzo_get(C, od_ref_bcast_offset(C->rank, C->dims, 2, od, (size_t)(m * N + j))) : 0;
      fbx_host_tensor_set(y, (size_t)(m * N + j), alpha * acc + (C ? beta * c : 0));
    }
  return NULL;
}

static const char *fzo_cumsum(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  if (n_x < 2 || !fzo_is_int(x[1]) || fbx_host_tensor_numel(x[1]) != 1) return "axis not one integer";
  int r = X->rank, a = fzo_axis(fzo_int(x[1], 0), r), ex = (int)fzo_ai(n, "exclusive", 0);
  int rev = (int)fzo_ai(n, "reverse", 0);
  if (a < 0) return "axis out of range";
  const char *e = fzo_alloc(y, FBX_HOST_F32, r, X->dims);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(X);
  int64_t o[FBX_HOST_MAX_RANK] = {0}, t[FBX_HOST_MAX_RANK] = {0};
  for (size_t f = 0; f < N; f++) {  // y[o] = sum of x[t] with t == o but along a, t_a before o_a
    fzo_unravel(f, r, X->dims, o);
    double acc = 0;
    for (int64_t i = 0; i < X->dims[a]; i++) {
      int take = rev ? (ex ? i > o[a] : i >= o[a]) : (ex ? i < o[a] : i <= o[a]);
      if (!take) continue;
      memcpy(t, o, sizeof t);
      t[a] = i;
      acc += fzo_get(X, fzo_ravel(r, X->dims, t));
    }
    fbx_host_tensor_set(y, f, acc);
  }
  return NULL;
}

// Trilu: upper keeps j - i >= k, lower keeps j - i <= k, over the last two dims
static const char *fzo_trilu(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  if (X->rank < 2) return "rank < 2";
  int64_t k = 0;
  if (n_x > 1 && x[1]) {
    if (!fzo_is_int(x[1]) || fbx_host_tensor_numel(x[1]) != 1) return "k not one integer";
    k = fzo_int(x[1], 0);
  }
  int upper = (int)fzo_ai(n, "upper", 1);
  const char *e = fzo_alloc(y, FBX_HOST_F32, X->rank, X->dims);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(X);
  int64_t o[FBX_HOST_MAX_RANK] = {0};
  for (size_t f = 0; f < N; f++) {
    fzo_unravel(f, X->rank, X->dims, o);
    __int128 d = (__int128)o[X->rank - 1] - o[X->rank - 2];
    int keep = upper ? d >= k : d <= k;
    fbx_host_tensor_set(y, f, keep ? fzo_get(X, f) : 0);
  }
  return NULL;
}

// ---- BatchNormalization (inference), InstanceNormalization, LayerNormalization ----

static const char *fzo_norm(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  double eps = fzo_af(n, "epsilon", 1e-5);
  int r = X->rank, layer = n->op[0] == 'L', batch = n->op[0] == 'B';
  int a = layer ? fzo_axis(fzo_ai(n, "axis", -1), r) : 2;
  if (a < 0 || r < (layer ? 1 : 2) || n_x < (batch ? 5 : 3)) return "axis, rank or inputs";
  int64_t outer = 1, inner = 1, C = layer ? 1 : X->dims[1];
  for (int i = 0; i < a; i++) outer *= X->dims[i];
  for (int i = a; i < r; i++) inner *= X->dims[i];
  if (batch) inner = 1;
  for (int i = 1; i < n_x; i++) {  // per-channel parameters of length C; LayerNorm's: x.shape[axis:]
    size_t want = layer ? (size_t)inner : (size_t)C;
    if (!x[i] || fbx_host_tensor_numel(x[i]) != want) return "a parameter of the wrong length";
  }
  const char *e = fzo_alloc(y, FBX_HOST_F32, r, X->dims);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(X);
  if (batch) {  // y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + B[c]
    int64_t sp = 1;
    for (int i = 2; i < r; i++) sp *= X->dims[i];
    for (size_t f = 0; f < N; f++) {
      size_t c = (size_t)((int64_t)f / sp % C);
      fbx_host_tensor_set(y, f, (fzo_get(X, f) - fzo_get(x[3], c)) / sqrt(fzo_get(x[4], c) + eps) * fzo_get(x[1], c) +
                                    fzo_get(x[2], c));
    }
    return NULL;
  }
  // Instance: per (n, c) over the spatial dims; Layer: per outer row over x.shape[axis:];
  // mean and population variance, then (x - mean) / sqrt(var + eps) * scale + B
  for (int64_t o = 0; o < outer; o++) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < inner; i++) m += fzo_get(X, (size_t)(o * inner + i));
    m /= (double)inner;
    for (int64_t i = 0; i < inner; i++) {
      double d = fzo_get(X, (size_t)(o * inner + i)) - m;
      v += d * d;
    }
    v /= (double)inner;
    for (int64_t i = 0; i < inner; i++) {
      size_t p = layer ? (size_t)i : (size_t)(o % C), f = (size_t)(o * inner + i);
      fbx_host_tensor_set(y, f, (fzo_get(X, f) - m) / sqrt(v + eps) * fzo_get(x[1], p) + fzo_get(x[2], p));
    }
  }
  return NULL;
}

// ---- ArgMax / ArgMin / Hardmax / TopK: NaN is the extreme value (np.argmax, np.sort) ----

// 1 when v beats the best so far b for ArgMax (max = 1) or ArgMin: a NaN beats every number;
// ties keep the first (or, last = 1, the last) index
static int fzo_beats(double v, double b, int max, int last) {
  if (isnan(b)) return last && isnan(v);
  if (isnan(v)) return 1;
  return max ? (v > b || (last && v == b)) : (v < b || (last && v == b));
}

// the index along axis a of row (o, i) that ArgMax/ArgMin pick
static int64_t fzo_arg(const fbx_host_tensor *X, int64_t A, int64_t inner, int64_t o, int64_t i, int max, int last) {
  int64_t best = 0;
  for (int64_t t = 1; t < A; t++)
    if (fzo_beats(fzo_get(X, (size_t)((o * A + t) * inner + i)), fzo_get(X, (size_t)((o * A + best) * inner + i)),
                  max, last))
      best = t;
  return best;
}

static const char *fzo_argmax(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  int r = X->rank, a = fzo_axis(fzo_ai(n, "axis", 0), r), keep = (int)fzo_ai(n, "keepdims", 1);
  int last = (int)fzo_ai(n, "select_last_index", 0), hard = !strcmp(n->op, "Hardmax");
  if (hard) a = fzo_axis(fzo_ai(n, "axis", -1), r);
  if (a < 0 || X->dims[a] == 0) return "axis out of range or empty";
  int64_t od[FBX_HOST_MAX_RANK] = {0}, A = X->dims[a], outer = 1, inner = 1;
  int orank = 0;
  for (int i = 0; i < r; i++) {
    if (i < a) outer *= X->dims[i];
    if (i > a) inner *= X->dims[i];
    if (hard || i != a) od[orank++] = X->dims[i];
    else if (keep) od[orank++] = 1;
  }
  const char *e = fzo_alloc(y, hard ? FBX_HOST_F32 : FBX_HOST_I64, orank, od);
  if (e) return e;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t b = fzo_arg(X, A, inner, o, i, strcmp(n->op, "ArgMin") != 0, hard ? 0 : last);
      if (hard) fbx_host_tensor_set(y, (size_t)((o * A + b) * inner + i), 1);  // zeros elsewhere
      else ((int64_t *)y->data)[o * inner + i] = b;
    }
  (void)n_x;
  return NULL;
}

// TopK(x, k): values and indices of the k largest (largest = 1) or smallest along axis, sorted;
// NaN ranks above +inf; equal values (NaNs too) by lower index first (the spec)
static const char *fzo_topk(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  const fbx_host_tensor *X = x[0];
  if (n_x < 2 || !fzo_is_int(x[1]) || fbx_host_tensor_numel(x[1]) != 1 || n->n_out != 2) return "k or outputs";
  int r = X->rank, a = fzo_axis(fzo_ai(n, "axis", -1), r), largest = (int)fzo_ai(n, "largest", 1);
  if (a < 0) return "axis out of range";
  int64_t K = fzo_int(x[1], 0), A = X->dims[a], od[FBX_HOST_MAX_RANK] = {0}, outer = 1, inner = 1;
  if (K < 0 || K > A || A > 4096) return "k out of range";
  for (int i = 0; i < r; i++) {
    od[i] = i == a ? K : X->dims[i];
    if (i < a) outer *= X->dims[i];
    if (i > a) inner *= X->dims[i];
  }
  const char *e = fzo_alloc(&y[0], FBX_HOST_F32, r, od);
  if (!e) e = fzo_alloc(&y[1], FBX_HOST_I64, r, od);
  if (e) return e;
  char taken[4096];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      memset(taken, 0, (size_t)A);
      for (int64_t k = 0; k < K; k++) {  // selection: the best not yet taken, k times
        int64_t best = -1;
        for (int64_t t = 0; t < A; t++) {
          if (taken[t]) continue;
          if (best < 0) { best = t; continue; }
          double v = fzo_get(X, (size_t)((o * A + t) * inner + i)), b = fzo_get(X, (size_t)((o * A + best) * inner + i));
          // v ranks before b: strictly better in the order NaN > +inf > ... (lower index wins ties)
          int better = largest ? (isnan(v) ? !isnan(b) : (!isnan(b) && v > b)) : (isnan(b) ? !isnan(v) : (!isnan(v) && v < b));
          if (better) best = t;
        }
        taken[best] = 1;
        size_t at = (size_t)((o * K + k) * inner + i);
        fbx_host_tensor_set(&y[0], at, fzo_get(X, (size_t)((o * A + best) * inner + i)));
        ((int64_t *)y[1].data)[at] = best;
      }
    }
  return NULL;
}

// Cast to float16 / float / double / bool / int32 / int64 and back (fbx_host_tensor_set rounds
// to float16 to nearest even; bool is x != 0, NaN true); to an integer: truncation, declined
// for NaN or a value out of range (undefined by the spec)
static const char *fzo_cast(const fz_rnode *n, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y) {
  int to = (int)fzo_ai(n, "to", FBX_HOST_F32);
  if (to != FBX_HOST_F32 && to != FBX_HOST_F64 && to != FBX_HOST_F16 && to != FBX_HOST_BOOL && to != FBX_HOST_I32 &&
      to != FBX_HOST_I64)
    return "cast target not implemented";
  const char *e = fzo_alloc(y, to, x[0]->rank, x[0]->dims);
  if (e) return e;
  size_t N = fbx_host_tensor_numel(x[0]);
  for (size_t i = 0; i < N; i++) {
    double v = fzo_get(x[0], i);
    if (to == FBX_HOST_I32 || to == FBX_HOST_I64) {
      if (!(fabs(v) < 2147483647.0)) return "NaN or out-of-range value cast to an integer";
      v = trunc(v);
    }
    fbx_host_tensor_set(y, i, v);
  }
  (void)n_x;
  return NULL;
}

static const struct {
  const char *op;
  fz_ref_fn fn;
} fzo_table[] = {
    {"Relu", fzo_unary},        {"Sigmoid", fzo_unary},     {"Tanh", fzo_unary},
    {"Abs", fzo_unary},         {"Neg", fzo_unary},         {"Erf", fzo_unary},
    {"Softplus", fzo_unary},    {"Softsign", fzo_unary},    {"HardSwish", fzo_unary},
    {"Sin", fzo_unary},         {"Cos", fzo_unary},         {"Atan", fzo_unary},
    {"Identity", fzo_unary},    {"HardSigmoid", fzo_unary}, {"Elu", fzo_unary},
    {"Celu", fzo_unary},        {"LeakyRelu", fzo_unary},   {"Selu", fzo_unary},
    {"Exp", fzo_unary},         {"Log", fzo_unary},         {"Sqrt", fzo_unary},
    {"Reciprocal", fzo_unary},  {"Acos", fzo_unary},        {"Asin", fzo_unary},
    {"Atanh", fzo_unary},       {"Acosh", fzo_unary},       {"Tan", fzo_unary},
    {"Add", fzo_binary},        {"Sub", fzo_binary},        {"Mul", fzo_binary},
    {"Div", fzo_binary},        {"Pow", fzo_binary},        {"Max", fzo_binary},
    {"Min", fzo_binary},        {"PRelu", fzo_binary},      {"Clip", fzo_clip},
    {"Slice", fzo_slice},       {"Pad", fzo_pad},           {"MaxPool", fzo_pool},
    {"AveragePool", fzo_pool},  {"LpPool", fzo_pool},       {"GlobalAveragePool", fzo_pool},
    {"GlobalMaxPool", fzo_pool}, {"ConstantOfShape", fzo_constant_of_shape},
    {"Reshape", fzo_reshape},   {"Flatten", fzo_flatten},   {"Unsqueeze", fzo_unsqueeze},
    {"Transpose", fzo_transpose}, {"Concat", fzo_concat},   {"Gather", fzo_gather},
    {"Expand", fzo_expand_tile}, {"Tile", fzo_expand_tile}, {"ReduceSum", fzo_reduce},
    {"ReduceMean", fzo_reduce}, {"ReduceMax", fzo_reduce},  {"ReduceMin", fzo_reduce},
    {"ReduceL1", fzo_reduce},   {"ReduceL2", fzo_reduce},   {"ReduceLogSumExp", fzo_reduce},
    {"ReduceSumSquare", fzo_reduce}, {"ReduceProd", fzo_reduce}, {"ReduceLogSum", fzo_reduce},
    {"Softmax", fzo_softmax},   {"LogSoftmax", fzo_softmax}, {"MatMul", fzo_matmul},
    {"Gemm", fzo_gemm},         {"CumSum", fzo_cumsum},     {"Trilu", fzo_trilu},
    {"BatchNormalization", fzo_norm}, {"InstanceNormalization", fzo_norm},
    {"LayerNormalization", fzo_norm}, {"ThresholdedRelu", fzo_unary}, {"Shrink", fzo_unary},
    {"Sign", fzo_unary},        {"Floor", fzo_unary},       {"Ceil", fzo_unary},
    {"Round", fzo_unary},       {"Equal", fzo_binary},      {"Less", fzo_binary},
    {"Greater", fzo_binary},    {"ArgMax", fzo_argmax},     {"ArgMin", fzo_argmax},
    {"Hardmax", fzo_argmax},    {"TopK", fzo_topk},         {"Cast", fzo_cast},
};

fz_ref_fn fz_ref_lookup(const char *op) {
  for (size_t i = 0; i < sizeof fzo_table / sizeof fzo_table[0]; i++)
    if (!strcmp(fzo_table[i].op, op)) return fzo_table[i].fn;
  return NULL;
}
