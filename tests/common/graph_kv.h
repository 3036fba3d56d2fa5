/* A small decoder-like IR graph for executor tests (graph capture on the
 * opaque and CUDA backends): a KV concat, a Shape/Gather/Concat chain that
 * feeds a Reshape (host steps on a device backend), a MatMul with a
 * constant weight and a fusable elementwise tail. */
#ifndef FBX_TESTS_GRAPH_KV_H
#define FBX_TESTS_GRAPH_KV_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir_graph.h"

enum { FBX_TEST_KV_D = 8 };

/* x (1, S, D), past (1, P, D): symbolic "seq" / "past_seq" when decoder
 * (decode path at S = 1), else fixed (S0, P0) (general path). Outputs:
 * y (1, S, D), kv (1, P+S, D), r (1, P+S, 2, D/2). W: D x D floats, borrowed
 * (must outlive the graph). The caller destroys the graph. */
fbx_ir_graph *fbx_test_graph_kv(bool decoder, int64_t S0, int64_t P0, const float *W);

#endif
