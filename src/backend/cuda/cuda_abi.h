/* The one C entry point between the loader (src/backend/backend_cuda_loader.c,
 * inside libfusebox_ep.so) and libfusebox_cuda.so. The two are separate
 * builds that share struct layouts (fbx_ir_node, fbx_tensor, the vtable), so
 * the loader passes the sizes it was compiled with and the library refuses a
 * mismatch instead of misreading memory.
 *
 * Statuses cross the boundary as they are: both sides allocate them with the
 * same libc malloc, and a static status carries its own flag. */
#ifndef FBX_BACKEND_CUDA_ABI_H
#define FBX_BACKEND_CUDA_ABI_H

#include "../backend_cuda.h"

#define FBX_CUDA_ABI_VERSION 1
#define FBX_CUDA_ENTRY_SYMBOL "fbx_cuda_entry_get"

typedef struct fbx_cuda_abi_check {
  int version;                 /* FBX_CUDA_ABI_VERSION */
  int op_count;                /* FBX_IR_OP_COUNT */
  size_t sz_node, sz_params, sz_tensor, sz_vtable;
} fbx_cuda_abi_check;

typedef struct fbx_cuda_entry {
  fbx_status *(*open)(const fbx_cuda_options *opt, fbx_backend **out);
  bool (*supports)(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs,
                   char *reason, size_t reason_size);
  /* CUDA devices this process sees (0 with no driver or GPU); may be NULL in an older library */
  int (*device_count)(void);
} fbx_cuda_entry;

typedef fbx_status *(*fbx_cuda_entry_get_fn)(const fbx_cuda_abi_check *check, fbx_cuda_entry *out);

#define FBX_CUDA_ABI_CHECK_INIT                                                                  \
  {FBX_CUDA_ABI_VERSION, FBX_IR_OP_COUNT, sizeof(fbx_ir_node), sizeof(fbx_ir_params),             \
   sizeof(fbx_tensor), sizeof(fbx_backend_vtable)}

#endif
