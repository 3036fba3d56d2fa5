// od_model — a case written as a one-node ONNX ModelProto file (see pb_writer.h), and the
// output dtypes of a case's op.
#ifndef FBX_TESTS_OD_MODEL_H
#define FBX_TESTS_OD_MODEL_H

#include "ops/od_case.h"

// Output dtypes of c's node into dt[0..c->n_out): derived per op here, since the model has to
// state them before any session could tell.
void od_out_dtypes(const od_case *c, int *dt);
// Write c's model (inputs x<i>, outputs y<i> of dtypes out_dtypes) to path. 0 on success, -1 if
// out of memory or the file cannot be written.
int od_model_write(const od_case *c, const int *out_dtypes, const char *path);

#endif
