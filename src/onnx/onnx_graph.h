/* A plain description of an ONNX (sub)graph, built by src/ep/ from ORT's
 * OrtGraph so that src/onnx/ never touches ORT handles.
 *
 * Memory: the ep layer owns everything here (it builds the description in
 * its own arena and frees it after GetCapability/Compile returns). Initializer
 * data pointers stay valid for the duration of the call only; translators
 * copy what they keep. */
#ifndef FBX_ONNX_GRAPH_H
#define FBX_ONNX_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/dtype.h"
#include "../base/status.h"

typedef enum fbx_onnx_attr_type {
  FBX_ONNX_ATTR_UNDEFINED = 0,
  FBX_ONNX_ATTR_FLOAT = 1,
  FBX_ONNX_ATTR_INT = 2,
  FBX_ONNX_ATTR_STRING = 3,
  FBX_ONNX_ATTR_TENSOR = 4,
  FBX_ONNX_ATTR_GRAPH = 5,
  FBX_ONNX_ATTR_FLOATS = 6,
  FBX_ONNX_ATTR_INTS = 7,
  FBX_ONNX_ATTR_STRINGS = 8,
  FBX_ONNX_ATTR_OTHER = 99,   /* sparse tensors, type protos, ...: always declined */
} fbx_onnx_attr_type;

/* A tensor value (attribute tensor or initializer). data is host, row-major. */
typedef struct fbx_onnx_tensor {
  fbx_dtype dtype;            /* FBX_DTYPE_UNDEFINED for types we do not handle (string, bf16...) */
  int onnx_type;              /* the raw ONNX element type */
  int rank;
  int64_t dims[FBX_MAX_RANK];
  const void *data;           /* may be NULL when the ep layer could not read it */
  size_t nbytes;
} fbx_onnx_tensor;

typedef struct fbx_onnx_attr {
  const char *name;
  fbx_onnx_attr_type type;
  int64_t i;
  float f;
  const char *s;              /* STRING */
  const int64_t *ints; int n_ints;     /* INTS */
  const float *floats; int n_floats;   /* FLOATS */
  const char *strs; int n_strs;        /* STRINGS: n_strs NUL-terminated strings back to back */
  fbx_onnx_tensor t;          /* TENSOR */
} fbx_onnx_attr;

typedef enum fbx_onnx_value_kind {
  FBX_ONNX_VALUE_TENSOR,      /* a tensor value */
  FBX_ONNX_VALUE_OTHER,       /* sequence, map, optional, sparse: declined */
} fbx_onnx_value_kind;

typedef struct fbx_onnx_value {
  const char *name;
  fbx_onnx_value_kind kind;
  fbx_dtype dtype;            /* FBX_DTYPE_UNDEFINED if not one we handle */
  int onnx_type;
  int rank;                   /* -1 when the rank is unknown */
  int64_t dims[FBX_MAX_RANK]; /* -1 for dynamic dims */
  const char *dim_sym[FBX_MAX_RANK]; /* symbolic names for dynamic dims, may be NULL/"" */
  bool is_initializer;        /* constant: data below (if readable) */
  const fbx_onnx_tensor *init;/* non-NULL for initializers whose data the ep layer read */
  bool is_graph_input;        /* an input of the (sub)graph being described */
  bool is_graph_output;
  bool is_outer;              /* a body graph's value defined in an outer scope (then also a graph
                                 input of the body's description, unless it is a constant) */
} fbx_onnx_value;

struct fbx_onnx_graph;

typedef struct fbx_onnx_node {
  const char *name;
  const char *op_type;
  const char *domain;         /* "" for the default ONNX domain */
  int opset;                  /* the model's opset for that domain */
  int since_version;          /* the op schema version ORT resolved, 0 if unknown */
  int n_inputs, n_outputs;
  const int *inputs;          /* value indices; -1 for an absent optional input */
  const int *outputs;         /* value indices; -1 for an absent optional output */
  int n_attrs;
  const fbx_onnx_attr *attrs;
  bool has_subgraph;          /* If/Loop/Scan */
  /* Nodes with body graphs (the ep layer describes them; If is claimable):
   * the outer values the bodies read (ORT's implicit inputs; value indices
   * of this graph, constants included), and each body graph described on its
   * own with its attribute name ("then_branch", ...). In a body's description
   * the outer values it reads are values with is_outer set, matched to this
   * graph's values by name. */
  int n_implicit;
  const int *implicit;
  int n_subgraphs;
  const struct fbx_onnx_graph *const *subgraphs;
  const char *const *subgraph_names;
} fbx_onnx_node;

typedef struct fbx_onnx_graph {
  int n_values;
  fbx_onnx_value *values;
  int n_nodes;
  fbx_onnx_node *nodes;       /* topological order */
  int n_inputs;  const int *inputs;   /* value indices (non-initializer graph inputs) */
  int n_outputs; const int *outputs;  /* value indices */
} fbx_onnx_graph;

/* Attribute lookup helpers (NULL / default when absent). */
const fbx_onnx_attr *fbx_onnx_attr_find(const fbx_onnx_node *n, const char *name);
int64_t fbx_onnx_attr_int(const fbx_onnx_node *n, const char *name, int64_t dflt);
float fbx_onnx_attr_float(const fbx_onnx_node *n, const char *name, float dflt);
const char *fbx_onnx_attr_string(const fbx_onnx_node *n, const char *name, const char *dflt);

#endif
