/* Checks the ONNX registry: claim decisions with their reasons, and the IR
 * graphs the translators build (ops, params, constants), against values
 * worked out by hand from the ONNX operator spec. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir_graph.h"
#include "onnx/onnx_registry.h"

static int g_pass, g_fail;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (cond) g_pass++;                                    \
    else {                                                 \
      g_fail++;                                            \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
    }                                                      \
  } while (0)

/* ---- a tiny builder for fbx_onnx_graph descriptions ---- */
typedef struct tg {
  fbx_onnx_graph g;
  fbx_onnx_value vals[64];
  fbx_onnx_tensor inits[32];
  int n_inits;
  fbx_onnx_node nodes[16];
  int io[16][2][16];
  fbx_onnx_attr attrs[16][8];
  int gin[16], gout[16];
} tg;

static void tg_init(tg *t) {
  memset(t, 0, sizeof *t);
  t->g.values = t->vals;
  t->g.nodes = t->nodes;
  t->g.inputs = t->gin;
  t->g.outputs = t->gout;
}

static int tg_val(tg *t, const char *name, fbx_dtype dt, int rank, const int64_t *dims) {
  int i = t->g.n_values++;
  fbx_onnx_value *v = &t->vals[i];
  v->name = name;
  v->kind = FBX_ONNX_VALUE_TENSOR;
  v->dtype = dt;
  v->onnx_type = (int)dt;
  v->rank = rank;
  for (int d = 0; d < rank && d < FBX_MAX_RANK; d++) v->dims[d] = dims ? dims[d] : -1;
  return i;
}

static int tg_input(tg *t, const char *name, fbx_dtype dt, int rank, const int64_t *dims) {
  int v = tg_val(t, name, dt, rank, dims);
  t->vals[v].is_graph_input = true;
  t->gin[t->g.n_inputs++] = v;
  return v;
}

static void tg_output(tg *t, int v) {
  t->vals[v].is_graph_output = true;
  t->gout[t->g.n_outputs++] = v;
}

static int tg_init_val(tg *t, const char *name, fbx_dtype dt, int rank, const int64_t *dims, const void *data,
                       size_t nbytes) {
  int v = tg_val(t, name, dt, rank, dims);
  fbx_onnx_tensor *x = &t->inits[t->n_inits++];
  x->dtype = dt;
  x->onnx_type = (int)dt;
  x->rank = rank;
  for (int d = 0; d < rank; d++) x->dims[d] = dims[d];
  x->data = data;
  x->nbytes = nbytes;
  t->vals[v].is_initializer = true;
  t->vals[v].init = x;
  return v;
}

static int tg_node(tg *t, const char *op, int opset, const int *ins, int nin, const int *outs, int nout) {
  int k = t->g.n_nodes++;
  fbx_onnx_node *n = &t->nodes[k];
  n->name = op;
  n->op_type = op;
  n->domain = "";
  n->opset = opset;
  for (int i = 0; i < nin; i++) t->io[k][0][i] = ins[i];
  for (int i = 0; i < nout; i++) t->io[k][1][i] = outs[i];
  n->inputs = t->io[k][0];
  n->outputs = t->io[k][1];
  n->n_inputs = nin;
  n->n_outputs = nout;
  n->attrs = t->attrs[k];
  return k;
}

static fbx_onnx_attr *tg_attr(tg *t, int k, const char *name, fbx_onnx_attr_type type) {
  fbx_onnx_attr *a = &t->attrs[k][t->nodes[k].n_attrs++];
  a->name = name;
  a->type = type;
  return a;
}
static void tg_attr_i(tg *t, int k, const char *name, int64_t v) { tg_attr(t, k, name, FBX_ONNX_ATTR_INT)->i = v; }
static void tg_attr_f(tg *t, int k, const char *name, float v) { tg_attr(t, k, name, FBX_ONNX_ATTR_FLOAT)->f = v; }
static void tg_attr_s(tg *t, int k, const char *name, const char *v) { tg_attr(t, k, name, FBX_ONNX_ATTR_STRING)->s = v; }
static void tg_attr_is(tg *t, int k, const char *name, const int64_t *v, int n) {
  fbx_onnx_attr *a = tg_attr(t, k, name, FBX_ONNX_ATTR_INTS);
  a->ints = v;
  a->n_ints = n;
}

/* claim node k; returns claimable and stores the reason */
static char g_reason[256];
static bool claim(tg *t, int k) { return fbx_onnx_node_claimable(&t->g, k, g_reason, sizeof g_reason); }

static bool expect_decline(tg *t, int k, const char *substr) {
  bool ok = claim(t, k);
  if (ok) return false;
  if (!strstr(g_reason, substr)) {
    printf("  reason was: %s\n", g_reason);
    return false;
  }
  return true;
}

/* translate and list the IR node ops */
static fbx_ir_graph *translate(tg *t) {
  fbx_ir_graph *ir = NULL;
  fbx_status *st = fbx_onnx_translate(&t->g, &ir);
  if (st) {
    printf("  translate failed: %s\n", fbx_status_message(st));
    fbx_status_free(st);
    return NULL;
  }
  return ir;
}

static bool ops_are(const fbx_ir_graph *ir, const fbx_ir_op *ops, int n) {
  if (!ir || ir->n_nodes != n) {
    if (ir) {
      printf("  got %d nodes:", ir->n_nodes);
      for (int i = 0; i < ir->n_nodes; i++) printf(" %s", fbx_ir_op_name(ir->nodes[i].op));
      printf("\n");
    }
    return false;
  }
  for (int i = 0; i < n; i++)
    if (ir->nodes[i].op != ops[i]) {
      printf("  node %d is %s, expected %s\n", i, fbx_ir_op_name(ir->nodes[i].op), fbx_ir_op_name(ops[i]));
      return false;
    }
  return true;
}

static const fbx_ir_value *const_input(const fbx_ir_graph *ir, int node, int input) {
  int v = ir->nodes[node].inputs[input];
  if (v < 0 || ir->values[v].kind != FBX_IR_VALUE_CONST) return NULL;
  return &ir->values[v];
}

static const int64_t *ax_neg1(void) {
  static const int64_t v[1] = {-1};
  return v;
}

/* ======================= claim tests ======================= */

static void test_claim_reasons(void) {
  tg t;
  int64_t d23[2] = {2, 3};
  int64_t d32[2] = {3, 2};

  tg_init(&t);
  int x = tg_input(&t, "x", FBX_DTYPE_F32, 2, d23), y = tg_val(&t, "y", FBX_DTYPE_F32, 2, d23);
  int k = tg_node(&t, "Foo", 17, &x, 1, &y, 1);
  CHECK(expect_decline(&t, k, "op 'ai.onnx::Foo' not supported"), "unknown op");
  t.nodes[k].op_type = "FusedMatMul";
  t.nodes[k].domain = "com.microsoft";
  CHECK(expect_decline(&t, k, "op 'com.microsoft::FusedMatMul' not supported"), "unknown domain");

  /* MatMul int32 */
  tg_init(&t);
  int a = tg_input(&t, "a", FBX_DTYPE_I32, 2, d23), b = tg_input(&t, "b", FBX_DTYPE_I32, 2, d32);
  y = tg_val(&t, "y", FBX_DTYPE_I32, 2, (int64_t[]){2, 2});
  k = tg_node(&t, "MatMul", 13, (int[]){a, b}, 2, &y, 1);
  CHECK(expect_decline(&t, k, "MatMul: input A dtype int32 not supported (float32, float64)"), "matmul int32");

  /* Conv with unknown rank */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, -1, NULL);
  int w = tg_input(&t, "w", FBX_DTYPE_F32, 4, (int64_t[]){8, 3, 3, 3});
  y = tg_val(&t, "y", FBX_DTYPE_F32, 4, NULL);
  k = tg_node(&t, "Conv", 11, (int[]){x, w}, 2, &y, 1);
  CHECK(expect_decline(&t, k, "Conv: input 0 ('x') rank unknown"), "conv unknown rank");
  t.vals[x].rank = 4;
  for (int i = 0; i < 4; i++) t.vals[x].dims[i] = -1;
  CHECK(claim(&t, k), "conv ok: %s", g_reason);
  tg_attr_s(&t, k, "auto_pad", "SAME_UPPER");
  CHECK(claim(&t, k), "conv SAME_UPPER ok: %s", g_reason);
  tg_attr_i(&t, k, "weird", 1);
  CHECK(expect_decline(&t, k, "Conv: attribute 'weird' not supported"), "unknown attribute");

  /* Resize tf_crop_and_resize */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 4, (int64_t[]){1, 3, 8, 8});
  static const float scales[4] = {1, 1, 2, 2};
  int sc = tg_init_val(&t, "scales", FBX_DTYPE_F32, 1, (int64_t[]){4}, scales, sizeof scales);
  y = tg_val(&t, "y", FBX_DTYPE_F32, 4, (int64_t[]){1, 3, 16, 16});
  k = tg_node(&t, "Resize", 13, (int[]){x, -1, sc}, 3, &y, 1);
  CHECK(claim(&t, k), "resize ok: %s", g_reason);
  tg_attr_s(&t, k, "coordinate_transformation_mode", "tf_crop_and_resize");
  CHECK(expect_decline(&t, k, "Resize: coordinate_transformation_mode 'tf_crop_and_resize' not supported"),
        "resize crop");
  t.nodes[k].n_attrs = 0;
  tg_attr_s(&t, k, "mode", "cubic");
  CHECK(expect_decline(&t, k, "mode 'cubic' not supported"), "resize cubic");

  /* Upsample only up to opset 9 */
  t.nodes[k].op_type = "Upsample";
  t.nodes[k].opset = 11;
  CHECK(expect_decline(&t, k, "Upsample: opset 11 not supported"), "upsample opset");

  /* Dropout: a bool mask output is claimed (all true in inference), another dtype is not */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 2, d23);
  y = tg_val(&t, "y", FBX_DTYPE_F32, 2, d23);
  int m = tg_val(&t, "mask", FBX_DTYPE_BOOL, 2, d23);
  k = tg_node(&t, "Dropout", 13, &x, 1, (int[]){y, m}, 2);
  CHECK(claim(&t, k), "dropout with mask: %s", g_reason);
  t.vals[m].dtype = FBX_DTYPE_F32;
  CHECK(expect_decline(&t, k, "mask output must be bool"), "dropout non-bool mask");
  t.nodes[k].n_outputs = 1;
  CHECK(claim(&t, k), "dropout ok: %s", g_reason);

  /* Squeeze-13 with runtime axes */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 3, (int64_t[]){2, 1, 3});
  int ax = tg_input(&t, "axes", FBX_DTYPE_I64, 1, (int64_t[]){1});
  y = tg_val(&t, "y", FBX_DTYPE_F32, 2, d23);
  k = tg_node(&t, "Squeeze", 13, (int[]){x, ax}, 2, &y, 1);
  CHECK(expect_decline(&t, k, "axes input must be a constant initializer"), "squeeze runtime axes");

  /* sequence-typed input */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 2, d23);
  t.vals[x].kind = FBX_ONNX_VALUE_OTHER;
  y = tg_val(&t, "y", FBX_DTYPE_F32, 2, d23);
  k = tg_node(&t, "Relu", 14, &x, 1, &y, 1);
  CHECK(expect_decline(&t, k, "not a tensor"), "sequence input");
  t.vals[x].kind = FBX_ONNX_VALUE_TENSOR;
  CHECK(claim(&t, k), "relu ok");
  t.vals[x].dtype = t.vals[y].dtype = FBX_DTYPE_U8;
  CHECK(expect_decline(&t, k, "Relu: input dtype uint8 not supported"), "relu uint8");

  /* ReduceMean-18 with runtime axes */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 2, d23);
  ax = tg_input(&t, "axes", FBX_DTYPE_I64, 1, (int64_t[]){1});
  y = tg_val(&t, "y", FBX_DTYPE_F32, 2, (int64_t[]){2, 1});
  k = tg_node(&t, "ReduceMean", 18, (int[]){x, ax}, 2, &y, 1);
  CHECK(expect_decline(&t, k, "ReduceMean: axes input must be a constant initializer"), "reducemean runtime axes");

  /* Mod fmod=0 on floats is undefined */
  tg_init(&t);
  a = tg_input(&t, "a", FBX_DTYPE_F32, 2, d23);
  b = tg_input(&t, "b", FBX_DTYPE_F32, 2, d23);
  y = tg_val(&t, "y", FBX_DTYPE_F32, 2, d23);
  k = tg_node(&t, "Mod", 13, (int[]){a, b}, 2, &y, 1);
  CHECK(expect_decline(&t, k, "fmod=0"), "mod fmod 0 float");
  tg_attr_i(&t, k, "fmod", 1);
  CHECK(claim(&t, k), "mod fmod 1 ok: %s", g_reason);

  /* Add with mixed dtypes */
  t.nodes[k].op_type = "Add";
  t.nodes[k].n_attrs = 0;
  t.vals[b].dtype = FBX_DTYPE_F64;
  CHECK(expect_decline(&t, k, "mixed input dtypes"), "add mixed dtypes");

  CHECK(fbx_onnx_registry_count() > 100, "registry has %d entries", fbx_onnx_registry_count());
}

/* ======================= translation tests ======================= */

static void test_gemm(void) {
  tg t;
  tg_init(&t);
  int a = tg_input(&t, "a", FBX_DTYPE_F32, 2, (int64_t[]){4, 3});
  int b = tg_input(&t, "b", FBX_DTYPE_F32, 2, (int64_t[]){5, 3});
  static const float cdata[5] = {1, 2, 3, 4, 5};
  int c = tg_init_val(&t, "c", FBX_DTYPE_F32, 1, (int64_t[]){5}, cdata, sizeof cdata);
  int y = tg_val(&t, "y", FBX_DTYPE_F32, 2, (int64_t[]){4, 5});
  int k = tg_node(&t, "Gemm", 13, (int[]){a, b, c}, 3, &y, 1);
  tg_attr_i(&t, k, "transB", 1);
  tg_attr_f(&t, k, "alpha", 0.5f);
  tg_attr_f(&t, k, "beta", 2.0f);
  tg_output(&t, y);
  CHECK(claim(&t, k), "gemm claim: %s", g_reason);
  fbx_ir_graph *ir = translate(&t);
  const fbx_ir_op ops[] = {FBX_IR_OP_MATMUL, FBX_IR_OP_MUL, FBX_IR_OP_ADD};
  CHECK(ops_are(ir, ops, 3), "gemm ops");
  if (ir && ir->n_nodes == 3) {
    CHECK(ir->nodes[0].params.matmul.trans_b == 1 && ir->nodes[0].params.matmul.trans_a == 0 &&
              ir->nodes[0].params.matmul.alpha == 0.5f, "gemm matmul params");
    const fbx_ir_value *beta = const_input(ir, 1, 1);
    CHECK(beta && beta->dtype == FBX_DTYPE_F32 && beta->rank == 0 && *(const float *)beta->data == 2.0f, "gemm beta const");
    const fbx_ir_value *cv = const_input(ir, 1, 0);
    CHECK(cv && cv->rank == 1 && cv->dims[0] == 5 && ((const float *)cv->data)[4] == 5.0f, "gemm C copied");
    CHECK(ir->n_inputs == 2 && ir->n_outputs == 1 && ir->outputs[0] == ir->nodes[2].outputs[0], "gemm io");
    CHECK(ir->nodes[0].onnx_node_index == 0 && strcmp(ir->nodes[0].onnx_op, "Gemm") == 0, "gemm labels");
    CHECK(ir->values[ir->outputs[0]].name && strcmp(ir->values[ir->outputs[0]].name, "y") == 0, "output named");
  }
  fbx_ir_graph_destroy(ir);
}

static void test_batchnorm(void) {
  tg t;
  tg_init(&t);
  int x = tg_input(&t, "x", FBX_DTYPE_F32, 4, (int64_t[]){1, 2, 4, 4});
  static const float sc[2] = {2, 3}, bb[2] = {1, -1}, mu[2] = {0.5f, 2}, var[2] = {3, 8};
  int64_t d2[1] = {2};
  int s = tg_init_val(&t, "s", FBX_DTYPE_F32, 1, d2, sc, 8), b = tg_init_val(&t, "b", FBX_DTYPE_F32, 1, d2, bb, 8);
  int m = tg_init_val(&t, "m", FBX_DTYPE_F32, 1, d2, mu, 8), v = tg_init_val(&t, "v", FBX_DTYPE_F32, 1, d2, var, 8);
  int y = tg_val(&t, "y", FBX_DTYPE_F32, 4, (int64_t[]){1, 2, 4, 4});
  int k = tg_node(&t, "BatchNormalization", 15, (int[]){x, s, b, m, v}, 5, &y, 1);
  tg_attr_f(&t, k, "epsilon", 1.0f);
  tg_output(&t, y);
  CHECK(claim(&t, k), "bn claim: %s", g_reason);
  fbx_ir_graph *ir = translate(&t);
  const fbx_ir_op ops[] = {FBX_IR_OP_MUL, FBX_IR_OP_ADD};
  CHECK(ops_are(ir, ops, 2), "bn ops");
  if (ir && ir->n_nodes == 2) {
    /* a = scale/sqrt(var+eps) = {2/2, 3/3} = {1, 1}; b = B - mean*a = {0.5, -3} */
    const fbx_ir_value *av = const_input(ir, 0, 1), *bv = const_input(ir, 1, 1);
    CHECK(av && av->rank == 3 && av->dims[0] == 2 && av->dims[1] == 1 && av->dims[2] == 1, "bn a shape [C,1,1]");
    CHECK(av && fabsf(((const float *)av->data)[0] - 1.0f) < 1e-6f && fabsf(((const float *)av->data)[1] - 1.0f) < 1e-6f,
          "bn a values");
    CHECK(bv && fabsf(((const float *)bv->data)[0] - 0.5f) < 1e-6f && fabsf(((const float *)bv->data)[1] + 3.0f) < 1e-6f,
          "bn b values");
  }
  fbx_ir_graph_destroy(ir);
  /* training mode declined */
  tg_attr_i(&t, k, "training_mode", 1);
  CHECK(expect_decline(&t, k, "training_mode=1"), "bn training");
}

static void test_squeeze_versions(void) {
  tg t;
  /* Squeeze-11: axes attribute, negative axis normalised with the input rank */
  tg_init(&t);
  int x = tg_input(&t, "x", FBX_DTYPE_F32, 3, (int64_t[]){2, 3, 1});
  int y = tg_val(&t, "y", FBX_DTYPE_F32, 2, (int64_t[]){2, 3});
  int k = tg_node(&t, "Squeeze", 11, &x, 1, &y, 1);
  static const int64_t ax[1] = {-1};
  tg_attr_is(&t, k, "axes", ax, 1);
  tg_output(&t, y);
  fbx_ir_graph *ir = translate(&t);
  const fbx_ir_op sq[] = {FBX_IR_OP_SQUEEZE};
  CHECK(ops_are(ir, sq, 1) && ir->nodes[0].params.axes.axes_mask == (1u << 2), "squeeze-11 mask");
  fbx_ir_graph_destroy(ir);
  /* the same attribute at opset 13 is invalid */
  t.nodes[k].opset = 13;
  CHECK(expect_decline(&t, k, "axes attribute not valid at opset 13"), "squeeze-13 attr");
  /* Squeeze-13: axes input (constant) */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 3, (int64_t[]){1, 3, 1});
  static const int64_t axv[2] = {0, -1};
  int a = tg_init_val(&t, "axes", FBX_DTYPE_I64, 1, (int64_t[]){2}, axv, sizeof axv);
  y = tg_val(&t, "y", FBX_DTYPE_F32, 1, (int64_t[]){3});
  k = tg_node(&t, "Squeeze", 13, (int[]){x, a}, 2, &y, 1);
  tg_output(&t, y);
  ir = translate(&t);
  CHECK(ops_are(ir, sq, 1) && ir->nodes[0].params.axes.axes_mask == ((1u << 0) | (1u << 2)) && ir->nodes[0].n_inputs == 1,
        "squeeze-13 mask");
  fbx_ir_graph_destroy(ir);
  /* Unsqueeze-13: axes normalised with the OUTPUT rank (3 + 1) */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 3, (int64_t[]){2, 3, 4});
  static const int64_t uax[1] = {-1};
  a = tg_init_val(&t, "axes", FBX_DTYPE_I64, 1, (int64_t[]){1}, uax, sizeof uax);
  y = tg_val(&t, "y", FBX_DTYPE_F32, 4, (int64_t[]){2, 3, 4, 1});
  k = tg_node(&t, "Unsqueeze", 13, (int[]){x, a}, 2, &y, 1);
  tg_output(&t, y);
  ir = translate(&t);
  const fbx_ir_op usq[] = {FBX_IR_OP_UNSQUEEZE};
  CHECK(ops_are(ir, usq, 1) && ir->nodes[0].params.axes.axes_mask == (1u << 3), "unsqueeze-13 mask");
  fbx_ir_graph_destroy(ir);
  /* Squeeze of a dim that is not 1 */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 2, (int64_t[]){2, 3});
  y = tg_val(&t, "y", FBX_DTYPE_F32, 1, (int64_t[]){3});
  k = tg_node(&t, "Squeeze", 11, &x, 1, &y, 1);
  static const int64_t ax0[1] = {0};
  tg_attr_is(&t, k, "axes", ax0, 1);
  CHECK(expect_decline(&t, k, "cannot squeeze dim 0 of size 2"), "squeeze non-1");
}

static void test_softmax_versions(void) {
  tg t;
  tg_init(&t);
  int x = tg_input(&t, "x", FBX_DTYPE_F32, 3, (int64_t[]){2, 3, 4});
  int y = tg_val(&t, "y", FBX_DTYPE_F32, 3, (int64_t[]){2, 3, 4});
  int k = tg_node(&t, "Softmax", 11, &x, 1, &y, 1); /* default axis 1: coerced 2-D [2, 12] */
  tg_output(&t, y);
  fbx_ir_graph *ir = translate(&t);
  const fbx_ir_op ops11[] = {FBX_IR_OP_RESHAPE, FBX_IR_OP_SOFTMAX, FBX_IR_OP_SHAPE, FBX_IR_OP_RESHAPE};
  CHECK(ops_are(ir, ops11, 4), "softmax-11 ops");
  if (ir && ir->n_nodes == 4) {
    const fbx_ir_value *shp = const_input(ir, 0, 1);
    CHECK(shp && shp->dims[0] == 2 && ((const int64_t *)shp->data)[0] == 0 && ((const int64_t *)shp->data)[1] == -1,
          "softmax-11 reshape [0,-1]");
    CHECK(ir->nodes[1].params.axis.axis == 1 && ir->values[ir->nodes[1].outputs[0]].rank == 2, "softmax-11 axis");
    CHECK(ir->nodes[3].inputs[1] == ir->nodes[2].outputs[0] && ir->nodes[2].inputs[0] == ir->inputs[0],
          "softmax-11 reshape back to shape(x)");
  }
  fbx_ir_graph_destroy(ir);
  t.nodes[k].opset = 13; /* default axis -1 */
  ir = translate(&t);
  const fbx_ir_op ops13[] = {FBX_IR_OP_SOFTMAX};
  CHECK(ops_are(ir, ops13, 1) && ir->nodes[0].params.axis.axis == 2, "softmax-13");
  fbx_ir_graph_destroy(ir);
  /* opset 11 with axis = last: direct */
  t.nodes[k].opset = 11;
  tg_attr_i(&t, k, "axis", -1);
  ir = translate(&t);
  CHECK(ops_are(ir, ops13, 1) && ir->nodes[0].params.axis.axis == 2, "softmax-11 last axis");
  fbx_ir_graph_destroy(ir);
}

static void test_io_identity(void) {
  /* an initializer and a graph input that are graph outputs directly */
  tg t;
  tg_init(&t);
  int x = tg_input(&t, "x", FBX_DTYPE_F32, 1, (int64_t[]){-1});
  t.vals[x].dim_sym[0] = "n";
  static const float c[3] = {1, 2, 3};
  int ci = tg_init_val(&t, "c", FBX_DTYPE_F32, 1, (int64_t[]){3}, c, sizeof c);
  tg_output(&t, x);
  tg_output(&t, ci);
  tg_output(&t, x);
  fbx_ir_graph *ir = translate(&t);
  const fbx_ir_op ops[] = {FBX_IR_OP_IDENTITY, FBX_IR_OP_IDENTITY, FBX_IR_OP_IDENTITY};
  CHECK(ops_are(ir, ops, 3) && ir->n_outputs == 3, "io identities");
  if (ir && ir->n_inputs == 1) {
    const fbx_ir_value *in = &ir->values[ir->inputs[0]];
    CHECK(in->kind == FBX_IR_VALUE_INPUT && in->dims[0] == FBX_IR_DIM_DYNAMIC && in->dim_sym[0] &&
              strcmp(in->dim_sym[0], "n") == 0, "dynamic input dim");
    CHECK(ir->outputs[0] != ir->outputs[2], "distinct outputs");
  }
  fbx_ir_graph_destroy(ir);
}

static void test_misc_translations(void) {
  tg t;
  fbx_ir_graph *ir;
  /* Clip-6 -> MAX(x, 0), MIN(., 6) */
  tg_init(&t);
  int x = tg_input(&t, "x", FBX_DTYPE_F32, 2, (int64_t[]){2, 3});
  int y = tg_val(&t, "y", FBX_DTYPE_F32, 2, (int64_t[]){2, 3});
  int k = tg_node(&t, "Clip", 9, &x, 1, &y, 1);
  tg_attr_f(&t, k, "min", 0.0f);
  tg_attr_f(&t, k, "max", 6.0f);
  tg_output(&t, y);
  ir = translate(&t);
  const fbx_ir_op clip[] = {FBX_IR_OP_MAX, FBX_IR_OP_MIN};
  CHECK(ops_are(ir, clip, 2), "clip-6 ops");
  if (ir && ir->n_nodes == 2) {
    const fbx_ir_value *lo = const_input(ir, 0, 1), *hi = const_input(ir, 1, 1);
    CHECK(lo && hi && *(const float *)lo->data == 0.0f && *(const float *)hi->data == 6.0f, "clip-6 bounds");
  }
  fbx_ir_graph_destroy(ir);

  /* MatMul with a 1-D right operand: [2,3] x [3] -> [2] */
  tg_init(&t);
  int a = tg_input(&t, "a", FBX_DTYPE_F32, 2, (int64_t[]){2, 3});
  int b = tg_input(&t, "b", FBX_DTYPE_F32, 1, (int64_t[]){3});
  y = tg_val(&t, "y", FBX_DTYPE_F32, 1, (int64_t[]){2});
  tg_node(&t, "MatMul", 13, (int[]){a, b}, 2, &y, 1);
  tg_output(&t, y);
  ir = translate(&t);
  const fbx_ir_op mm[] = {FBX_IR_OP_UNSQUEEZE, FBX_IR_OP_MATMUL, FBX_IR_OP_SQUEEZE};
  CHECK(ops_are(ir, mm, 3), "matmul 1-D ops");
  if (ir && ir->n_nodes == 3) {
    CHECK(ir->nodes[0].params.axes.axes_mask == 2u && ir->nodes[2].params.axes.axes_mask == 2u &&
              ir->nodes[1].params.matmul.alpha == 1.0f, "matmul 1-D masks");
  }
  fbx_ir_graph_destroy(ir);

  /* Mean of 3 -> ADD, ADD, DIV by 3 */
  tg_init(&t);
  int i0 = tg_input(&t, "i0", FBX_DTYPE_F32, 1, (int64_t[]){4});
  int i1 = tg_input(&t, "i1", FBX_DTYPE_F32, 1, (int64_t[]){4});
  int i2 = tg_input(&t, "i2", FBX_DTYPE_F32, 1, (int64_t[]){4});
  y = tg_val(&t, "y", FBX_DTYPE_F32, 1, (int64_t[]){4});
  tg_node(&t, "Mean", 13, (int[]){i0, i1, i2}, 3, &y, 1);
  tg_output(&t, y);
  ir = translate(&t);
  const fbx_ir_op mean[] = {FBX_IR_OP_ADD, FBX_IR_OP_ADD, FBX_IR_OP_DIV};
  CHECK(ops_are(ir, mean, 3), "mean ops");
  if (ir && ir->n_nodes == 3) {
    const fbx_ir_value *n = const_input(ir, 2, 1);
    CHECK(n && *(const float *)n->data == 3.0f, "mean divisor");
  }
  fbx_ir_graph_destroy(ir);

  /* Split-11 attr vs Split-13 input */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 2, (int64_t[]){2, 5});
  int o1 = tg_val(&t, "o1", FBX_DTYPE_F32, 2, (int64_t[]){2, 2}), o2 = tg_val(&t, "o2", FBX_DTYPE_F32, 2, (int64_t[]){2, 3});
  k = tg_node(&t, "Split", 11, &x, 1, (int[]){o1, o2}, 2);
  static const int64_t sp[2] = {2, 3};
  tg_attr_i(&t, k, "axis", -1);
  tg_attr_is(&t, k, "split", sp, 2);
  tg_output(&t, o1);
  tg_output(&t, o2);
  ir = translate(&t);
  const fbx_ir_op split[] = {FBX_IR_OP_SPLIT};
  CHECK(ops_are(ir, split, 1) && ir->nodes[0].n_outputs == 2 && ir->nodes[0].params.axis.axis == 1, "split-11");
  if (ir && ir->n_nodes == 1) {
    const fbx_ir_value *s = const_input(ir, 0, 1);
    CHECK(s && ((const int64_t *)s->data)[0] == 2 && ((const int64_t *)s->data)[1] == 3, "split-11 sizes");
  }
  fbx_ir_graph_destroy(ir);
  t.nodes[k].opset = 13;
  CHECK(expect_decline(&t, k, "split attribute not valid at opset 13"), "split-13 attr");
  /* equal split of 5 into 2 is invalid before opset 18 */
  t.nodes[k].n_attrs = 1;
  CHECK(expect_decline(&t, k, "not divisible"), "split uneven");

  /* ReduceMean-13 axes attr [-1] keepdims default */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 3, (int64_t[]){2, 3, 4});
  y = tg_val(&t, "y", FBX_DTYPE_F32, 3, (int64_t[]){2, 3, 1});
  k = tg_node(&t, "ReduceMean", 13, &x, 1, &y, 1);
  tg_attr_is(&t, k, "axes", ax_neg1(), 1);
  tg_output(&t, y);
  ir = translate(&t);
  const fbx_ir_op rm[] = {FBX_IR_OP_REDUCE_MEAN};
  CHECK(ops_are(ir, rm, 1) && ir->nodes[0].params.reduce.axes_mask == 4u && ir->nodes[0].params.reduce.keepdims == 1,
        "reducemean-13");
  fbx_ir_graph_destroy(ir);

  /* ReduceSum-13 with empty axes and noop_with_empty_axes=1 -> IDENTITY */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 2, (int64_t[]){2, 3});
  y = tg_val(&t, "y", FBX_DTYPE_F32, 2, (int64_t[]){2, 3});
  k = tg_node(&t, "ReduceSum", 13, &x, 1, &y, 1);
  tg_attr_i(&t, k, "noop_with_empty_axes", 1);
  tg_output(&t, y);
  ir = translate(&t);
  const fbx_ir_op id[] = {FBX_IR_OP_IDENTITY};
  CHECK(ops_are(ir, id, 1), "reducesum noop");
  fbx_ir_graph_destroy(ir);

  /* Cast to int64 */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 1, (int64_t[]){3});
  y = tg_val(&t, "y", FBX_DTYPE_I64, 1, (int64_t[]){3});
  k = tg_node(&t, "Cast", 13, &x, 1, &y, 1);
  tg_attr_i(&t, k, "to", 7);
  tg_output(&t, y);
  ir = translate(&t);
  const fbx_ir_op cast[] = {FBX_IR_OP_CAST};
  CHECK(ops_are(ir, cast, 1) && ir->nodes[0].params.ew.to == FBX_DTYPE_I64 &&
            ir->values[ir->nodes[0].outputs[0]].dtype == FBX_DTYPE_I64, "cast");
  fbx_ir_graph_destroy(ir);

  /* Slice-1 attributes -> constant int64 inputs, negative axis normalised */
  tg_init(&t);
  x = tg_input(&t, "x", FBX_DTYPE_F32, 2, (int64_t[]){4, 6});
  y = tg_val(&t, "y", FBX_DTYPE_F32, 2, (int64_t[]){4, 2});
  k = tg_node(&t, "Slice", 9, &x, 1, &y, 1);
  static const int64_t st[1] = {1}, en[1] = {3};
  tg_attr_is(&t, k, "starts", st, 1);
  tg_attr_is(&t, k, "ends", en, 1);
  tg_attr_is(&t, k, "axes", ax_neg1(), 1);
  tg_output(&t, y);
  ir = translate(&t);
  const fbx_ir_op sl[] = {FBX_IR_OP_SLICE};
  CHECK(ops_are(ir, sl, 1) && ir->nodes[0].n_inputs == 4, "slice-1");
  if (ir && ir->n_nodes == 1) {
    const fbx_ir_value *axv = const_input(ir, 0, 3);
    CHECK(axv && ((const int64_t *)axv->data)[0] == 1, "slice axes normalised");
  }
  fbx_ir_graph_destroy(ir);
}

/* cover2: float16 via float32 casts, ConvInteger, CumSum with a runtime axis, Unique reason. */
static void test_cover2(void) {
  {
    tg t;
    tg_init(&t);
    int a = tg_input(&t, "a", FBX_DTYPE_F16, 2, (int64_t[]){4, 3});
    int b = tg_input(&t, "b", FBX_DTYPE_F16, 2, (int64_t[]){3, 5});
    int y = tg_val(&t, "y", FBX_DTYPE_F16, 2, (int64_t[]){4, 5});
    int k = tg_node(&t, "MatMul", 13, (int[]){a, b}, 2, &y, 1);
    tg_output(&t, y);
    CHECK(claim(&t, k), "f16 matmul claim: %s", g_reason);
    fbx_ir_graph *ir = translate(&t);
    const fbx_ir_op ops[] = {FBX_IR_OP_CAST, FBX_IR_OP_CAST, FBX_IR_OP_MATMUL, FBX_IR_OP_CAST};
    CHECK(ops_are(ir, ops, 4), "f16 matmul = cast, cast, matmul(f32), cast");
    if (ir && ir->n_nodes == 4) {
      CHECK(ir->values[ir->nodes[2].outputs[0]].dtype == FBX_DTYPE_F32, "f16 matmul computes in f32");
      CHECK(ir->values[ir->outputs[0]].dtype == FBX_DTYPE_F16 && ir->outputs[0] == ir->nodes[3].outputs[0],
            "f16 matmul output is the f16 cast");
      CHECK(ir->values[ir->outputs[0]].name && strcmp(ir->values[ir->outputs[0]].name, "y") == 0, "f16 output named");
    }
    fbx_ir_graph_destroy(ir);
  }
  {
    tg t;
    tg_init(&t);
    int x = tg_input(&t, "x", FBX_DTYPE_U8, 4, (int64_t[]){1, 8, 6, 6});
    int w = tg_input(&t, "w", FBX_DTYPE_U8, 4, (int64_t[]){2, 8, 3, 3});
    int y = tg_val(&t, "y", FBX_DTYPE_I32, 4, (int64_t[]){1, 2, 4, 4});
    int k = tg_node(&t, "ConvInteger", 10, (int[]){x, w}, 2, &y, 1);
    tg_output(&t, y);
    CHECK(claim(&t, k), "convinteger K=72 claim: %s", g_reason);
    fbx_ir_graph *ir = translate(&t);
    const fbx_ir_op ops[] = {FBX_IR_OP_CONV_INT};
    CHECK(ops_are(ir, ops, 1), "convinteger = one CONV_INT (int32 accumulation)");
    CHECK(ir && ir->values[ir->outputs[0]].dtype == FBX_DTYPE_I32, "convinteger output int32");
    fbx_ir_graph_destroy(ir);
    tg t2;
    tg_init(&t2);
    x = tg_input(&t2, "x", FBX_DTYPE_U8, 4, (int64_t[]){1, 32, 6, 6});
    w = tg_input(&t2, "w", FBX_DTYPE_U8, 4, (int64_t[]){2, 32, 3, 3});
    y = tg_val(&t2, "y", FBX_DTYPE_I32, 4, (int64_t[]){1, 2, 4, 4});
    k = tg_node(&t2, "ConvInteger", 10, (int[]){x, w}, 2, &y, 1);
    tg_output(&t2, y);
    CHECK(claim(&t2, k), "convinteger K=288 claimed (exact int32 accumulation, no K limit): %s", g_reason);
  }
  {
    tg t;
    tg_init(&t);
    int x = tg_input(&t, "x", FBX_DTYPE_F32, 2, (int64_t[]){2, 3});
    int a = tg_input(&t, "axis", FBX_DTYPE_I32, 0, NULL);
    int y = tg_val(&t, "y", FBX_DTYPE_F32, 2, (int64_t[]){2, 3});
    int k = tg_node(&t, "CumSum", 14, (int[]){x, a}, 2, &y, 1);
    tg_output(&t, y);
    CHECK(claim(&t, k), "cumsum runtime axis claim: %s", g_reason);
    fbx_ir_graph *ir = translate(&t);
    int n_cumsum = 0, n_where = 0;
    for (int i = 0; ir && i < ir->n_nodes; i++) {
      n_cumsum += ir->nodes[i].op == FBX_IR_OP_CUMSUM;
      n_where += ir->nodes[i].op == FBX_IR_OP_WHERE;
    }
    CHECK(ir && n_cumsum == 2 && n_where == 1, "cumsum runtime axis: one CUMSUM per axis + WHERE");
    fbx_ir_graph_destroy(ir);
  }
  {
    /* GatherND: index depth (indices' last dim) 0 or unknown declined with the reason; 2 claimed */
    const int64_t depth[3] = {0, -1, 2};
    const char *want[3] = {"is 0", "unknown", NULL};
    for (int c = 0; c < 3; c++) {
      tg t;
      tg_init(&t);
      int x = tg_input(&t, "x", FBX_DTYPE_F32, 3, (int64_t[]){2, 3, 4});
      int i = tg_input(&t, "i", FBX_DTYPE_I64, 2, (int64_t[]){2, depth[c]});
      int y = tg_val(&t, "y", FBX_DTYPE_F32, 2, NULL);
      int k = tg_node(&t, "GatherND", 13, (int[]){x, i}, 2, &y, 1);
      tg_attr_i(&t, k, "batch_dims", c == 2 ? 1 : 0);
      tg_output(&t, y);
      if (want[c]) CHECK(expect_decline(&t, k, want[c]), "gathernd depth %lld declined: %s", (long long)depth[c], g_reason);
      else CHECK(claim(&t, k), "gathernd batch_dims 1 depth 2 claimed: %s", g_reason);
    }
  }
  {
    tg t;
    tg_init(&t);
    int x = tg_input(&t, "x", FBX_DTYPE_F32, 1, (int64_t[]){6});
    int y = tg_val(&t, "y", FBX_DTYPE_F32, 1, NULL);
    int k = tg_node(&t, "Unique", 11, &x, 1, &y, 1);
    tg_output(&t, y);
    CHECK(expect_decline(&t, k, "data-dependent sizes"), "unique declined with reason");
  }
}

int main(void) {
  test_cover2();
  test_claim_reasons();
  test_gemm();
  test_batchnorm();
  test_squeeze_versions();
  test_softmax_versions();
  test_io_identity();
  test_misc_translations();
  printf("onnx: %d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
