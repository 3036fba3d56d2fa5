// fanin_model — writes the "N independent pieces into one unclaimed node" model (issue 8,
// defect 8) as an ONNX file, without python: used by tests/e2e/test_e2e_partition.c and
// bench/bench_partition.c.
//
//   X: float (1, W)        A_i = Add(X, c_i)  for i in 0..n-1, c_i a scalar initializer = i
//   Y = Concat(A_0 .. A_{n-1}, axis=1): float (1, n*W), so Y[0, i*W + j] = X[0, j] + i
//
// Fusebox claims every Add but declines a Concat of more than 64 inputs, so with n > 64 the
// Adds are n independent claimed pieces that all feed one node ORT runs itself.
#ifndef FBX_TESTS_FANIN_MODEL_H
#define FBX_TESTS_FANIN_MODEL_H

// Writes the model to path (opset 17). Returns NULL or a heap message (free with free()).
char *fbx_fanin_model_write(const char *path, int n, int width);

#endif
