/* Kernels generated for one elementwise launch (cuda_ew_gen.c): the fused
 * program's instructions, every input's and the output's kind, which inputs
 * share the output's shape, the rank and the index width are baked into
 * CUDA C that calls cuda_ew_ops.cuh's exec() with literal instructions, so
 * NVRTC folds the interpreter's switches away and keeps the program in
 * registers. Sizes, strides and pointers stay parameters (fbx_cuda_ew_args),
 * so one kernel serves every shape with the same broadcast pattern.
 * Host-only: no CUDA runtime calls. */
#ifndef FBX_CUDA_EW_GEN_H
#define FBX_CUDA_EW_GEN_H

#include <stdbool.h>
#include <stddef.h>

#include "../../base/status.h"
#include "cuda_kernels.h"

/* The name of the generated kernel's entry point. */
#define FBX_CUDA_EW_GEN_ENTRY "fbx_ew_gen"

/* Largest key (bytes). */
#define FBX_CUDA_EW_GEN_KEY_MAX (64 + 2 * FBX_CUDA_EW_MAX_IN + 32 * FBX_CUDA_EW_MAX_REGS)

/* True when every element index and input offset of a fits in 31 bits
 * (the generated kernel then does its index arithmetic in int). */
bool fbx_cuda_ew_gen_idx32(const fbx_cuda_ew_args *a);

/* The specialisation key of (a, prog[a->n_ins], idx32): equal keys = the same
 * generated kernel. Writes at most FBX_CUDA_EW_GEN_KEY_MAX bytes; returns the length. */
size_t fbx_cuda_ew_gen_key(const fbx_cuda_ew_args *a, const fbx_cuda_ew_ins *prog, bool idx32, unsigned char *key);

/* The CUDA C of that kernel, NUL-terminated, malloc'd (the caller frees). */
fbx_status *fbx_cuda_ew_gen_source(const fbx_cuda_ew_args *a, const fbx_cuda_ew_ins *prog, bool idx32, char **src);

#endif
