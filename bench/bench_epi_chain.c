/* Conv-epilogue programs through the register chain (cpu_epi_chain.c), one
 * evaluator at a time (portable C, AVX2, AVX-512 where present), in place on
 * an L2-sized (1, C, inner) output: ns per element (best of R runs) and per
 * program instruction. Programs: PP-LCNet's (Mul, Add, Add 3, Max 0, Min 6,
 * Mul, Div 6, Mul, Add: 9 instructions, scalar operands), HardSwish alone
 * (Add, Max, Min, Mul, Div), and BatchNorm per channel + residual + Relu.
 * Usage: bench_epi_chain [reps=200] [inner=288] [rows=256] (rows 4 x inner 960: an L1-resident plane) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/cpu_epi_chain.h"
#include "backend/cpu/cpu_gemm_avx512.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static fbx_ir_ew_instr I2(fbx_ir_op op, int a, int b) {
  return (fbx_ir_ew_instr){.op = op, .a = a, .b = b, .dtype = FBX_DTYPE_F32};
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 200;
  int64_t inner = argc > 2 ? atoll(argv[2]) : 288, C = argc > 3 ? atoll(argv[3]) : 256;
  if (C < 1 || C > 256) C = 256; /* per-channel operands below hold 256 */
  int64_t n = C * inner;
  float *y = malloc(sizeof(float) * (size_t)n), *res = malloc(sizeof(float) * (size_t)n);
  float ks[8] = {1.01f, 0.02f, 3.f, 0.f, 6.f, 0.99f, 0.01f, 0.f}, kc[256], kb[256];
  for (int i = 0; i < 256; i++) kc[i] = 1.f + 0.001f * (float)i, kb[i] = 0.01f * (float)(i % 7);
  for (int64_t i = 0; i < n; i++) res[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  fbx_tensor out = {.dtype = FBX_DTYPE_F32, .rank = 4, .dims = {1, C, 1, inner}, .data = y};
  fbx_tensor sc[8], resid = out, chan[2];
  resid.data = res;
  for (int j = 0; j < 8; j++) sc[j] = (fbx_tensor){.dtype = FBX_DTYPE_F32, .rank = 0, .data = &ks[j]};
  for (int j = 0; j < 2; j++)
    chan[j] = (fbx_tensor){.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {C, 1, 1}, .data = j ? kb : kc};
  /* r0 out, r1 a, r2 b, r3 3, r4 0, r5 6, r6 c, r7 d */
  fbx_ir_ew_instr lc[] = {I2(FBX_IR_OP_MUL, 1, 0), I2(FBX_IR_OP_ADD, 8, 2),  I2(FBX_IR_OP_ADD, 9, 3),
                          I2(FBX_IR_OP_MAX, 10, 4), I2(FBX_IR_OP_MIN, 11, 5), I2(FBX_IR_OP_MUL, 9, 12),
                          I2(FBX_IR_OP_DIV, 13, 5), I2(FBX_IR_OP_MUL, 6, 14), I2(FBX_IR_OP_ADD, 15, 7)};
  fbx_tensor lc_in[8] = {out, sc[0], sc[1], sc[2], sc[3], sc[4], sc[5], sc[6]};
  /* r0 out, r1 3, r2 0, r3 6 */
  fbx_ir_ew_instr hs[] = {I2(FBX_IR_OP_ADD, 0, 1), I2(FBX_IR_OP_MAX, 4, 2), I2(FBX_IR_OP_MIN, 5, 3),
                          I2(FBX_IR_OP_MUL, 0, 6), I2(FBX_IR_OP_DIV, 7, 3)};
  fbx_tensor hs_in[4] = {out, sc[2], sc[3], sc[4]};
  /* r0 out, r1 scale (C), r2 shift (C), r3 residual */
  fbx_ir_ew_instr bn[] = {I2(FBX_IR_OP_MUL, 0, 1), I2(FBX_IR_OP_ADD, 4, 2), I2(FBX_IR_OP_ADD, 5, 3),
                          (fbx_ir_ew_instr){.op = FBX_IR_OP_RELU, .a = 6, .dtype = FBX_DTYPE_F32}};
  fbx_tensor bn_in[4] = {out, chan[0], chan[1], resid};
  struct {
    const char *name;
    fbx_ir_ew_program p;
    fbx_tensor *in;
  } progs[] = {
      {"PP-LCNet affine+HardSwish+affine (9 instr)", {.n_inputs = 8, .n_instrs = 9, .out_reg = 16, .instrs = lc}, lc_in},
      {"HardSwish as Add/Max/Min/Mul/Div (5 instr)", {.n_inputs = 4, .n_instrs = 5, .out_reg = 8, .instrs = hs}, hs_in},
      {"BN per channel + residual + Relu (4 instr)", {.n_inputs = 4, .n_instrs = 4, .out_reg = 7, .instrs = bn}, bn_in},
  };
  printf("| program | rows x inner | evaluator | ns/element | ns/element/instr |\n|---|---|---|---:|---:|\n");
  const char *isa_name[3] = {"portable", "AVX2", "AVX-512"};
  int top = fbx_cpu_avx512_enabled() ? 2 : 1;
  for (size_t pi = 0; pi < sizeof progs / sizeof progs[0]; pi++) {
    fbx_cpu_epi_chain ch;
    if (!fbx_cpu_epi_chain_compile(&progs[pi].p, 0, progs[pi].in, &out, &ch)) {
      printf("| %s | - | declined | - | - |\n", progs[pi].name);
      continue;
    }
    for (int isa = 0; isa <= top; isa++) {
      ch.isa = isa;
      double best = 1e9;
      for (int r = 0; r < reps; r++) {
        for (int64_t i = 0; i < n; i++) y[i] = (float)(i % 17) * 0.25f - 2.f;
        double t0 = now_s();
        for (int64_t c = 0; c < C; c++) fbx_cpu_epi_chain_apply(&ch, c * inner, (c + 1) * inner); /* per plane, as the kernels call it */
        double t = now_s() - t0;
        if (t < best) best = t;
      }
      double ns = best * 1e9 / (double)n;
      printf("| %s | %lld x %lld | %s | %.3f | %.3f |\n", progs[pi].name, (long long)C, (long long)inner,
             isa_name[isa], ns, ns / progs[pi].p.n_instrs);
    }
  }
  free(y);
  free(res);
  return 0;
}
