/* The op registry: per (domain, op type, opset), can Fusebox run this node,
 * and if not, why. Defined once as an X-macro table in onnx_registry.c; each
 * entry points at a claim check and a translator in the op-family files
 * (onnx_ops_<family>.c). */
#ifndef FBX_ONNX_REGISTRY_H
#define FBX_ONNX_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "../ir/ir_graph.h"
#include "onnx_graph.h"

/* Whether node node_index of g can be claimed. On false, writes a one-line
 * human reason into reason (e.g. "Resize: mode 'cubic' with exclude_outside=1
 * not supported"). reason may be NULL. Never fails. */
bool fbx_onnx_node_claimable(const fbx_onnx_graph *g, int node_index, char *reason,
                             size_t reason_size);

/* Translate the whole (fused) graph g into a new IR graph: g's inputs become IR
 * inputs in the same order, initializers become constants (copied), g's
 * outputs become IR outputs in the same order. Caller owns *out. */
fbx_status *fbx_onnx_translate(const fbx_onnx_graph *g, fbx_ir_graph **out);

/* Number of registry entries, their op types and domains ("" = ai.onnx), for
 * docs and tests. */
int fbx_onnx_registry_count(void);
const char *fbx_onnx_registry_op_type(int i);
const char *fbx_onnx_registry_domain(int i);

#endif
