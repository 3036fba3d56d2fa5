// onnx_wire.h — just enough of the ONNX protobuf wire format for `fusebox check --all-tensors`:
// list the main graph's nodes in file (= topological) order, and write a copy of a model whose
// graph has extra outputs. No protobuf library; the fields read are stable since ONNX 1.0:
//   ModelProto    graph = 7
//   GraphProto    node = 1, initializer = 5, input = 11, output = 12
//   NodeProto     input = 1, output = 2, name = 3, op_type = 4, domain = 7
//   ValueInfoProto / TensorProto name = 1 / 8;  TensorProto data_location = 14 (1 = EXTERNAL)
// Subgraphs (If/Loop/Scan bodies) are not looked into: only main-graph values are listed.
//
// Errors: functions return NULL on success or a heap message (free()).
#ifndef FBX_TOOLS_ONNX_WIRE_H
#define FBX_TOOLS_ONNX_WIRE_H

#include <stddef.h>

typedef struct fbx_wire_node {
  char *name;      // "" when the node has none
  char *op_type;
  char *domain;    // "" for the default domain
  char **inputs;   // "" for an omitted optional input
  size_t n_inputs;
  char **outputs;
  size_t n_outputs;
} fbx_wire_node;

typedef struct fbx_wire_graph {
  fbx_wire_node *nodes;  // file order, which ONNX requires to be topological
  size_t n_nodes;
  char **inputs;         // graph inputs (names)
  size_t n_inputs;
  char **initializers;   // initializer names
  size_t n_initializers;
  char **outputs;        // graph outputs (names)
  size_t n_outputs;
  int external_data;     // 1 when an initializer keeps its data in another file
} fbx_wire_graph;

// Read the main graph of the serialized ModelProto buf[0..n). *g overwritten; free with
// fbx_wire_graph_free (also after an error).
char *fbx_wire_graph_read(const unsigned char *buf, size_t n, fbx_wire_graph *g);
void fbx_wire_graph_free(fbx_wire_graph *g);

// A copy of the model in buf whose main graph lists `names` as extra outputs (a ValueInfoProto
// with the name only: ORT infers the type). *out is heap (free()), *out_n its length.
char *fbx_wire_model_add_outputs(const unsigned char *buf, size_t n, char *const *names,
                                 size_t n_names, unsigned char **out, size_t *out_n);

// Whole file into a heap buffer (free()).
char *fbx_wire_file_read(const char *path, unsigned char **buf, size_t *n);

#endif  // FBX_TOOLS_ONNX_WIRE_H
