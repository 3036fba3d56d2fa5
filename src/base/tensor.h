/* fbx_tensor: the tensor view every layer below the EP passes around (shape
 * inference, the executor, the backends). It lives here, under all of them,
 * so the IR does not include a backend header for a type. */
#ifndef FBX_BASE_TENSOR_H
#define FBX_BASE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

/* A strided-free, row-major tensor view. data points into backend memory
 * (a device buffer of the backend the tensor is handed to) or, where a
 * comment says so, host memory. Rank -1: an absent optional value. */
typedef struct fbx_tensor {
  fbx_dtype dtype;
  int rank;
  int64_t dims[FBX_MAX_RANK];
  void *data;
} fbx_tensor;

/* Element count (0 for rank < 0 or an invalid shape) and byte size (0 on overflow). */
int64_t fbx_tensor_numel(const fbx_tensor *t);
size_t fbx_tensor_nbytes(const fbx_tensor *t);

#endif
