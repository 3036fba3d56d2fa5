// fz_gen.c — a fuzz input read as a description of a small ONNX graph (see fz_gen.h).
//
// Layout of the description (every byte string is one; a missing byte reads as 0):
//   [0..7]   seed of the input values        [8] opset (13 or 17)     [9] value style
//   [10]     number of graph inputs - 1      then per input: rank, dims
//   then per node: an op byte, then the bytes that op's recipe reads (inputs, attributes,
//   constants). Up to FZ_MAX_NODES nodes; the description ends the graph.
// Shapes are tracked where an op's result is easy to know (rank -1 = unknown) so that most
// recipes build a model both engines accept; the classes of fz_gen.h add the hostile parts.
#include "fz_gen.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz_model.h"

#define FZ_MAX_VALUES 32
#define FZ_MAX_RANK 5
#define FZ_MAX_NUMEL 4096

typedef struct fz_val {
  char name[16];
  int dtype;  // FBX_HOST_*
  int rank;   // -1: unknown
  int64_t d[FZ_MAX_RANK];
} fz_val;

typedef struct fz_gen {
  const uint8_t *p;
  size_t n, i;
  unsigned classes;
  int opset;
  fzm b;
  fz_val v[FZ_MAX_VALUES];
  int n_v;
  int n_inputs;  // v[0..n_inputs) are the graph inputs
  int n_const;
  char *desc;
  size_t desc_len, desc_cap;
  fz_model *m;  // where the graph is recorded for the reference
} fz_gen;

static unsigned fz_u8(fz_gen *g) { return g->i < g->n ? g->p[g->i++] : 0; }
static unsigned fz_pick(fz_gen *g, unsigned n) { return n ? fz_u8(g) % n : 0; }
static int fz_has(const fz_gen *g, unsigned cls) { return (g->classes & cls) != 0; }
// The graph uses a hostile part of class cls (counted per class by the fuzz target).
static void fz_used(fz_gen *g, unsigned cls) { g->m->used |= cls; }

static void fz_desc(fz_gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fz_desc(fz_gen *g, const char *fmt, ...) {
  if (g->desc_len + 1 >= g->desc_cap) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(g->desc + g->desc_len, g->desc_cap - g->desc_len, fmt, ap);
  va_end(ap);
  if (k > 0) g->desc_len = g->desc_len + (size_t)k < g->desc_cap ? g->desc_len + (size_t)k : g->desc_cap - 1;
}

static int64_t fz_numel(const int64_t *d, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= d[i];
  return n;
}

static void fz_shape_desc(fz_gen *g, const fz_val *v) {
  if (v->rank < 0) {
    fz_desc(g, "%s[?]", v->name);
    return;
  }
  fz_desc(g, "%s[", v->name);
  for (int i = 0; i < v->rank; i++) fz_desc(g, i ? "x%lld" : "%lld", (long long)v->d[i]);
  fz_desc(g, "]");
}

// A new value (the output of the node being written). NULL when the value table is full.
static fz_val *fz_new(fz_gen *g, int dtype, int rank, const int64_t *d) {
  if (g->n_v >= FZ_MAX_VALUES) return NULL;
  fz_val *v = &g->v[g->n_v];
  snprintf(v->name, sizeof v->name, "v%d", g->n_v);
  g->n_v++;
  v->dtype = dtype;
  v->rank = rank;
  for (int i = 0; i < rank && i < FZ_MAX_RANK; i++) v->d[i] = d[i];
  return v;
}

// A value to feed an op: a float one of rank >= min_rank (-1: any). NULL if none.
static const fz_val *fz_input_in(fz_gen *g, int min_rank, int n_values) {
  int idx[FZ_MAX_VALUES], k = 0;
  for (int i = 0; i < n_values; i++)
    if (g->v[i].dtype == FBX_HOST_F32 && g->v[i].rank >= min_rank) idx[k++] = i;
  if (!k) return NULL;
  return &g->v[idx[fz_pick(g, (unsigned)k)]];
}
static const fz_val *fz_input(fz_gen *g, int min_rank) { return fz_input_in(g, min_rank, g->n_v); }
// For an op whose result jumps where its input crosses a point (Floor, Greater, ArgMax, TopK,
// Cast to int, ...): a one-ulp difference upstream, which both engines may rightly have,
// would flip its result. It reads graph inputs only (the same bits in both engines).
static const fz_val *fz_input_exact(fz_gen *g, int min_rank) { return fz_input_in(g, min_rank, g->n_inputs); }

// ---- constants (initializers) ----

static const char *fz_const(fz_gen *g, int dtype, int rank, const int64_t *d, const void *data, size_t nbytes) {
  static char names[64][16];
  int k = g->n_const++ % 64;
  snprintf(names[k], sizeof names[k], "c%d", g->n_const - 1);
  fzm_init(&g->b, names[k], dtype, rank, d, data, nbytes);
  fz_model *m = g->m;
  if (m->n_consts < FZ_MAX_CONSTS) {
    fbx_host_tensor *t = &m->consts[m->n_consts];
    if (!fbx_host_tensor_alloc(t, names[k], dtype, rank, d) && t->nbytes == nbytes) {
      if (nbytes) memcpy(t->data, data, nbytes);
      m->n_consts++;
    } else {
      fbx_host_tensor_free(t);
      m->recorded = 0;
    }
  } else {
    m->recorded = 0;
  }
  return names[k];
}

static const char *fz_const_i64(fz_gen *g, const int64_t *vals, int n) {
  int64_t d = n;
  fz_desc(g, " {");
  for (int i = 0; i < n; i++) fz_desc(g, i ? ",%lld" : "%lld", (long long)vals[i]);
  fz_desc(g, "}");
  return fz_const(g, FBX_HOST_I64, 1, &d, vals, (size_t)n * sizeof vals[0]);
}

// A float constant of shape d filled from the description (small values).
static const char *fz_const_f32(fz_gen *g, int rank, const int64_t *d, float lo, float hi) {
  int64_t n = fz_numel(d, rank);
  float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
  if (!x) return "";
  unsigned s = fz_u8(g) * 2654435761u + 1;
  for (int64_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    x[i] = lo + (hi - lo) * (float)(s >> 8) / 16777216.f;
  }
  const char *nm = fz_const(g, FBX_HOST_F32, rank, d, x, (size_t)n * sizeof *x);
  free(x);
  return nm;
}

// An interesting integer: small (range [lo, hi]) or, with the bigint class, extreme.
static int64_t fz_int(fz_gen *g, int64_t lo, int64_t hi) {
  static const int64_t big[] = {INT64_MIN, INT64_MAX, -INT64_MAX, ((int64_t)1 << 62) + 1,
                                (int64_t)1 << 32, -((int64_t)1 << 62), (int64_t)1 << 31, ((int64_t)1 << 61) + 3};
  unsigned b = fz_u8(g);
  if (fz_has(g, FZ_CLASS_BIGINT) && b >= 240) {
    fz_used(g, FZ_CLASS_BIGINT);
    return big[b % (sizeof big / sizeof big[0])];
  }
  return lo + (int64_t)(b % (unsigned)(hi - lo + 1));
}

// a + b + c saturated to int64 (the bigint class's pads reach INT64_MAX)
static int64_t fz_sum3(int64_t a, int64_t b, int64_t c) {
  __int128 w = (__int128)a + b + c;
  return w > INT64_MAX ? INT64_MAX : w < INT64_MIN ? INT64_MIN : (int64_t)w;
}

// A result of numel elements (the bigint class: a dim, repeat or pad of 2^32, ...). Over 2^24
// that fits int64: a valid tensor of up to exabytes, which both engines would allocate (an OOM
// kill, which says nothing of either): the input is not run (too_big). Past int64: the element
// count overflows, which Fusebox must refuse cleanly; ORT is not given it (ort_unsafe).
static void fz_huge(fz_gen *g, double numel) {
  if (numel >= 9.2e18) g->m->ort_unsafe = 1;
  else if (numel > (double)(1 << 24)) g->m->too_big = 1;
}

// ---- one node ----

// Record a node for the reference (fz_ref.h); a full table marks the graph unrecorded.
static void fz_record(fz_gen *g, const char *op, const char *const *ins, int n_in, const char *const *outs,
                      int n_out, const fzm_attr *at, int n_at) {
  fz_model *m = g->m;
  if (m->n_nodes >= (int)(sizeof m->nodes / sizeof m->nodes[0]) || n_in > 5 || n_out > 2 || n_at > 8) {
    m->recorded = 0;
    return;
  }
  fz_rnode *r = &m->nodes[m->n_nodes++];
  memset(r, 0, sizeof *r);
  r->op = op;
  r->n_in = n_in;
  r->n_out = n_out;
  for (int i = 0; i < n_in; i++) snprintf(r->in[i], sizeof r->in[i], "%s", ins[i] ? ins[i] : "");
  for (int i = 0; i < n_out; i++) snprintf(r->out[i], sizeof r->out[i], "%s", outs[i]);
  r->n_at = n_at;
  for (int i = 0; i < n_at; i++) {
    fz_rattr *a = &r->at[i];
    a->name = at[i].name;
    a->type = at[i].type;
    a->f = at[i].f;
    a->i = at[i].i;
    a->s = at[i].s;
    a->n = at[i].n < 8 ? at[i].n : 8;
    if (at[i].n > 8) m->recorded = 0;
    for (int k = 0; k < a->n && at[i].ints; k++) a->ints[k] = at[i].ints[k];
    if (at[i].type == FZM_ATTR_FLOATS) m->recorded = 0;  // no recipe writes one
  }
}

static void fz_node(fz_gen *g, const char *op, const char *const *ins, int n_in, fz_val **outs, int n_out,
                    const fzm_attr *at, int n_at) {
  const char *on[4] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < n_out; i++) on[i] = outs[i]->name;
  fz_record(g, op, ins, n_in, on, n_out, at, n_at);
  char name[32];
  snprintf(name, sizeof name, "n%d_%s", g->n_v, op);
  fzm_node(&g->b, op, name, ins, n_in, on, n_out, at, n_at);
  for (int i = 0; i < n_out; i++) fzm_output(&g->b, outs[i]->name, 0);
  fz_desc(g, " -> ");
  for (int i = 0; i < n_out; i++) fz_shape_desc(g, outs[i]);
  fz_desc(g, "\n");
}

static void fz_begin_desc(fz_gen *g, const char *op, const fz_val *x) {
  fz_desc(g, "  %s(", op);
  if (x) fz_shape_desc(g, x);
  fz_desc(g, ")");
}

typedef void (*fz_recipe)(fz_gen *g);

// Unary elementwise ops. The second table makes NaN/inf from finite inputs.
static void fz_unary(fz_gen *g) {
  static const char *safe[] = {"Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Erf", "Softplus", "Sign", "Floor",
                               "Ceil", "Round", "Softsign", "HardSwish", "Sin", "Cos", "Atan", "Identity",
                               "HardSigmoid", "Elu", "Celu", "LeakyRelu", "Selu", "ThresholdedRelu", "Shrink"};
  static const char *nan[] = {"Exp", "Log", "Sqrt", "Reciprocal", "Acos", "Asin", "Atanh", "Acosh", "Tan"};
  const size_t ns = sizeof safe / sizeof safe[0], nn = sizeof nan / sizeof nan[0];
  unsigned k = fz_pick(g, (unsigned)(ns + (fz_has(g, FZ_CLASS_NAN) ? nn : 0)));
  const char *op = k < ns ? safe[k] : nan[k - ns];
  if (k >= ns) fz_used(g, FZ_CLASS_NAN);
  static const char *jumps[] = {"Sign", "Floor", "Ceil", "Round", "ThresholdedRelu", "Shrink"};
  int jump = 0;
  for (size_t i = 0; i < sizeof jumps / sizeof jumps[0]; i++) jump |= !strcmp(op, jumps[i]);
  const fz_val *x = jump ? fz_input_exact(g, -1) : fz_input(g, -1);
  if (!x) return;
  fzm_attr at[2];
  int n_at = 0;
  float a = (float)fz_pick(g, 8) * 0.25f - 0.5f;
  if (!strcmp(op, "Elu") || !strcmp(op, "Celu") || !strcmp(op, "LeakyRelu") || !strcmp(op, "ThresholdedRelu") ||
      !strcmp(op, "HardSigmoid"))
    at[n_at++] = (fzm_attr){.name = "alpha", .type = FZM_ATTR_FLOAT, .f = !strcmp(op, "Celu") && a == 0 ? 1.f : a};
  if (!strcmp(op, "Shrink")) at[n_at++] = (fzm_attr){.name = "lambd", .type = FZM_ATTR_FLOAT, .f = fabsf(a)};
  fz_begin_desc(g, op, x);
  fz_val *y = fz_new(g, FBX_HOST_F32, x->rank, x->d);
  if (!y) return;
  fz_node(g, op, (const char *[]){x->name}, 1, &y, 1, at, n_at);
}

// Binary elementwise: the second operand is a broadcastable constant, a scalar or the value itself.
static void fz_binary(fz_gen *g) {
  static const char *safe[] = {"Add", "Sub", "Mul", "Max", "Min", "PRelu", "Equal", "Less", "Greater"};
  static const char *nan[] = {"Div", "Pow"};
  const size_t ns = sizeof safe / sizeof safe[0], nn = sizeof nan / sizeof nan[0];
  unsigned k = fz_pick(g, (unsigned)(ns + (fz_has(g, FZ_CLASS_NAN) ? nn : 0)));
  const char *op = k < ns ? safe[k] : nan[k - ns];
  if (k >= ns) fz_used(g, FZ_CLASS_NAN);
  int jump = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater");
  const fz_val *x = jump ? fz_input_exact(g, -1) : fz_input(g, -1);
  if (!x) return;
  unsigned how = fz_pick(g, 3);
  const char *bname = x->name;
  int64_t bd[FZ_MAX_RANK];
  int brank = 0;
  fz_begin_desc(g, op, x);
  if (how == 1 && x->rank >= 1) {  // a suffix of x's shape, some dims 1
    brank = 1 + (int)fz_pick(g, (unsigned)x->rank);
    for (int i = 0; i < brank; i++) bd[i] = fz_pick(g, 3) ? x->d[x->rank - brank + i] : 1;
    if (!strcmp(op, "PRelu")) brank = 0;  // slope: scalar (unidirectional broadcast)
  }
  if (how != 0 || x->rank < 0) {
    bname = fz_const_f32(g, brank, bd, !strcmp(op, "Pow") ? 0.f : -2.f, 2.f);
    fz_desc(g, " with const[%d-d]", brank);
  }
  int dt = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") ? FBX_HOST_BOOL : FBX_HOST_F32;
  fz_val *y = fz_new(g, dt, x->rank, x->d);
  if (!y) return;
  fz_node(g, op, (const char *[]){x->name, bname}, 2, &y, 1, NULL, 0);
}

// Reductions over axes from the description; ReduceSum takes them as an input (opset 13).
static void fz_reduce(fz_gen *g) {
  static const char *safe[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1",
                               "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"};
  static const char *nan[] = {"ReduceProd", "ReduceLogSum"};
  const size_t ns = sizeof safe / sizeof safe[0], nn = sizeof nan / sizeof nan[0];
  unsigned k = fz_pick(g, (unsigned)(ns + (fz_has(g, FZ_CLASS_NAN) ? nn : 0)));
  const char *op = k < ns ? safe[k] : nan[k - ns];
  if (k >= ns) fz_used(g, FZ_CLASS_NAN);
  const fz_val *x = fz_input(g, 1);
  if (!x) return;
  int keep = (int)fz_pick(g, 2);
  int64_t axes[FZ_MAX_RANK];
  int n_axes = 0, red[FZ_MAX_RANK] = {0};
  unsigned mask = fz_u8(g);
  for (int i = 0; i < x->rank; i++)
    if (mask & (1u << i)) {
      axes[n_axes++] = (mask & 0x80) ? i - x->rank : i;
      red[i] = 1;
    }
  if (fz_has(g, FZ_CLASS_INVALID) && (mask & 0x40)) {
    axes[n_axes++] = x->rank + 1;  // out of range
    fz_used(g, FZ_CLASS_INVALID);
  }
  fz_begin_desc(g, op, x);
  fz_desc(g, " keepdims=%d", keep);
  int64_t d[FZ_MAX_RANK];
  int r = 0;
  for (int i = 0; i < x->rank; i++) {
    int gone = n_axes == 0 || red[i];
    if (!gone) d[r++] = x->d[i];
    else if (keep) d[r++] = 1;
  }
  fzm_attr at[2] = {{.name = "keepdims", .type = FZM_ATTR_INT, .i = keep}};
  int n_at = 1;
  const char *ins[2] = {x->name, NULL};
  int n_in = 1;
  if (n_axes && !strcmp(op, "ReduceSum") && g->opset >= 13) {
    ins[n_in++] = fz_const_i64(g, axes, n_axes);
  } else if (n_axes) {
    at[n_at++] = (fzm_attr){.name = "axes", .type = FZM_ATTR_INTS, .ints = axes, .n = n_axes};
    fz_desc(g, " axes=%d", n_axes);
  }
  fz_val *y = fz_new(g, FBX_HOST_F32, r, d);
  if (!y) return;
  fz_node(g, op, ins, n_in, &y, 1, at, n_at);
}

static void fz_softmax(fz_gen *g) {
  static const char *ops[] = {"Softmax", "LogSoftmax", "Hardmax"};
  const char *op = ops[fz_pick(g, 3)];
  const fz_val *x = op[0] == 'H' ? fz_input_exact(g, 1) : fz_input(g, 1);
  if (!x) return;
  int64_t axis = (int64_t)fz_pick(g, (unsigned)(2 * x->rank)) - x->rank;
  fz_begin_desc(g, op, x);
  fz_desc(g, " axis=%lld", (long long)axis);
  fzm_attr at = {.name = "axis", .type = FZM_ATTR_INT, .i = axis};
  fz_val *y = fz_new(g, FBX_HOST_F32, x->rank, x->d);
  if (!y) return;
  fz_node(g, op, (const char *[]){x->name}, 1, &y, 1, &at, 1);
}

static void fz_argmax(fz_gen *g) {
  const char *op = fz_pick(g, 2) ? "ArgMax" : "ArgMin";
  const fz_val *x = fz_input_exact(g, 1);
  if (!x) return;
  int axis = (int)fz_pick(g, (unsigned)x->rank), keep = (int)fz_pick(g, 2), last = (int)fz_pick(g, 2);
  fz_begin_desc(g, op, x);
  fz_desc(g, " axis=%d keepdims=%d select_last_index=%d", axis, keep, last);
  int64_t d[FZ_MAX_RANK];
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (i != axis) d[r++] = x->d[i];
    else if (keep) d[r++] = 1;
  fzm_attr at[3] = {{.name = "axis", .type = FZM_ATTR_INT, .i = axis},
                    {.name = "keepdims", .type = FZM_ATTR_INT, .i = keep},
                    {.name = "select_last_index", .type = FZM_ATTR_INT, .i = last}};
  fz_val *y = fz_new(g, FBX_HOST_I64, r, d);
  if (!y) return;
  fz_node(g, op, (const char *[]){x->name}, 1, &y, 1, at, 3);
}

// MatMul with a constant [K, N] (K = x's last dim), or Gemm on a 2-D value.
static void fz_matmul(fz_gen *g) {
  const fz_val *x = fz_input(g, 1);
  if (!x) return;
  int64_t K = x->d[x->rank - 1], N = 1 + fz_pick(g, 8);
  int gemm = x->rank == 2 && fz_pick(g, 2);
  if (!gemm) {
    fz_begin_desc(g, "MatMul", x);
    const char *w = fz_const_f32(g, 2, (const int64_t[]){K, N}, -1.f, 1.f);
    int64_t d[FZ_MAX_RANK];
    for (int i = 0; i < x->rank; i++) d[i] = x->d[i];
    d[x->rank - 1] = N;
    if (x->rank == 1) d[0] = N;
    fz_val *y = fz_new(g, FBX_HOST_F32, x->rank, d);
    if (!y) return;
    fz_node(g, "MatMul", (const char *[]){x->name, w}, 2, &y, 1, NULL, 0);
    return;
  }
  int ta = (int)fz_pick(g, 2), tb = (int)fz_pick(g, 2);
  int64_t M = ta ? x->d[1] : x->d[0], KK = ta ? x->d[0] : x->d[1];
  fz_begin_desc(g, "Gemm", x);
  fz_desc(g, " transA=%d transB=%d", ta, tb);
  const char *w = fz_const_f32(g, 2, tb ? (const int64_t[]){N, KK} : (const int64_t[]){KK, N}, -1.f, 1.f);
  const char *c = fz_const_f32(g, 1, (const int64_t[]){N}, -1.f, 1.f);
  fzm_attr at[4] = {{.name = "transA", .type = FZM_ATTR_INT, .i = ta},
                    {.name = "transB", .type = FZM_ATTR_INT, .i = tb},
                    {.name = "alpha", .type = FZM_ATTR_FLOAT, .f = 0.5f * (float)(1 + fz_pick(g, 4))},
                    {.name = "beta", .type = FZM_ATTR_FLOAT, .f = 0.5f * (float)fz_pick(g, 4)}};
  fz_val *y = fz_new(g, FBX_HOST_F32, 2, (const int64_t[]){M, N});
  if (!y) return;
  fz_node(g, "Gemm", (const char *[]){x->name, w, c}, 3, &y, 1, at, 4);
}

// Reshape / Expand / ConstantOfShape / Tile: shape-valued inputs (the bigint class's home).
static void fz_shape_op(fz_gen *g) {
  static const char *ops[] = {"Reshape", "Expand", "ConstantOfShape", "Tile"};
  const char *op = ops[fz_pick(g, 4)];
  const fz_val *x = fz_input(g, 0);
  if (!x) return;
  fz_begin_desc(g, op, x);
  int64_t s[FZ_MAX_RANK], d[FZ_MAX_RANK];
  int r = 0, known = 1;
  int64_t n = fz_numel(x->d, x->rank);
  if (!strcmp(op, "Reshape")) {  // split n into factors; maybe a -1 or 0 (copy) entry
    int64_t left = n;
    r = 1 + (int)fz_pick(g, 3);
    for (int i = 0; i < r - 1; i++) {
      int64_t f = 1 + fz_pick(g, 4);
      if (left % f) f = 1;
      s[i] = d[i] = f;
      left /= f;
    }
    s[r - 1] = d[r - 1] = left;
    if (fz_pick(g, 4) == 0) s[fz_pick(g, (unsigned)r)] = -1;
    for (int i = 0; i < r; i++)
      if (s[i] != -1 && fz_pick(g, 8) == 0) s[i] = fz_int(g, -1, 8), known = 0;
  } else if (!strcmp(op, "Expand")) {  // [k, ...x] with some 1s, k small
    r = x->rank + (int)fz_pick(g, 2);
    if (r > FZ_MAX_RANK) r = FZ_MAX_RANK;
    for (int i = 0; i < r; i++) {
      int xi = i - (r - x->rank);
      int64_t xd = xi >= 0 ? x->d[xi] : 1;
      s[i] = d[i] = xd == 1 ? 1 + fz_pick(g, 3) : (fz_pick(g, 3) ? xd : 1);
      if (xd != 1 && s[i] == 1) d[i] = xd;
      if (fz_pick(g, 8) == 0) s[i] = fz_int(g, 0, 4), known = 0;
    }
  } else if (!strcmp(op, "ConstantOfShape")) {
    r = (int)fz_pick(g, 4);
    for (int i = 0; i < r; i++) s[i] = d[i] = fz_int(g, fz_has(g, FZ_CLASS_EMPTY) ? 0 : 1, 4);
    for (int i = 0; i < r; i++) known &= d[i] >= 0 && d[i] <= 4;
    for (int i = 0; i < r; i++)
      if (d[i] == 0) fz_used(g, FZ_CLASS_EMPTY);
  } else {  // Tile: repeats per dim
    r = x->rank;
    for (int i = 0; i < r; i++) {
      s[i] = fz_int(g, 1, 3);
      known &= s[i] >= 0 && s[i] <= 3;
      d[i] = x->d[i] * (known ? s[i] : 1);
    }
  }
  if (r == 0 && !strcmp(op, "Tile")) return;
  if (strcmp(op, "Reshape")) {
    double numel = !strcmp(op, "ConstantOfShape") ? 1 : (double)fz_numel(x->d, x->rank);
    for (int i = 0; i < r; i++) numel *= s[i] > 1 ? (double)s[i] : 1;
    fz_huge(g, numel);
  }
  const char *shape = fz_const_i64(g, s, r);
  fz_val *y = fz_new(g, FBX_HOST_F32, known ? r : -1, d);
  if (!y) return;
  if (!strcmp(op, "ConstantOfShape")) {
    float val = (float)fz_pick(g, 5) - 2.f;
    int64_t one = 1;
    pbw t = {0};
    pbw_int(&t, 1, one);
    pbw_int(&t, 2, FBX_HOST_F32);
    pbw_bytes(&t, 9, &val, sizeof val);
    // value: a 1-element tensor attribute (AttributeProto.t = 5, type TENSOR = 4)
    pbw n = {0}, at = {0};
    const char *on = y->name;
    char name[32];
    snprintf(name, sizeof name, "n%d_%s", g->n_v, op);
    pbw_str(&n, 1, shape);
    pbw_str(&n, 2, on);
    pbw_str(&n, 3, name);
    pbw_str(&n, 4, op);
    pbw_str(&at, 1, "value");
    pbw_sub(&at, 5, &t);
    pbw_int(&at, 20, 4);
    pbw_sub(&n, 5, &at);
    pbw_sub(&g->b.g, 1, &n);
    fzm_attr rv = {.name = "value", .type = FZM_ATTR_FLOAT, .f = val};
    fz_record(g, op, (const char *[]){shape}, 1, &on, 1, &rv, 1);
    fzm_output(&g->b, on, 0);
    fz_desc(g, " value=%g -> ", (double)val);
    fz_shape_desc(g, y);
    fz_desc(g, "\n");
    return;
  }
  fz_node(g, op, (const char *[]){x->name, shape}, 2, &y, 1, NULL, 0);
}

// Slice with starts/ends/axes/steps inputs: in range, past the ends, or extreme (bigint).
static void fz_slice(fz_gen *g) {
  const fz_val *x = fz_input(g, 1);
  if (!x) return;
  fz_begin_desc(g, "Slice", x);
  int want = 1 + (int)fz_pick(g, (unsigned)x->rank), n = 0;
  int64_t st[FZ_MAX_RANK], en[FZ_MAX_RANK], ax[FZ_MAX_RANK], sp[FZ_MAX_RANK];
  unsigned used = 0;
  for (int i = 0; i < want; i++) {
    int a = (int)fz_pick(g, (unsigned)x->rank);
    if (used & (1u << a)) continue;  // axes must be distinct
    used |= 1u << a;
    ax[n] = a;
    st[n] = fz_int(g, -4, 4);
    en[n] = fz_int(g, -4, 8);
    sp[n] = fz_int(g, -2, 2);
    if (sp[n] == 0) sp[n] = 1;
    n++;
  }
  fz_val *y = fz_new(g, FBX_HOST_F32, -1, NULL);
  if (!y) return;
  const char *ins[5] = {x->name, fz_const_i64(g, st, n), fz_const_i64(g, en, n), fz_const_i64(g, ax, n),
                        fz_const_i64(g, sp, n)};
  fz_node(g, "Slice", ins, 5, &y, 1, NULL, 0);
}

static void fz_transpose(fz_gen *g) {
  const fz_val *x = fz_input(g, 1);
  if (!x) return;
  int64_t perm[FZ_MAX_RANK], d[FZ_MAX_RANK];
  for (int i = 0; i < x->rank; i++) perm[i] = i;
  for (int i = x->rank - 1; i > 0; i--) {  // Fisher-Yates from the description
    int j = (int)fz_pick(g, (unsigned)(i + 1));
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int i = 0; i < x->rank; i++) d[i] = x->d[perm[i]];
  fz_begin_desc(g, "Transpose", x);
  fzm_attr at = {.name = "perm", .type = FZM_ATTR_INTS, .ints = perm, .n = x->rank};
  fz_val *y = fz_new(g, FBX_HOST_F32, x->rank, d);
  if (!y) return;
  fz_node(g, "Transpose", (const char *[]){x->name}, 1, &y, 1, &at, 1);
}

static void fz_concat(fz_gen *g) {
  const fz_val *x = fz_input(g, 1);
  if (!x) return;
  int axis = (int)fz_pick(g, (unsigned)x->rank);
  int64_t d[FZ_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = x->d[i] * (i == axis ? 2 : 1);
  fz_begin_desc(g, "Concat", x);
  fz_desc(g, " axis=%d (with itself)", axis);
  fzm_attr at = {.name = "axis", .type = FZM_ATTR_INT, .i = axis};
  fz_val *y = fz_new(g, FBX_HOST_F32, x->rank, d);
  if (!y) return;
  fz_node(g, "Concat", (const char *[]){x->name, x->name}, 2, &y, 1, &at, 1);
}

// Gather along an axis with constant indices (negative ones too; out of range: invalid class).
static void fz_gather(fz_gen *g) {
  const fz_val *x = fz_input(g, 1);
  if (!x) return;
  int axis = (int)fz_pick(g, (unsigned)x->rank);
  int64_t dim = x->d[axis], idx[4];
  int k = 1 + (int)fz_pick(g, 4);
  for (int i = 0; i < k; i++) {
    idx[i] = (int64_t)fz_pick(g, (unsigned)(2 * dim)) - dim;
    if (fz_has(g, FZ_CLASS_INVALID) && fz_pick(g, 16) == 0) idx[i] = dim + 1, fz_used(g, FZ_CLASS_INVALID);
    if (fz_has(g, FZ_CLASS_BIGINT) && fz_pick(g, 32) == 0) idx[i] = INT64_MIN, fz_used(g, FZ_CLASS_BIGINT);
  }
  fz_begin_desc(g, "Gather", x);
  fz_desc(g, " axis=%d", axis);
  const char *ind = fz_const_i64(g, idx, k);
  int64_t d[FZ_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = i == axis ? k : x->d[i];
  fzm_attr at = {.name = "axis", .type = FZM_ATTR_INT, .i = axis};
  fz_val *y = fz_new(g, FBX_HOST_F32, x->rank, d);
  if (!y) return;
  fz_node(g, "Gather", (const char *[]){x->name, ind}, 2, &y, 1, &at, 1);
}

// Conv / ConvTranspose / pools on a 4-D value: kernel, strides, pads, dilations, groups.
static void fz_conv(fz_gen *g) {
  static const char *ops[] = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
                              "GlobalMaxPool", "LpPool"};
  const char *op = ops[fz_pick(g, 7)];
  const fz_val *x = NULL;
  for (int i = 0; i < g->n_v && !x; i++)
    if (g->v[i].dtype == FBX_HOST_F32 && g->v[i].rank == 4) x = &g->v[i];
  if (!x) return;
  int64_t C = x->d[1], op_pad[2];
  int64_t k[2] = {1 + fz_pick(g, 3), 1 + fz_pick(g, 3)}, s[2] = {1 + fz_pick(g, 2), 1 + fz_pick(g, 2)};
  int64_t dl[2] = {1 + (fz_pick(g, 4) == 0), 1}, pads[4];
  int conv = !strcmp(op, "Conv") || !strcmp(op, "ConvTranspose"), global = !strncmp(op, "Global", 6);
  int invalid = fz_has(g, FZ_CLASS_INVALID) && fz_pick(g, 8) == 0;
  if (invalid) fz_used(g, FZ_CLASS_INVALID);
  for (int i = 0; i < 2 && !invalid; i++) {  // a window wider than the input: invalid class only
    int64_t dim = x->d[2 + i];
    if (k[i] > dim) k[i] = dim;
    if ((k[i] - 1) * dl[i] + 1 > dim) dl[i] = 1;
  }
  for (int i = 0; i < 4; i++) {
    pads[i] = (int64_t)fz_pick(g, 3);
    if (pads[i] >= k[i % 2] && !invalid) pads[i] = k[i % 2] - 1;  // pads < kernel (pools require it)
  }
  static const char *autopad[] = {"NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  const char *ap = autopad[fz_pick(g, 6)];
  if ((!strcmp(op, "ConvTranspose") || dl[0] > 1) && !strncmp(ap, "SAME", 4) && !fz_has(g, FZ_CLASS_SAMEPAD))
    ap = "NOTSET";
  else if ((!strcmp(op, "ConvTranspose") || dl[0] > 1) && !strncmp(ap, "SAME", 4))
    fz_used(g, FZ_CLASS_SAMEPAD);
  int64_t group = conv && fz_pick(g, 3) == 0 ? C : 1, M = conv ? (group > 1 ? C : 1 + fz_pick(g, 4)) : C;
  fz_begin_desc(g, op, x);
  fz_val *y = fz_new(g, FBX_HOST_F32, global ? 4 : -1, (const int64_t[]){x->d[0], M, 1, 1});
  if (!y) return;
  fzm_attr at[8];
  int n_at = 0;
  if (!global) {
    at[n_at++] = (fzm_attr){.name = "kernel_shape", .type = FZM_ATTR_INTS, .ints = k, .n = 2};
    at[n_at++] = (fzm_attr){.name = "strides", .type = FZM_ATTR_INTS, .ints = s, .n = 2};
    if (!strcmp(ap, "NOTSET")) at[n_at++] = (fzm_attr){.name = "pads", .type = FZM_ATTR_INTS, .ints = pads, .n = 4};
    else at[n_at++] = (fzm_attr){.name = "auto_pad", .type = FZM_ATTR_STRING, .s = ap};
    fz_desc(g, " k=%lldx%lld s=%lldx%lld pads=%lld,%lld,%lld,%lld auto_pad=%s", (long long)k[0], (long long)k[1],
            (long long)s[0], (long long)s[1], (long long)pads[0], (long long)pads[1], (long long)pads[2],
            (long long)pads[3], ap);
  }
  if (conv || !strcmp(op, "MaxPool")) {
    at[n_at++] = (fzm_attr){.name = "dilations", .type = FZM_ATTR_INTS, .ints = dl, .n = 2};
    fz_desc(g, " dil=%lld", (long long)dl[0]);
  }
  if (!strcmp(op, "AveragePool") || !strcmp(op, "MaxPool")) {
    at[n_at++] = (fzm_attr){.name = "ceil_mode", .type = FZM_ATTR_INT, .i = fz_pick(g, 2)};
    if (op[0] == 'A') at[n_at++] = (fzm_attr){.name = "count_include_pad", .type = FZM_ATTR_INT, .i = fz_pick(g, 2)};
  }
  if (!strcmp(op, "ConvTranspose")) {
    op_pad[0] = (int64_t)fz_pick(g, 2) * (s[0] - 1);
    op_pad[1] = invalid ? s[1] : 0;  // output_padding >= stride: invalid
    at[n_at++] = (fzm_attr){.name = "output_padding", .type = FZM_ATTR_INTS, .ints = op_pad, .n = 2};
  }
  const char *ins[3] = {x->name, NULL, NULL};
  int n_in = 1;
  if (conv) {
    at[n_at++] = (fzm_attr){.name = "group", .type = FZM_ATTR_INT, .i = group};
    fz_desc(g, " group=%lld M=%lld", (long long)group, (long long)M);
    int64_t wd[4] = {M, C / group, k[0], k[1]};
    if (op[4] == 'T') wd[0] = C, wd[1] = M / group;  // ConvTranspose: [C, M/group, kh, kw]
    ins[n_in++] = fz_const_f32(g, 4, wd, -1.f, 1.f);
    if (fz_pick(g, 2)) ins[n_in++] = fz_const_f32(g, 1, (const int64_t[]){M}, -1.f, 1.f);
  }
  fz_node(g, op, ins, n_in, &y, 1, at, n_at);
}

// BatchNormalization / InstanceNormalization / LayerNormalization with constant parameters.
static void fz_norm(fz_gen *g) {
  static const char *ops[] = {"BatchNormalization", "InstanceNormalization", "LayerNormalization"};
  const char *op = ops[fz_pick(g, g->opset >= 17 ? 3 : 2)];
  const fz_val *x = fz_input(g, op[0] == 'L' ? 1 : 3);
  if (!x) return;
  int64_t C = x->rank >= 2 ? x->d[1] : 1;
  float eps = fz_pick(g, 2) ? 1e-5f : 1e-2f;
  if (fz_has(g, FZ_CLASS_NAN) && fz_pick(g, 16) == 0) eps = NAN, fz_used(g, FZ_CLASS_NAN);
  int bad_len = fz_has(g, FZ_CLASS_INVALID) && fz_pick(g, 8) == 0;
  if (bad_len) fz_used(g, FZ_CLASS_INVALID);
  fz_begin_desc(g, op, x);
  fz_desc(g, " eps=%g%s", (double)eps, bad_len ? " (scale of the wrong length)" : "");
  fzm_attr at[2] = {{.name = "epsilon", .type = FZM_ATTR_FLOAT, .f = eps}};
  int n_at = 1;
  const char *ins[5] = {x->name};
  int n_in = 1;
  if (op[0] == 'L') {
    int64_t axis = (int64_t)fz_pick(g, (unsigned)x->rank);
    at[n_at++] = (fzm_attr){.name = "axis", .type = FZM_ATTR_INT, .i = axis};
    ins[n_in++] = fz_const_f32(g, x->rank - (int)axis, x->d + axis, 0.5f, 1.5f);
    ins[n_in++] = fz_const_f32(g, x->rank - (int)axis, x->d + axis, -1.f, 1.f);
  } else {
    int64_t len = C + bad_len;
    ins[n_in++] = fz_const_f32(g, 1, &len, 0.5f, 1.5f);
    ins[n_in++] = fz_const_f32(g, 1, &len, -1.f, 1.f);
    if (op[0] == 'B') {
      ins[n_in++] = fz_const_f32(g, 1, &len, -1.f, 1.f);
      ins[n_in++] = fz_const_f32(g, 1, &len, 0.1f, 2.f);  // variance > 0
    }
  }
  fz_val *y = fz_new(g, FBX_HOST_F32, x->rank, x->d);
  if (!y) return;
  fz_node(g, op, ins, n_in, &y, 1, at, n_at);
}

// Clip with scalar bounds (min > max allowed: the spec says the result is max); Cast round trip.
static void fz_clip_cast(fz_gen *g) {
  int clip = (int)fz_pick(g, 2);
  const fz_val *x = clip ? fz_input(g, -1) : fz_input_exact(g, -1);
  if (!x) return;
  if (clip) {
    float lo = (float)fz_pick(g, 5) - 2.f, hi = (float)fz_pick(g, 5) - 2.f;
    if (fz_has(g, FZ_CLASS_NAN) && fz_pick(g, 16) == 0) lo = NAN, fz_used(g, FZ_CLASS_NAN);
    fz_begin_desc(g, "Clip", x);
    fz_desc(g, " min=%g max=%g", (double)lo, (double)hi);
    const char *a = fz_const(g, FBX_HOST_F32, 0, NULL, &lo, sizeof lo), *b = fz_const(g, FBX_HOST_F32, 0, NULL, &hi, sizeof hi);
    fz_val *y = fz_new(g, FBX_HOST_F32, x->rank, x->d);
    if (!y) return;
    fz_node(g, "Clip", (const char *[]){x->name, a, b}, 3, &y, 1, NULL, 0);
    return;
  }
  // float -> T -> float; float -> integer only where the values are in range (NaN/overflow
  // to an integer is undefined by the spec, so the two engines may rightly differ there).
  static const int safe[] = {FBX_HOST_F16, FBX_HOST_F64, FBX_HOST_BOOL};
  static const int ints[] = {FBX_HOST_I32, FBX_HOST_I64};
  int to = fz_has(g, FZ_CLASS_NAN) ? safe[fz_pick(g, 3)] : (fz_pick(g, 2) ? safe[fz_pick(g, 3)] : ints[fz_pick(g, 2)]);
  fz_begin_desc(g, "Cast", x);
  fz_desc(g, " to=%d", to);
  fzm_attr at = {.name = "to", .type = FZM_ATTR_INT, .i = to};
  fz_val *y = fz_new(g, to, x->rank, x->d);
  if (!y) return;
  fz_node(g, "Cast", (const char *[]){x->name}, 1, &y, 1, &at, 1);
  fzm_attr back = {.name = "to", .type = FZM_ATTR_INT, .i = FBX_HOST_F32};
  fz_val *z = fz_new(g, FBX_HOST_F32, x->rank, x->d);
  if (!z) return;
  fz_desc(g, "  Cast(%s) to=float", y->name);
  fz_node(g, "Cast", (const char *[]){y->name}, 1, &z, 1, &back, 1);
}

// CumSum / Pad / Trilu / TopK / Flatten: the remaining shapes and index arithmetic.
static void fz_misc(fz_gen *g) {
  static const char *ops[] = {"CumSum", "Pad", "Trilu", "TopK", "Flatten", "Unsqueeze"};
  const char *op = ops[fz_pick(g, 6)];
  int rank = !strcmp(op, "Trilu") ? 2 : 1;
  const fz_val *x = !strcmp(op, "TopK") ? fz_input_exact(g, rank) : fz_input(g, rank);
  if (!x) return;
  fz_begin_desc(g, op, x);
  int axis = (int)fz_pick(g, (unsigned)x->rank);
  if (!strcmp(op, "CumSum")) {
    int64_t a = axis;
    const char *ax = fz_const(g, FBX_HOST_I64, 0, NULL, &a, sizeof a);
    fzm_attr at[2] = {{.name = "exclusive", .type = FZM_ATTR_INT, .i = fz_pick(g, 2)},
                      {.name = "reverse", .type = FZM_ATTR_INT, .i = fz_pick(g, 2)}};
    fz_val *y = fz_new(g, FBX_HOST_F32, x->rank, x->d);
    if (!y) return;
    fz_node(g, op, (const char *[]){x->name, ax}, 2, &y, 1, at, 2);
  } else if (!strcmp(op, "Pad")) {
    static const char *modes[] = {"constant", "reflect", "edge"};
    const char *mode = modes[fz_pick(g, 3)];
    int64_t pads[2 * FZ_MAX_RANK], d[FZ_MAX_RANK];
    for (int i = 0; i < 2 * x->rank; i++) {
      pads[i] = fz_int(g, -1, 2);
      if (pads[i] > (1 << 16)) fz_huge(g, (double)pads[i] * (double)fz_numel(x->d, x->rank));
      int64_t dim = x->d[i % x->rank];
      if (!strcmp(mode, "reflect") && pads[i] >= dim) {
        if (!fz_has(g, FZ_CLASS_INVALID)) pads[i] = dim - 1;
        else fz_used(g, FZ_CLASS_INVALID);
      }
      if (pads[i] < -dim + 1 && pads[i] > -4) pads[i] = 0;
    }
    for (int i = 0; i < x->rank && !fz_has(g, FZ_CLASS_EMPTY); i++) {  // no dim cropped to 0
      if (fz_sum3(x->d[i], pads[i], pads[i + x->rank]) <= 0 && pads[i] < 0) pads[i] = 0;
      if (fz_sum3(x->d[i], pads[i], pads[i + x->rank]) <= 0 && pads[i + x->rank] < 0) pads[i + x->rank] = 0;
    }
    int known = 1;
    for (int i = 0; i < x->rank; i++) {
      d[i] = fz_sum3(x->d[i], pads[i], pads[i + x->rank]);
      known &= d[i] >= 0 && d[i] < 64;
      if (d[i] <= 0) fz_used(g, FZ_CLASS_EMPTY);
      // ORT 1.30 itself crashes (SIGSEGV, session creation) on a reflect Pad of an empty dim
      if (!strcmp(mode, "reflect") && x->d[i] == 0) g->m->ort_unsafe = 1;
    }
    fzm_attr at = {.name = "mode", .type = FZM_ATTR_STRING, .s = mode};
    fz_desc(g, " mode=%s", mode);
    const char *p = fz_const_i64(g, pads, 2 * x->rank);
    fz_val *y = fz_new(g, FBX_HOST_F32, known ? x->rank : -1, d);
    if (!y) return;
    fz_node(g, op, (const char *[]){x->name, p}, 2, &y, 1, &at, 1);
  } else if (!strcmp(op, "Trilu")) {
    int64_t k = fz_int(g, -3, 3);
    const char *kk = fz_const(g, FBX_HOST_I64, 0, NULL, &k, sizeof k);
    fzm_attr at = {.name = "upper", .type = FZM_ATTR_INT, .i = fz_pick(g, 2)};
    fz_desc(g, " k=%lld", (long long)k);
    fz_val *y = fz_new(g, FBX_HOST_F32, x->rank, x->d);
    if (!y) return;
    fz_node(g, op, (const char *[]){x->name, kk}, 2, &y, 1, &at, 1);
  } else if (!strcmp(op, "TopK")) {
    int64_t k = 1 + fz_pick(g, (unsigned)x->d[axis]), d[FZ_MAX_RANK];
    for (int i = 0; i < x->rank; i++) d[i] = i == axis ? k : x->d[i];
    const char *kk = fz_const(g, FBX_HOST_I64, 1, (const int64_t[]){1}, &k, sizeof k);
    fzm_attr at[3] = {{.name = "axis", .type = FZM_ATTR_INT, .i = axis},
                      {.name = "largest", .type = FZM_ATTR_INT, .i = fz_pick(g, 2)},
                      {.name = "sorted", .type = FZM_ATTR_INT, .i = 1}};
    fz_desc(g, " k=%lld axis=%d", (long long)k, axis);
    fz_val *ys[2] = {fz_new(g, FBX_HOST_F32, x->rank, d), fz_new(g, FBX_HOST_I64, x->rank, d)};
    if (!ys[0] || !ys[1]) return;
    fz_node(g, op, (const char *[]){x->name, kk}, 2, ys, 2, at, 3);
  } else if (!strcmp(op, "Flatten")) {
    int64_t a = 1, b = 1;
    for (int i = 0; i < x->rank; i++) *(i < axis ? &a : &b) *= x->d[i];
    fzm_attr at = {.name = "axis", .type = FZM_ATTR_INT, .i = axis};
    fz_desc(g, " axis=%d", axis);
    fz_val *y = fz_new(g, FBX_HOST_F32, 2, (const int64_t[]){a, b});
    if (!y) return;
    fz_node(g, op, (const char *[]){x->name}, 1, &y, 1, &at, 1);
  } else {  // Unsqueeze at one axis
    if (x->rank >= FZ_MAX_RANK) return;
    int64_t a = (int64_t)fz_pick(g, (unsigned)(x->rank + 1)), d[FZ_MAX_RANK];
    for (int i = 0, j = 0; i <= x->rank; i++) d[i] = i == a ? 1 : x->d[j++];
    const char *ax = fz_const_i64(g, &a, 1);
    fz_val *y = fz_new(g, FBX_HOST_F32, x->rank + 1, d);
    if (!y) return;
    fz_node(g, op, (const char *[]){x->name, ax}, 2, &y, 1, NULL, 0);
  }
}

static const fz_recipe fz_recipes[] = {fz_unary, fz_unary,  fz_binary,    fz_binary, fz_reduce,
                                       fz_softmax, fz_argmax, fz_matmul,   fz_shape_op, fz_slice,
                                       fz_transpose, fz_concat, fz_gather, fz_conv,   fz_conv,
                                       fz_norm,  fz_clip_cast, fz_misc};

// ---- input values ----

static uint64_t fz_rng(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static void fz_fill(fz_gen *g, fbx_host_tensor *t, uint64_t seed, unsigned style) {
  // No finite value near FLT_MAX (there were +-3.4e38): 3.4e38 - 3.4e38 + x cancels in any
  // sum, so every summation order gives a different x, and a float kernel's squares overflow
  // (a LayerNorm variance: Fusebox NaN, ORT, accumulating in double, some finite value): the
  // answer is a rounding accident either way. inf covers overflow; 88.5 and -104 make exp
  // overflow and go subnormal.
  static const float specials[] = {NAN, INFINITY, -INFINITY, 0.f, -0.f, 1e-40f, 88.5f, -104.f};
  float *x = t->data;
  size_t n = fbx_host_tensor_numel(t);
  uint64_t s = seed | 1;
  // style: low bits = range; the NaN class adds specials at a density of (style >> 4) / 64
  float range = (float)(1 + (style & 3));
  unsigned density = fz_has(g, FZ_CLASS_NAN) ? (style >> 4) & 15 : 0;
  if (density && n) fz_used(g, FZ_CLASS_NAN);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = fz_rng(&s);
    if (density && (r & 63) < density) x[i] = specials[(r >> 6) % (sizeof specials / sizeof specials[0])];
    else x[i] = range * ((float)((r >> 40) & 0xffffff) / 8388608.f - 1.f);
  }
}

// ---- the whole model ----

unsigned fz_classes_parse(const char *s, const char **bad) {
  unsigned c = 0;
  if (bad) *bad = NULL;
  while (s && *s) {
    size_t k = strcspn(s, ",");
    if (k == 3 && !strncmp(s, "nan", 3)) c |= FZ_CLASS_NAN;
    else if (k == 6 && !strncmp(s, "bigint", 6)) c |= FZ_CLASS_BIGINT;
    else if (k == 7 && !strncmp(s, "invalid", 7)) c |= FZ_CLASS_INVALID;
    else if (k == 7 && !strncmp(s, "samepad", 7)) c |= FZ_CLASS_SAMEPAD;
    else if (k == 5 && !strncmp(s, "empty", 5)) c |= FZ_CLASS_EMPTY;
    else if (k == 3 && !strncmp(s, "all", 3)) c |= FZ_CLASS_ALL;
    else if (k && bad && !*bad) *bad = s;
    s += k + (s[k] == ',');
  }
  return c;
}

int fz_model_gen(const uint8_t *data, size_t n, unsigned classes, fz_model *m) {
  memset(m, 0, sizeof *m);
  fz_gen g;
  memset(&g, 0, sizeof g);
  g.p = data;
  g.n = n;
  g.classes = classes;
  g.desc = m->desc;
  g.desc_cap = sizeof m->desc;
  g.m = m;
  m->recorded = 1;
  fzm_begin(&g.b);
  uint64_t seed = 0;
  for (int i = 0; i < 8; i++) seed = seed << 8 | fz_u8(&g);
  g.opset = fz_pick(&g, 4) == 0 ? 13 : 17;
  unsigned style = fz_u8(&g);
  m->n_inputs = 1 + fz_pick(&g, FZ_MAX_INPUTS);
  fz_desc(&g, "opset %d, classes %u, inputs:", g.opset, classes);
  for (size_t k = 0; k < m->n_inputs; k++) {
    int rank = (int)fz_pick(&g, 5);
    int64_t d[FZ_MAX_RANK];
    for (int i = 0; i < rank; i++) d[i] = rank == 4 && i == 0 ? 1 : 1 + fz_pick(&g, rank == 4 ? 6 : 5);
    fz_val *v = fz_new(&g, FBX_HOST_F32, rank, d);
    g.n_inputs++;
    if (fbx_host_tensor_alloc(&m->inputs[k], v->name, FBX_HOST_F32, rank, d)) goto oom;
    fz_fill(&g, &m->inputs[k], seed + k * 0x9e3779b97f4a7c15ull, style);
    fzm_input(&g.b, v->name, FBX_HOST_F32, rank, d);
    fz_desc(&g, " ");
    fz_shape_desc(&g, v);
  }
  fz_desc(&g, " (values: range %u, specials %u/64)\n", 1 + (style & 3), fz_has(&g, FZ_CLASS_NAN) ? (style >> 4) & 15 : 0);
  for (int k = 0; k < FZ_MAX_NODES && g.i < g.n; k++) {
    int before = g.n_v;
    fz_recipes[fz_pick(&g, sizeof fz_recipes / sizeof fz_recipes[0])](&g);
    // keep every value small: a value over the cap (or of unknown size) is not reused
    for (int i = before; i < g.n_v; i++)
      if (g.v[i].rank >= 0 && fz_numel(g.v[i].d, g.v[i].rank) > FZ_MAX_NUMEL) g.v[i].rank = -1;
  }
  if (g.n_v == (int)m->n_inputs) {  // no node: the graph still needs one
    fz_val *y = fz_new(&g, FBX_HOST_F32, g.v[0].rank, g.v[0].d);
    fz_begin_desc(&g, "Relu", &g.v[0]);
    fz_node(&g, "Relu", (const char *[]){g.v[0].name}, 1, &y, 1, NULL, 0);
  }
  fzm_end(&g.b, g.opset, &m->bytes, &m->n_bytes);
  if (!m->bytes) goto oom;
  return 0;
oom:
  fz_model_free(m);
  return -1;
}

void fz_model_free(fz_model *m) {
  for (size_t i = 0; i < m->n_inputs; i++) fbx_host_tensor_free(&m->inputs[i]);
  for (int i = 0; i < m->n_consts; i++) fbx_host_tensor_free(&m->consts[i]);
  free(m->bytes);
  memset(m, 0, sizeof *m);
}
