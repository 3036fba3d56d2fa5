// partition_models — two models that stress how Fusebox partitions a graph (issue 8, defect 8),
// written as ONNX files without python: used by tests/e2e/test_e2e_partition.c and
// bench/bench_partition.c. Both return NULL or a heap message (free with free()); opset 17.
#ifndef FBX_TESTS_PARTITION_MODELS_H
#define FBX_TESTS_PARTITION_MODELS_H

// N independent pieces into one node Fusebox leaves to ORT:
//   X: float (1, W)        A_i = Add(X, c_i)  for i in 0..n-1, c_i a scalar initializer = i
//   Y = Concat(A_0 .. A_{n-1}, axis=1): float (1, n*W), so Y[0, i*W + j] = X[0, j] + i
// Fusebox claims every Add but declines a Concat of more than 64 inputs, so with n > 64 the
// Adds are n independent claimed pieces that all feed one node ORT runs itself.
char *fbx_fanin_model_write(const char *path, int n, int width);

// N pieces that may not merge: a chain alternating a claimed and an unclaimed node,
//   X: float (2, W)   Y_0 = X;  Y_{i+1} = ReverseSequence(Add(Y_i, c_i), lens)  for i in 0..n-1
// c_i a scalar initializer = i, lens = W copies of 2 (batch_axis 1, time_axis 0): each
// ReverseSequence (which Fusebox does not claim) swaps the two rows. Every Add is its own
// group, and no two may merge (a ReverseSequence lies between any two).
char *fbx_chain_model_write(const char *path, int n, int width);

#endif
