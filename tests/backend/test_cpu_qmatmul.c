/* MATMUL_INT through the CPU backend, against naive references written here:
 *   - exact int32 sums (int64 reference) with B prepacked at node_prepare (a constant weight,
 *     as quantize_dynamic writes it) and without, every u8/s8 pair, zero points 0 / extreme /
 *     per row of A and per column of B, odd M, N, K, M = 1 (GEMV) and M >= 16;
 *   - the fused quantize_dynamic epilogue (params.matmul.epilogue): Cast -> Mul(a_scale * w_scale,
 *     per tensor or per column, the product itself inside the program) -> Add(bias) -> Add(residual
 *     tensor), and BERT's Erf Gelu after it (a running value read twice), which the kernel applies in
 *     registers, and a program with a Relu, which takes the generic per-block epilogue. Reference: the same float32 operations one at a time in this file
 *     (each op rounded on its own, as ONNX's separate nodes and ORT compute them), so the output must
 *     be bit-identical (the Gelu case: within 1e-6 of max(|y|, h^2), the erf being fbx__erf256 or erff).
 * Every path this CPU has (scalar, AVX2, VNNI) forced in turn, 1 and 2 threads. */
#include <stdint.h>

#include "backend/cpu/cpu_qgemm.h"
#include "cpu_test_util.h"
#include "ir/ir_graph.h"

static uint8_t rbyte(int mode) { /* mode 0: uniform, 1: extremes only */
  double r = rnd();
  if (mode == 1) return r < -0.5 ? 0 : r < 0 ? 255 : r < 0.5 ? 127 : 128;
  return (uint8_t)(int)((r + 1.0) * 128.0);
}

static int64_t val(uint8_t b, bool sgn) { return sgn ? (int64_t)(int8_t)b : (int64_t)b; }
static int32_t wrap32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }
static const char *dtn(bool s) { return s ? "s8" : "u8"; }

/* epilogue kinds */
enum { EPI_NONE = 0, EPI_AFFINE, EPI_RESIDUAL, EPI_RSUB_RELU, EPI_GELU };

/* x rounded to float32 here (no contraction of the reference's Mul and Add into an FMA) */
static float r32(float x) {
  volatile float v = x;
  return v;
}

typedef struct mm_t {
  int64_t M, N, K;
  bool as, bs, prepack, per_col;
  int zmode, epi;
} mm_t;

#define MAX_INSTRS 16

/* Program registers: 0 = acc (int32), 1 = a_scale (scalar), 2 = w_scale (scalar or [N]),
 * 3 = bias [N], 4 = residual [M, N]; instrs from register 5 on. */
static int build_prog(int epi, fbx_ir_ew_program *p, fbx_ir_ew_instr *ins) {
  memset(p, 0, sizeof *p);
  memset(ins, 0, sizeof(*ins) * MAX_INSTRS);
  int n = 0, ni = epi == EPI_AFFINE || epi == EPI_GELU ? 4 : 5;
  p->n_inputs = ni;
  p->in_dtypes[0] = FBX_DTYPE_I32;
  for (int i = 1; i < ni; i++) p->in_dtypes[i] = FBX_DTYPE_F32;
  int r = ni;
#define I(OP, A, B) (ins[n] = (fbx_ir_ew_instr){.op = FBX_IR_OP_##OP, .a = (A), .b = (B), .dtype = FBX_DTYPE_F32}, r + n++)
  int cast = I(CAST, 0, 0);
  ins[0].params.ew.to = FBX_DTYPE_F32;
  int sm = I(MUL, 1, 2);              /* a_scale * w_scale: values per column only */
  int v = I(MUL, cast, sm);
  if (epi == EPI_RSUB_RELU) v = I(SUB, 3, v); /* bias - v: the running value on the right */
  else v = I(ADD, v, 3);
  if (epi == EPI_RESIDUAL) v = I(ADD, 4, v);
  if (epi == EPI_RSUB_RELU) {
    v = I(ADD, v, 4);
    v = I(RELU, v, 0);
  }
  if (epi == EPI_GELU) { /* h * 0.5 * (1 + erf(h / sqrt2)) as quantize_dynamic's BERT writes it; h read twice */
    int h = v;
    v = I(DIV, h, 1); /* register 1 stands in for sqrt 2 (any per-column constant) */
    v = I(ERF, v, 0);
    v = I(ADD, v, 1);
    v = I(MUL, h, v);
    v = I(MUL, v, v); /* a running value read twice by one instruction */
  }
#undef I
  if (n > MAX_INSTRS) abort();
  p->n_instrs = n;
  p->instrs = ins;
  p->out_reg = v;
  return ni;
}

static void mm_run(const mm_t *t) {
  int64_t M = t->M, N = t->N, K = t->K;
  fbx_dtype adt = t->as ? FBX_DTYPE_I8 : FBX_DTYPE_U8, bdt = t->bs ? FBX_DTYPE_I8 : FBX_DTYPE_U8;
  fbx_tensor in[8];
  int n_in = 4;
  in[0] = tmake(adt, 2, (int64_t[]){M, K});
  in[1] = tmake(bdt, 2, (int64_t[]){K, N});
  in[2] = t->zmode == 2 ? tmake(adt, 1, (int64_t[]){M}) : tscalar(adt);
  in[3] = t->zmode == 2 ? tmake(bdt, 1, (int64_t[]){N}) : tscalar(bdt);
  uint8_t *A = in[0].data, *B = in[1].data, *ZA = in[2].data, *ZB = in[3].data;
  for (int64_t i = 0; i < M * K; i++) A[i] = rbyte(i % 3 == 0);
  for (int64_t i = 0; i < K * N; i++) B[i] = rbyte(i % 4 == 0);
  for (int64_t i = 0; i < fbx_tensor_numel(&in[2]); i++)
    ZA[i] = t->zmode == 0 ? 0 : t->as ? (uint8_t)(int8_t)(i % 2 ? 127 : -128) : (uint8_t)(i % 2 ? 0 : 255);
  for (int64_t i = 0; i < fbx_tensor_numel(&in[3]); i++)
    ZB[i] = t->zmode == 0 ? 0 : t->bs ? (uint8_t)(int8_t)(i % 3 ? -128 : 127) : (uint8_t)(i % 3 ? 255 : 3);
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  fbx_ir_ew_program prog;
  fbx_ir_ew_instr ins[MAX_INSTRS];
  if (t->epi) {
    int ni = build_prog(t->epi, &prog, ins);
    in[4] = tscalar(FBX_DTYPE_F32);
    F(&in[4])[0] = 0.0173f;
    in[5] = t->per_col ? tmake(FBX_DTYPE_F32, 1, (int64_t[]){N}) : tscalar(FBX_DTYPE_F32);
    for (int64_t i = 0; i < fbx_tensor_numel(&in[5]); i++) F(&in[5])[i] = (float)(0.001 + 0.002 * fabs(rnd()));
    in[6] = tmake(FBX_DTYPE_F32, 1, (int64_t[]){N});
    frand(&in[6]);
    n_in = 4 + ni - 1;
    if (ni == 5) {
      in[7] = tmake(FBX_DTYPE_F32, 2, (int64_t[]){M, N});
      frand(&in[7]);
    }
    p.matmul.epilogue = &prog;
    p.matmul.epilogue_reg = 0;
  }
  fbx_tensor out = tmake(t->epi ? FBX_DTYPE_F32 : FBX_DTYPE_I32, 2, (int64_t[]){M, N});
  fbx_ir_node nd = {.op = FBX_IR_OP_MATMUL_INT, .n_inputs = n_in, .n_outputs = 1, .params = p};
  void *state = NULL;
  if (t->prepack) {
    const fbx_tensor *cin[8] = {NULL, &in[1]};
    fbx_status *st = g_be->vt->node_prepare(g_be, &nd, cin, in, &state);
    check(st == NULL && state != NULL, "node_prepare: %s", st ? fbx_status_message(st) : "no state");
    fbx_status_free(st);
  }
  fbx_kernel_info info = {0};
  fbx_status *st = g_be->vt->run_node(g_be, &nd, state, in, n_in, &out, 1, &info);
  char what[256];
  snprintf(what, sizeof what, "M=%lld N=%lld K=%lld %s x %s zp=%d epi=%d%s%s path %s [%s]", (long long)M, (long long)N,
           (long long)K, dtn(t->as), dtn(t->bs), t->zmode, t->epi, t->per_col ? " per-col" : "",
           t->prepack ? " prepacked" : "", fbx_cpu_qg_name(fbx_cpu_qg_best()), info.variant ? info.variant : "?");
  check(st == NULL, "%s: run failed: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (t->prepack) check(strstr(info.variant, "prepacked") != NULL, "%s: the prepacked B was not used", what);
  if (t->epi) {
    bool regs = t->epi != EPI_RSUB_RELU; /* Relu is not in the register form: the generic epilogue */
    check(st == NULL && (strstr(info.reason, "in registers") != NULL) == regs, "%s: epilogue %s expected, got %s", what,
          regs ? "in registers" : "generic", info.reason);
  }
  int64_t bad = 0, first = -1;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      int64_t za = val(ZA[fbx_tensor_numel(&in[2]) == 1 ? 0 : m], t->as);
      int64_t zb = val(ZB[fbx_tensor_numel(&in[3]) == 1 ? 0 : n], t->bs);
      int64_t s = 0;
      for (int64_t k = 0; k < K; k++) s += (val(A[m * K + k], t->as) - za) * (val(B[k * N + n], t->bs) - zb);
      bool ok;
      if (!t->epi) {
        ok = ((int32_t *)out.data)[m * N + n] == wrap32(s);
      } else { /* float32, one rounding per op, in the program's order */
        float ws = F(&in[5])[fbx_tensor_numel(&in[5]) == 1 ? 0 : n];
        float a_s = F(&in[4])[0];
        float sm = r32(a_s * ws);
        float v = r32((float)wrap32(s) * sm);
        float bias = F(&in[6])[n];
        v = t->epi == EPI_RSUB_RELU ? r32(bias - v) : r32(v + bias);
        if (t->epi == EPI_RESIDUAL) v = r32(F(&in[7])[m * N + n] + v);
        if (t->epi == EPI_RSUB_RELU) {
          v = r32(v + F(&in[7])[m * N + n]);
          v = v > 0.f ? v : 0.f;
        }
        float got = F(&out)[m * N + n];
        if (t->epi == EPI_GELU) { /* erf: fbx__erf256 (<= 0.98 ulp) or erff: a few ulps after the products */
          float h = v, e = r32(erff(r32(h / a_s)) + a_s);
          v = r32(h * e);
          v = r32(v * v);
          /* e is within ~2 ulps of max(|erf|, a_s) <= 1 of its reference, so (h e)^2 within ~5e-7 h^2 */
          ok = fabsf(got - v) <= 1e-6f * fmaxf(fabsf(v), h * h);
        } else {
          ok = memcmp(&got, &v, sizeof v) == 0;
        }
      }
      if (!ok && first < 0) first = m * N + n;
      bad += !ok;
    }
  check(bad == 0, "%s: %lld of %lld wrong (first at %lld)", what, (long long)bad, (long long)(M * N), (long long)first);
  if (state) g_be->vt->node_release(g_be, &nd, state);
  for (int i = 0; i < n_in; i++) tfree(&in[i]);
  tfree(&out);
}

static void test_all(void) {
  static const int64_t shapes[][3] = {{1, 45, 77}, {1, 384, 384}, {3, 17, 5}, {16, 64, 64}, {37, 45, 77},
                                      {20, 70, 1030}, {128, 96, 33}, {9, 1, 3}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int sg = 0; sg < 4; sg++) {
      mm_t t = {.M = shapes[si][0], .N = shapes[si][1], .K = shapes[si][2], .as = sg & 1, .bs = sg & 2};
      t.zmode = (int)((si + (size_t)sg) % 3);
      t.prepack = (si + (size_t)sg) % 2 == 0;
      mm_run(&t);
      t.prepack = !t.prepack;
      t.epi = 1 + (int)((si + (size_t)sg) % 4);
      t.per_col = sg >= 2;
      mm_run(&t);
    }
  /* quantize_dynamic's own combination: u8 activations, s8 weights, zero w_zp, prepacked, fused */
  for (int e = EPI_AFFINE; e <= EPI_GELU; e++)
    for (int pc = 0; pc < 2; pc++) {
      mm_t t = {.M = 33, .N = 100, .K = 130, .bs = true, .prepack = true, .epi = e, .per_col = pc};
      mm_run(&t);
    }
}

int main(void) {
  for (int threads = 1; threads <= 2; threads++) {
    test_setup(threads);
    for (int p = FBX_QG_SCALAR; p <= FBX_QG_LAST; p++) {
      if (!fbx_cpu_qg_available((fbx_qg_path)p)) {
        printf("path %s: not on this CPU (skipped)\n", fbx_cpu_qg_name((fbx_qg_path)p));
        continue;
      }
      fbx_cpu_qg_force((fbx_qg_path)p);
      test_all();
    }
    if (threads == 1) fbx_backend_destroy(g_be);
  }
  return test_finish("test_cpu_qmatmul");
}
