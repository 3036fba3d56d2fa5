// cmd_check_all.c — `fusebox check --all-tensors MODEL`: compare every intermediate value of
// the main graph between Fusebox and ORT's CPU EP and name the first node, in graph order,
// whose output diverges beyond tolerance.
//
// How: the model is rewritten so that every node output is also a graph output (onnx_wire.c),
// both sessions run the rewritten copy on the same inputs, and the values are compared in the
// model's node order (ONNX requires it to be topological, so the first divergent node is one
// whose inputs still agree). Making a value a graph output forces Fusebox to materialise it, so
// a divergence that exists only inside a fused chain may move or vanish; the tool says whether
// the original outputs diverge too (the plain `fusebox check`).
#include "cmd_check_all.h"

#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnx_wire.h"

// One compared value: a node output.
typedef struct ca_value {
  const char *name;  // points into the graph
  size_t node;       // producing node (index in graph order)
  int state;         // CA_*
  fbx_host_cmp cmp;
  double atol;       // the absolute tolerance used: atol * max(1, max |ref|)
  size_t worst;      // the element furthest beyond tolerance (CA_BAD)
  const fbx_host_tensor *got, *ref;
} ca_value;

enum { CA_UNSEEN = 0, CA_OK, CA_BAD, CA_MISSING };

// Outputs that are not tensors cannot be fetched as graph outputs: leave them out.
static int ca_tensor_op(const fbx_wire_node *nd) {
  return strncmp(nd->op_type, "Sequence", 8) != 0 && strcmp(nd->op_type, "SplitToSequence") != 0 &&
         strncmp(nd->op_type, "Optional", 8) != 0;
}

static int ca_in(char *const *names, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], s) == 0) return 1;
  return 0;
}

static const fbx_host_tensor *ca_find(const fbx_host_tensor *ts, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (ts[i].name && strcmp(ts[i].name, name) == 0) return &ts[i];
  return NULL;
}

static ca_value *ca_value_find(ca_value *v, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].name, name) == 0) return &v[i];
  return NULL;
}

// The distinct kernel variants the trace records for node `name` ("" if none), into buf.
static void ca_trace_variants(const char *trace, const char *name, char *buf, size_t cap) {
  buf[0] = 0;
  json_error_t jerr;
  json_t *root = name[0] ? json_load_file(trace, 0, &jerr) : NULL;
  json_t *evs = root ? json_object_get(root, "traceEvents") : NULL;
  size_t i, o = 0;
  json_t *e;
  json_array_foreach(evs, i, e) {
    const char *cat = json_string_value(json_object_get(e, "cat"));
    json_t *args = json_object_get(e, "args");
    const char *node = json_string_value(json_object_get(args, "node"));
    const char *var = json_string_value(json_object_get(args, "kernel_variant"));
    if (!cat || strcmp(cat, "op") != 0 || !node || strcmp(node, name) != 0 || !var || !*var) continue;
    const char *why = json_string_value(json_object_get(args, "kernel_variant_reason"));
    char one[256];
    snprintf(one, sizeof one, "%s%s%s%s", var, why && *why ? " (" : "", why && *why ? why : "",
             why && *why ? ")" : "");
    if (strstr(buf, one)) continue;
    o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, "%s%s", o ? "; " : "", one);
    if (o >= cap) break;
  }
  json_decref(root);
}

// The EP ORT assigned node `name` to ("?" if unknown).
static const char *ca_node_ep(const fbx_host_assign *a, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (a[i].node && a[i].ep && strcmp(a[i].node, name) == 0) return a[i].ep;
  return "?";
}

// One line: lead, the value's name, its errors.
static void ca_print_value(const char *lead, const ca_value *v) {
  char sa[128];
  printf("%s%s", lead, v->name);
  if (v->state == CA_MISSING) {
    printf(": not returned by one of the sessions\n");
    return;
  }
  if (v->cmp.shape_mismatch) {
    char sb[128];
    printf(": shape/dtype Fusebox %s[%s] vs ORT %s[%s]\n", fbx_host_dtype_name(v->got->dtype),
           fbx_host_shape_str(v->got->rank, v->got->dims, sa, sizeof sa), fbx_host_dtype_name(v->ref->dtype),
           fbx_host_shape_str(v->ref->rank, v->ref->dims, sb, sizeof sb));
    return;
  }
  printf(" %s[%s]: max_abs %.3g max_rel %.3g", fbx_host_dtype_name(v->ref->dtype),
         fbx_host_shape_str(v->ref->rank, v->ref->dims, sa, sizeof sa), v->cmp.max_abs, v->cmp.max_rel);
  if (v->state == CA_BAD)
    printf("  (%zu/%zu beyond tolerance, atol %.3g; worst at %zu: Fusebox %.9g vs ORT %.9g)", v->cmp.n_bad,
           v->cmp.numel, v->atol, v->worst, fbx_host_tensor_get(v->got, v->worst),
           fbx_host_tensor_get(v->ref, v->worst));
  printf("\n");
}

// Compare one value. The absolute tolerance grows with the tensor's scale (max |ref|, at least
// 1): an intermediate value's rounding differences come from sums whose terms are that large,
// so a fixed atol would flag cancellations near zero in every big convolution.
static void ca_compare(ca_value *v, double rtol, double atol) {
  double scale = 1;
  size_t n = fbx_host_tensor_numel(v->ref);
  for (size_t i = 0; i < n && v->ref->dtype != FBX_HOST_BOOL; i++) {
    double y = fabs(fbx_host_tensor_get(v->ref, i));
    if (isfinite(y) && y > scale) scale = y;
  }
  v->atol = atol * scale;
  v->state = fbx_host_compare(v->got, v->ref, rtol, v->atol, &v->cmp) ? CA_OK : CA_BAD;
  if (v->state != CA_BAD || v->cmp.shape_mismatch) return;
  // The worst element: a NaN/inf mismatch, else the largest |a-b| / (atol + rtol |b|).
  double worst = -1;
  for (size_t i = 0; i < n; i++) {
    double a = fbx_host_tensor_get(v->got, i), b = fbx_host_tensor_get(v->ref, i);
    double r = isnan(a) != isnan(b) || (!isnan(a) && !isnan(b) && (isinf(a) || isinf(b)) && a != b)
                   ? INFINITY
                   : isnan(a) ? 0 : fabs(a - b) / (v->atol + rtol * fabs(b));
    if (r > worst) {
      worst = r;
      v->worst = i;
    }
    if (isinf(r)) break;
  }
}

// Write buf to a fresh file in $TMPDIR (path into `path`). 0 on success.
static int ca_write_tmp(const unsigned char *buf, size_t n, char *path, size_t cap) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, cap, "%s/fusebox_all_tensors_XXXXXX.onnx", dir && *dir ? dir : "/tmp");
  int fd = mkstemps(path, 5);
  if (fd < 0) return -1;
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(fd, buf + off, n - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  close(fd);
  if (off != n) {
    unlink(path);
    return -1;
  }
  return 0;
}

// Destroy the Fusebox session; with our own trace, its teardown summary goes to /dev/null
// (the user asked for a divergence report, not a session summary).
static void ca_session_destroy_quiet(fbx_host_session *s, int quiet) {
  int saved = -1, devnull = -1;
  if (quiet) {
    fflush(stderr);
    saved = dup(2);
    devnull = open("/dev/null", O_WRONLY);
    if (saved >= 0 && devnull >= 0) dup2(devnull, 2);
  }
  fbx_host_session_destroy(s);
  if (saved >= 0) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
  }
  if (devnull >= 0) close(devnull);
}

int fbx_cmd_check_all_tensors(fbx_cli *c, double rtol, double atol, int verbose) {
  int rc = 1;
  unsigned char *buf = NULL, *rew = NULL;
  size_t n_buf = 0, n_rew = 0;
  fbx_wire_graph g;
  memset(&g, 0, sizeof g);
  char **extra = NULL;
  size_t n_extra = 0, n_vals = 0;
  ca_value *vals = NULL;
  char tmp_model[4096] = "", tmp_trace[4096] = "";
  fbx_host_session *sf = NULL, *sc = NULL;
  fbx_host_tensor *ins = NULL, *ref = NULL, *got = NULL;
  size_t n_in = 0, n_ref = 0, n_got = 0, n_assign = 0;
  fbx_host_assign *assign = NULL;
  const char *model = c->model;
  int own_trace = 0;          // 1: FUSEBOX_TRACE is a temporary file of ours
  size_t cap_vals = 0;
  char *err = fbx_wire_file_read(model, &buf, &n_buf);
  if (!err) err = fbx_wire_graph_read(buf, n_buf, &g);
  if (!err && g.external_data)
    err = fbx_host_errf("initializers with external data are not supported by --all-tensors yet");
  if (err) goto fail;

  // The values to compare: every named node output, in graph order.
  cap_vals = g.n_nodes + 8;
  vals = calloc(cap_vals, sizeof *vals);
  extra = calloc(cap_vals, sizeof *extra);
  if (!vals || !extra) {
    err = fbx_host_errf("out of memory");
    goto fail;
  }
  for (size_t i = 0; i < g.n_nodes; i++) {
    const fbx_wire_node *nd = &g.nodes[i];
    if (!ca_tensor_op(nd)) continue;
    for (size_t k = 0; k < nd->n_outputs; k++) {
      const char *o = nd->outputs[k];
      if (!o[0] || ca_value_find(vals, n_vals, o)) continue;
      if (n_vals == cap_vals) {
        size_t nc = cap_vals * 2 + 8;
        ca_value *nv = realloc(vals, nc * sizeof *nv);
        char **ne = nv ? realloc(extra, nc * sizeof *ne) : NULL;
        if (nv) vals = nv;
        if (ne) extra = ne;
        if (!nv || !ne) {
          err = fbx_host_errf("out of memory");
          goto fail;
        }
        cap_vals = nc;
      }
      memset(&vals[n_vals], 0, sizeof vals[0]);
      vals[n_vals].name = o;
      vals[n_vals++].node = i;
      if (!ca_in(g.outputs, g.n_outputs, o)) extra[n_extra++] = (char *)o;
    }
  }
  if ((err = fbx_wire_model_add_outputs(buf, n_buf, extra, n_extra, &rew, &n_rew))) goto fail;
  if (ca_write_tmp(rew, n_rew, tmp_model, sizeof tmp_model)) {
    err = fbx_host_errf("cannot write the rewritten model to %s", tmp_model);
    tmp_model[0] = 0;
    goto fail;
  }

  // The kernel variants come from a trace of the Fusebox run: ours, unless the user set one.
  const char *user_trace = getenv("FUSEBOX_TRACE");
  if (!(user_trace && *user_trace)) {
    const char *dir = getenv("TMPDIR");
    snprintf(tmp_trace, sizeof tmp_trace, "%s/fusebox_all_tensors_XXXXXX.json", dir && *dir ? dir : "/tmp");
    int fd = mkstemps(tmp_trace, 5);
    if (fd >= 0) {
      close(fd);
      setenv("FUSEBOX_TRACE", tmp_trace, 1);
      own_trace = 1;
    } else {
      tmp_trace[0] = 0;
    }
  } else {
    snprintf(tmp_trace, sizeof tmp_trace, "%s", user_trace);
  }

  c->model = tmp_model;
  sc = fbx_cli_session(c, 0, 0);
  sf = sc ? fbx_cli_session(c, 1, 1) : NULL;
  c->model = model;
  if (!sc || !sf) goto out;  // message printed
  if (fbx_cli_inputs(c, sf, &ins, &n_in)) goto out;
  printf("model %s (ORT %s): %zu nodes, %zu values compared in graph order (rtol %g, atol %g)\n",
         model, fbx_host_ort_version(c->host), g.n_nodes, n_vals, rtol, atol);
  for (size_t i = 0; i < n_in; i++) {
    printf("  input  ");
    fbx_cli_print_shape(&ins[i]);
    printf("\n");
  }
  if ((err = fbx_host_session_run(sc, ins, n_in, &ref, &n_ref))) {
    fprintf(stderr, "%s: ORT CPU run: %s\n", c->prog, err);
    goto out;
  }
  if ((err = fbx_host_session_run(sf, ins, n_in, &got, &n_got))) {
    fprintf(stderr, "%s: Fusebox run: %s\n", c->prog, err);
    goto out;
  }
  char *aerr = fbx_host_session_assignment(sf, &assign, &n_assign);
  fbx_host_err_free(aerr);  // placement is extra information; without it the EP prints "?"
  ca_session_destroy_quiet(sf, own_trace);
  sf = NULL;

  // Compare in graph order.
  size_t first_bad = (size_t)-1, last_bad = (size_t)-1, n_bad_nodes = 0;
  for (size_t i = 0; i < n_vals; i++) {
    ca_value *v = &vals[i];
    v->got = ca_find(got, n_got, v->name);
    v->ref = ca_find(ref, n_ref, v->name);
    if (!v->got || !v->ref) v->state = CA_MISSING;
    else ca_compare(v, rtol, atol);
    if (v->state != CA_OK && v->node != last_bad) {  // a node counts once (values are in node order)
      if (first_bad == (size_t)-1) first_bad = v->node;
      last_bad = v->node;
      n_bad_nodes++;
    }
    if (verbose) {
      char lead[512];
      snprintf(lead, sizeof lead, "  [%zu] %s (%s): ", v->node, g.nodes[v->node].name,
               g.nodes[v->node].op_type);
      ca_print_value(lead, v);
    }
  }
  if (first_bad == (size_t)-1) {
    printf("no divergent node: all %zu values within tolerance\nPASS (rtol %g, atol %g)\n", n_vals,
           rtol, atol);
    rc = 0;
    goto out;
  }
  const fbx_wire_node *nd = &g.nodes[first_bad];
  char variants[1024];
  ca_trace_variants(tmp_trace, nd->name, variants, sizeof variants);
  printf("first divergent node: %s (%s%s%s), node %zu of %zu in graph order\n", nd->name[0] ? nd->name : "<unnamed>",
         nd->domain, nd->domain[0] ? "::" : "", nd->op_type, first_bad + 1, g.n_nodes);
  printf("  ran on:  %s\n", ca_node_ep(assign, n_assign, nd->name));
  printf("  kernel:  %s\n", variants[0] ? variants : "(not in the trace: not a Fusebox node, or unnamed)");
  printf("  outputs:\n");
  for (size_t i = 0; i < n_vals; i++)
    if (vals[i].node == first_bad) ca_print_value("    output ", &vals[i]);
  printf("  inputs:\n");
  for (size_t k = 0; k < nd->n_inputs; k++) {
    const char *in = nd->inputs[k];
    ca_value *v = in[0] ? ca_value_find(vals, n_vals, in) : NULL;
    if (v) {
      ca_print_value("    input  ", v);
    } else {
      const char *kind = !in[0] ? "(omitted)" : ca_in(g.initializers, g.n_initializers, in) ? "initializer (same data)"
                         : ca_in(g.inputs, g.n_inputs, in)                                 ? "graph input (same data)"
                                                                                          : "not compared";
      printf("    input  %s: %s\n", in[0] ? in : "-", kind);
    }
  }
  printf("%zu node(s) diverge in all; the next ones:", n_bad_nodes);
  size_t shown = 0, last = first_bad;
  for (size_t i = 0; i < n_vals && shown < 8; i++)
    if (vals[i].state != CA_OK && vals[i].node != last) {
      last = vals[i].node;
      printf(" %s (%s)", g.nodes[last].name, g.nodes[last].op_type);
      shown++;
    }
  printf("%s\nFAIL (rtol %g, atol %g)\n", shown ? "" : " none", rtol, atol);
  goto out;

fail:
  fprintf(stderr, "%s: %s\n", c->prog, err);
out:
  fbx_host_err_free(err);
  fbx_host_assign_free(assign, n_assign);
  fbx_host_tensors_free(ins, n_in);
  fbx_host_tensors_free(ref, n_ref);
  fbx_host_tensors_free(got, n_got);
  if (sf) ca_session_destroy_quiet(sf, own_trace);
  fbx_host_session_destroy(sc);
  if (tmp_model[0]) unlink(tmp_model);
  if (own_trace) unlink(tmp_trace);
  free(vals);
  free(extra);
  free(rew);
  free(buf);
  fbx_wire_graph_free(&g);
  return rc;
}
