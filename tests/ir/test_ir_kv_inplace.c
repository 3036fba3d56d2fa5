/* The executor's shared-buffer paths on one GroupQueryAttention node (no
 * rotary), on the CPU backend and on the opaque test backend (device buffers
 * the host cannot read), against a naive attention written here. The output
 * callback plays the EP: it hands out buffers the test chooses and says
 * which graph input's memory each one is (as src/ep does by comparing data
 * pointers and shapes).
 *
 *  - shared: present_key/value handed out as past_key/value's own
 *    (1, kvh, CAP, H) buffers: only row P (the new one) changes, every other
 *    row keeps its sentinel; the run reports two delta copy-outs of one row
 *    per head each and no full ones; the attention output is right (rows past
 *    the valid length are sentinels: reading one would show). Two steps, so
 *    the second runs the cached plan with the same binding.
 *  - present_key handed out as past_value's memory (an input, but not the
 *    one it extends): computed elsewhere and copied at the end, after the
 *    node has read past_value; both presents right, full copy-outs only.
 *  - separate buffers: full copy-outs, no delta. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "common/check.h"
#include "exec/exec_compiled.h"

enum { NH = 2, KVH = 1, H = 8, CAP = 8 };
#define SENTINEL 1000.0f

/* q (1, S, NH*H), k/v (1, S, KVH*H), past_k/v (1, KVH, P, H), seqlens_k (1) i32,
 * total () i32 -> out (1, S, NH*H), present_k/v. */
static fbx_ir_graph *build_gqa(void) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int q, k, v, pk, pv, sl, tot, o, prk, prv;
  const char *sq[] = {"batch", "seq", NULL}, *sp[] = {"batch", NULL, "past", NULL};
  fbx_ir_graph_add_input(g, "q", FBX_DTYPE_F32, 3, (int64_t[]){1, -1, NH * H}, sq, &q);
  fbx_ir_graph_add_input(g, "k", FBX_DTYPE_F32, 3, (int64_t[]){1, -1, KVH * H}, sq, &k);
  fbx_ir_graph_add_input(g, "v", FBX_DTYPE_F32, 3, (int64_t[]){1, -1, KVH * H}, sq, &v);
  fbx_ir_graph_add_input(g, "past_k", FBX_DTYPE_F32, 4, (int64_t[]){1, KVH, -1, H}, sp, &pk);
  fbx_ir_graph_add_input(g, "past_v", FBX_DTYPE_F32, 4, (int64_t[]){1, KVH, -1, H}, sp, &pv);
  fbx_ir_graph_add_input(g, "seqlens_k", FBX_DTYPE_I32, 1, (int64_t[]){1}, NULL, &sl);
  fbx_ir_graph_add_input(g, "total", FBX_DTYPE_I32, 0, NULL, NULL, &tot);
  fbx_ir_graph_add_value(g, "out", FBX_DTYPE_F32, 3, &o);
  fbx_ir_graph_add_value(g, "present_k", FBX_DTYPE_F32, 4, &prk);
  fbx_ir_graph_add_value(g, "present_v", FBX_DTYPE_F32, 4, &prv);
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.gqa.num_heads = NH, p.gqa.kv_num_heads = KVH;
  int ins[9] = {q, k, v, pk, pv, sl, tot, FBX_IR_NONE, FBX_IR_NONE}, outs[3] = {o, prk, prv};
  fbx_ir_graph_add_node(g, FBX_IR_OP_GQA, ins, 9, outs, 3, &p, "gqa", "GroupQueryAttention", 0, NULL);
  for (int i = 0; i < 3; i++) fbx_ir_graph_mark_output(g, outs[i]);
  return g;
}

/* The EP's part: output i goes to buf[i] (at least the asked size: the test sizes them), which
 * is graph input alias[i]'s memory (or -1). */
typedef struct binding {
  float *buf[3];
  int alias[3];
} binding;

static fbx_status *out_fn(void *ctx, int idx, const fbx_tensor *t, void **data, int *same_as_input) {
  (void)t;
  binding *b = ctx;
  *data = b->buf[idx];
  *same_as_input = b->alias[idx];
  return NULL;
}

static fbx_tensor T(fbx_dtype dt, int rank, const int64_t *dims, void *data) {
  fbx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dt, t.rank = rank, t.data = data;
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  return t;
}

/* out (NH*H) of one query row at position P attending to key rows [0, P] of K/V (KVH, L, H). */
static void naive(const float *q, const float *K, const float *V, int64_t L, int64_t P, float *out) {
  for (int h = 0; h < NH; h++) {
    const float *Kg = K + (h / (NH / KVH)) * L * H, *Vg = V + (h / (NH / KVH)) * L * H;
    double sc[CAP + 1], mx = -1e300, sum = 0;
    for (int64_t t = 0; t <= P; t++) {
      double a = 0;
      for (int d = 0; d < H; d++) a += (double)q[h * H + d] * Kg[t * H + d];
      sc[t] = a / sqrt((double)H);
      if (sc[t] > mx) mx = sc[t];
    }
    for (int64_t t = 0; t <= P; t++) sum += sc[t] = exp(sc[t] - mx);
    for (int d = 0; d < H; d++) {
      double a = 0;
      for (int64_t t = 0; t <= P; t++) a += sc[t] / sum * Vg[t * H + d];
      out[h * H + d] = (float)a;
    }
  }
}

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 9) & 0xffff) / 32768.0f - 1.0f;
}

typedef enum { SHARED, WRONG_INPUT, SEPARATE } mode;

/* Two decode steps (P = 3, then 4) in the given binding mode on backend be. */
static void run_case(fbx_backend *be, fbx_backend *host, const char *what, mode m) {
  fbx_exec_compile_options co = {.compile = true, .cache_limit = 4, .host = host};
  fbx_exec_compiled *c = NULL;
  CHECK_TRY(fbx_exec_compiled_create(build_gqa(), be, &co, what, &c));
  unsigned seed = 7;
  float pk[KVH * CAP * H], pv[KVH * CAP * H], ref_k[KVH * CAP * H], ref_v[KVH * CAP * H];
  float q[NH * H], k[KVH * H], v[KVH * H], out[NH * H], want[NH * H];
  float own_k[KVH * CAP * H], own_v[KVH * CAP * H]; /* separate presents */
  for (int i = 0; i < KVH * CAP * H; i++) pk[i] = pv[i] = SENTINEL;
  for (int64_t P0 = 0; P0 < 3; P0++)
    for (int g = 0; g < KVH; g++)
      for (int d = 0; d < H; d++) pk[(g * CAP + P0) * H + d] = frand(&seed), pv[(g * CAP + P0) * H + d] = frand(&seed);
  for (int64_t P = 3; P <= 4; P++) {
    for (int i = 0; i < NH * H; i++) q[i] = frand(&seed);
    for (int i = 0; i < KVH * H; i++) k[i] = frand(&seed), v[i] = frand(&seed);
    /* the reference presents: the past rows, the new one at P, the rest as the mode leaves it */
    memcpy(ref_k, pk, sizeof pk), memcpy(ref_v, pv, sizeof pv);
    for (int g = 0; g < KVH; g++) {
      memcpy(ref_k + (g * CAP + P) * H, k + g * H, sizeof(float) * H);
      memcpy(ref_v + (g * CAP + P) * H, v + g * H, sizeof(float) * H);
      if (m != SHARED) /* a present of its own: rows past the valid length zeroed */
        for (int64_t r = P + 1; r < CAP; r++)
          for (int d = 0; d < H; d++) ref_k[(g * CAP + r) * H + d] = ref_v[(g * CAP + r) * H + d] = 0;
    }
    naive(q, ref_k, ref_v, CAP, P, want);
    int32_t seqlens = (int32_t)P, total = (int32_t)(P + 1); /* seqlens_k = total - 1 */
    int64_t one_tok[3] = {1, 1, NH * H}, kv_tok[3] = {1, 1, KVH * H}, past[4] = {1, KVH, CAP, H}, one[1] = {1};
    fbx_tensor in[7] = {T(FBX_DTYPE_F32, 3, one_tok, q),   T(FBX_DTYPE_F32, 3, kv_tok, k),
                        T(FBX_DTYPE_F32, 3, kv_tok, v),    T(FBX_DTYPE_F32, 4, past, pk),
                        T(FBX_DTYPE_F32, 4, past, pv),     T(FBX_DTYPE_I32, 1, one, &seqlens),
                        T(FBX_DTYPE_I32, 0, NULL, &total)};
    binding b = {{out, pk, pv}, {-1, 3, 4}};
    if (m == WRONG_INPUT) b = (binding){{out, pv, own_v}, {-1, 4, -1}}; /* present_k in past_v's memory */
    if (m == SEPARATE) b = (binding){{out, own_k, own_v}, {-1, -1, -1}};
    fbx_exec_run_report r;
    CHECK_TRY(fbx_exec_compiled_run(c, in, 7, out_fn, &b, &r));
    float err = 0;
    for (int i = 0; i < NH * H; i++) err = fmaxf(err, fabsf(out[i] - want[i]));
    const float *got_k = b.buf[1], *got_v = b.buf[2];
    int bad_k = 0, bad_v = 0;
    for (int i = 0; i < KVH * CAP * H; i++) bad_k += got_k[i] != ref_k[i], bad_v += got_v[i] != ref_v[i];
    CHECK(err < 1e-5f, "%s P=%lld: attention output off the naive one by %g", what, (long long)P, err);
    CHECK(!bad_k && !bad_v, "%s P=%lld: %d present_key and %d present_value values wrong", what, (long long)P, bad_k,
          bad_v);
    const int64_t row = KVH * H * 4; /* one new row per kv head, float32 */
    const int64_t full_out = be->vt->host_visible ? 0 : 1; /* a device copies the attention output out */
    if (m == SHARED)
      CHECK(r.delta_count == 2 && r.delta_bytes == 2 * row && r.copyout_count == full_out,
            "%s P=%lld: want 2 delta copy-outs of %lld bytes and %lld full, got %lld (%lld bytes) and %lld", what,
            (long long)P, (long long)(2 * row), (long long)full_out, (long long)r.delta_count,
            (long long)r.delta_bytes, (long long)r.copyout_count);
    else
      CHECK(r.delta_count == 0 && r.copyout_count == 2 + full_out,
            "%s P=%lld: want no delta and %lld full copy-outs, got %lld and %lld", what, (long long)P,
            (long long)(2 + full_out), (long long)r.delta_count, (long long)r.copyout_count);
    if (P == 4) CHECK(r.cache == FBX_EXEC_CACHE_HIT, "%s: second step: cache %d, want HIT", what, (int)r.cache);
    /* the host's next past: rows [0, P] as the presents have them, the rest sentinel (the
     * wrong-input binding wrote present_key over past_value's memory) */
    for (int i = 0; i < KVH * CAP * H; i++) {
      bool valid = (i / H) % CAP <= P;
      pk[i] = valid ? ref_k[i] : SENTINEL;
      pv[i] = valid ? ref_v[i] : SENTINEL;
    }
    printf("  %s P=%lld: out err %.2g; delta %lld (%lld B), full %lld\n", what, (long long)P, err,
           (long long)r.delta_count, (long long)r.delta_bytes, (long long)r.copyout_count);
  }
  fbx_exec_compiled_destroy(c);
}

int main(void) {
  fbx_backend *cpu = NULL, *opq = NULL;
  fbx_cpu_options co = {.threads = 1};
  fbx_opaque_options oo = {.threads = 1, .decline_op = -1};
  fbx_status *st = fbx_cpu_backend_create(&co, &cpu);
  if (!st) st = fbx_opaque_backend_create(&oo, &opq);
  if (st) {
    printf("FAIL backend create: %s\n", fbx_status_message(st));
    return 1;
  }
  run_case(cpu, NULL, "cpu shared", SHARED);
  run_case(cpu, NULL, "cpu present_k on past_v", WRONG_INPUT);
  run_case(cpu, NULL, "cpu separate", SEPARATE);
  run_case(opq, cpu, "opaque shared", SHARED);
  run_case(opq, cpu, "opaque present_k on past_v", WRONG_INPUT);
  run_case(opq, cpu, "opaque separate", SEPARATE);
  fbx_backend_destroy(opq);
  fbx_backend_destroy(cpu);
  printf("test_ir_kv_inplace: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
