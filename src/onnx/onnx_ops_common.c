/* Helpers shared by the op-family files: claim-side checks (reasons) and
 * translate-side value mapping / emission. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "onnx_ops.h"

/* ======================= claim side ======================= */

bool fbx__onnx_fail(const fbx_onnx_cctx *c, const char *fmt, ...) {
  if (!c->reason || c->reason_size == 0) return false;
  int k = snprintf(c->reason, c->reason_size, "%s: ", c->n->op_type ? c->n->op_type : "?");
  if (k < 0 || (size_t)k >= c->reason_size) return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->reason + k, c->reason_size - (size_t)k, fmt, ap);
  va_end(ap);
  return false;
}

const fbx_onnx_value *fbx__onnx_cin(const fbx_onnx_cctx *c, int i) {
  if (i < 0 || i >= c->n->n_inputs) return NULL;
  int v = c->n->inputs[i];
  return v >= 0 && v < c->g->n_values ? &c->g->values[v] : NULL;
}

const fbx_onnx_value *fbx__onnx_cout(const fbx_onnx_cctx *c, int i) {
  if (i < 0 || i >= c->n->n_outputs) return NULL;
  int v = c->n->outputs[i];
  return v >= 0 && v < c->g->n_values ? &c->g->values[v] : NULL;
}

bool fbx__onnx_dt_ok(const fbx_onnx_cctx *c, const fbx_onnx_value *v, uint32_t mask, const char *what) {
  if (!v) return fbx__onnx_fail(c, "%s missing", what);
  if (v->dtype != FBX_DTYPE_UNDEFINED && (unsigned)v->dtype < 32 && (mask & (1u << (unsigned)v->dtype)))
    return true;
  char list[160];
  size_t k = 0;
  list[0] = 0;
#define X(name, onnx, bytes, ctype, str)                                          \
  if ((mask & FBX__DT(name)) && k < sizeof list)                                  \
    k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", str);
  FBX_DTYPE_LIST(X)
#undef X
  if (v->dtype == FBX_DTYPE_UNDEFINED)
    return fbx__onnx_fail(c, "%s dtype (onnx type %d) not supported (%s)", what, v->onnx_type, list);
  return fbx__onnx_fail(c, "%s dtype %s not supported (%s)", what, fbx_dtype_name(v->dtype), list);
}

const fbx_onnx_tensor *fbx__onnx_value_const(const fbx_onnx_graph *g, int v) {
  if (v < 0 || v >= g->n_values) return NULL;
  const fbx_onnx_value *val = &g->values[v];
  if (!val->is_initializer || !val->init || !val->init->data) return NULL;
  return val->init;
}

const fbx_onnx_tensor *fbx__onnx_cconst(const fbx_onnx_cctx *c, int i, const char *what) {
  if (i >= c->n->n_inputs || c->n->inputs[i] < 0) {
    fbx__onnx_fail(c, "%s missing", what);
    return NULL;
  }
  const fbx_onnx_tensor *t = fbx__onnx_value_const(c->g, c->n->inputs[i]);
  if (!t) fbx__onnx_fail(c, "%s must be a constant initializer", what);
  return t;
}

bool fbx__onnx_no_out(const fbx_onnx_cctx *c, int i, const char *what) {
  if (fbx__onnx_cout(c, i)) return fbx__onnx_fail(c, "optional output '%s' not supported", what);
  return true;
}

int64_t fbx__onnx_tensor_numel(const fbx_onnx_tensor *t) { /* -1: not a valid shape (base/checked.h) */
  int64_t n;
  return fbx_dims_numel(t->dims, t->rank, &n) ? n : -1;
}

static bool fbx__onnx_tensor_size_ok(const fbx_onnx_tensor *t, int64_t numel) {
  size_t es = fbx_dtype_size(t->dtype), need;
  return es && t->data && numel >= 0 && fbx_size_mul((size_t)numel, es, &need) && t->nbytes >= need;
}

bool fbx__onnx_tensor_ints(const fbx_onnx_tensor *t, int64_t *out, int max, int *n) {
  if (!t) return false;
  int64_t numel = fbx__onnx_tensor_numel(t);
  if (numel > max || !fbx__onnx_tensor_size_ok(t, numel)) return false;
  for (int64_t i = 0; i < numel; i++) {
    switch (t->dtype) {
      case FBX_DTYPE_I64: { int64_t v; memcpy(&v, (const char *)t->data + 8 * i, 8); out[i] = v; break; }
      case FBX_DTYPE_I32: { int32_t v; memcpy(&v, (const char *)t->data + 4 * i, 4); out[i] = v; break; }
      default: return false;
    }
  }
  *n = (int)numel;
  return true;
}

bool fbx__onnx_tensor_f64s(const fbx_onnx_tensor *t, double *out, int max, int *n) {
  if (!t) return false;
  int64_t numel = fbx__onnx_tensor_numel(t);
  if (numel > max || !fbx__onnx_tensor_size_ok(t, numel)) return false;
  for (int64_t i = 0; i < numel; i++) {
    const char *p = (const char *)t->data;
    switch (t->dtype) {
      case FBX_DTYPE_F32: { float v; memcpy(&v, p + 4 * i, 4); out[i] = v; break; }
      case FBX_DTYPE_F64: { double v; memcpy(&v, p + 8 * i, 8); out[i] = v; break; }
      case FBX_DTYPE_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); out[i] = fbx_f16_to_f32(v); break; }
      default: return false;
    }
  }
  *n = (int)numel;
  return true;
}

bool fbx__onnx_axis(int64_t a, int r, bool inclusive_end, int *out) {
  int hi = inclusive_end ? r : r - 1;
  if (a < -(int64_t)r || a > hi) return false;
  *out = (int)(a < 0 ? a + r : a);
  return true;
}

/* ======================= translate side ======================= */

const fbx_onnx_value *fbx__onnx_tin_value(const fbx_onnx_tctx *t, int i) {
  if (i < 0 || i >= t->n->n_inputs || t->n->inputs[i] < 0) return NULL;
  return &t->g->values[t->n->inputs[i]];
}

const fbx_onnx_value *fbx__onnx_tout_value(const fbx_onnx_tctx *t, int i) {
  if (i < 0 || i >= t->n->n_outputs || t->n->outputs[i] < 0) return NULL;
  return &t->g->values[t->n->outputs[i]];
}

fbx_status *fbx__onnx_tvalue(fbx_onnx_tctx *t, int v, int *id) {
  if (v < 0) { *id = FBX_IR_NONE; return NULL; }
  if (v >= t->g->n_values) return FBX_ERR_ARG("onnx translate: value index %d out of range", v);
  if (t->vmap[v] >= 0) { *id = t->vmap[v]; return NULL; }
  const fbx_onnx_value *val = &t->g->values[v];
  const fbx_onnx_tensor *c = fbx__onnx_value_const(t->g, v);
  if (!c) {
    return FBX_ERR_ARG("onnx translate: value '%s' is neither a graph input, an initializer with data, "
                       "nor produced by an earlier node", val->name ? val->name : "?");
  }
  if (c->dtype == FBX_DTYPE_UNDEFINED)
    return FBX_ERR_NOTIMPL("onnx translate: initializer '%s' has an unsupported dtype", val->name);
  size_t need;
  FBX_TRY(fbx_shape_bytes_checked(c->dims, c->rank, fbx_dtype_size(c->dtype), val->name, &need));
  if (c->nbytes < need)
    return FBX_ERR_ARG("onnx translate: initializer '%s' holds %zu bytes, needs %zu", val->name, c->nbytes, need);
  FBX_TRY(fbx_ir_graph_add_const(t->ir, val->name, c->dtype, c->rank, c->dims, c->data, id));
  t->vmap[v] = *id;
  return NULL;
}

fbx_status *fbx__onnx_tin(fbx_onnx_tctx *t, int i, int *id) {
  if (i < 0 || i >= t->n->n_inputs) { *id = FBX_IR_NONE; return NULL; }
  return fbx__onnx_tvalue(t, t->n->inputs[i], id);
}

fbx_status *fbx__onnx_emit(fbx_onnx_tctx *t, fbx_ir_op op, const int *ins, int n_ins,
                           const fbx_ir_params *p, fbx_dtype dt, int rank, int *out) {
  fbx_ir_params zero;
  if (!p) { memset(&zero, 0, sizeof zero); p = &zero; }
  return fbx_ir_graph_emit(t->ir, op, ins, n_ins, p, dt, rank, t->n->name ? t->n->name : "",
                           t->n->op_type, t->node_index, out);
}

void fbx__onnx_bind(fbx_onnx_tctx *t, int i, int id) {
  if (i < 0 || i >= t->n->n_outputs) return;
  int v = t->n->outputs[i];
  if (v < 0) return;
  t->vmap[v] = id;
  const char *name = t->g->values[v].name;
  if (name && id >= 0 && id < t->ir->n_values && t->ir->values[id].kind == FBX_IR_VALUE_NODE)
    t->ir->values[id].name = fbx_ir_graph_strdup(t->ir, name);
}

fbx_status *fbx__onnx_emit_out(fbx_onnx_tctx *t, fbx_ir_op op, const int *ins, int n_ins,
                               const fbx_ir_params *p) {
  const fbx_onnx_value *o = fbx__onnx_tout_value(t, 0);
  if (!o) return FBX_ERR_ARG("%s: output 0 missing", t->n->op_type);
  int id;
  FBX_TRY(fbx__onnx_emit(t, op, ins, n_ins, p, o->dtype, o->rank, &id));
  fbx__onnx_bind(t, 0, id);
  return NULL;
}

static void fbx__onnx_store(fbx_dtype dt, void *dst, int64_t i, double v) {
  switch (dt) {
#define X(name, onnx, bytes, ctype, str) \
    case FBX_DTYPE_##name: { ctype x = (ctype)v; memcpy((char *)dst + i * bytes, &x, bytes); break; }
    FBX_DTYPE_LIST(X)
#undef X
    default: break;
  }
  if (dt == FBX_DTYPE_F16) {
    uint16_t h = fbx_f32_to_f16((float)v);
    memcpy((char *)dst + 2 * i, &h, 2);
  } else if (dt == FBX_DTYPE_BOOL) {
    uint8_t b = v != 0;
    memcpy((char *)dst + i, &b, 1);
  }
}

fbx_status *fbx__onnx_const_f64s(fbx_onnx_tctx *t, fbx_dtype dt, const double *v, int rank,
                                 const int64_t *dims, int *id) {
  size_t es = fbx_dtype_size(dt), bytes;
  if (!es) return FBX_ERR_ARG("onnx translate: constant of unknown dtype");
  FBX_TRY(fbx_shape_bytes_checked(dims, rank, es, "a translated constant", &bytes));
  int64_t numel = (int64_t)(bytes / es);
  void *buf = fbx_malloc((size_t)(numel > 0 ? numel : 1) * es);
  if (!buf) return FBX_ERR_OOM();
  for (int64_t i = 0; i < numel; i++) fbx__onnx_store(dt, buf, i, v[i]);
  fbx_status *st = fbx_ir_graph_add_const(t->ir, NULL, dt, rank, dims, buf, id);
  fbx_free(buf);
  return st;
}

fbx_status *fbx__onnx_const_scalar(fbx_onnx_tctx *t, fbx_dtype dt, double v, int *id) {
  return fbx__onnx_const_f64s(t, dt, &v, 0, NULL, id);
}

fbx_status *fbx__onnx_const_i64s(fbx_onnx_tctx *t, const int64_t *v, int n, int *id) {
  int64_t dims[1] = {n};
  int64_t dummy = 0;
  return fbx_ir_graph_add_const(t->ir, NULL, FBX_DTYPE_I64, 1, dims, n ? (const void *)v : &dummy, id);
}

fbx_status *fbx__onnx_to_i64(fbx_onnx_tctx *t, int id, int *out) {
  if (id == FBX_IR_NONE || t->ir->values[id].dtype == FBX_DTYPE_I64) { *out = id; return NULL; }
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.ew.to = FBX_DTYPE_I64;
  return fbx__onnx_emit(t, FBX_IR_OP_CAST, &id, 1, &p, FBX_DTYPE_I64, t->ir->values[id].rank, out);
}
