// od_ref — independent references for the differential harness: naive implementations,
// written from the ONNX operator spec in this folder, of the integer and quantized ops the
// generators make (ConvInteger, MatMulInteger, QLinearMatMul, QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, and Add/Sub/Mul/Div/Max/Min/Pow on integer tensors). ORT's CPU EP cannot be the only oracle for
// them: it has been seen to return wrong ConvInteger sums (int8 x uint8) on AMD EPYC.
// Plain loops, one element at a time, no cleverness: slow and obviously right is the point.
#ifndef FBX_TESTS_OD_REF_H
#define FBX_TESTS_OD_REF_H

#include <stddef.h>
#include <stdint.h>

#include "common/ref_bcast.h"
#include "ops/od_case.h"

// 1 when c's op (and input dtype) has a reference here.
int od_ref_has(const od_case *c);
// c's outputs: *out is a heap array of *n_out tensors (free with fbx_host_tensors_free). Error
// (heap) when c is outside what the reference implements -- a harness bug, since the
// generators and the references live together -- or out of memory.
char *od_ref_run(const od_case *c, fbx_host_tensor **out, size_t *n_out);

// ---- shared by the od_ref_*.c files ----

// One op's reference: fills y[0..its output count) (allocated here, owned by the caller).
typedef char *(*od_ref_fn)(const od_case *c, fbx_host_tensor *y);
char *od_ref_int_binary(const od_case *c, fbx_host_tensor *y);  // od_ref_ew.c
char *od_ref_quantize(const od_case *c, fbx_host_tensor *y);    // od_ref_quant.c
char *od_ref_dequantize(const od_case *c, fbx_host_tensor *y);
char *od_ref_dynquantize(const od_case *c, fbx_host_tensor *y);
char *od_ref_matmulint(const od_case *c, fbx_host_tensor *y);   // od_ref_intmm.c
char *od_ref_qlinearmatmul(const od_case *c, fbx_host_tensor *y);
char *od_ref_qlinearconv(const od_case *c, fbx_host_tensor *y);
char *od_ref_convint(const od_case *c, fbx_host_tensor *y);

// Input i, or NULL when absent (past n_in or rank -1).
const fbx_host_tensor *od_ref_in(const od_case *c, int i);
int od_ref_is_int(int dtype);  // (u)int8/16/32/64
// [lo, hi] of an 8-bit integer dtype; -1 for any other dtype.
int od_ref_q8_range(int dtype, int64_t *lo, int64_t *hi);
// saturate(round_half_even(v) + zp) into [lo, hi]: the requantization step the quantized ops share.
int64_t od_ref_requant(float v, int64_t zp, int64_t lo, int64_t hi);
// Exact integer element access (no detour through double); store wraps to the dtype's width.
int64_t od_ref_load(const fbx_host_tensor *t, size_t i);
void od_ref_store(fbx_host_tensor *t, size_t i, int64_t v);
// od_ref_bcast_offset / od_ref_bcast_shape: numpy broadcasting, shared with the fuzz
// target's reference (common/ref_bcast.h).

#endif
