// od_case.c — the seeded generator and the case-building helpers (see od_case.h).
#include "ops/od_case.h"

#include <stdio.h>
#include <string.h>

uint64_t od_next(od_rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}
int od_int(od_rng *r, int lo, int hi) { return lo + (int)(od_next(r) % (uint64_t)(hi - lo + 1)); }
double od_unit(od_rng *r) { return (double)(od_next(r) >> 11) / 9007199254740992.0; }

void od_case_free(od_case *c) {
  for (int i = 0; i < c->n_in; i++)
    if (c->in[i].rank >= 0) fbx_host_tensor_free(&c->in[i]);
}

const od_attr *od_attr_find(const od_case *c, const char *name) {
  for (int i = 0; i < c->n_at; i++)
    if (!strcmp(c->at[i].name, name)) return &c->at[i];
  return NULL;
}

int64_t od_attr_int(const od_case *c, const char *name, int64_t def) {
  const od_attr *a = od_attr_find(c, name);
  return a && a->type == OD_ATTR_INT ? a->i : def;
}

int od_attr_ints(const od_case *c, const char *name, int64_t *out, int cap) {
  const od_attr *a = od_attr_find(c, name);
  if (!a || a->type != OD_ATTR_INTS) return -1;
  int n = a->n_ints < cap ? a->n_ints : cap;
  memcpy(out, a->ints, sizeof(int64_t) * (size_t)n);
  return a->n_ints;
}

// ---------------------------------------------------------------------------------------
// Building cases
// ---------------------------------------------------------------------------------------

void od_shape(od_rng *r, int rank, int64_t *d, int lo, int hi) {
  for (int i = 0; i < rank; i++) d[i] = od_int(r, lo, hi);
}

fbx_host_tensor *od_in(od_case *c, od_rng *r, int dtype, int rank, const int64_t *dims, int init) {
  int i = c->n_in++;
  char name[16];
  snprintf(name, sizeof name, "x%d", i);
  fbx_host_tensor *t = &c->in[i];
  char *e = fbx_host_tensor_alloc(t, name, dtype, rank, dims);
  if (e) { fbx_host_err_free(e); return t; }
  uint64_t seed = od_next(r);
  if (dtype == FBX_HOST_F32 || dtype == FBX_HOST_F64 || dtype == FBX_HOST_F16) fbx_host_tensor_fill_normal(t, seed);
  else if (dtype == FBX_HOST_BOOL) fbx_host_tensor_fill_int(t, seed, 0, 1);
  else if (dtype == FBX_HOST_U8) fbx_host_tensor_fill_int(t, seed, 0, 255);
  else fbx_host_tensor_fill_int(t, seed, -20, 20);
  c->is_init[i] = init;
  return t;
}

void od_fill_q8(fbx_host_tensor *t, od_rng *r) {
  int u = t->dtype == FBX_HOST_U8;
  fbx_host_tensor_fill_int(t, od_next(r), u ? 0 : -128, u ? 255 : 127);
}

fbx_host_tensor *od_i64s(od_case *c, const int64_t *v, int n, int init) {
  int64_t d = n;
  int i = c->n_in++;
  char name[16];
  snprintf(name, sizeof name, "x%d", i);
  char *e = fbx_host_tensor_alloc(&c->in[i], name, FBX_HOST_I64, 1, &d);
  if (e) { fbx_host_err_free(e); return &c->in[i]; }
  if (n) memcpy(c->in[i].data, v, sizeof(int64_t) * (size_t)n);
  c->is_init[i] = init;
  return &c->in[i];
}

void od_ai(od_case *c, const char *n, int64_t v) { c->at[c->n_at++] = (od_attr){.name = n, .type = OD_ATTR_INT, .i = v}; }
void od_af(od_case *c, const char *n, float v) { c->at[c->n_at++] = (od_attr){.name = n, .type = OD_ATTR_FLOAT, .f = v}; }
void od_as(od_case *c, const char *n, const char *v) { c->at[c->n_at++] = (od_attr){.name = n, .type = OD_ATTR_STRING, .s = v}; }
void od_aints(od_case *c, const char *n, const int64_t *v, int k) {
  od_attr a = {.name = n, .type = OD_ATTR_INTS, .n_ints = k};
  memcpy(a.ints, v, sizeof(int64_t) * (size_t)k);
  c->at[c->n_at++] = a;
}

int od_float_dtype(od_rng *r) {
  int k = od_int(r, 0, 9);
  return k < 7 ? FBX_HOST_F32 : k < 9 ? FBX_HOST_F64 : FBX_HOST_F16;
}

int od_any_dtype(od_rng *r) {
  static const int dts[] = {FBX_HOST_F32, FBX_HOST_F32, FBX_HOST_I64, FBX_HOST_I32, FBX_HOST_U8,
                            FBX_HOST_BOOL, FBX_HOST_F16, FBX_HOST_F64, FBX_HOST_I8};
  return dts[od_int(r, 0, (int)(sizeof dts / sizeof *dts) - 1)];
}

// float16 for a quarter of the cases of ops Fusebox runs in float32 (CAST f16->f32 -> op -> CAST).
int od_f16_or(od_rng *r, int dt) { return od_int(r, 0, 3) == 0 ? FBX_HOST_F16 : dt; }

void od_tol(od_case *c, int dtype) {
  if (dtype == FBX_HOST_F16) { c->rtol = 1e-2; c->atol = 2e-3; }
  else if (dtype == FBX_HOST_F64) { c->rtol = 1e-9; c->atol = 1e-12; }
  else { c->rtol = 1e-4; c->atol = 1e-5; }
}

int od_bcast(od_rng *r, int ra, const int64_t *a, int64_t *b) {
  int rb = od_int(r, 0, 2) == 0 ? od_int(r, 0, ra) : ra;
  for (int i = 0; i < rb; i++) b[i] = od_int(r, 0, 3) == 0 ? 1 : a[ra - rb + i];
  return rb;
}

// ---------------------------------------------------------------------------------------
// Description (one line per case, printed on failure and with -v)
// ---------------------------------------------------------------------------------------

void od_describe(od_case *c) {
  size_t k = (size_t)snprintf(c->desc, sizeof c->desc, "%s(opset %d)", c->op, c->opset);
  for (int i = 0; i < c->n_in && k < sizeof c->desc; i++) {
    char s[64];
    if (c->in[i].rank < 0) { k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " -"); continue; }
    k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " %s%s[%s]", c->is_init[i] ? "c:" : "",
                          fbx_host_dtype_name(c->in[i].dtype), fbx_host_shape_str(c->in[i].rank, c->in[i].dims, s, sizeof s));
    if (c->in[i].dtype == FBX_HOST_I64 && c->in[i].rank == 1 && c->in[i].dims[0] <= 8)  // small index data
      for (int64_t j = 0; j < c->in[i].dims[0] && k < sizeof c->desc; j++)
        k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, "%s%lld", j ? "," : "=",
                              (long long)((int64_t *)c->in[i].data)[j]);
  }
  for (int i = 0; i < c->n_at && k < sizeof c->desc; i++) {
    const od_attr *a = &c->at[i];
    if (a->type == OD_ATTR_FLOAT) k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " %s=%g", a->name, a->f);
    else if (a->type == OD_ATTR_INT) k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " %s=%lld", a->name, (long long)a->i);
    else if (a->type == OD_ATTR_STRING) k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " %s=%s", a->name, a->s);
    else {
      k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " %s=[", a->name);
      for (int j = 0; j < a->n_ints && k < sizeof c->desc; j++)
        k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, "%s%lld", j ? "," : "", (long long)a->ints[j]);
      if (k < sizeof c->desc) k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, "]");
    }
  }
}
