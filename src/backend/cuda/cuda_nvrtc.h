/* NVRTC for the CUDA backend's generated kernels: loaded at run time
 * (dlopen libnvrtc.so.13, so libfusebox_cuda.so loads where it is absent),
 * compiling CUDA C to a cubin for one architecture, with an on-disk cache so
 * a later process loads the cubin instead of compiling again.
 *
 * Host-only (no CUDA runtime calls): built into libfusebox_cuda.so and into
 * tests/backend/test_cuda_nvrtc.c, which compiles generated kernels on a
 * machine without a GPU. */
#ifndef FBX_CUDA_NVRTC_H
#define FBX_CUDA_NVRTC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../base/status.h"

/* A header a generated kernel includes, embedded at build time
 * (cmake/fbx_embed.cmake: cuda_kernels.h, ir_ops.h, cuda_ew_ops.cuh). */
typedef struct fbx_cuda_embedded {
  const char *name; /* as written in #include "..." */
  const char *text;
} fbx_cuda_embedded;
extern const fbx_cuda_embedded fbx_cuda_embedded_headers[];
extern const int fbx_cuda_n_embedded_headers;

/* NVRTC is loadable and FUSEBOX_CUDA_NVRTC is not "off". Otherwise false and
 * why (static text). Loaded once per process. */
bool fbx_cuda_nvrtc_available(const char **why);

/* The cubin of src for sm_<arch> (e.g. 90). The disk cache is asked first
 * (<cache dir>/nvrtc/<hash>.fbxk, the whole source kept in the file and
 * compared, so a hash collision can never load a wrong kernel); after a
 * compile the cubin is written there (best effort: an unwritable cache dir
 * only costs the next process a compile). *cubin is malloc'd; the caller
 * frees it. *from_disk: the cubin came from the disk cache. Compile errors
 * return a status holding NVRTC's log. */
fbx_status *fbx_cuda_nvrtc_cubin(const char *src, int arch, void **cubin, size_t *size, bool *from_disk);

/* The disk cache folder: $FUSEBOX_CACHE_DIR, else $XDG_CACHE_HOME/fusebox,
 * else $HOME/.cache/fusebox, each + "/nvrtc"; NULL when FUSEBOX_CACHE_DIR is
 * "off" or no folder can be named. Static storage. */
const char *fbx_cuda_nvrtc_cache_dir(void);

/* Process-wide counts since load (tests and the trace). */
typedef struct fbx_cuda_nvrtc_stats {
  int64_t compiles, disk_hits, disk_writes, failures;
} fbx_cuda_nvrtc_stats;
fbx_cuda_nvrtc_stats fbx_cuda_nvrtc_stats_get(void);

#endif
