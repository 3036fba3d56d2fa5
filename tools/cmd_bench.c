// cmd_bench.c — `fusebox bench MODEL`: Fusebox vs ORT's CPU EP, interleaved in one process.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"

static const char kUsage[] =
    "usage: fusebox bench MODEL [--iters N] [--warmup N] [--block N] [--settle MS]\n"
    "  Creates a Fusebox session and an ORT CPU session with the same thread count and runs them\n"
    "  interleaved in blocks on the same inputs: each block is an optional pause, one untimed run\n"
    "  (after a switch the other EP's workers may still be spinning on our cores), then N timed\n"
    "  runs back to back, the EPs taking turns, order alternating.\n"
    "  Prints median / min ms of each and the ratio ORT/Fusebox (> 1: Fusebox is faster).\n"
    "  --iters N   timed runs per EP (default 20)\n"
    "  --warmup N  untimed runs per EP first (default 3)\n"
    "  --block N   timed runs per block (default 5)\n"
    "  --settle MS pause before each block (default 0)\n";

typedef struct {
  long long iters, warmup, block, settle_ms;
} bench_opts;

static int bench_opt(void *ctx, const char *opt, const char *val) {
  bench_opts *o = ctx;
  long long *dst = strcmp(opt, "--iters") == 0    ? &o->iters
                   : strcmp(opt, "--warmup") == 0 ? &o->warmup
                   : strcmp(opt, "--block") == 0  ? &o->block
                   : strcmp(opt, "--settle") == 0 ? &o->settle_ms
                                                  : NULL;
  if (!dst) return 0;
  long long lo = dst == &o->warmup || dst == &o->settle_ms ? 0 : 1;
  long long hi = dst == &o->settle_ms ? 10000 : 100000000;
  if (fbx_cli_parse_int(val, lo, hi, dst) != 0) {
    fprintf(stderr, "fusebox bench: %s needs a non-negative integer\n", opt);
    return -1;
  }
  return 2;
}

// One timed run in ms, or < 0 on error (printed).
static double bench_once(fbx_cli *c, fbx_host_session *s, const char *what, fbx_host_tensor *ins,
                         size_t n_in) {
  fbx_host_tensor *outs = NULL;
  size_t n_out = 0;
  double t0 = fbx_host_now();
  char *err = fbx_host_session_run(s, ins, n_in, &outs, &n_out);
  double ms = (fbx_host_now() - t0) * 1e3;
  fbx_host_tensors_free(outs, n_out);
  if (err) {
    fprintf(stderr, "%s: %s run: %s\n", c->prog, what, err);
    fbx_host_err_free(err);
    return -1;
  }
  return ms;
}

int fbx_cmd_bench(int argc, char **argv) {
  fbx_cli c;
  bench_opts o = {20, 3, 5, 0};
  int rc = fbx_cli_parse(&c, "fusebox bench", argc, argv, kUsage, bench_opt, &o, 1);
  if (rc) return rc == 1 ? 0 : 2;
  if (fbx_cli_open(&c)) return 1;
  rc = 1;
  fbx_host_tensor *ins = NULL;
  size_t n_in = 0;
  fbx_host_session *sf = NULL, *sc = NULL;
  double *tf = calloc((size_t)o.iters, sizeof *tf), *tc = calloc((size_t)o.iters, sizeof *tc);
  if (!tf || !tc) goto out;
  if (!(sc = fbx_cli_session(&c, 0, 0)) || !(sf = fbx_cli_session(&c, 1, 0))) goto out;
  if (fbx_cli_inputs(&c, sf, &ins, &n_in)) goto out;
  for (long long i = 0; i < o.warmup; i++)
    if (bench_once(&c, sf, "Fusebox", ins, n_in) < 0 || bench_once(&c, sc, "ORT CPU", ins, n_in) < 0) goto out;
  // blocks: an optional pause and one untimed run after each switch, then up to `block` timed
  // runs; EPs take turns. A 100 ms pause did not remove the slow first runs of a 3 ms model after
  // a switch on 2 cores (bench/RESULTS.md, session 5), so it is off unless asked for.
  long long nf = 0, nc = 0;
  for (long long r = 0; nf < o.iters || nc < o.iters; r++) {
    for (int j = 0; j < 2; j++) {
      int fusebox = ((r & 1) == 0) == (j == 0); // alternate which EP goes first
      fbx_host_session *s = fusebox ? sf : sc;
      const char *what = fusebox ? "Fusebox" : "ORT CPU";
      double *t = fusebox ? tf : tc;
      long long *n = fusebox ? &nf : &nc;
      fbx_host_settle((int)o.settle_ms);
      if (bench_once(&c, s, what, ins, n_in) < 0) goto out;
      for (long long k = 0; k < o.block && *n < o.iters; k++) {
        double ms = bench_once(&c, s, what, ins, n_in);
        if (ms < 0) goto out;
        t[(*n)++] = ms;
      }
    }
  }
  double mf = fbx_cli_median(tf, (size_t)o.iters), mc = fbx_cli_median(tc, (size_t)o.iters);
  printf("model %s (ORT %s, threads %d, %lld iters after %lld warmup, interleaved in blocks of %lld, "
         "%lld ms pause before each)\n",
         c.model, fbx_host_ort_version(c.host), c.threads, o.iters, o.warmup, o.block, o.settle_ms);
  printf("  Fusebox  median %9.3f ms  min %9.3f ms\n", mf, fbx_cli_min(tf, (size_t)o.iters));
  printf("  ORT CPU  median %9.3f ms  min %9.3f ms\n", mc, fbx_cli_min(tc, (size_t)o.iters));
  printf("  ratio ORT/Fusebox (median) %.2fx\n", mf > 0 ? mc / mf : 0.0);
  rc = 0;
out:
  free(tf);
  free(tc);
  fbx_host_tensors_free(ins, n_in);
  fbx_host_session_destroy(sf);
  fbx_host_session_destroy(sc);
  fbx_cli_close(&c);
  return rc;
}
