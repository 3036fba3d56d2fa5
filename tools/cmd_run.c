// cmd_run.c — `fusebox run MODEL`: run with Fusebox, print output shapes and time.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"

static const char kUsage[] =
    "usage: fusebox run MODEL [--input NAME=FILE.npy]... [--iters N] [--save-dir DIR] [--cpu] [--ort-profile PREFIX]\n"
    "  Runs MODEL with the Fusebox EP (random inputs from --seed unless given) and prints\n"
    "  each output's name, dtype and shape, and the time per run.\n"
    "  --iters N      number of runs (default 1)\n"
    "  --save-dir DIR write each output as DIR/<name>.npy\n"
    "  --cpu          use ORT's CPU EP instead of Fusebox\n"
    "  --ort-profile PREFIX  ORT's own profiling (per-node times of ORT's CPU EP with --cpu) into\n"
    "                 PREFIX_<date>.json, written when the session ends\n";

typedef struct {
  long long iters;
  const char *save_dir;
  const char *ort_profile;
  int cpu;
} run_opts;

static int run_opt(void *ctx, const char *opt, const char *val) {
  run_opts *o = ctx;
  if (strcmp(opt, "--iters") == 0) {
    if (fbx_cli_parse_int(val, 1, 1000000000, &o->iters) != 0) {
      fprintf(stderr, "fusebox run: --iters needs a positive integer\n");
      return -1;
    }
    return 2;
  }
  if (strcmp(opt, "--save-dir") == 0) {
    if (!val) return -1;
    o->save_dir = val;
    return 2;
  }
  if (strcmp(opt, "--ort-profile") == 0) {
    if (!val) return -1;
    o->ort_profile = val;
    return 2;
  }
  if (strcmp(opt, "--cpu") == 0) {
    o->cpu = 1;
    return 1;
  }
  return 0;
}

int fbx_cmd_run(int argc, char **argv) {
  fbx_cli c;
  run_opts o = {1, NULL, NULL, 0};
  int rc = fbx_cli_parse(&c, "fusebox run", argc, argv, kUsage, run_opt, &o, 1);
  if (rc) return rc == 1 ? 0 : 2;
  if (fbx_cli_open(&c)) return 1;
  c.ort_profile = o.ort_profile;
  rc = 1;
  fbx_host_tensor *ins = NULL, *outs = NULL;
  size_t n_in = 0, n_out = 0;
  double *times = calloc((size_t)o.iters, sizeof *times);
  fbx_host_session *s = fbx_cli_session(&c, !o.cpu, 0);
  if (!s || !times || fbx_cli_inputs(&c, s, &ins, &n_in)) goto out;
  for (long long it = 0; it < o.iters; it++) {
    fbx_host_tensors_free(outs, n_out);
    outs = NULL;
    n_out = 0;
    double t0 = fbx_host_now();
    char *err = fbx_host_session_run(s, ins, n_in, &outs, &n_out);
    times[it] = (fbx_host_now() - t0) * 1e3;
    if (err) {
      fprintf(stderr, "fusebox run: %s\n", err);
      fbx_host_err_free(err);
      goto out;
    }
  }
  for (size_t i = 0; i < n_out; i++) {
    printf("output ");
    fbx_cli_print_shape(&outs[i]);
    printf("\n");
    if (o.save_dir) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s.npy", o.save_dir, outs[i].name);
      for (char *p = path + strlen(o.save_dir) + 1; *p; p++)
        if (*p == '/') *p = '_';
      char *err = fbx_host_npy_write(path, &outs[i]);
      if (err) {
        fprintf(stderr, "fusebox run: %s\n", err);
        fbx_host_err_free(err);
        goto out;
      }
    }
  }
  printf("%s: %lld run(s), first %.3f ms", o.cpu ? "ORT CPU" : "Fusebox", o.iters, times[0]);
  if (o.iters > 1) {
    printf(", median %.3f ms, min %.3f ms (excluding the first)",
           fbx_cli_median(times + 1, (size_t)o.iters - 1), fbx_cli_min(times + 1, (size_t)o.iters - 1));
  }
  printf("\n");
  rc = 0;
out:
  fbx_host_tensors_free(outs, n_out);
  fbx_host_tensors_free(ins, n_in);
  fbx_host_session_destroy(s);
  free(times);
  fbx_cli_close(&c);
  return rc;
}
