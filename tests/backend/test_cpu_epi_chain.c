/* The register-chain form of conv epilogues (cpu_epi_chain.c) against a naive
 * per-element evaluation written here from the op definitions: hand-written
 * programs (PP-LCNet's affine + HardSwish-as-Add/Max/Min/Mul/Div + affine,
 * BatchNorm per channel + Relu, x*x, operands used after many steps) and
 * random programs over every op the chain takes, with scalar and per-channel
 * constants, odd row lengths (vector tails), ranges that start and end inside
 * rows, special values (NaN, +-inf, +-0, huge) in the input, and constants
 * that send rows to the portable form (a NaN Max bound, a 0 or denormal
 * divisor), residual operands of the output's shape, and x read from its own
 * tensor (FUSED_EW) as well as in place (an epilogue), instructions on row
 * values only (computed per row). Each case runs the portable, AVX2 and (where the CPU has it)
 * AVX-512 evaluators. Also: programs the chain must decline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_epi_chain.h"
#include "backend/cpu/cpu_gemm_avx512.h"
#include "common/check.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd_u(void) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(g_rng >> 33);
}
static float rnd_f(float lo, float hi) { return lo + (hi - lo) * (float)rnd_u() / 2147483648.f; }

/* ---- the naive reference: one element through the program ---- */
static float ref_bin(fbx_ir_op op, float x, float y) {
  switch (op) {
    case FBX_IR_OP_ADD: return x + y;
    case FBX_IR_OP_SUB: return x - y;
    case FBX_IR_OP_MUL: return x * y;
    case FBX_IR_OP_DIV: return x / y;
    case FBX_IR_OP_MAX: return isnan(x) || isnan(y) ? NAN : fmaxf(x, y); /* ONNX Max propagates NaN */
    case FBX_IR_OP_MIN: return isnan(x) || isnan(y) ? NAN : fminf(x, y);
    default: return NAN;
  }
}
static float ref_un(const fbx_ir_ew_instr *in, float x) {
  float al = (float)in->params.ew.alpha, be = (float)in->params.ew.beta;
  switch (in->op) {
    case FBX_IR_OP_IDENTITY: return x;
    case FBX_IR_OP_NEG: return -x;
    case FBX_IR_OP_ABS: return fabsf(x);
    case FBX_IR_OP_RELU: return isnan(x) ? x : x < 0 ? 0.f : x;
    case FBX_IR_OP_LEAKY_RELU: return x < 0 ? al * x : x;
    case FBX_IR_OP_HARD_SIGMOID: return isnan(x) ? x : fmaxf(0.f, fminf(1.f, al * x + be));
    case FBX_IR_OP_HARD_SWISH: { /* x * clamp(x/6 + 1/2, 0, 1); 0 where the clamp is 0 (also at -inf) */
      if (isnan(x)) return x;
      float t = fmaxf(0.f, fminf(1.f, x / 6.f + 0.5f));
      return t == 0.f ? 0.f : x * t;
    }
    /* the transcendentals in double, rounded once (the chain's are within a few ulp) */
    case FBX_IR_OP_EXP: return (float)exp((double)x);
    case FBX_IR_OP_ERF: return (float)erf((double)x);
    case FBX_IR_OP_SIGMOID: return (float)(1.0 / (1.0 + exp(-(double)x)));
    case FBX_IR_OP_TANH: return (float)tanh((double)x);
    default: return NAN;
  }
}
/* regs[reg] = x, regs[j] = constant j's value for channel c; *mag: the largest
 * finite intermediate (rounding differences scale with it) */
/* kind[j]: 0 one value, 1 per channel, 2 a tensor of the output's shape (element e) */
static float ref_eval(const fbx_ir_ew_program *p, int reg, float x, float *const *kdata, const uint8_t *kind,
                      int64_t c, int64_t e, float *mag) {
  float r[64];
  *mag = 1.f;
  for (int j = 0; j < p->n_inputs; j++) r[j] = j == reg ? x : kdata[j][kind[j] == 2 ? e : kind[j] == 1 ? c : 0];
  for (int i = 0; i < p->n_instrs; i++) {
    const fbx_ir_ew_instr *in = &p->instrs[i];
    r[p->n_inputs + i] = fbx_ir_op_class(in->op) == FBX_IR_CLASS_EW1 ? ref_un(in, r[in->a])
                                                                      : ref_bin(in->op, r[in->a], r[in->b]);
    float m = fabsf(r[p->n_inputs + i]);
    if (m > *mag && m < INFINITY) *mag = m;
  }
  return r[p->out_reg];
}

/* Vector Div by a constant is a reciprocal with an FMA correction and
 * HardSigmoid an FMA: each may differ from the reference by an ulp of an
 * intermediate, and later steps may cancel down to that. Values past 1e30
 * (overflow on one side only) count as infinite. */
static bool close_enough(float a, float ref, float mag) {
  if (isnan(ref)) return isnan(a);
  if (fabsf(ref) > 1e30f || fabsf(a) > 1e30f) return isnan(a) ? false : (a > 0) == (ref > 0) || mag > 1e30f;
  return fabsf(a - ref) <= 4e-6f * fmaxf(mag, fabsf(ref));
}

/* ---- one case: program p over an (N, C, inner) output ---- */
typedef struct ccase {
  int64_t N, C, inner;
  bool specials; /* NaN, inf, 0, huge values among the inputs */
  bool separate; /* x read from its own tensor (FUSED_EW), not the output in place (an epilogue) */
} ccase;

static int g_compiled;

/* kper[j]: operand j's kind (ref_eval); kfill: optional override of its values */
static void run_case(const char *name, const fbx_ir_ew_program *p, int reg, const ccase *cc, const uint8_t *kper,
                     void (*kfill)(int j, float *k, int64_t C)) {
  int64_t n = cc->N * cc->C * cc->inner;
  float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
  float *kd[FBX_IR_MAX_INPUTS] = {0};
  fbx_tensor pin[FBX_IR_MAX_INPUTS];
  fbx_tensor out = {.dtype = FBX_DTYPE_F32, .rank = 4, .dims = {cc->N, cc->C, 1, cc->inner}, .data = y};
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.f, -0.f, 3e38f, -3e38f, -3.f, 3.f, 1e-39f};
  for (int64_t i = 0; i < n; i++)
    x[i] = cc->specials && rnd_u() % 7 == 0 ? specials[rnd_u() % (sizeof specials / sizeof specials[0])]
                                           : rnd_f(-8.f, 8.f);
  for (int j = 0; j < p->n_inputs; j++) {
    if (j == reg) {
      pin[j] = out;
      if (cc->separate) pin[j].data = x;
      continue;
    }
    int64_t m = kper[j] == 2 ? n : kper[j] ? cc->C : 1;
    kd[j] = malloc(sizeof(float) * (size_t)m);
    for (int64_t c = 0; c < m; c++) kd[j][c] = rnd_f(-3.f, 3.f);
    if (kfill) kfill(j, kd[j], m);
    pin[j] = (fbx_tensor){.dtype = FBX_DTYPE_F32, .data = kd[j]};
    if (kper[j] == 2) { /* the output's shape */
      pin[j] = out;
      pin[j].data = kd[j];
    } else if (kper[j]) { /* (C, 1, 1) */
      pin[j].rank = 3;
      pin[j].dims[0] = cc->C, pin[j].dims[1] = 1, pin[j].dims[2] = 1;
    } else { /* scalar or (1,) */
      pin[j].rank = j % 2;
      pin[j].dims[0] = 1;
    }
  }
  fbx_cpu_epi_chain ch;
  bool ok = fbx_cpu_epi_chain_compile(p, reg, pin, &out, &ch);
  if (ok) {
    g_compiled++;
    int top = fbx_cpu_avx512_enabled() ? 2 : 1;
    for (int isa = 0; isa <= top; isa++) {
      if (cc->separate)
        for (int64_t i = 0; i < n; i++) y[i] = -1234.f;
      else
        memcpy(y, x, sizeof(float) * (size_t)n);
      ch.isa = isa;
      /* a few ranges that start and end inside rows, then the rest */
      int64_t pos = 0;
      while (pos < n) {
        int64_t len = 1 + (int64_t)(rnd_u() % (uint32_t)(2 * cc->inner + 3));
        if (pos + len > n) len = n - pos;
        fbx_cpu_epi_chain_apply(&ch, pos, pos + len);
        pos += len;
      }
      int64_t bad = 0, first = -1;
      for (int64_t i = 0; i < n; i++) {
        float mag, r = ref_eval(p, reg, x[i], kd, kper, (i / cc->inner) % cc->C, i, &mag);
        if (!close_enough(y[i], r, mag)) bad++, first = first < 0 ? i : first;
      }
      float mag0;
      CHECK(bad == 0, "%s isa %d (N%lld C%lld inner %lld): %lld of %lld wrong, first at %lld: x %g got %g want %g",
            name, isa, (long long)cc->N, (long long)cc->C, (long long)cc->inner, (long long)bad, (long long)n,
            (long long)first, first >= 0 ? x[first] : 0.f, first >= 0 ? y[first] : 0.f,
            first >= 0 ? ref_eval(p, reg, x[first], kd, kper, (first / cc->inner) % cc->C, first, &mag0) : 0.f);
    }
  }
  for (int j = 0; j < p->n_inputs; j++) free(kd[j]);
  free(x);
  free(y);
}

static fbx_ir_ew_instr I1(fbx_ir_op op, int a) { return (fbx_ir_ew_instr){.op = op, .a = a, .dtype = FBX_DTYPE_F32}; }
static fbx_ir_ew_instr I2(fbx_ir_op op, int a, int b) {
  return (fbx_ir_ew_instr){.op = op, .a = a, .b = b, .dtype = FBX_DTYPE_F32};
}

static fbx_ir_ew_program prog_of(int n_inputs, fbx_ir_ew_instr *ins, int n) {
  fbx_ir_ew_program p = {.n_inputs = n_inputs, .n_instrs = n, .out_reg = n_inputs + n - 1, .instrs = ins};
  return p;
}

/* constant overrides of the PP-LCNet program: the Max bound (register 4) NaN in
 * channel 1; the divisor (register 5) 0 / denormal / 6 by channel */
/* fill_consts: the scalar constants of a hand-written program (g_consts[j]; the model's values) */
static const float *g_consts;
static void fill_consts(int j, float *k, int64_t C) {
  for (int64_t c = 0; c < C; c++) k[c] = g_consts[j];
}
static void fill_nan_bound(int j, float *k, int64_t C) {
  if (j == 4 && C > 1) k[1] = NAN;
}
static void fill_bad_div(int j, float *k, int64_t C) {
  if (j != 5) return;
  for (int64_t c = 0; c < C; c++) k[c] = c % 3 == 0 ? 0.f : c % 3 == 1 ? 1e-40f : 6.f;
}

static void test_hand_written(void) {
  const ccase shapes[] = {{1, 5, 37, true, false}, {2, 3, 16, false, false}, {1, 4, 1, true, false},
                          {1, 2, 200, true, false}, {3, 1, 9, false, false}};
  /* PP-LCNet: r0 = conv out, r1 a, r2 b, r3 3, r4 0, r5 6, r6 c, r7 d:
   * v = x*a + b; t = min(max(v+3, 0), 6); h = v*t/6; y = h*c + d */
  fbx_ir_ew_instr lc[] = {I2(FBX_IR_OP_MUL, 1, 0), I2(FBX_IR_OP_ADD, 8, 2),  I2(FBX_IR_OP_ADD, 9, 3),
                          I2(FBX_IR_OP_MAX, 10, 4), I2(FBX_IR_OP_MIN, 11, 5), I2(FBX_IR_OP_MUL, 9, 12),
                          I2(FBX_IR_OP_DIV, 13, 5), I2(FBX_IR_OP_MUL, 6, 14), I2(FBX_IR_OP_ADD, 15, 7)};
  fbx_ir_ew_program p = prog_of(8, lc, 9);
  uint8_t scal[8] = {0}, perc[8] = {0, 1, 1, 0, 0, 0, 1, 1};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    run_case("lcnet scalar", &p, 0, &shapes[s], scal, NULL);
    run_case("lcnet per-channel", &p, 0, &shapes[s], perc, NULL);
  }
  /* same with constants 3 and 6 fixed (the model's values) and a bad divisor set */
  uint8_t perc2[8] = {0, 1, 1, 0, 1, 1, 1, 1};
  run_case("lcnet bad divisors", &p, 0, &shapes[0], perc2, fill_bad_div);
  run_case("lcnet NaN max bound", &p, 0, &shapes[0], perc2, fill_nan_bound);
  /* BatchNorm per channel + Relu, the conv output in register 2 */
  fbx_ir_ew_instr bn[] = {I2(FBX_IR_OP_SUB, 2, 0), I2(FBX_IR_OP_DIV, 3, 1), I1(FBX_IR_OP_RELU, 4)};
  fbx_ir_ew_program pb = prog_of(3, bn, 3);
  uint8_t bnper[3] = {1, 1, 0};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) run_case("bn relu", &pb, 2, &shapes[s], bnper, NULL);
  /* x*x, then (x*x) - x, then a constant minus that (swapped operands) */
  fbx_ir_ew_instr sq[] = {I2(FBX_IR_OP_MUL, 0, 0), I2(FBX_IR_OP_SUB, 2, 0), I2(FBX_IR_OP_SUB, 1, 3),
                          I2(FBX_IR_OP_DIV, 1, 4), I2(FBX_IR_OP_MAX, 1, 5), I2(FBX_IR_OP_MIN, 6, 0)};
  fbx_ir_ew_program ps = prog_of(2, sq, 6);
  uint8_t sqk[2] = {0, 1};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) run_case("square swaps", &ps, 0, &shapes[s], sqk, NULL);
  /* unary ops with parameters */
  fbx_ir_ew_instr un[] = {I1(FBX_IR_OP_HARD_SWISH, 0), I1(FBX_IR_OP_LEAKY_RELU, 1), I1(FBX_IR_OP_HARD_SIGMOID, 2),
                          I2(FBX_IR_OP_MUL, 3, 1), I1(FBX_IR_OP_NEG, 4), I1(FBX_IR_OP_ABS, 5),
                          I2(FBX_IR_OP_ADD, 6, 0), I1(FBX_IR_OP_IDENTITY, 7)};
  un[1].params.ew.alpha = 0.1;
  un[2].params.ew.alpha = 0.2, un[2].params.ew.beta = 0.5;
  fbx_ir_ew_program pu = prog_of(1, un, 8);
  uint8_t nok[1] = {0};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) run_case("unary", &pu, 0, &shapes[s], nok, NULL);
  /* BN per channel + a residual (the tensor as first and as second operand) + Relu, in place and
   * from a separate input (FUSED_EW) */
  fbx_ir_ew_instr rs[] = {I2(FBX_IR_OP_MUL, 0, 1), I2(FBX_IR_OP_ADD, 4, 2), I2(FBX_IR_OP_ADD, 3, 5),
                          I2(FBX_IR_OP_SUB, 6, 3), I1(FBX_IR_OP_RELU, 7)};
  fbx_ir_ew_program pr = prog_of(4, rs, 5);
  uint8_t rk[4] = {0, 1, 1, 2};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    ccase sep = shapes[s];
    sep.separate = true;
    run_case("bn residual relu", &pr, 0, &shapes[s], rk, NULL);
    run_case("bn residual relu (separate x)", &pr, 0, &sep, rk, NULL);
  }
  /* squeeze-excitation: y = x * HardSigmoid(s + k) with s per channel (ops on row values only: rowops),
   * then a scalar divided by a per-row value */
  fbx_ir_ew_instr se[] = {I2(FBX_IR_OP_ADD, 1, 2), I1(FBX_IR_OP_HARD_SIGMOID, 3), I2(FBX_IR_OP_MUL, 0, 4),
                          I2(FBX_IR_OP_DIV, 2, 3), I2(FBX_IR_OP_SUB, 5, 6)};
  se[1].params.ew.alpha = 0.2, se[1].params.ew.beta = 0.5;
  fbx_ir_ew_program pse = prog_of(3, se, 5);
  uint8_t sek[3] = {0, 1, 0};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    ccase sep = shapes[s];
    sep.separate = true;
    run_case("se scale (rowops)", &pse, 0, &sep, sek, NULL);
  }
  /* the transcendental ones: GELU as exported, x * 0.5 * (1 + erf(x / sqrt 2)); SiLU times an up
   * projection (a tensor operand), x * sigmoid(x) * u; GELU's tanh form; exp of a shifted value */
  fbx_ir_ew_instr ge[] = {I2(FBX_IR_OP_DIV, 0, 1), I1(FBX_IR_OP_ERF, 4), I2(FBX_IR_OP_ADD, 5, 2),
                          I2(FBX_IR_OP_MUL, 0, 6), I2(FBX_IR_OP_MUL, 7, 3)};
  fbx_ir_ew_program pge = prog_of(4, ge, 5);
  uint8_t gek[4] = {0, 0, 0, 0};
  float gec[4] = {0, 1.41421356f, 1.f, 0.5f};
  fbx_ir_ew_instr si[] = {I1(FBX_IR_OP_SIGMOID, 0), I2(FBX_IR_OP_MUL, 0, 2), I2(FBX_IR_OP_MUL, 3, 1)};
  fbx_ir_ew_program psi = prog_of(2, si, 3);
  uint8_t sik[2] = {0, 2};
  /* 0.5 x (1 + tanh(0.79788456 (x + 0.044715 x^3))) */
  fbx_ir_ew_instr gt[] = {I2(FBX_IR_OP_MUL, 0, 0), I2(FBX_IR_OP_MUL, 5, 0), I2(FBX_IR_OP_MUL, 6, 1),
                          I2(FBX_IR_OP_ADD, 0, 7), I2(FBX_IR_OP_MUL, 8, 2), I1(FBX_IR_OP_TANH, 9),
                          I2(FBX_IR_OP_ADD, 10, 3), I2(FBX_IR_OP_MUL, 0, 11), I2(FBX_IR_OP_MUL, 12, 4)};
  fbx_ir_ew_program pgt = prog_of(5, gt, 9);
  uint8_t gtk[5] = {0, 0, 0, 0, 0};
  float gtc[5] = {0, 0.044715f, 0.79788456f, 1.f, 0.5f};
  fbx_ir_ew_instr ex[] = {I2(FBX_IR_OP_SUB, 0, 1), I1(FBX_IR_OP_EXP, 2)};
  fbx_ir_ew_program pex = prog_of(2, ex, 2);
  uint8_t exk[2] = {0, 1};
  g_consts = gec;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) run_case("gelu erf", &pge, 0, &shapes[s], gek, fill_consts);
  g_consts = gtc;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) run_case("gelu tanh", &pgt, 0, &shapes[s], gtk, fill_consts);
  g_consts = NULL;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    ccase sep = shapes[s];
    sep.separate = true;
    run_case("silu * up", &psi, 0, &sep, sik, NULL);
    run_case("exp(x - row max)", &pex, 0, &shapes[s], exk, NULL);
  }
  CHECK(g_compiled == 8 * 5 + 2 + 4 * 5, "every hand-written program compiles to a chain (%d)", g_compiled);
}

/* Random programs: up to 14 instructions over the chain's ops, operands drawn
 * from earlier registers (never two constants). */
static void test_random(void) {
  /* (not the transcendentals: their ulp of error, cancelled and scaled by the ops after them, can exceed
     this test's bound, which is relative to the largest intermediate; the hand-written cases cover them) */
  static const fbx_ir_op un_ops[] = {FBX_IR_OP_RELU, FBX_IR_OP_NEG, FBX_IR_OP_ABS, FBX_IR_OP_HARD_SWISH,
                                     FBX_IR_OP_HARD_SIGMOID, FBX_IR_OP_LEAKY_RELU};
  static const fbx_ir_op bin_ops[] = {FBX_IR_OP_ADD, FBX_IR_OP_SUB, FBX_IR_OP_MUL,
                                      FBX_IR_OP_DIV, FBX_IR_OP_MAX, FBX_IR_OP_MIN};
  int before = g_compiled, tried = 0;
  for (int it = 0; it < 300; it++) {
    int n_in = 1 + (int)(rnd_u() % 5), reg = (int)(rnd_u() % (uint32_t)n_in), n = 1 + (int)(rnd_u() % 14);
    fbx_ir_ew_instr ins[16];
    uint8_t kper[8];
    for (int j = 0; j < n_in; j++) kper[j] = j == reg ? 0 : (uint8_t)(rnd_u() % 3);
    for (int i = 0; i < n; i++) {
      int nr = n_in + i;
      /* a non-constant operand: the conv output or an instruction result */
      int a = rnd_u() % 3 == 0 || i == 0 ? reg : n_in + (int)(rnd_u() % (uint32_t)i);
      if (rnd_u() % 6 == 0) a = (int)(rnd_u() % (uint32_t)nr); /* may be an operand: a rowop, or declined */
      if (rnd_u() % 3 == 0) {
        ins[i] = I1(un_ops[rnd_u() % (sizeof un_ops / sizeof un_ops[0])], a);
        ins[i].params.ew.alpha = rnd_f(-0.5f, 0.5f), ins[i].params.ew.beta = rnd_f(0.f, 1.f);
      } else {
        int b = (int)(rnd_u() % (uint32_t)nr);
        if (rnd_u() % 2) ins[i] = I2(bin_ops[rnd_u() % 6], a, b);
        else ins[i] = I2(bin_ops[rnd_u() % 6], b, a);
      }
    }
    fbx_ir_ew_program p = prog_of(n_in, ins, n);
    ccase cc = {1 + rnd_u() % 2, 1 + rnd_u() % 6, 1 + rnd_u() % 70, rnd_u() % 2 == 0, rnd_u() % 3 == 0};
    char name[32];
    snprintf(name, sizeof name, "random %d", it);
    tried++;
    run_case(name, &p, reg, &cc, kper, NULL);
  }
  CHECK(g_compiled - before > tried / 2, "most random programs fit the chain (%d of %d)", g_compiled - before,
        tried);
}

/* Programs the chain must leave to the interpreter. */
static void test_declines(void) {
  float k[16] = {0}, y[32] = {0};
  fbx_tensor out = {.dtype = FBX_DTYPE_F32, .rank = 4, .dims = {1, 2, 4, 4}, .data = y};
  fbx_tensor full = {.dtype = FBX_DTYPE_F32, .rank = 4, .dims = {1, 2, 4, 4}, .data = k};   /* a residual */
  fbx_tensor row = {.dtype = FBX_DTYPE_F32, .rank = 1, .dims = {4}, .data = k};             /* varies along W */
  fbx_tensor scal = {.dtype = FBX_DTYPE_F32, .rank = 0, .data = k};
  fbx_ir_ew_instr add[] = {I2(FBX_IR_OP_ADD, 0, 1)};
  fbx_ir_ew_program p = prog_of(2, add, 1);
  fbx_cpu_epi_chain ch;
  fbx_tensor pin[2] = {out, full};
  CHECK(fbx_cpu_epi_chain_compile(&p, 0, pin, &out, &ch), "a full-size operand (residual Add) is taken");
  fbx_ir_ew_instr add2[] = {I2(FBX_IR_OP_ADD, 1, 2)};
  fbx_ir_ew_program p2 = prog_of(3, add2, 1);
  fbx_tensor pin3[3] = {out, full, full};
  CHECK(!fbx_cpu_epi_chain_compile(&p2, 0, pin3, &out, &ch), "an op on two operands (not the chain) is declined");
  pin[1] = row;
  CHECK(!fbx_cpu_epi_chain_compile(&p, 0, pin, &out, &ch), "an operand varying along W is declined");
  pin[1] = scal;
  CHECK(fbx_cpu_epi_chain_compile(&p, 0, pin, &out, &ch), "a scalar operand is taken");
  fbx_ir_ew_instr sig[] = {I1(FBX_IR_OP_LOG, 0)};
  fbx_ir_ew_program ps = prog_of(1, sig, 1);
  CHECK(!fbx_cpu_epi_chain_compile(&ps, 0, pin, &out, &ch), "an op without a chain form (Log) is declined");
  fbx_ir_ew_instr cst[] = {I2(FBX_IR_OP_ADD, 0, 1)};
  cst[0].dtype = FBX_DTYPE_F64;
  fbx_ir_ew_program pc = prog_of(2, cst, 1);
  CHECK(!fbx_cpu_epi_chain_compile(&pc, 0, pin, &out, &ch), "a non-float32 instruction is declined");
  /* five values live at once: x, x+1, x+2, x+3, x+4 all read by the last four instructions */
  fbx_ir_ew_instr live[] = {I2(FBX_IR_OP_ADD, 0, 1), I2(FBX_IR_OP_ADD, 2, 1), I2(FBX_IR_OP_ADD, 3, 1),
                            I2(FBX_IR_OP_ADD, 4, 1), I2(FBX_IR_OP_MUL, 0, 2), I2(FBX_IR_OP_MUL, 6, 3),
                            I2(FBX_IR_OP_MUL, 7, 4), I2(FBX_IR_OP_MUL, 8, 5)};
  fbx_ir_ew_program pl = prog_of(2, live, 8);
  CHECK(!fbx_cpu_epi_chain_compile(&pl, 0, pin, &out, &ch), "more live values than slots is declined");
}

int main(void) {
  test_hand_written();
  test_random();
  test_declines();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
