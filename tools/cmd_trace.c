// cmd_trace.c — `fusebox trace summarize FILE.json [--top N]`.
//
// Reads a Fusebox trace ({"traceEvents":[...]}) or an ONNX Runtime profile (a
// JSON array, our events inside as cat "Kernel" with args.fbx_cat) with
// jansson, rebuilds the session summary from the events and prints it with
// the top ops: in device time first when the trace has a GPU track (the
// per-node op.device slices, their busy time args.dev_us), then in host time
// (the per-node op spans). The tool links no engine code: plain malloc here.
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_trace.h"

typedef struct tally {
  char *key;
  char *note;  // first reason / extra text (may be NULL)
  double us;
  long long n;
} tally;

typedef struct tally_set {
  tally *v;
  size_t n, cap;
} tally_set;

static tally *tally_get(tally_set *t, const char *key) {
  for (size_t i = 0; i < t->n; i++)
    if (!strcmp(t->v[i].key, key)) return &t->v[i];
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 32;
    tally *p = realloc(t->v, cap * sizeof *p);
    if (!p) return NULL;
    t->v = p;
    t->cap = cap;
  }
  tally *e = &t->v[t->n++];
  memset(e, 0, sizeof *e);
  e->key = strdup(key);
  if (!e->key) {
    t->n--;
    return NULL;
  }
  return e;
}

static void tally_free(tally_set *t) {
  for (size_t i = 0; i < t->n; i++) {
    free(t->v[i].key);
    free(t->v[i].note);
  }
  free(t->v);
}

static int tally_by_time(const void *a, const void *b) {
  const tally *x = a, *y = b;
  return x->us < y->us ? 1 : x->us > y->us ? -1 : strcmp(x->key, y->key);
}

typedef struct agg {
  long long getcap, claimed, total, fused;
  tally_set fallback;  // key: op, note: reason, n: GetCapability calls naming it
  long long path[5], cache[3];  // decode prefill general eager other; HIT MISS RETRACE
  tally_set phases;    // translate/compile/eval/copy
  tally_set ops;       // op type -> span time from cat "op"
  tally_set kops;      // op type -> span time from "<Op> [fast|composed]" (used when no "op" spans)
  tally_set dev_ops;   // op type -> device time (args.dev_us) from the GPU track's "op.device" slices
  double dev_busy_us, dev_span_us, dev_idle_us;  // device-side fusebox.eval slices: busy, span, idle
  long long dev_evals;
  long long fast, composed;
  tally_set composed_ops;
  long long n_summary;
  long long wrap_n, wrap_b, cwrap_n, cwrap_b, delta_n, delta_b, full_n, full_b;
  long long dropped, max_events;
  int have_trailer;
  json_t *slowest;     // last fusebox.slowest_ops instant (borrowed)
  tally_set providers; // ORT profile: Node events per provider
  tally_set sum_unclaimed;  // from session_summary "unclaimed": domain.op -> count, reason, nodes
  tally_set sum_phases;     // from session_summary <phase>_us / <phase>_calls
  long long n_events;
} agg;

static const char *sget(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }
static long long iget(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (json_is_integer(v)) return json_integer_value(v);
  if (json_is_real(v)) return (long long)json_real_value(v);
  if (json_is_string(v)) return atoll(json_string_value(v));  // ORT profile args are strings
  return 0;
}

static double dget(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (json_is_string(v)) return atof(json_string_value(v));  // ORT profile args are strings
  return json_number_value(v);
}

static const char *const k_paths[] = {"decode", "prefill", "general", "eager"};
static const char *const k_caches[] = {"HIT", "MISS", "RETRACE"};

static void add_event(agg *a, json_t *e) {
  const char *name = sget(e, "name");
  const char *ph = sget(e, "ph");
  json_t *args = json_object_get(e, "args");
  const char *cat = sget(args, "fbx_cat");  // ORT profile: our category
  if (!cat) cat = sget(e, "cat");
  if (!name || !ph) return;
  a->n_events++;
  if (!cat) cat = "";
  double dur = json_number_value(json_object_get(e, "dur"));

  if (!strcmp(name, "fusebox.getcapability")) {
    a->getcap++;
    a->claimed += iget(args, "claimed");
    a->total += iget(args, "total");
    a->fused += iget(args, "fused_subgraphs");
    const char *k;
    json_t *v;
    json_object_foreach(args, k, v) {
      if (strncmp(k, "fallback_", 9)) continue;
      tally *t = tally_get(&a->fallback, k + 9);
      if (!t) continue;
      t->n++;
      if (!t->note && json_is_string(v)) t->note = strdup(json_string_value(v));
    }
  } else if (!strncmp(name, "fusebox.compute[", 16)) {
    const char *p = sget(args, "path"), *c = sget(args, "cache");
    int pi = 4;
    for (int i = 0; i < 4; i++)
      if (p && !strcmp(p, k_paths[i])) pi = i;
    a->path[pi]++;
    for (int i = 0; i < 3; i++)
      if (c && !strcmp(c, k_caches[i])) a->cache[i]++;
  } else if (!strcmp(name, "fusebox.session_summary")) {
    a->n_summary++;
    a->wrap_n += iget(args, "wrap_count");
    a->wrap_b += iget(args, "wrap_bytes");
    a->cwrap_n += iget(args, "copy_wrap_count");
    a->cwrap_b += iget(args, "copy_wrap_bytes");
    a->delta_n += iget(args, "copyout_delta_count");
    a->delta_b += iget(args, "copyout_delta_bytes");
    a->full_n += iget(args, "copyout_full_count");
    a->full_b += iget(args, "copyout_full_bytes");
    static const char *const ph[] = {"translate", "compile", "eval", "copy"};
    for (int p = 0; p < 4; p++) {
      char k[32];
      tally *t = tally_get(&a->sum_phases, ph[p]);
      if (!t) continue;
      snprintf(k, sizeof k, "%s_us", ph[p]);
      t->us += json_number_value(json_object_get(args, k));
      snprintf(k, sizeof k, "%s_calls", ph[p]);
      t->n += iget(args, k);
    }
    size_t ui;
    json_t *u;
    json_array_foreach(json_object_get(args, "unclaimed"), ui, u) {
      char key[256];
      const char *dom = sget(u, "domain"), *op = sget(u, "op_type");
      snprintf(key, sizeof key, "%s%s%s", dom && *dom ? dom : "", dom && *dom ? "." : "", op ? op : "?");
      tally *t = tally_get(&a->sum_unclaimed, key);
      if (!t) continue;
      t->n += iget(u, "count");
      if (!t->note) {
        char note[1024];
        int len = snprintf(note, sizeof note, "%s", sget(u, "reason") ? sget(u, "reason") : "");
        size_t ni;
        json_t *nn;
        json_array_foreach(json_object_get(u, "nodes"), ni, nn) {
          if (len < 0 || (size_t)len >= sizeof note) break;
          len += snprintf(note + len, sizeof note - (size_t)len, "%s%s", ni ? ", " : " [", json_string_value(nn));
        }
        if (json_array_size(json_object_get(u, "nodes")) && len > 0 && (size_t)len < sizeof note - 2) strcat(note, "]");
        t->note = strdup(note);
      }
    }
    long long d = iget(args, "dropped_events");
    if (d > a->dropped) a->dropped = d;
  } else if (!strcmp(name, "fusebox.slowest_ops")) {
    a->slowest = e;
  } else if (!strcmp(cat, "op.device") && !strcmp(ph, "X")) {
    // one node's device work in one eval (trace_gpu.c): its busy time, not the slice's extent
    tally *t = tally_get(&a->dev_ops, name);
    if (t) {
      t->us += dget(args, "dev_us");
      t->n++;
      const char *how = sget(args, "attribution");
      if (!t->note && how) t->note = strdup(how);
    }
  } else if (!strcmp(cat, "device") && !strcmp(name, "fusebox.eval") && sget(args, "side") &&
             !strcmp(sget(args, "side"), "device")) {
    a->dev_evals++;
    a->dev_busy_us += dget(args, "dev_us");
    a->dev_span_us += dget(args, "span_us");
    a->dev_idle_us += dget(args, "idle_us");
  } else if ((!strcmp(cat, "ep.phase") && !strncmp(name, "fusebox.", 8)) ||
             (!strcmp(cat, "device") && !strcmp(name, "fusebox.eval") &&
              !(sget(args, "side") && !strcmp(sget(args, "side"), "device")))) { /* not the GPU track's copy */
    tally *t = tally_get(&a->phases, name + 8);
    if (t) {
      t->us += dur;
      t->n++;
    }
  } else if (!strcmp(ph, "X") && (!strcmp(cat, "op") || !strcmp(cat, "op.fast") || !strcmp(cat, "op.composed"))) {
    char op[256];
    snprintf(op, sizeof op, "%s", name);
    char *br = strstr(op, " [");
    if (br) *br = '\0';
    if (!strcmp(cat, "op.fast")) a->fast++;
    if (!strcmp(cat, "op.composed")) {
      a->composed++;
      tally *c = tally_get(&a->composed_ops, op);
      if (c) {
        c->n++;
        const char *r = sget(args, "reason");
        if (!c->note && r) c->note = strdup(r);
      }
    }
    // "<Op> [fast]" / "[composed]" spans may wrap the op's own span: time is counted
    // from cat "op" when the file has any, else from the kernel spans.
    {
      tally *t = tally_get(!strcmp(cat, "op") ? &a->ops : &a->kops, op);
      if (t) {
        t->us += dur;
        t->n++;
        const char *dev = sget(args, "device");
        if (dev && strcmp(dev, "cpu") && !t->note) t->note = strdup(dev);
      }
    }
  } else if (!strcmp(cat, "Node") && sget(args, "provider") && strstr(name, "_kernel_time")) {
    tally *t = tally_get(&a->providers, sget(args, "provider"));
    if (t) {
      t->n++;
      t->us += dur;
    }
  }
}

static void fmt_bytes(char *out, size_t n, long long b) {
  double v = (double)b;
  if (b >= 1LL << 30) snprintf(out, n, "%.2f GiB", v / (1 << 30));
  else if (b >= 1 << 20) snprintf(out, n, "%.2f MiB", v / (1 << 20));
  else if (b >= 1 << 10) snprintf(out, n, "%.2f KiB", v / (1 << 10));
  else snprintf(out, n, "%lld B", b);
}

static void print_summary(agg *a, const char *file, int top) {
  printf("[fusebox] ===== trace summary: %s =====\n", file);
  printf("  events:  %lld", a->n_events);
  if (a->have_trailer) printf(" (dropped %lld, cap %lld)", a->dropped, a->max_events);
  else if (a->dropped) printf(" (dropped %lld)", a->dropped);
  printf("; %lld session summar%s\n", a->n_summary, a->n_summary == 1 ? "y" : "ies");
  double pct = a->total ? 100.0 * (double)a->claimed / (double)a->total : 0.0;
  printf("  claim:   %lld/%lld nodes claimed (%.1f%%) across %lld fused subgraph(s), %lld GetCapability call(s)\n",
         a->claimed, a->total, pct, a->fused, a->getcap);
  if (a->sum_unclaimed.n) {  // the teardown summary holds counts and node names
    printf("           unclaimed (-> CPU):\n");
    for (size_t i = 0; i < a->sum_unclaimed.n; i++)
      printf("             - %s x%lld: %s\n", a->sum_unclaimed.v[i].key, a->sum_unclaimed.v[i].n,
             a->sum_unclaimed.v[i].note ? a->sum_unclaimed.v[i].note : "");
  } else if (a->fallback.n) {
    printf("           unclaimed (-> CPU):\n");
    for (size_t i = 0; i < a->fallback.n; i++)
      printf("             - %s: %s\n", a->fallback.v[i].key, a->fallback.v[i].note ? a->fallback.v[i].note : "");
  }
  printf("  compute: decode=%lld prefill=%lld general=%lld eager=%lld  (cache: %lld HIT / %lld MISS / %lld RETRACE)\n",
         a->path[0], a->path[1], a->path[2], a->path[3], a->cache[0], a->cache[1], a->cache[2]);
  if (a->path[4]) printf("           other paths: %lld\n", a->path[4]);
  if (a->n_summary) {
    char b1[32], b2[32], b3[32], b4[32];
    fmt_bytes(b1, sizeof b1, a->wrap_b);
    fmt_bytes(b2, sizeof b2, a->cwrap_b);
    fmt_bytes(b3, sizeof b3, a->delta_b);
    fmt_bytes(b4, sizeof b4, a->full_b);
    printf("  memory:  zero-copy wrap %lld (%s); copy-wrap %lld (%s); copy-out delta %lld (%s) vs full %lld (%s)\n",
           a->wrap_n, b1, a->cwrap_n, b2, a->delta_n, b3, a->full_n, b4);
  } else {
    printf("  memory:  (no fusebox.session_summary event in this file)\n");
  }
  printf("  timing: ");
  static const char *const phases[] = {"translate", "compile", "eval", "copy"};
  // phase spans when the file has them, else the teardown summaries' totals
  const tally_set *ps = a->phases.n ? &a->phases : &a->sum_phases;
  for (int p = 0; p < 4; p++) {
    double us = 0;
    long long n = 0;
    for (size_t i = 0; i < ps->n; i++)
      if (!strcmp(ps->v[i].key, phases[p])) {
        us = ps->v[i].us;
        n = ps->v[i].n;
      }
    printf(" %s=%.1fus (%lld call%s)", phases[p], us, n, n == 1 ? "" : "s");
  }
  printf("\n  kernels: fast=%lld composed=%lld\n", a->fast, a->composed);
  for (size_t i = 0; i < a->composed_ops.n; i++)
    printf("           composed: %s x%lld: %s\n", a->composed_ops.v[i].key, a->composed_ops.v[i].n,
           a->composed_ops.v[i].note ? a->composed_ops.v[i].note : "");
  // device time first when the trace has a GPU track: the per-node op.device slices
  if (a->dev_ops.n) {
    double dtotal = 0;
    for (size_t i = 0; i < a->dev_ops.n; i++) dtotal += a->dev_ops.v[i].us;
    printf("  device:  %lld device-side eval(s): span %.1fus = busy %.1fus + idle (host-bound) %.1fus (%.1f%%); "
           "op.device slices %.1fus\n",
           a->dev_evals, a->dev_span_us, a->dev_busy_us, a->dev_idle_us,
           a->dev_span_us > 0 ? 100.0 * a->dev_idle_us / a->dev_span_us : 0.0, dtotal);
    qsort(a->dev_ops.v, a->dev_ops.n, sizeof *a->dev_ops.v, tally_by_time);
    printf("  slowest ops (device time, from the GPU track's op.device slices; %% of their sum):\n");
    for (size_t i = 0; i < a->dev_ops.n && (int)i < top; i++) {
      const tally *t = &a->dev_ops.v[i];
      bool pseudo = !strcmp(t->key, "(no node)") || !strcmp(t->key, "CUDAGraphReplay");
      printf("    %2zu. %-28s %12.1fus %5.1f%%  %lld slice%s%s\n", i + 1, t->key, t->us,
             dtotal > 0 ? 100.0 * t->us / dtotal : 0.0, t->n, t->n == 1 ? "" : "s",
             pseudo ? "  (not a node)" : "");
    }
  }
  // top ops from the per-node spans
  double total = 0;
  for (size_t i = 0; i < a->ops.n; i++) total += a->ops.v[i].us;
  if (a->ops.n) {
    qsort(a->ops.v, a->ops.n, sizeof *a->ops.v, tally_by_time);
    printf("  slowest ops %s(from per-node spans; span times are host-side unless marked with a device):\n",
           a->dev_ops.n ? "in host time " : "");
    for (size_t i = 0; i < a->ops.n && (int)i < top; i++)
      printf("    %2zu. %-28s %12.1fus %5.1f%%  %lld call%s%s%s\n", i + 1, a->ops.v[i].key, a->ops.v[i].us,
             total > 0 ? 100.0 * a->ops.v[i].us / total : 0.0, a->ops.v[i].n, a->ops.v[i].n == 1 ? "" : "s",
             a->ops.v[i].note ? " on " : "", a->ops.v[i].note ? a->ops.v[i].note : "");
  }
  if (a->slowest) {
    json_t *args = json_object_get(a->slowest, "args");
    json_t *ops = json_object_get(args, "ops");
    const char *kind = sget(args, "time");
    if (kind && !strcmp(kind, "none")) printf("  slowest ops recorded at teardown: none (no op timings)\n");
    else printf("  slowest ops recorded at teardown (%s time):\n", kind ? kind : "?");
    size_t i;
    json_t *o;
    json_array_foreach(ops, i, o) {
      if ((int)i >= top) break;
      printf("    %2zu. %-28s %12.1fus %5.1f%%  %lld call%s%s\n", i + 1, sget(o, "op") ? sget(o, "op") : "?",
             json_number_value(json_object_get(o, "us")), json_number_value(json_object_get(o, "pct")),
             iget(o, "calls"), iget(o, "calls") == 1 ? "" : "s", json_is_true(json_object_get(o, "device")) ? " [device]" : "");
    }
  }
  if (a->providers.n) {
    printf("  ORT node placement (kernel_time events):");
    for (size_t i = 0; i < a->providers.n; i++)
      printf(" %s=%lld (%.1fus)", a->providers.v[i].key, a->providers.v[i].n, a->providers.v[i].us);
    printf("\n");
  }
}

static int summarize(const char *file, int top) {
  json_error_t err;
  json_t *root = json_load_file(file, 0, &err);
  if (!root) {
    fprintf(stderr, "fusebox trace: %s:%d: %s\n", file, err.line, err.text);
    return 1;
  }
  json_t *events = json_is_array(root) ? root : json_object_get(root, "traceEvents");
  if (!json_is_array(events)) {
    fprintf(stderr, "fusebox trace: %s: neither a trace ({\"traceEvents\":[...]}) nor an ORT profile (an array)\n", file);
    json_decref(root);
    return 1;
  }
  agg a;
  memset(&a, 0, sizeof a);
  json_t *fb = json_is_object(root) ? json_object_get(root, "otherData") : NULL;
  if (fb) {
    a.have_trailer = 1;
    a.dropped = iget(fb, "dropped_events");
    a.max_events = iget(fb, "max_events");
  }
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) add_event(&a, e);
  if (!a.ops.n) {
    tally_set t = a.ops;
    a.ops = a.kops;
    a.kops = t;
  }
  print_summary(&a, file, top);
  tally_free(&a.fallback);
  tally_free(&a.phases);
  tally_free(&a.ops);
  tally_free(&a.kops);
  tally_free(&a.dev_ops);
  tally_free(&a.composed_ops);
  tally_free(&a.providers);
  tally_free(&a.sum_unclaimed);
  tally_free(&a.sum_phases);
  json_decref(root);
  return 0;
}

static int usage(void) {
  fprintf(stderr,
          "usage: fusebox trace summarize FILE.json [--top N]\n"
          "  FILE.json: a FUSEBOX_TRACE file, or an ONNX Runtime profile holding Fusebox events\n");
  return 2;
}

int fbx_cmd_trace(int argc, char **argv) {
  if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    usage();
    return 0;
  }
  if (argc < 3 || strcmp(argv[1], "summarize")) return usage();
  const char *file = NULL;
  int top = 10;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--top") && i + 1 < argc) {
      top = atoi(argv[++i]);
      if (top <= 0) return usage();
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage();
      return 0;
    } else if (!file) {
      file = argv[i];
    } else {
      return usage();
    }
  }
  if (!file) return usage();
  return summarize(file, top);
}
