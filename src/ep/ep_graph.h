/* OrtGraph -> fbx_onnx_graph (the plain description src/onnx/ reads).
 *
 * Memory: everything (names, dims, attributes, the node/value arrays) lives
 * in d->arena; tensor attributes are OrtValues owned by d until
 * fbx_ep_graph_free(). Initializer data pointers point into ORT's memory and
 * are valid only while the OrtGraph is (the GetCapability/Compile call). */
#ifndef FBX_EP_GRAPH_H
#define FBX_EP_GRAPH_H

#include "../base/arena.h"
#include "../onnx/onnx_graph.h"
#include "ep_internal.h"

typedef struct fbx_ep_graph {
  fbx_arena *arena;
  fbx_onnx_graph g;
  const OrtNode **ort_nodes;   /* (g.n_nodes): the OrtNode of g.nodes[i] */
  OrtValue **owned;            /* tensor attribute values to release */
  int n_owned, cap_owned;
  int64_t init_bytes;          /* bytes of readable constant initializers */
  int n_init;
  struct fbx_ep_graph **subs;  /* (n_subs): the body graphs of its nodes, described (owned) */
  int n_subs, cap_subs;
} fbx_ep_graph;

/* Describe graph (nodes with body graphs get them described too: the
 * description of a body lists the non-constant outer values it reads as its
 * graph inputs, is_outer set, after its own inputs). When fused_node is non-NULL (Compile), g.inputs/g.outputs
 * follow the fused node's inputs/outputs, which is the order ORT passes them
 * to Compute; otherwise the graph's own (non-constant) inputs and outputs.
 * On failure d is left freed. */
fbx_status *fbx_ep_graph_build(const OrtGraph *graph, const OrtNode *fused_node, fbx_ep_graph *d);
/* Describe one node alone (its inputs, outputs, implicit inputs and body
 * graphs), e.g. the If node a body graph belongs to (Graph_GetParentNode):
 * d->g has that one node and no graph inputs or outputs. */
fbx_status *fbx_ep_graph_build_node(const OrtNode *node, fbx_ep_graph *d);
void fbx_ep_graph_free(fbx_ep_graph *d);

#endif
