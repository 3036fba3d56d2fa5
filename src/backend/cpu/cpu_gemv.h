/* Internal pieces of the f32 GEMV (cpu_gemv.c, cpu_gemv_avx512.c) shared by
 * its files only; the GEMV entry points are in cpu_internal.h. */
#ifndef FBX_BACKEND_CPU_GEMV_H
#define FBX_BACKEND_CPU_GEMV_H

#include <stdint.h>

/* Software prefetch distance of the packed GEMV, in 64-byte lines ahead of the
 * line being read (one line = one k row of a 16-column panel). 2 KiB: far
 * enough to cover ~100 ns of DRAM latency at 20-30 GB/s per core, near enough
 * that a chunk's start is not all misses (bench/RESULTS.md, "gemv32"). */
#ifndef FBX_CPU_GEMV_PF_LINES
#define FBX_CPU_GEMV_PF_LINES 32
#endif

/* y[p*16 .. ) for the 16-column panels [p0, p1) of the packed B (cpu_internal.h
 * layout): y = alpha * x(K) @ B, the last panel's columns past N not stored.
 * AVX-512F: one zmm load per k row, the x broadcast folded into the FMA. */
void fbx_cpu_gemv_panels_avx512(const float *x, const float *packed, float *y, int64_t K, int64_t N, float alpha,
                                int64_t p0, int64_t p1);

#endif
