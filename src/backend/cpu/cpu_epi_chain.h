/* Conv epilogues as a register chain (cpu_epi_chain.c): a float32
 * epilogue program whose operands are the kernel's output and scalar or
 * per-channel values (the BatchNorm affine, Clip bounds, HardSwish written as
 * Add/Max/Min/Mul/Div, PP-LCNet's learnable affine after it) or tensors of the
 * output's shape (a residual), compiled at fbx_cpu_epi_begin into a list of
 * steps on one running vector V and up to three saved vectors, then evaluated
 * per 16 (AVX-512) or 8 (AVX2) outputs, 4 vectors per step, with everything
 * in registers: one load and one store per output element (plus one load
 * per residual), where the block interpreter (cpu_ew.c) makes a pass over
 * memory per instruction. Instructions on row values only run once per row
 * (rowops). FUSED_EW nodes of the same form use it too (cpu_ew.c). Programs
 * that do not fit (other ops or dtypes, operands that vary along H/W only,
 * more live values) keep the interpreter. */
#ifndef FBX_BACKEND_CPU_EPI_CHAIN_H
#define FBX_BACKEND_CPU_EPI_CHAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "ir/ir_graph.h"

#define FBX_CPU_EPI_CHAIN_MAX_STEPS 48
#define FBX_CPU_EPI_CHAIN_MAX_K 16  /* constant operands */
#define FBX_CPU_EPI_CHAIN_SLOTS 3   /* saved vectors besides V */

typedef enum {
  FBX_CPU_EPI_SAVE = 0, /* S[slot] = V */
  FBX_CPU_EPI_LOAD,     /* V = S[slot] */
  FBX_CPU_EPI_UN,       /* V = op(V) (al, be: the op's alpha, beta) */
  FBX_CPU_EPI_BIN,      /* V = op(V, src), or op(src, V) when swapped */
} fbx_cpu_epi_step_kind;

/* operand of a BIN step */
enum {
  FBX_CPU_EPI_SRC_V = 0,
  FBX_CPU_EPI_SRC_S0 = 1,
  FBX_CPU_EPI_SRC_K = FBX_CPU_EPI_SRC_S0 + FBX_CPU_EPI_CHAIN_SLOTS, /* operand k: a value per row */
  FBX_CPU_EPI_SRC_T,                                                /* operand k: a tensor shaped as the output */
};

/* operand kinds */
enum { FBX_CPU_EPI_K_SCALAR = 0, FBX_CPU_EPI_K_CHANNEL, FBX_CPU_EPI_K_TENSOR };

/* BIN steps on a constant, in the vector forms (the row's constants checked
 * first, else the row runs the portable form): */
enum {
  FBX_CPU_EPI_FK_NONE = 0,
  FBX_CPU_EPI_FK_DIV,  /* V / k as V * (1/k) + one FMA correction (k normal, 2^-100 < |k| < 2^100) */
  FBX_CPU_EPI_FK_MAX,  /* max(V, k) in either order is maxps(k, V) for a k that is not NaN */
  FBX_CPU_EPI_FK_MIN,
};

typedef struct fbx_cpu_epi_step {
  uint8_t kind, slot, src, k; /* slot: SAVE/LOAD; src, k: BIN (k: constant index when src == SRC_K) */
  uint8_t fk;                 /* FBX_CPU_EPI_FK_* */
  uint8_t code;               /* the evaluators' switch value (set by compile) */
  bool swapped;
  fbx_ir_op op;
  float al, be;
} fbx_cpu_epi_step;

/* An instruction whose operands are all values per row (an SE scale's
 * HardSigmoid): computed once per row into operand k[dst], in scalar. */
typedef struct fbx_cpu_epi_rowop {
  fbx_ir_op op;
  uint8_t a, b, dst; /* operand indices */
  float al, be;
} fbx_cpu_epi_rowop;

typedef struct fbx_cpu_epi_chain {
  int n_steps, n_k, n_rowops;
  fbx_cpu_epi_rowop rowop[FBX_CPU_EPI_CHAIN_MAX_K];
  fbx_cpu_epi_step step[FBX_CPU_EPI_CHAIN_MAX_STEPS];
  const float *k[FBX_CPU_EPI_CHAIN_MAX_K]; /* operand j: k[j][0], k[j][channel], or k[j][element] by kind;
                                              NULL: a rowop's result */
  uint8_t kind[FBX_CPU_EPI_CHAIN_MAX_K];   /* FBX_CPU_EPI_K_* */
  uint8_t k_use[FBX_CPU_EPI_CHAIN_MAX_K]; /* bit FK_DIV: a divisor, FK_MAX/MIN: a Max/Min bound (bits 1 << fk) */
  const float *x; /* the value V starts from, shaped as y (an epilogue: y itself) */
  float *y;       /* the output (N, C, inner) */
  int64_t C, inner;
  int isa;        /* 0 portable C, 1 AVX2, 2 AVX-512 (chosen at compile; tests may lower it) */
  bool by_row;    /* per-channel operands: values per (n, c) row; else kc0/kr0/fast0 hold them */
  bool fast0;
  float kc0[FBX_CPU_EPI_CHAIN_MAX_K], kr0[FBX_CPU_EPI_CHAIN_MAX_K];
} fbx_cpu_epi_chain;

/* Compiles prog (register `reg` = out, the other registers = in[0..] in order,
 * as fbx_cpu_epi_begin binds them; pin[reg] is the output itself or a tensor
 * of its shape) into ch. Other operands: one value, one per channel (dim 1),
 * or a tensor of the output's shape (a residual). Returns false (ch unusable)
 * when the program does not fit the chain form; never allocates. */
bool fbx_cpu_epi_chain_compile(const fbx_ir_ew_program *prog, int reg, const fbx_tensor *pin, const fbx_tensor *out,
                               fbx_cpu_epi_chain *ch);
/* y = program(x, operands) over flattened output elements [begin, end). */
void fbx_cpu_epi_chain_apply(const fbx_cpu_epi_chain *ch, int64_t begin, int64_t end);

#endif
