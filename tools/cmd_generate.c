// cmd_generate.c — `fusebox generate MODEL`: greedy decode with a KV cache, Fusebox vs ORT CPU.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"
#include "common/ort_host_decode.h"
#include "onnx_wire.h"

static const char kUsage[] =
    "usage: fusebox generate MODEL [--prompt-len N] [--new-tokens M] [--rounds R] [--no-ort]\n"
    "                             [--kv-buffer auto|shared|separate] [--max-length L]\n"
    "                             [--kv-memory auto|host|device] [--rtol R --atol A]\n"
    "  Prefills a random prompt (ids from --seed) on a decoder with a KV cache (inputs input_ids,\n"
    "  position_ids, attention_mask, past_key_values.<i>.key/.value; outputs logits,\n"
    "  present.<i>.key/.value), then decodes M tokens greedily (argmax), feeding presents back\n"
    "  as pasts. The same loop runs on ORT's CPU EP. A first pass runs both step by step\n"
    "  interleaved and compares logits and tokens at every step (it also warms both up); then R\n"
    "  timed rounds run each whole loop in turn, alternating which EP goes first (so neither pays\n"
    "  for the other's idle threads more than once per round); prints the median prefill and\n"
    "  decode tok/s of both, their ratio, the worst logits error while the sequences agree, and\n"
    "  whether the generated sequences are identical (exit 1 if not).\n"
    "  --prompt-len N   prompt tokens (default 16)\n"
    "  --new-tokens M   decode steps (default 32)\n"
    "  --rounds R       timed rounds after the checked pass (default 3)\n"
    "  --no-ort         Fusebox only (no comparison)\n"
    "  --kv-buffer K    shared: as ONNX Runtime GenAI with past_present_share_buffer, one\n"
    "                   (1, kv_heads, L, head_dim) buffer per cache bound with IOBinding as both\n"
    "                   past_key_values.<i>.* and present.<i>.* (the new rows are written in place;\n"
    "                   attention_mask (1, past + new) gives the valid length); separate: pasts\n"
    "                   fed, presents copied back; auto (default): shared when the model's\n"
    "                   attention is com.microsoft GroupQueryAttention (as GenAI decides), else separate\n"
    "  --max-length L   rows of a shared buffer (default prompt + new tokens)\n"
    "  --kv-memory M    where Fusebox's shared buffers live: device: in the GPU OrtEpDevice's memory\n"
    "                   (ORT's allocator for it), with input_ids, attention_mask (a max-length buffer\n"
    "                   of ones, bound as its prefix) and logits (copied to the host after each step)\n"
    "                   bound there too, as GenAI runs on a GPU; host: host memory; auto (default):\n"
    "                   device when the session runs on Fusebox's GPU device (--ep-devices gpu, or\n"
    "                   --ep-option device=cuda without --ep-devices cpu). ORT's CPU EP: host\n"
    "  --rtol R --atol A  logits tolerance reported per step (default 1e-3 / 1e-3)\n";

typedef enum { GEN_KV_AUTO, GEN_KV_SHARED, GEN_KV_SEPARATE } gen_kv;
typedef enum { GEN_MEM_AUTO, GEN_MEM_HOST, GEN_MEM_DEVICE } gen_mem;

typedef struct {
  long long prompt, new_tokens, rounds, max_length;
  int no_ort;
  gen_kv kv;
  gen_mem mem;
  double rtol, atol;
} gen_opts;

static int gen_opt(void *ctx, const char *opt, const char *val) {
  gen_opts *o = ctx;
  long long *dst = strcmp(opt, "--prompt-len") == 0   ? &o->prompt
                   : strcmp(opt, "--new-tokens") == 0 ? &o->new_tokens
                   : strcmp(opt, "--rounds") == 0     ? &o->rounds
                   : strcmp(opt, "--max-length") == 0 ? &o->max_length
                                                      : NULL;
  if (strcmp(opt, "--kv-buffer") == 0) {
    if (!val || (strcmp(val, "auto") && strcmp(val, "shared") && strcmp(val, "separate"))) {
      fprintf(stderr, "fusebox generate: --kv-buffer takes auto, shared or separate\n");
      return -1;
    }
    o->kv = !strcmp(val, "shared") ? GEN_KV_SHARED : !strcmp(val, "separate") ? GEN_KV_SEPARATE : GEN_KV_AUTO;
    return 2;
  }
  if (strcmp(opt, "--kv-memory") == 0) {
    if (!val || (strcmp(val, "auto") && strcmp(val, "host") && strcmp(val, "device"))) {
      fprintf(stderr, "fusebox generate: --kv-memory takes auto, host or device\n");
      return -1;
    }
    o->mem = !strcmp(val, "host") ? GEN_MEM_HOST : !strcmp(val, "device") ? GEN_MEM_DEVICE : GEN_MEM_AUTO;
    return 2;
  }
  if (dst) {
    if (fbx_cli_parse_int(val, dst == &o->prompt ? 1 : 0, 1000000, dst) != 0) {
      fprintf(stderr, "fusebox generate: bad value for %s\n", opt);
      return -1;
    }
    return 2;
  }
  double *d = strcmp(opt, "--rtol") == 0 ? &o->rtol : strcmp(opt, "--atol") == 0 ? &o->atol : NULL;
  if (d) {
    if (fbx_cli_parse_double(val, d) != 0 || *d < 0) {
      fprintf(stderr, "fusebox generate: %s needs a non-negative number\n", opt);
      return -1;
    }
    return 2;
  }
  if (strcmp(opt, "--no-ort") == 0) {
    o->no_ort = 1;
    return 1;
  }
  return 0;
}

typedef struct {
  const char *name;
  fbx_host_session *s;
  fbx_host_decoder d;
  int64_t *tokens;       // (new_tokens + 1) argmax results
  double prefill_s, decode_s;         // medians over the timed rounds
  double round_prefill[64], round_decode[64];
} gen_lane;

#define GEN_MAX_ROUNDS 64

static int gen_step(fbx_cli *c, gen_lane *l, const int64_t *ids, int64_t n, int64_t *next) {
  char *err = fbx_host_decoder_step(&l->d, ids, n);
  if (err) {
    fprintf(stderr, "%s: %s: %s\n", c->prog, l->name, err);
    fbx_host_err_free(err);
    return -1;
  }
  *next = fbx_host_decoder_argmax(&l->d);
  return *next < 0 ? -1 : 0;
}

// One whole loop on one lane: reset, prefill the prompt, decode n tokens; times in seconds.
static int gen_loop(fbx_cli *c, gen_lane *l, const int64_t *prompt, long long n_prompt, long long n_new,
                    double *prefill_s, double *decode_s) {
  /* let the other EP's spinning workers go idle first: ORT's intra-op workers
   * spin 2^20 pauses after their queue empties, an estimated ~20 ms on Zen 4 but ~50-60 ms
   * on the GPU host's Xeon (pause ~140 cycles); 20 ms left our 16-thread
   * prefill there starting on cores still taken (44 ms traced alone, 63 ms
   * median right after ORT's loop) */
  fbx_host_settle(100);
  char *err = fbx_host_decoder_reset(&l->d);
  if (err) {
    fprintf(stderr, "%s: %s: %s\n", c->prog, l->name, err);
    fbx_host_err_free(err);
    return -1;
  }
  int64_t tok;
  if (gen_step(c, l, prompt, n_prompt, &tok)) return -1;
  *prefill_s = l->d.last_run_s;
  *decode_s = 0;
  for (long long i = 0; i < n_new; i++) {
    if (gen_step(c, l, &tok, 1, &tok)) return -1;
    *decode_s += l->d.last_run_s;
  }
  return 0;
}

// GenAI shares past and present buffers when its model builder emitted GroupQueryAttention (whose
// present is the past buffer's capacity, written in place); a Concat-based attention's present
// grows by one row per step and cannot. 1: the main graph has a com.microsoft GroupQueryAttention.
static int gen_model_has_gqa(const char *model) {
  unsigned char *buf = NULL;
  size_t n = 0;
  fbx_wire_graph g;
  memset(&g, 0, sizeof g);
  char *err = fbx_wire_file_read(model, &buf, &n);
  if (!err) err = fbx_wire_graph_read(buf, n, &g);
  int gqa = 0;
  for (size_t i = 0; !err && i < g.n_nodes && !gqa; i++)
    gqa = !strcmp(g.nodes[i].op_type, "GroupQueryAttention") && !strcmp(g.nodes[i].domain, "com.microsoft");
  if (err) fprintf(stderr, "fusebox generate: %s: %s (KV buffers: separate)\n", model, err);
  free(err);
  fbx_wire_graph_free(&g);
  free(buf);
  return gqa;
}

// The Fusebox session runs on its GPU OrtEpDevice: the GPU device alone, or all devices with
// device=cuda (or device=gpu-sim's cuda: the EP option is the same).
static int gen_on_gpu(const fbx_cli *c) {
  if (c->ep_devices == FBX_HOST_DEVICES_GPU) return 1;
  if (c->ep_devices == FBX_HOST_DEVICES_CPU) return 0;
  for (size_t i = 0; i < c->n_ep_opts; i++)
    if (!strcmp(c->ep_opts[i].key, "device") && !strcmp(c->ep_opts[i].val, "cuda")) return 1;
  return 0;
}

static int gen_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double gen_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, gen_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int fbx_cmd_generate(int argc, char **argv) {
  fbx_cli c;
  gen_opts o = {16, 32, 3, 0, 0, GEN_KV_AUTO, GEN_MEM_AUTO, 1e-3, 1e-3};
  int rc = fbx_cli_parse(&c, "fusebox generate", argc, argv, kUsage, gen_opt, &o, 1);
  if (rc) return rc == 1 ? 0 : 2;
  if (o.rounds < 1 || o.rounds > GEN_MAX_ROUNDS) {
    fprintf(stderr, "fusebox generate: --rounds must be 1..%d\n", GEN_MAX_ROUNDS);
    return 2;
  }
  if (fbx_cli_open(&c)) return 1;
  rc = 1;
  gen_lane lanes[2];
  memset(lanes, 0, sizeof lanes);
  lanes[0].name = "Fusebox";
  lanes[1].name = "ORT CPU";
  int n_lanes = o.no_ort ? 1 : 2;
  int64_t *prompt = calloc((size_t)o.prompt, sizeof *prompt);
  if (!prompt) goto out;
  int shared = o.kv == GEN_KV_SHARED || (o.kv == GEN_KV_AUTO && gen_model_has_gqa(c.model));
  long long cap = o.max_length ? o.max_length : o.prompt + o.new_tokens;
  if (shared && cap < o.prompt + o.new_tokens) {
    fprintf(stderr, "fusebox generate: --max-length %lld < prompt + new tokens (%lld)\n", cap,
            o.prompt + o.new_tokens);
    goto out;
  }
  int on_dev = shared && (o.mem == GEN_MEM_DEVICE || (o.mem == GEN_MEM_AUTO && gen_on_gpu(&c)));
  if (o.mem == GEN_MEM_DEVICE && !shared) {
    fprintf(stderr, "fusebox generate: --kv-memory device needs shared KV buffers (--kv-buffer shared)\n");
    goto out;
  }
  for (int k = 0; k < n_lanes; k++) {
    lanes[k].s = fbx_cli_session(&c, k == 0, 0);
    if (!lanes[k].s) goto out;
    char *err = shared && on_dev && k == 0 ? fbx_host_decoder_init_shared_device(&lanes[k].d, lanes[k].s, cap, o.prompt)
                : shared                   ? fbx_host_decoder_init_shared(&lanes[k].d, lanes[k].s, cap)
                                           : fbx_host_decoder_init(&lanes[k].d, lanes[k].s);
    if (err) {
      fprintf(stderr, "fusebox generate: %s\n", err);
      fbx_host_err_free(err);
      goto out;
    }
    lanes[k].tokens = calloc((size_t)o.new_tokens + 1, sizeof(int64_t));
    if (!lanes[k].tokens) goto out;
  }
  // vocabulary from the logits output (static last dim), else 100
  int64_t vocab = 100;
  const fbx_host_io *lo = fbx_host_session_output(lanes[0].s, (size_t)fbx_host_session_output_find(lanes[0].s, "logits"));
  if (lo && lo->rank >= 1 && lo->dims[lo->rank - 1] > 0) vocab = lo->dims[lo->rank - 1];
  {
    fbx_host_tensor pt = {0};
    int64_t dims[1] = {o.prompt};
    char *err = fbx_host_tensor_alloc(&pt, "prompt", FBX_HOST_I64, 1, dims);
    if (err) { fbx_host_err_free(err); goto out; }
    fbx_host_tensor_fill_int(&pt, c.seed, 0, vocab - 1);
    memcpy(prompt, pt.data, pt.nbytes);
    fbx_host_tensor_free(&pt);
  }
  printf("model %s (ORT %s): %d layer(s), %lld heads x %lld, vocab %lld; prompt %lld, new tokens %lld\n",
         c.model, fbx_host_ort_version(c.host), lanes[0].d.n_layers, (long long)lanes[0].d.heads,
         (long long)lanes[0].d.head_dim, (long long)vocab, o.prompt, o.new_tokens);
  if (shared)
    printf("  KV: shared buffers (1, %lld, %lld, %lld) bound as past_key_values.* and present.* (IOBinding, as GenAI); "
           "Fusebox's in %s memory\n",
           (long long)lanes[0].d.heads, cap, (long long)lanes[0].d.head_dim,
           on_dev ? "GPU device (input_ids, attention_mask, logits bound there too)" : "host");
  else
    printf("  KV: separate past and present (presents copied back as the next pasts)\n");

  // prefill
  for (int k = 0; k < n_lanes; k++) {
    if (gen_step(&c, &lanes[k], prompt, o.prompt, &lanes[k].tokens[0])) goto out;
  }
  double worst_abs = 0;
  long long bad_steps = 0, agree_steps = 0;
  int agree = 1;
  for (long long step = 0; step <= o.new_tokens; step++) {
    if (step > 0) {
      for (int k = 0; k < n_lanes; k++) {
        if (gen_step(&c, &lanes[k], &lanes[k].tokens[step - 1], 1, &lanes[k].tokens[step])) goto out;
      }
    }
    if (n_lanes == 2 && agree) {
      fbx_host_cmp r;
      int ok = fbx_host_compare(&lanes[0].d.logits, &lanes[1].d.logits, o.rtol, o.atol, &r);
      if (r.max_abs > worst_abs) worst_abs = r.max_abs;
      bad_steps += !ok;
      agree_steps++;
      agree = lanes[0].tokens[step] == lanes[1].tokens[step];
    }
  }
  // timed rounds: whole loops, alternating which lane goes first
  for (long long r = 0; r < o.rounds; r++) {
    for (int j = 0; j < n_lanes; j++) {
      int k = (r % 2 == 0) ? j : n_lanes - 1 - j;
      if (gen_loop(&c, &lanes[k], prompt, o.prompt, o.new_tokens, &lanes[k].round_prefill[r],
                   &lanes[k].round_decode[r]))
        goto out;
    }
  }
  for (int k = 0; k < n_lanes; k++) {
    lanes[k].prefill_s = gen_median(lanes[k].round_prefill, (int)o.rounds);
    lanes[k].decode_s = gen_median(lanes[k].round_decode, (int)o.rounds);
  }
  printf("  timing: median of %lld round(s), each EP's whole loop in turn (order alternating)\n", o.rounds);
  for (int k = 0; k < n_lanes; k++) {
    gen_lane *l = &lanes[k];
    printf("  %-8s prefill %8.1f tok/s (TTFT %.2f ms)   decode %8.1f tok/s (%.3f ms/token)\n", l->name,
           (double)o.prompt / l->prefill_s, l->prefill_s * 1e3,
           o.new_tokens ? (double)o.new_tokens / l->decode_s : 0.0,
           o.new_tokens ? l->decode_s * 1e3 / (double)o.new_tokens : 0.0);
  }
  printf("  tokens (Fusebox):");
  for (long long i = 0; i <= o.new_tokens && i < 16; i++) printf(" %lld", (long long)lanes[0].tokens[i]);
  printf("%s\n", o.new_tokens >= 16 ? " ..." : "");
  if (n_lanes == 2) {
    printf("  ratio Fusebox/ORT: prefill %.2fx, decode %.2fx (tok/s; > 1: Fusebox is faster)\n",
           lanes[1].prefill_s / lanes[0].prefill_s,
           lanes[0].decode_s > 0 ? lanes[1].decode_s / lanes[0].decode_s : 0.0);
    int same = memcmp(lanes[0].tokens, lanes[1].tokens, (size_t)(o.new_tokens + 1) * sizeof(int64_t)) == 0;
    printf("  logits vs ORT over %lld step(s): max abs %.3g, %lld step(s) beyond rtol %g / atol %g\n",
           agree_steps, worst_abs, bad_steps, o.rtol, o.atol);
    printf("  generated sequences %s\n", same ? "IDENTICAL" : "DIFFER");
    rc = same ? 0 : 1;
  } else {
    rc = 0;
  }
out:
  for (int k = 0; k < 2; k++) {
    fbx_host_decoder_free(&lanes[k].d);
    free(lanes[k].tokens);
    fbx_host_session_destroy(lanes[k].s);
  }
  free(prompt);
  fbx_cli_close(&c);
  return rc;
}
