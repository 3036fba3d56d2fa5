// tensor_proto — a minimal protobuf wire-format reader for the ONNX backend test data.
//
// Reads TensorProto files (test_data_set_*/input_*.pb, output_*.pb) into fbx_host_tensor and
// the few ModelProto facts the conformance runner needs (node op types, graph input/output
// names and value kinds). No protobuf library: ONNX's wire format is small and stable.
//
// TensorProto fields read: dims (1, packed or not), data_type (2), float_data (4),
// int32_data (5; also carries int8/uint8/int16/uint16/bool/float16/bfloat16), string_data (6),
// int64_data (7), name (8), raw_data (9), double_data (10), uint64_data (11; also uint32).
// String tensors and external data are reported as unsupported (an error message), never
// silently dropped.
//
// Errors: functions return NULL on success or a heap message (free with fbx_host_err_free).
//
// Built as part of test_conformance (the CMake test glob compiles only test_*.c plus
// tests/common/*.c, so test_conformance.c includes tensor_proto.c directly).
#ifndef FBX_TESTS_CONFORMANCE_TENSOR_PROTO_H
#define FBX_TESTS_CONFORMANCE_TENSOR_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/ort_host.h"

// ---- wire format ----
typedef struct cf_pb {
  const uint8_t *p, *end;
} cf_pb;

// One field of a message. For wire type 0 (varint) / 1 (fixed64) / 5 (fixed32) `v` holds the
// value; for wire type 2 (length-delimited) `bytes`/`len` point into the buffer.
typedef struct cf_pb_field {
  uint32_t field;
  uint32_t wire;
  uint64_t v;
  const uint8_t *bytes;
  size_t len;
} cf_pb_field;

// 1: *f filled; 0: end of message; -1: malformed.
int cf_pb_next(cf_pb *r, cf_pb_field *f);

// ---- TensorProto ----
// Parse a TensorProto into *out (overwritten; free with fbx_host_tensor_free). The name is
// copied when present.
char *cf_tensor_proto_parse(const uint8_t *buf, size_t n, fbx_host_tensor *out);
char *cf_tensor_proto_read(const char *path, fbx_host_tensor *out);

// ---- ModelProto (just what the runner needs) ----
enum {
  CF_KIND_UNKNOWN = 0,
  CF_KIND_TENSOR = 1,    // TypeProto.tensor_type
  CF_KIND_SEQUENCE = 4,  // TypeProto.sequence_type
  CF_KIND_MAP = 5,       // TypeProto.map_type
  CF_KIND_SPARSE = 8,    // TypeProto.sparse_tensor_type
  CF_KIND_OPTIONAL = 9,  // TypeProto.optional_type
};
const char *cf_kind_name(int kind);

typedef struct cf_value_info {
  char *name;
  int kind;       // CF_KIND_*
  int elem_type;  // tensor element type (TensorProto.DataType) when kind == TENSOR, else 0
} cf_value_info;

typedef struct cf_model_info {
  char **op_types;  // one per node of the main graph, in order ("domain::Op" if domain is set)
  size_t n_nodes;
  cf_value_info *inputs;   // graph inputs (all, initializers included if listed)
  size_t n_inputs;
  cf_value_info *outputs;
  size_t n_outputs;
  int64_t opset;  // default-domain opset import (0 if absent)
} cf_model_info;

// *out overwritten; free with cf_model_info_free.
char *cf_model_info_read(const char *path, cf_model_info *out);
void cf_model_info_free(cf_model_info *m);

// Whole file into a heap buffer (free()).
char *cf_file_read(const char *path, uint8_t **buf, size_t *n);

#endif  // FBX_TESTS_CONFORMANCE_TENSOR_PROTO_H
