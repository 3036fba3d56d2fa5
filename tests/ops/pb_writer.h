// pb_writer — just enough protobuf encoding to write a one-node ONNX ModelProto from C
// (no python/onnx needed at test time). Header-only; used by tests/ops/test_ops_diff.c.
//
// Field numbers (onnx.proto): ModelProto ir_version=1 graph=7 opset_import=8;
// OperatorSetIdProto domain=1 version=2; GraphProto node=1 name=2 initializer=5 input=11
// output=12; NodeProto input=1 output=2 name=3 op_type=4 attribute=5 domain=7;
// AttributeProto name=1 f=2 i=3 s=4 floats=7 ints=8 type=20; ValueInfoProto name=1 type=2;
// TypeProto tensor_type=1; TypeProto.Tensor elem_type=1 shape=2; TensorShapeProto dim=1;
// Dimension dim_value=1; TensorProto dims=1 data_type=2 name=8 raw_data=9.
#ifndef FBX_TESTS_PB_WRITER_H
#define FBX_TESTS_PB_WRITER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pbw {
  unsigned char *p;
  size_t n, cap;
  int oom;
} pbw;

static void pbw_raw(pbw *b, const void *d, size_t n) {
  if (b->oom) return;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->n + n) cap *= 2;
    unsigned char *q = realloc(b->p, cap);
    if (!q) { b->oom = 1; return; }
    b->p = q;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, d, n);
  b->n += n;
}

static void pbw_varint(pbw *b, uint64_t v) {
  unsigned char t[10];
  int k = 0;
  do {
    t[k] = (unsigned char)(v & 0x7f);
    v >>= 7;
    if (v) t[k] |= 0x80;
    k++;
  } while (v);
  pbw_raw(b, t, (size_t)k);
}

static void pbw_key(pbw *b, int field, int wire) { pbw_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }
static void pbw_int(pbw *b, int field, int64_t v) { pbw_key(b, field, 0); pbw_varint(b, (uint64_t)v); }
static void pbw_bytes(pbw *b, int field, const void *d, size_t n) {
  pbw_key(b, field, 2);
  pbw_varint(b, n);
  pbw_raw(b, d, n);
}
static void pbw_str(pbw *b, int field, const char *s) { pbw_bytes(b, field, s, strlen(s)); }
static void pbw_f32(pbw *b, int field, float f) {
  pbw_key(b, field, 5);
  pbw_raw(b, &f, 4);
}
// Append child as a length-delimited field and free it.
static void pbw_sub(pbw *b, int field, pbw *child) {
  if (child->oom) b->oom = 1;
  pbw_bytes(b, field, child->p, child->n);
  free(child->p);
  memset(child, 0, sizeof *child);
}

#endif
