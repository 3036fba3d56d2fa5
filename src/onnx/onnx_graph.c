/* Attribute lookup helpers for the plain ONNX graph description. */
#include "onnx_graph.h"

#include <string.h>

const fbx_onnx_attr *fbx_onnx_attr_find(const fbx_onnx_node *n, const char *name) {
  if (!n || !name) return NULL;
  for (int i = 0; i < n->n_attrs; i++) {
    if (n->attrs[i].name && strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  }
  return NULL;
}

int64_t fbx_onnx_attr_int(const fbx_onnx_node *n, const char *name, int64_t dflt) {
  const fbx_onnx_attr *a = fbx_onnx_attr_find(n, name);
  return a && a->type == FBX_ONNX_ATTR_INT ? a->i : dflt;
}

float fbx_onnx_attr_float(const fbx_onnx_node *n, const char *name, float dflt) {
  const fbx_onnx_attr *a = fbx_onnx_attr_find(n, name);
  if (!a) return dflt;
  if (a->type == FBX_ONNX_ATTR_FLOAT) return a->f;
  if (a->type == FBX_ONNX_ATTR_INT) return (float)a->i; /* exporters sometimes write ints */
  return dflt;
}

const char *fbx_onnx_attr_string(const fbx_onnx_node *n, const char *name, const char *dflt) {
  const fbx_onnx_attr *a = fbx_onnx_attr_find(n, name);
  return a && a->type == FBX_ONNX_ATTR_STRING && a->s ? a->s : dflt;
}
