/* CUDA backend vs CPU backend, op by op (ggml test-backend-ops style): each
 * case builds one IR node, random inputs, runs it on both backends and
 * compares (float: max |a-b| / max(1, |b|) within the case's tolerance;
 * integers and bool: exact). Then every op the CUDA backend claims must
 * have been covered by a case, and ops it cannot run must be declined with
 * a reason naming the device.
 *
 * Skips (exit 0, one line saying why) when libfusebox_cuda.so, the driver
 * or a GPU is missing; any other failure to open the device fails. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "backend/backend_cuda.h"
#include "common/check.h"
#include "common/cuda_fork.h"
#include "exec/exec_compiled.h"

static fbx_backend *g_cpu, *g_cuda;
static char g_lib[PATH_MAX + 32]; /* libfusebox_cuda.so of this build */
static bool g_tested[FBX_IR_OP_COUNT];
static uint64_t g_rng = 0x2545F4914F6CDD1Dull;

static double rnd(void) { /* uniform [-1, 1) */
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(g_rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

/* ---- host tensors ---- */
static fbx_tensor tmake(fbx_dtype dt, int rank, const int64_t *dims) {
  fbx_tensor t = {.dtype = dt, .rank = rank};
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  size_t n = fbx_tensor_nbytes(&t);
  t.data = calloc(1, n ? n : 8);
  return t;
}
#define T(dt, ...) tmake(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
static fbx_tensor tscalar(fbx_dtype dt) { return tmake(dt, 0, NULL); }
static fbx_tensor tabsent(void) { fbx_tensor t = {.rank = -1}; return t; }
static float *F(const fbx_tensor *t) { return t->data; }
static int64_t *L(const fbx_tensor *t) { return t->data; }

/* random fill in [lo, hi) for floats, [lo, hi] for ints, 0/1 for bool */
static fbx_tensor fill(fbx_tensor t, double lo, double hi) {
  int64_t n = fbx_tensor_numel(&t);
  for (int64_t i = 0; i < n; i++) {
    double u = (rnd() + 1) / 2;
    double v = lo + u * (hi - lo);
    switch (t.dtype) {
      case FBX_DTYPE_F32: F(&t)[i] = (float)v; break;
      case FBX_DTYPE_F16: ((uint16_t *)t.data)[i] = fbx_f32_to_f16((float)v); break;
      case FBX_DTYPE_I64: L(&t)[i] = (int64_t)floor(lo + u * (hi - lo + 1)); break;
      case FBX_DTYPE_I32: ((int32_t *)t.data)[i] = (int32_t)floor(lo + u * (hi - lo + 1)); break;
      case FBX_DTYPE_BOOL: case FBX_DTYPE_U8: ((uint8_t *)t.data)[i] = (uint8_t)(u < 0.5 ? 0 : 1); break;
      default: break;
    }
  }
  return t;
}
static fbx_tensor frnd(fbx_tensor t) { return fill(t, -1, 1); }
static fbx_tensor i64s(int n, const int64_t *v) {
  fbx_tensor t = T(FBX_DTYPE_I64, n);
  memcpy(t.data, v, sizeof(int64_t) * (size_t)n);
  return t;
}
#define I64S(...) i64s((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* ---- running one node on a backend ---- */
static bool g_prep_b; /* node_prepare the node on the device with input 1 constant (a MatMul weight) */

static fbx_status *run_on(fbx_backend *be, const fbx_ir_node *nd, const fbx_tensor *in, int n_in, fbx_tensor *out,
                          int n_out) {
  fbx_tensor din[FBX_IR_MAX_INPUTS], dout[FBX_IR_MAX_OUTPUTS];
  fbx_status *st = NULL;
  bool dev = !be->vt->host_visible;
  memset(din, 0, sizeof din);
  memset(dout, 0, sizeof dout);
  for (int i = 0; i < n_in; i++) {
    din[i] = in[i];
    if (!dev || in[i].rank < 0) continue;
    din[i].data = NULL;
    size_t b = fbx_tensor_nbytes(&in[i]);
    if ((st = be->vt->buffer_alloc(be, b, &din[i].data))) goto done;
    if ((st = be->vt->copy_from_host(be, din[i].data, in[i].data, b))) goto done;
  }
  for (int o = 0; o < n_out; o++) {
    dout[o] = out[o];
    if (!dev) continue;
    dout[o].data = NULL;
    if ((st = be->vt->buffer_alloc(be, fbx_tensor_nbytes(&out[o]), &dout[o].data))) goto done;
  }
  fbx_kernel_info info;
  void *state = NULL;
  if (dev && g_prep_b && be->vt->node_prepare) {
    const fbx_tensor *ci[FBX_IR_MAX_INPUTS] = {0};
    ci[1] = &in[1];
    if ((st = be->vt->node_prepare(be, nd, ci, din, &state))) goto done;
  }
  st = be->vt->run_node(be, nd, state, din, n_in, dout, n_out, &info);
  if (!st) st = be->vt->synchronize(be);
  if (state && be->vt->node_release) be->vt->node_release(be, nd, state);
  if (st) goto done;
  for (int o = 0; o < n_out && dev; o++)
    if ((st = be->vt->copy_to_host(be, out[o].data, dout[o].data, fbx_tensor_nbytes(&out[o])))) goto done;
done:
  if (dev) {
    for (int i = 0; i < n_in; i++) be->vt->buffer_free(be, din[i].data);
    for (int o = 0; o < n_out; o++) be->vt->buffer_free(be, dout[o].data);
  }
  return st;
}

static double elem(const fbx_tensor *t, int64_t i) {
  switch (t->dtype) {
    case FBX_DTYPE_F32: return F(t)[i];
    case FBX_DTYPE_F16: return fbx_f16_to_f32(((const uint16_t *)t->data)[i]);
    case FBX_DTYPE_I64: return (double)L(t)[i];
    case FBX_DTYPE_I32: return ((const int32_t *)t->data)[i];
    case FBX_DTYPE_BOOL: case FBX_DTYPE_U8: return ((const uint8_t *)t->data)[i];
    default: return NAN;
  }
}

/* Runs node (op, params) on in[0..n_in) on both backends; n_out outputs, shapes from shape inference.
 * Consumes (frees) the inputs. */
static void diff_case(const char *what, fbx_ir_op op, const fbx_ir_params *p, fbx_tensor *in, int n_in, int n_out,
                      double tol) {
  int ids[FBX_IR_MAX_INPUTS + FBX_IR_MAX_OUTPUTS];
  for (int i = 0; i < FBX_IR_MAX_INPUTS + FBX_IR_MAX_OUTPUTS; i++) ids[i] = i;
  fbx_ir_node nd = {.op = op, .n_inputs = n_in, .n_outputs = n_out, .inputs = ids, .outputs = ids + FBX_IR_MAX_INPUTS,
                    .name = what, .onnx_op = what, .onnx_node_index = -1};
  if (p) nd.params = *p;
  g_tested[op] = true;
  fbx_tensor oc[FBX_IR_MAX_OUTPUTS], og[FBX_IR_MAX_OUTPUTS];
  memset(oc, 0, sizeof oc);
  fbx_status *st = fbx_ir_infer_node(&nd, in, n_in, oc, n_out);
  CHECK(!st, "%s: shape inference: %s", what, fbx_status_message(st));
  fbx_status_free(st);
  if (st) goto out;
  char why[256] = "";
  bool sup = fbx_cuda_backend_supports(g_cuda, &nd, in, n_in, why, sizeof why);
  CHECK(sup, "%s: declined by cuda: %s", what, why);
  if (!sup) goto out;
  for (int o = 0; o < n_out; o++) {
    og[o] = oc[o];
    size_t b = fbx_tensor_nbytes(&oc[o]);
    oc[o].data = calloc(1, b ? b : 8);
    og[o].data = malloc(b ? b : 8);
    memset(og[o].data, 0x7f, b ? b : 8); /* garbage: a kernel must write every element */
  }
  st = run_on(g_cpu, &nd, in, n_in, oc, n_out);
  CHECK(!st, "%s: cpu: %s", what, fbx_status_message(st));
  fbx_status_free(st);
  st = run_on(g_cuda, &nd, in, n_in, og, n_out);
  CHECK(!st, "%s: cuda: %s", what, fbx_status_message(st));
  fbx_status_free(st);
  for (int o = 0; o < n_out; o++) {
    int64_t n = fbx_tensor_numel(&oc[o]), wi = -1;
    double worst = 0;
    bool exact = !fbx_dtype_is_float(oc[o].dtype);
    for (int64_t i = 0; i < n; i++) {
      double a = elem(&og[o], i), b = elem(&oc[o], i);
      double e = (isnan(a) && isnan(b)) || a == b ? 0 : fabs(a - b) / fmax(1.0, fabs(b));
      if (isnan(e)) e = INFINITY;
      if (e > worst) { worst = e; wi = i; }
    }
    CHECK(exact ? worst == 0 : worst <= tol, "%s: output %d: max err %g at %lld (cuda %g, cpu %g), tol %g", what, o,
          worst, (long long)wi, wi >= 0 ? elem(&og[o], wi) : 0, wi >= 0 ? elem(&oc[o], wi) : 0, exact ? 0 : tol);
    free(oc[o].data);
    free(og[o].data);
  }
out:
  for (int i = 0; i < n_in; i++) free(in[i].data);
}

#define CASE(what, op, p, tol, ...)                                                        \
  do {                                                                                      \
    fbx_tensor in_[] = {__VA_ARGS__};                                                      \
    diff_case(what, op, p, in_, (int)(sizeof in_ / sizeof in_[0]), 1, tol);                \
  } while (0)

/* ---- elementwise ---- */
static void test_unary(void) {
  for (int op = 0; op < FBX_IR_OP_COUNT; op++) {
    if (fbx_ir_op_class(op) != FBX_IR_CLASS_EW1) continue;
    if (op == FBX_IR_OP_NOT || op == FBX_IR_OP_BITWISE_NOT || op == FBX_IR_OP_CAST) continue; /* int/bool below */
    fbx_ir_params p = {.ew = {.alpha = 0.3f, .beta = 0.5f, .gamma = 1.05f}};
    if (op == FBX_IR_OP_CELU || op == FBX_IR_OP_ELU) p.ew.alpha = 1.f;
    if (op == FBX_IR_OP_ISINF) p.ew.alpha = p.ew.beta = 1.f;
    double lo = -3, hi = 3;
    if (op == FBX_IR_OP_SQRT || op == FBX_IR_OP_LOG || op == FBX_IR_OP_ASIN || op == FBX_IR_OP_ACOS ||
        op == FBX_IR_OP_ATANH) lo = 0.05, hi = 0.95;
    if (op == FBX_IR_OP_ACOSH) lo = 1.05, hi = 4;
    char what[64];
    snprintf(what, sizeof what, "%s f32 (3,5,7)", fbx_ir_op_name(op));
    fbx_tensor x = fill(T(FBX_DTYPE_F32, 3, 5, 7), lo, hi);
    if (op == FBX_IR_OP_ISNAN || op == FBX_IR_OP_ISINF) {
      F(&x)[3] = NAN; F(&x)[4] = INFINITY; F(&x)[5] = -INFINITY;
    }
    CASE(what, op, &p, 2e-6, x);
    /* the same op as a one-instruction fused program: the kernel NVRTC generates for it
     * (or the interpreter, with FUSEBOX_CUDA_NVRTC=off) against the CPU backend */
    bool to_bool = op == FBX_IR_OP_ISNAN || op == FBX_IR_OP_ISINF;
    fbx_ir_ew_instr one = {.op = op, .a = 0, .dtype = to_bool ? FBX_DTYPE_BOOL : FBX_DTYPE_F32, .params = p};
    fbx_ir_ew_program pg = {.n_inputs = 1, .n_instrs = 1, .out_reg = 1, .instrs = &one, .in_dtypes = {FBX_DTYPE_F32}};
    fbx_ir_params fp = {.fused = {.prog = &pg}};
    snprintf(what, sizeof what, "FUSED_EW[%s] f32 (3,5,7)", fbx_ir_op_name(op));
    fbx_tensor x2 = fill(T(FBX_DTYPE_F32, 3, 5, 7), lo, hi); /* CASE consumed x */
    if (to_bool) {
      F(&x2)[3] = NAN; F(&x2)[4] = INFINITY; F(&x2)[5] = -INFINITY;
    }
    CASE(what, FBX_IR_OP_FUSED_EW, &fp, 2e-6, x2);
  }
  fbx_ir_params g1 = {.ew = {.alpha = 1.f}};
  CASE("GELU tanh f32", FBX_IR_OP_GELU, &g1, 2e-6, fill(T(FBX_DTYPE_F32, 64), -4, 4));
  CASE("NEG i64", FBX_IR_OP_NEG, NULL, 0, fill(T(FBX_DTYPE_I64, 40), -100, 100));
  CASE("ABS i32", FBX_IR_OP_ABS, NULL, 0, fill(T(FBX_DTYPE_I32, 40), -100, 100));
  CASE("NOT bool", FBX_IR_OP_NOT, NULL, 0, fill(T(FBX_DTYPE_BOOL, 40), 0, 1));
  CASE("BITWISE_NOT i64", FBX_IR_OP_BITWISE_NOT, NULL, 0, fill(T(FBX_DTYPE_I64, 40), -1000, 1000));
  fbx_ir_params c;
  fbx_dtype casts[][2] = {{FBX_DTYPE_F32, FBX_DTYPE_I64}, {FBX_DTYPE_I64, FBX_DTYPE_F32}, {FBX_DTYPE_F32, FBX_DTYPE_BOOL},
                          {FBX_DTYPE_BOOL, FBX_DTYPE_F32}, {FBX_DTYPE_F32, FBX_DTYPE_F16}, {FBX_DTYPE_F16, FBX_DTYPE_F32},
                          {FBX_DTYPE_I64, FBX_DTYPE_I32}, {FBX_DTYPE_I32, FBX_DTYPE_I64}, {FBX_DTYPE_BOOL, FBX_DTYPE_I64}};
  for (size_t i = 0; i < sizeof casts / sizeof casts[0]; i++) {
    memset(&c, 0, sizeof c);
    c.ew.to = casts[i][1];
    char what[64];
    snprintf(what, sizeof what, "CAST %s -> %s", fbx_dtype_name(casts[i][0]), fbx_dtype_name(casts[i][1]));
    fbx_tensor x = fill(T(casts[i][0], 6, 7), -50, 50);
    if (casts[i][0] == FBX_DTYPE_F32) F(&x)[0] = 0.f;
    CASE(what, FBX_IR_OP_CAST, &c, 0, x);
  }
}

static void test_binary(void) {
  static const fbx_ir_op fops[] = {FBX_IR_OP_ADD, FBX_IR_OP_SUB, FBX_IR_OP_MUL, FBX_IR_OP_DIV, FBX_IR_OP_POW,
                                   FBX_IR_OP_MAX, FBX_IR_OP_MIN, FBX_IR_OP_MOD, FBX_IR_OP_PRELU, FBX_IR_OP_EQUAL,
                                   FBX_IR_OP_LESS, FBX_IR_OP_LESS_EQUAL, FBX_IR_OP_GREATER, FBX_IR_OP_GREATER_EQUAL};
  for (size_t i = 0; i < sizeof fops / sizeof fops[0]; i++) {
    fbx_ir_op op = fops[i];
    double lo = op == FBX_IR_OP_POW ? 0.1 : -2;
    char what[96];
    snprintf(what, sizeof what, "%s f32 (2,3,4) x (3,1)", fbx_ir_op_name(op));
    fbx_tensor b = fill(T(FBX_DTYPE_F32, 3, 1), lo, 2);
    if (op == FBX_IR_OP_EQUAL) F(&b)[0] = 0.5f;
    fbx_tensor a = fill(T(FBX_DTYPE_F32, 2, 3, 4), lo, 2);
    if (op == FBX_IR_OP_EQUAL) F(&a)[1] = 0.5f;
    CASE(what, op, NULL, 2e-6, a, b);
    snprintf(what, sizeof what, "%s f32 scalar x (5,6)", fbx_ir_op_name(op));
    CASE(what, op, NULL, 2e-6, fill(tscalar(FBX_DTYPE_F32), lo, 2), fill(T(FBX_DTYPE_F32, 5, 6), lo, 2));
    /* as a one-instruction fused program (the generated kernel), broadcast both ways */
    bool to_bool = fbx_ir_op_class(op) == FBX_IR_CLASS_EW2 &&
                   (op == FBX_IR_OP_EQUAL || op == FBX_IR_OP_LESS || op == FBX_IR_OP_LESS_EQUAL ||
                    op == FBX_IR_OP_GREATER || op == FBX_IR_OP_GREATER_EQUAL);
    fbx_ir_ew_instr one = {.op = op, .a = 0, .b = 1, .dtype = to_bool ? FBX_DTYPE_BOOL : FBX_DTYPE_F32};
    fbx_ir_ew_program pg = {.n_inputs = 2, .n_instrs = 1, .out_reg = 2, .instrs = &one,
                            .in_dtypes = {FBX_DTYPE_F32, FBX_DTYPE_F32}};
    fbx_ir_params fp = {.fused = {.prog = &pg}};
    snprintf(what, sizeof what, "FUSED_EW[%s] f32 (2,3,4) x (3,1)", fbx_ir_op_name(op));
    CASE(what, FBX_IR_OP_FUSED_EW, &fp, 2e-6, fill(T(FBX_DTYPE_F32, 2, 3, 4), lo, 2), fill(T(FBX_DTYPE_F32, 3, 1), lo, 2));
  }
  fbx_ir_params fm = {.ew = {.alpha = 1.f}};
  CASE("MOD fmod f32", FBX_IR_OP_MOD, &fm, 2e-6, fill(T(FBX_DTYPE_F32, 50), -5, 5), fill(T(FBX_DTYPE_F32, 50), 0.5, 2));
  static const fbx_ir_op iops[] = {FBX_IR_OP_ADD, FBX_IR_OP_SUB, FBX_IR_OP_MUL, FBX_IR_OP_DIV, FBX_IR_OP_MOD,
                                   FBX_IR_OP_MAX, FBX_IR_OP_MIN, FBX_IR_OP_EQUAL, FBX_IR_OP_GREATER,
                                   FBX_IR_OP_BITWISE_AND, FBX_IR_OP_BITWISE_OR, FBX_IR_OP_BITWISE_XOR, FBX_IR_OP_POW};
  for (size_t i = 0; i < sizeof iops / sizeof iops[0]; i++) {
    char what[96];
    snprintf(what, sizeof what, "%s i64 (4,5) x (5)", fbx_ir_op_name(iops[i]));
    double lo = iops[i] == FBX_IR_OP_POW ? 0 : -20;
    CASE(what, iops[i], NULL, 0, fill(T(FBX_DTYPE_I64, 4, 5), lo, 20), fill(T(FBX_DTYPE_I64, 5), lo, iops[i] == FBX_IR_OP_POW ? 5 : 20));
  }
  CASE("SUB i32", FBX_IR_OP_SUB, NULL, 0, fill(T(FBX_DTYPE_I32, 9), -99, 99), fill(T(FBX_DTYPE_I32, 9), -99, 99));
  CASE("BITSHIFT_LEFT i64", FBX_IR_OP_BITSHIFT_LEFT, NULL, 0, fill(T(FBX_DTYPE_I64, 20), 0, 1000), fill(T(FBX_DTYPE_I64, 20), 0, 70));
  CASE("BITSHIFT_RIGHT i64", FBX_IR_OP_BITSHIFT_RIGHT, NULL, 0, fill(T(FBX_DTYPE_I64, 20), 0, 1000), fill(T(FBX_DTYPE_I64, 20), 0, 70));
  CASE("AND bool", FBX_IR_OP_AND, NULL, 0, fill(T(FBX_DTYPE_BOOL, 30), 0, 1), fill(T(FBX_DTYPE_BOOL, 30), 0, 1));
  CASE("OR bool", FBX_IR_OP_OR, NULL, 0, fill(T(FBX_DTYPE_BOOL, 30), 0, 1), fill(T(FBX_DTYPE_BOOL, 30), 0, 1));
  CASE("XOR bool (2,1,3) x (4,1)", FBX_IR_OP_XOR, NULL, 0, fill(T(FBX_DTYPE_BOOL, 2, 1, 3), 0, 1), fill(T(FBX_DTYPE_BOOL, 4, 1), 0, 1));
  CASE("WHERE bool,f32,f32 broadcast", FBX_IR_OP_WHERE, NULL, 0, fill(T(FBX_DTYPE_BOOL, 4, 1), 0, 1),
       frnd(T(FBX_DTYPE_F32, 3, 4, 5)), frnd(T(FBX_DTYPE_F32, 5)));
  CASE("ADD f16", FBX_IR_OP_ADD, NULL, 1e-3, frnd(T(FBX_DTYPE_F16, 33)), frnd(T(FBX_DTYPE_F16, 33)));
}

/* A mixed-dtype program: x (4,8) f32, y (8) f32, k (4,1) i64
 *   r3 = x * y; r4 = r3 + x; r5 = SIGMOID(r4); r6 = r5 > y; r7 = CAST(k -> f32);
 *   r8 = r7 * r5; r9 = WHERE(r6, r8, x)  -> out r9 */
static void test_fused(void) {
  fbx_ir_ew_instr ins[] = {
      {.op = FBX_IR_OP_MUL, .a = 0, .b = 1, .dtype = FBX_DTYPE_F32},
      {.op = FBX_IR_OP_ADD, .a = 3, .b = 0, .dtype = FBX_DTYPE_F32},
      {.op = FBX_IR_OP_SIGMOID, .a = 4, .dtype = FBX_DTYPE_F32},
      {.op = FBX_IR_OP_GREATER, .a = 5, .b = 1, .dtype = FBX_DTYPE_BOOL},
      {.op = FBX_IR_OP_CAST, .a = 2, .dtype = FBX_DTYPE_F32, .params = {.ew = {.to = FBX_DTYPE_F32}}},
      {.op = FBX_IR_OP_MUL, .a = 7, .b = 5, .dtype = FBX_DTYPE_F32},
      {.op = FBX_IR_OP_WHERE, .a = 6, .b = 8, .c = 0, .dtype = FBX_DTYPE_F32},
  };
  fbx_ir_ew_program pg = {.n_inputs = 3, .n_instrs = 7, .out_reg = 9, .instrs = ins,
                          .in_dtypes = {FBX_DTYPE_F32, FBX_DTYPE_F32, FBX_DTYPE_I64}};
  fbx_ir_params p = {.fused = {.prog = &pg}};
  CASE("FUSED_EW mixed f32/bool/i64 program", FBX_IR_OP_FUSED_EW, &p, 2e-6, frnd(T(FBX_DTYPE_F32, 4, 8)),
       frnd(T(FBX_DTYPE_F32, 8)), fill(T(FBX_DTYPE_I64, 4, 1), -3, 3));
  /* long chains on a big tensor (grid-stride loop): 40 instructions travel in the
   * launch parameters, 100 through the device parameter buffer */
  static fbx_ir_ew_instr chain[100];
  for (int len = 40; len <= 100; len += 60) {
    for (int i = 0; i < len; i++)
      chain[i] = (fbx_ir_ew_instr){.op = i % 3 == 0 ? FBX_IR_OP_TANH : i % 3 == 1 ? FBX_IR_OP_MUL : FBX_IR_OP_ADD,
                                   .a = i == 0 ? 0 : i + 1, .b = 1, .dtype = FBX_DTYPE_F32};
    fbx_ir_ew_program pc = {.n_inputs = 2, .n_instrs = len, .out_reg = len + 1, .instrs = chain,
                            .in_dtypes = {FBX_DTYPE_F32, FBX_DTYPE_F32}};
    fbx_ir_params q = {.fused = {.prog = &pc}};
    char what[64];
    snprintf(what, sizeof what, "FUSED_EW %d-op chain (1000,700)", len);
    CASE(what, FBX_IR_OP_FUSED_EW, &q, 1e-5, frnd(T(FBX_DTYPE_F32, 1000, 700)), frnd(T(FBX_DTYPE_F32, 700)));
  }
}

/* ---- matmul ----
 * Tolerances: both backends sum K fp32 products in different orders (cuBLASLt
 * tiles / split-K, the CPU's blocked kernels); for K in the hundreds the two
 * differ by up to ~sqrt(K) * 1e-6 relative, so the large-K cases get 5e-5. */
#define TOL_BIG_K 5e-5
static void test_matmul(void) {
  fbx_ir_params p = {.matmul = {.alpha = 1.f}};
  CASE("MATMUL (5,7)x(7,3)", FBX_IR_OP_MATMUL, &p, 1e-5, frnd(T(FBX_DTYPE_F32, 5, 7)), frnd(T(FBX_DTYPE_F32, 7, 3)));
  CASE("MATMUL (2,3,5,7)x(7,4) folded", FBX_IR_OP_MATMUL, &p, 1e-5, frnd(T(FBX_DTYPE_F32, 2, 3, 5, 7)), frnd(T(FBX_DTYPE_F32, 7, 4)));
  CASE("MATMUL (2,5,7)x(2,7,3) batched", FBX_IR_OP_MATMUL, &p, 1e-5, frnd(T(FBX_DTYPE_F32, 2, 5, 7)), frnd(T(FBX_DTYPE_F32, 2, 7, 3)));
  CASE("MATMUL (2,1,5,7)x(3,7,4) broadcast", FBX_IR_OP_MATMUL, &p, 1e-5, frnd(T(FBX_DTYPE_F32, 2, 1, 5, 7)), frnd(T(FBX_DTYPE_F32, 3, 7, 4)));
  CASE("MATMUL (7)x(7,3)", FBX_IR_OP_MATMUL, &p, 1e-5, frnd(T(FBX_DTYPE_F32, 7)), frnd(T(FBX_DTYPE_F32, 7, 3)));
  CASE("MATMUL (4,5,7)x(7)", FBX_IR_OP_MATMUL, &p, 1e-5, frnd(T(FBX_DTYPE_F32, 4, 5, 7)), frnd(T(FBX_DTYPE_F32, 7)));
  CASE("MATMUL (1,768)x(768,3000) GEMV", FBX_IR_OP_MATMUL, &p, TOL_BIG_K, frnd(T(FBX_DTYPE_F32, 1, 768)), frnd(T(FBX_DTYPE_F32, 768, 3000)));
  CASE("MATMUL (300,256)x(256,190)", FBX_IR_OP_MATMUL, &p, TOL_BIG_K, frnd(T(FBX_DTYPE_F32, 300, 256)), frnd(T(FBX_DTYPE_F32, 256, 190)));
  fbx_ir_params g = {.matmul = {.trans_b = 1, .alpha = 0.5f}};
  CASE("MATMUL Gemm trans_b alpha 0.5 (6,9)x(4,9)^T", FBX_IR_OP_MATMUL, &g, 1e-5, frnd(T(FBX_DTYPE_F32, 6, 9)), frnd(T(FBX_DTYPE_F32, 4, 9)));
  fbx_ir_params ga = {.matmul = {.trans_a = 1, .trans_b = 1, .alpha = 1.f}};
  CASE("MATMUL trans_a trans_b (9,6)^T x (4,9)^T", FBX_IR_OP_MATMUL, &ga, 1e-5, frnd(T(FBX_DTYPE_F32, 9, 6)), frnd(T(FBX_DTYPE_F32, 4, 9)));
  /* tf32=on: a second device backend; TF32 keeps 10 mantissa bits, so ~1e-3 relative per product */
  fbx_backend *fp32 = g_cuda, *tf = NULL;
  fbx_cuda_options to = {.device_id = 0, .tf32 = true, .library = g_lib};
  fbx_status *st = fbx_cuda_backend_open(&to, &tf);
  CHECK(!st, "open a tf32 backend: %s", fbx_status_message(st));
  fbx_status_free(st);
  if (tf) {
    g_cuda = tf;
    CASE("MATMUL tf32 (64,512)x(512,96)", FBX_IR_OP_MATMUL, &p, 2e-2, frnd(T(FBX_DTYPE_F32, 64, 512)), frnd(T(FBX_DTYPE_F32, 512, 96)));
    g_cuda = fp32;
    fbx_backend_destroy(tf);
  }
  fbx_ir_params gt = {.matmul = {.trans_a = 1, .alpha = 1.f}};
  CASE("MATMUL trans_a batched (3,9,6)^T x (3,9,5)", FBX_IR_OP_MATMUL, &gt, 1e-5, frnd(T(FBX_DTYPE_F32, 3, 9, 6)), frnd(T(FBX_DTYPE_F32, 3, 9, 5)));
  /* M = 1: the GEMV kernels (cuda_gemv.cu), decode's shapes among them */
  CASE("MATMUL gemv attention q.K^T (1,12,1,64)x(1,12,64,130)", FBX_IR_OP_MATMUL, &p, 1e-5,
       frnd(T(FBX_DTYPE_F32, 1, 12, 1, 64)), frnd(T(FBX_DTYPE_F32, 1, 12, 64, 130)));
  CASE("MATMUL gemv attention P.V (1,12,1,130)x(1,12,130,64)", FBX_IR_OP_MATMUL, &p, 1e-5,
       frnd(T(FBX_DTYPE_F32, 1, 12, 1, 130)), frnd(T(FBX_DTYPE_F32, 1, 12, 130, 64)));
  CASE("MATMUL gemv K=13 N=70 (1,1,13)x(13,70)", FBX_IR_OP_MATMUL, &p, 1e-5, frnd(T(FBX_DTYPE_F32, 1, 1, 13)),
       frnd(T(FBX_DTYPE_F32, 13, 70)));
  CASE("MATMUL gemv broadcast A (1,1,1,9)x(3,9,5)", FBX_IR_OP_MATMUL, &p, 1e-5, frnd(T(FBX_DTYPE_F32, 1, 1, 1, 9)),
       frnd(T(FBX_DTYPE_F32, 3, 9, 5)));
  fbx_ir_params gb = {.matmul = {.trans_b = 1, .alpha = 0.5f}};
  CASE("MATMUL gemv trans_b alpha 0.5 (1,768)x(300,768)^T", FBX_IR_OP_MATMUL, &gb, TOL_BIG_K,
       frnd(T(FBX_DTYPE_F32, 1, 768)), frnd(T(FBX_DTYPE_F32, 300, 768)));
  CASE("MATMUL gemv trans_b K=7 (2,1,7)x(2,5,7)^T", FBX_IR_OP_MATMUL, &gb, 1e-5, frnd(T(FBX_DTYPE_F32, 2, 1, 7)),
       frnd(T(FBX_DTYPE_F32, 2, 5, 7)));
  g_prep_b = true; /* constant weights: transposed at node_prepare */
  CASE("MATMUL gemv prepared weight (1,1,768)x(768,2048)", FBX_IR_OP_MATMUL, &p, TOL_BIG_K,
       frnd(T(FBX_DTYPE_F32, 1, 1, 768)), frnd(T(FBX_DTYPE_F32, 768, 2048)));
  CASE("MATMUL gemv prepared weight, 2 rows (2,1,64)x(64,250)", FBX_IR_OP_MATMUL, &p, 1e-5,
       frnd(T(FBX_DTYPE_F32, 2, 1, 64)), frnd(T(FBX_DTYPE_F32, 64, 250)));
  CASE("MATMUL prepared weight, M=5: cuBLASLt (5,64)x(64,250)", FBX_IR_OP_MATMUL, &p, 1e-5,
       frnd(T(FBX_DTYPE_F32, 5, 64)), frnd(T(FBX_DTYPE_F32, 64, 250)));
  g_prep_b = false;
}

/* ---- softmax, norms, reductions ---- */
static void test_norm_reduce(void) {
  for (int axis = 0; axis < 3; axis++) {
    fbx_ir_params p = {.axis = {.axis = axis}};
    char what[64];
    snprintf(what, sizeof what, "SOFTMAX (3,4,50) axis %d", axis);
    CASE(what, FBX_IR_OP_SOFTMAX, &p, 1e-6, fill(T(FBX_DTYPE_F32, 3, 4, 50), -5, 5));
    snprintf(what, sizeof what, "LOG_SOFTMAX (3,4,50) axis %d", axis);
    CASE(what, FBX_IR_OP_LOG_SOFTMAX, &p, 1e-5, fill(T(FBX_DTYPE_F32, 3, 4, 50), -5, 5));
    snprintf(what, sizeof what, "HARDMAX (3,4,50) axis %d", axis);
    CASE(what, FBX_IR_OP_HARDMAX, &p, 0, fill(T(FBX_DTYPE_F32, 3, 4, 50), -5, 5));
  }
  fbx_ir_params pw = {.axis = {.axis = 1}};
  CASE("SOFTMAX (4,32000) wide row", FBX_IR_OP_SOFTMAX, &pw, 1e-6, fill(T(FBX_DTYPE_F32, 4, 32000), -8, 8));
  fbx_ir_params ln = {.norm = {.axis = 2, .epsilon = 1e-5f}};
  CASE("LAYER_NORM (3,4,50) axis 2 scale+bias", FBX_IR_OP_LAYER_NORM, &ln, 1e-5, frnd(T(FBX_DTYPE_F32, 3, 4, 50)),
       frnd(T(FBX_DTYPE_F32, 50)), frnd(T(FBX_DTYPE_F32, 50)));
  fbx_ir_params ln1 = {.norm = {.axis = 1, .epsilon = 1e-3f}};
  CASE("LAYER_NORM (6,4,50) axis 1 scale only", FBX_IR_OP_LAYER_NORM, &ln1, 1e-5, frnd(T(FBX_DTYPE_F32, 6, 4, 50)),
       frnd(T(FBX_DTYPE_F32, 4, 50)), tabsent());
  fbx_ir_params in = {.norm = {.epsilon = 1e-5f}};
  CASE("INSTANCE_NORM (2,3,7,9)", FBX_IR_OP_INSTANCE_NORM, &in, 1e-5, frnd(T(FBX_DTYPE_F32, 2, 3, 7, 9)),
       frnd(T(FBX_DTYPE_F32, 3)), frnd(T(FBX_DTYPE_F32, 3)));
  for (int op = FBX_IR_OP_REDUCE_SUM; op <= FBX_IR_OP_REDUCE_SUM_SQUARE; op++) {
    bool pos = op == FBX_IR_OP_REDUCE_LOG_SUM || op == FBX_IR_OP_REDUCE_PROD;
    uint32_t masks[] = {4, 5, 0, 2};
    for (int m = 0; m < 4; m++) {
      fbx_ir_params p = {.reduce = {.axes_mask = masks[m], .keepdims = m % 2}};
      char what[96];
      snprintf(what, sizeof what, "%s (3,4,50) mask %u keepdims %d", fbx_ir_op_name(op), masks[m], m % 2);
      fbx_tensor x = pos ? fill(T(FBX_DTYPE_F32, 3, 4, 50), 0.9, 1.1) : frnd(T(FBX_DTYPE_F32, 3, 4, 50));
      CASE(what, op, &p, 2e-5, x);
    }
  }
  fbx_ir_params big = {.reduce = {.axes_mask = 2, .keepdims = 1}};
  CASE("REDUCE_MEAN (1,8,768) last axis (RMSNorm-style)", FBX_IR_OP_REDUCE_MEAN, &big, 1e-6, frnd(T(FBX_DTYPE_F32, 1, 8, 768)));
  for (int op = FBX_IR_OP_ARGMAX; op <= FBX_IR_OP_ARGMIN; op++)
    for (int axis = 0; axis < 3; axis++) {
      fbx_ir_params p = {.arg = {.axis = axis, .keepdims = 1, .select_last = axis == 2}};
      char what[64];
      snprintf(what, sizeof what, "%s (3,4,50) axis %d%s", fbx_ir_op_name(op), axis, axis == 2 ? " select_last" : "");
      fbx_tensor x = fill(T(FBX_DTYPE_F32, 3, 4, 50), -3, 3);
      for (int i = 0; i < 600; i += 7) F(&x)[i] = 3.f; /* ties */
      CASE(what, op, &p, 0, x);
    }
}

/* ---- data movement ---- */
static void test_movement(void) {
  fbx_ir_params r = {.reshape = {.allowzero = 0}};
  CASE("RESHAPE (2,3,4)->(4,-1)", FBX_IR_OP_RESHAPE, &r, 0, frnd(T(FBX_DTYPE_F32, 2, 3, 4)), I64S(4, -1));
  fbx_ir_params sq = {.axes = {.axes_mask = 2}};
  CASE("SQUEEZE axis 1", FBX_IR_OP_SQUEEZE, &sq, 0, frnd(T(FBX_DTYPE_F32, 3, 1, 4)));
  CASE("UNSQUEEZE axis 1 i64", FBX_IR_OP_UNSQUEEZE, &sq, 0, fill(T(FBX_DTYPE_I64, 3, 4), -9, 9));
  fbx_ir_params fl = {.axis = {.axis = 2}};
  CASE("FLATTEN axis 2", FBX_IR_OP_FLATTEN, &fl, 0, frnd(T(FBX_DTYPE_F32, 2, 3, 4, 5)));
  fbx_ir_params t1 = {.transpose = {.perm = {0, 2, 3, 1}}};
  CASE("TRANSPOSE (2,3,4,5) perm 0,2,3,1", FBX_IR_OP_TRANSPOSE, &t1, 0, frnd(T(FBX_DTYPE_F32, 2, 3, 4, 5)));
  fbx_ir_params t2 = {.transpose = {.perm = {1, 0}}};
  CASE("TRANSPOSE (300,517)", FBX_IR_OP_TRANSPOSE, &t2, 0, frnd(T(FBX_DTYPE_F32, 300, 517)));
  fbx_ir_params t3 = {.transpose = {.perm = {0, 2, 1, 3}}};
  CASE("TRANSPOSE bool (2,3,4,5) perm 0,2,1,3", FBX_IR_OP_TRANSPOSE, &t3, 0, fill(T(FBX_DTYPE_BOOL, 2, 3, 4, 5), 0, 1));
  CASE("SLICE negative step", FBX_IR_OP_SLICE, NULL, 0, frnd(T(FBX_DTYPE_F32, 4, 10)), I64S(1, 8), I64S(3, 1), I64S(0, -1), I64S(1, -3));
  CASE("SLICE clamped, INT64_MIN end", FBX_IR_OP_SLICE, NULL, 0, frnd(T(FBX_DTYPE_F32, 4, 10)), I64S(-1, 100),
       I64S(INT64_MIN, -1000), I64S(0, -1), I64S(-1, -4));
  CASE("SLICE i64 default axes/steps", FBX_IR_OP_SLICE, NULL, 0, fill(T(FBX_DTYPE_I64, 5, 6), -9, 9), I64S(1), I64S(4));
  CASE("EXPAND (3,1)->(2,3,4)", FBX_IR_OP_EXPAND, NULL, 0, frnd(T(FBX_DTYPE_F32, 3, 1)), I64S(2, 3, 4));
  CASE("TILE (2,3) x (2,3)", FBX_IR_OP_TILE, NULL, 0, frnd(T(FBX_DTYPE_F32, 2, 3)), I64S(2, 3));
  fbx_ir_params c1 = {.axis = {.axis = 1}};
  CASE("CONCAT f32 3 inputs axis 1", FBX_IR_OP_CONCAT, &c1, 0, frnd(T(FBX_DTYPE_F32, 2, 1, 3)), frnd(T(FBX_DTYPE_F32, 2, 4, 3)),
       frnd(T(FBX_DTYPE_F32, 2, 2, 3)));
  fbx_ir_params c0 = {.axis = {.axis = 0}};
  CASE("CONCAT i64 axis 0 with an empty part", FBX_IR_OP_CONCAT, &c0, 0, I64S(1, 2), T(FBX_DTYPE_I64, 0), I64S(3));
  fbx_ir_params c2 = {.axis = {.axis = 2}}, c3 = {.axis = {.axis = 3}};
  CASE("CONCAT KV cache (1,12,130,64)+(1,12,1,64) axis 2", FBX_IR_OP_CONCAT, &c2, 0,
       frnd(T(FBX_DTYPE_F32, 1, 12, 130, 64)), frnd(T(FBX_DTYPE_F32, 1, 12, 1, 64)));
  CASE("CONCAT rotary halves (1,12,1,32)x2 axis 3", FBX_IR_OP_CONCAT, &c3, 0, frnd(T(FBX_DTYPE_F32, 1, 12, 1, 32)),
       frnd(T(FBX_DTYPE_F32, 1, 12, 1, 32)));
  CASE("CONCAT bool axis 1", FBX_IR_OP_CONCAT, &c1, 0, fill(T(FBX_DTYPE_BOOL, 3, 2), 0, 1),
       fill(T(FBX_DTYPE_BOOL, 3, 5), 0, 1));
  CASE("CONCAT f16 axis 0", FBX_IR_OP_CONCAT, &c0, 0, frnd(T(FBX_DTYPE_F16, 3, 4)), frnd(T(FBX_DTYPE_F16, 1, 4)));
  { /* more parts than one launch takes: the 2-D copies */
    fbx_tensor in[18];
    for (int i = 0; i < 18; i++) in[i] = frnd(T(FBX_DTYPE_F32, 2, 1 + i % 3));
    diff_case("CONCAT 18 parts axis 1 (memcpy2d)", FBX_IR_OP_CONCAT, &c1, in, 18, 1, 0);
  }
  {
    fbx_tensor in[] = {frnd(T(FBX_DTYPE_F32, 2, 6, 3)), I64S(1, 3, 2)};
    diff_case("SPLIT (2,6,3) axis 1 sizes 1,3,2", FBX_IR_OP_SPLIT, &c1, in, 2, 3, 0);
  }
  CASE("GATHER axis 1 negative indices", FBX_IR_OP_GATHER, &c1, 0, frnd(T(FBX_DTYPE_F32, 3, 5, 2)), I64S(0, -1, 3, -5));
  fbx_tensor gi = T(FBX_DTYPE_I32, 2, 3);
  int32_t gv[6] = {0, 7, 3, 2, 9, 1};
  memcpy(gi.data, gv, sizeof gv);
  CASE("GATHER axis 0 int32 indices (embedding)", FBX_IR_OP_GATHER, &c0, 0, frnd(T(FBX_DTYPE_F32, 10, 16)), gi);
  CASE("GATHER i64 scalar index", FBX_IR_OP_GATHER, &c0, 0, I64S(5, 6, 7), i64s(0, (int64_t[]){2}));
  fbx_ir_params sh = {.shape = {.start = -2}};
  CASE("SHAPE start -2", FBX_IR_OP_SHAPE, &sh, 0, frnd(T(FBX_DTYPE_F32, 2, 3, 4)));
  fbx_ir_params cf = {.fill = {.dtype = FBX_DTYPE_F32, .value = 2.5}};
  CASE("CONSTANT_OF_SHAPE f32 2.5", FBX_IR_OP_CONSTANT_OF_SHAPE, &cf, 0, I64S(3, 4));
  fbx_ir_params ci = {.fill = {.dtype = FBX_DTYPE_I64, .value = -7}};
  CASE("CONSTANT_OF_SHAPE i64 -7", FBX_IR_OP_CONSTANT_OF_SHAPE, &ci, 0, I64S(5));
  fbx_tensor rs = tscalar(FBX_DTYPE_I64), rl = tscalar(FBX_DTYPE_I64), rd = tscalar(FBX_DTYPE_I64);
  L(&rs)[0] = 10; L(&rl)[0] = 2; L(&rd)[0] = -2;
  CASE("RANGE i64 negative delta", FBX_IR_OP_RANGE, NULL, 0, rs, rl, rd);
  fbx_tensor fs = tscalar(FBX_DTYPE_F32), fl2 = tscalar(FBX_DTYPE_F32), fd = tscalar(FBX_DTYPE_F32);
  F(&fs)[0] = 0.5f; F(&fl2)[0] = 3.f; F(&fd)[0] = 0.25f;
  CASE("RANGE f32", FBX_IR_OP_RANGE, NULL, 0, fs, fl2, fd);
}

/* ---- conv and pools ---- */
static void conv_case(int N, int C, int H, int W, int M, int G, int K, int s, int pad, int dil, bool bias,
                      fbx_ir_auto_pad ap) {
  fbx_ir_params p = {.conv = {.nd = 2, .kernel = {K, K}, .strides = {s, s}, .dilations = {dil, dil},
                              .pads = {pad, pad, pad, pad}, .group = G, .auto_pad = ap}};
  char what[128];
  snprintf(what, sizeof what, "CONV N%d C%d %dx%d M%d G%d K%d s%d p%d d%d%s%s", N, C, H, W, M, G, K, s, pad, dil,
           bias ? " bias" : "", ap == FBX_IR_PAD_SAME_UPPER ? " SAME_UPPER" : "");
  CASE(what, FBX_IR_OP_CONV, &p, C * K * K / G >= 256 ? TOL_BIG_K : 1e-5, frnd(T(FBX_DTYPE_F32, N, C, H, W)), frnd(T(FBX_DTYPE_F32, M, C / G, K, K)),
       bias ? frnd(T(FBX_DTYPE_F32, M)) : tabsent());
}

static void test_conv_pool(void) {
  conv_case(2, 3, 9, 11, 8, 1, 3, 1, 1, 1, true, FBX_IR_PAD_NOTSET);
  conv_case(1, 4, 13, 10, 6, 2, 3, 2, 2, 2, false, FBX_IR_PAD_NOTSET);
  conv_case(2, 16, 12, 12, 16, 16, 3, 1, 1, 1, true, FBX_IR_PAD_NOTSET);  /* depthwise: direct */
  conv_case(1, 32, 10, 10, 24, 1, 1, 1, 0, 1, true, FBX_IR_PAD_NOTSET);   /* 1x1: no im2col */
  conv_case(1, 8, 15, 15, 12, 1, 5, 2, 0, 1, true, FBX_IR_PAD_SAME_UPPER);
  conv_case(1, 64, 40, 40, 64, 1, 3, 1, 1, 1, true, FBX_IR_PAD_NOTSET);
  fbx_ir_params p1 = {.conv = {.nd = 1, .kernel = {3}, .strides = {2}, .dilations = {1}, .pads = {1, 1}, .group = 1}};
  CASE("CONV 1-D N2 C5 L17 M4 K3 s2 p1", FBX_IR_OP_CONV, &p1, 1e-5, frnd(T(FBX_DTYPE_F32, 2, 5, 17)),
       frnd(T(FBX_DTYPE_F32, 4, 5, 3)), frnd(T(FBX_DTYPE_F32, 4)));
  fbx_ir_params mp = {.conv = {.nd = 2, .kernel = {3, 3}, .strides = {2, 2}, .dilations = {1, 1}, .pads = {1, 1, 1, 1}}};
  CASE("MAXPOOL 3x3 s2 p1", FBX_IR_OP_MAXPOOL, &mp, 0, frnd(T(FBX_DTYPE_F32, 2, 3, 11, 12)));
  fbx_ir_params mc = mp;
  mc.conv.ceil_mode = 1;
  mc.conv.pads[0] = mc.conv.pads[1] = mc.conv.pads[2] = mc.conv.pads[3] = 0;
  CASE("MAXPOOL 3x3 s2 ceil_mode", FBX_IR_OP_MAXPOOL, &mc, 0, frnd(T(FBX_DTYPE_F32, 1, 2, 10, 10)));
  CASE("AVGPOOL 3x3 s2 p1 exclude pad", FBX_IR_OP_AVGPOOL, &mp, 1e-6, frnd(T(FBX_DTYPE_F32, 2, 3, 11, 12)));
  fbx_ir_params ai = mp;
  ai.conv.count_include_pad = 1;
  CASE("AVGPOOL 3x3 s2 p1 include pad", FBX_IR_OP_AVGPOOL, &ai, 1e-6, frnd(T(FBX_DTYPE_F32, 2, 3, 11, 12)));
  fbx_ir_params lp = {.conv = {.nd = 2, .kernel = {2, 2}, .strides = {2, 2}, .dilations = {1, 1}, .p = 3}};
  CASE("LPPOOL p3 2x2 s2", FBX_IR_OP_LPPOOL, &lp, 1e-5, frnd(T(FBX_DTYPE_F32, 1, 3, 8, 8)));
  fbx_ir_params ct = {.conv = {.nd = 2, .kernel = {3, 3}, .strides = {2, 2}, .dilations = {1, 1}, .pads = {1, 1, 1, 1},
                              .output_padding = {1, 1}, .group = 1}};
  CASE("CONV_TRANSPOSE (1,4,5,6) K3 s2 p1 out_pad 1 bias", FBX_IR_OP_CONV_TRANSPOSE, &ct, 1e-5,
       frnd(T(FBX_DTYPE_F32, 1, 4, 5, 6)), frnd(T(FBX_DTYPE_F32, 4, 3, 3, 3)), frnd(T(FBX_DTYPE_F32, 3)));
  fbx_ir_params cg = {.conv = {.nd = 2, .kernel = {2, 2}, .strides = {2, 2}, .dilations = {1, 1}, .group = 2}};
  CASE("CONV_TRANSPOSE (2,4,5,5) K2 s2 group 2", FBX_IR_OP_CONV_TRANSPOSE, &cg, 1e-5, frnd(T(FBX_DTYPE_F32, 2, 4, 5, 5)),
       frnd(T(FBX_DTYPE_F32, 4, 2, 2, 2)), tabsent());
  fbx_tensor sc = T(FBX_DTYPE_F32, 4);
  F(&sc)[0] = 1; F(&sc)[1] = 1; F(&sc)[2] = 2; F(&sc)[3] = 2;
  fbx_ir_params rn = {.resize = {.mode = FBX_IR_RESIZE_NEAREST, .coord = FBX_IR_COORD_ASYMMETRIC, .nearest = FBX_IR_NEAREST_FLOOR}};
  CASE("RESIZE nearest asymmetric floor x2", FBX_IR_OP_RESIZE, &rn, 0, frnd(T(FBX_DTYPE_F32, 1, 2, 5, 6)), tabsent(), sc);
  fbx_ir_params rl = {.resize = {.mode = FBX_IR_RESIZE_LINEAR, .coord = FBX_IR_COORD_HALF_PIXEL}};
  CASE("RESIZE linear half_pixel sizes (1,2,7,9)", FBX_IR_OP_RESIZE, &rl, 1e-6, frnd(T(FBX_DTYPE_F32, 1, 2, 5, 6)), tabsent(),
       tabsent(), I64S(1, 2, 7, 9));
  fbx_tensor sc2 = T(FBX_DTYPE_F32, 4);
  F(&sc2)[0] = 1; F(&sc2)[1] = 1; F(&sc2)[2] = 1.5f; F(&sc2)[3] = 0.5f;
  fbx_ir_params ra = {.resize = {.mode = FBX_IR_RESIZE_LINEAR, .coord = FBX_IR_COORD_ALIGN_CORNERS}};
  CASE("RESIZE linear align_corners scales 1.5, 0.5", FBX_IR_OP_RESIZE, &ra, 1e-6, frnd(T(FBX_DTYPE_F32, 2, 3, 6, 8)), tabsent(), sc2);
  fbx_ir_params rp = {.resize = {.mode = FBX_IR_RESIZE_NEAREST, .coord = FBX_IR_COORD_HALF_PIXEL,
                                 .nearest = FBX_IR_NEAREST_ROUND_PREFER_FLOOR}};
  CASE("RESIZE nearest half_pixel round_prefer_floor sizes", FBX_IR_OP_RESIZE, &rp, 0, frnd(T(FBX_DTYPE_F32, 1, 1, 4, 7)),
       tabsent(), tabsent(), I64S(1, 1, 10, 3));
  CASE("GLOBAL_AVGPOOL (2,5,7,9)", FBX_IR_OP_GLOBAL_AVGPOOL, NULL, 1e-6, frnd(T(FBX_DTYPE_F32, 2, 5, 7, 9)));
  CASE("GLOBAL_MAXPOOL (2,5,7,9)", FBX_IR_OP_GLOBAL_MAXPOOL, NULL, 0, frnd(T(FBX_DTYPE_F32, 2, 5, 7, 9)));
}

/* Ops the device declines say so, naming the device; device-side errors reach synchronize. */
static void test_declines_and_errors(void) {
  int ids[4] = {0, 1, 2, 3};
  fbx_ir_node nd = {.op = FBX_IR_OP_NON_ZERO, .n_inputs = 1, .n_outputs = 1, .inputs = ids, .outputs = ids};
  fbx_tensor x = T(FBX_DTYPE_F32, 4);
  char why[256] = "";
  CHECK(!fbx_cuda_backend_supports(g_cuda, &nd, &x, 1, why, sizeof why) && strstr(why, "device 'cuda'") &&
            strstr(why, "NON_ZERO"), "NON_ZERO declined with the device named: '%s'", why);
  /* the recurrent ops have CPU kernels only: GetCapability leaves them to ORT on device=cuda */
  const fbx_ir_op rnn_ops[3] = {FBX_IR_OP_LSTM, FBX_IR_OP_GRU, FBX_IR_OP_RNN};
  for (int i = 0; i < 3; i++) {
    fbx_ir_node rn = {.op = rnn_ops[i], .n_inputs = 1, .n_outputs = 1, .inputs = ids, .outputs = ids};
    CHECK(!fbx_cuda_backend_supports(g_cuda, &rn, &x, 1, why, sizeof why) && strstr(why, "device 'cuda'") &&
              strstr(why, fbx_ir_op_name(rnn_ops[i])), "%s declined with the device named: '%s'",
          fbx_ir_op_name(rnn_ops[i]), why);
  }
  nd.op = FBX_IR_OP_MATMUL;
  nd.n_inputs = 2;
  fbx_tensor d[2] = {T(FBX_DTYPE_F64, 2, 2), T(FBX_DTYPE_F64, 2, 2)};
  CHECK(!fbx_cuda_backend_supports(g_cuda, &nd, d, 2, why, sizeof why) && strstr(why, "device 'cuda'") &&
            strstr(why, "float64"), "MATMUL f64 declined naming dtype and device: '%s'", why);
  /* run_node on a declined node returns NOT_IMPLEMENTED, not garbage */
  fbx_tensor y = T(FBX_DTYPE_F64, 2, 2);
  fbx_status *st = run_on(g_cuda, &nd, d, 2, &y, 1);
  CHECK(st && fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED, "declined MATMUL f64 run -> NOT_IMPLEMENTED (%s)",
        fbx_status_message(st));
  fbx_status_free(st);
  free(d[0].data); free(d[1].data); free(y.data); free(x.data);
  /* out-of-range gather index: reported at synchronize, and the next run is clean */
  fbx_ir_node g = {.op = FBX_IR_OP_GATHER, .n_inputs = 2, .n_outputs = 1, .inputs = ids, .outputs = ids};
  fbx_tensor gin[2] = {frnd(T(FBX_DTYPE_F32, 5, 2)), I64S(1, 5)}, gy = T(FBX_DTYPE_F32, 2, 2);
  st = run_on(g_cuda, &g, gin, 2, &gy, 1);
  CHECK(st && fbx_status_code_of(st) == FBX_STATUS_INVALID_ARG && strstr(fbx_status_message(st), "out of range"),
        "GATHER index 5 of 5 -> INVALID_ARG at synchronize (%s)", fbx_status_message(st));
  fbx_status_free(st);
  L(&gin[1])[1] = -5;
  st = run_on(g_cuda, &g, gin, 2, &gy, 1);
  CHECK(!st && F(&gy)[2] == F(&gin[0])[0], "GATHER after an error runs clean (%s)", fbx_status_message(st));
  fbx_status_free(st);
  free(gin[0].data); free(gin[1].data); free(gy.data);
  /* every buffer of the cases above was given back */
  CHECK(g_cuda->vt->memory_in_use(g_cuda) == 0, "cuda memory_in_use back to 0 (%zu)", g_cuda->vt->memory_in_use(g_cuda));
}

/* Every op the device claims (for float32 inputs of some shape) was covered by a case above. */
static void test_coverage(void) {
  int claimed = 0, untested = 0;
  for (int op = 0; op < FBX_IR_OP_COUNT; op++) {
    int ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    fbx_ir_node nd = {.op = op, .n_inputs = 1, .n_outputs = 1, .inputs = ids, .outputs = ids};
    if (op == FBX_IR_OP_CONV || op == FBX_IR_OP_MAXPOOL || op == FBX_IR_OP_AVGPOOL || op == FBX_IR_OP_LPPOOL ||
        op == FBX_IR_OP_CONV_TRANSPOSE) nd.params.conv.nd = 2;
    fbx_tensor x = {.dtype = FBX_DTYPE_F32, .rank = 4, .dims = {1, 2, 3, 4}};
    fbx_ir_ew_program pg = {.n_inputs = 1};
    if (op == FBX_IR_OP_FUSED_EW) nd.params.fused.prog = &pg;
    if (!fbx_cuda_backend_supports(g_cuda, &nd, &x, 1, NULL, 0)) continue;
    claimed++;
    if (!g_tested[op]) {
      untested++;
      CHECK(0, "op %s runs on cuda but no case tests it", fbx_ir_op_name(op));
    }
  }
  printf("test_cuda_ops: %d ops run on cuda, %d without a case\n", claimed, untested);
}

/* Each section runs in its own process with its own CUDA context: a kernel
 * fault (a sticky CUDA error) then fails that section alone, and the others
 * still report. Coverage and counts come back through shared memory. */
typedef struct shared_state {
  bool tested[FBX_IR_OP_COUNT];
  int passed, failed;
} shared_state;
static shared_state *g_sh;

static fbx_status *open_backends(void) {
  fbx_cuda_options co = {.device_id = 0, .library = g_lib};
  FBX_TRY(fbx_cuda_backend_open(&co, &g_cuda));
  fbx_cpu_options o = {.threads = 2};
  return fbx_cpu_backend_create(&o, &g_cpu);
}

/* One section in a forked child (common/cuda_fork.h): opens the backends, runs
 * it, adds its counts to the shared page. */
static int section_child(void *ctx) {
  void (*fn)(void) = *(void (**)(void))ctx;
  fbx_status *st = open_backends();
  if (st) {
    fprintf(stderr, "test_cuda_ops: cannot open backends: %s\n", fbx_status_message(st));
    return 1;
  }
  if (fn) fn();
  memcpy(g_sh->tested, g_tested, sizeof g_tested); /* sections run one at a time */
  g_sh->passed += passed;
  g_sh->failed += failed;
  fbx_backend_destroy(g_cuda);
  fbx_backend_destroy(g_cpu);
  return failed ? 1 : 0;
}

static int run_section(const char *name, void (*fn)(void)) {
  int r = fbx_test_fork_section("test_cuda_ops", name, section_child, &fn);
  if (r == 2) g_sh->failed++; /* crashed: counts as a failure */
  return r ? 1 : 0;
}

int main(void) {
  fbx_test_cuda_library(g_lib, sizeof g_lib);
  int probe = fbx_test_cuda_probe("test_cuda_ops", g_lib); /* in a child: this process never initialises CUDA */
  if (probe != FBX_TEST_CUDA_RUN) return probe == FBX_TEST_CUDA_SKIP ? 0 : 1;
  g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_sh == MAP_FAILED) return 1;
  memset(g_sh, 0, sizeof *g_sh);
  static const struct { const char *name; void (*fn)(void); } sections[] = {
      {"unary", test_unary},       {"binary", test_binary},         {"fused", test_fused},
      {"matmul", test_matmul},     {"norm", test_norm_reduce},      {"movement", test_movement},
      {"conv", test_conv_pool},    {"errors", test_declines_and_errors},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
    memcpy(g_tested, g_sh->tested, sizeof g_tested);
    bad += run_section(sections[i].name, sections[i].fn);
  }
  memcpy(g_tested, g_sh->tested, sizeof g_tested);
  bad += run_section("coverage", test_coverage);
  printf("test_cuda_ops: %d passed, %d failed\n", g_sh->passed, g_sh->failed);
  return bad || g_sh->failed ? 1 : 0;
}
