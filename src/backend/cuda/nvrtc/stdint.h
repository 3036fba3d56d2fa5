/* For NVRTC only (embedded, see CMakeLists.txt): the fixed-width types
 * cuda_kernels.h names, without a host C library. */
#ifndef FBX_NVRTC_STDINT_H
#define FBX_NVRTC_STDINT_H
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#endif
