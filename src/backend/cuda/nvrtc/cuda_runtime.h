/* For NVRTC only (embedded, see CMakeLists.txt): what cuda_kernels.h needs of
 * the runtime header when it is read by a generated kernel (the stream type
 * in the launchers' prototypes). */
#ifndef FBX_NVRTC_CUDA_RUNTIME_H
#define FBX_NVRTC_CUDA_RUNTIME_H
typedef struct CUstream_st *cudaStream_t;
#endif
