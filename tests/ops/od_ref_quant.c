// od_ref_quant.c — references for QuantizeLinear and DequantizeLinear (opset 10-19 forms:
// per-tensor, or per-axis with a 1-D scale along `axis`; 8-bit integer types) and
// DynamicQuantizeLinear (opset 11), all arithmetic in float32 as the spec writes it:
//
//   QuantizeLinear:   y = saturate(round_half_even(x / y_scale) + y_zero_point)
//   DequantizeLinear: y = (x - x_zero_point) * x_scale
//   DynamicQuantizeLinear: lo = min(0, min x), hi = max(0, max x), y_scale = (hi - lo) / 255,
//                     y_zero_point = round_half_even(saturate(0 - lo / y_scale)),
//                     y = saturate(round_half_even(x / y_scale) + y_zero_point)  (uint8)
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
    float q = ((const float *)x->data)[i] / ((const float *)s->data)[k];  // float32 division, as the spec
    if (isnan(q)) return fbx_host_errf("QuantizeLinear reference: NaN input is outside it");
    od_ref_store(y, i, od_ref_requant(q, z ? od_ref_load(z, (size_t)k) : 0, lo, hi));
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

char *od_ref_dynquantize(const od_case *c, fbx_host_tensor *y) {
  const fbx_host_tensor *x = od_ref_in(c, 0);
  if (!x || x->dtype != FBX_HOST_F32) return fbx_host_errf("DynamicQuantizeLinear reference: float32 x expected");
  const float *xv = x->data;
  size_t n = fbx_host_tensor_numel(x);
  float lo = 0.0f, hi = 0.0f;
  for (size_t i = 0; i < n; i++) {
    if (isnan(xv[i])) return fbx_host_errf("DynamicQuantizeLinear reference: NaN input is outside it");
    lo = xv[i] < lo ? xv[i] : lo;
    hi = xv[i] > hi ? xv[i] : hi;
  }
  if (hi == lo) return fbx_host_errf("DynamicQuantizeLinear reference: all-zero input (scale 0) is outside it");
  float scale = (hi - lo) / 255.0f;
  float zf = 0.0f - lo / scale;
  int64_t zp = (int64_t)nearbyintf(zf < 0.0f ? 0.0f : zf > 255.0f ? 255.0f : zf);
  int64_t one[1] = {1};
  char *e = fbx_host_tensor_alloc(&y[0], "y0", FBX_HOST_U8, x->rank, x->dims);
  if (!e) e = fbx_host_tensor_alloc(&y[1], "y1", FBX_HOST_F32, 0, one);
  if (!e) e = fbx_host_tensor_alloc(&y[2], "y2", FBX_HOST_U8, 0, one);
  if (e) return e;
  for (size_t i = 0; i < n; i++) od_ref_store(&y[0], i, od_ref_requant(xv[i] / scale, zp, 0, 255));
  ((float *)y[1].data)[0] = scale;
  od_ref_store(&y[2], 0, zp);
  return NULL;
}
