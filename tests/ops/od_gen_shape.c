// od_gen_shape.c — generators for the data-movement ops (any dtype).
#include "ops/od_gen.h"

#include <math.h>
#include <string.h>

void od_gen_transpose(od_case *c, od_rng *r) {
  c->op = "Transpose";
  c->opset = 13;
  int rank = od_int(r, 1, 5);
  int64_t d[5], perm[5];
  od_shape(r, rank, d, 1, 6);
  for (int i = 0; i < rank; i++) perm[i] = i;
  for (int i = rank - 1; i > 0; i--) {
    int j = od_int(r, 0, i);
    int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
  }
  od_in(c, r, od_any_dtype(r), rank, d, 0);
  od_aints(c, "perm", perm, rank);
  c->n_out = 1;
}

void od_gen_concat(od_case *c, od_rng *r) {
  c->op = "Concat";
  c->opset = 13;
  int rank = od_int(r, 1, 4), n = od_int(r, 2, 3), dt = od_any_dtype(r);
  int axis = od_int(r, 0, rank - 1);
  int64_t d[4];
  od_shape(r, rank, d, 1, 5);
  for (int i = 0; i < n; i++) {
    d[axis] = od_int(r, 1, 4);
    od_in(c, r, dt, rank, d, od_int(r, 0, 3) == 0);
  }
  od_ai(c, "axis", od_int(r, 0, 1) ? axis : axis - rank);
  c->n_out = 1;
}

void od_gen_slice(od_case *c, od_rng *r) {
  c->op = "Slice";
  c->opset = 13;
  int rank = od_int(r, 1, 4);
  int64_t d[4], st[4], en[4], ax[4], sp[4];
  od_shape(r, rank, d, 1, 8);
  od_in(c, r, od_any_dtype(r), rank, d, 0);
  int n = od_int(r, 1, rank);
  for (int i = 0; i < n; i++) {
    ax[i] = i;
    sp[i] = od_int(r, 0, 3) == 0 ? -od_int(r, 1, 2) : od_int(r, 1, 2);
    st[i] = od_int(r, -(int)d[i] - 1, (int)d[i]);
    en[i] = od_int(r, 0, 5) == 0 ? (sp[i] > 0 ? INT64_MAX : INT64_MIN) : od_int(r, -(int)d[i] - 1, (int)d[i] + 1);
  }
  int init = od_int(r, 0, 2) != 0;
  od_i64s(c, st, n, init);
  od_i64s(c, en, n, init);
  od_i64s(c, ax, n, init);
  od_i64s(c, sp, n, init);
  c->n_out = 1;
}

void od_gen_reshape(od_case *c, od_rng *r) {
  int k = od_int(r, 0, 3);
  int rank = od_int(r, 1, 4);
  int64_t d[4];
  od_shape(r, rank, d, 1, 5);
  od_in(c, r, od_any_dtype(r), rank, d, 0);
  c->n_out = 1;
  if (k == 0) {
    c->op = "Reshape";
    c->opset = 14;
    int64_t s[2] = {-1, d[rank - 1]};
    od_i64s(c, s, 2, 1);
  } else if (k == 1) {
    c->op = "Flatten";
    c->opset = 13;
    od_ai(c, "axis", od_int(r, 0, rank));
  } else if (k == 2) {
    c->op = "Unsqueeze";
    c->opset = 13;
    int64_t a[1] = {od_int(r, -rank - 1, rank)};
    od_i64s(c, a, 1, 1);
  } else {
    c->op = "Expand";
    c->opset = 13;
    int64_t s[5] = {od_int(r, 1, 3)};
    for (int i = 0; i < rank; i++) s[i + 1] = d[i] == 1 ? od_int(r, 1, 3) : d[i];
    od_i64s(c, s, rank + 1, 1);
  }
}

void od_gen_gather(od_case *c, od_rng *r) {
  int elements = od_int(r, 0, 2) == 0;
  c->op = elements ? "GatherElements" : "Gather";
  c->opset = 13;
  int rank = od_int(r, 1, 4);
  int64_t d[4], id[4];
  od_shape(r, rank, d, 1, 6);
  int axis = od_int(r, 0, rank - 1);
  od_in(c, r, od_any_dtype(r), rank, d, 0);
  int ir;
  if (elements) {
    ir = rank;
    for (int i = 0; i < rank; i++) id[i] = i == axis ? od_int(r, 1, 5) : d[i];
  } else {
    ir = od_int(r, 0, 2);
    od_shape(r, ir, id, 1, 4);
  }
  fbx_host_tensor *ix = od_in(c, r, od_int(r, 0, 1) ? FBX_HOST_I64 : FBX_HOST_I32, ir, id, od_int(r, 0, 1));
  fbx_host_tensor_fill_int(ix, od_next(r), -d[axis], d[axis] - 1);
  od_ai(c, "axis", axis);
  c->n_out = 1;
}

