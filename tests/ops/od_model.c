// od_model.c — writing a case as a one-node ONNX model (see od_model.h).
#include "ops/od_model.h"

#include <stdio.h>
#include <string.h>

#include "ops/pb_writer.h"

static void od_value_info(pbw *g, int field, const char *name, const fbx_host_tensor *t) {
  pbw vi = {0}, tp = {0}, tt = {0}, sh = {0};
  pbw_str(&vi, 1, name);
  if (t) {
    pbw_int(&tt, 1, t->dtype);
    for (int i = 0; i < t->rank; i++) {
      pbw dim = {0};
      pbw_int(&dim, 1, t->dims[i]);
      pbw_sub(&sh, 1, &dim);
    }
    pbw_sub(&tt, 2, &sh);
    pbw_sub(&tp, 1, &tt);
    pbw_sub(&vi, 2, &tp);
  }
  pbw_sub(g, field, &vi);
}

int od_model_write(const od_case *c, const int *out_dtypes, const char *path) {
  pbw m = {0}, g = {0}, n = {0}, os = {0};
  for (int i = 0; i < c->n_in; i++) pbw_str(&n, 1, c->in[i].rank < 0 ? "" : c->in[i].name);
  for (int i = 0; i < c->n_out; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "y%d", i);
    pbw_str(&n, 2, nm);
  }
  pbw_str(&n, 3, "node0");
  pbw_str(&n, 4, c->op);
  for (int i = 0; i < c->n_at; i++) {
    const od_attr *a = &c->at[i];
    pbw at = {0};
    pbw_str(&at, 1, a->name);
    if (a->type == OD_ATTR_FLOAT) pbw_f32(&at, 2, a->f);
    else if (a->type == OD_ATTR_INT) pbw_int(&at, 3, a->i);
    else if (a->type == OD_ATTR_STRING) pbw_str(&at, 4, a->s);
    else for (int k = 0; k < a->n_ints; k++) pbw_int(&at, 8, a->ints[k]);
    pbw_int(&at, 20, a->type);
    pbw_sub(&n, 5, &at);
  }
  pbw_sub(&g, 1, &n);
  pbw_str(&g, 2, "ops_diff");
  for (int i = 0; i < c->n_in; i++) {
    const fbx_host_tensor *t = &c->in[i];
    if (t->rank < 0 || !c->is_init[i]) continue;
    pbw tp = {0};
    for (int k = 0; k < t->rank; k++) pbw_int(&tp, 1, t->dims[k]);
    pbw_int(&tp, 2, t->dtype);
    pbw_str(&tp, 8, t->name);
    pbw_bytes(&tp, 9, t->data, t->nbytes);
    pbw_sub(&g, 5, &tp);
  }
  for (int i = 0; i < c->n_in; i++)
    if (c->in[i].rank >= 0 && !c->is_init[i]) od_value_info(&g, 11, c->in[i].name, &c->in[i]);
  for (int i = 0; i < c->n_out; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "y%d", i);
    pbw vi = {0}, tp = {0}, tt = {0};
    pbw_str(&vi, 1, nm);
    pbw_int(&tt, 1, out_dtypes[i]);
    pbw_sub(&tp, 1, &tt);
    pbw_sub(&vi, 2, &tp);
    pbw_sub(&g, 12, &vi);
  }
  pbw_int(&m, 1, 8);
  pbw_str(&m, 2, "fusebox-ops-diff");
  pbw_sub(&m, 7, &g);
  pbw_str(&os, 1, "");
  pbw_int(&os, 2, c->opset);
  pbw_sub(&m, 8, &os);
  if (m.oom) { free(m.p); return -1; }
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(m.p, 1, m.n, f) == m.n;
  if (f) fclose(f);
  free(m.p);
  return ok ? 0 : -1;
}

void od_out_dtypes(const od_case *c, int *dt) {
  int x = c->in[0].dtype;
  for (int i = 0; i < c->n_out; i++) dt[i] = x;
  const char *o = c->op;
  if (!strcmp(o, "Equal") || !strcmp(o, "Less") || !strcmp(o, "Greater") || !strcmp(o, "LessOrEqual") ||
      !strcmp(o, "GreaterOrEqual"))
    dt[0] = FBX_HOST_BOOL;
  if (!strcmp(o, "ArgMax") || !strcmp(o, "ArgMin")) dt[0] = FBX_HOST_I64;
  if (!strcmp(o, "Where")) dt[0] = c->in[1].dtype;
  if (!strcmp(o, "QuantizeLinear")) dt[0] = c->in[2].dtype;
  if (!strcmp(o, "DequantizeLinear")) dt[0] = FBX_HOST_F32;
  if (!strcmp(o, "MatMulInteger") || !strcmp(o, "ConvInteger")) dt[0] = FBX_HOST_I32;
  if (!strcmp(o, "LayerNormalization")) dt[1] = dt[2] = FBX_HOST_F32;
  if (!strcmp(o, "DynamicQuantizeLinear")) { dt[0] = dt[2] = FBX_HOST_U8; dt[1] = FBX_HOST_F32; }
  if (!strcmp(o, "QLinearMatMul") || !strcmp(o, "QLinearConv")) dt[0] = c->in[7].dtype;
}
