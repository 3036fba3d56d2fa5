// fuzz_model — libFuzzer target: a model through ORT with Fusebox registered and through ORT's
// CPU EP alone, same bytes, same inputs (build: make build-fuzz; run: scripts/fuzz.sh).
//
// Input: first byte 'R' -> the rest is an ONNX model as is (the seed corpus of generated
// models and ONNX backend test models; inputs are drawn for its declared inputs, dynamic dims
// = 2), mutated mostly by fz_pbmut.c (one protobuf leaf at a time, framing kept); any other
// first byte -> the whole input is a graph description (fz_gen.c), so most mutations still
// make a model both engines accept.
//
// A finding (abort, so libFuzzer saves the input): a crash or sanitizer report anywhere in
// Fusebox (libFuzzer/ASan see them), a hang (-timeout), Fusebox failing where ORT alone
// succeeds (session or run), or outputs the rule of tests/ops (common/od_judge.h) fails, with
// ORT's CPU EP and the independent reference of fz_ref.h (graph descriptions only) as the two
// opinions:
//   Fusebox == ORT                        pass (and the reference, where it has values, must
//                                         agree: a reference that disagrees with both fails,
//                                         except on the nan class's extreme values, where its
//                                         double arithmetic may rightly not overflow: counted)
//   Fusebox != ORT, Fusebox == reference  pass, a counted NOTE "ORT disagrees" (the classes
//                                         make ORT part from the spec: Clip with a NaN bound,
//                                         Slice past INT64_MAX, dilated SAME pools, ...)
//   ORT did not run, Fusebox == reference pass, counted "reference only" (ORT failed, or the
//                                         model crashes ORT itself: fz_model.ort_unsafe)
//   anything else                         a finding
// "==" is  |a-b| <= 1e-3 * max(1, max|b|) + 1e-3 * |b|   (NaN == NaN, integers and bools
// exact; inf == NaN, and inf == a finite value of its sign above 1e37: the summation order
// decides an overflow's outcome).
// ORT alone failing where Fusebox returns numbers and the reference has no values is
// reported, not a finding (ORT's own errors are not a specification), unless FBX_FUZZ_STRICT=1.
//
// Environment:
//   FBX_FUZZ_CLASSES=nan,bigint,invalid,samepad,empty  the mutation classes (default: all; fz_gen.h)
//   FBX_FUZZ_STRICT=1                     ORT-only failures are findings too
//   FBX_FUZZ_KEEP_GOING=1                 print each finding (a mismatch or a Fusebox-only
//                                         failure; not a crash) and go on, counting them: a
//                                         survey of a class, not a CI verdict
//   FBX_FUZZ_VERBOSE=1                    print each input's graph before running it (to see
//                                         what a sanitizer report was running)
//   FBX_FUZZ_DUMP=DIR                     write each finding's model to DIR/finding.onnx
//                                         (then: fusebox check --all-tensors DIR/finding.onnx)
//   FUSEBOX_ORT_LIB / FUSEBOX_EP_LIB      as for every test (ort_host.h)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/od_judge.h"
#include "common/ort_host.h"
#include "fz_gen.h"
#include "fz_pbmut.h"
#include "fz_ref.h"

static fbx_host *g_host;
static unsigned g_classes = FZ_CLASS_ALL;
static int g_strict, g_verbose, g_keep_going;
static unsigned long g_findings;
static unsigned long g_ort_only_errors;
// per class (bit k of FZ_CLASS_*): inputs whose graph uses it, and the passes on the
// reference's word among them
static const char *const g_class_names[5] = {"nan", "bigint", "invalid", "samepad", "empty"};
static unsigned long g_class_inputs[5], g_class_notes[5], g_class_refonly[5];
static unsigned long g_notes, g_refonly, g_judged_by_ref, g_ref_vs_both, g_too_big;

static void report_only_total(void) {
  fprintf(stderr, "fuzz_model: report-only total: %lu input(s) where ORT alone failed and Fusebox returned numbers\n",
          g_ort_only_errors);
  fprintf(stderr, "fuzz_model: %lu input(s) not run: a valid result of over 2^24 elements (fz_model.too_big)\n",
          g_too_big);
  if (g_keep_going) fprintf(stderr, "fuzz_model: FBX_FUZZ_KEEP_GOING: %lu finding(s)\n", g_findings);
  if (g_keep_going && g_findings) _exit(1);  // the run's status says there were findings
  fprintf(stderr, "fuzz_model: reference total: %lu input(s) with reference values, %lu NOTE(s) ORT disagrees and the"
          " reference agrees, %lu reference-only pass(es), %lu where the reference alone differs (extreme values)\n",
          g_judged_by_ref, g_notes, g_refonly, g_ref_vs_both);
  for (int k = 0; k < 5; k++)
    fprintf(stderr, "fuzz_model: class %s: %lu input(s), %lu NOTE(s) ORT disagrees, %lu reference-only\n",
            g_class_names[k], g_class_inputs[k], g_class_notes[k], g_class_refonly[k]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  char *err = fbx_host_open(NULL, NULL, &g_host);
  if (err) {
    fprintf(stderr, "fuzz_model: %s\n", err);
    abort();  // a set-up failure, not a finding: fix the environment
  }
  // Load the EP now, so that libFuzzer counts its coverage from the first input on.
  if ((err = fbx_host_register_fusebox(g_host))) {
    fprintf(stderr, "fuzz_model: %s\n", err);
    abort();
  }
  const char *cls = getenv("FBX_FUZZ_CLASSES"), *bad;
  if (cls) g_classes = fz_classes_parse(cls, &bad);
  if (cls && bad) {
    fprintf(stderr, "fuzz_model: unknown class in FBX_FUZZ_CLASSES=%s (nan, bigint, invalid, samepad, empty, all)\n", cls);
    abort();
  }
  g_strict = getenv("FBX_FUZZ_STRICT") && getenv("FBX_FUZZ_STRICT")[0] == '1';
  g_verbose = getenv("FBX_FUZZ_VERBOSE") && getenv("FBX_FUZZ_VERBOSE")[0] == '1';
  g_keep_going = getenv("FBX_FUZZ_KEEP_GOING") && getenv("FBX_FUZZ_KEEP_GOING")[0] == '1';
  atexit(report_only_total);
  fprintf(stderr, "fuzz_model: ORT %s, Fusebox %s, classes%s%s%s%s%s%s\n", fbx_host_ort_version(g_host),
          fbx_host_ep_path(g_host), g_classes & FZ_CLASS_NAN ? " nan" : "", g_classes & FZ_CLASS_BIGINT ? " bigint" : "",
          g_classes & FZ_CLASS_INVALID ? " invalid" : "", g_classes & FZ_CLASS_SAMEPAD ? " samepad" : "",
          g_classes & FZ_CLASS_EMPTY ? " empty" : "",
          g_classes ? "" : " (none)");
  return 0;
}

// The model bytes as a file ORT can open by path: a memfd, /proc/self/fd/N. -1 on failure.
static int model_fd(const unsigned char *p, size_t n, char *path, size_t cap) {
  int fd = memfd_create("fuzz_model", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(fd, p + off, n - off);
    if (w <= 0) {
      close(fd);
      return -1;
    }
    off += (size_t)w;
  }
  snprintf(path, cap, "/proc/self/fd/%d", fd);
  return fd;
}

// 1 when the caller should go on (FBX_FUZZ_KEEP_GOING), else it does not return.
static int finding(const char *what, const char *desc, const unsigned char *model, size_t n) {
  fprintf(stderr, "\n==== fuzz_model FINDING: %s\n%s\n", what, desc);
  if (g_keep_going) {
    g_findings++;
    return 1;
  }
  const char *dir = getenv("FBX_FUZZ_DUMP");
  if (dir && *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/finding.onnx", dir);
    FILE *f = fopen(path, "wb");
    if (f) {
      fwrite(model, 1, n, f);
      fclose(f);
      fprintf(stderr, "model written to %s\n", path);
    }
  }
  abort();
}

// Inputs for a raw model: its declared inputs, dynamic dims 2, small values. 0 ok, -1 skip.
static int raw_inputs(fbx_host_session *s, fbx_host_tensor *ins, size_t *n_ins, size_t cap) {
  size_t n = fbx_host_session_input_count(s);
  if (n > cap) return -1;
  for (size_t i = 0; i < n; i++) {
    const fbx_host_io *io = fbx_host_session_input(s, i);
    if (io->rank < 0 || io->dtype == FBX_HOST_UNDEFINED || io->dtype == FBX_HOST_STRING) return -1;
    int64_t d[FBX_HOST_MAX_RANK], numel = 1;
    for (int k = 0; k < io->rank; k++) {
      d[k] = io->dims[k] < 0 ? 2 : io->dims[k];
      numel *= d[k] > 0 ? d[k] : 1;
      if (numel > (1 << 20)) return -1;
    }
    if (fbx_host_tensor_alloc(&ins[i], io->name, io->dtype, io->rank, d)) return -1;
    *n_ins = i + 1;
    if (io->dtype == FBX_HOST_F32 || io->dtype == FBX_HOST_F64 || io->dtype == FBX_HOST_F16)
      fbx_host_tensor_fill_uniform(&ins[i], 42 + i, -2.0, 2.0);
    else if (io->dtype == FBX_HOST_BOOL)
      fbx_host_tensor_fill_int(&ins[i], 42 + i, 0, 1);
    else
      fbx_host_tensor_fill_int(&ins[i], 42 + i, 0, 1);  // indices: valid for any dim >= 2
  }
  return 0;
}

// One element: NaN == NaN; inf == inf of the same sign; near overflow, where the summation
// order decides the outcome (+inf + -inf in one order, +inf alone in another), also inf == NaN
// and inf == a finite value of the same sign within 34x of FLT_MAX; else |a-b| <= atol + 1e-3 |b|.
static int elem_bad(double a, double b, double atol) {
  if (isnan(a) && isnan(b)) return 0;
  if ((isnan(a) && isinf(b)) || (isinf(a) && isnan(b))) return 0;
  if (isnan(a) || isnan(b)) return 1;
  if (isinf(a) || isinf(b)) {
    double fin = isinf(a) ? b : a, inf = isinf(a) ? a : b;
    if (a == b) return 0;
    return !(isfinite(fin) && fabs(fin) >= 1e37 && (fin > 0) == (inf > 0));
  }
  return fabs(a - b) > atol + 1e-3 * fabs(b);
}

static int is_float(int dt) { return dt == FBX_HOST_F32 || dt == FBX_HOST_F16 || dt == FBX_HOST_F64; }

// Outputs agree? On a mismatch, a message into msg naming got "Fusebox" (the judge's first
// operand is Fusebox or, comparing the reference with ORT, the reference) and ref bname.
// Floats: elem_bad with atol = 1e-3 * max(1, max|ref|); integers and bools exact.
static int outputs_agree(const fbx_host_tensor *got, size_t n_got, const fbx_host_tensor *ref, size_t n_ref,
                         const char *bname, char *msg, size_t cap) {
  if (n_got != n_ref) {
    snprintf(msg, cap, "%zu outputs vs %s %zu", n_got, bname, n_ref);
    return 0;
  }
  for (size_t i = 0; i < n_ref; i++) {
    char sa[128], sb[128];
    fbx_host_cmp r;
    int same_shape = got[i].dtype == ref[i].dtype && got[i].rank == ref[i].rank;
    for (int d = 0; same_shape && d < ref[i].rank; d++) same_shape = got[i].dims[d] == ref[i].dims[d];
    if (!same_shape) {
      snprintf(msg, cap, "output %s: %s[%s] vs %s %s[%s]", ref[i].name, fbx_host_dtype_name(got[i].dtype),
               fbx_host_shape_str(got[i].rank, got[i].dims, sa, sizeof sa), bname, fbx_host_dtype_name(ref[i].dtype),
               fbx_host_shape_str(ref[i].rank, ref[i].dims, sb, sizeof sb));
      return 0;
    }
    size_t n = fbx_host_tensor_numel(&ref[i]), n_bad = 0, first = 0;
    if (!is_float(ref[i].dtype)) {
      if (fbx_host_compare(&got[i], &ref[i], 0, 0, &r)) continue;
      n_bad = r.n_bad;
      first = r.worst_index;
    } else {
      double scale = 1;
      for (size_t k = 0; k < n; k++) {
        double y = fabs(fbx_host_tensor_get(&ref[i], k));
        if (isfinite(y) && y > scale) scale = y;
      }
      for (size_t k = 0; k < n; k++)
        if (elem_bad(fbx_host_tensor_get(&got[i], k), fbx_host_tensor_get(&ref[i], k), 1e-3 * scale) &&
            n_bad++ == 0)
          first = k;
      if (n_bad == 0) continue;
    }
    snprintf(msg, cap, "output %s [%s]: %zu/%zu elements differ; at %zu %.9g vs %s %.9g", ref[i].name,
             fbx_host_shape_str(ref[i].rank, ref[i].dims, sa, sizeof sa), n_bad, n, first,
             fbx_host_tensor_get(&got[i], first), bname, fbx_host_tensor_get(&ref[i], first));
    return 0;
  }
  return 1;
}

static int judge_match(od_outputs a, od_outputs b, const char *bname, void *ctx, char *why, size_t cap) {
  (void)ctx;
  return outputs_agree(a.t, a.n, b.t, b.n, bname, why, cap);
}

static fbx_host_session *session(const char *path, int fusebox, char **err) {
  fbx_host_session_opts o = fbx_host_session_opts_default();
  static const char *keys[] = {"threads"}, *vals[] = {"1"};
  o.use_fusebox = fusebox;
  o.intra_threads = 1;
  if (fusebox) {
    o.ep_keys = keys;
    o.ep_vals = vals;
    o.n_ep_opts = 1;
  }
  fbx_host_session *s = NULL;
  *err = fbx_host_session_create(g_host, path, &o, &s);
  return s;
}

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

// Raw models ('R'): three mutations in four change one protobuf leaf in place (the model still
// parses); the rest, and every graph description, take libFuzzer's own byte mutations.
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  if (size > 1 && data[0] == 'R' && (seed & 3) != 0 && fz_pbmut(data + 1, size - 1, seed >> 2)) return size;
  return LLVMFuzzerMutate(data, size, max_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_model m;
  memset(&m, 0, sizeof m);
  const unsigned char *model;
  size_t n_model;
  fbx_host_tensor raw_ins[8];
  size_t n_raw = 0;
  memset(raw_ins, 0, sizeof raw_ins);
  int raw = size > 0 && data[0] == 'R';
  if (raw) {
    model = data + 1;
    n_model = size - 1;
    snprintf(m.desc, sizeof m.desc, "raw model of %zu bytes", n_model);
  } else {
    if (fz_model_gen(data, size, g_classes, &m)) return 0;
    if (m.too_big) {  // a valid tensor of gigabytes or more: an OOM kill, not a verdict
      g_too_big++;
      fz_model_free(&m);
      return 0;
    }
    model = m.bytes;
    n_model = m.n_bytes;
  }
  if (g_verbose) fprintf(stderr, "fuzz_model: input:\n%s", m.desc);
  char path[64];
  int fd = model_fd(model, n_model, path, sizeof path);
  if (fd < 0) {
    fz_model_free(&m);
    return 0;
  }
  char *err_c = NULL, *err_f = NULL, msg[1024];
  fbx_host_tensor *ref = NULL, *got = NULL, *rv = NULL;
  size_t n_ref = 0, n_got = 0, n_rv = 0;
  for (int k = 0; k < 5; k++) g_class_inputs[k] += (m.used >> k) & 1;
  // a model that crashes ORT itself (a reflect Pad of an empty dim) or whose element count
  // overflows int64 (fz_gen.h: ort_unsafe) is not given to ORT: the reference alone judges it
  fbx_host_session *sc = m.ort_unsafe ? NULL : session(path, 0, &err_c), *sf = session(path, 1, &err_f);
  const fbx_host_tensor *ins = m.inputs;
  size_t n_ins = m.n_inputs;
  if (raw && sc) {
    if (raw_inputs(sc, raw_ins, &n_raw, 8)) goto done;
    ins = raw_ins;
    n_ins = n_raw;
  }
  if (sc && !sf) {
    snprintf(msg, sizeof msg, "Fusebox session failed where ORT alone succeeds: %s", err_f);
    finding(msg, m.desc, model, n_model);
  }
  if (!sf) goto done;  // both failed: a model neither accepts
  char *run_c = sc ? fbx_host_session_run(sc, ins, n_ins, &ref, &n_ref) : NULL;
  char *run_f = fbx_host_session_run(sf, ins, n_ins, &got, &n_got);
  if (sc && !run_c && run_f) {
    snprintf(msg, sizeof msg, "Fusebox run failed where ORT alone succeeds: %s", run_f);
    finding(msg, m.desc, model, n_model);
  }
  if (!run_f) {
    int ort_ok = sc && !run_c;
    const char *ort_err = m.ort_unsafe ? "not given the model: fz_model.ort_unsafe" : sc ? run_c : err_c;
    char why[300] = "";
    const char *names[64];
    size_t nn = ort_ok ? n_ref : n_got;
    for (size_t i = 0; i < nn && i < 64; i++) names[i] = ort_ok ? ref[i].name : got[i].name;
    if (!raw && nn <= 64) rv = fz_ref_run(&m, ort_ok ? ref : NULL, ort_ok ? n_ref : 0, names, nn, why, sizeof why);
    n_rv = rv ? nn : 0;
    g_judged_by_ref += rv != NULL;
    // A reference that disagrees with both engines fails (a reference bug), except on the nan
    // class's values (inf, NaN, 1e-40, exp(88.5) = 2.7e38): there the reference's double
    // arithmetic may not overflow where both float engines do; counted, not failed.
    int strict_ref = !(m.used & FZ_CLASS_NAN);
    od_judgement j;
    od_judge_with((od_outputs){got, n_got}, (od_outputs){ort_ok ? ref : NULL, ort_ok ? n_ref : 0},
                  (od_outputs){rv, n_rv}, strict_ref, judge_match, NULL, &j);
    if (j.verdict == OD_VERDICT_PASS && j.ref_vs_ort == 0 && ++g_ref_vs_both <= 3)
      fprintf(stderr, "fuzz_model: reference disagrees with ORT and Fusebox on extreme values (counted): %.300s\n%s",
              j.msg, m.desc);
    if (j.verdict == OD_VERDICT_FAIL) {
      snprintf(msg, sizeof msg, "%s%s%s", j.msg, rv ? "" : " (no reference: ", rv ? "" : why);
      if (!rv) strncat(msg, ")", sizeof msg - strlen(msg) - 1);
      finding(msg, m.desc, model, n_model);
    }
    if (j.verdict == OD_VERDICT_ORT_DISAGREES || j.verdict == OD_VERDICT_REF_ONLY) {
      unsigned long *per = j.verdict == OD_VERDICT_ORT_DISAGREES ? g_class_notes : g_class_refonly;
      unsigned long *tot = j.verdict == OD_VERDICT_ORT_DISAGREES ? &g_notes : &g_refonly;
      ++*tot;
      for (int k = 0; k < 5; k++) per[k] += (m.used >> k) & 1;
      if (*tot <= 3 || (*tot & (*tot - 1)) == 0)
        fprintf(stderr, "fuzz_model: NOTE #%lu: %s%.300s%s\n%s", *tot,
                j.verdict == OD_VERDICT_REF_ONLY ? "reference only (ORT: " : "", j.verdict == OD_VERDICT_REF_ONLY ? ort_err : j.msg,
                j.verdict == OD_VERDICT_REF_ONLY ? ")" : "", m.desc);
    }
    if (j.verdict == OD_VERDICT_SKIP) {  // ORT failed, no reference values
      g_ort_only_errors++;
      if (g_strict) {
        snprintf(msg, sizeof msg, "ORT alone fails (%s), Fusebox returns numbers", ort_err);
        finding(msg, m.desc, model, n_model);
      }
      if (g_ort_only_errors <= 5 || (g_ort_only_errors & (g_ort_only_errors - 1)) == 0)
        fprintf(stderr, "fuzz_model: report-only #%lu: ORT alone fails (%.300s), Fusebox returns numbers\n%s",
                g_ort_only_errors, ort_err, m.desc);
    }
  }
  fbx_host_err_free(run_c);
  fbx_host_err_free(run_f);
done:
  fbx_host_tensors_free(rv, n_rv);
  fbx_host_tensors_free(ref, n_ref);
  fbx_host_tensors_free(got, n_got);
  for (size_t i = 0; i < n_raw; i++) fbx_host_tensor_free(&raw_ins[i]);
  fbx_host_session_destroy(sf);
  fbx_host_session_destroy(sc);
  fbx_host_err_free(err_c);
  fbx_host_err_free(err_f);
  close(fd);
  fz_model_free(&m);
  return 0;
}
