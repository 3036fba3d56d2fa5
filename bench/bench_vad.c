// bench_vad — the Silero-style VAD (models/gen_vad.py: STFT-as-Conv1d front end, convs, an LSTM
// inside If branches chosen by the sample rate, state in/out) streamed chunk by chunk through
// Fusebox and ORT's CPU EP in one process, same intra-op threads, the LSTM state carried from
// chunk to chunk as a real VAD loop does. Per sample rate: median per-chunk latency of each EP
// and the ratio ORT/Fusebox (> 1: Fusebox faster); outputs checked (every chunk's probability
// and the final state of the two streams, which see the same audio).
//
// Interleaving: the two EPs take turns in blocks of --block chunks, each EP on its own state;
// after every switch a 10 ms pause (the other pool's spinning workers go idle) and the block's
// first chunk is run but not timed.
//
// usage: bench_vad [--model PATH] [--threads N] [--chunks N] [--block N] [--sr 16000|8000|both]
//                  [--only fusebox|ort]   (one EP's stream alone, for profiling; no ratio, no check)
// Exit status 1 when the outputs differ by more than 1e-4 (or a run fails).
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_host.h"
#include "common/ort_host.h"

static int g_only = -1;  // --only fusebox|ort: run one EP's stream (profiling); 0 Fusebox, 1 ORT

// One EP's stream: inputs {input, state, sr}; the state tensor is replaced by stateN each chunk.
typedef struct stream {
  fbx_host_session *s;
  fbx_host_tensor in[3];
  double *prob;   // (chunks) output of every chunk
  double *ms;     // timed chunks
  int n_ms;
} stream;

// Runs chunk c (samples audio[c*chunk ..]) on st; times it when timed.
static char *run_chunk(stream *st, const float *audio, int c, int chunk, int timed) {
  memcpy(st->in[0].data, audio + (size_t)c * (size_t)chunk, (size_t)chunk * sizeof(float));
  fbx_host_tensor *outs = NULL;
  size_t n_out = 0;
  double t0 = fbx_host_now();
  char *err = fbx_host_session_run(st->s, st->in, 3, &outs, &n_out);
  double ms = (fbx_host_now() - t0) * 1e3;
  if (err) return err;
  long io = fbx_host_session_output_find(st->s, "output"), is = fbx_host_session_output_find(st->s, "stateN");
  if (io < 0 || is < 0 || outs[is].nbytes != st->in[1].nbytes) {
    fbx_host_tensors_free(outs, n_out);
    return fbx_host_errf("outputs 'output'/'stateN' missing or of the wrong size");
  }
  st->prob[c] = fbx_host_tensor_get(&outs[io], 0);
  memcpy(st->in[1].data, outs[is].data, st->in[1].nbytes);
  fbx_host_tensors_free(outs, n_out);
  if (timed) st->ms[st->n_ms++] = ms;
  return NULL;
}

static int bench_sr(fbx_host_session *const s[2], int sr, int chunks, int block, int hidden) {
  const int chunk = sr == 16000 ? 512 : 256;
  // audio: noise with tone bursts (speech-like on/off pattern), fixed seed
  float *audio = malloc(sizeof(float) * (size_t)chunks * (size_t)chunk);
  uint64_t r = 0x243F6A8885A308D3ull;
  for (long i = 0; i < (long)chunks * chunk; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    double noise = ((double)(r >> 11) / (double)(1ull << 53) - 0.5) * 0.02;
    double on = ((i / (sr / 4)) % 3) != 0;  // 250 ms blocks, two of three voiced
    audio[i] = (float)(noise + on * 0.3 * sin(2 * M_PI * 220.0 * (double)i / sr) * sin(2 * M_PI * 3.0 * (double)i / sr));
  }
  stream st[2];
  memset(st, 0, sizeof st);
  int rc = 1;
  char *err = NULL;
  for (int e = 0; e < 2; e++) {
    st[e].s = s[e];
    st[e].prob = calloc((size_t)chunks, sizeof(double));
    st[e].ms = calloc((size_t)chunks, sizeof(double));
    int64_t din[2] = {1, chunk}, dst[3] = {2, 1, hidden};
    if ((err = fbx_host_tensor_alloc(&st[e].in[0], "input", FBX_HOST_F32, 2, din)) ||
        (err = fbx_host_tensor_alloc(&st[e].in[1], "state", FBX_HOST_F32, 3, dst)) ||
        (err = fbx_host_tensor_alloc(&st[e].in[2], "sr", FBX_HOST_I64, 0, NULL)))
      goto out;
    fbx_host_tensor_set(&st[e].in[2], 0, sr);
  }
  for (int c0 = 0, turn = 0; c0 < chunks; c0 += block, turn++) {
    for (int k = 0; k < 2; k++) {
      int e = (turn + k) % 2;  // order alternates per block
      if (g_only >= 0 && e != g_only) continue;  // --only: profile one EP
      fbx_host_settle(10);
      for (int c = c0; c < c0 + block && c < chunks; c++)
        if ((err = run_chunk(&st[e], audio, c, chunk, c != c0))) goto out;
    }
  }
  double maxd = 0, maxs = 0;
  for (int c = 0; c < chunks; c++) maxd = fmax(maxd, fabs(st[0].prob[c] - st[1].prob[c]));
  for (size_t i = 0; i < fbx_host_tensor_numel(&st[0].in[1]); i++)
    maxs = fmax(maxs, fabs(fbx_host_tensor_get(&st[0].in[1], i) - fbx_host_tensor_get(&st[1].in[1], i)));
  double med[2];
  for (int e = 0; e < 2; e++) {
    qsort(st[e].ms, (size_t)st[e].n_ms, sizeof(double), bench_cmp_double);
    med[e] = st[e].n_ms ? st[e].ms[st[e].n_ms / 2] : 0;
  }
  int nvoiced = 0;
  for (int c = 0; c < chunks; c++) nvoiced += st[1].prob[c] > 0.5;
  printf("| %5d | %5d | %6d | %8.1f | %8.1f | %5.2fx | %.2g / %.2g | %d/%d |\n", sr, chunk, st[0].n_ms, med[0] * 1e3,
         med[1] * 1e3, med[1] / med[0], maxd, maxs, nvoiced, chunks);
  rc = g_only < 0 && (maxd > 1e-4 || maxs > 1e-4);
  if (rc) fprintf(stderr, "bench_vad: sr %d: Fusebox and ORT differ (prob %.3g, state %.3g)\n", sr, maxd, maxs);
out:
  if (err) {
    fprintf(stderr, "bench_vad: sr %d: %s\n", sr, err);
    fbx_host_err_free(err);
    rc = 1;
  }
  for (int e = 0; e < 2; e++) {
    for (int i = 0; i < 3; i++) fbx_host_tensor_free(&st[e].in[i]);
    free(st[e].prob);
    free(st[e].ms);
  }
  free(audio);
  return rc;
}

int main(int argc, char **argv) {
  const char *model_rel = "models/gen/vad.onnx", *which = "both";
  int threads = 2, chunks = 400, block = 25;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) { fprintf(stderr, "bench_vad: %s needs a value\n", a); return 2; }
    if (strcmp(a, "--model") == 0) model_rel = v;
    else if (strcmp(a, "--threads") == 0) threads = atoi(v);
    else if (strcmp(a, "--chunks") == 0) chunks = atoi(v);
    else if (strcmp(a, "--block") == 0) block = atoi(v);
    else if (strcmp(a, "--sr") == 0) which = v;
    else if (strcmp(a, "--only") == 0) g_only = strcmp(v, "ort") == 0 ? 1 : 0;
    else { fprintf(stderr, "bench_vad: unknown option %s\n", a); return 2; }
    i++;
  }
  if (threads < 1 || chunks < 2 || block < 2) { fprintf(stderr, "bench_vad: bad numbers\n"); return 2; }
  char model[PATH_MAX];
  if (fbx_host_find_repo_file(model_rel, model, sizeof model) != 0) {
    fprintf(stderr, "bench_vad: %s not found (scripts/make_models.sh)\n", model_rel);
    return 2;
  }
  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  if (err) {
    fprintf(stderr, "bench_vad: %s\n", err);
    fbx_host_err_free(err);
    return 1;
  }
  fbx_host_session *s[2] = {bench_open_session(h, model, 1, threads, "bench_vad"),
                            bench_open_session(h, model, 0, threads, "bench_vad")};
  int rc = 1;
  if (s[0] && s[1]) {
    long is = fbx_host_session_input_find(s[0], "state");
    const fbx_host_io *io = is >= 0 ? fbx_host_session_input(s[0], (size_t)is) : NULL;
    int hidden = io && io->rank == 3 && io->dims[2] > 0 ? (int)io->dims[2] : 128;
    printf("%s, ORT %s (%s), EP %s, threads %d, %d chunks per rate, blocks of %d\n\n", model, fbx_host_ort_version(h),
           fbx_host_ort_path(h), fbx_host_ep_path(h), threads, chunks, block);
    printf("|    sr | chunk | timed  | Fusebox us/chunk | ORT CPU us/chunk | ORT/Fusebox | max diff prob / state | ORT voiced |\n");
    printf("|-------|-------|--------|----------|----------|-------|-------------|------|\n");
    rc = 0;
    if (strcmp(which, "8000") != 0) rc |= bench_sr(s, 16000, chunks, block, hidden);
    if (strcmp(which, "16000") != 0) rc |= bench_sr(s, 8000, chunks, block, hidden);
  }
  for (int e = 0; e < 2; e++) fbx_host_session_destroy(s[e]);
  fbx_host_close(h);
  return rc;
}
