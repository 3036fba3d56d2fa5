// od_ref_quant.c — references for QuantizeLinear and DequantizeLinear (opset 10-19 forms:
// per-tensor, or per-axis with a 1-D scale along `axis`; 8-bit integer types).
//
//   QuantizeLinear:   y = saturate(round_half_even(x / y_scale) + y_zero_point)   (float32 x / scale)
//   DequantizeLinear: y = (x - x_zero_point) * x_scale                            (float32 product)
#include "ops/od_ref.h"

#include <math.h>

// Index into the scale / zero point of element i of x: 0 per-tensor, else its coordinate along
// axis. -1 when the scale's shape fits neither form.
static int64_t od_ref_qparam_index(const fbx_host_tensor *x, const fbx_host_tensor *scale, int64_t axis, size_t i) {
  if (fbx_host_tensor_numel(scale) == 1 && scale->rank <= 1) return 0;
  if (axis < 0) axis += x->rank;
  if (scale->rank != 1 || axis < 0 || axis >= x->rank || scale->dims[0] != x->dims[axis]) return -1;
  size_t inner = 1;
  for (int k = (int)axis + 1; k < x->rank; k++) inner *= (size_t)x->dims[k];
  return (int64_t)((i / inner) % (size_t)x->dims[axis]);
}

static int od_ref_q8_range(int dt, int64_t *lo, int64_t *hi) {
  if (dt == FBX_HOST_U8) { *lo = 0; *hi = 255; return 0; }
  if (dt == FBX_HOST_I8) { *lo = -128; *hi = 127; return 0; }
  return -1;
}

char *od_ref_quantize(const od_case *c, fbx_host_tensor *y) {
  const fbx_host_tensor *x = od_ref_in(c, 0), *s = od_ref_in(c, 1), *z = od_ref_in(c, 2);
  if (!x || !s || x->dtype != FBX_HOST_F32 || s->dtype != FBX_HOST_F32)
    return fbx_host_errf("QuantizeLinear reference: float32 x and y_scale expected");
  int ydt = z ? z->dtype : FBX_HOST_U8;  // no zero point: uint8, zero point 0
  int64_t lo, hi, axis = od_attr_int(c, "axis", 1);
  if (od_ref_q8_range(ydt, &lo, &hi)) return fbx_host_errf("QuantizeLinear reference: 8-bit output types only");
  char *e = fbx_host_tensor_alloc(y, "y0", ydt, x->rank, x->dims);
  if (e) return e;
  size_t n = fbx_host_tensor_numel(x);
  for (size_t i = 0; i < n; i++) {
    int64_t k = od_ref_qparam_index(x, s, axis, i);
    if (k < 0 || (z && fbx_host_tensor_numel(z) != fbx_host_tensor_numel(s)))
      return fbx_host_errf("QuantizeLinear reference: scale / zero point shape not per-tensor or per-axis");
    float xv = ((const float *)x->data)[i], sv = ((const float *)s->data)[k];
    float q = nearbyintf(xv / sv);  // default rounding mode: to nearest, ties to even
    if (isnan(q)) return fbx_host_errf("QuantizeLinear reference: NaN input is outside it");
    double v = (double)q + (double)(z ? od_ref_load(z, (size_t)k) : 0);
    od_ref_store(y, i, v < (double)lo ? lo : v > (double)hi ? hi : (int64_t)v);
  }
  return NULL;
}

char *od_ref_dequantize(const od_case *c, fbx_host_tensor *y) {
  const fbx_host_tensor *x = od_ref_in(c, 0), *s = od_ref_in(c, 1), *z = od_ref_in(c, 2);
  if (!x || !s || !od_ref_is_int(x->dtype) || s->dtype != FBX_HOST_F32)
    return fbx_host_errf("DequantizeLinear reference: integer x and float32 x_scale expected");
  int64_t axis = od_attr_int(c, "axis", 1);
  char *e = fbx_host_tensor_alloc(y, "y0", FBX_HOST_F32, x->rank, x->dims);
  if (e) return e;
  size_t n = fbx_host_tensor_numel(x);
  for (size_t i = 0; i < n; i++) {
    int64_t k = od_ref_qparam_index(x, s, axis, i);
    if (k < 0 || (z && fbx_host_tensor_numel(z) != fbx_host_tensor_numel(s)))
      return fbx_host_errf("DequantizeLinear reference: scale / zero point shape not per-tensor or per-axis");
    int64_t d = od_ref_load(x, i) - (z ? od_ref_load(z, (size_t)k) : 0);  // exact: |d| < 2^33
    ((float *)y->data)[i] = (float)d * ((const float *)s->data)[k];
  }
  return NULL;
}
