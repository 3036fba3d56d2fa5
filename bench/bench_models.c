// bench_models — Fusebox vs ORT's CPU EP on the project's benchmark models, one process,
// interleaved in blocks (see `fusebox bench`), same intra-op thread count for both:
//   - decode: models/gen/decoder_100m.onnx, prefill + greedy decode, tok/s of each (whole loops
//     in alternating rounds, as `fusebox generate` times them)
//   - latency: models/gen/cnn_small.onnx, cnn_resnet18ish.onnx and the PP-OCR det/rec/cls
//   - quant (only with --only quant: minutes per run): models/gen/unet_q_1024.onnx, the
//     quantize_dynamic-style U-Net (scripts/make_models.sh --bench)
//   every latency row: outputs of both EPs compared after the timing (max abs difference)
// Prints a table to stdout (the lead copies it into bench/RESULTS.md).
// usage: bench_models [--threads N] [--iters N] [--prompt-len N] [--new-tokens N] [--decoder PATH]
//                     [--only decode|latency|quant]
// Env: FUSEBOX_ORT_LIB / FUSEBOX_EP_LIB / FUSEBOX_REPO as for every ort_host program.
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_host.h"
#include "common/ort_host.h"
#include "common/ort_host_decode.h"

typedef struct {
  int threads, iters, prompt, new_tokens;
  const char *decoder, *only;
} bench_cfg;

// One run; its time in ms goes to *ms when ms is non-NULL. Returns an error string or NULL.
static char *run_once(fbx_host_session *s, fbx_host_tensor *in, double *ms) {
  fbx_host_tensor *outs = NULL;
  size_t n_out = 0;
  double t0 = fbx_host_now();
  char *err = fbx_host_session_run(s, in, 1, &outs, &n_out);
  if (ms) *ms = (fbx_host_now() - t0) * 1e3;
  fbx_host_tensors_free(outs, n_out);
  return err;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- latency of one static-shape model ----
static int bench_latency(fbx_host *h, const bench_cfg *cfg, const char *rel, const char *shape_note,
                         const int64_t *shape, int rank) {
  char model[PATH_MAX];
  if (fbx_host_find_repo_file(rel, model, sizeof model) != 0) {
    printf("| %-34s | %-12s | missing | | | |\n", rel, shape_note);
    return 0;
  }
  fbx_host_session *s[2] = {bench_open_session(h, model, 1, cfg->threads, "bench_models"),
                            bench_open_session(h, model, 0, cfg->threads, "bench_models")};
  fbx_host_tensor in = {0};
  double *t[2] = {calloc((size_t)cfg->iters, sizeof(double)), calloc((size_t)cfg->iters, sizeof(double))};
  int rc = -1;
  char *err = NULL;
  if (!s[0] || !s[1] || !t[0] || !t[1]) goto out;
  const fbx_host_io *io = fbx_host_session_input(s[0], 0);
  err = fbx_host_tensor_alloc(&in, io->name, io->dtype, rank ? rank : io->rank, rank ? shape : io->dims);
  if (err) goto out;
  fbx_host_tensor_fill_normal(&in, 42);
  // Interleaved in blocks, as `fusebox bench` does: after each switch one untimed run (the
  // other EP's workers may still be spinning on our cores), then BLOCK timed runs back to back;
  // the EPs take turns, order alternating; 2 untimed runs each first.
  enum { BLOCK = 5 };
  for (int k = 0; k < 2 && !err; k++)
    for (int w = 0; w < 2 && !err; w++) err = run_once(s[k], &in, NULL);
  int n[2] = {0, 0};
  for (int r = 0; (n[0] < cfg->iters || n[1] < cfg->iters) && !err; r++) {
    for (int j = 0; j < 2 && !err; j++) {
      int which = (r & 1) ? 1 - j : j;
      err = run_once(s[which], &in, NULL);
      for (int b = 0; b < BLOCK && n[which] < cfg->iters && !err; b++) err = run_once(s[which], &in, &t[which][n[which]++]);
    }
  }
  if (err) goto out;
  double mf = median(t[0], cfg->iters), mc = median(t[1], cfg->iters);
  // outputs checked: one more run each, every output compared (Fusebox against ORT's CPU EP)
  fbx_host_tensor *o[2] = {NULL, NULL};
  size_t no[2] = {0, 0};
  for (int k = 0; k < 2 && !err; k++) err = fbx_host_session_run(s[k], &in, 1, &o[k], &no[k]);
  double worst = 0, scale = 0;
  for (size_t i = 0; !err && i < no[0] && i < no[1]; i++) {
    fbx_host_cmp c;
    fbx_host_compare(&o[0][i], &o[1][i], 0, 0, &c);
    worst = c.shape_mismatch ? INFINITY : worst > c.max_abs ? worst : c.max_abs;
    for (size_t e = 0; e < fbx_host_tensor_numel(&o[1][i]); e++) {
      double v = fabs(fbx_host_tensor_get(&o[1][i], e));
      scale = v > scale ? v : scale;
    }
  }
  fbx_host_tensors_free(o[0], no[0]);
  fbx_host_tensors_free(o[1], no[1]);
  if (err) goto out;
  printf("| %-34s | %-12s | %9.3f | %9.3f | %5.2fx | outputs max abs diff %.3g (max |ORT| %.3g)\n", rel, shape_note,
         mf, mc, mc / mf, worst, scale);
  rc = 0;
out:
  if (err) {
    printf("| %-34s | %-12s | error | | |\n", rel, shape_note);
    fprintf(stderr, "bench_models: %s: %s\n", rel, err);
    fbx_host_err_free(err);
  }
  fbx_host_tensor_free(&in);
  free(t[0]);
  free(t[1]);
  fbx_host_session_destroy(s[0]);
  fbx_host_session_destroy(s[1]);
  return rc;
}

// ---- decode tok/s ----
static int bench_decode(fbx_host *h, const bench_cfg *cfg) {
  char model[PATH_MAX];
  if (fbx_host_find_repo_file(cfg->decoder, model, sizeof model) != 0) {
    printf("decoder %s: missing (scripts/make_models.sh)\n", cfg->decoder);
    return 0;
  }
  fbx_host_session *s[2] = {bench_open_session(h, model, 1, cfg->threads, "bench_models"),
                            bench_open_session(h, model, 0, cfg->threads, "bench_models")};
  fbx_host_decoder d[2];
  memset(d, 0, sizeof d);
  double prefill[2] = {0, 0}, decode[2] = {0, 0};
  int64_t *prompt = calloc((size_t)cfg->prompt, sizeof *prompt), tok[2] = {0, 0};
  int rc = -1, same = 1;
  char *err = NULL;
  if (!s[0] || !s[1] || !prompt) goto out;
  for (int k = 0; k < 2 && !err; k++) err = fbx_host_decoder_init(&d[k], s[k]);
  for (int i = 0; i < cfg->prompt; i++) prompt[i] = (i * 7919 + 13) % 1000;
  for (int k = 0; k < 2 && !err; k++) {  // one untimed warm-up prefill + decode step each
    err = fbx_host_decoder_step(&d[k], prompt, cfg->prompt);
    int64_t t = err ? 0 : fbx_host_decoder_argmax(&d[k]);
    if (!err) err = fbx_host_decoder_step(&d[k], &t, 1);
    if (!err) err = fbx_host_decoder_reset(&d[k]);
  }
  // Timed rounds: each EP runs its whole loop (prefill, then new_tokens decode steps back to
  // back, as a real generation does), the order alternating per round; medians over rounds.
  enum { ROUNDS = 3 };
  double pre_r[2][ROUNDS], dec_r[2][ROUNDS];
  int64_t last[2] = {0, 0};
  for (int r = 0; r < ROUNDS && !err; r++) {
    for (int j = 0; j < 2 && !err; j++) {
      int k = (r & 1) ? 1 - j : j;
      fbx_host_settle(100);  // the other EP's spinning workers go idle first (ORT's spin ~50 ms on a Xeon)
      err = fbx_host_decoder_reset(&d[k]);
      if (!err) err = fbx_host_decoder_step(&d[k], prompt, cfg->prompt);
      if (err) break;
      pre_r[k][r] = d[k].last_run_s;
      dec_r[k][r] = 0;
      tok[k] = fbx_host_decoder_argmax(&d[k]);
      for (int step = 0; step < cfg->new_tokens && !err; step++) {
        err = fbx_host_decoder_step(&d[k], &tok[k], 1);
        dec_r[k][r] += d[k].last_run_s;
        tok[k] = fbx_host_decoder_argmax(&d[k]);
      }
      last[k] = tok[k];
    }
    same &= last[0] == last[1];
  }
  if (err) goto out;
  for (int k = 0; k < 2; k++) {
    prefill[k] = median(pre_r[k], ROUNDS);
    decode[k] = median(dec_r[k], ROUNDS);
  }
  printf("| %-34s | prefill %4d tok | %9.1f | %9.1f | %5.2fx |\n", cfg->decoder, cfg->prompt,
         cfg->prompt / prefill[0], cfg->prompt / prefill[1], prefill[1] / prefill[0]);
  printf("| %-34s | decode %5d tok | %9.1f | %9.1f | %5.2fx |\n", cfg->decoder, cfg->new_tokens,
         cfg->new_tokens / decode[0], cfg->new_tokens / decode[1], decode[1] / decode[0]);
  printf("(tok/s, median of %d rounds of whole loops, order alternating; last greedy tokens %s)\n", ROUNDS,
         same ? "identical" : "DIFFER");
  rc = 0;
out:
  if (err) {
    fprintf(stderr, "bench_models: decode: %s\n", err);
    fbx_host_err_free(err);
  }
  for (int k = 0; k < 2; k++) {
    fbx_host_decoder_free(&d[k]);
    fbx_host_session_destroy(s[k]);
  }
  free(prompt);
  return rc;
}

int main(int argc, char **argv) {
  bench_cfg cfg = {2, 20, 16, 32, "models/gen/decoder_100m.onnx", NULL};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) { fprintf(stderr, "bench_models: %s needs a value\n", a); return 2; }
    if (strcmp(a, "--threads") == 0) cfg.threads = atoi(v);
    else if (strcmp(a, "--iters") == 0) cfg.iters = atoi(v);
    else if (strcmp(a, "--prompt-len") == 0) cfg.prompt = atoi(v);
    else if (strcmp(a, "--new-tokens") == 0) cfg.new_tokens = atoi(v);
    else if (strcmp(a, "--decoder") == 0) cfg.decoder = v;
    else if (strcmp(a, "--only") == 0) cfg.only = v;
    else { fprintf(stderr, "bench_models: unknown option %s\n", a); return 2; }
    i++;
  }
  if (cfg.threads < 1 || cfg.iters < 1 || cfg.prompt < 1 || cfg.new_tokens < 1) {
    fprintf(stderr, "bench_models: numbers must be positive\n");
    return 2;
  }
  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  if (err) {
    fprintf(stderr, "bench_models: %s\n", err);
    fbx_host_err_free(err);
    return 1;
  }
  printf("ORT %s (%s), EP %s, threads %d, interleaved in blocks\n\n", fbx_host_ort_version(h), fbx_host_ort_path(h),
         fbx_host_ep_path(h), cfg.threads);
  printf("| model                              | workload     | Fusebox   | ORT CPU   | ORT/Fusebox |\n");
  printf("|------------------------------------|--------------|-----------|-----------|-------|\n");
  int rc = 0;
  if (!cfg.only || strcmp(cfg.only, "decode") == 0) rc |= bench_decode(h, &cfg);
  if (!cfg.only || strcmp(cfg.only, "latency") == 0) {
    static const int64_t det[4] = {1, 3, 224, 224}, det640[4] = {1, 3, 640, 640}, rec[4] = {1, 3, 48, 320},
                         cls[4] = {1, 3, 48, 192};
    rc |= bench_latency(h, &cfg, "models/gen/cnn_small.onnx", "ms/run", NULL, 0);
    rc |= bench_latency(h, &cfg, "models/gen/cnn_resnet18ish.onnx", "ms/run", NULL, 0);
    rc |= bench_latency(h, &cfg, ".deps/ocr/package/assets/ch_PP-OCRv4_det_infer.onnx", "1x3x224x224", det, 4);
    rc |= bench_latency(h, &cfg, ".deps/ocr/package/assets/ch_PP-OCRv4_det_infer.onnx", "1x3x640x640", det640, 4);
    rc |= bench_latency(h, &cfg, ".deps/ocr/package/assets/ch_PP-OCRv4_rec_infer.onnx", "1x3x48x320", rec, 4);
    rc |= bench_latency(h, &cfg, ".deps/ocr/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx", "1x3x48x192", cls, 4);
  }
  if (cfg.only && strcmp(cfg.only, "quant") == 0)
    rc |= bench_latency(h, &cfg, "models/gen/unet_q_1024.onnx", "1x3x1024x1024", NULL, 0);
  fbx_host_close(h);
  return rc ? 1 : 0;
}
