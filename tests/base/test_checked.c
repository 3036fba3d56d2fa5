/* The checked-arithmetic helper (base/checked.h) and the allocation cap:
 *   - int64 / size_t add, sub, mul at and past the limits (against __int128 / hand values);
 *   - fbx_dims_numel: rank 0, zeros, negatives, the wrapping [2^62+1, 4] (product 4 mod 2^64),
 *     and [0, 2^62, 4] (count 0 but the non-zero product overflows: not valid);
 *   - the status messages name the shape, its owner and the reason;
 *   - fbx_shape_bytes_checked rejects more than FBX_TENSOR_MAX_BYTES;
 *   - fbx_malloc / fbx_calloc / fbx_malloc_aligned / fbx_malloc_huge of many TB return NULL
 *     instead of reaching malloc (which ASan aborts on), and the CPU backend's buffer_alloc of
 *     8 TiB (or SIZE_MAX, where the header arithmetic would wrap) fails with a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "base/checked.h"

#include "common/check.h"

static void check_i64(void) {
  int64_t r = 7;
  CHECK(fbx_i64_mul(INT64_MAX, 1, &r) && r == INT64_MAX, "INT64_MAX * 1");
  r = 7;
  CHECK(!fbx_i64_mul(INT64_MAX, 2, &r) && r == 7, "INT64_MAX * 2 must fail and leave *out");
  CHECK(!fbx_i64_mul(INT64_MIN, -1, &r), "INT64_MIN * -1 must fail");
  CHECK(!fbx_i64_mul((INT64_C(1) << 62) + 1, 4, &r), "(2^62+1) * 4 must fail");
  CHECK(fbx_i64_mul(-(INT64_C(1) << 62), 2, &r) && r == INT64_MIN, "-2^62 * 2 = INT64_MIN");
  CHECK(!fbx_i64_add(INT64_MAX, 1, &r), "INT64_MAX + 1 must fail");
  CHECK(fbx_i64_add(INT64_MIN, INT64_MAX, &r) && r == -1, "INT64_MIN + INT64_MAX = -1");
  CHECK(!fbx_i64_sub(INT64_MIN, 1, &r), "INT64_MIN - 1 must fail");
  CHECK(fbx_i64_sub(-1, INT64_MAX, &r) && r == INT64_MIN, "-1 - INT64_MAX = INT64_MIN");
  size_t s;
  CHECK(!fbx_size_mul(SIZE_MAX / 2 + 1, 2, &s), "size_t overflow must fail");
  CHECK(fbx_size_add(SIZE_MAX - 1, 1, &s) && s == SIZE_MAX, "SIZE_MAX - 1 + 1");
  CHECK(!fbx_size_add(SIZE_MAX, 1, &s), "SIZE_MAX + 1 must fail");
  /* a sweep against 128-bit products */
  const int64_t v[] = {0, 1, -1, 2, 3, 1 << 20, INT64_C(1) << 31, INT64_C(3037000499), INT64_C(3037000500),
                       INT64_C(1) << 62, INT64_MAX, INT64_MIN, -(INT64_C(1) << 32), INT64_MAX / 3};
  int n = (int)(sizeof v / sizeof v[0]), bad = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      __int128 p = (__int128)v[i] * v[j], q = (__int128)v[i] + v[j];
      bool pf = p >= INT64_MIN && p <= INT64_MAX, qf = q >= INT64_MIN && q <= INT64_MAX;
      int64_t a = 0, b = 0;
      bool pm = fbx_i64_mul(v[i], v[j], &a), qa = fbx_i64_add(v[i], v[j], &b);
      bad += pm != pf || (pm && a != (int64_t)p) || qa != qf || (qa && b != (int64_t)q);
    }
  CHECK(bad == 0, "%d products/sums disagree with __int128", bad);
}

static void check_numel(void) {
  int64_t n = -5;
  CHECK(fbx_dims_numel(NULL, 0, &n) && n == 1, "rank 0 is one element, got %lld", (long long)n);
  const int64_t a[] = {2, 3, 4};
  CHECK(fbx_dims_numel(a, 3, &n) && n == 24, "[2x3x4] = 24");
  const int64_t z[] = {5, 0, 7};
  CHECK(fbx_dims_numel(z, 3, &n) && n == 0, "[5x0x7] = 0");
  const int64_t neg[] = {5, -1};
  CHECK(!fbx_dims_numel(neg, 2, &n), "a negative dim is not valid");
  const int64_t wrap[] = {(INT64_C(1) << 62) + 1, 4};
  CHECK(!fbx_dims_numel(wrap, 2, &n), "[2^62+1, 4] wraps to 4: must fail");
  const int64_t zwrap[] = {0, INT64_C(1) << 62, 4};
  CHECK(!fbx_dims_numel(zwrap, 3, &n), "[0, 2^62, 4]: the non-zero product overflows, not valid");
  const int64_t big[] = {INT64_MAX};
  CHECK(fbx_dims_numel(big, 1, &n) && n == INT64_MAX, "[INT64_MAX] is countable");

  fbx_status *st = fbx_shape_numel_checked(wrap, 2, "Reshape 'r0' output 0", &n);
  const char *m = fbx_status_message(st);
  CHECK(st && fbx_status_code_of(st) == FBX_STATUS_INVALID_ARG, "overflow is INVALID_ARG");
  CHECK(st && strstr(m, "[4611686018427387905x4]") && strstr(m, "Reshape 'r0' output 0") &&
            strstr(m, "element count overflows int64"),
        "message names shape, owner, reason: %s", m);
  fbx_status_free(st);
  st = fbx_shape_numel_checked(neg, 2, NULL, &n);
  CHECK(st && strstr(fbx_status_message(st), "dim 1 is negative"), "negative message: %s", fbx_status_message(st));
  fbx_status_free(st);
  CHECK(!fbx_shape_numel_checked(a, 3, "x", &n) && n == 24, "valid shape passes");
}

static void check_bytes(void) {
  size_t b = 0;
  const int64_t ok[] = {1024, 1024, 256};
  CHECK(!fbx_shape_bytes_checked(ok, 3, 4, "x", &b) && b == (size_t)1 << 30, "1 GiB is fine");
  const int64_t edge[] = {INT64_C(1) << 38};
  fbx_status *st = fbx_shape_bytes_checked(edge, 1, 4, "x", &b);
  CHECK(!st && (uint64_t)b == FBX_TENSOR_MAX_BYTES, "exactly the limit is fine");
  fbx_status_free(st);
  const int64_t over[] = {(INT64_C(1) << 38) + 1};
  st = fbx_shape_bytes_checked(over, 1, 4, "ConstantOfShape 'c' output 0", &b);
  CHECK(st && strstr(fbx_status_message(st), "tensor limit") && strstr(fbx_status_message(st), "ConstantOfShape"),
        "one element past the limit must fail: %s", fbx_status_message(st));
  fbx_status_free(st);
  const int64_t wrapb[] = {INT64_C(1) << 61, 16}; /* count 2^65: overflow before bytes */
  st = fbx_shape_bytes_checked(wrapb, 2, 8, "y", &b);
  CHECK(st && strstr(fbx_status_message(st), "overflows int64"), "count overflow reported: %s", fbx_status_message(st));
  fbx_status_free(st);
  const int64_t bytewrap[] = {INT64_C(1) << 62}; /* count fits, x8 bytes wraps size_t */
  st = fbx_shape_bytes_checked(bytewrap, 1, 8, "y", &b);
  CHECK(st != NULL, "byte-size overflow must fail");
  fbx_status_free(st);
  char s[16];
  const int64_t longs[] = {123456789, 123456789, 123456789};
  fbx_shape_str(longs, 3, s, sizeof s);
  CHECK(strlen(s) < sizeof s && strstr(s, "...]"), "long shape cut: %s", s);
}

static void check_alloc_cap(void) {
  size_t huge = (size_t)FBX_TENSOR_MAX_BYTES + 1, tb8 = (size_t)8 << 40;
  void *p = fbx_malloc(tb8);
  CHECK(p == NULL, "fbx_malloc(8 TiB) must return NULL");
  fbx_free(p);
  p = fbx_malloc_aligned(huge);
  CHECK(p == NULL, "fbx_malloc_aligned(1 TiB + 1) must return NULL");
  fbx_free_aligned(p);
  p = fbx_malloc_huge(tb8);
  CHECK(p == NULL, "fbx_malloc_huge(8 TiB) must return NULL");
  fbx_free_aligned(p);
  p = fbx_calloc(SIZE_MAX / 2, 4);
  CHECK(p == NULL, "fbx_calloc with an overflowing product must return NULL");
  fbx_free(p);
  p = fbx_realloc(NULL, tb8);
  CHECK(p == NULL, "fbx_realloc(8 TiB) must return NULL");
  fbx_free(p);
  p = fbx_malloc(64);
  CHECK(p != NULL, "a small allocation still works");
  fbx_free(p);

  fbx_cpu_options o = {.threads = 1};
  fbx_backend *be = NULL;
  fbx_status *st = fbx_cpu_backend_create(&o, &be);
  CHECK(!st, "cpu backend: %s", fbx_status_message(st));
  fbx_status_free(st);
  if (!be) return;
  const size_t sizes[2] = {tb8, SIZE_MAX};
  for (int i = 0; i < 2; i++) {
    void *b = NULL;
    st = be->vt->buffer_alloc(be, sizes[i], &b);
    CHECK(st && !b && strstr(fbx_status_message(st), "tensor limit"), "buffer_alloc(%zu): %s", sizes[i],
          st ? fbx_status_message(st) : "succeeded");
    fbx_status_free(st);
  }
  void *b = NULL;
  st = be->vt->buffer_alloc(be, 4096, &b);
  CHECK(!st && b, "buffer_alloc(4096) still works");
  fbx_status_free(st);
  if (b) be->vt->buffer_free(be, b);
  fbx_backend_destroy(be);
}

int main(void) {
  check_i64();
  check_numel();
  check_bytes();
  check_alloc_cap();
  printf("checked: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
