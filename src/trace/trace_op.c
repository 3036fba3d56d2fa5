/* Per-op spans (trace.h, "per-op spans"): op sites interned per session, and
 * fbx_trace_op, the one call the executor makes per executed node.
 *
 * Cost model: a decode step runs a few hundred nodes of 0.5-5 us each, so the
 * per-node cost must stay near 100 ns for tracing to cost <= 5%. What does
 * not vary between executions of a node (its op type, name, id, device,
 * fast/composed marking) lives in its site, is copied and escaped once, and
 * the hot path writes only the site pointer, two times and the run's values
 * into the thread's buffer (fbx__trace_record_op). Statistics for the summary
 * are two relaxed atomic adds on the site, summed per op type at teardown. */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

static fbx__site_table g_orphans; /* sites of no session (reachable until exit) */

static void tab_lock(fbx__site_table *t) {
  while (__atomic_exchange_n(&t->lk, 1, __ATOMIC_ACQUIRE))
    while (__atomic_load_n(&t->lk, __ATOMIC_RELAXED)) sched_yield();
}
static void tab_unlock(fbx__site_table *t) { __atomic_store_n(&t->lk, 0, __ATOMIC_RELEASE); }

static uint64_t hash_mix(uint64_t h, const char *s) {
  h ^= 0xff; /* NULL and "" hash apart */
  if (s)
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (h ^ 0x5a) * 1099511628211ull;
}

/* The op's domain as sites store it: "ai.onnx" for the default one. */
static const char *desc_domain(const fbx_trace_op_site_desc *d) { return d->domain && d->domain[0] ? d->domain : "ai.onnx"; }

static uint64_t desc_hash(const fbx_trace_op_site_desc *d) {
  uint64_t h = (1469598103934665603ull ^ (uint64_t)(uint32_t)d->node_id) * 1099511628211ull ^ (uint64_t)(uintptr_t)d->scope;
  const char *f[] = {d->op,          d->node,           desc_domain(d), d->device,         d->fast_span,
                     d->fast_kernel, d->variant_suffix, d->composed_op, d->composed_reason};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) h = hash_mix(h, f[i]);
  return h;
}

static bool str_same(const char *a, const char *b) { return (!a || !b) ? a == b : !strcmp(a, b); }

static bool site_matches(const fbx_trace_op_site *s, const fbx_trace_op_site_desc *d) {
  return s->scope == d->scope && s->node_id == d->node_id && str_same(s->op, d->op) && str_same(s->node, d->node) &&
         str_same(s->domain, desc_domain(d)) &&
         str_same(s->device, d->device) && str_same(s->fast_span, d->fast_span) &&
         str_same(s->fast_kernel, d->fast_kernel) && str_same(s->variant_suffix, d->variant_suffix) &&
         str_same(s->composed_op, d->composed_op) && str_same(s->composed_reason, d->composed_reason);
}

static void site_free(fbx_trace_op_site *s) {
  void *f[] = {s->op,          s->node,           s->domain,      s->device,          s->fast_span,
               s->fast_kernel, s->variant_suffix, s->composed_op, s->composed_reason, s->json, s->dev_json};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) fbx_free(f[i]);
  fbx_free(s);
}

/* A copy of the optional string s; *ok cleared on OOM. */
static char *dup_opt(const char *s, bool *ok) {
  if (!s) return NULL;
  char *c = fbx_strdup(s);
  if (!c) *ok = false;
  return c;
}

static fbx_trace_op_site *site_new(const fbx_trace_op_site_desc *d, fbx_trace_session *owner, uint64_t h) {
  fbx_trace_op_site *s = fbx_calloc(1, sizeof *s);
  if (!s) return NULL;
  bool ok = true;
  s->session = owner;
  s->hash = h;
  s->node_id = d->node_id;
  s->scope = d->scope;
  s->op = dup_opt(d->op ? d->op : "op", &ok);
  s->node = dup_opt(d->node ? d->node : "", &ok);
  s->domain = dup_opt(desc_domain(d), &ok);
  s->device = dup_opt(d->device ? d->device : "cpu", &ok);
  s->fast_span = dup_opt(d->fast_span, &ok);
  s->fast_kernel = dup_opt(d->fast_kernel, &ok);
  s->variant_suffix = dup_opt(d->variant_suffix, &ok);
  s->composed_op = dup_opt(d->composed_op, &ok);
  s->composed_reason = dup_opt(d->composed_op ? (d->composed_reason ? d->composed_reason : "") : NULL, &ok);
  s->n_events = 1 + (s->fast_span != NULL) + (s->composed_op != NULL) + (s->composed_op && owner); /* counter: per session */
  if (!ok) {
    site_free(s);
    return NULL;
  }
  return s;
}

/* Under t's lock: doubles the slot array. false on OOM. */
static bool tab_grow(fbx__site_table *t) {
  uint32_t cap = t->cap ? 2 * t->cap : 64;
  fbx_trace_op_site **slots = fbx_calloc(cap, sizeof *slots);
  if (!slots) return false;
  for (uint32_t i = 0; i < t->cap; i++)
    for (fbx_trace_op_site *s = t->slots[i], *next; s; s = next) {
      next = s->next;
      s->next = slots[s->hash & (cap - 1)];
      slots[s->hash & (cap - 1)] = s;
    }
  fbx_free(t->slots);
  t->slots = slots;
  t->cap = cap;
  return true;
}

fbx_trace_op_site *fbx_trace_op_site_get(fbx_trace_session *sess, const fbx_trace_op_site_desc *d) {
  if (!fbx_trace_enabled() || !d) return NULL;
  fbx__site_table *t = sess ? fbx__trace_session_sites(sess) : &g_orphans;
  uint64_t h = desc_hash(d);
  fbx_trace_op_site *found = NULL;
  tab_lock(t);
  if (t->cap)
    for (fbx_trace_op_site *s = t->slots[h & (t->cap - 1)]; s && !found; s = s->next)
      if (s->hash == h && site_matches(s, d)) found = s;
  if (!found && (2 * (t->n + 1) <= t->cap || tab_grow(t)) && (found = site_new(d, sess, h))) {
    found->next = t->slots[h & (t->cap - 1)];
    t->slots[h & (t->cap - 1)] = found;
    t->n++;
  }
  tab_unlock(t);
  return found;
}

void fbx__site_table_visit(fbx__site_table *t, void (*fn)(void *ctx, const fbx_trace_op_site *), void *ctx) {
  tab_lock(t);
  for (uint32_t i = 0; i < t->cap; i++)
    for (const fbx_trace_op_site *s = t->slots[i]; s; s = s->next) fn(ctx, s);
  tab_unlock(t);
}

void fbx__site_table_free(fbx__site_table *t) {
  tab_lock(t);
  for (uint32_t i = 0; i < t->cap; i++)
    for (fbx_trace_op_site *s = t->slots[i], *next; s; s = next) {
      next = s->next;
      site_free(s);
    }
  fbx_free(t->slots);
  t->slots = NULL;
  t->cap = t->n = 0;
  tab_unlock(t);
}

/* ORT's profiler gets the same events as generic spans (that path is only
 * live while the application profiles, and ORT's own per-event cost there is
 * far above ours). */
/* n tensors as a FBX_TARG_SHAPES list in v (1 + n * (1 + PROF_MAX_RANK) values); adds their bytes. */
enum { PROF_MAX_TENSORS = 64, PROF_MAX_RANK = 8 };
static int shapes_list(const fbx_trace_tensor *t, int n, int64_t *v, int64_t *bytes, int64_t *elements0) {
  if (n > PROF_MAX_TENSORS) n = PROF_MAX_TENSORS;
  int k = 0;
  v[k++] = n;
  for (int i = 0; i < n; i++) {
    int r = t[i].rank > PROF_MAX_RANK ? PROF_MAX_RANK : t[i].rank;
    int64_t e = 1;
    v[k++] = r;
    for (int d = 0; d < r; d++) e *= (v[k++] = t[i].dims[d]);
    if (r >= 0) *bytes += e * (int64_t)t[i].elem_bytes;
    if (i == 0 && elements0) *elements0 = r >= 0 ? e : 0;
  }
  return k;
}

static void op_to_profiler(const fbx_trace_op_site *site, uint64_t t0, uint64_t t1, const fbx_trace_op_run *r) {
  const char *variant = r->variant ? r->variant : "";
  char vbuf[512], name[512];
  if (site->variant_suffix) {
    snprintf(vbuf, sizeof vbuf, "%s%s", variant, site->variant_suffix);
    variant = vbuf;
  }
  int64_t ins[1 + PROF_MAX_TENSORS * (1 + PROF_MAX_RANK)], outs[1 + PROF_MAX_TENSORS * (1 + PROF_MAX_RANK)];
  int64_t bytes = 0, elements = 0;
  int n_ins = shapes_list(r->in, r->in ? r->n_in : 0, ins, &bytes, NULL);
  int n_outs = shapes_list(r->out, r->out ? r->n_out : 0, outs, &bytes, &elements);
  fbx_trace_arg args[] = {
      FBX_TARG_I("node_id", site->node_id),
      FBX_TARG_S("node", site->node),
      FBX_TARG_S("device", site->device),
      FBX_TARG_SHAPES_V("input_shapes", ins, n_ins),
      FBX_TARG_SHAPES_V("output_shapes", outs, n_outs),
      FBX_TARG_S("dtype", r->dtype ? r->dtype : ""),
      FBX_TARG_I("elements", elements),
      FBX_TARG_I("bytes", bytes),
      FBX_TARG_D("flops", r->flops),
      FBX_TARG_S("kernel_variant", variant),
      FBX_TARG_S("kernel_variant_reason", r->reason ? r->reason : ""),
  };
  fbx__trace_profiler_record(site->op, "op", t0, t1, args, (int)(sizeof args / sizeof args[0]));
  if (site->fast_span) {
    fbx_trace_arg fa[] = {FBX_TARG_S("kernel", site->fast_kernel ? site->fast_kernel : variant),
                          FBX_TARG_I("node_id", site->node_id)};
    fbx__trace_profiler_record(site->fast_span, "op.fast", t0, t1, fa, 2);
  }
  if (site->composed_op) {
    snprintf(name, sizeof name, "%s [composed]", site->composed_op);
    fbx_trace_arg ca[] = {FBX_TARG_S("reason", site->composed_reason), FBX_TARG_I("node_id", site->node_id)};
    fbx__trace_profiler_record(name, "op.composed", t0, t1, ca, 2);
  }
}

void fbx__trace_site_account(fbx_trace_op_site *site, uint64_t ns) {
  __atomic_fetch_add(&site->ns, ns, __ATOMIC_RELAXED);
  __atomic_fetch_add(&site->calls, 1, __ATOMIC_RELAXED);
}

void fbx_trace_op(fbx_trace_op_site *site, uint64_t t0_ns, uint64_t t1_ns, const fbx_trace_op_run *r) {
  int f = fbx_trace_flags();
  if (__builtin_expect(!site || !(f & (FBX_TRACE_F_JSON | FBX_TRACE_F_SUMMARY | FBX_TRACE_F_PROFILER)), 0)) return;
  if (f & FBX_TRACE_F_PROFILER) op_to_profiler(site, t0_ns, t1_ns, r);
  if (f & FBX_TRACE_F_JSON) { /* statistics are taken from the record at flush */
    fbx__trace_record_op(site, t0_ns, t1_ns, r);
  } else if (f & FBX_TRACE_F_SUMMARY) {
    /* Not a locked add: executions of one site never overlap (its scope
     * promises it), so a relaxed load + store loses nothing, at a fraction of
     * a lock-prefixed add's cost. */
    __atomic_store_n(&site->ns, __atomic_load_n(&site->ns, __ATOMIC_RELAXED) + (t1_ns - t0_ns), __ATOMIC_RELAXED);
    __atomic_store_n(&site->calls, __atomic_load_n(&site->calls, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
  }
}

#else
typedef int fbx__trace_op_compiled_out;
#endif
