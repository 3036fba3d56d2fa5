/* NVTX v3 ranges (header-only; the injection library is found at run time
 * by Nsight). Without the headers at build time these are empty. */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#if defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define FBX_HAVE_NVTX 1
#endif
#endif

void fbx_trace_nvtx_push(const char *name) {
  if (__builtin_expect(!(fbx_trace_flags() & FBX_TRACE_F_NVTX), 1)) return;
#ifdef FBX_HAVE_NVTX
  nvtxRangePushA(name ? name : "fusebox");
#else
  (void)name;
#endif
}

void fbx_trace_nvtx_pop(void) {
  if (__builtin_expect(!(fbx_trace_flags() & FBX_TRACE_F_NVTX), 1)) return;
#ifdef FBX_HAVE_NVTX
  nvtxRangePop();
#endif
}

#else
typedef int fbx__trace_nvtx_compiled_out;
#endif
