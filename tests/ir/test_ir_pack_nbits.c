/* The gate/up packing of MatMulNBits projections (src/ir/ir_pack_nbits.c, fbx_ir_pack_glu).
 *
 * 1. The pass on hand-built graphs: y = Mul(Mul(g, Sigmoid(g)), u) with g, u MatMulNBits of
 *    one activation becomes one MATMUL_NBITS node with glu set, N = 2F, its weights, scales and
 *    zero points the gate's rows then the up's, writing y (all four operand orders of the two
 *    Muls). Left alone: g or u also a graph output or read by another node, the Sigmoid of
 *    another value, different block sizes, accuracy levels or activations, weights that are not
 *    constants.
 * 2. Compiled runs on the CPU backend (which runs the pass) at M = 1 (decode) and M = 9 (the
 *    prefill GEMM), 4- and 8-bit weights, against silu(x Wg^T) * (x Wu^T) in double over the
 *    weights dequantised here; a counting wrapper shows that one MATMUL_NBITS kernel and no
 *    SIGMOID / MUL runs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "common/check.h"
#include "exec/exec_compiled.h"
#include "ir/ir_passes.h"

static const char *NOSYM[FBX_MAX_RANK] = {NULL};

typedef struct proj {   /* one projection's constants, (N, kb, bs*bits/8) / (N, kb) / (N, zrow) */
  uint8_t *b, *z;
  float *s;
} proj;

static unsigned g_seed = 12345;
static unsigned rnd_u(void) {
  g_seed = g_seed * 1664525u + 1013904223u;
  return g_seed >> 8;
}

static proj proj_make(int64_t N, int64_t K, int bits, int bs) {
  const int64_t kb = (K + bs - 1) / bs, blob = bs * bits / 8, zrow = (kb * bits + 7) / 8;
  proj p = {malloc((size_t)(N * kb * blob)), malloc((size_t)(N * zrow)), malloc(sizeof(float) * (size_t)(N * kb))};
  for (int64_t i = 0; i < N * kb * blob; i++) p.b[i] = (uint8_t)rnd_u();
  for (int64_t i = 0; i < N * zrow; i++) p.z[i] = (uint8_t)rnd_u();
  for (int64_t i = 0; i < N * kb; i++) p.s[i] = 0.002f + 0.04f * (float)(rnd_u() % 1000) / 1000.f;
  return p;
}

static void proj_free(proj *p) { free(p->b), free(p->z), free(p->s); }

/* w[n][k] of a projection, dequantised in double (ORT's MatMulNBits layout) */
static double proj_w(const proj *p, int64_t n, int64_t k, int64_t K, int bits, int bs) {
  const int64_t kb = (K + bs - 1) / bs, blob = bs * bits / 8, zrow = (kb * bits + 7) / 8, b = k / bs, i = k % bs;
  const uint8_t *blk = p->b + (n * kb + b) * blob, *zr = p->z + n * zrow;
  unsigned q = bits == 8 ? blk[i] : (i & 1) ? blk[i / 2] >> 4 : blk[i / 2] & 15u;
  unsigned z = bits == 8 ? zr[b] : (b & 1) ? zr[b / 2] >> 4 : zr[b / 2] & 15u;
  return ((double)q - (double)z) * p->s[n * kb + b];
}

typedef struct mlp_spec {
  int64_t M, K, F;
  int bits, bs_up, level_up;
  int order;          /* bit 0: Mul(Sigmoid(g), g); bit 1: Mul(u, silu) */
  bool g_out, u_out;  /* g / u also a graph output */
  bool u_extra;       /* another node (Add(u, u)) reads u */
  bool sig_other;     /* Sigmoid(u) instead of Sigmoid(g) */
  bool x2;            /* up projects a second activation */
  bool b_input;       /* the up weights are a graph input */
} mlp_spec;

typedef struct mlp_ids { int x, x2, bu, y, gate_node; } mlp_ids;

static int mnb(fbx_ir_graph *g, int x, const proj *p, const mlp_spec *s, int bs, int level, int b_val, const char *name) {
  const int64_t kb = (s->K + bs - 1) / bs, blob = bs * s->bits / 8, zrow = (kb * s->bits + 7) / 8;
  int b = b_val, sc, z, out;
  if (b < 0) fbx_ir_graph_add_const(g, "B", FBX_DTYPE_U8, 3, (int64_t[]){s->F, kb, blob}, p->b, &b);
  fbx_ir_graph_add_const(g, "scales", FBX_DTYPE_F32, 2, (int64_t[]){s->F, kb}, p->s, &sc);
  fbx_ir_graph_add_const(g, "zero_points", FBX_DTYPE_U8, 2, (int64_t[]){s->F, zrow}, p->z, &z);
  fbx_ir_params pp;
  memset(&pp, 0, sizeof pp);
  pp.nbits.K = s->K, pp.nbits.N = s->F, pp.nbits.bits = s->bits, pp.nbits.block_size = bs;
  pp.nbits.accuracy_level = level, pp.nbits.zp_u8 = 1;
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL_NBITS, (int[]){x, b, sc, z, FBX_IR_NONE}, 5, &pp, FBX_DTYPE_F32, 2, name,
                    "MatMulNBits", g->n_nodes, &out);
  return out;
}

static fbx_ir_graph *mlp_graph(const mlp_spec *s, const proj *pg, const proj *pu, mlp_ids *id) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  fbx_ir_params none;
  memset(&none, 0, sizeof none);
  fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, (int64_t[]){s->M, s->K}, NOSYM, &id->x);
  id->x2 = id->x;
  if (s->x2) fbx_ir_graph_add_input(g, "x2", FBX_DTYPE_F32, 2, (int64_t[]){s->M, s->K}, NOSYM, &id->x2);
  const int64_t kb = (s->K + s->bs_up - 1) / s->bs_up;
  id->bu = -1;
  if (s->b_input)
    fbx_ir_graph_add_input(g, "Bu", FBX_DTYPE_U8, 3, (int64_t[]){s->F, kb, s->bs_up * s->bits / 8}, NOSYM, &id->bu);
  id->gate_node = g->n_nodes;
  int gv = mnb(g, id->x, pg, s, 32, 0, -1, "gate_proj");
  int uv = mnb(g, id->x2, pu, s, s->bs_up, s->level_up, id->bu, "up_proj");
  int sv, silu;
  fbx_ir_graph_emit(g, FBX_IR_OP_SIGMOID, (int[]){s->sig_other ? uv : gv}, 1, &none, FBX_DTYPE_F32, 2, "sig", "Sigmoid",
                    g->n_nodes, &sv);
  fbx_ir_graph_emit(g, FBX_IR_OP_MUL, s->order & 1 ? (int[]){sv, gv} : (int[]){gv, sv}, 2, &none, FBX_DTYPE_F32, 2,
                    "silu", "Mul", g->n_nodes, &silu);
  fbx_ir_graph_emit(g, FBX_IR_OP_MUL, s->order & 2 ? (int[]){uv, silu} : (int[]){silu, uv}, 2, &none, FBX_DTYPE_F32, 2,
                    "y", "Mul", g->n_nodes, &id->y);
  fbx_ir_graph_mark_output(g, id->y);
  if (s->g_out) fbx_ir_graph_mark_output(g, gv);
  if (s->u_out) fbx_ir_graph_mark_output(g, uv);
  if (s->u_extra) {
    int e;
    fbx_ir_graph_emit(g, FBX_IR_OP_ADD, (int[]){uv, uv}, 2, &none, FBX_DTYPE_F32, 2, "uu", "Add", g->n_nodes, &e);
    fbx_ir_graph_mark_output(g, e);
  }
  return g;
}

/* Runs the pass on the graph of s; returns how many MLPs it packed (and checks the result). */
static int pack(const mlp_spec *s, const char *what) {
  proj pg = proj_make(s->F, s->K, s->bits, 32), pu = proj_make(s->F, s->K, s->bits, s->bs_up);
  mlp_ids id;
  fbx_ir_graph *g = mlp_graph(s, &pg, &pu, &id);
  const int nodes0 = g->n_nodes;
  int packed = -1;
  fbx_status *st = fbx_ir_pack_glu(g, &packed);
  CHECK(!st, "%s: pass: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (packed == 1) {
    CHECK(g->n_nodes == nodes0 - 4, "%s: %d nodes left of %d (want 4 fewer)", what, g->n_nodes, nodes0);
    const fbx_ir_node *n = &g->nodes[id.gate_node];
    CHECK(n->op == FBX_IR_OP_MATMUL_NBITS && n->params.nbits.glu == 1 && n->params.nbits.N == 2 * s->F &&
              n->n_outputs == 1 && n->outputs[0] == id.y && g->values[id.y].producer == id.gate_node,
          "%s: the packed node (op %d glu %d N %lld) writes y", what, n->op, n->params.nbits.glu,
          (long long)n->params.nbits.N);
    CHECK(n->name && strstr(n->name, "gate_proj+up_proj"), "%s: name '%s'", what, n->name ? n->name : "");
    const int64_t kb = (s->K + 31) / 32, blob = 32 * s->bits / 8;
    const fbx_ir_value *b = &g->values[n->inputs[1]], *sc = &g->values[n->inputs[2]];
    const size_t wb = (size_t)(s->F * kb * blob), sb = sizeof(float) * (size_t)(s->F * kb);
    CHECK(b->nbytes == 2 * wb && b->dims[0] == 2 * s->F && !memcmp(b->data, pg.b, wb) &&
              !memcmp((const uint8_t *)b->data + wb, pu.b, wb),
          "%s: B is the gate's rows then the up's", what);
    CHECK(sc->nbytes == 2 * sb && !memcmp(sc->data, pg.s, sb) && !memcmp((const char *)sc->data + sb, pu.s, sb),
          "%s: scales stacked", what);
  } else {
    CHECK(g->n_nodes == nodes0, "%s: not packed, but %d nodes left of %d", what, g->n_nodes, nodes0);
  }
  fbx_ir_graph_destroy(g);
  proj_free(&pg), proj_free(&pu);
  return packed;
}

static void pass_cases(void) {
  for (int order = 0; order < 4; order++) {
    mlp_spec s = {.M = 1, .K = 64, .F = 24, .bits = 4, .bs_up = 32, .order = order};
    char what[64];
    snprintf(what, sizeof what, "operand order %d", order);
    CHECK(pack(&s, what) == 1, "%s: packed", what);
  }
  const mlp_spec base = {.M = 1, .K = 64, .F = 24, .bits = 4, .bs_up = 32};
  mlp_spec s = base;
  s.g_out = true;
  CHECK(pack(&s, "gate a graph output") == 0, "gate a graph output: left alone");
  s = base, s.u_out = true;
  CHECK(pack(&s, "up a graph output") == 0, "up a graph output: left alone");
  s = base, s.u_extra = true;
  CHECK(pack(&s, "up read by another node") == 0, "up read by another node: left alone");
  s = base, s.sig_other = true;
  CHECK(pack(&s, "Sigmoid of up") == 0, "Mul(Mul(g, Sigmoid(u)), u): left alone");
  s = base, s.bs_up = 16;
  CHECK(pack(&s, "block sizes differ") == 0, "block sizes 32 / 16: left alone");
  s = base, s.level_up = 4;
  CHECK(pack(&s, "accuracy levels differ") == 0, "accuracy levels 0 / 4: left alone");
  s = base, s.x2 = true;
  CHECK(pack(&s, "two activations") == 0, "projections of two activations: left alone");
  s = base, s.b_input = true;
  CHECK(pack(&s, "up weights an input") == 0, "up weights not constant: left alone");
}

/* ---- compiled runs ---- */
static fbx_backend *g_cpu;
static fbx_backend_vtable g_counting_vt;
static fbx_backend g_counting;
static int g_mnb, g_ew;

static fbx_status *counting_run_node(fbx_backend *be, const fbx_ir_node *node, void *state, const fbx_tensor *in,
                                     int n_in, fbx_tensor *out, int n_out, fbx_kernel_info *info) {
  (void)be;
  if (node->op == FBX_IR_OP_MATMUL_NBITS) g_mnb++;
  else g_ew++;
  return g_cpu->vt->run_node(g_cpu, node, state, in, n_in, out, n_out, info);
}

static float *g_y;
static size_t g_ny;
static fbx_status *out_fn(void *ctx, int idx, const fbx_tensor *t, void **data, int *same_as_input) {
  (void)ctx;
  *same_as_input = -1;
  if (idx != 0) return FBX_ERR("test: output %d", idx);
  g_ny = (size_t)fbx_tensor_numel(t);
  free(g_y);
  g_y = malloc(sizeof(float) * (g_ny ? g_ny : 1));
  *data = g_y;
  return NULL;
}

static void run_case(int64_t M, int64_t K, int64_t F, int bits, int order) {
  char what[96];
  snprintf(what, sizeof what, "run M=%lld K=%lld F=%lld bits=%d order=%d", (long long)M, (long long)K, (long long)F,
           bits, order);
  mlp_spec s = {.M = M, .K = K, .F = F, .bits = bits, .bs_up = 32, .order = order};
  proj pg = proj_make(F, K, bits, 32), pu = proj_make(F, K, bits, 32);
  mlp_ids id;
  fbx_ir_graph *g = mlp_graph(&s, &pg, &pu, &id);
  fbx_exec_compile_options co = {.compile = true, .cache_limit = 4};
  fbx_exec_compiled *c = NULL;
  fbx_status *st = fbx_exec_compiled_create(g, &g_counting, &co, what, &c);
  CHECK(!st, "%s: create: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  float *x = malloc(sizeof(float) * (size_t)(M * K));
  for (int64_t i = 0; i < M * K; i++) x[i] = (float)(rnd_u() % 2001) / 1000.f - 1.f;
  if (c) {
    fbx_tensor in = {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {M, K}, .data = x};
    g_mnb = g_ew = 0;
    st = fbx_exec_compiled_run(c, &in, 1, out_fn, NULL, NULL);
    CHECK(!st, "%s: run: %s", what, st ? fbx_status_message(st) : "");
    fbx_status_free(st);
    CHECK(g_mnb == 1 && g_ew == 0, "%s: %d MATMUL_NBITS and %d other kernels ran (want 1, 0)", what, g_mnb, g_ew);
    CHECK(g_ny == (size_t)(M * F), "%s: %zu outputs, want %lld", what, g_ny, (long long)(M * F));
    double worst = 0;
    for (int64_t m = 0; m < M && g_ny == (size_t)(M * F); m++)
      for (int64_t n = 0; n < F; n++) {
        double gg = 0, uu = 0, mg = 0, mu = 0;
        for (int64_t k = 0; k < K; k++) {
          double wg = proj_w(&pg, n, k, K, bits, 32), wu = proj_w(&pu, n, k, K, bits, 32), a = x[m * K + k];
          gg += a * wg, uu += a * wu, mg += fabs(a * wg), mu += fabs(a * wu);
        }
        const double sg = gg / (1 + exp(-gg)), want = sg * uu;
        /* float sums: ~1e-6 of the magnitudes, propagated through silu(g) * u (|silu'| <= 1.1) */
        const double bound = 1e-6 * (1.1 * fabs(uu) * (1 + mg) + fabs(sg) * (1 + mu)) + 1e-6 * fabs(want) + 1e-7;
        const double e = fabs((double)g_y[m * F + n] - want) / bound;
        if (!(e <= worst)) worst = e;
      }
    CHECK(worst <= 1, "%s: worst error %.3g of its bound", what, worst);
    fbx_exec_compiled_destroy(c);
  }
  free(x);
  proj_free(&pg), proj_free(&pu);
}

int main(void) {
  pass_cases();
  fbx_cpu_options o = {.threads = 2};
  fbx_status *st = fbx_cpu_backend_create(&o, &g_cpu);
  if (st) {
    fprintf(stderr, "cpu backend: %s\n", fbx_status_message(st));
    return 2;
  }
  g_counting_vt = *g_cpu->vt;
  g_counting_vt.run_node = counting_run_node;
  g_counting = (fbx_backend){.vt = &g_counting_vt, .ctx = g_cpu->ctx};
  run_case(1, 256, 100, 4, 0);
  run_case(1, 96, 37, 8, 3);
  run_case(9, 256, 70, 4, 1);
  run_case(3, 160, 9, 8, 2);
  fbx_backend_destroy(g_cpu);
  free(g_y);
  printf("test_ir_pack_nbits: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
