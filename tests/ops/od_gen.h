// od_gen — the op generators of the differential harness: each fills an empty od_case with
// one op, random shapes / attributes / dtype drawn from r (its own per-case generator, so a
// change inside one generator leaves every other family's cases as they were).
#ifndef FBX_TESTS_OD_GEN_H
#define FBX_TESTS_OD_GEN_H

#include "ops/od_case.h"

typedef void (*od_gen)(od_case *c, od_rng *r);

// One family of the table: `--op FAMILY` selects it; weight = relative frequency.
typedef struct od_op {
  const char *family;
  od_gen gen;
  int weight;
} od_op;

extern const od_op od_ops[];
extern const int od_n_ops;

// od_gen_math.c
void od_gen_unary(od_case *c, od_rng *r);
void od_gen_binary(od_case *c, od_rng *r);
void od_gen_where(od_case *c, od_rng *r);
void od_gen_matmul(od_case *c, od_rng *r);
void od_gen_gemm(od_case *c, od_rng *r);
void od_gen_reduce(od_case *c, od_rng *r);
void od_gen_argmax(od_case *c, od_rng *r);
void od_gen_softmax(od_case *c, od_rng *r);
void od_gen_layernorm(od_case *c, od_rng *r);
// od_gen_nn.c
void od_gen_conv(od_case *c, od_rng *r);
void od_gen_pool(od_case *c, od_rng *r);
void od_gen_convint(od_case *c, od_rng *r);
void od_gen_norm2(od_case *c, od_rng *r);
// od_gen_shape.c
void od_gen_transpose(od_case *c, od_rng *r);
void od_gen_concat(od_case *c, od_rng *r);
void od_gen_slice(od_case *c, od_rng *r);
void od_gen_reshape(od_case *c, od_rng *r);
void od_gen_gather(od_case *c, od_rng *r);
// od_gen_composed.c
void od_gen_composed(od_case *c, od_rng *r);

#endif
