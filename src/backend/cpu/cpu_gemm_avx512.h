/* AVX-512F GEMM micro-kernels (cpu_gemm_avx512.c), used by cpu_conv_gemm.c
 * and cpu_gemv.c when fbx_cpu_avx512_enabled(). Same packed 16-column panel
 * layouts as the AVX2 kernels (see cpu_internal.h). */
#ifndef FBX_BACKEND_CPU_GEMM_AVX512_H
#define FBX_BACKEND_CPU_GEMM_AVX512_H

#include <stdint.h>

/* 1 when the CPU has AVX-512F/BW/VL/DQ and FUSEBOX_AVX512 is not "0"
 * (CPUID checked once per process). */
int fbx_cpu_avx512_enabled(void);
/* fbx_cpu_conv_gemm (koff NULL, b = bpk) / fbx_cpu_conv_gemm_off (b = xb); acc 1:
 * Y += W @ B (bias ignored: a later K chunk), 0: Y = W @ B + bias. */
void fbx_cpu_conv_gemm_avx512(const float *w, int64_t ldw, const float *bias, const float *b, const int32_t *koff,
                              int64_t K, int64_t width, int64_t m0, int64_t m1, float *y, int64_t ldy, int acc);
/* Units [u0, u1) of the 2-D split of fbx_cpu_gemm_packed (unit u: columns of
 * panel pair u / ns, rows of sliver u % ns of ns = ceil(M/12) balanced ones). */
void fbx_cpu_gemm_packed_units_avx512(const float *a, int64_t lda, const float *packed, float *y, int64_t ldy,
                                      int64_t M, int64_t K, int64_t N, float alpha, int64_t ns, int64_t u0,
                                      int64_t u1);

#endif
