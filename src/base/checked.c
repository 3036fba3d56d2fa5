#include "checked.h"

#include <stdio.h>
#include <string.h>

bool fbx_dims_numel(const int64_t *dims, int rank, int64_t *out) {
  if (rank < 0 || (rank > 0 && !dims)) return false;
  int64_t nonzero = 1; /* product of the non-zero dims: must fit even when a dim is 0 */
  bool zero = false;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return false;
    if (dims[i] == 0) zero = true;
    else if (!fbx_i64_mul(nonzero, dims[i], &nonzero)) return false;
  }
  *out = zero ? 0 : nonzero;
  return true;
}

char *fbx_shape_str(const int64_t *dims, int rank, char *buf, size_t cap) {
  if (!buf || cap < 8) return buf;
  size_t n = 0;
  buf[n++] = '[';
  for (int i = 0; i < rank && dims; i++) {
    char d[32];
    int k = snprintf(d, sizeof d, "%s%lld", i ? "x" : "", (long long)dims[i]);
    if (k < 0 || n + (size_t)k + 2 > cap) {
      if (n + 5 <= cap) { memcpy(buf + n, "...]", 5); return buf; }
      break;
    }
    memcpy(buf + n, d, (size_t)k);
    n += (size_t)k;
  }
  buf[n++] = ']';
  buf[n] = 0;
  return buf;
}

fbx_status *fbx_shape_numel_checked(const int64_t *dims, int rank, const char *what, int64_t *out) {
  if (fbx_dims_numel(dims, rank, out)) return NULL;
  char s[160];
  fbx_shape_str(dims, rank, s, sizeof s);
  for (int i = 0; i < rank && dims; i++)
    if (dims[i] < 0) return FBX_ERR_ARG("shape %s of %s: dim %d is negative", s, what ? what : "a tensor", i);
  return FBX_ERR_ARG("shape %s of %s: element count overflows int64", s, what ? what : "a tensor");
}

fbx_status *fbx_shape_bytes_checked(const int64_t *dims, int rank, size_t elem_size, const char *what,
                                    size_t *out) {
  int64_t n;
  FBX_TRY(fbx_shape_numel_checked(dims, rank, what, &n));
  size_t b;
  if (!fbx_size_mul((size_t)n, elem_size, &b) || (uint64_t)b > FBX_TENSOR_MAX_BYTES) {
    char s[160];
    fbx_shape_str(dims, rank, s, sizeof s);
    return FBX_ERR_ARG("shape %s of %s: %lld elements of %zu bytes exceed the %llu-byte tensor limit", s,
                       what ? what : "a tensor", (long long)n, elem_size, (unsigned long long)FBX_TENSOR_MAX_BYTES);
  }
  *out = b;
  return NULL;
}
