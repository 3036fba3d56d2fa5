// cli.c — option parsing, session creation and input preparation shared by the subcommands.
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char fbx_cli_global_help[] =
    "global options:\n"
    "  --ort LIB              ONNX Runtime library (default $FUSEBOX_ORT_LIB, else\n"
    "                         .deps/lib/libonnxruntime.1.30.so above the executable)\n"
    "  --ep LIB               Fusebox EP library (default $FUSEBOX_EP_LIB, else\n"
    "                         libfusebox_ep.so next to / above the executable)\n"
    "  --threads N            intra-op threads for every session (and Fusebox threads=N)\n"
    "  --ep-option KEY=VALUE  Fusebox EP option (repeatable): device, device_id, threads,\n"
    "                         compile, cache_limit, tf32, ort_stream\n"
    "  --ep-devices all|cpu|gpu  which of Fusebox's OrtEpDevices the session gets (default all:\n"
    "                         with device=cuda the GPU one where listed; cpu: device=cuda copies\n"
    "                         ORT's host buffers each run; gpu: the GPU device alone)\n"
    "  --seed N               seed of the random inputs (default 42)\n"
    "input options (run, check, bench):\n"
    "  --input NAME=FILE.npy  use this data for input NAME (repeatable)\n"
    "  --shape NAME=AxBxC     shape of a random input NAME\n"
    "  --dim SYMBOL=N         value of a symbolic dim (defaults: *batch* 1, *past* 4,\n"
    "                         *total* past+sequence, others 8)\n"
    "  --int-range NAME=LO:HI range of a random integer input (defaults: *mask* 1,\n"
    "                         *position* past..past+seq-1, *ids* 0..99, others 0..9)\n";

// ---------------------------------------------------------------------------------------
// Parse helpers
// ---------------------------------------------------------------------------------------

int fbx_cli_parse_int(const char *s, long long lo, long long hi, long long *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int fbx_cli_parse_double(const char *s, double *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end) return -1;
  *out = v;
  return 0;
}

int fbx_cli_split_kv(char *s, fbx_cli_kv *kv) {
  char *eq = s ? strchr(s, '=') : NULL;
  if (!eq || eq == s) return -1;
  *eq = 0;
  kv->key = s;
  kv->val = eq + 1;
  return 0;
}

static int cli__add_kv(fbx_cli *c, fbx_cli_kv *arr, size_t *n, const char *opt, char *val) {
  if (!val) {
    fprintf(stderr, "%s: %s needs a value\n", c->prog, opt);
    return -1;
  }
  if (*n >= FBX_CLI_MAX_KV) {
    fprintf(stderr, "%s: too many %s options\n", c->prog, opt);
    return -1;
  }
  if (fbx_cli_split_kv(val, &arr[*n]) != 0) {
    fprintf(stderr, "%s: %s expects NAME=VALUE, got '%s'\n", c->prog, opt, val);
    return -1;
  }
  (*n)++;
  return 0;
}

// "--opt=value" -> opt name in buf, value pointer; else value = next.
static const char *cli__split_eq(const char *arg, char *buf, size_t cap, const char *next,
                                 int *used) {
  const char *eq = strchr(arg, '=');
  if (arg[0] == '-' && arg[1] == '-' && eq && (size_t)(eq - arg) < cap) {
    memcpy(buf, arg, (size_t)(eq - arg));
    buf[eq - arg] = 0;
    *used = 1;
    return eq + 1;
  }
  snprintf(buf, cap, "%s", arg);
  *used = 2;
  return next;
}

int fbx_cli_parse(fbx_cli *c, const char *prog, int argc, char **argv, const char *usage,
                  fbx_cli_opt_fn fn, void *ctx, int require_model) {
  memset(c, 0, sizeof *c);
  c->prog = prog;
  c->seed = 42;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      printf("%s%s", usage, fbx_cli_global_help);
      return 1;
    }
    if (a[0] != '-' || strcmp(a, "-") == 0) {
      if (!c->model) c->model = a;
      else if (c->n_extra < FBX_CLI_MAX_KV) c->extra[c->n_extra++] = a;
      continue;
    }
    char opt[64];
    int used;
    char *val = (char *)cli__split_eq(a, opt, sizeof opt, next, &used);
    int rc = 0;
    long long v;
    if (strcmp(opt, "--ort") == 0) {
      c->ort = val;
    } else if (strcmp(opt, "--ep") == 0) {
      c->ep = val;
    } else if (strcmp(opt, "--threads") == 0) {
      if (fbx_cli_parse_int(val, 0, 1024, &v) != 0) rc = -1;
      else c->threads = (int)v;
    } else if (strcmp(opt, "--seed") == 0) {
      if (fbx_cli_parse_int(val, 0, (long long)1 << 62, &v) != 0) rc = -1;
      else c->seed = (uint64_t)v;
    } else if (strcmp(opt, "--ep-option") == 0) {
      rc = cli__add_kv(c, c->ep_opts, &c->n_ep_opts, opt, val);
    } else if (strcmp(opt, "--ep-devices") == 0) {
      if (val && strcmp(val, "all") == 0) c->ep_devices = FBX_HOST_DEVICES_ALL;
      else if (val && strcmp(val, "cpu") == 0) c->ep_devices = FBX_HOST_DEVICES_CPU;
      else if (val && strcmp(val, "gpu") == 0) c->ep_devices = FBX_HOST_DEVICES_GPU;
      else rc = -1;
    } else if (strcmp(opt, "--input") == 0) {
      rc = cli__add_kv(c, c->npy, &c->n_npy, opt, val);
    } else if (strcmp(opt, "--int-range") == 0) {
      rc = cli__add_kv(c, c->ranges, &c->n_ranges, opt, val);
    } else if (strcmp(opt, "--dim") == 0) {
      rc = cli__add_kv(c, c->dimv, &c->n_dimv, opt, val);
    } else if (strcmp(opt, "--shape") == 0) {
      rc = cli__add_kv(c, c->shapes, &c->n_shapes, opt, val);
    } else {
      int k = fn ? fn(ctx, opt, val) : 0;
      if (k < 0) return 2;
      if (k == 0) {
        fprintf(stderr, "%s: unknown option '%s' (try --help)\n", prog, a);
        return 2;
      }
      if (k == 1 && used == 2) used = 1;  // a flag without value
    }
    if (rc != 0) {
      if (!val) fprintf(stderr, "%s: %s needs a value\n", prog, opt);
      else fprintf(stderr, "%s: bad value '%s' for %s\n", prog, val, opt);
      return 2;
    }
    if (used == 2 && !val) {
      fprintf(stderr, "%s: %s needs a value\n", prog, opt);
      return 2;
    }
    if (used == 2) i++;
  }
  if (require_model && !c->model) {
    fprintf(stderr, "%s: missing MODEL (try --help)\n", prog);
    return 2;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// ORT / sessions
// ---------------------------------------------------------------------------------------

int fbx_cli_open(fbx_cli *c) {
  char *err = fbx_host_open(c->ort, c->ep, &c->host);
  if (err) {
    fprintf(stderr, "%s: %s\n", c->prog, err);
    fbx_host_err_free(err);
    return -1;
  }
  return 0;
}

void fbx_cli_close(fbx_cli *c) {
  fbx_host_close(c->host);
  c->host = NULL;
}

fbx_host_session *fbx_cli_session(fbx_cli *c, int use_fusebox, int record_assignment) {
  fbx_host_session_opts o = fbx_host_session_opts_default();
  const char *keys[FBX_CLI_MAX_KV + 1], *vals[FBX_CLI_MAX_KV + 1];
  size_t n = 0;
  int user_threads = 0;
  char tbuf[32];
  for (size_t i = 0; i < c->n_ep_opts; i++) {
    keys[n] = c->ep_opts[i].key;
    vals[n++] = c->ep_opts[i].val;
    if (strcmp(c->ep_opts[i].key, "threads") == 0) user_threads = 1;
  }
  if (c->threads > 0 && !user_threads) {
    snprintf(tbuf, sizeof tbuf, "%d", c->threads);
    keys[n] = "threads";
    vals[n++] = tbuf;
  }
#ifdef FBX_CLI_SELFTEST_CPU_ONLY  // self-test of the tool's own logic: both sides on ORT CPU
  use_fusebox = 0;
#endif
  o.use_fusebox = use_fusebox;
  o.fusebox_devices = c->ep_devices;
  o.ep_keys = keys;
  o.ep_vals = vals;
  o.n_ep_opts = n;
  o.intra_threads = c->threads;
  o.record_assignment = record_assignment;
  o.profile_prefix = c->ort_profile;
  fbx_host_session *s = NULL;
  char *err = fbx_host_session_create(c->host, c->model, &o, &s);
  if (err) {
    fprintf(stderr, "%s: %s session: %s\n", c->prog, use_fusebox ? "Fusebox" : "ORT CPU", err);
    fbx_host_err_free(err);
    return NULL;
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------

static const fbx_cli_kv *cli__find(const fbx_cli_kv *arr, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(arr[i].key, key) == 0) return &arr[i];
  return NULL;
}

static int cli__has(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

// Value of a symbolic dim: --dim, else defaults (batch 1, past 4, total past+seq, others 8).
static int64_t cli__dim_value(const fbx_cli *c, const char *sym, int64_t *past, int64_t *seq) {
  const fbx_cli_kv *kv = sym && *sym ? cli__find(c->dimv, c->n_dimv, sym) : NULL;
  long long v;
  if (kv && fbx_cli_parse_int(kv->val, 0, (long long)1 << 40, &v) == 0) return v;
  if (cli__has(sym, "batch")) return 1;
  if (cli__has(sym, "past")) return *past;
  if (cli__has(sym, "total")) return *past + *seq;
  if (cli__has(sym, "seq")) return *seq;
  return 8;
}

int fbx_cli_inputs(fbx_cli *c, fbx_host_session *s, fbx_host_tensor **ins, size_t *n_ins) {
  size_t n = fbx_host_session_input_count(s);
  fbx_host_tensor *t = calloc(n ? n : 1, sizeof *t);
  char *err = NULL;
  if (!t) {
    fprintf(stderr, "%s: out of memory\n", c->prog);
    return -1;
  }
  // Symbolic defaults that tie inputs together: past and sequence lengths.
  int64_t past = 4, seq = 8;
  for (size_t i = 0; i < c->n_dimv; i++) {
    long long v;
    if (fbx_cli_parse_int(c->dimv[i].val, 0, (long long)1 << 40, &v) != 0) {
      fprintf(stderr, "%s: bad --dim value '%s'\n", c->prog, c->dimv[i].val);
      goto fail_quiet;
    }
    if (cli__has(c->dimv[i].key, "past")) past = v;
    else if (cli__has(c->dimv[i].key, "seq") && !cli__has(c->dimv[i].key, "total")) seq = v;
  }
  for (size_t i = 0; i < c->n_npy; i++)
    if (fbx_host_session_input_find(s, c->npy[i].key) < 0) {
      fprintf(stderr, "%s: --input %s: the model has no such input\n", c->prog, c->npy[i].key);
      goto fail_quiet;
    }
  for (size_t i = 0; i < n; i++) {
    const fbx_host_io *io = fbx_host_session_input(s, i);
    const fbx_cli_kv *file = cli__find(c->npy, c->n_npy, io->name);
    if (file) {
      if ((err = fbx_host_npy_read(file->val, &t[i])) || (err = fbx_host_tensor_set_name(&t[i], io->name)))
        goto fail;
      if (t[i].dtype != io->dtype) {
        err = fbx_host_errf("--input %s: file has %s, the model wants %s", io->name,
                            fbx_host_dtype_name(t[i].dtype), fbx_host_dtype_name(io->dtype));
        goto fail;
      }
      continue;
    }
    if (io->rank < 0) {
      err = fbx_host_errf("input %s has an unknown rank: give it with --input or --shape", io->name);
      goto fail;
    }
    int64_t dims[FBX_HOST_MAX_RANK];
    int rank = io->rank;
    const fbx_cli_kv *shp = cli__find(c->shapes, c->n_shapes, io->name);
    if (shp) {
      rank = 0;
      const char *p = shp->val;
      while (*p && rank < FBX_HOST_MAX_RANK) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0) break;
        dims[rank++] = v;
        p = end;
        if (*p == 'x' || *p == 'X' || *p == ',') p++;
        else break;
      }
      if (*p) {
        err = fbx_host_errf("--shape %s=%s: expected AxBxC", io->name, shp->val);
        goto fail;
      }
    } else {
      for (int d = 0; d < rank; d++)
        dims[d] = io->dims[d] >= 0 ? io->dims[d] : cli__dim_value(c, io->dim_names[d], &past, &seq);
    }
    if ((err = fbx_host_tensor_alloc(&t[i], io->name, io->dtype, rank, dims))) goto fail;
    uint64_t seed = c->seed * 1000003ull + i;
    const fbx_cli_kv *rng = cli__find(c->ranges, c->n_ranges, io->name);
    int is_float = io->dtype == FBX_HOST_F32 || io->dtype == FBX_HOST_F64 ||
                   io->dtype == FBX_HOST_F16 || io->dtype == FBX_HOST_BF16;
    if (rng) {
      char *colon = strchr(rng->val, ':');
      double lo, hi;
      char lo_s[64];
      if (!colon || (size_t)(colon - rng->val) >= sizeof lo_s) {
        err = fbx_host_errf("--int-range %s=%s: expected LO:HI", io->name, rng->val);
        goto fail;
      }
      memcpy(lo_s, rng->val, (size_t)(colon - rng->val));
      lo_s[colon - rng->val] = 0;
      if (fbx_cli_parse_double(lo_s, &lo) || fbx_cli_parse_double(colon + 1, &hi) || hi < lo) {
        err = fbx_host_errf("--int-range %s=%s: expected LO:HI with LO <= HI", io->name, rng->val);
        goto fail;
      }
      if (is_float) fbx_host_tensor_fill_uniform(&t[i], seed, lo, hi);
      else fbx_host_tensor_fill_int(&t[i], seed, (int64_t)lo, (int64_t)hi);
    } else if (is_float) {
      fbx_host_tensor_fill_normal(&t[i], seed);
    } else if (io->dtype == FBX_HOST_BOOL) {
      fbx_host_tensor_fill_int(&t[i], seed, 0, 1);
    } else if (cli__has(io->name, "mask")) {
      fbx_host_tensor_fill_const(&t[i], 1);
    } else if (cli__has(io->name, "position") && rank >= 1) {
      // positions past .. past+seq-1 along the last axis
      size_t numel = fbx_host_tensor_numel(&t[i]), last = (size_t)dims[rank - 1];
      for (size_t k = 0; last && k < numel; k++)
        fbx_host_tensor_set(&t[i], k, (double)(past + (int64_t)(k % last)));
    } else if (cli__has(io->name, "ids")) {
      fbx_host_tensor_fill_int(&t[i], seed, 0, 99);
    } else {
      fbx_host_tensor_fill_int(&t[i], seed, 0, 9);
    }
  }
  *ins = t;
  *n_ins = n;
  return 0;
fail:
  fprintf(stderr, "%s: %s\n", c->prog, err);
  fbx_host_err_free(err);
fail_quiet:
  fbx_host_tensors_free(t, n);
  return -1;
}

// ---------------------------------------------------------------------------------------
// Misc
// ---------------------------------------------------------------------------------------

void fbx_cli_print_shape(const fbx_host_tensor *t) {
  char buf[256];
  printf("%s %s[%s]", t->name ? t->name : "?", fbx_host_dtype_name(t->dtype),
         fbx_host_shape_str(t->rank, t->dims, buf, sizeof buf));
}

static int cli__cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double fbx_cli_median(double *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cli__cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double fbx_cli_min(const double *v, size_t n) {
  double m = n ? v[0] : 0;
  for (size_t i = 1; i < n; i++)
    if (v[i] < m) m = v[i];
  return m;
}
