/* The compiled subgraph: path classification, the shape-keyed LRU plan
 * cache, eager fallback, input validation and run serialisation. */
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../base/checked.h"
#include "../ir/ir_passes.h"
#include "../trace/trace.h"
#include "exec_plan.h"

#define FBX__IR_SEEN_MAX 128 /* remembered keys per path (for RETRACE) */

struct fbx_exec_compiled {
  fbx_ir_graph *g;
  fbx_backend *be;
  fbx_backend *host;           /* host-visible: be itself, else opt.host (may be NULL) */
  fbx_exec_compile_options opt;
  char *name;
  void **const_buf;            /* per value id: backend copy of an original constant (non-host-visible) */
  fbx__ir_prep_cache *prep;    /* node states shared by every plan (prepared at create) */
  pthread_mutex_t mu;
  bool decoder;
  fbx__ir_plan **plans; int n_plans;
  fbx__ir_plan *eager;         /* the eager plan, built on the first eager run and kept: it depends on
                                  no shape, and keeping it keeps its buffers (no allocation per run) */
  uint64_t tick;
  bool owns_graph;             /* false for an IF branch: the graph belongs to the IF's graph */
  /* IF branches (every IF node of g, then and else): compiled objects of their own, each with
   * its own plan cache, run by the IF's step (exec_run.c) under this object's lock and theirs */
  const fbx_ir_graph **branch_g;
  fbx_exec_compiled **branch_c;
  int n_branch;
  char *seen[FBX_EXEC_PATH_COUNT][FBX__IR_SEEN_MAX];
  int n_seen[FBX_EXEC_PATH_COUNT], seen_next[FBX_EXEC_PATH_COUNT];
  /* Bodies and branches (fbx__exec_compiled_run_body): the plan of the last run and the dtypes
   * and shapes of its inputs (g->n_inputs); last is cleared when the cache evicts it */
  fbx__ir_plan *last;
  fbx_tensor *last_in;
};

/* ---- path classification ---- */

/* The distinct non-empty symbolic names outside dim 0 (up to cap). */
static int fbx__ir_decoder_syms(const fbx_ir_graph *g, const char **syms, int cap) {
  int n = 0;
  for (int i = 0; i < g->n_inputs; i++) {
    const fbx_ir_value *v = &g->values[g->inputs[i]];
    for (int d = 1; d < v->rank; d++) {
      const char *s = v->dim_sym[d];
      if (v->dims[d] >= 0 || !s || !s[0]) continue;
      bool dup = false;
      for (int k = 0; k < n && !dup; k++) dup = strcmp(syms[k], s) == 0;
      if (!dup && n < cap) syms[n++] = s;
    }
  }
  return n;
}

static const char *const fbx__ir_path_names[] = {"decode", "prefill", "general", "eager"};
_Static_assert(sizeof(fbx__ir_path_names) / sizeof(fbx__ir_path_names[0]) == FBX_EXEC_PATH_COUNT,
               "path name table out of sync");

const char *fbx_exec_path_name(fbx_exec_path p) {
  if ((unsigned)p >= FBX_EXEC_PATH_COUNT) return "?";
  return fbx__ir_path_names[p];
}

const char *fbx_exec_cache_event_name(fbx_exec_cache_event e) {
  switch (e) {
    case FBX_EXEC_CACHE_HIT: return "HIT";
    case FBX_EXEC_CACHE_MISS: return "MISS";
    case FBX_EXEC_CACHE_RETRACE: return "RETRACE";
    case FBX_EXEC_CACHE_NONE: break;
  }
  return "";
}

bool fbx_exec_graph_is_decoder(const fbx_ir_graph *g) {
  const char *syms[64];
  return g && fbx__ir_decoder_syms(g, syms, 64) >= 2;
}

fbx_exec_path fbx_exec_path_classify(const fbx_ir_graph *g, bool compile, const fbx_tensor *inputs, int n_inputs) {
  if (!compile || !g) return FBX_EXEC_PATH_EAGER;
  if (!fbx_exec_graph_is_decoder(g)) return FBX_EXEC_PATH_GENERAL;
  for (int i = 0; i < g->n_inputs && i < n_inputs; i++) {
    const fbx_ir_value *v = &g->values[g->inputs[i]];
    for (int d = 1; d < v->rank && d < inputs[i].rank; d++)
      if (v->dims[d] < 0 && v->dim_sym[d] && v->dim_sym[d][0] && inputs[i].dims[d] == 1) return FBX_EXEC_PATH_DECODE;
  }
  return FBX_EXEC_PATH_PREFILL;
}

/* "1x3x224x224|5" ; on decode every graph-symbolic dim != 1 becomes '*'. */
static void fbx__ir_shape_key(const fbx_ir_graph *g, const fbx_tensor *inputs, int n_inputs, bool shapeless,
                              char *key, size_t cap) {
  size_t k = 0;
  key[0] = 0;
  for (int i = 0; i < n_inputs && k + 1 < cap; i++) {
    const fbx_ir_value *v = &g->values[g->inputs[i]];
    if (i) key[k++] = '|', key[k] = 0;
    if (inputs[i].rank == 0 && k + 1 < cap) key[k++] = 's', key[k] = 0;
    for (int d = 0; d < inputs[i].rank && k + 1 < cap; d++) {
      int w;
      if (shapeless && v->dims[d] < 0 && inputs[i].dims[d] != 1) w = snprintf(key + k, cap - k, d ? "x*" : "*");
      else w = snprintf(key + k, cap - k, d ? "x%lld" : "%lld", (long long)inputs[i].dims[d]);
      if (w < 0) break;
      k += (size_t)w;
      if (k >= cap) k = cap - 1;
    }
  }
}

/* ---- create / destroy ---- */

static fbx_status *fbx__ir_compiled_new(fbx_ir_graph *g, bool owns, fbx_backend *be, const fbx_exec_compile_options *opt,
                                        const char *name, fbx_exec_compiled **out);

fbx_status *fbx_exec_compiled_create(fbx_ir_graph *g, fbx_backend *be, const fbx_exec_compile_options *opt,
                                   const char *name, fbx_exec_compiled **out) {
  return fbx__ir_compiled_new(g, true, be, opt, name, out);
}

fbx_exec_compiled *fbx__ir_compiled_branch(const fbx_exec_compiled *c, const fbx_ir_graph *branch) {
  for (int i = 0; c && i < c->n_branch; i++)
    if (c->branch_g[i] == branch) return c->branch_c[i];
  return NULL;
}

/* The body graphs of node nd (IF: then, else; LOOP/SCAN: the body), their count. */
static int fbx__ir_node_bodies(const fbx_ir_node *nd, fbx_ir_graph *bodies[2]) {
  if (nd->op == FBX_IR_OP_IF) {
    bodies[0] = nd->params.cond.branch[0];
    bodies[1] = nd->params.cond.branch[1];
    return 2;
  }
  if (nd->op == FBX_IR_OP_LOOP || nd->op == FBX_IR_OP_SCAN) {
    bodies[0] = nd->params.loop.body;
    return 1;
  }
  return 0;
}

/* One compiled object per IF branch and LOOP/SCAN body of c's graph
 * ("<name>/<If>/then|else", "<name>/<Loop>/body"). */
static fbx_status *fbx__ir_compiled_branches(fbx_exec_compiled *c, const fbx_exec_compile_options *opt) {
  const fbx_ir_graph *g = c->g;
  int n = 0;
  fbx_ir_graph *bodies[2];
  for (int i = 0; i < g->n_nodes; i++) n += fbx__ir_node_bodies(&g->nodes[i], bodies);
  if (!n) return NULL;
  c->branch_g = fbx_calloc((size_t)n, sizeof *c->branch_g);
  c->branch_c = fbx_calloc((size_t)n, sizeof *c->branch_c);
  if (!c->branch_g || !c->branch_c) return FBX_ERR_OOM();
  fbx_exec_compile_options copt = {.compile = c->opt.compile, .cache_limit = c->opt.cache_limit,
                                 .host = opt ? opt->host : NULL};
  for (int i = 0; i < g->n_nodes; i++) {
    const fbx_ir_node *nd = &g->nodes[i];
    int nb = fbx__ir_node_bodies(nd, bodies);
    for (int b = 0; b < nb; b++) {
      fbx_ir_graph *bg = bodies[b];
      const char *what = nb == 1 ? "body" : b ? "else" : "then";
      if (!bg) return FBX_ERR("%s: %s '%s' has no %s graph", c->name, fbx_ir_op_name(nd->op), nd->name ? nd->name : "", what);
      char nm[256];
      snprintf(nm, sizeof nm, "%s/%s/%s", c->name, nd->name ? nd->name : fbx_ir_op_name(nd->op), what);
      FBX_TRY(fbx__ir_compiled_new(bg, false, c->be, &copt, nm, &c->branch_c[c->n_branch]));
      fbx_exec_compiled *bc = c->branch_c[c->n_branch];
      c->branch_g[c->n_branch++] = bg;
      if (!(bc->last_in = fbx_calloc((size_t)(bg->n_inputs > 0 ? bg->n_inputs : 1), sizeof *bc->last_in)))
        return FBX_ERR_OOM();
    }
  }
  return NULL;
}

static fbx_status *fbx__ir_compiled_new(fbx_ir_graph *g, bool owns, fbx_backend *be, const fbx_exec_compile_options *opt,
                                        const char *name, fbx_exec_compiled **out) {
  if (out) *out = NULL;
  if (!g || !be || !be->vt || !out) {
    if (owns) fbx_ir_graph_destroy(g);
    return FBX_ERR_ARG("fbx_exec_compiled_create: graph, backend and out are required");
  }
  if (opt && opt->host && (!opt->host->vt || !opt->host->vt->host_visible)) {
    if (owns) fbx_ir_graph_destroy(g);
    return FBX_ERR_ARG("fbx_exec_compiled_create: the host backend must be host-visible");
  }
  if (owns) { /* graph rewrites that change node ids: before anything is keyed by them */
    int packed = 0;
    fbx_status *pst = fbx_ir_pack_qkv(g, &packed);
    if (!pst) pst = fbx_ir_pack_glu(g, &packed);
    if (pst) {
      fbx_ir_graph_destroy(g);
      return pst;
    }
  }
  fbx_exec_compiled *c = fbx_calloc(1, sizeof(*c));
  if (!c) {
    if (owns) fbx_ir_graph_destroy(g);
    return FBX_ERR_OOM();
  }
  c->owns_graph = owns;
  c->g = g;
  c->be = be;
  c->host = be->vt->host_visible ? be : opt ? opt->host : NULL;
  c->opt.compile = opt ? opt->compile : true;
  c->opt.cache_limit = opt && opt->cache_limit >= 1 ? opt->cache_limit : 8;
  c->name = fbx_strdup(name ? name : "subgraph");
  c->const_buf = fbx_calloc((size_t)g->n_values + 1, sizeof(void *));
  c->plans = fbx_calloc((size_t)c->opt.cache_limit, sizeof(fbx__ir_plan *));
  if (!c->name || !c->const_buf || !c->plans || pthread_mutex_init(&c->mu, NULL)) {
    fbx_free(c->name);
    fbx_free(c->const_buf);
    fbx_free(c->plans);
    fbx_free(c);
    if (owns) fbx_ir_graph_destroy(g);
    return FBX_ERR_OOM();
  }
  c->decoder = fbx_exec_graph_is_decoder(g);
  /* copy-wrap: constants move into engine memory once (host-visible engines read the graph's copy) */
  if (!be->vt->host_visible) {
    for (int v = 0; v < g->n_values; v++) {
      fbx_ir_value *val = &g->values[v];
      if (val->kind != FBX_IR_VALUE_CONST) continue;
      fbx_status *st = be->vt->buffer_alloc(be, val->nbytes ? val->nbytes : 64, &c->const_buf[v]);
      if (!st && val->nbytes) st = be->vt->copy_from_host(be, c->const_buf[v], val->data, val->nbytes);
      if (st) {
        fbx_exec_compiled_destroy(c);
        return st;
      }
    }
  }
  /* prepare once, here (ORT calls create at session creation), so that no
   * plan and no first run pays for e.g. weight packing */
  if (c->opt.compile) {
    fbx_status *st = fbx__ir_prep_cache_create(g, be, c->const_buf, &c->prep);
    if (st) {
      fbx_exec_compiled_destroy(c);
      return st;
    }
    c->prep->folds = c->host != NULL;
    fbx__ir_prep_cache_eager(c->prep);
  }
  fbx_status *st = fbx__ir_compiled_branches(c, opt);
  if (st) {
    fbx_exec_compiled_destroy(c);
    return st;
  }
  *out = c;
  return NULL;
}

void fbx_exec_compiled_destroy(fbx_exec_compiled *c) {
  if (!c) return;
  for (int i = 0; i < c->n_branch; i++) fbx_exec_compiled_destroy(c->branch_c[i]);
  fbx_free(c->branch_c);
  fbx_free(c->branch_g);
  fbx_free(c->last_in);
  for (int i = 0; i < c->n_plans; i++) fbx__ir_plan_destroy(c->plans[i]);
  fbx__ir_plan_destroy(c->eager);
  fbx__ir_prep_cache_destroy(c->prep); /* after the plans that borrow its states */
  for (int v = 0; v < c->g->n_values; v++)
    if (c->const_buf[v]) c->be->vt->buffer_free(c->be, c->const_buf[v]);
  for (int p = 0; p < FBX_EXEC_PATH_COUNT; p++)
    for (int i = 0; i < c->n_seen[p]; i++) fbx_free(c->seen[p][i]);
  pthread_mutex_destroy(&c->mu);
  fbx_free(c->plans);
  fbx_free(c->const_buf);
  fbx_free(c->name);
  if (c->owns_graph) fbx_ir_graph_destroy(c->g);
  fbx_free(c);
}

const fbx_ir_graph *fbx_exec_compiled_graph(const fbx_exec_compiled *c) { return c ? c->g : NULL; }

/* ---- cache ---- */

static bool fbx__ir_seen_has(fbx_exec_compiled *c, fbx_exec_path path, const char *key) {
  for (int i = 0; i < c->n_seen[path]; i++)
    if (strcmp(c->seen[path][i], key) == 0) return true;
  return false;
}

static void fbx__ir_seen_add(fbx_exec_compiled *c, fbx_exec_path path, const char *key) {
  if (fbx__ir_seen_has(c, path, key)) return;
  char *k = fbx_strdup(key);
  if (!k) return; /* only affects RETRACE reporting */
  if (c->n_seen[path] < FBX__IR_SEEN_MAX) {
    c->seen[path][c->n_seen[path]++] = k;
  } else {
    int i = c->seen_next[path];
    fbx_free(c->seen[path][i]);
    c->seen[path][i] = k;
    c->seen_next[path] = (i + 1) % FBX__IR_SEEN_MAX;
  }
}

static fbx__ir_plan *fbx__ir_cache_find(fbx_exec_compiled *c, fbx_exec_path path, const char *key) {
  for (int i = 0; i < c->n_plans; i++)
    if (c->plans[i]->path == path && strcmp(c->plans[i]->key, key) == 0) return c->plans[i];
  return NULL;
}

static void fbx__ir_cache_insert(fbx_exec_compiled *c, fbx__ir_plan *p) {
  if (c->n_plans == c->opt.cache_limit) { /* evict the least recently used */
    int lru = 0;
    for (int i = 1; i < c->n_plans; i++)
      if (c->plans[i]->last_used < c->plans[lru]->last_used) lru = i;
    if (c->plans[lru] == c->last) c->last = NULL;
    fbx__ir_plan_destroy(c->plans[lru]);
    c->plans[lru] = c->plans[--c->n_plans];
  }
  c->plans[c->n_plans++] = p;
}

/* ---- run ---- */

static fbx_status *fbx__ir_validate_inputs(const fbx_exec_compiled *c, const fbx_tensor *inputs, int n_inputs) {
  const fbx_ir_graph *g = c->g;
  if (n_inputs != g->n_inputs)
    return FBX_ERR_ARG("%s: %d inputs given, the subgraph has %d", c->name, n_inputs, g->n_inputs);
  if (n_inputs && !inputs) return FBX_ERR_ARG("%s: inputs is NULL", c->name);
  for (int i = 0; i < n_inputs; i++) {
    const fbx_ir_value *v = &g->values[g->inputs[i]];
    const fbx_tensor *t = &inputs[i];
    const char *nm = v->name ? v->name : "";
    if (t->dtype != v->dtype)
      return FBX_ERR_ARG("%s: input %d '%s' has dtype %s, expected %s", c->name, i, nm, fbx_dtype_name(t->dtype),
                         fbx_dtype_name(v->dtype));
    if (t->rank != v->rank)
      return FBX_ERR_ARG("%s: input %d '%s' has rank %d, expected %d", c->name, i, nm, t->rank, v->rank);
    for (int d = 0; d < t->rank; d++) {
      if (t->dims[d] < 0) return FBX_ERR_ARG("%s: input %d '%s' has negative dim %d", c->name, i, nm, d);
      if (v->dims[d] >= 0 && t->dims[d] != v->dims[d])
        return FBX_ERR_ARG("%s: input %d '%s' dim %d is %lld, expected %lld", c->name, i, nm, d,
                           (long long)t->dims[d], (long long)v->dims[d]);
    }
    /* a valid shape (base/checked.h): ORT accepts [0, 2^62, 4], whose inner products would wrap */
    int64_t n;
    if (!fbx_dims_numel(t->dims, t->rank, &n)) {
      char what[192];
      snprintf(what, sizeof what, "%s input %d '%s'", c->name, i, nm);
      FBX_TRY(fbx_shape_numel_checked(t->dims, t->rank, what, &n));
    }
    if (n > 0 && !t->data) return FBX_ERR_ARG("%s: input %d '%s' has no data", c->name, i, nm);
  }
  return NULL;
}

static fbx_status *fbx__ir_run_eager(fbx_exec_compiled *c, const fbx_tensor *inputs, int n_inputs,
                                     const fbx_exec_run_io *io, fbx_exec_output_fn output_fn, void *output_ctx, fbx_exec_run_report *report) {
  if (!c->eager) { /* no folding or fusion: nothing in it depends on the inputs. Node states
                     * come from the shared cache: prepared at create, or (compile=off) made
                     * here, each on the node's first use (some kernels need one, e.g.
                     * MATMUL_NBITS's weights uploaded once on CUDA) */
    if (!c->prep) FBX_TRY(fbx__ir_prep_cache_create(c->g, c->be, c->const_buf, &c->prep));
    fbx__ir_plan_opts o = {.host = c->host, .prepare = true, .dev_outputs = io && io->outputs_on_device};
    FBX_TRY(fbx__ir_plan_build(c->g, c->be, c->const_buf, c->prep, &o, inputs, n_inputs, &c->eager));
    c->eager->owner = c;
  }
  return fbx__ir_plan_run(c->eager, inputs, n_inputs, io, output_fn, output_ctx, report);
}

static fbx_status *fbx__ir_run_locked(fbx_exec_compiled *c, const fbx_tensor *inputs, int n_inputs,
                                      const fbx_exec_run_io *io, fbx_exec_output_fn output_fn, void *output_ctx, fbx_exec_run_report *r) {
  fbx_exec_path path = fbx_exec_path_classify(c->g, c->opt.compile, inputs, n_inputs);
  r->path = path;
  if (path == FBX_EXEC_PATH_EAGER) {
    r->cache = FBX_EXEC_CACHE_NONE;
    fbx__ir_shape_key(c->g, inputs, n_inputs, false, r->shape_key, sizeof r->shape_key);
    return fbx__ir_run_eager(c, inputs, n_inputs, io, output_fn, output_ctx, r);
  }
  bool decode = path == FBX_EXEC_PATH_DECODE;
  fbx__ir_shape_key(c->g, inputs, n_inputs, decode, r->shape_key, sizeof r->shape_key);
  fbx__ir_plan *p = fbx__ir_cache_find(c, path, r->shape_key);
  if (p) {
    r->cache = fbx__ir_seen_has(c, path, r->shape_key) ? FBX_EXEC_CACHE_HIT : FBX_EXEC_CACHE_RETRACE;
  } else {
    /* a rebuild of a key compiled before (evicted) is a RETRACE */
    r->cache = fbx__ir_seen_has(c, path, r->shape_key) ? FBX_EXEC_CACHE_RETRACE : FBX_EXEC_CACHE_MISS;
    uint64_t t0 = fbx_trace_now_ns();
    fbx__ir_plan_opts o = {.host = c->host, .fold = c->host != NULL, .fold_shapes = !decode, .fuse = true,
                           .prepare = true, .reuse_slots = true, .dev_outputs = io && io->outputs_on_device};
    fbx_status *st = fbx__ir_plan_build(c->g, c->be, c->const_buf, c->prep, &o, inputs, n_inputs, &p);
    uint64_t t1 = fbx_trace_now_ns();
    r->compile_ns = t1 - t0;
    if (fbx_trace_enabled()) {
      fbx_trace_arg a[] = {FBX_TARG_S("path", fbx_exec_path_name(path)), FBX_TARG_S("shape_key", r->shape_key),
                           FBX_TARG_I("steps", p ? p->n_steps : 0)};
      fbx_trace_complete("fusebox.compile", "ep.phase", t0, t1, a, 3); /* a plan build on MISS */
    }
    if (st) {
      r->fell_back = true;
      snprintf(r->fallback_reason, sizeof r->fallback_reason, "%s", fbx_status_message(st));
      fbx_status_free(st);
      r->path = FBX_EXEC_PATH_EAGER;
      r->cache = FBX_EXEC_CACHE_NONE;
      return fbx__ir_run_eager(c, inputs, n_inputs, io, output_fn, output_ctx, r);
    }
    p->path = path;
    p->owner = c;
    snprintf(p->key, sizeof p->key, "%s", r->shape_key);
    fbx__ir_cache_insert(c, p);
  }
  fbx__ir_seen_add(c, path, r->shape_key);
  p->last_used = ++c->tick;
  return fbx__ir_plan_run(p, inputs, n_inputs, io, output_fn, output_ctx, r);
}

fbx_status *fbx_exec_compiled_run_io(fbx_exec_compiled *c, const fbx_tensor *inputs, int n_inputs,
                                   const fbx_exec_run_io *io, fbx_exec_output_fn output_fn, void *output_ctx,
                                   fbx_exec_run_report *report) {
  if (!c) return FBX_ERR_ARG("fbx_exec_compiled_run: compiled subgraph is NULL");
  if (!output_fn) return FBX_ERR_ARG("%s: output_fn is required", c->name);
  bool dev = io && io->outputs_on_device;
  for (int i = 0; io && io->input_on_device && i < n_inputs; i++) dev = dev || io->input_on_device[i];
  if (dev && c->be->vt->host_visible)
    return FBX_ERR_ARG("%s: device-memory inputs or outputs on host-visible backend '%s'", c->name, c->be->vt->name);
  FBX_TRY(fbx__ir_validate_inputs(c, inputs, n_inputs));
  fbx_exec_run_report local;
  fbx_exec_run_report *r = report ? report : &local;
  memset(r, 0, sizeof *r);
  pthread_mutex_lock(&c->mu);
  fbx_status *st = fbx__ir_run_locked(c, inputs, n_inputs, dev ? io : NULL, output_fn, output_ctx, r);
  pthread_mutex_unlock(&c->mu);
  return st;
}

/* Whether inputs have the dtypes and shapes of c's last run (and data where that run needed it). */
static bool fbx__ir_same_as_last(const fbx_exec_compiled *c, const fbx_tensor *inputs, int n_inputs) {
  if (!c->last || !c->last_in || n_inputs != c->g->n_inputs) return false;
  for (int i = 0; i < n_inputs; i++) {
    const fbx_tensor *a = &inputs[i], *b = &c->last_in[i];
    if (a->dtype != b->dtype || a->rank != b->rank || (!a->data && b->data) ||
        (a->rank > 0 && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank)))
      return false;
  }
  return true;
}

fbx_status *fbx__exec_compiled_run_body(fbx_exec_compiled *c, const fbx_tensor *inputs, int n_inputs,
                                        fbx_exec_output_fn output_fn, void *output_ctx, fbx_exec_run_report *r) {
  memset(r, 0, sizeof *r);
  pthread_mutex_lock(&c->mu);
  if (fbx__ir_same_as_last(c, inputs, n_inputs)) { /* validated at that run: its plan again */
    fbx__ir_plan *p = c->last;
    r->path = p->path;
    r->cache = p->path == FBX_EXEC_PATH_EAGER ? FBX_EXEC_CACHE_NONE : FBX_EXEC_CACHE_HIT;
    p->last_used = ++c->tick;
    fbx_status *st = fbx__ir_plan_run(p, inputs, n_inputs, NULL, output_fn, output_ctx, r);
    pthread_mutex_unlock(&c->mu);
    return st;
  }
  c->last = NULL;
  fbx_status *st = fbx__ir_validate_inputs(c, inputs, n_inputs);
  if (!st) st = fbx__ir_run_locked(c, inputs, n_inputs, NULL, output_fn, output_ctx, r);
  if (!st && c->last_in) { /* the plan that ran: the eager one, or the cache's entry for this key */
    fbx__ir_plan *p = r->path == FBX_EXEC_PATH_EAGER ? c->eager : fbx__ir_cache_find(c, r->path, r->shape_key);
    if (p && r->path == FBX_EXEC_PATH_EAGER) p->path = FBX_EXEC_PATH_EAGER;
    for (int i = 0; p && i < n_inputs; i++) {
      c->last_in[i] = inputs[i];
      c->last_in[i].data = inputs[i].data ? (void *)1 : NULL; /* a flag: the data itself changes */
    }
    c->last = p;
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

fbx_status *fbx_exec_compiled_run(fbx_exec_compiled *c, const fbx_tensor *inputs, int n_inputs,
                                fbx_exec_output_fn output_fn, void *output_ctx, fbx_exec_run_report *report) {
  return fbx_exec_compiled_run_io(c, inputs, n_inputs, NULL, output_fn, output_ctx, report);
}
