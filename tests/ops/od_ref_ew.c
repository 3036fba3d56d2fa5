// od_ref_ew.c — reference for Add/Sub/Mul/Div/Max/Min/Pow on integer tensors (numpy
// broadcasting; results wrap to the dtype's width). Div truncates toward zero, as C and ORT
// do; a zero divisor or a negative exponent is outside this reference (the generators avoid
// both).
#include "ops/od_ref.h"

#include <string.h>

// a op b in 64-bit wrapping arithmetic; 0 on success, -1 when undefined here.
static int od_ref_int_op(const char *op, int64_t a, int64_t b, int64_t *y) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  if (!strcmp(op, "Add")) *y = (int64_t)(ua + ub);
  else if (!strcmp(op, "Sub")) *y = (int64_t)(ua - ub);
  else if (!strcmp(op, "Mul")) *y = (int64_t)(ua * ub);
  else if (!strcmp(op, "Max")) *y = a > b ? a : b;
  else if (!strcmp(op, "Min")) *y = a < b ? a : b;
  else if (!strcmp(op, "Div")) {
    if (b == 0 || (a == INT64_MIN && b == -1)) return -1;
    *y = a / b;
  } else if (!strcmp(op, "Pow")) {
    if (b < 0) return -1;
    uint64_t p = 1;
    for (int64_t k = 0; k < b; k++) p *= ua;
    *y = (int64_t)p;
  } else {
    return -1;
  }
  return 0;
}

char *od_ref_int_binary(const od_case *c, fbx_host_tensor *y) {
  const fbx_host_tensor *a = od_ref_in(c, 0), *b = od_ref_in(c, 1);
  if (!a || !b || c->n_in != 2) return fbx_host_errf("%s reference: two inputs expected", c->op);
  if (!od_ref_is_int(a->dtype) || (strcmp(c->op, "Pow") && b->dtype != a->dtype) || !od_ref_is_int(b->dtype))
    return fbx_host_errf("%s reference: integer inputs of one dtype expected", c->op);
  int64_t od[FBX_HOST_MAX_RANK];
  int r = od_ref_bcast_shape(a->rank, a->dims, b->rank, b->dims, od);
  if (r < 0) return fbx_host_errf("%s reference: shapes do not broadcast", c->op);
  char *e = fbx_host_tensor_alloc(y, "y0", a->dtype, r, od);
  if (e) return e;
  size_t n = fbx_host_tensor_numel(y);
  for (size_t i = 0; i < n; i++) {
    int64_t va = od_ref_load(a, od_ref_bcast_offset(a->rank, a->dims, r, od, i));
    int64_t vb = od_ref_load(b, od_ref_bcast_offset(b->rank, b->dims, r, od, i)), v;
    if (od_ref_int_op(c->op, va, vb, &v))
      return fbx_host_errf("%s reference: %lld, %lld is outside it", c->op, (long long)va, (long long)vb);
    od_ref_store(y, i, v);
  }
  return NULL;
}
