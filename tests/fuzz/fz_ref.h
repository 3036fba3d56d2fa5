// fz_ref — the fuzz target's independent reference: the generated graph (fz_model's recorded
// nodes, fz_gen.h) evaluated node by node, in graph order.
//
// A node whose op has a naive implementation here (written from the ONNX operator spec and
// numpy, plain loops in double; fz_ref_ops.c) is computed from the reference's own input
// values. Those are the ops the hostile classes make ORT and the spec part on, and the ops
// that most often consume their results: elementwise unary and binary ops, Clip, Slice, Pad,
// the pools, ConstantOfShape, reductions, Softmax/LogSoftmax, data movement (Reshape,
// Flatten, Unsqueeze, Transpose, Concat, Gather, Identity), Cast to float64/bool.
// Any other node (MatMul, Conv, norms, TopK, ...) takes ORT's output for it, but only where
// the reference's values of all its inputs equal ORT's (so ORT ran it on the same numbers:
// ORT's CPU EP is the oracle for ops where no class makes it part from the spec). Where they
// differ, or ORT has no outputs, or a naive op declines (an input the spec calls invalid), the
// reference has no value for the node and none for the graph.
#ifndef FBX_TESTS_FUZZ_FZ_REF_H
#define FBX_TESTS_FUZZ_FZ_REF_H

#include <stddef.h>

#include "common/ort_host.h"
#include "fz_gen.h"

// The reference's values of the graph outputs names[0..n) (every node output of a generated
// graph is a graph output, in graph order). ort[0..n_ort): ORT's outputs (found by name), or
// NULL when ORT did not run. Returns a heap array of n tensors (free with
// fbx_host_tensors_free), or NULL when the reference cannot give every output; then *why
// (a static string or into buf) says which node stopped it.
fbx_host_tensor *fz_ref_run(const fz_model *m, const fbx_host_tensor *ort, size_t n_ort, const char *const *names,
                            size_t n, char *why, size_t cap);

// ---- shared by fz_ref.c and fz_ref_ops.c ----

// One naive op: y[0..node->n_out) allocated here (names set by the caller). NULL ok; else a
// static reason (the op is not implemented here, or declines these inputs).
typedef const char *(*fz_ref_fn)(const fz_rnode *node, const fbx_host_tensor *const *x, int n_x, fbx_host_tensor *y);
// The naive implementation of op, or NULL.
fz_ref_fn fz_ref_lookup(const char *op);

#endif  // FBX_TESTS_FUZZ_FZ_REF_H
