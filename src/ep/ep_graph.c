/* OrtGraph -> fbx_onnx_graph. See ep_graph.h. */
#include "ep_graph.h"

#include <string.h>

#include "../base/alloc.h"
#include "../onnx/onnx_rank.h"

/* ---------------------------------------------------------------- builder -- */

typedef struct builder {
  fbx_ep_graph *d;
  fbx_arena *a;
  int cap_values;              /* upper bound computed up front */
  int *slots; unsigned mask;   /* name hash -> value index + 1 (0 = empty) */
  const char **op_domains; int64_t *op_versions; size_t n_opsets;
  bool body;                   /* a body graph: its outer values become graph inputs */
} builder;

static fbx_status *describe(const OrtGraph *graph, const OrtNode *fused, bool body, fbx_ep_graph *d);

static unsigned hash_str(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

static int value_find(const builder *b, const char *name) {
  for (unsigned i = hash_str(name) & b->mask;; i = (i + 1) & b->mask) {
    int v = b->slots[i];
    if (!v) return -1;
    if (strcmp(b->d->g.values[v - 1].name, name) == 0) return v - 1;
  }
}

static void value_insert(builder *b, int idx) {
  unsigned i = hash_str(b->d->g.values[idx].name) & b->mask;
  while (b->slots[i]) i = (i + 1) & b->mask;
  b->slots[i] = idx + 1;
}

/* Element type + dims of an OrtValue tensor (initializers, tensor attributes). */
static fbx_status *read_tensor(builder *b, const OrtValue *v, fbx_onnx_tensor *t) {
  memset(t, 0, sizeof *t);
  int et = 0;
  size_t rank = 0;
  FBX_TRY(fbx_ep_value_type_shape(v, &et, t->dims, &rank, "reading a tensor's shape"));
  t->onnx_type = et;
  t->dtype = fbx_dtype_is_valid(et) ? (fbx_dtype)et : FBX_DTYPE_UNDEFINED;
  if (rank > FBX_MAX_RANK) { /* too big a rank: keep it unreadable, the registry declines */
    t->rank = (int)rank;
    memset(t->dims, 0, sizeof t->dims);
    return NULL;
  }
  t->rank = (int)rank;
  if (t->dtype == FBX_DTYPE_UNDEFINED) return NULL; /* strings, bf16...: no data */
  for (size_t d = 0; d < rank; d++) {
    if (t->dims[d] == 0) { /* empty (e.g. Resize's roi ""): readable, with no bytes; ORT may give no pointer */
      static const int64_t fbx__empty_data = 0;
      t->data = &fbx__empty_data;
      t->nbytes = 0;
      return NULL;
    }
  }
  const void *p = NULL;
  size_t nb = 0;
  OrtStatus *os = FBX_ORT->GetTensorData(v, &p);
  if (!os) os = FBX_ORT->GetTensorSizeInBytes(v, &nb);
  if (os) { /* unreadable data is not an error: the registry sees data == NULL */
    FBX_ORT->ReleaseStatus(os);
    return NULL;
  }
  t->data = p;
  t->nbytes = nb;
  return NULL;
}

/* Type and shape of a value from its OrtValueInfo. */
static fbx_status *fill_type(builder *b, const OrtValueInfo *vi, fbx_onnx_value *v) {
  v->kind = FBX_ONNX_VALUE_OTHER;
  v->rank = -1;
  const OrtTypeInfo *ti = NULL;
  OrtStatus *os = FBX_ORT->GetValueInfoTypeInfo(vi, &ti);
  if (os || !ti) { /* no type information: leave it OTHER */
    if (os) FBX_ORT->ReleaseStatus(os);
    return NULL;
  }
  enum ONNXType ot = ONNX_TYPE_UNKNOWN;
  FBX_ORT_TRY(FBX_ORT->GetOnnxTypeFromTypeInfo(ti, &ot));
  if (ot != ONNX_TYPE_TENSOR) return NULL;
  const OrtTensorTypeAndShapeInfo *tsi = NULL;
  FBX_ORT_TRY(FBX_ORT->CastTypeInfoToTensorInfo(ti, &tsi));
  if (!tsi) return NULL;
  ONNXTensorElementDataType et = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  FBX_ORT_TRY(FBX_ORT->GetTensorElementType(tsi, &et));
  v->kind = FBX_ONNX_VALUE_TENSOR;
  v->onnx_type = (int)et;
  v->dtype = fbx_dtype_is_valid((int)et) ? (fbx_dtype)et : FBX_DTYPE_UNDEFINED;
  if (!FBX_ORT->TensorTypeAndShape_HasShape(tsi)) return NULL; /* rank unknown */
  size_t rank = 0;
  FBX_ORT_TRY(FBX_ORT->GetDimensionsCount(tsi, &rank));
  if (rank > FBX_MAX_RANK) { /* beyond what we represent: declined as a non-tensor */
    v->kind = FBX_ONNX_VALUE_OTHER;
    return NULL;
  }
  const char *syms[FBX_MAX_RANK] = {0};
  FBX_ORT_TRY(FBX_ORT->GetDimensions(tsi, v->dims, rank));
  FBX_ORT_TRY(FBX_ORT->GetSymbolicDimensions(tsi, syms, rank));
  v->rank = (int)rank;
  for (size_t i = 0; i < rank; i++) {
    if (v->dims[i] < 0) v->dims[i] = -1;
    v->dim_sym[i] = (syms[i] && syms[i][0]) ? fbx_arena_strdup(b->a, syms[i]) : NULL;
  }
  return NULL;
}

/* Index of the value named by vi, adding it on first sight. NULL vi -> -1. */
static fbx_status *value_get(builder *b, const OrtValueInfo *vi, int *idx) {
  *idx = -1;
  if (!vi) return NULL;
  const char *name = NULL;
  FBX_ORT_TRY(FBX_ORT->GetValueInfoName(vi, &name));
  if (!name || !name[0]) return NULL; /* "" names an absent optional value */
  int found = value_find(b, name);
  if (found >= 0) {
    *idx = found;
    return NULL;
  }
  fbx_onnx_graph *g = &b->d->g;
  if (g->n_values >= b->cap_values) return FBX_ERR("ep graph: value table overflow (%d)", b->cap_values);
  int i = g->n_values++;
  fbx_onnx_value *v = &g->values[i];
  v->name = fbx_arena_strdup(b->a, name);
  if (!v->name) return FBX_ERR_OOM();
  FBX_TRY(fill_type(b, vi, v));
  bool outer = false;
  FBX_ORT_TRY(FBX_ORT->ValueInfo_IsFromOuterScope(vi, &outer));
  v->is_outer = outer;
  bool is_const = false;
  FBX_ORT_TRY(FBX_ORT->ValueInfo_IsConstantInitializer(vi, &is_const));
  if (is_const) {
    v->is_initializer = true;
    const OrtValue *ov = NULL;
    FBX_ORT_TRY(FBX_ORT->ValueInfo_GetInitializerValue(vi, &ov));
    if (ov) {
      fbx_onnx_tensor *t = fbx_arena_alloc(b->a, sizeof *t);
      if (!t) return FBX_ERR_OOM();
      FBX_TRY(read_tensor(b, ov, t));
      if (t->data) {
        v->init = t;
        b->d->init_bytes += (int64_t)t->nbytes;
        b->d->n_init++;
      }
    }
  }
  value_insert(b, i);
  *idx = i;
  return NULL;
}

/* ------------------------------------------------------------- attributes -- */

/* ReadOpAttr into arena memory, growing once if the first guess is short. */
static fbx_status *read_attr_bytes(builder *b, const OrtOpAttr *at, OrtOpAttrType ty, void **data,
                                   size_t *len) {
  char buf[256];
  size_t need = 0;
  OrtStatus *os = FBX_ORT->ReadOpAttr(at, ty, buf, sizeof buf, &need);
  if (!os) {
    *data = fbx_arena_alloc(b->a, need + 1);
    if (!*data) return FBX_ERR_OOM();
    memcpy(*data, buf, need);
    *len = need;
    return NULL;
  }
  FBX_ORT->ReleaseStatus(os);
  *data = fbx_arena_alloc(b->a, need + 1);
  if (!*data) return FBX_ERR_OOM();
  FBX_ORT_TRY(FBX_ORT->ReadOpAttr(at, ty, *data, need, &need));
  *len = need;
  return NULL;
}

static fbx_status *own_value(fbx_ep_graph *d, OrtValue *v) {
  if (d->n_owned == d->cap_owned) {
    int cap = d->cap_owned ? 2 * d->cap_owned : 8;
    OrtValue **p = fbx_realloc(d->owned, (size_t)cap * sizeof *p);
    if (!p) {
      FBX_ORT->ReleaseValue(v);
      return FBX_ERR_OOM();
    }
    d->owned = p;
    d->cap_owned = cap;
  }
  d->owned[d->n_owned++] = v;
  return NULL;
}

static fbx_status *read_attr(builder *b, const OrtOpAttr *at, fbx_onnx_attr *out, bool *is_graph) {
  const char *name = NULL;
  OrtOpAttrType ty = ORT_OP_ATTR_UNDEFINED;
  FBX_ORT_TRY(FBX_ORT->OpAttr_GetName(at, &name));
  FBX_ORT_TRY(FBX_ORT->OpAttr_GetType(at, &ty));
  out->name = fbx_arena_strdup(b->a, name);
  void *data = NULL;
  size_t len = 0;
  switch (ty) {
    case ORT_OP_ATTR_INT: {
      size_t n = 0;
      FBX_ORT_TRY(FBX_ORT->ReadOpAttr(at, ty, &out->i, sizeof out->i, &n));
      out->type = FBX_ONNX_ATTR_INT;
      break;
    }
    case ORT_OP_ATTR_FLOAT: {
      size_t n = 0;
      FBX_ORT_TRY(FBX_ORT->ReadOpAttr(at, ty, &out->f, sizeof out->f, &n));
      out->type = FBX_ONNX_ATTR_FLOAT;
      break;
    }
    case ORT_OP_ATTR_STRING:
      FBX_TRY(read_attr_bytes(b, at, ty, &data, &len));
      ((char *)data)[len] = '\0';
      out->s = data;
      out->type = FBX_ONNX_ATTR_STRING;
      break;
    case ORT_OP_ATTR_INTS:
      FBX_TRY(read_attr_bytes(b, at, ty, &data, &len));
      out->ints = data;
      out->n_ints = (int)(len / sizeof(int64_t));
      out->type = FBX_ONNX_ATTR_INTS;
      break;
    case ORT_OP_ATTR_FLOATS:
      FBX_TRY(read_attr_bytes(b, at, ty, &data, &len));
      out->floats = data;
      out->n_floats = (int)(len / sizeof(float));
      out->type = FBX_ONNX_ATTR_FLOATS;
      break;
    case ORT_OP_ATTR_STRINGS: /* ORT writes them NUL-terminated, one after the other */
      FBX_TRY(read_attr_bytes(b, at, ty, &data, &len));
      ((char *)data)[len] = '\0';
      out->strs = data;
      out->n_strs = 0;
      for (size_t k = 0; k < len; k++) out->n_strs += ((char *)data)[k] == '\0';
      if (len && ((char *)data)[len - 1] != '\0') out->n_strs++; /* an unterminated last one */
      out->type = FBX_ONNX_ATTR_STRINGS;
      break;
    case ORT_OP_ATTR_TENSOR: {
      OrtValue *tv = NULL;
      FBX_ORT_TRY(FBX_ORT->OpAttr_GetTensorAttributeAsOrtValue(at, &tv));
      out->type = FBX_ONNX_ATTR_TENSOR;
      if (tv) {
        FBX_TRY(own_value(b->d, tv));
        FBX_TRY(read_tensor(b, tv, &out->t));
      }
      break;
    }
    case ORT_OP_ATTR_GRAPH:
      out->type = FBX_ONNX_ATTR_GRAPH;
      *is_graph = true;
      break;
    default:
      out->type = FBX_ONNX_ATTR_OTHER;
      break;
  }
  return NULL;
}

/* ------------------------------------------------------------------ nodes -- */

static int opset_of(const builder *b, const char *domain, int since_version) {
  for (size_t i = 0; i < b->n_opsets; i++) {
    const char *d = b->op_domains[i] ? b->op_domains[i] : "";
    if (strcmp(d, "ai.onnx") == 0) d = "";
    if (strcmp(d, domain) == 0) return (int)b->op_versions[i];
  }
  return since_version;
}

/* Body graphs of node on (ns of them) described into b->d->subs, and the
 * node's implicit inputs (the outer values they read). */
static fbx_status *read_bodies(builder *b, const OrtNode *on, size_t ns, fbx_onnx_node *n) {
  fbx_ep_graph *d = b->d;
  size_t nimp = 0;
  FBX_ORT_TRY(FBX_ORT->Node_GetNumImplicitInputs(on, &nimp));
  const OrtGraph **sg = fbx_arena_alloc(b->a, (ns + 1) * sizeof *sg);
  const char **an = fbx_arena_alloc(b->a, (ns + 1) * sizeof *an);
  const char **names = fbx_arena_alloc(b->a, (ns + 1) * sizeof *names);
  const fbx_onnx_graph **gs = fbx_arena_alloc(b->a, (ns + 1) * sizeof *gs);
  const OrtValueInfo **vis = fbx_arena_alloc(b->a, (nimp + 1) * sizeof *vis);
  int *imp = fbx_arena_alloc(b->a, (nimp + 1) * sizeof *imp);
  if (!sg || !an || !names || !gs || !vis || !imp) return FBX_ERR_OOM();
  if (nimp) FBX_ORT_TRY(FBX_ORT->Node_GetImplicitInputs(on, vis, nimp));
  int k = 0;
  for (size_t i = 0; i < nimp; i++) {
    int v = -1;
    FBX_TRY(value_get(b, vis[i], &v));
    if (v >= 0) imp[k++] = v;
  }
  n->implicit = imp;
  n->n_implicit = k;
  FBX_ORT_TRY(FBX_ORT->Node_GetSubgraphs(on, sg, ns, an));
  for (size_t i = 0; i < ns; i++) {
    if (d->n_subs == d->cap_subs) {
      int cap = d->cap_subs ? 2 * d->cap_subs : 4;
      fbx_ep_graph **p = fbx_realloc(d->subs, (size_t)cap * sizeof *p);
      if (!p) return FBX_ERR_OOM();
      d->subs = p;
      d->cap_subs = cap;
    }
    fbx_ep_graph *sd = fbx_calloc(1, sizeof *sd);
    if (!sd) return FBX_ERR_OOM();
    fbx_status *st = sg[i] ? describe(sg[i], NULL, true, sd) : FBX_ERR("ep graph: node '%s' has a NULL body", n->name);
    if (st) {
      fbx_free(sd);
      return st;
    }
    d->subs[d->n_subs++] = sd;
    FBX_TRY(fbx_onnx_graph_infer_ranks(&sd->g)); /* as its own GetCapability would see it */
    gs[i] = &sd->g;
    names[i] = fbx_arena_strdup(b->a, an[i] ? an[i] : "");
    if (!names[i]) return FBX_ERR_OOM();
  }
  n->subgraphs = gs;
  n->subgraph_names = names;
  n->n_subgraphs = (int)ns;
  return NULL;
}

static fbx_status *read_node(builder *b, const OrtNode *on, fbx_onnx_node *n) {
  const char *s = NULL;
  FBX_ORT_TRY(FBX_ORT->Node_GetName(on, &s));
  n->name = fbx_arena_strdup(b->a, s);
  FBX_ORT_TRY(FBX_ORT->Node_GetOperatorType(on, &s));
  n->op_type = fbx_arena_strdup(b->a, s);
  FBX_ORT_TRY(FBX_ORT->Node_GetDomain(on, &s));
  n->domain = fbx_arena_strdup(b->a, (s && strcmp(s, "ai.onnx") != 0) ? s : "");
  int since = 0;
  FBX_ORT_TRY(FBX_ORT->Node_GetSinceVersion(on, &since));
  n->since_version = since;
  n->opset = opset_of(b, n->domain, since);

  size_t ni = 0, no = 0, na = 0, ns = 0;
  FBX_ORT_TRY(FBX_ORT->Node_GetNumInputs(on, &ni));
  FBX_ORT_TRY(FBX_ORT->Node_GetNumOutputs(on, &no));
  FBX_ORT_TRY(FBX_ORT->Node_GetNumAttributes(on, &na));
  FBX_ORT_TRY(FBX_ORT->Node_GetNumSubgraphs(on, &ns));
  size_t nmax = ni > no ? ni : no;
  if (na > nmax) nmax = na;
  const void **tmp = fbx_malloc((nmax ? nmax : 1) * sizeof *tmp);
  if (!tmp) return FBX_ERR_OOM();
  fbx_status *st = NULL;
  int *ins = fbx_arena_alloc(b->a, (ni ? ni : 1) * sizeof(int));
  int *outs = fbx_arena_alloc(b->a, (no ? no : 1) * sizeof(int));
  fbx_onnx_attr *attrs = fbx_arena_alloc(b->a, (na ? na : 1) * sizeof *attrs);
  if (!ins || !outs || !attrs || !n->name || !n->op_type || !n->domain) {
    st = FBX_ERR_OOM();
    goto done;
  }
  OrtStatus *os = FBX_ORT->Node_GetInputs(on, (const OrtValueInfo **)tmp, ni);
  if (os) { st = fbx_ep_status_from_ort(os, "Node_GetInputs"); goto done; }
  for (size_t i = 0; i < ni && !st; i++) st = value_get(b, tmp[i], &ins[i]);
  if (st) goto done;
  os = FBX_ORT->Node_GetOutputs(on, (const OrtValueInfo **)tmp, no);
  if (os) { st = fbx_ep_status_from_ort(os, "Node_GetOutputs"); goto done; }
  for (size_t i = 0; i < no && !st; i++) st = value_get(b, tmp[i], &outs[i]);
  if (st) goto done;
  os = FBX_ORT->Node_GetAttributes(on, (const OrtOpAttr **)tmp, na);
  if (os) { st = fbx_ep_status_from_ort(os, "Node_GetAttributes"); goto done; }
  bool is_graph = false;
  for (size_t i = 0; i < na && !st; i++) st = read_attr(b, tmp[i], &attrs[i], &is_graph);
  if (st) goto done;
  n->n_inputs = (int)ni; n->inputs = ins;
  n->n_outputs = (int)no; n->outputs = outs;
  n->n_attrs = (int)na; n->attrs = attrs;
  n->has_subgraph = is_graph || ns > 0;
  if (ns) st = read_bodies(b, on, ns, n);
done:
  fbx_free(tmp);
  return st;
}

/* ------------------------------------------------------------ graph-level -- */

/* Marks and lists graph inputs/outputs. With keep_consts, an input that is a
 * constant initializer stays a runtime input (ORT passes it to Compute). */
static fbx_status *collect_io(builder *b, const OrtValueInfo **vis, size_t n, bool input, bool keep_consts,
                              int **out_idx, int *out_n) {
  int *idx = fbx_arena_alloc(b->a, (n ? n : 1) * sizeof(int));
  if (!idx) return FBX_ERR_OOM();
  int k = 0;
  for (size_t i = 0; i < n; i++) {
    int v = -1;
    FBX_TRY(value_get(b, vis[i], &v));
    if (v < 0) continue;
    fbx_onnx_value *val = &b->d->g.values[v];
    if (input) {
      if (val->is_initializer && !keep_consts) continue; /* constants are not runtime inputs */
      if (val->is_initializer) {
        if (val->init) { b->d->init_bytes -= (int64_t)val->init->nbytes; b->d->n_init--; }
        val->is_initializer = false;
        val->init = NULL;
      }
      val->is_graph_input = true;
    } else {
      val->is_graph_output = true;
    }
    idx[k++] = v;
  }
  *out_idx = idx;
  *out_n = k;
  return NULL;
}

static fbx_status *build(builder *b, const OrtGraph *graph, const OrtNode *fused) {
  fbx_ep_graph *d = b->d;
  fbx_onnx_graph *g = &d->g;
  size_t n_in = 0, n_out = 0, n_init = 0, n_nodes = 0;
  FBX_ORT_TRY(FBX_ORT->Graph_GetNumInputs(graph, &n_in));
  FBX_ORT_TRY(FBX_ORT->Graph_GetNumOutputs(graph, &n_out));
  FBX_ORT_TRY(FBX_ORT->Graph_GetNumInitializers(graph, &n_init));
  FBX_ORT_TRY(FBX_ORT->Graph_GetNumNodes(graph, &n_nodes));
  size_t f_in = 0, f_out = 0;
  if (fused) {
    FBX_ORT_TRY(FBX_ORT->Node_GetNumInputs(fused, &f_in));
    FBX_ORT_TRY(FBX_ORT->Node_GetNumOutputs(fused, &f_out));
  }
  /* opsets */
  FBX_ORT_TRY(FBX_ORT->Graph_GetNumOperatorSets(graph, &b->n_opsets));
  b->op_domains = fbx_arena_alloc(b->a, (b->n_opsets + 1) * sizeof(char *));
  b->op_versions = fbx_arena_alloc(b->a, (b->n_opsets + 1) * sizeof(int64_t));
  const OrtNode **nodes = fbx_arena_alloc(b->a, (n_nodes + 1) * sizeof *nodes);
  if (!b->op_domains || !b->op_versions || !nodes) return FBX_ERR_OOM();
  FBX_ORT_TRY(FBX_ORT->Graph_GetOperatorSets(graph, b->op_domains, b->op_versions, b->n_opsets));
  if (n_nodes) FBX_ORT_TRY(FBX_ORT->Graph_GetNodes(graph, nodes, n_nodes));

  /* Upper bound on distinct values: every reference may be new. */
  size_t cap = n_in + n_out + n_init + f_in + f_out + 1;
  for (size_t i = 0; i < n_nodes; i++) {
    size_t a = 0, c = 0, m = 0;
    FBX_ORT_TRY(FBX_ORT->Node_GetNumInputs(nodes[i], &a));
    FBX_ORT_TRY(FBX_ORT->Node_GetNumOutputs(nodes[i], &c));
    FBX_ORT_TRY(FBX_ORT->Node_GetNumImplicitInputs(nodes[i], &m));
    cap += a + c + m;
  }
  if (cap > (1u << 28)) return FBX_ERR("ep graph: too many values (%zu)", cap);
  b->cap_values = (int)cap;
  g->values = fbx_arena_alloc(b->a, cap * sizeof *g->values);
  unsigned slots = 16;
  while (slots < 2 * cap) slots <<= 1;
  b->slots = fbx_calloc(slots, sizeof(int));
  b->mask = slots - 1;
  g->nodes = fbx_arena_alloc(b->a, (n_nodes + 1) * sizeof *g->nodes);
  d->ort_nodes = nodes;
  if (!g->values || !b->slots || !g->nodes) return FBX_ERR_OOM();

  size_t nvi = n_in > n_out ? n_in : n_out;
  if (n_init > nvi) nvi = n_init;
  if (f_in > nvi) nvi = f_in;
  if (f_out > nvi) nvi = f_out;
  const OrtValueInfo **vis = fbx_arena_alloc(b->a, (nvi + 1) * sizeof *vis);
  if (!vis) return FBX_ERR_OOM();

  /* Initializers first so they are flagged before inputs are collected. */
  if (n_init) {
    FBX_ORT_TRY(FBX_ORT->Graph_GetInitializers(graph, vis, n_init));
    for (size_t i = 0; i < n_init; i++) {
      int v;
      FBX_TRY(value_get(b, vis[i], &v));
    }
  }
  int *idx = NULL, n = 0;
  if (n_in) FBX_ORT_TRY(FBX_ORT->Graph_GetInputs(graph, vis, n_in));
  FBX_TRY(collect_io(b, vis, n_in, true, false, &idx, &n));
  if (!fused) { g->inputs = idx; g->n_inputs = n; }

  for (size_t i = 0; i < n_nodes; i++) FBX_TRY(read_node(b, nodes[i], &g->nodes[i]));
  g->n_nodes = (int)n_nodes;

  if (n_out) FBX_ORT_TRY(FBX_ORT->Graph_GetOutputs(graph, vis, n_out));
  FBX_TRY(collect_io(b, vis, n_out, false, false, &idx, &n));
  if (!fused) { g->outputs = idx; g->n_outputs = n; }

  if (b->body) { /* a body's non-constant outer values: inputs after its own, in order of first use */
    int n_outer = 0;
    for (int i = 0; i < g->n_values; i++) n_outer += g->values[i].is_outer && !g->values[i].is_initializer;
    int *in2 = fbx_arena_alloc(b->a, (size_t)(g->n_inputs + n_outer + 1) * sizeof(int));
    if (!in2) return FBX_ERR_OOM();
    if (g->n_inputs) memcpy(in2, g->inputs, (size_t)g->n_inputs * sizeof(int));
    int k = g->n_inputs;
    for (int i = 0; i < g->n_values; i++) {
      fbx_onnx_value *val = &g->values[i];
      if (!val->is_outer || val->is_initializer || val->is_graph_input) continue;
      val->is_graph_input = true;
      in2[k++] = i;
    }
    g->inputs = in2;
    g->n_inputs = k;
  }

  if (fused) { /* the order Compute sees */
    for (int i = 0; i < g->n_values; i++) g->values[i].is_graph_input = g->values[i].is_graph_output = false;
    if (f_in) FBX_ORT_TRY(FBX_ORT->Node_GetInputs(fused, vis, f_in));
    FBX_TRY(collect_io(b, vis, f_in, true, true, &idx, &n));
    g->inputs = idx; g->n_inputs = n;
    if ((size_t)n != f_in) return FBX_ERR("ep graph: fused node has %zu inputs, %d named", f_in, n);
    if (f_out) FBX_ORT_TRY(FBX_ORT->Node_GetOutputs(fused, vis, f_out));
    FBX_TRY(collect_io(b, vis, f_out, false, false, &idx, &n));
    g->outputs = idx; g->n_outputs = n;
  }

  /* Graph_GetNodes promises a topological order; check it (clustering relies on it). */
  int *producer = fbx_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof(int));
  if (!producer) return FBX_ERR_OOM();
  for (int i = 0; i < g->n_values; i++) producer[i] = -1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_outputs; k++)
      if (g->nodes[i].outputs[k] >= 0) producer[g->nodes[i].outputs[k]] = i;
  fbx_status *st = NULL;
  for (int i = 0; i < g->n_nodes && !st; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++) {
      int v = g->nodes[i].inputs[k];
      if (v >= 0 && producer[v] >= i) {
        st = FBX_ERR("ep graph: nodes are not in topological order (node %d '%s')", i, g->nodes[i].name);
        break;
      }
    }
  fbx_free(producer);
  return st;
}

static fbx_status *describe(const OrtGraph *graph, const OrtNode *fused, bool body, fbx_ep_graph *d) {
  memset(d, 0, sizeof *d);
  d->arena = fbx_arena_create(64 * 1024);
  if (!d->arena) return FBX_ERR_OOM();
  builder b = {.d = d, .a = d->arena, .body = body};
  fbx_status *st = build(&b, graph, fused);
  fbx_free(b.slots);
  if (st) fbx_ep_graph_free(d);
  return st;
}

fbx_status *fbx_ep_graph_build(const OrtGraph *graph, const OrtNode *fused_node, fbx_ep_graph *d) {
  return describe(graph, fused_node, false, d);
}

/* The one-node description (fbx_ep_graph_build_node). */
static fbx_status *build_node(builder *b, const OrtNode *on) {
  fbx_onnx_graph *g = &b->d->g;
  size_t ni = 0, no = 0, nm = 0;
  FBX_ORT_TRY(FBX_ORT->Node_GetNumInputs(on, &ni));
  FBX_ORT_TRY(FBX_ORT->Node_GetNumOutputs(on, &no));
  FBX_ORT_TRY(FBX_ORT->Node_GetNumImplicitInputs(on, &nm));
  size_t cap = ni + no + nm + 1;
  b->cap_values = (int)cap;
  g->values = fbx_arena_alloc(b->a, cap * sizeof *g->values);
  g->nodes = fbx_arena_alloc(b->a, sizeof *g->nodes);
  b->d->ort_nodes = fbx_arena_alloc(b->a, sizeof *b->d->ort_nodes);
  unsigned slots = 16;
  while (slots < 2 * cap) slots <<= 1;
  b->slots = fbx_calloc(slots, sizeof(int));
  b->mask = slots - 1;
  if (!g->values || !g->nodes || !b->d->ort_nodes || !b->slots) return FBX_ERR_OOM();
  b->d->ort_nodes[0] = on;
  FBX_TRY(read_node(b, on, &g->nodes[0]));
  g->n_nodes = 1;
  return NULL;
}

fbx_status *fbx_ep_graph_build_node(const OrtNode *node, fbx_ep_graph *d) {
  memset(d, 0, sizeof *d);
  d->arena = fbx_arena_create(16 * 1024);
  if (!d->arena) return FBX_ERR_OOM();
  builder b = {.d = d, .a = d->arena};
  fbx_status *st = build_node(&b, node);
  fbx_free(b.slots);
  if (st) fbx_ep_graph_free(d);
  return st;
}

void fbx_ep_graph_free(fbx_ep_graph *d) {
  if (!d) return;
  for (int i = 0; i < d->n_subs; i++) {
    fbx_ep_graph_free(d->subs[i]);
    fbx_free(d->subs[i]);
  }
  fbx_free(d->subs);
  for (int i = 0; i < d->n_owned; i++) FBX_ORT->ReleaseValue(d->owned[i]);
  fbx_free(d->owned);
  fbx_arena_destroy(d->arena);
  memset(d, 0, sizeof *d);
}
