// fz_model.h — build a multi-node ONNX ModelProto in memory from C (header-only, on top of
// tests/ops/pb_writer.h). Used by the fuzz target (tests/fuzz/fuzz_model.c) and by
// tests/tools/test_check_all_tensors.c.
//
//   fzm b; fzm_begin(&b);
//   fzm_input(&b, "x", FBX_HOST_F32, 2, (int64_t[]){4, 8});
//   fzm_init(&b, "w", FBX_HOST_F32, 2, dims, data, nbytes);
//   fzm_node(&b, "MatMul", "mm", (const char *[]){"x", "w"}, 2, (const char *[]){"y"}, 1, NULL, 0);
//   fzm_output(&b, "y", FBX_HOST_F32);           // 0: no type (ORT infers it)
//   unsigned char *p; size_t n; fzm_end(&b, 17, &p, &n);  // p heap (free()), NULL on OOM
//
// Field numbers are those of onnx.proto (see pb_writer.h); AttributeProto floats = 7, ints = 8.
#ifndef FBX_TESTS_FUZZ_FZ_MODEL_H
#define FBX_TESTS_FUZZ_FZ_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "ops/pb_writer.h"

enum { FZM_ATTR_FLOAT = 1, FZM_ATTR_INT = 2, FZM_ATTR_STRING = 3, FZM_ATTR_FLOATS = 6, FZM_ATTR_INTS = 7 };

typedef struct fzm_attr {
  const char *name;
  int type;             // FZM_ATTR_*
  float f;
  int64_t i;
  const char *s;
  const int64_t *ints;  // FZM_ATTR_INTS
  const float *floats;  // FZM_ATTR_FLOATS
  int n;                // element count of ints/floats
} fzm_attr;

typedef struct fzm {
  pbw g;  // the GraphProto being written
} fzm;

static void fzm_begin(fzm *b) { memset(b, 0, sizeof *b); }

static void fzm_node(fzm *b, const char *op, const char *name, const char *const *ins, int n_in,
                     const char *const *outs, int n_out, const fzm_attr *at, int n_at) {
  pbw n = {0};
  for (int i = 0; i < n_in; i++) pbw_str(&n, 1, ins[i] ? ins[i] : "");
  for (int i = 0; i < n_out; i++) pbw_str(&n, 2, outs[i]);
  pbw_str(&n, 3, name);
  pbw_str(&n, 4, op);
  for (int i = 0; i < n_at; i++) {
    const fzm_attr *a = &at[i];
    pbw x = {0};
    pbw_str(&x, 1, a->name);
    if (a->type == FZM_ATTR_FLOAT) pbw_f32(&x, 2, a->f);
    else if (a->type == FZM_ATTR_INT) pbw_int(&x, 3, a->i);
    else if (a->type == FZM_ATTR_STRING) pbw_str(&x, 4, a->s ? a->s : "");
    else if (a->type == FZM_ATTR_FLOATS) for (int k = 0; k < a->n; k++) pbw_f32(&x, 7, a->floats[k]);
    else for (int k = 0; k < a->n; k++) pbw_int(&x, 8, a->ints[k]);
    pbw_int(&x, 20, a->type);
    pbw_sub(&n, 5, &x);
  }
  pbw_sub(&b->g, 1, &n);
}

// An initializer with raw data (nbytes of data, little-endian, C order).
static void fzm_init(fzm *b, const char *name, int dtype, int rank, const int64_t *dims,
                     const void *data, size_t nbytes) {
  pbw t = {0};
  for (int k = 0; k < rank; k++) pbw_int(&t, 1, dims[k]);
  pbw_int(&t, 2, dtype);
  pbw_str(&t, 8, name);
  pbw_bytes(&t, 9, data, nbytes);
  pbw_sub(&b->g, 5, &t);
}

// A graph input (field 11) or output (12): dtype 0 writes the name only; rank < 0 no shape;
// a dim < 0 is written as the symbolic dim "d<k>".
static void fzm__value_info(fzm *b, int field, const char *name, int dtype, int rank,
                            const int64_t *dims) {
  pbw vi = {0};
  pbw_str(&vi, 1, name);
  if (dtype) {
    pbw tp = {0}, tt = {0};
    pbw_int(&tt, 1, dtype);
    if (rank >= 0) {
      pbw sh = {0};
      for (int i = 0; i < rank; i++) {
        pbw dim = {0};
        if (dims[i] >= 0) {
          pbw_int(&dim, 1, dims[i]);
        } else {
          char sym[16];
          snprintf(sym, sizeof sym, "d%d", i);
          pbw_str(&dim, 2, sym);
        }
        pbw_sub(&sh, 1, &dim);
      }
      pbw_sub(&tt, 2, &sh);
    }
    pbw_sub(&tp, 1, &tt);
    pbw_sub(&vi, 2, &tp);
  }
  pbw_sub(&b->g, field, &vi);
}

static void fzm_input(fzm *b, const char *name, int dtype, int rank, const int64_t *dims) {
  fzm__value_info(b, 11, name, dtype, rank, dims);
}
static void fzm_output(fzm *b, const char *name, int dtype) { fzm__value_info(b, 12, name, dtype, -1, NULL); }

// Wrap the graph into a ModelProto (ir_version 8, default-domain opset). *out heap (free()),
// NULL when out of memory. The builder is spent either way.
static void fzm_end(fzm *b, int opset, unsigned char **out, size_t *n) {
  pbw m = {0}, os = {0};
  pbw_str(&b->g, 2, "fz");
  pbw_int(&m, 1, 8);
  pbw_str(&m, 2, "fusebox-fz-model");
  pbw_sub(&m, 7, &b->g);
  pbw_str(&os, 1, "");
  pbw_int(&os, 2, opset);
  pbw_sub(&m, 8, &os);
  if (m.oom) {
    free(m.p);
    m.p = NULL;
    m.n = 0;
  }
  *out = m.p;
  *n = m.n;
}

#endif  // FBX_TESTS_FUZZ_FZ_MODEL_H
