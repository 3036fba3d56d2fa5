// ref_bcast.c — numpy broadcasting for the naive references (see ref_bcast.h).
#include "common/ref_bcast.h"

size_t od_ref_bcast_offset(int r, const int64_t *dims, int out_rank, const int64_t *out_dims, size_t flat) {
  size_t off = 0, stride = 1;
  for (int k = out_rank - 1; k >= 0; k--) {
    size_t ik = flat % (size_t)out_dims[k];
    flat /= (size_t)out_dims[k];
    int j = k - (out_rank - r);
    if (j < 0) continue;
    if (dims[j] != 1) off += ik * stride;
    stride *= (size_t)dims[j];
  }
  return off;
}

int od_ref_bcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int64_t *out) {
  int r = ra > rb ? ra : rb;
  for (int k = 0; k < r; k++) {
    int ia = k - (r - ra), ib = k - (r - rb);
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return -1;
    out[k] = da == 1 ? db : da;
  }
  return r;
}
