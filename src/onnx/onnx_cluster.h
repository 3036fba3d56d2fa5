/* Grouping claimed nodes into fused subgraphs that ORT accepts.
 *
 * ORT drops every claim of a GetCapability call if one group is not convex:
 * a path that leaves the group through an unclaimed node and re-enters it.
 * This builds maximal convex groups over the topologically ordered nodes. */
#ifndef FBX_ONNX_CLUSTER_H
#define FBX_ONNX_CLUSTER_H

#include <stdbool.h>

#include "../base/status.h"
#include "onnx_graph.h"

/* claimed[i] says whether node i is claimable. On return cluster_of[i] is the
 * group index of node i (0..*n_clusters-1) or -1 for unclaimed nodes. Every
 * group is convex and contains at least min_nodes nodes (smaller groups are
 * released to -1: not worth a fused node). Caller provides cluster_of with
 * g->n_nodes entries. */
fbx_status *fbx_onnx_cluster(const fbx_onnx_graph *g, const bool *claimed, int min_nodes,
                             int *cluster_of, int *n_clusters);

/* Check: is the set of nodes {i : in_group[i]} convex in g? (for tests/asserts) */
bool fbx_onnx_group_is_convex(const fbx_onnx_graph *g, const bool *in_group);

#endif
