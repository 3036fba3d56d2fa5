// test_conformance — the ONNX backend node tests through ORT, with and without Fusebox.
//
// For every case directory (model.onnx + test_data_set_*/input_*.pb, output_*.pb):
//   1. run it on ORT's CPU EP alone and compare with the expected outputs;
//   2. run it with the Fusebox EP registered (same thread count), ask ORT which nodes went to
//      Fusebox (session.record_ep_graph_assignment_info + Session_GetEpGraphAssignmentInfo),
//      and compare again.
// Tolerance as in the ONNX backend tests: |got - exp| <= atol + rtol*|exp| (rtol 1e-3,
// atol 1e-7), NaN equals NaN, infinities must match; integers and bool exactly.
//
// Rule: a case where Fusebox claims >= 1 node and an output does not match (or the run fails)
// is a FAILURE (exit status 1). A case Fusebox leaves alone is only reported. A session that
// cannot be created with Fusebox registered while ORT alone can is a failure too.
//
// Each case runs in a forked child (unless --no-fork) so a crash is a recorded failure, not the
// end of the run. One ORT environment (and one EP registration) is shared through fork.
//
// Output: one line per failure (and per case with -v), tests/conformance/REPORT.md (totals and a
// table per op type), and a final line `conformance: N passed, N failed`.
//
// Usage: test_conformance [--filter SUBSTR]... [--report PATH] [--no-fusebox] [--dir ROOT]...
//                         [--case DIR]... [--threads N] [--ep-option KEY=VALUE]... [--rtol R] [--atol A] [--no-fork] [-v]
//   --dir  a folder of case folders (default /usr/share/libonnx-testdata/data/node, and
//          models/gen/cases when it exists)
//   --case a single case folder
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ort_host.h"
#include "conformance/tensor_proto.h"
// The CMake test glob builds only test_*.c + tests/common/*.c: pull the reader in here.
#include "conformance/tensor_proto.c"

#define CF_NODE_DIR "/usr/share/libonnx-testdata/data/node"
#define CF_MAX_SETS 16
#define CF_MAX_IO 64

// ---------------------------------------------------------------------------------------
// Options and results
// ---------------------------------------------------------------------------------------

typedef struct cf_opts {
  const char *filters[32];
  int n_filters;
  const char *report;
  const char *dirs[8];
  int n_dirs;
  const char *cases[64];
  int n_cases;
  int use_fusebox;
  int threads;
  const char *ep_keys[8], *ep_vals[8]; /* --ep-option KEY=VALUE (e.g. device=cuda), after threads */
  char ep_buf[8][128];
  int n_ep;
  double rtol, atol;
  int fork_cases;
  int verbose;
} cf_opts;

enum { CF_RUN_SKIP = 0, CF_RUN_PASS, CF_RUN_MISMATCH, CF_RUN_ERROR, CF_RUN_CREATE_ERROR, CF_RUN_CRASH };
static const char *cf__run_name[] = {"skip", "pass", "mismatch", "error", "create-error", "crash"};

// Result of one case, written by the child into a pipe (plain old data).
typedef struct cf_result {
  int unsupported;    // 1: not run (msg says why)
  int cpu;            // CF_RUN_*
  int fbx;            // CF_RUN_*
  int claimed;        // nodes ORT assigned to Fusebox (-1: unknown)
  int assigned_total; // nodes in ORT's assignment info
  char msg[400];      // unsupported reason / data load error
  char cpu_msg[400];  // first mismatch or error on ORT CPU
  char fbx_msg[400];  // first mismatch or error with Fusebox
} cf_result;

// ---------------------------------------------------------------------------------------
// Compare
// ---------------------------------------------------------------------------------------

static int cf__is_float(int dt) {
  return dt == FBX_HOST_F32 || dt == FBX_HOST_F64 || dt == FBX_HOST_F16 || dt == FBX_HOST_BF16;
}

// 1 if `got` matches `exp`; else 0 with the first mismatch described in msg.
static int cf_compare(const fbx_host_tensor *got, const fbx_host_tensor *exp, const char *name,
                      double rtol, double atol, char *msg, size_t cap) {
  char a[128], b[128];
  if (got->dtype != exp->dtype) {
    snprintf(msg, cap, "output '%s': dtype %s, expected %s", name, fbx_host_dtype_name(got->dtype),
             fbx_host_dtype_name(exp->dtype));
    return 0;
  }
  int same = got->rank == exp->rank;
  for (int i = 0; same && i < got->rank; i++) same = got->dims[i] == exp->dims[i];
  if (!same) {
    snprintf(msg, cap, "output '%s': shape [%s], expected [%s]", name,
             fbx_host_shape_str(got->rank, got->dims, a, sizeof(a)),
             fbx_host_shape_str(exp->rank, exp->dims, b, sizeof(b)));
    return 0;
  }
  size_t n = fbx_host_tensor_numel(exp), esz = fbx_host_dtype_size(exp->dtype), n_bad = 0, first = 0;
  int fl = cf__is_float(exp->dtype);
  for (size_t i = 0; i < n; i++) {
    int ok;
    if (fl) {
      double g = fbx_host_tensor_get(got, i), e = fbx_host_tensor_get(exp, i);
      if (isnan(e) || isnan(g)) ok = isnan(e) && isnan(g);
      else if (isinf(e) || isinf(g)) ok = g == e;
      else ok = fabs(g - e) <= atol + rtol * fabs(e);
    } else {
      ok = !memcmp((const char *)got->data + i * esz, (const char *)exp->data + i * esz, esz);
    }
    if (!ok && n_bad++ == 0) first = i;
  }
  if (!n_bad) return 1;
  if (fl)
    snprintf(msg, cap, "output '%s'[%zu]: got %.9g, expected %.9g (%zu/%zu bad)", name, first,
             fbx_host_tensor_get(got, first), fbx_host_tensor_get(exp, first), n_bad, n);
  else
    snprintf(msg, cap, "output '%s'[%zu]: got %.17g, expected %.17g (%zu/%zu bad)", name, first,
             fbx_host_tensor_get(got, first), fbx_host_tensor_get(exp, first), n_bad, n);
  return 0;
}

// ---------------------------------------------------------------------------------------
// One case
// ---------------------------------------------------------------------------------------

typedef struct cf_dataset {
  fbx_host_tensor in[CF_MAX_IO], out[CF_MAX_IO];
  size_t n_in, n_out;
} cf_dataset;

static int cf__exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static void cf__datasets_free(cf_dataset *ds, int n) {
  for (int d = 0; d < n; d++) {
    for (size_t i = 0; i < ds[d].n_in; i++) fbx_host_tensor_free(&ds[d].in[i]);
    for (size_t i = 0; i < ds[d].n_out; i++) fbx_host_tensor_free(&ds[d].out[i]);
  }
}

// Load test_data_set_0.. (contiguous). Returns the count, or -1 with msg set.
static int cf__datasets_load(const char *dir, const cf_model_info *mi, cf_dataset *ds, char *msg,
                             size_t cap) {
  int n = 0;
  char path[PATH_MAX];
  for (; n < CF_MAX_SETS; n++) {
    snprintf(path, sizeof(path), "%s/test_data_set_%d", dir, n);
    if (!cf__exists(path)) break;
    cf_dataset *d = &ds[n];
    memset(d, 0, sizeof(*d));
    for (int io = 0; io < 2; io++) {
      for (size_t k = 0; k < CF_MAX_IO; k++) {
        snprintf(path, sizeof(path), "%s/test_data_set_%d/%s_%zu.pb", dir, n, io ? "output" : "input", k);
        if (!cf__exists(path)) break;
        fbx_host_tensor *t = io ? &d->out[d->n_out] : &d->in[d->n_in];
        char *err = cf_tensor_proto_read(path, t);
        if (err) {
          snprintf(msg, cap, "%s", err);
          fbx_host_err_free(err);
          cf__datasets_free(ds, n + 1);
          return -1;
        }
        // unnamed inputs take the model's input name of the same position
        const cf_value_info *vi = io ? (k < mi->n_outputs ? &mi->outputs[k] : NULL)
                                     : (k < mi->n_inputs ? &mi->inputs[k] : NULL);
        if (!t->name && vi) fbx_host_tensor_set_name(t, vi->name);
        // numpy has no bfloat16: the ONNX test generator stores bf16 data as uint16
        if (vi && vi->elem_type == FBX_HOST_BF16 && t->dtype == FBX_HOST_U16) t->dtype = FBX_HOST_BF16;
        if (io) d->n_out++; else d->n_in++;
      }
    }
  }
  if (n == 0) {
    snprintf(msg, cap, "no test_data_set_0");
    return -1;
  }
  return n;
}

// Run every data set on one session; returns CF_RUN_* with msg on the first problem.
static int cf__run_sets(fbx_host_session *s, cf_dataset *ds, int n_sets, const cf_opts *o,
                        char *msg, size_t cap) {
  for (int d = 0; d < n_sets; d++) {
    fbx_host_tensor *outs = NULL;
    size_t n_outs = 0;
    char *err = fbx_host_session_run(s, ds[d].in, ds[d].n_in, &outs, &n_outs);
    if (err) {
      snprintf(msg, cap, "run (data set %d): %s", d, err);
      fbx_host_err_free(err);
      return CF_RUN_ERROR;
    }
    int ok = 1;
    for (size_t k = 0; k < ds[d].n_out && ok; k++) {
      const fbx_host_tensor *exp = &ds[d].out[k];
      // match by name, else by position
      const fbx_host_tensor *got = NULL;
      long idx = exp->name ? fbx_host_session_output_find(s, exp->name) : -1;
      if (idx >= 0 && (size_t)idx < n_outs) got = &outs[idx];
      else if (k < n_outs) got = &outs[k];
      if (!got) {
        snprintf(msg, cap, "output %zu missing", k);
        ok = 0;
      } else {
        ok = cf_compare(got, exp, exp->name ? exp->name : "?", o->rtol, o->atol, msg, cap);
      }
    }
    fbx_host_tensors_free(outs, n_outs);
    if (!ok) return CF_RUN_MISMATCH;
  }
  return CF_RUN_PASS;
}

static void cf__err_to(char *dst, size_t cap, const char *what, char *err) {
  snprintf(dst, cap, "%s: %s", what, err);
  for (char *p = dst; *p; p++) if (*p == '\n' || *p == '|') *p = ' ';
  fbx_host_err_free(err);
}

static void cf_case_run(fbx_host *h, const char *dir, const cf_model_info *mi, const cf_opts *o,
                        cf_result *r) {
  char model[PATH_MAX];
  snprintf(model, sizeof(model), "%s/model.onnx", dir);
  static cf_dataset ds[CF_MAX_SETS];
  int n_sets = cf__datasets_load(dir, mi, ds, r->msg, sizeof(r->msg));
  if (n_sets < 0) {
    r->unsupported = 1;
    r->cpu = r->fbx = CF_RUN_SKIP;
    return;
  }
  fbx_host_session_opts so = fbx_host_session_opts_default();
  so.intra_threads = o->threads;

  // ORT CPU alone
  fbx_host_session *s = NULL;
  char *err = fbx_host_session_create(h, model, &so, &s);
  if (err) {
    cf__err_to(r->cpu_msg, sizeof(r->cpu_msg), "create", err);
    r->cpu = CF_RUN_CREATE_ERROR;
  } else {
    r->cpu = cf__run_sets(s, ds, n_sets, o, r->cpu_msg, sizeof(r->cpu_msg));
    fbx_host_session_destroy(s);
  }

  // with Fusebox
  r->fbx = CF_RUN_SKIP;
  r->claimed = 0;
  if (o->use_fusebox) {
    char threads[16];
    snprintf(threads, sizeof(threads), "%d", o->threads);
    const char *k[9] = {"threads"}, *v[9] = {threads};
    size_t n_k = o->threads > 0 ? 1 : 0;
    for (int e = 0; e < o->n_ep; e++, n_k++) { k[n_k] = o->ep_keys[e]; v[n_k] = o->ep_vals[e]; }
    so.use_fusebox = 1;
    so.record_assignment = 1;
    if (n_k) { so.ep_keys = k; so.ep_vals = v; so.n_ep_opts = n_k; }
    s = NULL;
    err = fbx_host_session_create(h, model, &so, &s);
    if (err) {
      cf__err_to(r->fbx_msg, sizeof(r->fbx_msg), "create", err);
      r->fbx = CF_RUN_CREATE_ERROR;
      r->claimed = -1;
    } else {
      fbx_host_assign *as = NULL;
      size_t n_as = 0;
      err = fbx_host_session_assignment(s, &as, &n_as);
      if (err) {
        r->claimed = -1;
        fbx_host_err_free(err);
      } else {
        for (size_t i = 0; i < n_as; i++)
          if (as[i].ep && !strcmp(as[i].ep, FBX_HOST_EP_NAME)) r->claimed++;
        r->assigned_total = (int)n_as;
        fbx_host_assign_free(as, n_as);
      }
      r->fbx = cf__run_sets(s, ds, n_sets, o, r->fbx_msg, sizeof(r->fbx_msg));
      fbx_host_session_destroy(s);
    }
  }
  cf__datasets_free(ds, n_sets);
}

// A case is a Fusebox failure when Fusebox took part (claimed, or unknown) and did not pass,
// or when the session could not even be created with Fusebox where ORT alone could.
static int cf_result_failed(const cf_result *r) {
  if (r->unsupported || r->fbx == CF_RUN_SKIP) return 0;
  if (r->fbx == CF_RUN_CRASH) return 1;
  if (r->fbx == CF_RUN_CREATE_ERROR) return r->cpu != CF_RUN_CREATE_ERROR;
  return r->claimed != 0 && r->fbx != CF_RUN_PASS;
}

// Run the case in a child process; a crash becomes CF_RUN_CRASH.
static void cf_case_run_forked(fbx_host *h, const char *dir, const cf_model_info *mi,
                               const cf_opts *o, cf_result *r) {
  int fd[2];
  fflush(stdout);
  fflush(stderr);
  if (pipe(fd) != 0) {
    cf_case_run(h, dir, mi, o, r);
    return;
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    cf_case_run(h, dir, mi, o, r);
    return;
  }
  if (pid == 0) {
    close(fd[0]);
    cf_result cr;
    memset(&cr, 0, sizeof(cr));
    cf_case_run(h, dir, mi, o, &cr);
    const char *p = (const char *)&cr;
    size_t left = sizeof(cr);
    while (left) {
      ssize_t w = write(fd[1], p, left);
      if (w <= 0) break;
      p += w;
      left -= (size_t)w;
    }
    _exit(0);
  }
  close(fd[1]);
  size_t got = 0;
  char *p = (char *)r;
  while (got < sizeof(*r)) {
    ssize_t n = read(fd[0], p + got, sizeof(*r) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (got != sizeof(*r)) {
    memset(r, 0, sizeof(*r));
    char why[64];
    if (WIFSIGNALED(st)) snprintf(why, sizeof(why), "crashed (signal %d)", WTERMSIG(st));
    else snprintf(why, sizeof(why), "child exited with status %d", WEXITSTATUS(st));
    // which side crashed is unknown: rerun ORT CPU alone in another child to find out
    if (o->use_fusebox) {
      cf_opts cpu_only = *o;
      cpu_only.use_fusebox = 0;
      cf_case_run_forked(h, dir, mi, &cpu_only, r);
      if (r->cpu != CF_RUN_CRASH) {
        r->fbx = CF_RUN_CRASH;
        r->claimed = -1;
        snprintf(r->fbx_msg, sizeof(r->fbx_msg), "%s", why);
        return;
      }
    }
    r->cpu = CF_RUN_CRASH;
    r->fbx = o->use_fusebox ? CF_RUN_CRASH : CF_RUN_SKIP;
    snprintf(r->cpu_msg, sizeof(r->cpu_msg), "%s", why);
    snprintf(r->fbx_msg, sizeof(r->fbx_msg), "%s", why);
  }
}

// ---------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------

typedef struct cf_opstat {
  char *op;
  int cases, claimed, passed, failed, cpu_passed;
  char first_fail[520];
} cf_opstat;

typedef struct cf_totals {
  int cases, unsupported, claimed_cases, fbx_passed, cpu_passed, failed, cpu_errors;
  long claimed_nodes, assigned_nodes;
  int kinds[16];  // unsupported by reason: [0] other, [CF_KIND_*], [15] string
} cf_totals;

static cf_opstat *cf__opstat(cf_opstat **ops, size_t *n, const char *op) {
  for (size_t i = 0; i < *n; i++)
    if (!strcmp((*ops)[i].op, op)) return &(*ops)[i];
  cf_opstat *na = realloc(*ops, (*n + 1) * sizeof(**ops));
  if (!na) return NULL;
  *ops = na;
  cf_opstat *s = &na[(*n)++];
  memset(s, 0, sizeof(*s));
  s->op = strdup(op);
  return s;
}

static int cf__opstat_cmp(const void *a, const void *b) {
  return strcmp(((const cf_opstat *)a)->op, ((const cf_opstat *)b)->op);
}

// Escape a message for a Markdown table cell.
static void cf__md_cell(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '|') fputs("\\|", f);
    else if (*s == '\n' || *s == '\r') fputc(' ', f);
    else fputc(*s, f);
  }
}

typedef struct cf_line {
  char text[1100];
} cf_line;

static void cf_report_write(const char *path, const cf_opts *o, const char *ort_version,
                            const cf_totals *t, cf_opstat *ops, size_t n_ops, const cf_line *fails,
                            size_t n_fails, const cf_line *unsup, size_t n_unsup) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "conformance: cannot write %s: %s\n", path, strerror(errno));
    return;
  }
  qsort(ops, n_ops, sizeof(*ops), cf__opstat_cmp);
  fprintf(f, "# ONNX backend node tests: Fusebox conformance report\n\n");
  fprintf(f, "Generated by `test_conformance` (tests/conformance). ONNX Runtime %s, %d thread(s), "
             "tolerance |got-exp| <= %g + %g*|exp| (NaN==NaN, integers exact). Fusebox %s.\n\n",
          ort_version, o->threads, o->atol, o->rtol,
          o->use_fusebox ? "registered" : "NOT registered (--no-fusebox: ORT CPU only)");
  fprintf(f, "## Totals\n\n| | count |\n|---|---:|\n");
  fprintf(f, "| cases | %d |\n", t->cases);
  fprintf(f, "| unsupported (not run) | %d |\n", t->unsupported);
  fprintf(f, "| claimed by Fusebox (>= 1 node) | %d |\n", t->claimed_cases);
  fprintf(f, "| nodes claimed / nodes assigned | %ld / %ld |\n", t->claimed_nodes, t->assigned_nodes);
  fprintf(f, "| passed with Fusebox registered | %d |\n", t->fbx_passed);
  fprintf(f, "| **failed (claimed and wrong)** | **%d** |\n", t->failed);
  fprintf(f, "| passed with ORT CPU alone | %d |\n", t->cpu_passed);
  fprintf(f, "| ORT CPU alone could not create/run | %d |\n\n", t->cpu_errors);
  fprintf(f, "Unsupported kinds: sequence %d, optional %d, map %d, sparse %d, string tensor %d, "
             "other %d.\n\n",
          t->kinds[CF_KIND_SEQUENCE], t->kinds[CF_KIND_OPTIONAL], t->kinds[CF_KIND_MAP],
          t->kinds[CF_KIND_SPARSE], t->kinds[15], t->kinds[0]);
  if (n_fails) {
    fprintf(f, "## Failures\n\n");
    for (size_t i = 0; i < n_fails; i++) fprintf(f, "- %s\n", fails[i].text);
    fprintf(f, "\n");
  }
  fprintf(f, "## Per op type\n\nA case counts under every op type its model contains.\n\n");
  fprintf(f, "| op | cases | claimed | passed (Fusebox) | failed | ORT CPU passes | first failure |\n");
  fprintf(f, "|---|---:|---:|---:|---:|---:|---|\n");
  for (size_t i = 0; i < n_ops; i++) {
    const cf_opstat *s = &ops[i];
    fprintf(f, "| %s | %d | %d | %d | %d | %d | ", s->op, s->cases, s->claimed, s->passed,
            s->failed, s->cpu_passed);
    cf__md_cell(f, s->first_fail);
    fprintf(f, " |\n");
  }
  if (n_unsup) {
    fprintf(f, "\n## Unsupported cases\n\n");
    for (size_t i = 0; i < n_unsup; i++) fprintf(f, "- %s\n", unsup[i].text);
  }
  fclose(f);
}

// ---------------------------------------------------------------------------------------
// Case discovery
// ---------------------------------------------------------------------------------------

static int cf__strcmp_p(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cf__matches(const cf_opts *o, const char *name) {
  if (!o->n_filters) return 1;
  for (int i = 0; i < o->n_filters; i++)
    if (strstr(name, o->filters[i])) return 1;
  return 0;
}

// Append every case folder under root (sorted) to *list.
static void cf__collect(const char *root, const cf_opts *o, char ***list, size_t *n) {
  DIR *d = opendir(root);
  if (!d) return;
  char **names = NULL;
  size_t nn = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s/model.onnx", root, e->d_name);
    if (!cf__exists(p) || !cf__matches(o, e->d_name)) continue;
    char **nl = realloc(names, (nn + 1) * sizeof(*nl));
    if (!nl) break;
    names = nl;
    if (asprintf(&names[nn], "%s/%s", root, e->d_name) < 0) break;
    nn++;
  }
  closedir(d);
  if (nn) qsort(names, nn, sizeof(*names), cf__strcmp_p); /* names is NULL when nothing matched */
  char **nl = realloc(*list, (*n + nn + 1) * sizeof(*nl));
  if (nl) {
    *list = nl;
    for (size_t i = 0; i < nn; i++) nl[(*n)++] = names[i];
  } else {
    for (size_t i = 0; i < nn; i++) free(names[i]);
  }
  free(names);
}

// <repo> found by walking up from the executable to a folder holding tests/conformance.
static int cf__repo_root(char *out, size_t cap) {
  char p[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", p, sizeof(p) - 1);
  if (n <= 0) return 0;
  p[n] = 0;
  for (int up = 0; up < 6; up++) {
    char *slash = strrchr(p, '/');
    if (!slash || slash == p) return 0;
    *slash = 0;
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof(probe), "%s/tests/conformance", p);
    struct stat st;
    if (stat(probe, &st) == 0 && S_ISDIR(st.st_mode)) {
      snprintf(out, cap, "%s", p);
      return 1;
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------

static int cf__usage(void) {
  fprintf(stderr,
          "usage: test_conformance [--filter SUBSTR]... [--report PATH] [--no-fusebox]\n"
          "       [--dir ROOT]... [--case DIR]... [--threads N] [--ep-option KEY=VALUE]... [--rtol R] [--atol A]\n"
          "       [--no-fork] [-v]\n");
  return 2;
}

static const char *cf__short(const char *dir) {
  const char *s = strrchr(dir, '/');
  return s ? s + 1 : dir;
}

int main(int argc, char **argv) {
  cf_opts o;
  memset(&o, 0, sizeof(o));
  o.use_fusebox = 1;
  o.threads = 1;
  o.rtol = 1e-3;
  o.atol = 1e-7;
  // Each case runs in a forked child so a crash is one failed case. Not under ASan:
  // forking a process whose other threads may hold the sanitizer allocator's locks can
  // deadlock the child (seen here), and under ASan a crash is a failure anyway.
#if defined(__SANITIZE_ADDRESS__)
  o.fork_cases = 0;
#else
  o.fork_cases = 1;
#endif
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--filter") && more && o.n_filters < 32) o.filters[o.n_filters++] = argv[++i];
    else if (!strcmp(a, "--report") && more) o.report = argv[++i];
    else if (!strcmp(a, "--dir") && more && o.n_dirs < 8) o.dirs[o.n_dirs++] = argv[++i];
    else if (!strcmp(a, "--case") && more && o.n_cases < 64) o.cases[o.n_cases++] = argv[++i];
    else if (!strcmp(a, "--threads") && more) o.threads = atoi(argv[++i]);
    else if (!strcmp(a, "--ep-option") && more && o.n_ep < 8 && strchr(argv[i + 1], '=')) {
      snprintf(o.ep_buf[o.n_ep], sizeof o.ep_buf[0], "%s", argv[++i]);
      char *eq = strchr(o.ep_buf[o.n_ep], '=');
      *eq = 0;
      o.ep_keys[o.n_ep] = o.ep_buf[o.n_ep];
      o.ep_vals[o.n_ep] = eq + 1;
      o.n_ep++;
    }
    else if (!strcmp(a, "--rtol") && more) o.rtol = atof(argv[++i]);
    else if (!strcmp(a, "--atol") && more) o.atol = atof(argv[++i]);
    else if (!strcmp(a, "--no-fusebox")) o.use_fusebox = 0;
    else if (!strcmp(a, "--no-fork")) o.fork_cases = 0;
    else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o.verbose = 1;
    else return cf__usage();
  }
  char root[PATH_MAX] = "", report_buf[PATH_MAX + 64], gen_cases[PATH_MAX + 64];
  int have_root = cf__repo_root(root, sizeof(root));
  if (!o.report) {
    if (have_root) snprintf(report_buf, sizeof(report_buf), "%s/tests/conformance/REPORT.md", root);
    else snprintf(report_buf, sizeof(report_buf), "REPORT.md");
    o.report = report_buf;
  }
  char **cases = NULL;
  size_t n_cases = 0;
  if (!o.n_dirs && !o.n_cases) {
    cf__collect(CF_NODE_DIR, &o, &cases, &n_cases);
    if (have_root) {
      snprintf(gen_cases, sizeof(gen_cases), "%s/models/gen/cases", root);
      cf__collect(gen_cases, &o, &cases, &n_cases);
    }
  }
  for (int i = 0; i < o.n_dirs; i++) cf__collect(o.dirs[i], &o, &cases, &n_cases);
  for (int i = 0; i < o.n_cases; i++) {
    char **nl = realloc(cases, (n_cases + 1) * sizeof(*nl));
    if (!nl) break;
    cases = nl;
    cases[n_cases++] = strdup(o.cases[i]);
  }
  if (!n_cases) {
    fprintf(stderr, "conformance: no cases found (%s)\n", CF_NODE_DIR);
    free(cases);
    return 2;
  }

  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  if (err) {
    fprintf(stderr, "conformance: %s\n", err);
    fbx_host_err_free(err);
    return 2;
  }
  if (o.use_fusebox) {
    err = fbx_host_register_fusebox(h);
    if (err) {
      fprintf(stderr, "conformance: cannot register Fusebox (%s); use --no-fusebox\n", err);
      fbx_host_err_free(err);
      fbx_host_close(h);
      return 2;
    }
  }
  fprintf(stderr, "conformance: %zu case(s), ORT %s (%s), Fusebox %s\n", n_cases,
          fbx_host_ort_version(h), fbx_host_ort_path(h),
          o.use_fusebox ? fbx_host_ep_path(h) : "not registered");

  cf_totals t;
  memset(&t, 0, sizeof(t));
  cf_opstat *ops = NULL;
  size_t n_ops = 0;
  cf_line *fails = calloc(n_cases, sizeof(*fails)), *unsup = calloc(n_cases, sizeof(*unsup));
  size_t n_fails = 0, n_unsup = 0;
  double t0 = fbx_host_now();
  for (size_t c = 0; c < n_cases && fails && unsup; c++) {
    const char *dir = cases[c], *name = cf__short(dir);
    char model[PATH_MAX];
    snprintf(model, sizeof(model), "%s/model.onnx", dir);
    cf_model_info mi;
    cf_result r;
    memset(&r, 0, sizeof(r));
    err = cf_model_info_read(model, &mi);
    if (err) {
      r.unsupported = 1;
      snprintf(r.msg, sizeof(r.msg), "%s", err);
      fbx_host_err_free(err);
      memset(&mi, 0, sizeof(mi));
      t.kinds[0]++;
    } else {
      // non-tensor graph inputs/outputs and string tensors are not run
      for (int io = 0; io < 2 && !r.unsupported; io++) {
        const cf_value_info *vs = io ? mi.outputs : mi.inputs;
        size_t nv = io ? mi.n_outputs : mi.n_inputs;
        for (size_t k = 0; k < nv && !r.unsupported; k++) {
          if (vs[k].kind != CF_KIND_TENSOR) {
            r.unsupported = 1;
            snprintf(r.msg, sizeof(r.msg), "unsupported %s kind: %s ('%s')", io ? "output" : "input",
                     cf_kind_name(vs[k].kind), vs[k].name);
            t.kinds[vs[k].kind < 15 ? vs[k].kind : 0]++;
          } else if (vs[k].elem_type == FBX_HOST_STRING) {
            r.unsupported = 1;
            snprintf(r.msg, sizeof(r.msg), "unsupported %s kind: string tensor ('%s')",
                     io ? "output" : "input", vs[k].name);
            t.kinds[15]++;
          }
        }
      }
      // Random ops: the expected outputs were drawn by another generator and no
      // implementation (ORT's included) can reproduce them, so they are reported, not run.
      static const char *const random_ops[] = {"Bernoulli", "RandomUniform", "RandomUniformLike",
                                               "RandomNormal", "RandomNormalLike", "Multinomial"};
      for (size_t k = 0; k < mi.n_nodes && !r.unsupported; k++)
        for (size_t q = 0; q < sizeof(random_ops) / sizeof(random_ops[0]); q++)
          if (!strcmp(mi.op_types[k], random_ops[q])) {
            r.unsupported = 1;
            snprintf(r.msg, sizeof(r.msg), "nondeterministic op '%s': expected outputs are not reproducible",
                     random_ops[q]);
            t.kinds[0]++;
            break;
          }
      if (!r.unsupported) {
        if (o.fork_cases) cf_case_run_forked(h, dir, &mi, &o, &r);
        else cf_case_run(h, dir, &mi, &o, &r);
        if (r.unsupported) t.kinds[strstr(r.msg, "string") ? 15 : 0]++;
      }
    }
    t.cases++;
    int failed = cf_result_failed(&r);
    int fbx_pass = r.fbx == CF_RUN_PASS, cpu_pass = r.cpu == CF_RUN_PASS;
    if (r.unsupported) {
      t.unsupported++;
      snprintf(unsup[n_unsup++].text, sizeof(unsup[0].text), "`%s`: %s", name, r.msg);
    } else {
      if (r.claimed != 0 && r.fbx != CF_RUN_SKIP) t.claimed_cases++;
      if (r.claimed > 0) t.claimed_nodes += r.claimed;
      t.assigned_nodes += r.assigned_total;
      t.fbx_passed += fbx_pass;
      t.cpu_passed += cpu_pass;
      t.cpu_errors += r.cpu == CF_RUN_CREATE_ERROR || r.cpu == CF_RUN_ERROR || r.cpu == CF_RUN_CRASH;
      t.failed += failed;
    }
    if (failed) {
      snprintf(fails[n_fails++].text, sizeof(fails[0].text), "`%s` (%d node(s) claimed, %s): %s%s",
               name, r.claimed, cf__run_name[r.fbx], r.fbx_msg,
               cpu_pass ? "" : " [ORT CPU alone fails too]");
      printf("FAIL %s: claimed %d, %s: %s%s\n", name, r.claimed, cf__run_name[r.fbx], r.fbx_msg,
             cpu_pass ? "" : " [ORT CPU alone fails too]");
    } else if (o.verbose) {
      if (r.unsupported) printf("SKIP %s: %s\n", name, r.msg);
      else
        printf("%-4s %s: cpu %s%s%s, fusebox %s (claimed %d)%s%s\n", cpu_pass ? "ok" : "cpu!", name,
               cf__run_name[r.cpu], r.cpu_msg[0] ? ": " : "", r.cpu_msg, cf__run_name[r.fbx],
               r.claimed, r.fbx_msg[0] ? ": " : "", r.fbx_msg);
    }
    // per op type (each distinct op once per case)
    for (size_t i = 0; i < mi.n_nodes; i++) {
      int dup = 0;
      for (size_t j = 0; j < i && !dup; j++) dup = !strcmp(mi.op_types[i], mi.op_types[j]);
      if (dup) continue;
      cf_opstat *s = cf__opstat(&ops, &n_ops, mi.op_types[i]);
      if (!s) continue;
      s->cases++;
      if (r.unsupported) continue;
      s->claimed += r.claimed != 0 && r.fbx != CF_RUN_SKIP;
      s->passed += fbx_pass;
      s->failed += failed;
      s->cpu_passed += cpu_pass;
      if (failed && !s->first_fail[0])
        snprintf(s->first_fail, sizeof(s->first_fail), "%s: %s", name, r.fbx_msg);
    }
    cf_model_info_free(&mi);
  }
  double secs = fbx_host_now() - t0;
  cf_report_write(o.report, &o, fbx_host_ort_version(h), &t, ops, n_ops, fails, n_fails, unsup,
                  n_unsup);
  fprintf(stderr,
          "conformance: %d case(s) in %.1f s: %d unsupported, %d claimed by Fusebox (%ld nodes), "
          "%d passed with Fusebox, %d passed with ORT CPU alone; report: %s\n",
          t.cases, secs, t.unsupported, t.claimed_cases, t.claimed_nodes, t.fbx_passed,
          t.cpu_passed, o.report);
  int passed = t.cases - t.failed;
  printf("conformance: %d passed, %d failed\n", passed, t.failed);

  for (size_t i = 0; i < n_ops; i++) free(ops[i].op);
  free(ops);
  free(fails);
  free(unsup);
  for (size_t i = 0; i < n_cases; i++) free(cases[i]);
  free(cases);
  fbx_host_close(h);
  return t.failed ? 1 : 0;
}
