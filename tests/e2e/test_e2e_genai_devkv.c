// test_e2e_genai_devkv: the GenAI-style decoder (models/gen/genai_tiny.onnx, accuracy_level 0)
// decoded the way ONNX Runtime GenAI runs it on a GPU, on Fusebox's GPU OrtEpDevice: one
// max-length KV buffer per cache in the GPU's memory (ORT's shared allocator for Fusebox's device
// memory info), bound with IOBinding as both past_key_values.<i>.* and present.<i>.*, and
// input_ids, attention_mask (a max-length buffer of ones bound as its (1, P + S) prefix) and
// logits bound in device memory too (fbx_host_decoder_init_shared_device, what `fusebox generate
// --kv-memory device` runs).
//   tokens   prefill of the reference prompt, then 64 greedy steps, each EP on its own tokens:
//            Fusebox's tokens equal ORT's CPU EP's (the same decode with host KV buffers) and the
//            float64 numpy reference's for the steps it has (models/gen/cases/genai_tiny/);
//            logits within 1e-4 of max |logit| of ORT's (test_e2e_genai's level-0 tolerance)
//   counts   per run, from the trace's fusebox.subgraph spans (args allocs, host_syncs,
//            graph_captures, graph_replays): decode path 1 MISS then HIT; the decode runs capture
//            one graph in all, and from the capture on every run replays exactly one graph (the
//            whole plan but the steps that read the growing attention_mask); no decode run after
//            the first allocates; no run synchronises (Compute runs on ORT's stream, ort_stream=on
//            by default: ORT waits once at the end of its Run); the session summary counts a delta
//            copy-out every run and no full
//            copy-out (the KV rows are written in place in device memory, logits directly)
//   host io  (a second process, --host-io) the same with input_ids, attention_mask and logits as
//            host tensors bound every step, as onnxruntime's Python client binds numpy arrays: ORT
//            copies them into device buffers it allocates per Run, whose addresses move; the engine
//            stages them (exec_run.c) and the decode still replays a graph nearly every run
//            (each buffer that moves late costs one staging buffer and one re-capture); the
//            staged logits are full copy-outs
//   again    a second prompt after a reset (a longer one: 24 tokens), then 16 steps: tokens equal
//            ORT's, no further allocation on the decode runs, the graph replayed (a buffer
//            regrowth would show as graph_invalidated and a re-capture, never as a wrong token;
//            on a real GPU the end of FUSEBOX_GPU_DETAIL's recording window re-captures once, too)
// Default: the simulated GPU (FUSEBOX_TEST_DEVICE=gpu-sim: device memory is opaque handles a host
// load faults on). FBX_TEST_REAL_GPU=1: the machine's NVIDIA GPU (device=cuda), or SKIP without one.
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/check.h"
#include "common/ort_host.h"
#include "common/ort_host_decode.h"

#define STEPS 64
#define STEPS2 16
#define PROMPT2 24
#define CAP 96   // rows of each KV buffer: prompt 7 + 64 steps, and 24 + 16

typedef struct run_facts {
  int decode;                 // path
  const char *cache;
  long long allocs, syncs, captures, replays, invalidated;
} run_facts;

// The Fusebox session's runs in order, from the trace (borrowed strings live in root).
static int read_runs(json_t *root, run_facts *r, int max, long long *delta_n, long long *full_n) {
  json_t *events = json_is_array(root) ? root : json_object_get(root, "traceEvents");
  int n = 0;
  size_t i;
  json_t *ev;
  *delta_n = *full_n = -1;
  json_array_foreach(events, i, ev) {
    const char *name = json_string_value(json_object_get(ev, "name"));
    json_t *a = json_object_get(ev, "args");
    if (!name || !a) continue;
    if (!strcmp(name, "fusebox.session_summary")) {
      *delta_n = (long long)json_integer_value(json_object_get(a, "copyout_delta_count"));
      *full_n = (long long)json_integer_value(json_object_get(a, "copyout_full_count"));
    }
    if (strcmp(name, "fusebox.subgraph") || n >= max) continue;
    const char *p = json_string_value(json_object_get(a, "path"));
    r[n].decode = p && !strcmp(p, "decode");
    r[n].cache = json_string_value(json_object_get(a, "cache"));
    r[n].allocs = (long long)json_integer_value(json_object_get(a, "allocs"));
    r[n].syncs = (long long)json_integer_value(json_object_get(a, "host_syncs"));
    r[n].captures = (long long)json_integer_value(json_object_get(a, "graph_captures"));
    r[n].replays = (long long)json_integer_value(json_object_get(a, "graph_replays"));
    r[n].invalidated = (long long)json_integer_value(json_object_get(a, "graph_invalidated"));
    n++;
  }
  return n;
}

static double max_abs(const fbx_host_tensor *t) {
  double m = 0;
  size_t n = fbx_host_tensor_numel(t);
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs(fbx_host_tensor_get(t, i)));
  return m;
}

// One loop on both decoders: prompt, then steps greedy steps each on its own tokens. Tokens of
// Fusebox into tok[0..steps]; returns the number of mismatching tokens and logits steps.
static int loop(fbx_host_decoder *f, fbx_host_decoder *o, const int64_t *prompt, int64_t n, int steps, int64_t *tok,
                const char *what) {
  int bad = 0, bad_logits = 0;
  int64_t tf = -1, to = -1;
  for (int s = 0; s <= steps; s++) {
    char *e = s ? fbx_host_decoder_step(f, &tf, 1) : fbx_host_decoder_step(f, prompt, n);
    if (!e) e = s ? fbx_host_decoder_step(o, &to, 1) : fbx_host_decoder_step(o, prompt, n);
    CHECK(!e, "%s step %d: %s", what, s, e ? e : "");
    if (e) {
      fbx_host_err_free(e);
      return 1;
    }
    fbx_host_cmp c;
    double tol = 1e-4 * fmax(1.0, max_abs(&o->logits));
    if (!fbx_host_compare(&f->logits, &o->logits, 0, tol, &c)) {
      if (!bad_logits++) fprintf(stderr, "  %s step %d: logits off by %.3g (tolerance %.3g)\n", what, s, c.max_abs, tol);
    }
    tf = fbx_host_decoder_argmax(f);
    to = fbx_host_decoder_argmax(o);
    if (tok) tok[s] = tf;
    if (tf != to) {
      if (!bad) fprintf(stderr, "  %s step %d: token %lld, ORT %lld\n", what, s, (long long)tf, (long long)to);
      bad++;
      to = tf; /* go on from the same token: later steps still compare like with like */
    }
  }
  CHECK(!bad && !bad_logits, "%s: %d token(s) and %d logits step(s) differ from ORT's CPU EP over %d steps", what,
        bad, bad_logits, steps + 1);
  return bad + bad_logits;
}

static char *session(fbx_host *h, const char *model, int fusebox, int real, fbx_host_session **s) {
  static const char *const k[] = {"device"}, *const v[] = {"cuda"};
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = fusebox;
  if (fusebox && real) { /* both devices with device=cuda: ORT then binds the GPU's memory */
    o.ep_keys = k, o.ep_vals = v, o.n_ep_opts = 1;
  } else if (fusebox) {
    o.fusebox_devices = FBX_HOST_DEVICES_GPU;
  }
  return fbx_host_session_create(h, model, &o, s);
}

static int scenario(int host_io) {
  int real = getenv("FBX_TEST_REAL_GPU") && !strcmp(getenv("FBX_TEST_REAL_GPU"), "1");
  char model[PATH_MAX], prompt_path[PATH_MAX], tokens_path[PATH_MAX];
  if (fbx_host_find_repo_file("models/gen/genai_tiny.onnx", model, sizeof model) ||
      fbx_host_find_repo_file("models/gen/cases/genai_tiny/prompt.npy", prompt_path, sizeof prompt_path) ||
      fbx_host_find_repo_file("models/gen/cases/genai_tiny/tokens.npy", tokens_path, sizeof tokens_path)) {
    fprintf(stderr, "FAIL: models/gen/genai_tiny.onnx or its cases missing (run scripts/make_models.sh)\n");
    return 1;
  }
  if (real && access("/dev/nvidiactl", F_OK) != 0) {
    printf("SKIP: FBX_TEST_REAL_GPU=1 but no NVIDIA driver (/dev/nvidiactl)\n");
    return 0;
  }
  if (!real) setenv("FUSEBOX_TEST_DEVICE", "gpu-sim", 1);
  char trace[] = "/tmp/fbx_e2e_devkv_XXXXXX.json";
  int fd = mkstemps(trace, 5);
  if (fd < 0) return 1;
  close(fd);
  setenv("FUSEBOX_TRACE", trace, 1); /* before the first session: the EP reads it once */
  unsetenv("FUSEBOX_TEST_BACKEND");
  fbx_host_tensor prompt = {0}, ref_tokens = {0};
  char *e = fbx_host_npy_read(prompt_path, &prompt);
  if (!e) e = fbx_host_npy_read(tokens_path, &ref_tokens);
  fbx_host *h = NULL;
  if (!e) e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "FAIL: %s\n", e);
    return 1;
  }
  fbx_host_session *sf = NULL, *so = NULL;
  fbx_host_decoder df, dor;
  memset(&df, 0, sizeof df), memset(&dor, 0, sizeof dor);
  int64_t S = prompt.dims[1], tok[STEPS + 1];
  e = session(h, model, 1, real, &sf);
  if (!e) e = fbx_host_decoder_init_shared_device(&df, sf, CAP, PROMPT2);
  df.dev_host_io = host_io;
  if (e && real && strstr(e, "no GPU OrtEpDevice")) {
    printf("SKIP: Fusebox lists no GPU OrtEpDevice on this machine (%s)\n", e);
    fbx_host_err_free(e);
    fbx_host_decoder_free(&df);
    fbx_host_session_destroy(sf);
    fbx_host_close(h);
    return 0;
  }
  if (!e) e = session(h, model, 0, real, &so);
  if (!e) e = fbx_host_decoder_init_shared(&dor, so, CAP);
  CHECK(!e, "sessions and decoders: %s", e ? e : "");
  fbx_host_err_free(e);
  if (df.s && dor.s) {
    loop(&df, &dor, prompt.data, S, STEPS, tok, "first prompt");
    int64_t n_ref = (int64_t)fbx_host_tensor_numel(&ref_tokens), same = 0;
    for (int64_t i = 0; i < n_ref && i <= STEPS; i++) same += tok[i] == ((int64_t *)ref_tokens.data)[i];
    CHECK(same == (n_ref <= STEPS + 1 ? n_ref : STEPS + 1), "tokens equal the float64 reference's: %lld of %lld",
          (long long)same, (long long)n_ref);
    int64_t p2[PROMPT2];
    for (int i = 0; i < PROMPT2; i++) p2[i] = (7 * i + 3) % 200;
    e = fbx_host_decoder_reset(&df);
    if (!e) e = fbx_host_decoder_reset(&dor);
    CHECK(!e, "reset: %s", e ? e : "");
    fbx_host_err_free(e);
    loop(&df, &dor, p2, PROMPT2, STEPS2, NULL, "second prompt");
  }
  long long layers = df.n_layers;
  fbx_host_decoder_free(&df);
  fbx_host_decoder_free(&dor);
  fbx_host_session_destroy(sf); /* writes the Fusebox session's summary */
  fbx_host_session_destroy(so);
  fbx_host_close(h);

  json_error_t jerr;
  json_t *root = json_load_file(trace, 0, &jerr);
  CHECK(root != NULL, "trace %s is valid JSON (%s)", trace, root ? "" : jerr.text);
  enum { MAXR = 2 * (STEPS + STEPS2) };
  run_facts r[MAXR];
  long long delta_n = -1, full_n = -1;
  int n = root ? read_runs(root, r, MAXR, &delta_n, &full_n) : 0;
  CHECK(n == STEPS + STEPS2 + 2, "%d Fusebox runs in the trace, expected %d", n, STEPS + STEPS2 + 2);
  if (n == STEPS + STEPS2 + 2) {
    int first_cap = -1, caps = 0, bad_path = 0, bad_alloc = 0, bad_sync = 0, bad_replay = 0, inval = 0, second_caps = 0,
        inval_first = 0;
    long long replays = 0;
    for (int i = 0; i < n; i++) {
      int dec = i != 0 && i != STEPS + 1; /* the two prefills */
      bad_path += r[i].decode != dec;
      if (dec && r[i].cache && strcmp(r[i].cache, i == 1 ? "MISS" : "HIT")) bad_path++;
      bad_sync += r[i].syncs != 0;
      if (i > STEPS) inval += (int)r[i].invalidated; /* the second prompt's (its prefill included) */
      if (!dec) continue;
      if (i > (host_io ? 6 : 1) && r[i].allocs) { /* host io: the staging buffers (see below) */
        if (!bad_alloc++) fprintf(stderr, "  decode run %d allocated %lld buffer(s)\n", i, r[i].allocs);
      }
      if (i <= STEPS) {
        caps += (int)r[i].captures - (int)r[i].invalidated; /* a re-capture of an invalidated graph: not a new one */
        inval_first += (int)r[i].invalidated;
        if (r[i].captures && first_cap < 0) first_cap = i;
        if (first_cap >= 0 && i > first_cap && r[i].replays != 1 && !r[i].invalidated) bad_replay++;
        if (first_cap < 0 && r[i].replays) bad_replay++;
      } else {
        second_caps += (int)r[i].captures;
        if (!r[i].captures && r[i].replays != 1) bad_replay++;
      }
      replays += r[i].replays;
    }
    printf("  decode: first capture at run %d, %d capture(s) / %lld replay(s) over %d decode runs; second prompt: %d "
           "capture(s), %d invalidation(s); copy-out delta %lld vs full %lld\n",
           first_cap, caps + second_caps, replays, STEPS + STEPS2, second_caps, inval, delta_n, full_n);
    CHECK(!bad_path, "decode runs on the decode path (1 MISS, then HIT), prefills on prefill: %d off", bad_path);
    if (!host_io) {
      CHECK(caps == 1 && first_cap > 0 && first_cap <= 6, "first prompt: 1 graph captured by run 6 (%d, at run %d)",
            caps, first_cap);
      CHECK(!bad_replay, "every decode run from the capture on replays exactly one graph (%d runs did not)", bad_replay);
      CHECK(inval_first <= 1, "first prompt: at most one re-capture (the end of the GPU recording window): %d",
            inval_first);
      CHECK(second_caps == inval,
            "second prompt: a capture only where a graph was invalidated (%d captures, %d invalidated)", second_caps,
            inval);
      CHECK(!bad_alloc, "no decode run after the first allocates (%d did)", bad_alloc);
    } else {
      /* ORT's allocator may hand out the same address for a while before it moves (seen on the H200:
       * the logits' moved at run 26): each move of a not yet staged buffer costs one staging
       * buffer and one re-capture; input_ids, attention_mask and logits can each move once */
      CHECK(caps >= 1 && caps <= 4 && first_cap > 0 && first_cap <= 6,
            "first prompt: a graph captured by run 6, at most 4 captures (%d, the first at run %d)", caps, first_cap);
      CHECK(replays >= STEPS + STEPS2 - 16, "decode runs replay the graph: %lld replays over %d decode runs", replays,
            STEPS + STEPS2);
      CHECK(bad_alloc <= 3, "at most 3 decode runs after the sixth allocate (a staging buffer each): %d did",
            bad_alloc);
    }
    CHECK(!bad_sync, "no run waits for the device (Compute on ORT's stream, ort_stream=on: ORT waits at the end of "
                     "its Run): %d runs did", bad_sync);
    if (host_io) /* the logits, once staged, are copied out whole */
      CHECK(delta_n == n && full_n <= n && layers > 0,
            "summary: a delta copy-out every run (%lld, expected %d), a full one only for the staged logits (%lld)",
            delta_n, n, full_n);
    else
      CHECK(delta_n == n && full_n == 0 && layers > 0,
            "summary: a delta copy-out every run (%lld, expected %d), no full copy-out (%lld)", delta_n, n, full_n);
  }
  json_decref(root);
  fbx_host_tensor_free(&prompt);
  fbx_host_tensor_free(&ref_tokens);
  unlink(trace);
  printf("test_e2e_genai_devkv (%s%s): %d passed, %d failed\n", real ? "GPU" : "gpu-sim",
         host_io ? ", host input_ids / attention_mask / logits" : "", passed, failed);
  return failed ? 1 : 0;
}

// Both ways of binding the small tensors, each in a process of its own (the EP reads
// FUSEBOX_TRACE once): device buffers bound once (GenAI), then, with --host-io, host tensors
// bound every step (onnxruntime's Python client with numpy arrays: ORT copies them into device
// buffers it allocates per Run, so their addresses move from run to run).
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--host-io") == 0) return scenario(1);
  int rc = scenario(0);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", argv[0], "--host-io", (char *)NULL);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "FAIL: the --host-io run failed (status %d)\n", status);
    rc = 1;
  }
  return rc;
}
