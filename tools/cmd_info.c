// cmd_info.c — `fusebox info MODEL`: the claim report.
//
// The EP reports its claim decisions as the trace instant `fusebox.getcapability` (cat "ep";
// args claimed, total, fused_subgraphs, fallback_<OpType> = "<count>x: <reason> [<nodes>]").
// FUSEBOX_TRACE is read by the EP once, so it is set here before the first session exists.
// ORT's own placement (Session_GetEpGraphAssignmentInfo) is printed beside it as a cross-check.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmds.h"

static const char kUsage[] =
    "usage: fusebox info MODEL [--min-claimed PCT] [--keep-trace]\n"
    "  Creates a Fusebox session with tracing on and prints how many nodes Fusebox claimed,\n"
    "  in how many fused subgraphs, and every op type it left to ORT's CPU EP with the reason\n"
    "  and node names; then ORT's own view of the placement.\n"
    "  --min-claimed PCT  exit 1 when fewer than PCT percent of the nodes are claimed\n"
    "  --keep-trace       keep the temporary trace file (its path is printed)\n";

typedef struct {
  double min_claimed;
  int keep;
} info_opts;

static int info_opt(void *ctx, const char *opt, const char *val) {
  info_opts *o = ctx;
  if (strcmp(opt, "--min-claimed") == 0) {
    if (fbx_cli_parse_double(val, &o->min_claimed) != 0) {
      fprintf(stderr, "fusebox info: --min-claimed needs a number\n");
      return -1;
    }
    return 2;
  }
  if (strcmp(opt, "--keep-trace") == 0) {
    o->keep = 1;
    return 1;
  }
  return 0;
}

// The last fusebox.getcapability instant of the trace (a new reference) or NULL.
static json_t *info_find_capability(const char *path, char *why, size_t cap) {
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  if (!root) {
    snprintf(why, cap, "cannot parse trace %s: %s (line %d)", path, jerr.text, jerr.line);
    return NULL;
  }
  json_t *events = json_is_array(root) ? root : json_object_get(root, "traceEvents");
  json_t *found = NULL;
  size_t i;
  json_t *ev;
  json_array_foreach(events, i, ev) {
    const char *name = json_string_value(json_object_get(ev, "name"));
    if (name && strcmp(name, "fusebox.getcapability") == 0) found = json_object_get(ev, "args");
  }
  if (found) json_incref(found);
  else snprintf(why, cap, "no fusebox.getcapability event in %s", path);
  json_decref(root);
  return found;
}

static long long info_int(json_t *args, const char *key) {
  json_t *v = json_object_get(args, key);
  if (json_is_integer(v)) return json_integer_value(v);
  if (json_is_real(v)) return (long long)json_real_value(v);
  if (json_is_string(v)) return atoll(json_string_value(v));
  return -1;
}

static void info_print_ort_view(const fbx_host_assign *nodes, size_t n, const char *err) {
  if (err) {
    printf("ORT's view: unavailable (%s)\n", err);
    return;
  }
  size_t mine = 0;
  for (size_t i = 0; i < n; i++) mine += strcmp(nodes[i].ep, FBX_HOST_EP_NAME) == 0;
  printf("ORT's view: %zu/%zu nodes assigned to %s (%.1f%%) "
         "(after ORT's graph optimizations, so counts may differ)\n",
         mine, n, FBX_HOST_EP_NAME, n ? 100.0 * (double)mine / (double)n : 0.0);
  // op types ORT placed elsewhere
  for (size_t i = 0; i < n; i++) {
    if (strcmp(nodes[i].ep, FBX_HOST_EP_NAME) == 0) continue;
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++)
      seen = strcmp(nodes[j].ep, FBX_HOST_EP_NAME) != 0 && strcmp(nodes[j].op_type, nodes[i].op_type) == 0 &&
             strcmp(nodes[j].domain, nodes[i].domain) == 0;
    if (seen) continue;
    size_t cnt = 0;
    for (size_t j = i; j < n; j++)
      cnt += strcmp(nodes[j].ep, FBX_HOST_EP_NAME) != 0 && strcmp(nodes[j].op_type, nodes[i].op_type) == 0 &&
             strcmp(nodes[j].domain, nodes[i].domain) == 0;
    printf("  - %s%s%s x%zu on %s\n", nodes[i].domain, *nodes[i].domain ? "." : "", nodes[i].op_type, cnt,
           nodes[i].ep);
  }
}

int fbx_cmd_info(int argc, char **argv) {
  fbx_cli c;
  info_opts o = {-1, 0};
  int rc = fbx_cli_parse(&c, "fusebox info", argc, argv, kUsage, info_opt, &o, 1);
  if (rc) return rc == 1 ? 0 : 2;

  char tmp[] = "/tmp/fusebox_info_XXXXXX.json";
  const char *trace = getenv("FUSEBOX_TRACE");
  int own_trace = 0;
  if (!trace || !*trace) {
    int fd = mkstemps(tmp, 5);
    if (fd < 0) {
      perror("fusebox info: mkstemps");
      return 1;
    }
    close(fd);
    setenv("FUSEBOX_TRACE", tmp, 1);  // before the first session: the EP reads it once
    trace = tmp;
    own_trace = 1;
  }
  if (fbx_cli_open(&c)) {
    if (own_trace) unlink(tmp);
    return 1;
  }
  rc = 1;
  fbx_host_session *s = fbx_cli_session(&c, 1, 1);
  if (!s) goto out;
  printf("model %s (ORT %s)\n", c.model, fbx_host_ort_version(c.host));
  fbx_host_assign *nodes = NULL;
  size_t n_nodes = 0;
  char *assign_err = fbx_host_session_assignment(s, &nodes, &n_nodes);
  fbx_host_session_destroy(s);  // the trace is valid JSON after every session teardown
  s = NULL;

  char why[512];
  json_t *args = info_find_capability(trace, why, sizeof why);
  double pct = -1;
  if (!args) {
    printf("Fusebox's view: unavailable (%s)\n", why);
  } else {
    long long claimed = info_int(args, "claimed"), total = info_int(args, "total");
    long long fused = info_int(args, "fused_subgraphs");
    pct = total > 0 ? 100.0 * (double)claimed / (double)total : 0.0;
    printf("claimed %lld/%lld nodes (%.1f%%) in %lld fused subgraph(s)\n", claimed, total, pct, fused);
    const char *key;
    json_t *v;
    int any = 0;
    json_object_foreach(args, key, v) {
      if (strncmp(key, "fallback_", 9) != 0) continue;
      if (!any) printf("unclaimed (-> ORT CPU EP):\n");
      any = 1;
      printf("  - %s %s\n", key + 9, json_is_string(v) ? json_string_value(v) : "?");
    }
    json_decref(args);
  }
  info_print_ort_view(nodes, n_nodes, assign_err);
  fbx_host_assign_free(nodes, n_nodes);
  fbx_host_err_free(assign_err);
  if (pct < 0) rc = 1;
  else if (o.min_claimed >= 0 && pct < o.min_claimed) {
    printf("FAIL: %.1f%% claimed < %.1f%% required\n", pct, o.min_claimed);
    rc = 1;
  } else {
    rc = 0;
  }
out:
  fbx_host_session_destroy(s);
  fbx_cli_close(&c);
  if (own_trace) {
    if (o.keep) printf("trace kept: %s\n", tmp);
    else unlink(tmp);
  }
  return rc;
}
