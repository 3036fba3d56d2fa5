/* Per-op spans through op sites (fbx_trace_op_site_get + fbx_trace_op, src/trace/trace_op.c):
 * interning, every argument of the op span (elements and bytes derived from the tensors at
 * flush), the [fast] and [composed] spans and the composed counter, the summary's statistics
 * (taken from the records at flush with FUSEBOX_TRACE, on the hot path with FUSEBOX_VERBOSE
 * alone), and the event cap counting each event of a record. Expected values are computed by
 * hand from the inputs below. */
#include "trace_harness.h"

#if defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT
int main(void) {
  printf("trace-ops: 0 passed, 0 failed (tracing compiled out)\n");
  return 0;
}
#else

enum { DUR_NS = 5000 }; /* every execution below lasts 5 us */
static int g_scope_a, g_scope_b;

/* tensors: in 1x4 f32 (16 B), 4x8 f32 (128 B), an absent input; out 1x8 f32 (32 B) -> 176 B, 8 elements */
static int64_t d_x[8] = {1, 4}, d_w[8] = {4, 8}, d_y[8] = {1, 8};
static const fbx_trace_tensor k_in[3] = {{d_x, 2, 4}, {d_w, 2, 4}, {NULL, -1, 0}};
static const fbx_trace_tensor k_out[1] = {{d_y, 2, 4}};

static fbx_trace_op_site_desc desc_matmul(const void *scope) {
  return (fbx_trace_op_site_desc){.scope = scope, .op = "MatMul", .node = "/a \"q\"\\b", .node_id = 3, .device = "cpu"};
}
static const fbx_trace_op_site_desc k_ew = {.scope = &g_scope_a, .op = "FusedElementwise", .node = "ew", .node_id = 4,
                                            .device = "cpu", .fast_span = "Add+Mul [fast]", .fast_kernel = "ew_fused"};
static const fbx_trace_op_site_desc k_conv = {.scope = &g_scope_a, .op = "Conv", .node = "c", .domain = "com.example", .node_id = 5,
                                              .device = "cpu", .fast_span = "Conv+Relu [fast]",
                                              .variant_suffix = "+epilogue(Relu)"};
static const fbx_trace_op_site_desc k_soft = {.scope = &g_scope_a, .op = "Softmax", .node = "s", .node_id = 6,
                                              .device = "cpu", .composed_op = "Softmax",
                                              .composed_reason = "axis not last"};

static void run(fbx_trace_op_site *site, const char *variant) {
  uint64_t t0 = fbx_trace_now_ns();
  fbx_trace_op_run r = {.in = k_in, .out = k_out, .n_in = 3, .n_out = 1, .dtype = "float32", .flops = 64,
                        .variant = variant, .reason = "M=1"};
  fbx_trace_op(site, t0, t0 + DUR_NS, &r);
}

/* MatMul x3, FusedElementwise x2, Conv x1, Softmax (composed) x2. */
static int child_ops(void) {
  fbx_trace_session *s = fbx_trace_session_create("ops");
  CHECK(s != NULL);
  fbx_trace_op_site_desc dm = desc_matmul(&g_scope_a), dm_b = desc_matmul(&g_scope_b);
  fbx_trace_op_site *mm = fbx_trace_op_site_get(s, &dm);
  CHECK(mm != NULL);
  CHECK(fbx_trace_op_site_get(s, &dm) == mm);   /* interned by content */
  CHECK(fbx_trace_op_site_get(s, &dm_b) != mm); /* another scope: another site */
  fbx_trace_op_site *ew = fbx_trace_op_site_get(s, &k_ew), *conv = fbx_trace_op_site_get(s, &k_conv);
  fbx_trace_op_site *soft = fbx_trace_op_site_get(s, &k_soft);
  CHECK(ew && conv && soft && ew != conv);
  for (int i = 0; i < 3; i++) run(mm, "gemv");
  for (int i = 0; i < 2; i++) run(ew, "ew_fused");
  run(conv, "conv_direct");
  for (int i = 0; i < 2; i++) run(soft, "softmax_rows");
  fbx_trace_op(NULL, 0, 1, NULL); /* no site (OOM at lookup): nothing */
  fbx_trace_session_destroy(s);
  return 0;
}

static json_t *nth_named(json_t *j, const char *name, int nth) { return find_event(j, name, nth); }
static const char *arg_str(json_t *e, const char *k) {
  return json_string_value(json_object_get(json_object_get(e, "args"), k));
}

static int t_ops(void) {
  char *trace = path_of("ops.json"), *err = path_of("ops.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("ops", env, err) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  CHECK(count_named(j, "MatMul") == 3);
  json_t *m = nth_named(j, "MatMul", 2);
  CHECK(!strcmp(json_string_value(json_object_get(m, "cat")), "op"));
  CHECK(json_number_value(json_object_get(m, "dur")) == 5.0);
  CHECK(arg_int(m, "node_id") == 3 && !strcmp(arg_str(m, "node"), "/a \"q\"\\b"));
  CHECK(!strcmp(arg_str(m, "device"), "cpu"));
  CHECK(!strcmp(arg_str(m, "domain"), "ai.onnx")); /* NULL domain: the default one, named */
  CHECK(!strcmp(arg_str(m, "input_shapes"), "1x4,4x8,none") && !strcmp(arg_str(m, "output_shapes"), "1x8"));
  CHECK(!strcmp(arg_str(m, "dtype"), "float32") && arg_int(m, "elements") == 8 && arg_int(m, "bytes") == 176);
  CHECK(json_number_value(json_object_get(json_object_get(m, "args"), "flops")) == 64);
  CHECK(!strcmp(arg_str(m, "kernel_variant"), "gemv") && !strcmp(arg_str(m, "kernel_variant_reason"), "M=1"));
  /* fused elementwise: op span + [fast] span with the fixed kernel */
  CHECK(count_named(j, "FusedElementwise") == 2 && count_named(j, "Add+Mul [fast]") == 2);
  json_t *f = nth_named(j, "Add+Mul [fast]", 0);
  CHECK(!strcmp(json_string_value(json_object_get(f, "cat")), "op.fast"));
  CHECK(!strcmp(arg_str(f, "kernel"), "ew_fused") && arg_int(f, "node_id") == 4);
  /* conv with an epilogue: the variant carries the suffix, in the op span and the [fast] span */
  json_t *c = nth_named(j, "Conv", 0), *cf = nth_named(j, "Conv+Relu [fast]", 0);
  CHECK(c && cf && !strcmp(arg_str(c, "kernel_variant"), "conv_direct+epilogue(Relu)"));
  CHECK(!strcmp(arg_str(c, "domain"), "com.example"));
  CHECK(!strcmp(arg_str(cf, "kernel"), "conv_direct+epilogue(Relu)") && arg_int(cf, "node_id") == 5);
  /* composed: the op span, a [composed] span with its reason, the session's running count */
  CHECK(count_named(j, "Softmax") == 2 && count_named(j, "Softmax [composed]") == 2);
  json_t *sc = nth_named(j, "Softmax [composed]", 1);
  CHECK(!strcmp(json_string_value(json_object_get(sc, "cat")), "op.composed"));
  CHECK(!strcmp(arg_str(sc, "reason"), "axis not last") && arg_int(sc, "node_id") == 6);
  CHECK(count_named(j, "fusebox.composed_path_count") == 2);
  json_t *cc = nth_named(j, "fusebox.composed_path_count", 1);
  CHECK(json_number_value(json_object_get(json_object_get(cc, "args"), "value")) == 2);
  /* summary == events: 3 fast (2 EW + 1 conv), 2 composed; op times 5 us each */
  json_t *ss = find_event(j, "fusebox.session_summary", 0);
  CHECK(arg_int(ss, "fast_count") == 3 && arg_int(ss, "composed_count") == 2);
  json_t *ops = json_object_get(json_object_get(find_event(j, "fusebox.slowest_ops", 0), "args"), "ops");
  CHECK(json_array_size(ops) == 4);
  json_t *top = json_array_get(ops, 0);
  CHECK(!strcmp(json_string_value(json_object_get(top, "op")), "MatMul"));
  CHECK(json_integer_value(json_object_get(top, "calls")) == 3 && json_number_value(json_object_get(top, "us")) == 15.0);
  json_decref(j);
  char *e = slurp(err);
  CHECK(e && strstr(e, "kernels: fast=3 composed=2") && strstr(e, "composed: Softmax x2: axis not last"));
  CHECK(strstr(e, "1. MatMul") && strstr(e, "15.0us"));
  free(e);
  return 0;
}

/* FUSEBOX_VERBOSE alone: no records; the statistics are kept on the hot path. */
static int t_ops_verbose(void) {
  char *err = path_of("ops_verbose.err");
  const char *env[] = {"FUSEBOX_VERBOSE=1", NULL};
  CHECK(run_child("ops", env, err) == 0);
  char *e = slurp(err);
  CHECK(e && strstr(e, "kernels: fast=3 composed=2") && strstr(e, "1. MatMul") && strstr(e, "15.0us"));
  CHECK(strstr(e, "3 calls"));
  free(e);
  return 0;
}

/* Cap 5: Softmax (3 events: span, [composed], counter) x2, then MatMul: 5 written, 2 dropped; the
 * statistics still count every execution. */
static int child_ops_cap(void) {
  fbx_trace_session *s = fbx_trace_session_create("ops-cap");
  fbx_trace_op_site_desc dm = desc_matmul(&g_scope_a);
  fbx_trace_op_site *soft = fbx_trace_op_site_get(s, &k_soft), *mm = fbx_trace_op_site_get(s, &dm);
  CHECK(soft && mm);
  run(soft, "softmax_rows");
  run(soft, "softmax_rows");
  run(mm, "gemv");
  fbx_trace_session_destroy(s);
  return 0;
}

static int t_ops_cap(void) {
  char *trace = path_of("ops_cap.json"), *err = path_of("ops_cap.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), "FUSEBOX_TRACE_MAX_EVENTS=5", NULL};
  CHECK(run_child("ops_cap", env, err) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  CHECK(count_named(j, "Softmax") == 2 && count_named(j, "Softmax [composed]") == 2);
  CHECK(count_named(j, "fusebox.composed_path_count") == 1 && count_named(j, "MatMul") == 0);
  json_t *od = json_object_get(j, "otherData");
  CHECK(json_integer_value(json_object_get(od, "dropped_events")) == 2);
  CHECK(json_integer_value(json_object_get(od, "recorded_events")) == 5);
  json_t *ops = json_object_get(json_object_get(find_event(j, "fusebox.slowest_ops", 0), "args"), "ops");
  CHECK(json_array_size(ops) == 2); /* MatMul's execution counts though its span was dropped */
  json_decref(j);
  return 0;
}

/* A dim >= 2^31 is kept whole (records store 32-bit dims otherwise). */
static int child_ops_wide(void) {
  fbx_trace_session *s = fbx_trace_session_create("ops-wide");
  fbx_trace_op_site_desc d = {.scope = &g_scope_a, .op = "Gather", .node = "g", .node_id = 9, .device = "cpu"};
  fbx_trace_op_site *site = fbx_trace_op_site_get(s, &d);
  CHECK(site);
  int64_t big[2] = {3000000000LL, 2}, one[1] = {7}, small[3] = {1, 2147483647LL, 2};
  fbx_trace_tensor in[2] = {{big, 2, 1}, {small, 3, 8}}, out[1] = {{one, 1, 4}};
  uint64_t t0 = fbx_trace_now_ns();
  fbx_trace_op_run r = {.in = in, .out = out, .n_in = 2, .n_out = 1, .dtype = "float32", .variant = "gather"};
  fbx_trace_op(site, t0, t0 + DUR_NS, &r);
  fbx_trace_session_destroy(s);
  return 0;
}

static int t_ops_wide(void) {
  char *trace = path_of("ops_wide.json");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("ops_wide", env, path_of("ops_wide.err")) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  json_t *g = nth_named(j, "Gather", 0);
  CHECK(g && !strcmp(arg_str(g, "input_shapes"), "3000000000x2,1x2147483647x2"));
  CHECK(!strcmp(arg_str(g, "output_shapes"), "7") && arg_int(g, "elements") == 7);
  /* 6e9 x 1 B + 4294967294 x 8 B + 7 x 4 B */
  CHECK(arg_int(g, "bytes") == 6000000000LL + 4294967294LL * 8 + 28);
  json_decref(j);
  return 0;
}

static const tcase k_cases[] = {
    {"op_wide_dims", t_ops_wide, "ops_wide", child_ops_wide},
    {"op_spans_args_fast_composed_summary", t_ops, "ops", child_ops},
    {"op_statistics_without_json", t_ops_verbose, NULL, NULL},
    {"op_cap_counts_each_event", t_ops_cap, "ops_cap", child_ops_cap},
};

int main(int argc, char **argv) {
  return trace_harness_main(argc, argv, k_cases, sizeof k_cases / sizeof k_cases[0], "trace-ops");
}

#endif
