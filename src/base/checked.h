/* Checked arithmetic for element counts, byte counts and shape sizes.
 *
 * Every element count and byte count Fusebox computes from dims goes through
 * here, so a hostile shape (a Reshape target [2^62+1, 4] whose product wraps
 * to 4) is an error with a message instead of a wrapped number that a kernel
 * later walks off the end of.
 *
 * What "a valid shape" means (the invariant shape inference enforces on every
 * value it produces, so kernels may multiply any subset of dims freely):
 *   - every dim is >= 0;
 *   - the product of the NON-ZERO dims fits in int64 (a dim of 0 makes the
 *     element count 0, but outer * inner products that skip it must not wrap);
 *   - element count * element size <= FBX_TENSOR_MAX_BYTES. */
#ifndef FBX_BASE_CHECKED_H
#define FBX_BASE_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Largest tensor (and largest single allocation) Fusebox makes: 1 TiB.
 * Larger requests are errors, not a malloc that the OS (or ASan) aborts on. */
#define FBX_TENSOR_MAX_BYTES ((uint64_t)1 << 40)

/* a * b, a + b, a - b into *out; false (and *out untouched) on int64 overflow. */
static inline bool fbx_i64_mul(int64_t a, int64_t b, int64_t *out) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
static inline bool fbx_i64_add(int64_t a, int64_t b, int64_t *out) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
static inline bool fbx_i64_sub(int64_t a, int64_t b, int64_t *out) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
static inline bool fbx_size_mul(size_t a, size_t b, size_t *out) {
  size_t r;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
static inline bool fbx_size_add(size_t a, size_t b, size_t *out) {
  size_t r;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

/* Element count of dims[0..rank) (1 for rank 0). False when a dim is negative
 * or the shape is not valid in the sense above; *out is then untouched. */
bool fbx_dims_numel(const int64_t *dims, int rank, int64_t *out);

/* The same as a status: NULL and *out set, or FBX_STATUS_INVALID_ARG naming
 * the shape and its owner, e.g.
 *   "shape [4611686018427387905x4] of Reshape 'r0': element count overflows int64".
 * what: who owns the shape ("Reshape 'r0' output 0"); NULL reads "a tensor". */
fbx_status *fbx_shape_numel_checked(const int64_t *dims, int rank, const char *what, int64_t *out);

/* Byte size numel * elem_size, also checked against FBX_TENSOR_MAX_BYTES. */
fbx_status *fbx_shape_bytes_checked(const int64_t *dims, int rank, size_t elem_size, const char *what,
                                    size_t *out);

/* "[2x3x4]" into buf (cap >= 8; long shapes are cut with "..."); returns buf. */
char *fbx_shape_str(const int64_t *dims, int rank, char *buf, size_t cap);

#endif
