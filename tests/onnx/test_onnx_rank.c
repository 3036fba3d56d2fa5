/* Rank inference (onnx_rank.c): hand-built descriptions with values of unknown
 * rank, checked against ranks/dims worked out by hand from the ONNX spec; and
 * the GetCapability guard on hand-made cluster assignments. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_ops.h"
#include "onnx/onnx_rank.h"
#include "onnx/onnx_registry.h"

#include "common/check.h"

/* ------------------------------------------------------------ tiny builder -- */

#define MAXV 64
#define MAXN 32
typedef struct tb {
  fbx_onnx_graph g;
  fbx_onnx_value v[MAXV];
  fbx_onnx_node n[MAXN];
  int io[MAXN][16];
  fbx_onnx_attr at[MAXN][2];
  fbx_onnx_tensor t[MAXV];
  int64_t data[MAXV][8];
} tb;

static tb B;

static void tb_reset(void) {
  memset(&B, 0, sizeof B);
  B.g.values = B.v;
  B.g.nodes = B.n;
}

/* A tensor value; rank -1 = unknown. dims may be NULL (all dynamic). */
static int val(const char *name, int rank, const int64_t *dims) {
  int i = B.g.n_values++;
  fbx_onnx_value *v = &B.v[i];
  v->name = name;
  v->kind = FBX_ONNX_VALUE_TENSOR;
  v->dtype = FBX_DTYPE_F32;
  v->onnx_type = 1;
  v->rank = rank;
  for (int k = 0; k < FBX_MAX_RANK; k++) v->dims[k] = (dims && k < rank) ? dims[k] : -1;
  return i;
}

static int input(const char *name, int rank, const int64_t *dims) {
  int i = val(name, rank, dims);
  B.v[i].is_graph_input = true;
  return i;
}

/* A constant 1-D int64 initializer. */
static int cints(const char *name, int n, const int64_t *x) {
  int64_t d[1] = {n};
  int i = val(name, 1, d);
  fbx_onnx_value *v = &B.v[i];
  v->dtype = FBX_DTYPE_I64;
  v->onnx_type = 7;
  v->is_initializer = true;
  memcpy(B.data[i], x, (size_t)n * sizeof *x);
  B.t[i] = (fbx_onnx_tensor){.dtype = FBX_DTYPE_I64, .onnx_type = 7, .rank = 1, .data = B.data[i],
                             .nbytes = (size_t)n * 8};
  B.t[i].dims[0] = n;
  v->init = &B.t[i];
  return i;
}

/* node(op, opset, n_in, inputs..., n_out, outputs...) */
static fbx_onnx_node *node(const char *op, int opset, int nin, const int *ins, int nout, const int *outs) {
  int i = B.g.n_nodes++;
  fbx_onnx_node *n = &B.n[i];
  n->name = op;
  n->op_type = op;
  n->domain = "";
  n->opset = opset;
  n->n_inputs = nin;
  n->n_outputs = nout;
  for (int k = 0; k < nin; k++) B.io[i][k] = ins[k];
  for (int k = 0; k < nout; k++) B.io[i][8 + k] = outs[k];
  n->inputs = B.io[i];
  n->outputs = B.io[i] + 8;
  n->attrs = B.at[i];
  return n;
}

static void attr_ints(fbx_onnx_node *n, const char *name, int cnt, const int64_t *x) {
  fbx_onnx_attr *a = &B.at[n - B.n][n->n_attrs++];
  a->name = name;
  a->type = FBX_ONNX_ATTR_INTS;
  a->ints = x;
  a->n_ints = cnt;
}
static void attr_int(fbx_onnx_node *n, const char *name, int64_t x) {
  fbx_onnx_attr *a = &B.at[n - B.n][n->n_attrs++];
  a->name = name;
  a->type = FBX_ONNX_ATTR_INT;
  a->i = x;
}

/* rank and dims of value i equal (rank, d...) */
static void expect(int i, int rank, const int64_t *dims) {
  const fbx_onnx_value *v = &B.v[i];
  CHECK(v->rank == rank, "%s: rank %d, want %d", v->name, v->rank, rank);
  if (v->rank != rank) return;
  for (int k = 0; k < rank; k++) {
    int64_t want = dims ? dims[k] : -1;
    CHECK(v->dims[k] == want, "%s: dim %d is %lld, want %lld", v->name, k, (long long)v->dims[k], (long long)want);
  }
}

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define I(...) ((const int[]){__VA_ARGS__})

/* ------------------------------------------------------------------- tests -- */

/* The PP-OCR pattern: Reshape by a run-time shape vector, then a transformer
 * block's worth of ops on values ORT left unshaped. */
static void test_chain(void) {
  tb_reset();
  int x = input("x", 4, D(2, 3, 4, 5));
  int shp = input("shp", 1, D(3));           /* run-time shape of length 3 */
  int r = val("r", -1, NULL);
  node("Reshape", 13, 2, I(x, shp), 1, I(r));
  int t = val("t", -1, NULL);
  attr_ints(node("Transpose", 13, 1, I(r), 1, I(t)), "perm", 3, D(2, 0, 1));
  int bias = input("bias", 1, D(7));
  int a = val("a", -1, NULL);
  node("Add", 13, 2, I(t, bias), 1, I(a));
  int w = input("w", 2, D(7, 9));
  int mm = val("mm", -1, NULL);
  node("MatMul", 13, 2, I(a, w), 1, I(mm));
  int red = val("red", -1, NULL);
  fbx_onnx_node *rn = node("ReduceMean", 13, 1, I(mm), 1, I(red));
  attr_ints(rn, "axes", 1, D(1));
  attr_int(rn, "keepdims", 0);
  int sh = val("sh", 1, NULL);                /* ORT knows rank 1, not the length */
  node("Shape", 13, 1, I(red), 1, I(sh));
  int un = val("un", -1, NULL);
  attr_ints(node("Unsqueeze", 11, 1, I(red), 1, I(un)), "axes", 1, D(0));
  int ax0 = cints("ax0", 1, D(0));
  int sq = val("sq", -1, NULL);
  node("Squeeze", 13, 2, I(un, ax0), 1, I(sq));
  int idx = input("idx", 1, D(4));
  int ga = val("ga", -1, NULL);
  attr_int(node("Gather", 13, 2, I(sq, idx), 1, I(ga)), "axis", 1);
  int sm = val("sm", -1, NULL);
  node("Softmax", 13, 1, I(ga), 1, I(sm));
  int sl = val("sl", -1, NULL);
  fbx_onnx_node *sn = node("Slice", 9, 1, I(sh), 1, I(sl));
  attr_ints(sn, "starts", 1, D(1));
  attr_ints(sn, "ends", 1, D(2));
  int one = input("one", 1, D(1));
  int cc = val("cc", -1, NULL);
  attr_int(node("Concat", 13, 3, I(one, sl, one), 1, I(cc)), "axis", 0);
  int r2 = val("r2", -1, NULL);
  node("Reshape", 13, 2, I(sm, cc), 1, I(r2));
  int fl = val("fl", -1, NULL);
  node("Flatten", 13, 1, I(r2), 1, I(fl));
  B.g.n_outputs = 0;

  CHECK(fbx_onnx_graph_infer_ranks(&B.g) == NULL, "infer_ranks failed");
  expect(r, 3, NULL);                 /* len(shape) = 3, contents run-time */
  expect(t, 3, NULL);
  expect(a, 3, D(-1, -1, 7));          /* broadcast with (7) */
  expect(mm, 3, D(-1, -1, 9));         /* (.., m, 7) x (7, 9) */
  expect(red, 2, D(-1, 9));            /* axis 1 dropped */
  expect(sh, 1, D(2));                 /* length filled in: rank of red */
  expect(un, 3, D(1, -1, 9));
  expect(sq, 2, D(-1, 9));
  expect(ga, 2, D(-1, 4));             /* r_data + r_idx - 1, axis 1 replaced by (4) */
  expect(sm, 2, D(-1, 4));
  expect(sl, 1, D(1));                 /* shape[1:2] of a length-2 vector */
  expect(cc, 1, D(3));                 /* 1 + 1 + 1 */
  expect(r2, 3, NULL);
  expect(fl, 2, NULL);
}

/* Static shapes fold through constant shape vectors, -1 and 0 entries. */
static void test_static(void) {
  tb_reset();
  int x = input("x", 4, D(2, 3, 4, 5));
  int s = cints("s", 2, D(0, -1));
  int r = val("r", -1, NULL);
  node("Reshape", 13, 2, I(x, s), 1, I(r));
  int y = input("y", 3, D(6, 1, 60));
  int b = val("b", -1, NULL);
  node("Mul", 13, 2, I(r, y), 1, I(b));      /* (2,60) * (6,1,60) -> (6,2,60) */
  int fl = val("fl", -1, NULL);
  attr_int(node("Flatten", 13, 1, I(b), 1, I(fl)), "axis", 2);
  int sq = val("sq", -1, NULL);
  node("Squeeze", 11, 1, I(y), 1, I(sq));    /* no axes, all static: drop the 1 */
  int st = cints("st", 1, D(-10));
  int en = cints("en", 1, D(INT64_MAX));
  int ax = cints("ax", 1, D(2));
  int stp = cints("stp", 1, D(7));
  int sl = val("sl", -1, NULL);
  node("Slice", 13, 5, I(b, st, en, ax, stp), 1, I(sl)); /* dim 60: [50:60:7] -> 2 */
  int kd = val("kd", -1, NULL);
  node("ReduceSum", 13, 1, I(b), 1, I(kd));  /* no axes: all reduced, keepdims=1 */
  int tp = val("tp", -1, NULL);
  node("Transpose", 13, 1, I(b), 1, I(tp));  /* default perm: reversed */
  int cs = val("cs", -1, NULL);
  node("ConstantOfShape", 13, 1, I(s), 1, I(cs)); /* entries unknown-as-dims (-1 invalid) */
  CHECK(fbx_onnx_graph_infer_ranks(&B.g) == NULL, "infer_ranks failed");
  expect(r, 2, D(2, 60));
  expect(b, 3, D(6, 2, 60));
  expect(fl, 2, D(12, 60));
  expect(sq, 2, D(6, 60));
  expect(sl, 3, D(6, 2, 2));
  expect(kd, 3, D(1, 1, 1));
  expect(tp, 3, D(60, 2, 6));
  expect(cs, 2, D(0, -1));
}

/* Cases a rule cannot decide stay unknown. */
static void test_undecided(void) {
  tb_reset();
  int x = input("x", -1, NULL);              /* unknown-rank graph input: never touched */
  int shp = input("shp", -1, NULL);
  int r = val("r", -1, NULL);
  node("Reshape", 13, 2, I(input("y", 2, NULL), shp), 1, I(r)); /* shape of unknown length */
  int e = val("e", -1, NULL);
  node("Relu", 13, 1, I(x), 1, I(e));        /* input unknown */
  int c = val("c", -1, NULL);
  fbx_onnx_node *cn = node("Relu", 13, 1, I(input("z", 2, NULL)), 1, I(c));
  cn->domain = "com.example";                /* not the ONNX domain */
  int sq = val("sq", -1, NULL);
  node("Squeeze", 13, 1, I(input("q", 3, D(1, -1, 4))), 1, I(sq)); /* no axes, a dynamic dim */
  int ax = input("ax", 1, D(1));
  int rs = val("rs", -1, NULL);
  attr_int(node("ReduceSum", 13, 2, I(input("p", 3, NULL), ax), 1, I(rs)), "keepdims", 0); /* run-time axes */
  int rk = val("rk", -1, NULL);
  node("ReduceSum", 13, 2, I(input("p2", 3, NULL), ax), 1, I(rk)); /* ... but keepdims: rank known */
  int ex = val("ex", -1, NULL);
  node("Expand", 13, 2, I(input("u", 2, NULL), input("es", 1, NULL)), 1, I(ex)); /* shape length unknown */
  CHECK(fbx_onnx_graph_infer_ranks(&B.g) == NULL, "infer_ranks failed");
  expect(x, -1, NULL);
  expect(r, -1, NULL);
  expect(e, -1, NULL);
  expect(c, -1, NULL);
  expect(sq, -1, NULL);
  expect(rs, -1, NULL);
  expect(rk, 3, NULL);
  expect(ex, -1, NULL);
  fbx_status *st = fbx_onnx_graph_infer_ranks(NULL);
  CHECK(st != NULL, "NULL graph must be an error");
  fbx_status_free(st);
}

/* ORT's rank wins; changed[] marks what was filled in. */
static void test_changed(void) {
  tb_reset();
  int x = input("x", 2, D(3, 4));
  int a = val("a", 2, D(3, -1));             /* ORT: rank known, a dim dynamic */
  node("Relu", 13, 1, I(x), 1, I(a));
  int b = val("b", 2, D(3, 4));              /* ORT: complete */
  node("Relu", 13, 1, I(a), 1, I(b));
  int c = val("c", -1, NULL);
  node("Neg", 13, 1, I(b), 1, I(c));
  bool changed[MAXV] = {0};
  CHECK(fbx_onnx_graph_infer_shapes(&B.g, changed) == NULL, "infer_shapes failed");
  expect(a, 2, D(3, 4));
  expect(c, 2, D(3, 4));
  CHECK(!changed[x] && changed[a] && !changed[b] && changed[c], "changed flags %d %d %d %d", changed[x], changed[a],
        changed[b], changed[c]);
}

/* The guard declines consumers of inferred values produced outside their group. */
static void test_guard(void) {
  tb_reset();
  int x = input("x", 2, NULL);
  int v1 = val("v1", 2, NULL), v2 = val("v2", 2, NULL), v3 = val("v3", 2, NULL);
  node("Relu", 13, 1, I(x), 1, I(v1));
  node("Relu", 13, 1, I(v1), 1, I(v2));
  node("Relu", 13, 1, I(v2), 1, I(v3));
  bool inferred[MAXV] = {0};
  inferred[v1] = inferred[v2] = true;
  char reasons[3][128] = {{0}};
  {
    bool claimed[3] = {true, true, true};
    int cluster_of[3] = {0, 0, 0};
    CHECK(fbx_onnx_rank_guard(&B.g, inferred, cluster_of, claimed, &reasons[0][0], 128) == 0, "one group: ok");
    CHECK(claimed[0] && claimed[1] && claimed[2], "one group keeps all");
  }
  {
    bool claimed[3] = {false, true, true};   /* v1's producer unclaimed */
    int cluster_of[3] = {-1, 0, 0};
    CHECK(fbx_onnx_rank_guard(&B.g, inferred, cluster_of, claimed, &reasons[0][0], 128) == 1, "one declined");
    CHECK(!claimed[1] && claimed[2], "node 1 declined, node 2 kept (same group as its producer)");
    CHECK(strstr(reasons[1], "v1") != NULL, "reason names the value: '%s'", reasons[1]);
  }
  {
    bool claimed[3] = {true, true, true};    /* two groups: v2 crosses */
    int cluster_of[3] = {0, 1, 2};
    CHECK(fbx_onnx_rank_guard(&B.g, inferred, cluster_of, claimed, NULL, 0) == 2, "two declined");
    CHECK(claimed[0] && !claimed[1] && !claimed[2], "nodes 1 and 2 declined");
  }
}

/* Every registry row drives rank inference through its rule column: a node
 * of that op (its domain, its first opset) with six rank-2 (3x3) inputs gets
 * the rank its rule gives. -2: the rule needs constant inputs or attributes
 * (tested above), so only that it runs is checked. */
static void test_registry_rules(void) {
  static const int want[FBX_ONNX_RANK_COUNT] = {
      [FBX_ONNX_RANK_NONE] = -1, [FBX_ONNX_RANK_SAME] = 2, [FBX_ONNX_RANK_SAME_ALL] = 2,
      [FBX_ONNX_RANK_BCAST] = 2, [FBX_ONNX_RANK_KEEP] = 2, [FBX_ONNX_RANK_RANK1] = 1,
      [FBX_ONNX_RANK_RANK2] = 2, [FBX_ONNX_RANK_SCALAR] = 0, [FBX_ONNX_RANK_LAYERNORM] = 2,
      [FBX_ONNX_RANK_MATMUL] = 2, [FBX_ONNX_RANK_QLMATMUL] = 2, [FBX_ONNX_RANK_SLICE] = 2,
      [FBX_ONNX_RANK_RESHAPE] = -2, [FBX_ONNX_RANK_SQUEEZE] = -2, [FBX_ONNX_RANK_UNSQUEEZE] = -2,
      [FBX_ONNX_RANK_CONCAT] = 2, [FBX_ONNX_RANK_REDUCE] = 2, [FBX_ONNX_RANK_TRANSPOSE] = 2,
      [FBX_ONNX_RANK_SHAPE] = 1, [FBX_ONNX_RANK_NONZERO] = 2, [FBX_ONNX_RANK_FLATTEN] = 2,
      [FBX_ONNX_RANK_GATHER] = 3, [FBX_ONNX_RANK_GATHER_ELEMENTS] = 2, [FBX_ONNX_RANK_GATHER_ND] = -2,
      [FBX_ONNX_RANK_ARG] = 2, [FBX_ONNX_RANK_CONV] = 2, [FBX_ONNX_RANK_GPOOL] = 2,
      [FBX_ONNX_RANK_EXPAND] = -2, [FBX_ONNX_RANK_COFS] = -2, [FBX_ONNX_RANK_ONEHOT] = 3,
      [FBX_ONNX_RANK_COMPRESS] = 1, [FBX_ONNX_RANK_SKIPNORM] = 2,
      [FBX_ONNX_RANK_MNB] = 2, [FBX_ONNX_RANK_GQA] = -1 /* query rank 2 is not a GQA query */,
      [FBX_ONNX_RANK_RNN] = -1 /* X of rank 2 is not a sequence */,
      [FBX_ONNX_RANK_CF] = -1 /* Loop/Scan: no body described here (test_e2e_loop_scan has them) */,
  };
  int n_msft = 0;
  for (int i = 0; i < fbx_onnx_registry_count(); i++) {
    const fbx_onnx_entry *e = fbx__onnx_registry_entry(i);
    CHECK(e && (unsigned)e->rank < FBX_ONNX_RANK_COUNT, "row %d: rank rule out of range", i);
    if (!e || (unsigned)e->rank >= FBX_ONNX_RANK_COUNT) continue;
    CHECK(!strcmp(fbx_onnx_registry_domain(i), e->domain), "row %d: domain accessor", i);
    n_msft += !strcmp(e->domain, "com.microsoft");
    tb_reset();
    int ins[6], y = val("y", -1, NULL);
    for (int k = 0; k < 6; k++) ins[k] = input("x", 2, D(3, 3));
    fbx_onnx_node *n = node(e->op_type, e->min_opset, 6, ins, 3, I(y, val("y1", -1, NULL), val("y2", -1, NULL)));
    n->domain = e->domain;
    CHECK(fbx_onnx_graph_infer_ranks(&B.g) == NULL, "%s: infer_ranks failed", e->op_type);
    if (want[e->rank] != -2)
      CHECK(B.v[y].rank == want[e->rank], "%s.%s (rule %d): rank %d, want %d", e->domain, e->op_type, e->rank,
            B.v[y].rank, want[e->rank]);
  }
  CHECK(fbx_onnx_registry_count() > 100, "registry has %d rows", fbx_onnx_registry_count());
  printf("  registry rows: %d (%d com.microsoft)\n", fbx_onnx_registry_count(), n_msft);
}

/* LSTM/GRU/RNN: Y (seq, dirs, batch, hidden) / Y_h (dirs, batch, hidden);
 * layout 1 puts batch first: Y (batch, seq, dirs, hidden), Y_h (batch, dirs, hidden). */
static void test_rnn(void) {
  tb_reset();
  int x = input("x", 3, D(7, 2, 3)), w = input("w", 3, D(1, 20, 3)), r = input("r", 3, D(1, 20, 5));
  int y = val("y", -1, NULL), yh = val("yh", -1, NULL), yc = val("yc", -1, NULL);
  attr_int(node("LSTM", 14, 3, I(x, w, r), 3, I(y, yh, yc)), "hidden_size", 5);
  int x1 = input("x1", 3, D(2, 7, 3)), w1 = input("w1", 3, D(1, 12, 3)), r1 = input("r1", 3, D(1, 12, 4));
  int y1 = val("y1", -1, NULL), yh1 = val("yh1", -1, NULL);
  fbx_onnx_node *g = node("GRU", 14, 3, I(x1, w1, r1), 2, I(y1, yh1));
  attr_int(g, "hidden_size", 4);
  attr_int(g, "layout", 1);
  CHECK(fbx_onnx_graph_infer_ranks(&B.g) == NULL, "rnn: infer_ranks failed");
  expect(y, 4, D(7, 1, 2, 5));
  expect(yh, 3, D(1, 2, 5));
  expect(yc, 3, D(1, 2, 5));
  expect(y1, 4, D(2, 7, 1, 4));
  expect(yh1, 3, D(2, 1, 4));
}

/* Loop / Scan (rule CF) from a body described by hand: a carried output as the body makes it,
 * a scan output the body's slice with the iteration count inserted (Loop: axis 0, unknown; Scan:
 * at scan_output_axes, the scan input's length along its axis). */
static void test_cf(void) {
  static fbx_onnx_value bv[3] = {
      {.name = "c", .kind = FBX_ONNX_VALUE_TENSOR, .dtype = FBX_DTYPE_BOOL, .rank = 0},
      {.name = "h_out", .kind = FBX_ONNX_VALUE_TENSOR, .dtype = FBX_DTYPE_F32, .rank = 2, .dims = {2, 5}},
      {.name = "y", .kind = FBX_ONNX_VALUE_TENSOR, .dtype = FBX_DTYPE_F32, .rank = 1, .dims = {3}}};
  static const int loop_outs[3] = {0, 1, 2}, scan_outs[2] = {1, 2};
  static const fbx_onnx_graph loop_body = {.n_values = 3, .values = bv, .n_outputs = 3, .outputs = loop_outs};
  static const fbx_onnx_graph scan_body = {.n_values = 3, .values = bv, .n_outputs = 2, .outputs = scan_outs};
  static const fbx_onnx_graph *const lb[1] = {&loop_body}, *const sb[1] = {&scan_body};
  static const char *const body_name[1] = {"body"};
  tb_reset();
  int m = input("M", 0, NULL), h0 = input("h0", 2, D(2, 5)), hl = val("h_last", -1, NULL), ys = val("ys", -1, NULL);
  fbx_onnx_node *l = node("Loop", 17, 3, I(m, -1, h0), 2, I(hl, ys));
  l->has_subgraph = true, l->n_subgraphs = 1, l->subgraphs = lb, l->subgraph_names = body_name;
  int s0 = input("s0", 2, D(2, 5)), xs = input("xs", 3, D(7, 2, 4)), sl = val("s_last", -1, NULL),
      zs = val("zs", -1, NULL);
  fbx_onnx_node *sc = node("Scan", 16, 2, I(s0, xs), 2, I(sl, zs));
  sc->has_subgraph = true, sc->n_subgraphs = 1, sc->subgraphs = sb, sc->subgraph_names = body_name;
  attr_int(sc, "num_scan_inputs", 1);
  attr_ints(sc, "scan_output_axes", 1, D(-1));
  CHECK(fbx_onnx_graph_infer_ranks(&B.g) == NULL, "cf: infer_ranks failed");
  expect(hl, 2, D(2, 5));
  expect(ys, 2, D(-1, 3));
  expect(sl, 2, D(2, 5));
  expect(zs, 2, D(3, 7));
}

int main(void) {
  test_cf();
  test_rnn();
  test_chain();
  test_static();
  test_undecided();
  test_changed();
  test_guard();
  test_registry_rules();
  printf("test_onnx_rank: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
