/* The CUDA decoder kernels at Qwen2.5-0.5B decode shapes (hidden 896, FFN 4864,
 * vocab 151936, 14 heads / 2 KV heads of 64): MATMUL_NBITS int4 (block 32,
 * packed zero points) against the fp32 cuBLASLt MATMUL of the same shape, GQA
 * decode at past 128 and 512 on a shared buffer, SKIP_NORM.
 *
 *   build/bench/bench_cuda_genai [iters [only]]
 *
 * only: run just the shapes whose label contains it (e.g. "151936" for the
 * lm_head, "GQA"), for a profiler such as ncu.
 *
 * Per shape: us per call launched one by one (run_node + the stream), and us
 * per call replayed from a CUDA graph of `iters` calls (the device time
 * without host launch cost), with the bytes each call must read and the
 * resulting GB/s (weights + scales + activations; the HBM floor). Prints one
 * skip line without a GPU. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/backend_cuda.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static fbx_backend *g_be;
static const char *g_only; /* label filter (argv[2]) or NULL */
static int g_ids[32] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};

static void die(fbx_status *st, const char *what) {
  if (!st) return;
  fprintf(stderr, "bench_cuda_genai: %s: %s\n", what, fbx_status_message(st));
  exit(1);
}

/* floats in [-1, 1) */
static void *dev_floats(int64_t n, unsigned seed) {
  float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) h[i] = (float)(((seed = seed * 1103515245u + 12345u) >> 8) & 0xffff) / 32768.f - 1.f;
  void *d = NULL;
  die(g_be->vt->buffer_alloc(g_be, sizeof(float) * (size_t)n, &d), "alloc");
  die(g_be->vt->copy_from_host(g_be, d, h, sizeof(float) * (size_t)n), "upload");
  free(h);
  return d;
}

/* Times one node: live launches and graph replays. */
static void time_node(const char *what, const fbx_ir_node *nd, void *state, fbx_tensor *in, int n_in, fbx_tensor *out,
                      int n_out, double bytes, int iters) {
  if (g_only && !strstr(what, g_only)) return;
  fbx_kernel_info info;
  for (int i = 0; i < 3; i++) die(g_be->vt->run_node(g_be, nd, state, in, n_in, out, n_out, &info), what);
  die(g_be->vt->synchronize(g_be), what);
  double t0 = now_us();
  for (int i = 0; i < iters; i++) die(g_be->vt->run_node(g_be, nd, state, in, n_in, out, n_out, NULL), what);
  die(g_be->vt->synchronize(g_be), what);
  double live = (now_us() - t0) / iters, graph = -1;
  if (g_be->vt->graph_begin) {
    fbx_backend_graph *gr = NULL;
    die(g_be->vt->graph_begin(g_be), "graph_begin");
    for (int i = 0; i < iters; i++) die(g_be->vt->run_node(g_be, nd, state, in, n_in, out, n_out, NULL), what);
    fbx_status *st = g_be->vt->graph_end(g_be, &gr);
    if (!st && gr) {
      die(g_be->vt->graph_launch(g_be, gr), "graph_launch");
      die(g_be->vt->synchronize(g_be), what);
      const int reps = 5;
      t0 = now_us();
      for (int r = 0; r < reps; r++) die(g_be->vt->graph_launch(g_be, gr), "graph_launch");
      die(g_be->vt->synchronize(g_be), what);
      graph = (now_us() - t0) / (reps * (double)iters);
      g_be->vt->graph_destroy(g_be, gr);
    }
    fbx_status_free(st);
  }
  printf("| %-44s | %-22s | %8.2f | %8.2f | %8.2f | %7.0f |\n", what, info.variant ? info.variant : "?", bytes / 1e6,
         live, graph, graph > 0 ? bytes / graph / 1e3 : 0.0);
}

static void bench_mnb(int64_t K, int64_t N, int iters) {
  const int64_t bs = 32, kb = (K + bs - 1) / bs, blob = bs / 2, zrow = (kb * 4 + 7) / 8;
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.nbits.K = K, p.nbits.N = N, p.nbits.bits = 4, p.nbits.block_size = (int)bs, p.nbits.zp_u8 = 1;
  fbx_ir_node nd = {.op = FBX_IR_OP_MATMUL_NBITS, .n_inputs = 5, .n_outputs = 1, .inputs = g_ids, .outputs = g_ids + 16,
                    .params = p, .name = "mnb", .onnx_op = "MatMulNBits", .onnx_node_index = -1};
  /* host constants for node_prepare */
  fbx_tensor hc[5] = {{.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {1, K}},
                      {.dtype = FBX_DTYPE_U8, .rank = 3, .dims = {N, kb, blob}},
                      {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {N, kb}},
                      {.dtype = FBX_DTYPE_U8, .rank = 2, .dims = {N, zrow}},
                      {.rank = -1}};
  g_ids[4] = FBX_IR_NONE;
  hc[1].data = malloc((size_t)(N * kb * blob));
  hc[2].data = malloc(sizeof(float) * (size_t)(N * kb));
  hc[3].data = malloc((size_t)(N * zrow));
  for (int64_t i = 0; i < N * kb * blob; i++) ((unsigned char *)hc[1].data)[i] = (unsigned char)(i * 37 + 11);
  for (int64_t i = 0; i < N * kb; i++) ((float *)hc[2].data)[i] = 0.01f + (float)(i % 7) * 0.001f;
  for (int64_t i = 0; i < N * zrow; i++) ((unsigned char *)hc[3].data)[i] = 0x88;
  const fbx_tensor *cin[5] = {NULL, &hc[1], &hc[2], &hc[3], NULL};
  fbx_tensor in[5];
  memcpy(in, hc, sizeof in);
  in[0].data = dev_floats(K, 1);
  in[1].data = in[2].data = in[3].data = NULL; /* the kernel reads the prepared copy */
  void *state = NULL;
  die(g_be->vt->node_prepare(g_be, &nd, cin, in, &state), "MATMUL_NBITS prepare");
  fbx_tensor out = {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {1, N}};
  die(g_be->vt->buffer_alloc(g_be, sizeof(float) * (size_t)N, &out.data), "alloc");
  char what[96];
  snprintf(what, sizeof what, "MATMUL_NBITS int4 bs32 zp (1,%lld)x(%lld,%lld)", (long long)K, (long long)K, (long long)N);
  double bytes = (double)N * (double)(kb * blob) + 8.0 * (double)(N * kb) + 4.0 * (double)(K + N);
  time_node(what, &nd, state, in, 5, &out, 1, bytes, iters);
  g_ids[4] = 4;
  g_be->vt->node_release(g_be, &nd, state);
  /* the fp32 GEMV of the same shape through cuBLASLt (MATMUL, B (K, N)) */
  fbx_ir_node mm = {.op = FBX_IR_OP_MATMUL, .n_inputs = 2, .n_outputs = 1, .inputs = g_ids, .outputs = g_ids + 16,
                    .name = "mm", .onnx_op = "MatMul", .onnx_node_index = -1};
  mm.params.matmul.alpha = 1.f;
  fbx_tensor mi[2] = {in[0], {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {K, N}}};
  mi[1].data = dev_floats(K * N, 2);
  snprintf(what, sizeof what, "MATMUL fp32 cuBLASLt (1,%lld)x(%lld,%lld)", (long long)K, (long long)K, (long long)N);
  time_node(what, &mm, NULL, mi, 2, &out, 1, 4.0 * (double)(K * N + K + N), iters);
  g_be->vt->buffer_free(g_be, mi[1].data);
  g_be->vt->buffer_free(g_be, in[0].data);
  g_be->vt->buffer_free(g_be, out.data);
  free(hc[1].data), free(hc[2].data), free(hc[3].data);
}

static void bench_gqa(int64_t past, int iters) {
  const int64_t nh = 14, kvh = 2, H = 64, cap = 1024;
  fbx_ir_node nd = {.op = FBX_IR_OP_GQA, .n_inputs = 9, .n_outputs = 3, .inputs = g_ids, .outputs = g_ids + 16,
                    .name = "gqa", .onnx_op = "GroupQueryAttention", .onnx_node_index = -1};
  nd.params.gqa.num_heads = (int)nh, nd.params.gqa.kv_num_heads = (int)kvh, nd.params.gqa.do_rotary = 1;
  fbx_tensor in[9] = {{.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {1, 1, nh * H}},
                      {.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {1, 1, kvh * H}},
                      {.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {1, 1, kvh * H}},
                      {.dtype = FBX_DTYPE_F32, .rank = 4, .dims = {1, kvh, cap, H}},
                      {.dtype = FBX_DTYPE_F32, .rank = 4, .dims = {1, kvh, cap, H}},
                      {.dtype = FBX_DTYPE_I32, .rank = 1, .dims = {1}},
                      {.dtype = FBX_DTYPE_I32, .rank = 0},
                      {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {cap, H / 2}},
                      {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {cap, H / 2}}};
  in[0].data = dev_floats(nh * H, 3);
  in[1].data = dev_floats(kvh * H, 4);
  in[2].data = dev_floats(kvh * H, 5);
  in[3].data = dev_floats(kvh * cap * H, 6);
  in[4].data = dev_floats(kvh * cap * H, 7);
  int32_t lens[2] = {(int32_t)past, (int32_t)past + 1};
  die(g_be->vt->buffer_alloc(g_be, 4, &in[5].data), "alloc");
  die(g_be->vt->buffer_alloc(g_be, 4, &in[6].data), "alloc");
  die(g_be->vt->copy_from_host(g_be, in[5].data, &lens[0], 4), "upload");
  die(g_be->vt->copy_from_host(g_be, in[6].data, &lens[1], 4), "upload");
  in[7].data = dev_floats(cap * H / 2, 8);
  in[8].data = dev_floats(cap * H / 2, 9);
  fbx_tensor out[3] = {{.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {1, 1, nh * H}}, in[3], in[4]};
  die(g_be->vt->buffer_alloc(g_be, sizeof(float) * (size_t)(nh * H), &out[0].data), "alloc");
  char what[96];
  snprintf(what, sizeof what, "GQA decode 14/2 heads H64 past %lld (shared)", (long long)past);
  time_node(what, &nd, NULL, in, 9, out, 3, 2.0 * 4.0 * (double)(kvh * (past + 1) * H), iters);
  for (int i = 0; i < 9; i++) g_be->vt->buffer_free(g_be, in[i].data);
  g_be->vt->buffer_free(g_be, out[0].data);
}

static void bench_norm(int iters) {
  const int64_t h = 896;
  fbx_ir_node nd = {.op = FBX_IR_OP_SKIP_NORM, .n_inputs = 5, .n_outputs = 2, .inputs = g_ids, .outputs = g_ids + 16,
                    .name = "sn", .onnx_op = "SkipSimplifiedLayerNormalization", .onnx_node_index = -1};
  nd.params.skipnorm.epsilon = 1e-6f, nd.params.skipnorm.simplified = 1, nd.params.skipnorm.has_sum = 1;
  g_ids[3] = g_ids[4] = FBX_IR_NONE;
  fbx_tensor in[5] = {{.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {1, 1, h}},
                      {.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {1, 1, h}},
                      {.dtype = FBX_DTYPE_F32, .rank = 1, .dims = {h}}, {.rank = -1}, {.rank = -1}};
  for (int i = 0; i < 3; i++) in[i].data = dev_floats(fbx_tensor_numel(&in[i]), 10 + (unsigned)i);
  fbx_tensor out[2] = {in[0], in[0]};
  die(g_be->vt->buffer_alloc(g_be, sizeof(float) * h, &out[0].data), "alloc");
  die(g_be->vt->buffer_alloc(g_be, sizeof(float) * h, &out[1].data), "alloc");
  time_node("SKIP_NORM skip + RMSNorm + sum (1,1,896)", &nd, NULL, in, 5, out, 2, 4.0 * 5 * h, iters);
  for (int i = 0; i < 3; i++) g_be->vt->buffer_free(g_be, in[i].data);
  g_be->vt->buffer_free(g_be, out[0].data), g_be->vt->buffer_free(g_be, out[1].data);
  g_ids[3] = 3, g_ids[4] = 4;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 200;
  if (iters < 1) iters = 1;
  g_only = argc > 2 ? argv[2] : NULL;
  char exe[PATH_MAX], lib[PATH_MAX + 32];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  snprintf(lib, sizeof lib, "%s/../libfusebox_cuda.so", slash ? exe : ".");
  fbx_cuda_options co = {.device_id = 0, .library = lib};
  fbx_status *st = fbx_cuda_backend_open(&co, &g_be);
  if (st) {
    printf("bench_cuda_genai: SKIP: %s\n", fbx_status_message(st));
    fbx_status_free(st);
    return 0;
  }
  printf("| %-44s | %-22s | %8s | %8s | %8s | %7s |\n", "kernel", "variant", "MB read", "us live", "us graph", "GB/s");
  printf("|%s|%s|%s|%s|%s|%s|\n", "----------------------------------------------", "------------------------",
         "----------", "----------", "----------", "---------");
  bench_mnb(896, 896, iters);     /* q/o projections */
  bench_mnb(896, 4864, iters);    /* gate / up */
  bench_mnb(4864, 896, iters);    /* down */
  bench_mnb(896, 151936, iters / 10 > 0 ? iters / 10 : 1); /* lm_head */
  bench_gqa(128, iters);
  bench_gqa(512, iters);
  bench_norm(iters);
  fbx_backend_destroy(g_be);
  return 0;
}
