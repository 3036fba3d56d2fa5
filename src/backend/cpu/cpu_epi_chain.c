/* Conv epilogues as a register chain (see cpu_epi_chain.h). The arithmetic of
 * every op is the interpreter's (cpu_ew.c, cpu_ew_ops.inc): Max/Min keep the
 * NaN of their first operand, Relu keeps NaN, HardSwish gives 0 (not NaN)
 * at -inf; HardSigmoid's vector form uses an FMA as the interpreter's does;
 * Exp / Erf / Sigmoid / Tanh are the interpreter's vector functions (its
 * 8-lane ones, or their 16-lane forms, lane for lane the same), and its
 * scalar tails where a row segment ends inside 8 values (the AVX2 form and
 * the portable one; the AVX-512 form's masked tail uses the vector function). */
#include "cpu_epi_chain.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_gemm_avx512.h" /* fbx_cpu_avx512_enabled */
#include "cpu_simd.h"         /* exp / erf / sigmoid / tanh, 8 lanes */
#include "cpu_simd512.h"      /* and 16 */

/* ---- compile ---- */

static bool fbx__epc_un_ok(fbx_ir_op op) {
  switch (op) {
    case FBX_IR_OP_IDENTITY: case FBX_IR_OP_NEG: case FBX_IR_OP_ABS: case FBX_IR_OP_RELU:
    case FBX_IR_OP_LEAKY_RELU: case FBX_IR_OP_HARD_SIGMOID: case FBX_IR_OP_HARD_SWISH:
    case FBX_IR_OP_EXP: case FBX_IR_OP_ERF: case FBX_IR_OP_SIGMOID: case FBX_IR_OP_TANH:
      return true;
    default: return false;
  }
}

static bool fbx__epc_bin_ok(fbx_ir_op op) {
  switch (op) {
    case FBX_IR_OP_ADD: case FBX_IR_OP_SUB: case FBX_IR_OP_MUL: case FBX_IR_OP_DIV:
    case FBX_IR_OP_MAX: case FBX_IR_OP_MIN:
      return true;
    default: return false;
  }
}

/* An operand's kind (FBX_CPU_EPI_K_*): float32, broadcast to out as one value,
 * one per channel (dim 1 of out), or out's own shape; -1: none of them. */
static int fbx__epc_kind(const fbx_tensor *t, const fbx_tensor *out) {
  if (t->dtype != FBX_DTYPE_F32 || !t->data || t->rank > out->rank) return -1;
  bool full = true, chan = true, one = true;
  for (int d = 0; d < out->rank; d++) {
    int id = d - (out->rank - t->rank);
    int64_t dim = id >= 0 ? t->dims[id] : 1;
    full &= dim == out->dims[d];
    one &= dim == 1;
    chan &= dim == 1 || (d == 1 && dim == out->dims[1]);
  }
  return one ? FBX_CPU_EPI_K_SCALAR : chan ? FBX_CPU_EPI_K_CHANNEL : full ? FBX_CPU_EPI_K_TENSOR : -1;
}

typedef struct fbx__epc_state {
  fbx_cpu_epi_chain *ch;
  int vreg;                              /* program register held in V */
  int slot[FBX_CPU_EPI_CHAIN_SLOTS];     /* register held in each slot, -1 free */
  const int *last;                       /* last instruction reading each register */
} fbx__epc_state;

static bool fbx__epc_emit(fbx__epc_state *s, fbx_cpu_epi_step st) {
  if (s->ch->n_steps >= FBX_CPU_EPI_CHAIN_MAX_STEPS) return false;
  s->ch->step[s->ch->n_steps++] = st;
  return true;
}

static int fbx__epc_slot_of(const fbx__epc_state *s, int reg) {
  for (int i = 0; i < FBX_CPU_EPI_CHAIN_SLOTS; i++)
    if (s->slot[i] == reg) return i;
  return -1;
}

/* V's register is still read at instruction >= i: keep a copy in a slot. */
static bool fbx__epc_keep_v(fbx__epc_state *s, int i) {
  if (s->last[s->vreg] < i || fbx__epc_slot_of(s, s->vreg) >= 0) return true;
  int f = fbx__epc_slot_of(s, -1);
  if (f < 0) return false;
  s->slot[f] = s->vreg;
  return fbx__epc_emit(s, (fbx_cpu_epi_step){.kind = FBX_CPU_EPI_SAVE, .slot = (uint8_t)f});
}

static bool fbx__epc_row_consts(const fbx_cpu_epi_chain *ch, int64_t c, float *kc, float *kr);

/* The evaluators' one switch: SAVE/LOAD by slot, UN, FK, or BIN by (op,
 * operand class K/T/V/S0/S1/S2, swapped). */
enum { FBX__EPC_C_SAVE = 0, FBX__EPC_C_LOAD = 3, FBX__EPC_C_UN = 6, FBX__EPC_C_FK = 7, FBX__EPC_C_BIN = 8 };
static uint8_t fbx__epc_code(const fbx_cpu_epi_step *st) {
  switch (st->kind) {
    case FBX_CPU_EPI_SAVE: return (uint8_t)(FBX__EPC_C_SAVE + st->slot);
    case FBX_CPU_EPI_LOAD: return (uint8_t)(FBX__EPC_C_LOAD + st->slot);
    case FBX_CPU_EPI_UN: return FBX__EPC_C_UN;
    default: break;
  }
  if (st->fk) return FBX__EPC_C_FK;
  int opi = st->op == FBX_IR_OP_ADD ? 0 : st->op == FBX_IR_OP_SUB ? 1 : st->op == FBX_IR_OP_MUL ? 2
          : st->op == FBX_IR_OP_DIV ? 3 : st->op == FBX_IR_OP_MAX ? 4 : 5;
  int cls = st->src == FBX_CPU_EPI_SRC_K ? 0 : st->src == FBX_CPU_EPI_SRC_T ? 1 : st->src == FBX_CPU_EPI_SRC_V ? 2
          : 3 + (st->src - FBX_CPU_EPI_SRC_S0);
  return (uint8_t)(FBX__EPC_C_BIN + opi * 12 + cls * 2 + (st->swapped ? 1 : 0));
}

bool fbx_cpu_epi_chain_compile(const fbx_ir_ew_program *prog, int reg, const fbx_tensor *pin, const fbx_tensor *out,
                               fbx_cpu_epi_chain *ch) {
  if (!prog || out->dtype != FBX_DTYPE_F32 || out->rank < 2 || !out->data) return false;
  if (prog->in_dtypes[reg] != FBX_DTYPE_UNDEFINED && prog->in_dtypes[reg] != FBX_DTYPE_F32) return false;
  int n_regs = prog->n_inputs + prog->n_instrs;
  if (n_regs > 256 || prog->out_reg < 0 || prog->out_reg >= n_regs) return false;
  memset(ch, 0, sizeof *ch);
  int kidx[256], last[256];
  for (int r = 0; r < n_regs; r++) kidx[r] = -1, last[r] = -1;
  for (int j = 0; j < prog->n_inputs; j++) {
    if (j == reg) continue;
    int kind = fbx__epc_kind(&pin[j], out);
    if (ch->n_k >= FBX_CPU_EPI_CHAIN_MAX_K || kind < 0) return false;
    ch->kind[ch->n_k] = (uint8_t)kind;
    ch->k[ch->n_k] = pin[j].data;
    kidx[j] = ch->n_k++;
  }
  for (int i = 0; i < prog->n_instrs; i++) {
    const fbx_ir_ew_instr *ins = &prog->instrs[i];
    int cls = fbx_ir_op_class(ins->op);
    if (ins->dtype != FBX_DTYPE_F32) return false;
    if (cls == FBX_IR_CLASS_EW1 ? !fbx__epc_un_ok(ins->op) : cls != FBX_IR_CLASS_EW2 || !fbx__epc_bin_ok(ins->op))
      return false;
    int nop = cls == FBX_IR_CLASS_EW1 ? 1 : 2, ops[2] = {ins->a, ins->b};
    for (int q = 0; q < nop; q++) {
      if (ops[q] < 0 || ops[q] >= prog->n_inputs + i) return false;
      last[ops[q]] = i;
    }
  }
  last[prog->out_reg] = prog->n_instrs;
  fbx__epc_state s = {.ch = ch, .vreg = reg, .last = last};
  for (int i = 0; i < FBX_CPU_EPI_CHAIN_SLOTS; i++) s.slot[i] = -1;
  for (int i = 0; i < prog->n_instrs; i++) {
    const fbx_ir_ew_instr *ins = &prog->instrs[i];
    bool un = fbx_ir_op_class(ins->op) == FBX_IR_CLASS_EW1;
    int a = ins->a, b = un ? -1 : ins->b;
    /* a tensor operand is loaded like a saved value, but only as the second operand */
    bool ka = kidx[a] >= 0, kb = !un && kidx[b] >= 0;
    if (ka && (un || kb)) { /* operands only: a rowop if none is a tensor */
      int ia = kidx[a], ib = un ? ia : kidx[b], r = prog->n_inputs + i;
      if (ch->kind[ia] == FBX_CPU_EPI_K_TENSOR || ch->kind[ib] == FBX_CPU_EPI_K_TENSOR) return false;
      if (ch->n_k >= FBX_CPU_EPI_CHAIN_MAX_K) return false;
      ch->rowop[ch->n_rowops++] = (fbx_cpu_epi_rowop){.op = ins->op, .a = (uint8_t)ia, .b = (uint8_t)ib,
                                                      .dst = (uint8_t)ch->n_k, .al = (float)ins->params.ew.alpha,
                                                      .be = (float)ins->params.ew.beta};
      ch->kind[ch->n_k] = ch->kind[ia] == FBX_CPU_EPI_K_CHANNEL || ch->kind[ib] == FBX_CPU_EPI_K_CHANNEL
                              ? FBX_CPU_EPI_K_CHANNEL : FBX_CPU_EPI_K_SCALAR;
      ch->k[ch->n_k] = NULL;
      kidx[r] = ch->n_k++;
      continue;
    }
    /* X: the operand computed in V */
    int x = ka ? b : kb ? a : (!un && s.vreg == b) ? b : a;
    if (s.vreg != x) {
      int sx = fbx__epc_slot_of(&s, x);
      if (sx < 0 || !fbx__epc_keep_v(&s, i)) return false;
      if (!fbx__epc_emit(&s, (fbx_cpu_epi_step){.kind = FBX_CPU_EPI_LOAD, .slot = (uint8_t)sx})) return false;
      s.vreg = x;
    }
    if (!fbx__epc_keep_v(&s, i + 1)) return false; /* V is overwritten by the result */
    fbx_cpu_epi_step st = {.op = ins->op, .al = (float)ins->params.ew.alpha, .be = (float)ins->params.ew.beta};
    if (un) {
      st.kind = FBX_CPU_EPI_UN;
    } else {
      int o = x == a ? b : a; /* the other operand */
      st.kind = FBX_CPU_EPI_BIN;
      st.swapped = x == b && x != a;
      if (kidx[o] >= 0 && ch->kind[kidx[o]] == FBX_CPU_EPI_K_TENSOR) {
        st.src = FBX_CPU_EPI_SRC_T;
        st.k = (uint8_t)kidx[o];
      } else if (kidx[o] >= 0) {
        st.src = FBX_CPU_EPI_SRC_K;
        st.k = (uint8_t)kidx[o];
        st.fk = ins->op == FBX_IR_OP_DIV && !st.swapped ? FBX_CPU_EPI_FK_DIV
              : ins->op == FBX_IR_OP_MAX ? FBX_CPU_EPI_FK_MAX
              : ins->op == FBX_IR_OP_MIN ? FBX_CPU_EPI_FK_MIN : FBX_CPU_EPI_FK_NONE;
        ch->k_use[st.k] |= (uint8_t)(1u << st.fk);
      } else if (o == x) {
        st.src = FBX_CPU_EPI_SRC_V;
      } else {
        int so = fbx__epc_slot_of(&s, o);
        if (so < 0) return false;
        st.src = (uint8_t)(FBX_CPU_EPI_SRC_S0 + so);
      }
    }
    if (!fbx__epc_emit(&s, st)) return false;
    s.vreg = prog->n_inputs + i;
    for (int q = 0; q < FBX_CPU_EPI_CHAIN_SLOTS; q++)
      if (s.slot[q] >= 0 && last[s.slot[q]] <= i) s.slot[q] = -1;
  }
  if (kidx[prog->out_reg] >= 0) return false;
  if (s.vreg != prog->out_reg) {
    int so = fbx__epc_slot_of(&s, prog->out_reg);
    if (so < 0 || !fbx__epc_emit(&s, (fbx_cpu_epi_step){.kind = FBX_CPU_EPI_LOAD, .slot = (uint8_t)so})) return false;
  }
  if (pin[reg].data != out->data) { /* x from its own tensor: out's shape */
    if (pin[reg].dtype != FBX_DTYPE_F32 || pin[reg].rank != out->rank || !pin[reg].data) return false;
    for (int d = 0; d < out->rank; d++)
      if (pin[reg].dims[d] != out->dims[d]) return false;
  }
  for (int t = 0; t < ch->n_steps; t++) ch->step[t].code = fbx__epc_code(&ch->step[t]);
  ch->x = pin[reg].data;
  ch->y = out->data;
  ch->C = out->dims[1];
  ch->inner = 1;
  for (int d = 2; d < out->rank; d++) ch->inner *= out->dims[d];
  ch->isa = fbx_cpu_avx512_enabled() ? 2 : 1;
  if (ch->C <= 0 || ch->inner <= 0) return false;
  for (int k = 0; k < ch->n_k; k++) ch->by_row |= ch->kind[k] == FBX_CPU_EPI_K_CHANNEL;
  if (!ch->by_row) ch->fast0 = fbx__epc_row_consts(ch, 0, ch->kc0, ch->kr0);
  return true;
}

/* ---- evaluate: portable C ---- */

static inline float fbx__epc_bin1(fbx_ir_op op, float x, float y) {
  switch (op) {
    case FBX_IR_OP_ADD: return x + y;
    case FBX_IR_OP_SUB: return x - y;
    case FBX_IR_OP_MUL: return x * y;
    case FBX_IR_OP_DIV: return x / y;
    case FBX_IR_OP_MAX: return (x != x || x > y) ? x : y;
    default: return (x != x || x < y) ? x : y; /* MIN */
  }
}

static inline float fbx__epc_un1(const fbx_cpu_epi_step *st, float x) {
  switch (st->op) {
    case FBX_IR_OP_NEG: return -x;
    case FBX_IR_OP_ABS: return fabsf(x);
    case FBX_IR_OP_RELU: return x < 0 ? 0.f : x;
    case FBX_IR_OP_LEAKY_RELU: return x < 0 ? st->al * x : x;
    case FBX_IR_OP_HARD_SIGMOID: {
      float v = st->al * x + st->be, t = v > 1.f ? 1.f : v;
      return t < 0.f ? 0.f : t;
    }
    case FBX_IR_OP_HARD_SWISH: {
      float v = x / 6.f + 0.5f, t0 = v > 1.f ? 1.f : v, t = t0 < 0.f ? 0.f : t0;
      return t == 0.f ? 0.f : x * t;
    }
    /* the transcendentals as the block interpreter's tails compute them (cpu_ew.c) */
    case FBX_IR_OP_EXP: return expf(x);
    case FBX_IR_OP_ERF: return erff(x);
    case FBX_IR_OP_SIGMOID: return fbx__sigmoid1(x);
    case FBX_IR_OP_TANH: return tanhf(x);
    default: return x; /* IDENTITY */
  }
}

/* One row segment: x, y, tp[k] (tensor operands) at the segment's first element. */
static void fbx__epc_row_c(const fbx_cpu_epi_chain *ch, const float *x, float *y, int64_t n, const float *kc,
                           const float *const *tp) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], s[FBX_CPU_EPI_CHAIN_SLOTS] = {0};
    for (int t = 0; t < ch->n_steps; t++) {
      const fbx_cpu_epi_step *st = &ch->step[t];
      switch (st->kind) {
        case FBX_CPU_EPI_SAVE: s[st->slot] = v; break;
        case FBX_CPU_EPI_LOAD: v = s[st->slot]; break;
        case FBX_CPU_EPI_UN: v = fbx__epc_un1(st, v); break;
        default: {
          float o = st->src == FBX_CPU_EPI_SRC_K ? kc[st->k] : st->src == FBX_CPU_EPI_SRC_T ? tp[st->k][i]
                  : st->src == FBX_CPU_EPI_SRC_V ? v : s[st->src - 1];
          v = st->swapped ? fbx__epc_bin1(st->op, o, v) : fbx__epc_bin1(st->op, v, o);
        }
      }
    }
    y[i] = v;
  }
}

/* The values of channel c's row: operands (tensor ones 0), rowops, the
 * reciprocals of divisors; false when a Div/Max/Min constant is outside what
 * the vector FK forms assume (the row then runs the portable form). */
static bool fbx__epc_row_consts(const fbx_cpu_epi_chain *ch, int64_t c, float *kc, float *kr) {
  for (int k = 0; k < ch->n_k; k++)
    kc[k] = ch->kind[k] == FBX_CPU_EPI_K_TENSOR || !ch->k[k] ? 0.f
          : ch->k[k][ch->kind[k] == FBX_CPU_EPI_K_CHANNEL ? c : 0];
  for (int r = 0; r < ch->n_rowops; r++) {
    const fbx_cpu_epi_rowop *ro = &ch->rowop[r];
    fbx_cpu_epi_step st = {.op = ro->op, .al = ro->al, .be = ro->be};
    kc[ro->dst] = fbx_ir_op_class(ro->op) == FBX_IR_CLASS_EW1 ? fbx__epc_un1(&st, kc[ro->a])
                                                               : fbx__epc_bin1(ro->op, kc[ro->a], kc[ro->b]);
  }
  bool fast = true;
  for (int k = 0; k < ch->n_k; k++) {
    float v = kc[k], a = fabsf(v);
    kr[k] = 0.f;
    if (ch->k_use[k] & (1u << FBX_CPU_EPI_FK_DIV)) {
      if (!(a > 0x1p-100f && a < 0x1p100f)) fast = false;
      else kr[k] = 1.f / v;
    }
    if ((ch->k_use[k] & ((1u << FBX_CPU_EPI_FK_MAX) | (1u << FBX_CPU_EPI_FK_MIN))) && v != v) fast = false;
  }
  return fast;
}

/* ---- evaluate: AVX2 (8 lanes; the tail through the portable form) ---- */

/* The transcendentals, the block interpreter's vector forms (cpu_simd.h), out of line: inlined, their
 * bodies made the unary step too large to inline into the step loop, which slowed every other
 * program's steps (PP-OCR's HardSwish epilogues 5-7%, measured). */
__attribute__((noinline)) static __m256 fbx__epc_trans8(fbx_ir_op op, __m256 x) {
  switch (op) {
    case FBX_IR_OP_EXP: return fbx__exp256(x);
    case FBX_IR_OP_ERF: return fbx__erf256(x);
    case FBX_IR_OP_SIGMOID: return fbx__sigmoid256(x);
    default: return fbx__tanh256(x);
  }
}

static inline __m256 fbx__epc_un8(const fbx_cpu_epi_step *st, __m256 x) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  switch (st->op) {
    case FBX_IR_OP_NEG: return _mm256_xor_ps(x, _mm256_set1_ps(-0.f));
    case FBX_IR_OP_ABS: return _mm256_andnot_ps(_mm256_set1_ps(-0.f), x);
    case FBX_IR_OP_RELU: return _mm256_andnot_ps(_mm256_cmp_ps(x, zero, _CMP_LT_OQ), x);
    case FBX_IR_OP_LEAKY_RELU:
      return _mm256_blendv_ps(x, _mm256_mul_ps(_mm256_set1_ps(st->al), x), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
    case FBX_IR_OP_HARD_SIGMOID: {
      __m256 v = _mm256_fmadd_ps(x, _mm256_set1_ps(st->al), _mm256_set1_ps(st->be));
      return _mm256_max_ps(zero, _mm256_min_ps(one, v));
    }
    case FBX_IR_OP_HARD_SWISH: {
      __m256 v = _mm256_add_ps(_mm256_div_ps(x, _mm256_set1_ps(6.f)), _mm256_set1_ps(0.5f));
      __m256 t = _mm256_max_ps(zero, _mm256_min_ps(one, v));
      return _mm256_andnot_ps(_mm256_cmp_ps(t, zero, _CMP_EQ_OQ), _mm256_mul_ps(x, t));
    }
    case FBX_IR_OP_EXP: case FBX_IR_OP_ERF: case FBX_IR_OP_SIGMOID: case FBX_IR_OP_TANH:
      return fbx__epc_trans8(st->op, x);
    default: return x;
  }
}

/* Blocks of FBX__EPC_NV vectors per step dispatch: the step switch is paid
 * once per block, the vectors of a block are independent (latency hidden). */
#define FBX__EPC_NV 4
#define FBX__EPC_FOR for (int j = 0; j < FBX__EPC_NV; j++)

/* One step on the block, one switch on the step's code (fbx__epc_code): v,
 * s0..s2 arrays of FBX__EPC_NV vectors, kv/kr the row's constants and their
 * reciprocals, W the lane width (8, 16: the fbx__epc_<op><W> functions),
 * LT(j) vector j of the step's tensor operand. */
#define FBX__EPC_BINC(OPI, F, W, LT)                                                              \
  case FBX__EPC_C_BIN + (OPI) * 12 + 0: FBX__EPC_FOR v[j] = F##W(v[j], kv[st->k]); break;         \
  case FBX__EPC_C_BIN + (OPI) * 12 + 1: FBX__EPC_FOR v[j] = F##W(kv[st->k], v[j]); break;         \
  case FBX__EPC_C_BIN + (OPI) * 12 + 2: FBX__EPC_FOR v[j] = F##W(v[j], LT(j)); break;             \
  case FBX__EPC_C_BIN + (OPI) * 12 + 3: FBX__EPC_FOR v[j] = F##W(LT(j), v[j]); break;             \
  case FBX__EPC_C_BIN + (OPI) * 12 + 4:                                                           \
  case FBX__EPC_C_BIN + (OPI) * 12 + 5: FBX__EPC_FOR v[j] = F##W(v[j], v[j]); break;              \
  case FBX__EPC_C_BIN + (OPI) * 12 + 6: FBX__EPC_FOR v[j] = F##W(v[j], s0[j]); break;             \
  case FBX__EPC_C_BIN + (OPI) * 12 + 7: FBX__EPC_FOR v[j] = F##W(s0[j], v[j]); break;             \
  case FBX__EPC_C_BIN + (OPI) * 12 + 8: FBX__EPC_FOR v[j] = F##W(v[j], s1[j]); break;             \
  case FBX__EPC_C_BIN + (OPI) * 12 + 9: FBX__EPC_FOR v[j] = F##W(s1[j], v[j]); break;             \
  case FBX__EPC_C_BIN + (OPI) * 12 + 10: FBX__EPC_FOR v[j] = F##W(v[j], s2[j]); break;            \
  case FBX__EPC_C_BIN + (OPI) * 12 + 11: FBX__EPC_FOR v[j] = F##W(s2[j], v[j]); break;

#define FBX__EPC_STEP(W, UN, FK, LT)                                                              \
  switch (st->code) {                                                                            \
    case FBX__EPC_C_SAVE + 0: FBX__EPC_FOR s0[j] = v[j]; break;                                  \
    case FBX__EPC_C_SAVE + 1: FBX__EPC_FOR s1[j] = v[j]; break;                                  \
    case FBX__EPC_C_SAVE + 2: FBX__EPC_FOR s2[j] = v[j]; break;                                  \
    case FBX__EPC_C_LOAD + 0: FBX__EPC_FOR v[j] = s0[j]; break;                                  \
    case FBX__EPC_C_LOAD + 1: FBX__EPC_FOR v[j] = s1[j]; break;                                  \
    case FBX__EPC_C_LOAD + 2: FBX__EPC_FOR v[j] = s2[j]; break;                                  \
    case FBX__EPC_C_UN: UN(st, v); break;                                                        \
    case FBX__EPC_C_FK: FK(st, v, kv, kr); break;                                                \
    FBX__EPC_BINC(0, fbx__epc_add, W, LT)                                                        \
    FBX__EPC_BINC(1, fbx__epc_sub, W, LT)                                                        \
    FBX__EPC_BINC(2, fbx__epc_mul, W, LT)                                                        \
    FBX__EPC_BINC(3, fbx__epc_div, W, LT)                                                        \
    FBX__EPC_BINC(4, fbx__epc_max, W, LT)                                                        \
    FBX__EPC_BINC(5, fbx__epc_min, W, LT)                                                        \
    default: break;                                                                              \
  }

/* exact lane ops (Max/Min: the first operand's NaN, then the second's, as the interpreter) */
static inline __m256 fbx__epc_add8(__m256 x, __m256 y) { return _mm256_add_ps(x, y); }
static inline __m256 fbx__epc_sub8(__m256 x, __m256 y) { return _mm256_sub_ps(x, y); }
static inline __m256 fbx__epc_mul8(__m256 x, __m256 y) { return _mm256_mul_ps(x, y); }
static inline __m256 fbx__epc_div8(__m256 x, __m256 y) { return _mm256_div_ps(x, y); }
static inline __m256 fbx__epc_max8(__m256 x, __m256 y) {
  return _mm256_blendv_ps(y, x, _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_GT_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
}
static inline __m256 fbx__epc_min8(__m256 x, __m256 y) {
  return _mm256_blendv_ps(y, x, _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_LT_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
}
#define FBX__EPC_UN8(st, v) FBX__EPC_FOR v[j] = fbx__epc_un8(st, v[j])
/* q = v * (1/k), corrected by the FMA residual (v - q*k) / k; an infinite or NaN q
 * (v infinite or NaN, or the quotient overflows) is v / k already and is kept */
static inline __m256 fbx__epc_nonfinite8(__m256 q) {
  return _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), q), _mm256_set1_ps(INFINITY), _CMP_NLT_UQ);
}
#define FBX__EPC_FK8(st, v, kv, kr)                                                               \
  switch ((st)->fk) {                                                                            \
    case FBX_CPU_EPI_FK_DIV:                                                                     \
      FBX__EPC_FOR {                                                                             \
        __m256 q = _mm256_mul_ps(v[j], kr[(st)->k]);                                             \
        __m256 e = _mm256_fnmadd_ps(q, kv[(st)->k], v[j]);                                       \
        v[j] = _mm256_blendv_ps(_mm256_fmadd_ps(e, kr[(st)->k], q), q, fbx__epc_nonfinite8(q));            \
      }                                                                                          \
      break;                                                                                     \
    case FBX_CPU_EPI_FK_MAX: FBX__EPC_FOR v[j] = _mm256_max_ps(kv[(st)->k], v[j]); break;        \
    default: FBX__EPC_FOR v[j] = _mm256_min_ps(kv[(st)->k], v[j]); break;                        \
  }

#define FBX__EPC_LOADT8(j) _mm256_loadu_ps(tp[st->k] + i + 8 * (j))

static void fbx__epc_row_avx2(const fbx_cpu_epi_chain *ch, const float *x, float *y, int64_t n, const float *kc,
                              const float *kq, const float *const *tp) {
  __m256 kv[FBX_CPU_EPI_CHAIN_MAX_K], kr[FBX_CPU_EPI_CHAIN_MAX_K];
  for (int k = 0; k < ch->n_k; k++) kv[k] = _mm256_set1_ps(kc[k]), kr[k] = _mm256_set1_ps(kq[k]);
  int64_t i = 0;
  for (; i + 8 * FBX__EPC_NV <= n; i += 8 * FBX__EPC_NV) {
    __m256 v[FBX__EPC_NV], s0[FBX__EPC_NV], s1[FBX__EPC_NV], s2[FBX__EPC_NV];
    FBX__EPC_FOR v[j] = _mm256_loadu_ps(x + i + 8 * j), s0[j] = s1[j] = s2[j] = _mm256_setzero_ps();
    for (int t = 0; t < ch->n_steps; t++) {
      const fbx_cpu_epi_step *st = &ch->step[t];
      FBX__EPC_STEP(8, FBX__EPC_UN8, FBX__EPC_FK8, FBX__EPC_LOADT8)
    }
    FBX__EPC_FOR _mm256_storeu_ps(y + i + 8 * j, v[j]);
  }
  if (i < n) {
    const float *tq[FBX_CPU_EPI_CHAIN_MAX_K];
    for (int k = 0; k < ch->n_k; k++) tq[k] = tp[k] ? tp[k] + i : NULL;
    fbx__epc_row_c(ch, x + i, y + i, n - i, kc, tq);
  }
}

/* ---- evaluate: AVX-512 (16 lanes, masked tail) ---- */
#define FBX__T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

/* As fbx__epc_trans8, 16 lanes (cpu_simd512.h: lane for lane the 8-lane forms). */
FBX__T512 __attribute__((noinline)) static __m512 fbx__epc_trans16(fbx_ir_op op, __m512 x) {
  switch (op) {
    case FBX_IR_OP_EXP: return fbx__exp512(x);
    case FBX_IR_OP_ERF: return fbx__erf512(x);
    case FBX_IR_OP_SIGMOID: return fbx__sigmoid512(x);
    default: return fbx__tanh512(x);
  }
}

FBX__T512 static inline __m512 fbx__epc_un16(const fbx_cpu_epi_step *st, __m512 x) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.f);
  switch (st->op) {
    case FBX_IR_OP_NEG: return _mm512_xor_ps(x, _mm512_set1_ps(-0.f));
    case FBX_IR_OP_ABS: return _mm512_andnot_ps(_mm512_set1_ps(-0.f), x);
    case FBX_IR_OP_RELU: return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), zero);
    case FBX_IR_OP_LEAKY_RELU:
      return _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), _mm512_set1_ps(st->al), x);
    case FBX_IR_OP_HARD_SIGMOID: {
      __m512 v = _mm512_fmadd_ps(x, _mm512_set1_ps(st->al), _mm512_set1_ps(st->be));
      return _mm512_max_ps(zero, _mm512_min_ps(one, v));
    }
    case FBX_IR_OP_HARD_SWISH: {
      __m512 v = _mm512_add_ps(_mm512_div_ps(x, _mm512_set1_ps(6.f)), _mm512_set1_ps(0.5f));
      __m512 t = _mm512_max_ps(zero, _mm512_min_ps(one, v));
      return _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(t, zero, _CMP_NEQ_UQ), x, t);
    }
    case FBX_IR_OP_EXP: case FBX_IR_OP_ERF: case FBX_IR_OP_SIGMOID: case FBX_IR_OP_TANH:
      return fbx__epc_trans16(st->op, x);
    default: return x;
  }
}

FBX__T512 static inline __m512 fbx__epc_add16(__m512 x, __m512 y) { return _mm512_add_ps(x, y); }
FBX__T512 static inline __m512 fbx__epc_sub16(__m512 x, __m512 y) { return _mm512_sub_ps(x, y); }
FBX__T512 static inline __m512 fbx__epc_mul16(__m512 x, __m512 y) { return _mm512_mul_ps(x, y); }
FBX__T512 static inline __m512 fbx__epc_div16(__m512 x, __m512 y) { return _mm512_div_ps(x, y); }
FBX__T512 static inline __m512 fbx__epc_max16(__m512 x, __m512 y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_GT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}
FBX__T512 static inline __m512 fbx__epc_min16(__m512 x, __m512 y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_LT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}
#define FBX__EPC_UN16(st, v) FBX__EPC_FOR v[j] = fbx__epc_un16(st, v[j])
FBX__T512 static inline __mmask16 fbx__epc_nonfinite16(__m512 q) {
  return _mm512_cmp_ps_mask(_mm512_abs_ps(q), _mm512_set1_ps(INFINITY), _CMP_NLT_UQ);
}
#define FBX__EPC_FK16(st, v, kv, kr)                                                              \
  switch ((st)->fk) {                                                                            \
    case FBX_CPU_EPI_FK_DIV:                                                                     \
      FBX__EPC_FOR {                                                                             \
        __m512 q = _mm512_mul_ps(v[j], kr[(st)->k]);                                             \
        __m512 e = _mm512_fnmadd_ps(q, kv[(st)->k], v[j]);                                       \
        v[j] = _mm512_mask_mov_ps(_mm512_fmadd_ps(e, kr[(st)->k], q), fbx__epc_nonfinite16(q), q);         \
      }                                                                                          \
      break;                                                                                     \
    case FBX_CPU_EPI_FK_MAX: FBX__EPC_FOR v[j] = _mm512_max_ps(kv[(st)->k], v[j]); break;        \
    default: FBX__EPC_FOR v[j] = _mm512_min_ps(kv[(st)->k], v[j]); break;                        \
  }

#define FBX__EPC_LOADT16(j) _mm512_maskz_loadu_ps(m[j], tp[st->k] + i + 16 * (j))

FBX__T512 static void fbx__epc_row_avx512(const fbx_cpu_epi_chain *ch, const float *x, float *y, int64_t n,
                                          const float *kc, const float *kq, const float *const *tp) {
  __m512 kv[FBX_CPU_EPI_CHAIN_MAX_K], kr[FBX_CPU_EPI_CHAIN_MAX_K];
  for (int k = 0; k < ch->n_k; k++) kv[k] = _mm512_set1_ps(kc[k]), kr[k] = _mm512_set1_ps(kq[k]);
  for (int64_t i = 0; i < n; i += 16 * FBX__EPC_NV) {
    __mmask16 m[FBX__EPC_NV];
    __m512 v[FBX__EPC_NV], s0[FBX__EPC_NV], s1[FBX__EPC_NV], s2[FBX__EPC_NV];
    FBX__EPC_FOR {
      int64_t r = n - i - 16 * j;
      m[j] = r >= 16 ? (__mmask16)0xffff : r <= 0 ? (__mmask16)0 : (__mmask16)((1u << r) - 1);
      v[j] = _mm512_maskz_loadu_ps(m[j], x + i + 16 * j);
      s0[j] = s1[j] = s2[j] = _mm512_setzero_ps();
    }
    for (int t = 0; t < ch->n_steps; t++) {
      const fbx_cpu_epi_step *st = &ch->step[t];
      FBX__EPC_STEP(16, FBX__EPC_UN16, FBX__EPC_FK16, FBX__EPC_LOADT16)
    }
    FBX__EPC_FOR _mm512_mask_storeu_ps(y + i + 16 * j, m[j], v[j]);
  }
}

void fbx_cpu_epi_chain_apply(const fbx_cpu_epi_chain *ch, int64_t begin, int64_t end) {
  while (begin < end) {
    int64_t row = begin / ch->inner, stop = ch->by_row ? (row + 1) * ch->inner : end;
    if (stop > end) stop = end;
    float kcr[FBX_CPU_EPI_CHAIN_MAX_K], krr[FBX_CPU_EPI_CHAIN_MAX_K];
    const float *kc = ch->kc0, *kr = ch->kr0;
    bool fast = ch->fast0;
    if (ch->by_row) {
      fast = fbx__epc_row_consts(ch, row % ch->C, kcr, krr);
      kc = kcr, kr = krr;
    }
    const float *tp[FBX_CPU_EPI_CHAIN_MAX_K];
    for (int k = 0; k < ch->n_k; k++) tp[k] = ch->kind[k] == FBX_CPU_EPI_K_TENSOR ? ch->k[k] + begin : NULL;
    const float *x = ch->x + begin;
    float *y = ch->y + begin;
    if (!fast || ch->isa == 0)
      fbx__epc_row_c(ch, x, y, stop - begin, kc, tp);
    else if (ch->isa == 2)
      fbx__epc_row_avx512(ch, x, y, stop - begin, kc, kr, tp);
    else
      fbx__epc_row_avx2(ch, x, y, stop - begin, kc, kr, tp);
    begin = stop;
  }
}
