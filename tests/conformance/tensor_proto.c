// tensor_proto.c — protobuf wire reader for ONNX TensorProto / ModelProto (see tensor_proto.h).
#include "conformance/tensor_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Wire format
// ---------------------------------------------------------------------------------------

static int cf__varint(cf_pb *r, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end) return -1;
    uint8_t b = *r->p++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

int cf_pb_next(cf_pb *r, cf_pb_field *f) {
  if (r->p >= r->end) return 0;
  uint64_t key;
  if (cf__varint(r, &key) < 0) return -1;
  memset(f, 0, sizeof(*f));
  f->field = (uint32_t)(key >> 3);
  f->wire = (uint32_t)(key & 7);
  switch (f->wire) {
    case 0:
      return cf__varint(r, &f->v) < 0 ? -1 : 1;
    case 1:
      if (r->end - r->p < 8) return -1;
      memcpy(&f->v, r->p, 8);
      r->p += 8;
      return 1;
    case 5: {
      if (r->end - r->p < 4) return -1;
      uint32_t w;
      memcpy(&w, r->p, 4);
      f->v = w;
      r->p += 4;
      return 1;
    }
    case 2: {
      uint64_t len;
      if (cf__varint(r, &len) < 0 || len > (uint64_t)(r->end - r->p)) return -1;
      f->bytes = r->p;
      f->len = (size_t)len;
      r->p += len;
      return 1;
    }
    default:
      return -1;  // groups (3/4) are not used by ONNX
  }
}

char *cf_file_read(const char *path, uint8_t **buf, size_t *n) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return fbx_host_errf("cannot open %s", path);
  char *err = NULL;
  uint8_t *b = NULL;
  long sz = 0;
  if (fseek(fp, 0, SEEK_END) != 0 || (sz = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0) {
    err = fbx_host_errf("cannot seek %s", path);
  } else if (!(b = malloc((size_t)sz + 1))) {
    err = fbx_host_errf("out of memory reading %s", path);
  } else if (sz > 0 && fread(b, 1, (size_t)sz, fp) != (size_t)sz) {
    err = fbx_host_errf("short read on %s", path);
    free(b);
    b = NULL;
  }
  fclose(fp);
  if (err) return err;
  *buf = b;
  *n = (size_t)sz;
  return NULL;
}

// ---------------------------------------------------------------------------------------
// TensorProto
// ---------------------------------------------------------------------------------------

// Repeated scalar values gathered from packed and unpacked occurrences, as raw u64 (varint /
// fixed64) or u32 (fixed32) items.
typedef struct cf__rep {
  uint64_t *v;
  size_t n, cap;
} cf__rep;

static int cf__rep_push(cf__rep *r, uint64_t v) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 64;
    uint64_t *nv = realloc(r->v, cap * sizeof(*nv));
    if (!nv) return -1;
    r->v = nv;
    r->cap = cap;
  }
  r->v[r->n++] = v;
  return 0;
}

// Append the values of field f (wire type `elem_wire` when unpacked: 0, 1 or 5).
static int cf__rep_add(cf__rep *r, const cf_pb_field *f, uint32_t elem_wire) {
  if (f->wire == elem_wire) return cf__rep_push(r, f->v);
  if (f->wire != 2) return -1;
  cf_pb sub = {f->bytes, f->bytes + f->len};
  while (sub.p < sub.end) {
    uint64_t v = 0;
    if (elem_wire == 0) {
      if (cf__varint(&sub, &v) < 0) return -1;
    } else {
      size_t w = elem_wire == 1 ? 8 : 4;
      if ((size_t)(sub.end - sub.p) < w) return -1;
      memcpy(&v, sub.p, w);  // little-endian host
      sub.p += w;
    }
    if (cf__rep_push(r, v) < 0) return -1;
  }
  return 0;
}

char *cf_tensor_proto_parse(const uint8_t *buf, size_t n, fbx_host_tensor *out) {
  memset(out, 0, sizeof(*out));
  cf_pb r = {buf, buf + n};
  cf_pb_field f;
  cf__rep dims = {0}, f32 = {0}, i32 = {0}, i64 = {0}, f64 = {0}, u64 = {0};
  const uint8_t *raw = NULL;
  size_t raw_len = 0;
  int has_raw = 0, dtype = 0, n_strings = 0, external = 0;
  char name[512] = "";
  char *err = NULL;
  int rc, bad = 0;
  while ((rc = cf_pb_next(&r, &f)) == 1) {
    switch (f.field) {
      case 1: bad |= cf__rep_add(&dims, &f, 0); break;
      case 2: dtype = (int)f.v; break;
      case 4: bad |= cf__rep_add(&f32, &f, 5); break;
      case 5: bad |= cf__rep_add(&i32, &f, 0); break;
      case 6: n_strings++; break;
      case 7: bad |= cf__rep_add(&i64, &f, 0); break;
      case 8:
        if (f.wire == 2) {
          size_t l = f.len < sizeof(name) - 1 ? f.len : sizeof(name) - 1;
          memcpy(name, f.bytes, l);
          name[l] = 0;
        }
        break;
      case 9: raw = f.bytes; raw_len = f.len; has_raw = 1; break;
      case 10: bad |= cf__rep_add(&f64, &f, 1); break;
      case 11: bad |= cf__rep_add(&u64, &f, 0); break;
      case 13: external = 1; break;  // external_data
      case 14: if (f.v == 1) external = 1; break;  // data_location = EXTERNAL
      default: break;  // segment, doc_string, metadata: ignored
    }
    if (bad) break;
  }
  if (rc < 0 || bad) { err = fbx_host_errf("malformed TensorProto"); goto done; }
  if (dims.n > FBX_HOST_MAX_RANK) { err = fbx_host_errf("rank %zu too large", dims.n); goto done; }
  if (external) { err = fbx_host_errf("unsupported: tensor with external data"); goto done; }
  if (dtype == FBX_HOST_STRING || n_strings) {
    err = fbx_host_errf("unsupported input kind: string tensor");
    goto done;
  }
  size_t esz = fbx_host_dtype_size(dtype);
  if (!esz) { err = fbx_host_errf("unsupported tensor data_type %d", dtype); goto done; }
  int64_t d[FBX_HOST_MAX_RANK];
  size_t numel = 1;
  for (size_t i = 0; i < dims.n; i++) {
    d[i] = (int64_t)dims.v[i];
    if (d[i] < 0) { err = fbx_host_errf("negative dim"); goto done; }
    numel *= (size_t)d[i];
  }
  err = fbx_host_tensor_alloc(out, name[0] ? name : NULL, dtype, (int)dims.n, d);
  if (err) goto done;
  uint8_t *dst = out->data;
  if (has_raw) {
    if (raw_len != numel * esz) {
      err = fbx_host_errf("raw_data holds %zu bytes, expected %zu", raw_len, numel * esz);
      goto done;
    }
    if (raw_len) memcpy(dst, raw, raw_len);
    goto done;
  }
  // typed fields: pick the one the data type uses
  const cf__rep *src = NULL;
  switch (dtype) {
    case FBX_HOST_F32: src = &f32; break;
    case FBX_HOST_F64: src = &f64; break;
    case FBX_HOST_I64: src = &i64; break;
    case FBX_HOST_U32: case FBX_HOST_U64: src = &u64; break;
    default: src = &i32; break;  // int32, int8/16, uint8/16, bool, float16, bfloat16
  }
  if (src->n != numel) {
    err = fbx_host_errf("typed data holds %zu values, expected %zu (data_type %d)", src->n, numel,
                        dtype);
    goto done;
  }
  for (size_t i = 0; i < numel; i++) {
    uint64_t v = src->v[i];
    // every type stores its low esz bytes (int32_data carries the bit pattern of the narrow
    // types; negative int32 varints are sign-extended to 64 bits, the low bytes are right)
    memcpy(dst + i * esz, &v, esz);
  }
done:
  free(dims.v); free(f32.v); free(i32.v); free(i64.v); free(f64.v); free(u64.v);
  if (err && out->data) fbx_host_tensor_free(out);
  if (err) memset(out, 0, sizeof(*out));
  return err;
}

char *cf_tensor_proto_read(const char *path, fbx_host_tensor *out) {
  uint8_t *buf = NULL;
  size_t n = 0;
  char *err = cf_file_read(path, &buf, &n);
  if (err) return err;
  err = cf_tensor_proto_parse(buf, n, out);
  free(buf);
  if (err) {
    char *e2 = fbx_host_errf("%s: %s", path, err);
    fbx_host_err_free(err);
    return e2;
  }
  return NULL;
}

// ---------------------------------------------------------------------------------------
// ModelProto
// ---------------------------------------------------------------------------------------

const char *cf_kind_name(int kind) {
  switch (kind) {
    case CF_KIND_TENSOR: return "tensor";
    case CF_KIND_SEQUENCE: return "sequence";
    case CF_KIND_MAP: return "map";
    case CF_KIND_SPARSE: return "sparse_tensor";
    case CF_KIND_OPTIONAL: return "optional";
    default: return "unknown";
  }
}

static char *cf__strndup(const uint8_t *b, size_t n) {
  char *s = malloc(n + 1);
  if (!s) return NULL;
  memcpy(s, b, n);
  s[n] = 0;
  return s;
}

// ValueInfoProto: name (1), type (2: TypeProto, whose oneof field number is the kind;
// TypeProto.Tensor.elem_type is field 1).
static int cf__value_info(const uint8_t *b, size_t n, cf_value_info *vi) {
  cf_pb r = {b, b + n};
  cf_pb_field f;
  int rc;
  memset(vi, 0, sizeof(*vi));
  while ((rc = cf_pb_next(&r, &f)) == 1) {
    if (f.field == 1 && f.wire == 2) {
      free(vi->name);
      vi->name = cf__strndup(f.bytes, f.len);
      if (!vi->name) return -1;
    } else if (f.field == 2 && f.wire == 2) {
      cf_pb t = {f.bytes, f.bytes + f.len};
      cf_pb_field tf;
      while ((rc = cf_pb_next(&t, &tf)) == 1) {
        if (tf.wire != 2) continue;  // denotation (6) is a string too, skip non-kinds below
        if (tf.field == 1 || tf.field == 4 || tf.field == 5 || tf.field == 8 || tf.field == 9) {
          vi->kind = (int)tf.field;
          if (tf.field == 1) {
            cf_pb e = {tf.bytes, tf.bytes + tf.len};
            cf_pb_field ef;
            while (cf_pb_next(&e, &ef) == 1)
              if (ef.field == 1 && ef.wire == 0) vi->elem_type = (int)ef.v;
          }
        }
      }
      if (rc < 0) return -1;
    }
  }
  if (!vi->name) vi->name = cf__strndup((const uint8_t *)"", 0);
  return rc < 0 || !vi->name ? -1 : 0;
}

static int cf__vi_push(cf_value_info **arr, size_t *n, const uint8_t *b, size_t len) {
  cf_value_info *na = realloc(*arr, (*n + 1) * sizeof(**arr));
  if (!na) return -1;
  *arr = na;
  if (cf__value_info(b, len, &na[*n]) < 0) {
    free(na[*n].name);
    return -1;
  }
  (*n)++;
  return 0;
}

// NodeProto: op_type (4), domain (7).
static char *cf__node_op(const uint8_t *b, size_t n) {
  cf_pb r = {b, b + n};
  cf_pb_field f;
  const uint8_t *op = NULL, *dom = NULL;
  size_t op_len = 0, dom_len = 0;
  while (cf_pb_next(&r, &f) == 1) {
    if (f.wire != 2) continue;
    if (f.field == 4) { op = f.bytes; op_len = f.len; }
    if (f.field == 7) { dom = f.bytes; dom_len = f.len; }
  }
  if (!op) return cf__strndup((const uint8_t *)"?", 1);
  if (dom_len && !(dom_len == 7 && !memcmp(dom, "ai.onnx", 7))) {
    char *s = malloc(dom_len + 2 + op_len + 1);
    if (!s) return NULL;
    memcpy(s, dom, dom_len);
    memcpy(s + dom_len, "::", 2);
    memcpy(s + dom_len + 2, op, op_len);
    s[dom_len + 2 + op_len] = 0;
    return s;
  }
  return cf__strndup(op, op_len);
}

char *cf_model_info_read(const char *path, cf_model_info *out) {
  memset(out, 0, sizeof(*out));
  uint8_t *buf = NULL;
  size_t n = 0;
  char *err = cf_file_read(path, &buf, &n);
  if (err) return err;
  cf_pb r = {buf, buf + n};
  cf_pb_field f;
  int rc;
  while ((rc = cf_pb_next(&r, &f)) == 1) {
    if (f.field == 8 && f.wire == 2) {  // opset_import: OperatorSetIdProto {domain 1, version 2}
      cf_pb o = {f.bytes, f.bytes + f.len};
      cf_pb_field of;
      size_t dom_len = 0;
      int64_t ver = 0;
      while (cf_pb_next(&o, &of) == 1) {
        if (of.field == 1 && of.wire == 2) dom_len = of.len;
        if (of.field == 2 && of.wire == 0) ver = (int64_t)of.v;
      }
      if (dom_len == 0) out->opset = ver;
    } else if (f.field == 7 && f.wire == 2) {  // graph: node 1, input 11, output 12
      cf_pb g = {f.bytes, f.bytes + f.len};
      cf_pb_field gf;
      while ((rc = cf_pb_next(&g, &gf)) == 1) {
        if (gf.wire != 2) continue;
        if (gf.field == 1) {
          char **no = realloc(out->op_types, (out->n_nodes + 1) * sizeof(*no));
          if (!no) { rc = -1; break; }
          out->op_types = no;
          if (!(no[out->n_nodes] = cf__node_op(gf.bytes, gf.len))) { rc = -1; break; }
          out->n_nodes++;
        } else if (gf.field == 11) {
          if (cf__vi_push(&out->inputs, &out->n_inputs, gf.bytes, gf.len) < 0) { rc = -1; break; }
        } else if (gf.field == 12) {
          if (cf__vi_push(&out->outputs, &out->n_outputs, gf.bytes, gf.len) < 0) { rc = -1; break; }
        }
      }
      if (rc < 0) break;
    }
  }
  free(buf);
  if (rc < 0) {
    cf_model_info_free(out);
    return fbx_host_errf("%s: malformed ModelProto", path);
  }
  return NULL;
}

void cf_model_info_free(cf_model_info *m) {
  for (size_t i = 0; i < m->n_nodes; i++) free(m->op_types[i]);
  for (size_t i = 0; i < m->n_inputs; i++) free(m->inputs[i].name);
  for (size_t i = 0; i < m->n_outputs; i++) free(m->outputs[i].name);
  free(m->op_types);
  free(m->inputs);
  free(m->outputs);
  memset(m, 0, sizeof(*m));
}
