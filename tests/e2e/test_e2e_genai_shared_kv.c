// test_e2e_genai_shared_kv: the GenAI-style decoder (models/gen/genai_tiny.onnx, accuracy_level 0)
// driven the way ONNX Runtime GenAI drives it with past_present_share_buffer: IOBinding, one
// max-length (1, kv_heads, CAP, head_dim) buffer per cache bound as both past_key_values.<i>.*
// and present.<i>.*, attention_mask (1, P + S) giving the valid length.
//   1. Fusebox (CPU) and ORT's CPU EP, both shared: prefill + 32 greedy steps, each on its own
//      tokens: tokens identical to ORT's and to the float64 numpy reference's
//      (models/gen/cases/genai_tiny/); logits within 1e-4 of max |logit| of the reference (the
//      tolerance test_e2e_genai justifies for level 0) and of ORT's; the KV buffers' valid rows
//      equal ORT's and the rows past the valid length still hold the sentinel they were filled
//      with (nothing but the new rows was written, nothing past the valid length was read). Trace: decode path 1 MISS then HIT, 0 RETRACE; the session summary counts
//      one delta copy-out per run with exactly the new rows' bytes and 0 full copy-outs.
//   2. Fusebox, the usual separate past/present (no binding): full copy-outs, no delta.
//   3. Fusebox on the opaque test backend (FUSEBOX_TEST_BACKEND=opaque: device buffers the host
//      cannot read), shared: tokens identical to ORT's; one delta copy-out per run with the new
//      rows' bytes (the rows copied from the device into the host buffer), and logits as the one
//      full copy-out per run.
// Sessions are torn down in that order, so the trace's session_summary instants come in that
// order; each session's spans lie between its summary and the previous one.
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "common/ort_host.h"
#include "common/ort_host_decode.h"

#define STEPS 32
#define CAP 64    // rows of each shared KV buffer (prompt 7 + 32 steps fit)
#define SEPARATE_STEPS 4
// What the shared buffers hold before the first prompt: a kernel that wrote any row but the new
// ones would leave a row without it, one that read a row past the valid length (the capacity
// taken for the length) would put 1e3-sized keys into the softmax and change the logits.
#define SENTINEL 1000.0f

static void fill_sentinel(fbx_host_decoder *d) {
  for (int i = 0; i < 2 * d->n_layers; i++) fbx_host_tensor_fill_const(&d->past[i], SENTINEL);
}

typedef struct refs {
  fbx_host_tensor prompt, tokens, prefill, decode;  // (1,S) i64, (STEPS) i64, (1,S,V), (STEPS,V)
} refs;

static int load_refs(refs *r) {
  const char *names[4] = {"prompt.npy", "tokens.npy", "prefill_logits.npy", "decode_logits.npy"};
  fbx_host_tensor *t[4] = {&r->prompt, &r->tokens, &r->prefill, &r->decode};
  for (int i = 0; i < 4; i++) {
    char rel[512], path[PATH_MAX];
    snprintf(rel, sizeof rel, "models/gen/cases/genai_tiny/%s", names[i]);
    if (fbx_host_find_repo_file(rel, path, sizeof path)) return -1;
    char *e = fbx_host_npy_read(path, t[i]);
    if (e) {
      fprintf(stderr, "%s: %s\n", path, e);
      fbx_host_err_free(e);
      return -1;
    }
  }
  return 0;
}

// max |a - ref| over n values, relative to max |ref| (NaN: infinite).
static double rel_err(const fbx_host_tensor *a, size_t a_off, const fbx_host_tensor *ref, size_t r_off, size_t n) {
  double mx = 0, d = 0;
  for (size_t i = 0; i < n; i++) {
    double x = fbx_host_tensor_get(ref, r_off + i), y = fbx_host_tensor_get(a, a_off + i);
    if (fabs(x) > mx) mx = fabs(x);
    if (isnan(y)) d = INFINITY;
    else if (fabs(x - y) > d) d = fabs(x - y);
  }
  return d / (mx > 0 ? mx : 1);
}

static char *open_session(fbx_host *h, const char *model, int fusebox, fbx_host_session **s) {
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = fusebox;
  o.intra_threads = 1;
  return fbx_host_session_create(h, model, &o, s);
}

// The KV buffers of a (Fusebox) and c (ORT), both shared, after P valid rows: the valid rows
// agree within tol (absolute; K/V are O(1)) and every row at or past P still holds the
// sentinel both were filled with (fill_sentinel).
static void check_kv(const char *what, const fbx_host_decoder *a, const fbx_host_decoder *c, double tol) {
  double worst = 0;
  size_t nonzero_tail = 0;
  for (int i = 0; i < 2 * a->n_layers; i++) {
    const float *x = a->past[i].data, *y = c->past[i].data;
    for (int64_t hh = 0; hh < a->heads; hh++)
      for (int64_t r = 0; r < CAP; r++)
        for (int64_t k = 0; k < a->head_dim; k++) {
          size_t at = (size_t)((hh * CAP + r) * a->head_dim + k);
          if (r < a->past_len) {
            double d = fabs((double)x[at] - (double)y[at]);
            if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
          } else if (x[at] != SENTINEL) {
            nonzero_tail++;
          }
        }
  }
  CHECK(worst <= tol, "%s: KV buffers' %lld valid rows differ from ORT's by %.3g", what, (long long)a->past_len,
        worst);
  CHECK(nonzero_tail == 0, "%s: %zu values written past the valid length %lld of the shared buffers", what,
        nonzero_tail, (long long)a->past_len);
  printf("  %s: KV buffers, %lld valid rows: max |diff| vs ORT %.3g; rows past them untouched (sentinel)\n", what,
         (long long)a->past_len, worst);
}

// Prefill + STEPS greedy steps on f (Fusebox) and c (ORT CPU), both shared; tokens and logits
// against each other and (check_ref) the float64 reference.
static void greedy_shared(const char *what, fbx_host_decoder *f, fbx_host_decoder *c, const refs *r, int check_ref) {
  const int64_t S = r->prompt.dims[1], V = r->prefill.dims[2];
  const int64_t *ref_tok = r->tokens.data;
  int64_t tf = -1, tc = -1;
  int same = 0, same_ref = 0;
  double worst_ref = 0, worst_ort = 0;
  fill_sentinel(f);
  fill_sentinel(c);
  char *e = fbx_host_decoder_step(f, r->prompt.data, S);
  if (!e) e = fbx_host_decoder_step(c, r->prompt.data, S);
  if (!e && check_ref) worst_ref = rel_err(&f->logits, 0, &r->prefill, 0, (size_t)(S * V));
  for (int t = 0; t < STEPS && !e; t++) {
    tf = fbx_host_decoder_argmax(f);
    tc = fbx_host_decoder_argmax(c);
    same += tf == tc;
    same_ref += tf == ref_tok[t];
    e = fbx_host_decoder_step(f, &tf, 1);
    if (!e) e = fbx_host_decoder_step(c, &tc, 1);
    if (e) break;
    double b = rel_err(&f->logits, 0, &c->logits, 0, (size_t)V);
    if (b > worst_ort) worst_ort = b;
    if (check_ref && tf == ref_tok[t]) {  // the reference's step t was fed the same token
      double a = rel_err(&f->logits, 0, &r->decode, (size_t)(t * V), (size_t)V);
      if (a > worst_ref) worst_ref = a;
    }
  }
  CHECK(!e, "%s: %s", what, e ? e : "");
  fbx_host_err_free(e);
  CHECK(same == STEPS, "%s: greedy tokens: %d of %d identical to ORT CPU's (shared buffer)", what, same, STEPS);
  CHECK(worst_ort <= 1e-4, "%s: logits off ORT CPU's by %.3g of max |logit|", what, worst_ort);
  if (check_ref) {
    CHECK(same_ref == STEPS, "%s: greedy tokens: %d of %d identical to the float64 reference's", what, same_ref,
          STEPS);
    CHECK(worst_ref <= 1e-4, "%s: logits off the float64 reference by %.3g of max |logit|", what, worst_ref);
  }
  printf("  %s: greedy %d steps: %d identical to ORT CPU%s; logits vs ORT %.3g", what, STEPS, same,
         check_ref ? ", vs reference" : "", worst_ort);
  if (check_ref) printf(" (%d tokens identical, logits %.3g)", same_ref, worst_ref);
  printf("\n");
  if (!e) check_kv(what, f, c, 1e-4);
}

// ---- the trace ----------------------------------------------------------------------------

typedef struct session_facts {
  long long delta_n, delta_bytes, full_n, full_bytes;
  int dec[3], pre[3];  // decode / prefill subgraph spans: MISS, HIT, RETRACE
  double ts;
} session_facts;

static int cache_index(const char *c) {
  return !c ? -1 : !strcmp(c, "MISS") ? 0 : !strcmp(c, "HIT") ? 1 : !strcmp(c, "RETRACE") ? 2 : -1;
}

static long long arg_int(json_t *args, const char *k) { return (long long)json_integer_value(json_object_get(args, k)); }

// Up to max sessions' facts from the trace, in teardown order; returns how many.
static int read_trace(const char *path, session_facts *s, int max) {
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  CHECK(root != NULL, "trace %s is not valid JSON: %s (line %d)", path, jerr.text, jerr.line);
  if (!root) return 0;
  json_t *events = json_is_array(root) ? root : json_object_get(root, "traceEvents");
  memset(s, 0, sizeof *s * (size_t)max);
  int n = 0;
  size_t i;
  json_t *ev;
  json_array_foreach(events, i, ev) {
    const char *name = json_string_value(json_object_get(ev, "name"));
    json_t *args = json_object_get(ev, "args");
    if (name && args && !strcmp(name, "fusebox.session_summary") && n < max) {
      s[n].ts = json_number_value(json_object_get(ev, "ts"));
      s[n].delta_n = arg_int(args, "copyout_delta_count");
      s[n].delta_bytes = arg_int(args, "copyout_delta_bytes");
      s[n].full_n = arg_int(args, "copyout_full_count");
      s[n].full_bytes = arg_int(args, "copyout_full_bytes");
      n++;
    }
  }
  json_array_foreach(events, i, ev) {
    const char *name = json_string_value(json_object_get(ev, "name"));
    json_t *args = json_object_get(ev, "args");
    if (!name || !args || strcmp(name, "fusebox.subgraph")) continue;
    double ts = json_number_value(json_object_get(ev, "ts"));
    int k = 0;
    while (k < n && ts > s[k].ts) k++;
    const char *p = json_string_value(json_object_get(args, "path"));
    int ci = cache_index(json_string_value(json_object_get(args, "cache")));
    if (k == n || !p || ci < 0) continue;
    if (!strcmp(p, "decode")) s[k].dec[ci]++;
    else if (!strcmp(p, "prefill")) s[k].pre[ci]++;
  }
  json_decref(root);
  return n;
}

static void print_facts(const char *what, const session_facts *s) {
  printf("  %s: copy-out delta %lld (%lld B) vs full %lld (%lld B); decode %d MISS / %d HIT / %d RETRACE, "
         "prefill %d MISS\n",
         what, s->delta_n, s->delta_bytes, s->full_n, s->full_bytes, s->dec[0], s->dec[1], s->dec[2], s->pre[0]);
}

int main(void) {
  char model[PATH_MAX];
  if (fbx_host_find_repo_file("models/gen/genai_tiny.onnx", model, sizeof model)) {
    fprintf(stderr, "FAIL: models/gen/genai_tiny.onnx not found (run scripts/make_models.sh)\n");
    return 1;
  }
  refs r;
  memset(&r, 0, sizeof r);
  if (load_refs(&r)) {
    fprintf(stderr, "FAIL: models/gen/cases/genai_tiny missing (run scripts/make_models.sh)\n");
    return 1;
  }
  char trace[] = "/tmp/fbx_e2e_kvshare_XXXXXX.json";
  int fd = mkstemps(trace, 5);
  if (fd < 0) return 1;
  close(fd);
  setenv("FUSEBOX_TRACE", trace, 1);  // before the first session: the EP reads it once
  const char *saved_tb = getenv("FUSEBOX_TEST_BACKEND");
  char *saved = saved_tb ? strdup(saved_tb) : NULL;
  unsetenv("FUSEBOX_TEST_BACKEND");

  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "FAIL: cannot open ORT: %s\n", e);
    return 1;
  }
  fbx_host_session *sc = NULL, *sf = NULL;
  fbx_host_decoder dc, df;
  memset(&dc, 0, sizeof dc), memset(&df, 0, sizeof df);
  int64_t heads = 0, hd = 0, layers = 0, S = r.prompt.dims[1];
  e = open_session(h, model, 0, &sc);
  if (!e) e = fbx_host_decoder_init_shared(&dc, sc, CAP);
  CHECK(!e, "ORT CPU session: %s", e ? e : "");
  fbx_host_err_free(e);

  // 1. Fusebox CPU, shared
  e = dc.s ? open_session(h, model, 1, &sf) : fbx_host_errf("no ORT session");
  if (!e) e = fbx_host_decoder_init_shared(&df, sf, CAP);
  CHECK(!e, "Fusebox session: %s", e ? e : "");
  fbx_host_err_free(e);
  if (df.s) {
    heads = df.heads, hd = df.head_dim, layers = df.n_layers;
    greedy_shared("cpu shared", &df, &dc, &r, 1);
  }
  fbx_host_decoder_free(&df);
  fbx_host_session_destroy(sf);
  sf = NULL;

  // 2. Fusebox CPU, separate past and present (a few steps)
  e = open_session(h, model, 1, &sf);
  if (!e) e = fbx_host_decoder_init(&df, sf);
  int64_t tok = 3;
  if (!e) e = fbx_host_decoder_step(&df, r.prompt.data, S);
  for (int t = 0; t < SEPARATE_STEPS && !e; t++) e = fbx_host_decoder_step(&df, &tok, 1);
  CHECK(!e, "cpu separate: %s", e ? e : "");
  fbx_host_err_free(e);
  fbx_host_decoder_free(&df);
  fbx_host_session_destroy(sf);
  sf = NULL;

  // 3. Fusebox on the opaque test backend, shared
  setenv("FUSEBOX_TEST_BACKEND", "opaque", 1);
  e = fbx_host_decoder_reset(&dc);
  if (!e) e = open_session(h, model, 1, &sf);
  if (!e) e = fbx_host_decoder_init_shared(&df, sf, CAP);
  CHECK(!e, "opaque session: %s", e ? e : "");
  fbx_host_err_free(e);
  if (df.s) greedy_shared("opaque shared", &df, &dc, &r, 0);
  fbx_host_decoder_free(&df);
  fbx_host_session_destroy(sf);  // the trace is complete JSON after each teardown
  if (saved) setenv("FUSEBOX_TEST_BACKEND", saved, 1);
  else unsetenv("FUSEBOX_TEST_BACKEND");
  free(saved);
  fbx_host_decoder_free(&dc);
  fbx_host_session_destroy(sc);
  fbx_host_close(h);

  // The trace: per session, copy-outs and the decode path's cache events.
  session_facts s[3];
  int n = read_trace(trace, s, 3);
  CHECK(n == 3, "trace: %d session summaries, expected 3", n);
  if (n == 3) {
    print_facts("cpu shared", &s[0]);
    print_facts("cpu separate", &s[1]);
    print_facts("opaque shared", &s[2]);
    // one delta copy-out per run: 2 * layers outputs of (1, heads, S, hd) new rows, float32
    long long runs = 1 + STEPS, row = (long long)(heads * hd * 4) * 2 * layers;
    long long want = row * (S + STEPS);
    for (int k = 0; k < 3; k += 2) {
      const char *what = k ? "opaque shared" : "cpu shared";
      CHECK(s[k].delta_n == runs && s[k].delta_bytes == want,
            "%s: want %lld delta copy-outs of %lld bytes in all, got %lld of %lld", what, runs, want, s[k].delta_n,
            s[k].delta_bytes);
      CHECK(s[k].dec[0] == 1 && s[k].dec[1] == STEPS - 1 && s[k].dec[2] == 0,
            "%s: decode path: want 1 MISS + %d HIT + 0 RETRACE, got %d + %d + %d", what, STEPS - 1, s[k].dec[0],
            s[k].dec[1], s[k].dec[2]);
      CHECK(s[k].pre[0] == 1 && s[k].pre[2] == 0, "%s: prefill: want 1 MISS, 0 RETRACE, got %d, %d", what,
            s[k].pre[0], s[k].pre[2]);
    }
    CHECK(s[0].full_n == 0, "cpu shared: %lld full copy-outs, want 0 (logits are written in place)", s[0].full_n);
    // on a device the logits are copied out whole each run, the KV caches never
    long long logits = (long long)r.prefill.dims[2] * 4 * (S + STEPS);
    CHECK(s[2].full_n == runs && s[2].full_bytes == logits,
          "opaque shared: want %lld full copy-outs (logits, %lld bytes), got %lld (%lld bytes)", runs, logits,
          s[2].full_n, s[2].full_bytes);
    CHECK(s[1].delta_n == 0 && s[1].full_n == 1 + SEPARATE_STEPS,
          "cpu separate: want 0 delta and %d full copy-outs, got %lld and %lld", 1 + SEPARATE_STEPS, s[1].delta_n,
          s[1].full_n);
  }
  fbx_host_tensor_free(&r.prompt), fbx_host_tensor_free(&r.tokens);
  fbx_host_tensor_free(&r.prefill), fbx_host_tensor_free(&r.decode);
  if (failed) printf("trace kept for inspection: %s\n", trace);
  else unlink(trace);
  printf("genai shared kv: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
