// od_case — one case of the per-op differential harness (tests/ops/test_ops_diff.c): a
// one-node model's op, opset, inputs (graph inputs or initializers), attributes and tolerance,
// plus the seeded generator and the helpers the op generators (od_gen_*.c) build cases with.
//
// Ownership: a case owns the data of its inputs; od_case_free() releases them. Absent optional
// inputs have rank -1 and no data.
#ifndef FBX_TESTS_OD_CASE_H
#define FBX_TESTS_OD_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "common/ort_host.h"

#define OD_MAX_IN 9  // inputs of a node (QLinearMatMul has 8, QLinearConv 9)
#define OD_MAX_OUT 3
#define OD_MAX_ATTR 8

// xorshift64: the same seed gives the same cases on every machine.
typedef struct od_rng { uint64_t s; } od_rng;
uint64_t od_next(od_rng *r);
int od_int(od_rng *r, int lo, int hi);  // uniform in [lo, hi] inclusive
double od_unit(od_rng *r);              // uniform in [0, 1)

enum { OD_ATTR_FLOAT = 1, OD_ATTR_INT = 2, OD_ATTR_STRING = 3, OD_ATTR_INTS = 7 };  // AttributeProto.type

typedef struct od_attr {
  const char *name;  // static string
  int type;          // OD_ATTR_*
  float f;
  int64_t i;
  const char *s;     // static string
  int64_t ints[8];
  int n_ints;
} od_attr;

typedef struct od_case {
  const char *op;  // ONNX op type (static string)
  int opset;
  fbx_host_tensor in[OD_MAX_IN];  // named "x0", "x1", ...; rank -1 = absent optional input
  int is_init[OD_MAX_IN];         // 1: written as an initializer, 0: fed at Run
  int n_in;
  od_attr at[OD_MAX_ATTR];
  int n_at;
  int n_out;
  double rtol, atol;  // per-output tolerance (ints and bool always compare exactly)
  char desc[512];     // od_describe()
} od_case;

void od_case_free(od_case *c);  // frees every present input's data
void od_describe(od_case *c);   // op, opset, inputs (dtype[shape], small int64 data), attributes

// The attribute named `name`, or NULL.
const od_attr *od_attr_find(const od_case *c, const char *name);
// Integer attribute (or `def` when absent). Ints attribute: its first values into out[0..cap);
// returns how many it has (possibly more than cap), or -1 when absent.
int64_t od_attr_int(const od_case *c, const char *name, int64_t def);
int od_attr_ints(const od_case *c, const char *name, int64_t *out, int cap);

// ---- building cases ----

void od_shape(od_rng *r, int rank, int64_t *d, int lo, int hi);  // d[i] uniform in [lo, hi]
// Append input x<i> of dtype[dims] with random data (floats N(0,1), bool 0/1, uint8 0..255,
// other ints -20..20); init: 1 = initializer. Returns the tensor (its data may be refilled).
fbx_host_tensor *od_in(od_case *c, od_rng *r, int dtype, int rank, const int64_t *dims, int init);
void od_fill_q8(fbx_host_tensor *t, od_rng *r);  // refill a uint8 / int8 tensor over the whole range
fbx_host_tensor *od_i64s(od_case *c, const int64_t *v, int n, int init);  // 1-D int64 input
void od_ai(od_case *c, const char *n, int64_t v);
void od_af(od_case *c, const char *n, float v);
void od_as(od_case *c, const char *n, const char *v);
void od_aints(od_case *c, const char *n, const int64_t *v, int k);

int od_float_dtype(od_rng *r);        // float32 70%, float64 20%, float16 10%
int od_any_dtype(od_rng *r);          // any dtype the data-movement ops take
int od_f16_or(od_rng *r, int dt);     // float16 for a quarter of the cases, else dt
void od_tol(od_case *c, int dtype);   // default rtol/atol for dtype
// Shape b broadcastable to a[ra]: drops leading dims and sets some dims to 1. Returns rank of b.
int od_bcast(od_rng *r, int ra, const int64_t *a, int64_t *b);

#endif
