// ref_bcast — numpy broadcasting for the naive references of the differential harness
// (tests/ops/od_ref*.c) and of the fuzz target (tests/fuzz/fz_ref*.c).
#ifndef FBX_TESTS_COMMON_REF_BCAST_H
#define FBX_TESTS_COMMON_REF_BCAST_H

#include <stddef.h>
#include <stdint.h>

// Offset into a tensor of dims[r] of the element that numpy broadcasting maps output element
// `flat` of out_dims[out_rank] to (dims right-aligned against out_dims, size-1 dims repeat).
size_t od_ref_bcast_offset(int r, const int64_t *dims, int out_rank, const int64_t *out_dims, size_t flat);
// Broadcast shape of a[ra] and b[rb] into out (rank returned), or -1 when they do not broadcast.
int od_ref_bcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int64_t *out);

#endif
