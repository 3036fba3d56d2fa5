// node_model — write a one-node ONNX model from C, in any domain (com.microsoft ops
// included), with initializers and symbolic input dims, for per-op tests that run the same
// model on ORT's CPU EP and on Fusebox. Header-only, over tests/ops/pb_writer.h.
//
//   nm_model m = nm_model_init("SkipSimplifiedLayerNormalization", "com.microsoft");
//   nm_input(&m, &x, "batch,seq,");      // graph input; "" entries of the list = static dims
//   nm_init(&m, &gamma);                 // initializer
//   nm_absent(&m);                       // an absent optional input
//   nm_output(&m, "y", FBX_HOST_F32);    nm_output(&m, "", 0);  // "" = absent optional output
//   nm_attr_f(&m, "epsilon", 1e-6f);
//   nm_write(&m, path);                  // 0 on success
// Tensors are borrowed (fbx_host_tensor, name = the value name) until nm_write returns.
#ifndef FBX_TESTS_NODE_MODEL_H
#define FBX_TESTS_NODE_MODEL_H

#include <stdio.h>
#include <string.h>

#include "common/ort_host.h"
#include "ops/pb_writer.h"

#define NM_MAX 16

typedef struct nm_attr {
  const char *name;
  int type;  // 1 float, 2 int, 3 string, 6 floats, 7 ints, 8 strings
  float f;
  int64_t i;
  const char *s;
  const float *fs;           // floats
  const int64_t *is;         // ints
  const char *const *ss;     // strings
  int n;                     // count of fs / is / ss
} nm_attr;

typedef struct nm_model {
  const char *op, *domain;
  int opset;                           // default-domain opset (com.microsoft is always 1)
  const fbx_host_tensor *in[NM_MAX];   // NULL = absent optional input
  int is_init[NM_MAX];
  const char *sym[NM_MAX];             // comma list of dim names ("" = static) for graph inputs
  int n_in;
  const char *out[NM_MAX];
  int out_dtype[NM_MAX];
  int n_out;
  nm_attr at[NM_MAX];
  int n_at;
} nm_model;

static inline nm_model nm_model_init(const char *op, const char *domain) {
  nm_model m;
  memset(&m, 0, sizeof m);
  m.op = op;
  m.domain = domain;
  m.opset = 17;
  return m;
}
static inline void nm_input(nm_model *m, const fbx_host_tensor *t, const char *sym) {
  m->sym[m->n_in] = sym;
  m->in[m->n_in++] = t;
}
static inline void nm_init(nm_model *m, const fbx_host_tensor *t) {
  m->is_init[m->n_in] = 1;
  m->in[m->n_in++] = t;
}
static inline void nm_absent(nm_model *m) { m->in[m->n_in++] = NULL; }
static inline void nm_output(nm_model *m, const char *name, int dtype) {
  m->out_dtype[m->n_out] = dtype;
  m->out[m->n_out++] = name;
}
static inline void nm_attr_f(nm_model *m, const char *n, float v) { m->at[m->n_at++] = (nm_attr){.name = n, .type = 1, .f = v}; }
static inline void nm_attr_i(nm_model *m, const char *n, int64_t v) { m->at[m->n_at++] = (nm_attr){.name = n, .type = 2, .i = v}; }
static inline void nm_attr_s(nm_model *m, const char *n, const char *v) { m->at[m->n_at++] = (nm_attr){.name = n, .type = 3, .s = v}; }
static inline void nm_attr_fs(nm_model *m, const char *n, const float *v, int cnt) {
  m->at[m->n_at++] = (nm_attr){.name = n, .type = 6, .fs = v, .n = cnt};
}
static inline void nm_attr_ss(nm_model *m, const char *n, const char *const *v, int cnt) {
  m->at[m->n_at++] = (nm_attr){.name = n, .type = 8, .ss = v, .n = cnt};
}

// Dimension k of the comma list sym ("" or NULL: none) into buf.
static inline const char *nm_sym_at(const char *sym, int k, char *buf, size_t cap) {
  buf[0] = 0;
  for (int i = 0; sym && *sym; i++) {
    const char *e = strchr(sym, ',');
    size_t len = e ? (size_t)(e - sym) : strlen(sym);
    if (i == k) {
      if (len >= cap) len = cap - 1;
      memcpy(buf, sym, len);
      buf[len] = 0;
      return buf;
    }
    if (!e) break;
    sym = e + 1;
  }
  return buf;
}

static inline int nm_write(const nm_model *m, const char *path) {
  pbw mo = {0}, g = {0}, n = {0};
  for (int i = 0; i < m->n_in; i++) pbw_str(&n, 1, m->in[i] ? m->in[i]->name : "");
  for (int i = 0; i < m->n_out; i++) pbw_str(&n, 2, m->out[i]);
  pbw_str(&n, 3, "node0");
  pbw_str(&n, 4, m->op);
  for (int i = 0; i < m->n_at; i++) {
    const nm_attr *a = &m->at[i];
    pbw at = {0};
    pbw_str(&at, 1, a->name);
    if (a->type == 1) pbw_f32(&at, 2, a->f);
    else if (a->type == 2) pbw_int(&at, 3, a->i);
    else if (a->type == 6)
      for (int k = 0; k < a->n; k++) pbw_f32(&at, 7, a->fs[k]);
    else if (a->type == 7)
      for (int k = 0; k < a->n; k++) pbw_int(&at, 8, a->is[k]);
    else if (a->type == 8)
      for (int k = 0; k < a->n; k++) pbw_str(&at, 9, a->ss[k]);
    else pbw_str(&at, 4, a->s);
    pbw_int(&at, 20, a->type == 3 ? 3 : a->type);
    pbw_sub(&n, 5, &at);
  }
  if (m->domain && *m->domain) pbw_str(&n, 7, m->domain);
  pbw_sub(&g, 1, &n);
  pbw_str(&g, 2, "node_model");
  for (int i = 0; i < m->n_in; i++) {
    const fbx_host_tensor *t = m->in[i];
    if (!t || !m->is_init[i]) continue;
    pbw tp = {0};
    for (int k = 0; k < t->rank; k++) pbw_int(&tp, 1, t->dims[k]);
    pbw_int(&tp, 2, t->dtype);
    pbw_str(&tp, 8, t->name);
    pbw_bytes(&tp, 9, t->data, t->nbytes);
    pbw_sub(&g, 5, &tp);
  }
  for (int i = 0; i < m->n_in; i++) {
    const fbx_host_tensor *t = m->in[i];
    if (!t || m->is_init[i]) continue;
    pbw vi = {0}, tp = {0}, tt = {0}, sh = {0};
    pbw_str(&vi, 1, t->name);
    pbw_int(&tt, 1, t->dtype);
    for (int k = 0; k < t->rank; k++) {
      pbw dim = {0};
      char s[64];
      if (*nm_sym_at(m->sym[i], k, s, sizeof s)) pbw_str(&dim, 2, s);
      else pbw_int(&dim, 1, t->dims[k]);
      pbw_sub(&sh, 1, &dim);
    }
    pbw_sub(&tt, 2, &sh);
    pbw_sub(&tp, 1, &tt);
    pbw_sub(&vi, 2, &tp);
    pbw_sub(&g, 11, &vi);
  }
  for (int i = 0; i < m->n_out; i++) {
    if (!*m->out[i]) continue;
    pbw vi = {0}, tp = {0}, tt = {0};
    pbw_str(&vi, 1, m->out[i]);
    pbw_int(&tt, 1, m->out_dtype[i]);
    pbw_sub(&tp, 1, &tt);
    pbw_sub(&vi, 2, &tp);
    pbw_sub(&g, 12, &vi);
  }
  pbw_int(&mo, 1, 8);
  pbw_str(&mo, 2, "fusebox-node-model");
  pbw_sub(&mo, 7, &g);
  pbw os = {0}, ms = {0};
  pbw_str(&os, 1, "");
  pbw_int(&os, 2, m->opset);
  pbw_sub(&mo, 8, &os);
  pbw_str(&ms, 1, "com.microsoft");
  pbw_int(&ms, 2, 1);
  pbw_sub(&mo, 8, &ms);
  if (mo.oom) {
    free(mo.p);
    return -1;
  }
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(mo.p, 1, mo.n, f) == mo.n;
  if (f) fclose(f);
  free(mo.p);
  return ok ? 0 : -1;
}

// Run the model at path once: ORT's CPU EP alone (fusebox 0) or with Fusebox registered
// (fusebox 1; *all_claimed, when non-NULL, says whether ORT placed every node on Fusebox).
// Outputs as fbx_host_session_run gives them. One intra-op thread, as the references are.
static inline char *nm_run(fbx_host *h, const char *path, int fusebox, const fbx_host_tensor *feeds, size_t nf,
                           fbx_host_tensor **out, size_t *n_out, int *all_claimed) {
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = fusebox;
  o.intra_threads = 1;
  o.record_assignment = fusebox && all_claimed;
  fbx_host_session *s = NULL;
  char *e = fbx_host_session_create(h, path, &o, &s);
  if (!e) e = fbx_host_session_run(s, feeds, nf, out, n_out);
  if (!e && fusebox && all_claimed) {
    fbx_host_assign *as;
    size_t na;
    e = fbx_host_session_assignment(s, &as, &na);
    if (!e) {
      *all_claimed = na > 0;
      for (size_t k = 0; k < na; k++) *all_claimed &= !strcmp(as[k].ep, FBX_HOST_EP_NAME);
      fbx_host_assign_free(as, na);
    }
  }
  if (s) fbx_host_session_destroy(s);
  return e;
}

#endif
