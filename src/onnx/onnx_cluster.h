/* Grouping claimed nodes into fused subgraphs that ORT accepts.
 *
 * ORT drops every claim of a GetCapability call if one group is not convex:
 * a path that leaves the group through an unclaimed node and re-enters it.
 * This builds convex groups over the topologically ordered nodes, then merges
 * the ones that can be merged and caps their number. */
#ifndef FBX_ONNX_CLUSTER_H
#define FBX_ONNX_CLUSTER_H

#include <stdbool.h>

#include "../base/status.h"
#include "onnx_graph.h"

/* How many fused subgraphs one GetCapability call may hand to ORT. ORT's
 * partitioning grows about cubically with the number of fused nodes (issue 8:
 * 1,000 single-node pieces took 7.4 s to partition, 2,000 took 56 s); merging
 * independent pieces keeps most graphs far below this, and past it the smallest
 * groups are left to ORT (ep_capability.c gives them a reason). */
#define FBX_ONNX_CLUSTER_MAX_GROUPS 128

/* cluster_of values below 0 */
#define FBX_ONNX_CLUSTER_NONE (-1)        /* not claimed, or its group had fewer than min_nodes */
#define FBX_ONNX_CLUSTER_OVER_LIMIT (-2)  /* claimed, but its group fell beyond max_groups */

/* claimed[i] says whether node i is claimable. On return cluster_of[i] is the
 * group index of node i (0..*n_clusters-1) or one of the values above. Every
 * group is convex and contains at least min_nodes nodes (smaller groups are
 * released: not worth a fused node). Groups with no path between them through a
 * node outside both are merged into one (first fit), so independent pieces make
 * one fused subgraph. At most max_groups groups are kept (0: no limit): the
 * largest, ties to the earlier. Caller provides cluster_of with g->n_nodes
 * entries. Memory: at most about n^2 / 2 bytes for n nodes, freed before returning. */
fbx_status *fbx_onnx_cluster(const fbx_onnx_graph *g, const bool *claimed, int min_nodes, int max_groups,
                             int *cluster_of, int *n_clusters);

/* Check: is the set of nodes {i : in_group[i]} convex in g? (for tests/asserts) */
bool fbx_onnx_group_is_convex(const fbx_onnx_graph *g, const bool *in_group);

#endif
