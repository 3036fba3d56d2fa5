/* Rank inference for values ORT's shape inference leaves unshaped (typically
 * everything downstream of a Reshape whose shape is computed at run time). */
#ifndef FBX_ONNX_RANK_H
#define FBX_ONNX_RANK_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/status.h"
#include "onnx_graph.h"

/* One forward pass over g's nodes (topological order) that fills rank, and
 * static dims where they follow cheaply (else -1), of every tensor value with
 * rank -1 that a registered op's node produces (its registry row names the
 * rule; unregistered ops are left alone), from that node's inputs,
 * attributes and constant inputs; a value of known rank only gets static
 * dims where ORT left them dynamic (its rank is never changed). When a rule
 * cannot decide, the value stays at rank -1 / dim -1 (never a guess).
 * Modifies g->values in place (no allocation). */
fbx_status *fbx_onnx_graph_infer_ranks(fbx_onnx_graph *g);

/* The same pass. When changed is non-NULL (g->n_values entries, caller
 * zeroes it), sets changed[v] for every value whose rank or dims it filled. */
fbx_status *fbx_onnx_graph_infer_shapes(fbx_onnx_graph *g, bool *changed);

/* GetCapability guard. A fused subgraph's inputs are described by ORT alone
 * at Compile, so a value whose rank/dims were only inferred (inferred[v], the changed[] of
 * fbx_onnx_graph_infer_shapes) must not
 * cross into a fused group from outside: for every claimed node (cluster_of
 * >= 0) that reads such a value produced outside its own group (by another
 * group, an unclaimed node or no node), sets claimed[i] = false and writes a
 * reason (reasons + i * reason_size, when reasons is non-NULL). Returns the
 * number of nodes newly declined (re-cluster while > 0). */
int fbx_onnx_rank_guard(const fbx_onnx_graph *g, const bool *inferred, const int *cluster_of, bool *claimed,
                        char *reasons, size_t reason_size);

#endif
