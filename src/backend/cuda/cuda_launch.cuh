// Kernel launches of the CUDA backend's .cu files, and the grid size helper
// they share.
//
// Programmatic dependent launch (sm_90): with fbx_cuda_pdl set (default;
// FUSEBOX_CUDA_PDL=0 turns it off), fbx::launch enqueues a kernel with
// programmatic stream serialization, so its blocks may start while the
// kernel before it on the stream is still running: a decode step is a chain
// of ~10 latency-bound kernels a layer, and this overlaps each one's launch
// and prologue with the tail of the one before (inside a CUDA graph too: the
// capture records programmatic edges). It is safe only because every kernel
// launched here begins with fbx::pdl_enter(), or with read-only prefetches
// of constants (weights) and then pdl_enter: griddepcontrol.wait returns once
// the kernel before has completed and its writes are visible, so nothing a
// kernel reads or writes in global memory can race with its predecessor.
// Every block waits, also one that has no work (a block that left without
// waiting could let its grid complete before its predecessor, and the
// kernel after would no longer be ordered behind that predecessor).
// launch_dependents then lets the next kernel's blocks be scheduled.
// Kernels launched any other way (cuBLAS, copies) keep full serialization:
// the attribute is set on the launch of the kernel that may start early.
#ifndef FBX_CUDA_LAUNCH_CUH
#define FBX_CUDA_LAUNCH_CUH

#include <utility>

#include "cuda_kernels.h"

namespace fbx {

// blocks of 256 threads for n elements, for grid-stride loops (at least 1, at most 1M)
inline unsigned grid_for(long long n) {
  long long b = (n + 255) / 256;
  return (unsigned)(b > 65535LL * 16 ? 65535LL * 16 : (b < 1 ? 1 : b));
}

// waits for the kernel before on the stream (complete, writes visible); a no-op when
// this kernel was launched without programmatic serialization
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
// lets the next kernel on the stream start its blocks (they wait in pdl_wait)
__device__ __forceinline__ void pdl_release() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
// the first statement of every kernel launched through fbx::launch
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_release();
}
// an L2 prefetch of the 128-byte line at p (read-only data, before pdl_wait)
__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// kernel<<<grid, block, smem, s>>>(args...), with programmatic stream serialization
// when fbx_cuda_pdl is set; the launch's error is also left for cudaGetLastError
template <typename... P, typename... A>
cudaError_t launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A &&...args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = fbx_cuda_pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

}  // namespace fbx

#endif
