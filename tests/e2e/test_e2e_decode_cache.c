// test_e2e_decode_cache: a 64-step greedy decode of models/gen/decoder_tiny.onnx through Fusebox
// with FUSEBOX_TRACE on, checked step by step against ORT's CPU EP, then a second prompt of
// another length (prefill only). From the trace:
//   - the decoder subgraph's decode path: exactly 1 MISS + 63 HIT + 0 RETRACE
//   - its prefill path: 2 MISS (two prompt lengths), no RETRACE
//   - every fusebox.compute[decode] instant: path "decode", no RETRACE.
// Per-subgraph counts come from the `fusebox.subgraph` spans (args subgraph/path/cache).
// Env: FUSEBOX_ORT_LIB / FUSEBOX_EP_LIB as for every ort_host program.
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ort_host.h"
#include "common/ort_host_decode.h"

#define DECODE_STEPS 64
#define PROMPT_A 7
#define PROMPT_B 12

#include "common/check.h"

static char *step_both(fbx_host_decoder *f, fbx_host_decoder *c, const int64_t *ids, int64_t n,
                       int step, double *worst) {
  char *err = fbx_host_decoder_step(f, ids, n);
  if (!err) err = fbx_host_decoder_step(c, ids, n);
  if (err) return err;
  fbx_host_cmp r;
  int ok = fbx_host_compare(&f->logits, &c->logits, 1e-3, 1e-4, &r);
  if (r.max_abs > *worst) *worst = r.max_abs;
  CHECK(ok, "step %d: logits differ from ORT CPU (max_abs %.3g, %zu bad, shape mismatch %d)", step,
        r.max_abs, r.n_bad, r.shape_mismatch);
  for (int i = 0; i < 2 * f->n_layers; i++) {
    int okp = fbx_host_compare(&f->past[i], &c->past[i], 1e-3, 1e-4, &r);
    CHECK(okp, "step %d: %s differs from ORT CPU (max_abs %.3g)", step, f->past[i].name, r.max_abs);
  }
  return NULL;
}

typedef struct {
  char name[256];
  int n[2][3];  // [decode, prefill][MISS, HIT, RETRACE]
} sg_count;

static int cache_index(const char *c) {
  return !c ? -1 : strcmp(c, "MISS") == 0 ? 0 : strcmp(c, "HIT") == 0 ? 1 : strcmp(c, "RETRACE") == 0 ? 2 : -1;
}

static void check_trace(const char *path) {
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  CHECK(root != NULL, "trace %s is not valid JSON: %s (line %d)", path, jerr.text, jerr.line);
  if (!root) return;
  json_t *events = json_is_array(root) ? root : json_object_get(root, "traceEvents");
  sg_count sgs[64];
  int n_sg = 0, inst[3] = {0, 0, 0}, n_inst = 0, bad_path = 0;
  memset(sgs, 0, sizeof sgs);
  size_t i;
  json_t *ev;
  json_array_foreach(events, i, ev) {
    const char *name = json_string_value(json_object_get(ev, "name"));
    json_t *args = json_object_get(ev, "args");
    if (!name || !args) continue;
    const char *p = json_string_value(json_object_get(args, "path"));
    int ci = cache_index(json_string_value(json_object_get(args, "cache")));
    if (strcmp(name, "fusebox.compute[decode]") == 0) {
      n_inst++;
      if (!p || strcmp(p, "decode") != 0) bad_path++;
      if (ci >= 0) inst[ci]++;
    } else if (strcmp(name, "fusebox.subgraph") == 0 && p && ci >= 0) {
      int pi = strcmp(p, "decode") == 0 ? 0 : strcmp(p, "prefill") == 0 ? 1 : -1;
      const char *sg = json_string_value(json_object_get(args, "subgraph"));
      if (pi < 0) continue;
      int k;
      for (k = 0; k < n_sg; k++)
        if (strcmp(sgs[k].name, sg ? sg : "") == 0) break;
      if (k == n_sg && n_sg < 64) snprintf(sgs[n_sg++].name, sizeof sgs[0].name, "%s", sg ? sg : "");
      if (k < 64) sgs[k].n[pi][ci]++;
    }
  }
  json_decref(root);
  printf("trace: %d fusebox.compute[decode] instant(s): %d MISS / %d HIT / %d RETRACE\n", n_inst, inst[0],
         inst[1], inst[2]);
  CHECK(n_inst >= DECODE_STEPS, "expected >= %d fusebox.compute[decode] instants, got %d", DECODE_STEPS, n_inst);
  CHECK(bad_path == 0, "%d decode instants with args.path != decode", bad_path);
  CHECK(inst[2] == 0, "decode instants report %d RETRACE", inst[2]);
  // The decoder subgraph: the one with the most decode runs.
  int best = -1;
  for (int k = 0; k < n_sg; k++) {
    int tot = sgs[k].n[0][0] + sgs[k].n[0][1] + sgs[k].n[0][2];
    printf("  subgraph %s: decode %d MISS / %d HIT / %d RETRACE; prefill %d MISS / %d HIT / %d RETRACE\n",
           sgs[k].name, sgs[k].n[0][0], sgs[k].n[0][1], sgs[k].n[0][2], sgs[k].n[1][0], sgs[k].n[1][1],
           sgs[k].n[1][2]);
    if (best < 0 || tot > sgs[best].n[0][0] + sgs[best].n[0][1] + sgs[best].n[0][2]) best = k;
  }
  if (best < 0) {
    // No subgraph spans: assume a single fused subgraph and use the instants.
    CHECK(inst[0] == 1 && inst[1] == DECODE_STEPS - 1,
          "decode instants: want 1 MISS + %d HIT, got %d MISS + %d HIT", DECODE_STEPS - 1, inst[0], inst[1]);
    return;
  }
  sg_count *s = &sgs[best];
  CHECK(s->n[0][0] == 1 && s->n[0][1] == DECODE_STEPS - 1 && s->n[0][2] == 0,
        "decoder subgraph %s decode: want 1 MISS + %d HIT + 0 RETRACE, got %d + %d + %d", s->name,
        DECODE_STEPS - 1, s->n[0][0], s->n[0][1], s->n[0][2]);
  CHECK(s->n[1][0] == 2 && s->n[1][2] == 0,
        "decoder subgraph %s prefill: want 2 MISS (two prompt lengths) + 0 RETRACE, got %d MISS %d RETRACE",
        s->name, s->n[1][0], s->n[1][2]);
}

int main(void) {
  char model[PATH_MAX];
  if (fbx_host_find_repo_file("models/gen/decoder_tiny.onnx", model, sizeof model) != 0) {
    fprintf(stderr, "FAIL: models/gen/decoder_tiny.onnx not found (run scripts/make_models.sh)\n");
    return 1;
  }
  char trace[] = "/tmp/fbx_e2e_decode_XXXXXX.json";
  int fd = mkstemps(trace, 5);
  if (fd < 0) return 1;
  close(fd);
  setenv("FUSEBOX_TRACE", trace, 1);  // before the first session: the EP reads it once

  fbx_host *h = NULL;
  fbx_host_session *sf = NULL, *sc = NULL;
  fbx_host_decoder df, dc;
  memset(&df, 0, sizeof df);
  memset(&dc, 0, sizeof dc);
  double worst = 0;
  char *err = fbx_host_open(NULL, NULL, &h);
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.intra_threads = 1;
  if (!err) err = fbx_host_session_create(h, model, &o, &sc);
  o.use_fusebox = 1;
  if (!err) err = fbx_host_session_create(h, model, &o, &sf);
  if (!err) err = fbx_host_decoder_init(&df, sf);
  if (!err) err = fbx_host_decoder_init(&dc, sc);
  if (!err) printf("ORT %s, %s: %d layers\n", fbx_host_ort_version(h), model, df.n_layers);

  // prompt A: prefill + 64 decode steps, greedy on the ORT CPU tokens (same feed for both)
  int64_t prompt[PROMPT_B];
  for (int i = 0; i < PROMPT_B; i++) prompt[i] = (i * 37 + 11) % 200;
  if (!err) err = step_both(&df, &dc, prompt, PROMPT_A, 0, &worst);
  int64_t tok = err ? 0 : fbx_host_decoder_argmax(&dc);
  int same_tokens = 1;
  for (int s = 1; s <= DECODE_STEPS && !err; s++) {
    same_tokens &= fbx_host_decoder_argmax(&df) == tok;
    err = step_both(&df, &dc, &tok, 1, s, &worst);
    tok = fbx_host_decoder_argmax(&dc);
  }
  CHECK(err || same_tokens, "greedy tokens differ between Fusebox and ORT CPU");
  // prompt B: another length, prefill only
  if (!err) err = fbx_host_decoder_reset(&df);
  if (!err) err = fbx_host_decoder_reset(&dc);
  if (!err) err = step_both(&df, &dc, prompt, PROMPT_B, DECODE_STEPS + 1, &worst);
  if (err) {
    fprintf(stderr, "FAIL: %s\n", err);
    fbx_host_err_free(err);
    failed++;
  }
  printf("logits/presents vs ORT CPU over %d steps: max abs %.3g\n", DECODE_STEPS + 2, worst);
  fbx_host_decoder_free(&df);
  fbx_host_decoder_free(&dc);
  fbx_host_session_destroy(sf);  // the trace is complete JSON after the teardown
  fbx_host_session_destroy(sc);
  fbx_host_close(h);
  if (!failed) check_trace(trace);
  if (failed) printf("trace kept for inspection: %s\n", trace);
  else unlink(trace);
  printf("%s\n", failed ? "test_e2e_decode_cache: FAILED" : "test_e2e_decode_cache: ok");
  return failed ? 1 : 0;
}
