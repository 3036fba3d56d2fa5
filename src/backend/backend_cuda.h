/* The CUDA backend, seen from the engine: a loader that dlopens
 * libfusebox_cuda.so (built only where the CUDA toolkit is found) so that
 * libfusebox_ep.so itself never links CUDA and still loads on machines with
 * no driver or GPU. Everything here fails with a status that names the
 * device ("Fusebox: device 'cuda': ...") when the library, the driver or
 * the GPU is absent. */
#ifndef FBX_BACKEND_CUDA_H
#define FBX_BACKEND_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"

typedef struct fbx_cuda_options {
  int device_id;         /* CUDA device ordinal, >= 0 */
  bool tf32;             /* allow TF32 tensor-core math in fp32 GEMMs (default off: fp32 stays fp32) */
  const char *library;   /* path of libfusebox_cuda.so; NULL = next to the module holding the loader */
} fbx_cuda_options;

/* Opens the library (once per process; it stays loaded) and creates a
 * backend on device opt->device_id. *out is destroyed with
 * fbx_backend_destroy. Errors: library missing or built from another tree,
 * no driver, no GPU, bad device id. */
fbx_status *fbx_cuda_backend_open(const fbx_cuda_options *opt, fbx_backend **out);

/* How many CUDA devices this process sees: loads the library (once) and asks
 * the runtime. 0 when the library, the driver or a GPU is missing; *why (may
 * be NULL) then gets the reason (owned by the caller, fbx_status_free). */
int fbx_cuda_device_count(fbx_status **why);

/* Whether a backend from fbx_cuda_backend_open has a kernel for this node with
 * these input shapes/dtypes (inputs[i].data may be NULL: only dtype and shape
 * are read). On false, reason (size reason_size, may be NULL) gets a sentence
 * naming the device and what is missing. */
bool fbx_cuda_backend_supports(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *inputs,
                               int n_inputs, char *reason, size_t reason_size);

#endif
