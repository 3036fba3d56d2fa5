// onnx_wire.c — ONNX protobuf wire reading/rewriting for `fusebox check --all-tensors`.
#include "onnx_wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ort_host.h"

// ---------------------------------------------------------------------------------------
// Wire format: one field at a time
// ---------------------------------------------------------------------------------------

typedef struct wire_rd {
  const unsigned char *p, *end;
} wire_rd;

typedef struct wire_field {
  uint32_t num, type;         // field number, wire type (0 varint, 1 i64, 2 bytes, 5 i32)
  uint64_t v;                 // the value of a varint
  const unsigned char *data;  // wire type 2: the payload
  size_t len;
  const unsigned char *start; // first byte of the key (to copy the field verbatim)
} wire_field;

static int wire_varint(wire_rd *r, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end) return -1;
    unsigned char b = *r->p++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -1;
}

// 1: *f filled; 0: end of message; -1: malformed.
static int wire_next(wire_rd *r, wire_field *f) {
  if (r->p >= r->end) return 0;
  f->start = r->p;
  uint64_t key;
  if (wire_varint(r, &key)) return -1;
  f->num = (uint32_t)(key >> 3);
  f->type = (uint32_t)(key & 7);
  f->data = NULL;
  f->len = 0;
  switch (f->type) {
    case 0: return wire_varint(r, &f->v) ? -1 : 1;
    case 1:
      if (r->end - r->p < 8) return -1;
      r->p += 8;
      return 1;
    case 5:
      if (r->end - r->p < 4) return -1;
      r->p += 4;
      return 1;
    case 2: {
      uint64_t len;
      if (wire_varint(r, &len) || len > (uint64_t)(r->end - r->p)) return -1;
      f->data = r->p;
      f->len = (size_t)len;
      r->p += len;
      return 1;
    }
    default: return -1;  // groups (3, 4) are not used by ONNX
  }
}

// ---------------------------------------------------------------------------------------
// Reading the graph
// ---------------------------------------------------------------------------------------

static char *wire_strdup(const wire_field *f) {
  char *s = malloc(f->len + 1);
  if (!s) return NULL;
  memcpy(s, f->data, f->len);
  s[f->len] = 0;
  return s;
}

// Append a copy of f's payload to the string list (*arr, *n). 0 ok, -1 out of memory.
static int wire_push(char ***arr, size_t *n, const wire_field *f) {
  char **a = realloc(*arr, (*n + 1) * sizeof *a);
  if (!a) return -1;
  *arr = a;
  if (!(a[*n] = wire_strdup(f))) return -1;
  (*n)++;
  return 0;
}

static char *wire_str_field(const unsigned char *p, size_t n, uint32_t num, char **out) {
  wire_rd r = {p, p + n};
  wire_field f;
  int k;
  *out = NULL;
  while ((k = wire_next(&r, &f)) == 1)
    if (f.num == num && f.type == 2) {
      free(*out);
      if (!(*out = wire_strdup(&f))) return fbx_host_errf("out of memory");
    }
  if (k < 0) return fbx_host_errf("malformed protobuf message");
  if (!*out && !(*out = calloc(1, 1))) return fbx_host_errf("out of memory");
  return NULL;
}

static char *wire_node_read(const unsigned char *p, size_t n, fbx_wire_node *nd) {
  wire_rd r = {p, p + n};
  wire_field f;
  int k;
  while ((k = wire_next(&r, &f)) == 1) {
    if (f.type != 2) continue;
    int rc = 0;
    char **dst = NULL;
    if (f.num == 1) rc = wire_push(&nd->inputs, &nd->n_inputs, &f);
    else if (f.num == 2) rc = wire_push(&nd->outputs, &nd->n_outputs, &f);
    else if (f.num == 3) dst = &nd->name;
    else if (f.num == 4) dst = &nd->op_type;
    else if (f.num == 7) dst = &nd->domain;
    if (dst) {
      free(*dst);
      if (!(*dst = wire_strdup(&f))) rc = -1;
    }
    if (rc) return fbx_host_errf("out of memory");
  }
  if (k < 0) return fbx_host_errf("malformed NodeProto");
  char **opt[] = {&nd->name, &nd->op_type, &nd->domain};
  for (size_t i = 0; i < 3; i++)
    if (!*opt[i] && !(*opt[i] = calloc(1, 1))) return fbx_host_errf("out of memory");
  return NULL;
}

// 1 when the TensorProto in p[0..n) has data_location = EXTERNAL.
static int wire_tensor_external(const unsigned char *p, size_t n) {
  wire_rd r = {p, p + n};
  wire_field f;
  while (wire_next(&r, &f) == 1)
    if (f.num == 14 && f.type == 0 && f.v == 1) return 1;
  return 0;
}

// The payload of the (last) graph field of a ModelProto.
static char *wire_model_graph(const unsigned char *buf, size_t n, wire_field *graph) {
  wire_rd r = {buf, buf + n};
  wire_field f;
  int k, found = 0;
  while ((k = wire_next(&r, &f)) == 1)
    if (f.num == 7 && f.type == 2) {
      *graph = f;
      found = 1;
    }
  if (k < 0) return fbx_host_errf("not an ONNX model (malformed protobuf)");
  if (!found) return fbx_host_errf("not an ONNX model (no graph)");
  return NULL;
}

char *fbx_wire_graph_read(const unsigned char *buf, size_t n, fbx_wire_graph *g) {
  memset(g, 0, sizeof *g);
  wire_field gf = {0};
  char *err = wire_model_graph(buf, n, &gf);
  if (err) return err;
  wire_rd r = {gf.data, gf.data + gf.len};
  wire_field f;
  int k;
  while ((k = wire_next(&r, &f)) == 1) {
    if (f.type != 2) continue;
    if (f.num == 1) {
      fbx_wire_node *nodes = realloc(g->nodes, (g->n_nodes + 1) * sizeof *nodes);
      if (!nodes) return fbx_host_errf("out of memory");
      g->nodes = nodes;
      memset(&nodes[g->n_nodes], 0, sizeof nodes[0]);
      err = wire_node_read(f.data, f.len, &nodes[g->n_nodes++]);
    } else if (f.num == 5 || f.num == 11 || f.num == 12) {
      char **dst = NULL, ***arr = f.num == 5 ? &g->initializers : f.num == 11 ? &g->inputs : &g->outputs;
      size_t *cnt = f.num == 5 ? &g->n_initializers : f.num == 11 ? &g->n_inputs : &g->n_outputs;
      char *name;
      if ((err = wire_str_field(f.data, f.len, f.num == 5 ? 8 : 1, &name))) return err;
      if (!(dst = realloc(*arr, (*cnt + 1) * sizeof *dst))) {
        free(name);
        return fbx_host_errf("out of memory");
      }
      *arr = dst;
      dst[(*cnt)++] = name;
      if (f.num == 5 && wire_tensor_external(f.data, f.len)) g->external_data = 1;
    }
    if (err) return err;
  }
  if (k < 0) return fbx_host_errf("malformed GraphProto");
  return NULL;
}

static void wire_strs_free(char **a, size_t n) {
  for (size_t i = 0; i < n; i++) free(a[i]);
  free(a);
}

void fbx_wire_graph_free(fbx_wire_graph *g) {
  if (!g) return;
  for (size_t i = 0; i < g->n_nodes; i++) {
    fbx_wire_node *nd = &g->nodes[i];
    free(nd->name);
    free(nd->op_type);
    free(nd->domain);
    wire_strs_free(nd->inputs, nd->n_inputs);
    wire_strs_free(nd->outputs, nd->n_outputs);
  }
  free(g->nodes);
  wire_strs_free(g->inputs, g->n_inputs);
  wire_strs_free(g->initializers, g->n_initializers);
  wire_strs_free(g->outputs, g->n_outputs);
  memset(g, 0, sizeof *g);
}

// ---------------------------------------------------------------------------------------
// Writing: the model with extra graph outputs
// ---------------------------------------------------------------------------------------

typedef struct wire_buf {
  unsigned char *p;
  size_t n, cap;
  int oom;
} wire_buf;

static void wb_raw(wire_buf *b, const void *d, size_t n) {
  if (b->oom || !n) return;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n) cap *= 2;
    unsigned char *q = realloc(b->p, cap);
    if (!q) {
      b->oom = 1;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
}

static void wb_varint(wire_buf *b, uint64_t v) {
  unsigned char t[10];
  int k = 0;
  do {
    t[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  wb_raw(b, t, (size_t)k);
}

static void wb_bytes(wire_buf *b, uint32_t num, const void *d, size_t n) {
  wb_varint(b, (uint64_t)num << 3 | 2);
  wb_varint(b, n);
  wb_raw(b, d, n);
}

char *fbx_wire_model_add_outputs(const unsigned char *buf, size_t n, char *const *names,
                                 size_t n_names, unsigned char **out, size_t *out_n) {
  *out = NULL;
  *out_n = 0;
  wire_field gf = {0};
  char *err = wire_model_graph(buf, n, &gf);
  if (err) return err;
  // The graph: its bytes verbatim, then one `output` ValueInfoProto {name} per extra value
  // (fields of a message may come in any order; repeated ones keep theirs).
  wire_buf g = {0}, vi = {0}, m = {0};
  wb_raw(&g, gf.data, gf.len);
  for (size_t i = 0; i < n_names; i++) {
    vi.n = 0;
    wb_bytes(&vi, 1, names[i], strlen(names[i]));
    wb_bytes(&g, 12, vi.p, vi.n);
  }
  // The model: every field but the graph verbatim, then the new graph.
  wire_rd r = {buf, buf + n};
  wire_field f;
  while (wire_next(&r, &f) == 1)
    if (!(f.num == 7 && f.type == 2)) wb_raw(&m, f.start, (size_t)(r.p - f.start));
  wb_bytes(&m, 7, g.p, g.n);
  int oom = g.oom || vi.oom || m.oom;
  free(g.p);
  free(vi.p);
  if (oom) {
    free(m.p);
    return fbx_host_errf("out of memory writing the model");
  }
  *out = m.p;
  *out_n = m.n;
  return NULL;
}

char *fbx_wire_file_read(const char *path, unsigned char **buf, size_t *n) {
  *buf = NULL;
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return fbx_host_errf("cannot open %s", path);
  unsigned char *p = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 1 << 16;
      unsigned char *q = realloc(p, cap);
      if (!q) {
        free(p);
        fclose(f);
        return fbx_host_errf("out of memory reading %s", path);
      }
      p = q;
    }
    size_t got = fread(p + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(p);
    return fbx_host_errf("cannot read %s", path);
  }
  *buf = p;
  *n = len;
  return NULL;
}
