// od_ref.c — which ops have an independent reference, and the helpers they share (od_ref.h).
#include "ops/od_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct od_ref_entry {
  const char *op;
  int int_inputs_only;  // 1: only when input 0 is an integer tensor (Add etc. on floats: ORT only)
  int n_out;            // outputs it computes
  od_ref_fn fn;
} od_ref_entry;

static const od_ref_entry od_refs[] = {
    {"ConvInteger", 0, 1, od_ref_convint},
    {"MatMulInteger", 0, 1, od_ref_matmulint},
    {"QLinearMatMul", 0, 1, od_ref_qlinearmatmul},
    {"QLinearConv", 0, 1, od_ref_qlinearconv},
    {"QuantizeLinear", 0, 1, od_ref_quantize},
    {"DequantizeLinear", 0, 1, od_ref_dequantize},
    {"DynamicQuantizeLinear", 0, 3, od_ref_dynquantize},
    {"Add", 1, 1, od_ref_int_binary},
    {"Sub", 1, 1, od_ref_int_binary},
    {"Mul", 1, 1, od_ref_int_binary},
    {"Div", 1, 1, od_ref_int_binary},
    {"Max", 1, 1, od_ref_int_binary},
    {"Min", 1, 1, od_ref_int_binary},
    {"Pow", 1, 1, od_ref_int_binary},
};

static const od_ref_entry *od_ref_find(const od_case *c) {
  for (size_t i = 0; i < sizeof od_refs / sizeof od_refs[0]; i++) {
    const od_ref_entry *e = &od_refs[i];
    if (strcmp(e->op, c->op)) continue;
    if (e->int_inputs_only && (c->n_in < 1 || !od_ref_is_int(c->in[0].dtype))) return NULL;
    return e;
  }
  return NULL;
}

int od_ref_has(const od_case *c) { return od_ref_find(c) != NULL; }

char *od_ref_run(const od_case *c, fbx_host_tensor **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  const od_ref_entry *e = od_ref_find(c);
  if (!e) return fbx_host_errf("no independent reference for %s", c->op);
  if (c->n_out != e->n_out)
    return fbx_host_errf("%s reference: %d outputs asked, it computes %d", c->op, c->n_out, e->n_out);
  fbx_host_tensor *y = calloc((size_t)e->n_out, sizeof *y);
  if (!y) return fbx_host_errf("out of memory");
  char *err = e->fn(c, y);
  if (err) { fbx_host_tensors_free(y, (size_t)e->n_out); return err; }
  *out = y;
  *n_out = (size_t)e->n_out;
  return NULL;
}

const fbx_host_tensor *od_ref_in(const od_case *c, int i) {
  return i < c->n_in && c->in[i].rank >= 0 ? &c->in[i] : NULL;
}

int od_ref_is_int(int dt) {
  return dt == FBX_HOST_U8 || dt == FBX_HOST_I8 || dt == FBX_HOST_U16 || dt == FBX_HOST_I16 || dt == FBX_HOST_I32 ||
         dt == FBX_HOST_I64 || dt == FBX_HOST_U32 || dt == FBX_HOST_U64;
}

int od_ref_q8_range(int dt, int64_t *lo, int64_t *hi) {
  if (dt == FBX_HOST_U8) { *lo = 0; *hi = 255; return 0; }
  if (dt == FBX_HOST_I8) { *lo = -128; *hi = 127; return 0; }
  return -1;
}

int64_t od_ref_requant(float v, int64_t zp, int64_t lo, int64_t hi) {
  if (isnan(v)) return zp < lo ? lo : zp > hi ? hi : zp;  // callers reject NaN first; no UB here either way
  double q = (double)nearbyintf(v) + (double)zp;  // default rounding mode: to nearest, ties to even
  return q < (double)lo ? lo : q > (double)hi ? hi : (int64_t)q;
}

int64_t od_ref_load(const fbx_host_tensor *t, size_t i) {
  const void *p = t->data;
  switch (t->dtype) {
    case FBX_HOST_U8: return ((const uint8_t *)p)[i];
    case FBX_HOST_I8: return ((const int8_t *)p)[i];
    case FBX_HOST_U16: return ((const uint16_t *)p)[i];
    case FBX_HOST_I16: return ((const int16_t *)p)[i];
    case FBX_HOST_I32: return ((const int32_t *)p)[i];
    case FBX_HOST_I64: return ((const int64_t *)p)[i];
    case FBX_HOST_U32: return ((const uint32_t *)p)[i];
    case FBX_HOST_U64: return (int64_t)((const uint64_t *)p)[i];
    default: return 0;
  }
}

void od_ref_store(fbx_host_tensor *t, size_t i, int64_t v) {
  void *p = t->data;
  uint64_t u = (uint64_t)v;  // two's-complement wrap, as the ONNX integer ops do
  switch (t->dtype) {
    case FBX_HOST_U8: ((uint8_t *)p)[i] = (uint8_t)u; break;
    case FBX_HOST_I8: ((int8_t *)p)[i] = (int8_t)(uint8_t)u; break;
    case FBX_HOST_U16: ((uint16_t *)p)[i] = (uint16_t)u; break;
    case FBX_HOST_I16: ((int16_t *)p)[i] = (int16_t)(uint16_t)u; break;
    case FBX_HOST_I32: ((int32_t *)p)[i] = (int32_t)(uint32_t)u; break;
    case FBX_HOST_I64: ((int64_t *)p)[i] = v; break;
    case FBX_HOST_U32: ((uint32_t *)p)[i] = (uint32_t)u; break;
    case FBX_HOST_U64: ((uint64_t *)p)[i] = u; break;
    default: break;
  }
}
