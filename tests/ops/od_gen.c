// od_gen.c — the table of op families the differential harness draws from.
#include "ops/od_gen.h"

const od_op od_ops[] = {
    {"unary", od_gen_unary, 6},       {"binary", od_gen_binary, 6},   {"where", od_gen_where, 1},
    {"matmul", od_gen_matmul, 3},     {"gemm", od_gen_gemm, 2},       {"reduce", od_gen_reduce, 4},
    {"argmax", od_gen_argmax, 1},     {"softmax", od_gen_softmax, 2}, {"layernorm", od_gen_layernorm, 2},
    {"conv", od_gen_conv, 3},         {"pool", od_gen_pool, 2},       {"transpose", od_gen_transpose, 2},
    {"concat", od_gen_concat, 2},     {"slice", od_gen_slice, 2},     {"reshape", od_gen_reshape, 2},
    {"gather", od_gen_gather, 2},     {"composed", od_gen_composed, 3}, {"convint", od_gen_convint, 2},
    {"norm2", od_gen_norm2, 2},
};
const int od_n_ops = (int)(sizeof od_ops / sizeof od_ops[0]);
