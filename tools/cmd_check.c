// cmd_check.c — `fusebox check MODEL`: Fusebox vs ORT's CPU EP on the same inputs.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_check_all.h"
#include "cmds.h"

static const char kUsage[] =
    "usage: fusebox check MODEL [--input NAME=FILE.npy]... [--rtol R] [--atol A] [--iters N]\n"
    "       fusebox check --all-tensors MODEL [--verbose] [--rtol R] [--atol A]\n"
    "  Runs the same inputs (random from --seed unless given) through a Fusebox session and a\n"
    "  plain ORT CPU session and prints max abs / max rel error per output. Exit 1 when any\n"
    "  element is beyond |a-b| <= atol + rtol*|b| (NaN == NaN; ints and bools exact).\n"
    "  --rtol R   relative tolerance (default 1e-3)\n"
    "  --atol A   absolute tolerance (default 1e-4)\n"
    "  --iters N  run the Fusebox session N times on the same inputs, checking every run\n"
    "  --all-tensors  compare every intermediate value of the main graph (each node output is\n"
    "             made a graph output of a temporary copy of the model) and print the first\n"
    "             node, in graph order, whose output diverges: its op, the EP it ran on, the\n"
    "             kernel variant (from a FUSEBOX_TRACE of the run) and its inputs' errors.\n"
    "             Per value |a-b| <= atol*max(1, max|ref|) + rtol*|ref| (atol grows with the\n"
    "             tensor's scale). Exit 1 when a node diverges.\n"
    "  --verbose  with --all-tensors: one line per compared value\n";

typedef struct {
  double rtol, atol;
  long long iters;
  int all_tensors, verbose;
} check_opts;

static int check_opt(void *ctx, const char *opt, const char *val) {
  check_opts *o = ctx;
  if (strcmp(opt, "--all-tensors") == 0 || strcmp(opt, "--verbose") == 0) {
    *(opt[2] == 'a' ? &o->all_tensors : &o->verbose) = 1;
    return 1;
  }
  double *dst = strcmp(opt, "--rtol") == 0 ? &o->rtol : strcmp(opt, "--atol") == 0 ? &o->atol : NULL;
  if (dst) {
    if (fbx_cli_parse_double(val, dst) != 0 || *dst < 0) {
      fprintf(stderr, "fusebox check: %s needs a non-negative number\n", opt);
      return -1;
    }
    return 2;
  }
  if (strcmp(opt, "--iters") == 0) {
    if (fbx_cli_parse_int(val, 1, 1000000, &o->iters) != 0) {
      fprintf(stderr, "fusebox check: --iters needs a positive integer\n");
      return -1;
    }
    return 2;
  }
  return 0;
}

static int check_run(fbx_cli *c, fbx_host_session *s, const char *what, fbx_host_tensor *ins,
                     size_t n_in, fbx_host_tensor **outs, size_t *n_out) {
  char *err = fbx_host_session_run(s, ins, n_in, outs, n_out);
  if (!err) return 0;
  fprintf(stderr, "%s: %s run: %s\n", c->prog, what, err);
  fbx_host_err_free(err);
  return -1;
}

int fbx_cmd_check(int argc, char **argv) {
  fbx_cli c;
  check_opts o = {1e-3, 1e-4, 1, 0, 0};
  int rc = fbx_cli_parse(&c, "fusebox check", argc, argv, kUsage, check_opt, &o, 1);
  if (rc) return rc == 1 ? 0 : 2;
  if (fbx_cli_open(&c)) return 1;
  if (o.all_tensors) {
    rc = fbx_cmd_check_all_tensors(&c, o.rtol, o.atol, o.verbose);
    fbx_cli_close(&c);
    return rc;
  }
  rc = 1;
  fbx_host_tensor *ins = NULL, *ref = NULL, *got = NULL;
  size_t n_in = 0, n_ref = 0, n_got = 0;
  fbx_host_session *sf = NULL, *sc = NULL;
  if (!(sc = fbx_cli_session(&c, 0, 0)) || !(sf = fbx_cli_session(&c, 1, 0))) goto out;
  if (fbx_cli_inputs(&c, sf, &ins, &n_in)) goto out;
  printf("model %s (ORT %s)\n", c.model, fbx_host_ort_version(c.host));
  for (size_t i = 0; i < n_in; i++) {
    printf("  input  ");
    fbx_cli_print_shape(&ins[i]);
    printf("\n");
  }
  if (check_run(&c, sc, "ORT CPU", ins, n_in, &ref, &n_ref)) goto out;
  int all_ok = 1;
  for (long long it = 0; it < o.iters; it++) {
    fbx_host_tensors_free(got, n_got);
    got = NULL;
    n_got = 0;
    if (check_run(&c, sf, "Fusebox", ins, n_in, &got, &n_got)) goto out;
    if (n_got != n_ref) {
      fprintf(stderr, "fusebox check: %zu outputs from Fusebox, %zu from ORT CPU\n", n_got, n_ref);
      goto out;
    }
    for (size_t i = 0; i < n_ref; i++) {
      fbx_host_cmp r;
      int ok = fbx_host_compare(&got[i], &ref[i], o.rtol, o.atol, &r);
      all_ok &= ok;
      if (it + 1 < o.iters && ok) continue;  // print the last run (or any failure)
      char sa[128], sb[128];
      if (r.shape_mismatch) {
        printf("  output %s: MISMATCH shape/dtype Fusebox %s[%s] vs ORT %s[%s]\n", ref[i].name,
               fbx_host_dtype_name(got[i].dtype), fbx_host_shape_str(got[i].rank, got[i].dims, sa, sizeof sa),
               fbx_host_dtype_name(ref[i].dtype), fbx_host_shape_str(ref[i].rank, ref[i].dims, sb, sizeof sb));
        continue;
      }
      printf("  output %s [%s]%s: max_abs %.3g max_rel %.3g  %s", ref[i].name,
             fbx_host_shape_str(ref[i].rank, ref[i].dims, sa, sizeof sa),
             o.iters > 1 ? "" : "", r.max_abs, r.max_rel, ok ? "ok" : "FAIL");
      if (!ok)
        printf(" (%zu/%zu elements beyond tolerance, run %lld; worst at %zu: %.6g vs %.6g)", r.n_bad,
               r.numel, it + 1, r.worst_index, fbx_host_tensor_get(&got[i], r.worst_index),
               fbx_host_tensor_get(&ref[i], r.worst_index));
      printf("\n");
    }
  }
  printf("%s (rtol %g, atol %g)\n", all_ok ? "PASS" : "FAIL", o.rtol, o.atol);
  rc = all_ok ? 0 : 1;
out:
  fbx_host_tensors_free(ins, n_in);
  fbx_host_tensors_free(ref, n_ref);
  fbx_host_tensors_free(got, n_got);
  fbx_host_session_destroy(sf);
  fbx_host_session_destroy(sc);
  fbx_cli_close(&c);
  return rc;
}
