/* fp32 convolution throughput of the CPU backend's CONV kernel (whatever
 * algorithm it picks: the variant is printed) over the shapes that dominate
 * PP-OCRv4 det 640x640 and a ResNet-style CNN, through the backend's own
 * vtable (no ORT). Best and median wall ms of R runs after a warm-up, GFLOP/s of
 * the best, and GFLOP per CPU-second (median; robust to a loaded machine). Usage: bench_conv [threads=2] [reps=20] [shape-name substring]
 * (FUSEBOX_AVX512=0 measures the AVX2 kernels.) W and B are constants, so the
 * node is prepared as a compiled plan would (node_prepare: packed-W paths),
 * and the first runs (warm-up) pack W. FBX_BENCH_FLUSH_MB=N writes N MiB between
 * runs (outside the timing), so X, W and Y start cold as inside a model whose
 * weights exceed the caches (ResNet-18: 47 MB). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct {
  const char *name;
  int64_t C, H, W, M, K, S, P, G; /* input C x H x W, M filters K x K, stride, pad, group */
} conv_shape;

static const conv_shape kShapes[] = {
    {"det 96->24 3x3 160x160", 96, 160, 160, 24, 3, 1, 1, 1},
    {"det 96->24 3x3 80x80", 96, 80, 80, 24, 3, 1, 1, 1},
    {"probe 96->24 3x3 120x120", 96, 120, 120, 24, 3, 1, 1, 1},
    {"probe 96->24 3x3 160x40", 96, 160, 40, 24, 3, 1, 1, 1},
    {"probe 96->24 3x3 40x160", 96, 40, 160, 24, 3, 1, 1, 1},
    {"det 3->16 3x3 s2 640x640", 3, 640, 640, 16, 3, 2, 1, 1},
    {"det 16->32 1x1 320x320", 16, 320, 320, 32, 1, 1, 0, 1},
    {"det 48->48 1x1 160x160", 48, 160, 160, 48, 1, 1, 0, 1},
    {"det 192->192 1x1 40x40", 192, 40, 40, 192, 1, 1, 0, 1},
    {"det 384->384 1x1 20x20", 384, 20, 20, 384, 1, 1, 0, 1},
    {"det dw 16 3x3 320x320", 16, 320, 320, 16, 3, 1, 1, 16},
    {"det dw 192 5x5 40x40", 192, 40, 40, 192, 5, 1, 2, 192},
    /* ResNet-18 at 224x224: every conv shape (the 3x3s are ~90% of its FLOPs) */
    {"resnet stem 3->64 7x7 s2 224x224", 3, 224, 224, 64, 7, 2, 3, 1},
    {"resnet 64->64 3x3 56x56", 64, 56, 56, 64, 3, 1, 1, 1},
    {"resnet 64->128 3x3 s2 56x56", 64, 56, 56, 128, 3, 2, 1, 1},
    {"resnet 64->128 1x1 s2 56x56", 64, 56, 56, 128, 1, 2, 0, 1},
    {"resnet 128->128 3x3 28x28", 128, 28, 28, 128, 3, 1, 1, 1},
    {"resnet 128->256 3x3 s2 28x28", 128, 28, 28, 256, 3, 2, 1, 1},
    {"resnet 256->256 3x3 14x14", 256, 14, 14, 256, 3, 1, 1, 1},
    {"resnet 256->512 3x3 s2 14x14", 256, 14, 14, 512, 3, 2, 1, 1},
    {"resnet 512->512 3x3 7x7", 512, 7, 7, 512, 3, 1, 1, 1},
    /* PP-OCRv4 rec 48x320 (PP-LCNet: 1x1 convs on few pixels, 5x5 depthwise) */
    {"rec 128->240 1x1 12x80", 128, 12, 80, 240, 1, 1, 0, 1},
    {"rec 240->240 1x1 12x80", 240, 12, 80, 240, 1, 1, 0, 1},
    {"rec 240->480 1x1 6x80", 240, 6, 80, 480, 1, 1, 0, 1},
    {"rec 480->480 1x1 6x80", 480, 6, 80, 480, 1, 1, 0, 1},
    {"rec 480->480 1x1 3x80", 480, 3, 80, 480, 1, 1, 0, 1},
    {"rec dw 240 5x5 12x80", 240, 12, 80, 240, 5, 1, 2, 240},
    {"rec dw 480 5x5 6x80", 480, 6, 80, 480, 5, 1, 2, 480},
};

/* CPU seconds of the whole process (all threads): on a shared machine a run
 * longer than a scheduler slice is descheduled, and wall time then measures
 * the load; CPU time per run still measures the kernel. */
static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static fbx_tensor mk(int64_t a, int64_t b, int64_t c, int64_t d) {
  fbx_tensor t = {.dtype = FBX_DTYPE_F32, .rank = 4, .dims = {a, b, c, d}};
  size_t n = fbx_tensor_nbytes(&t);
  t.data = aligned_alloc(64, (n + 63) / 64 * 64);
  for (size_t i = 0; i < n / 4; i++) ((float *)t.data)[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  return t;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 20;
  if (reps < 1) reps = 1;
  fbx_cpu_options o = {.threads = threads};
  fbx_backend *be = NULL;
  fbx_status *st = fbx_cpu_backend_create(&o, &be);
  if (st) {
    fprintf(stderr, "backend: %s\n", fbx_status_message(st));
    return 1;
  }
  printf("| shape | threads | variant | best ms | median ms | GFLOP/s (best) | GFLOP/CPU-s (median) |\n"
         "|---|---|---|---|---|---|---|\n");
  double *t = calloc((size_t)reps, sizeof *t), *tc = calloc((size_t)reps, sizeof *tc);
  const char *fl = getenv("FBX_BENCH_FLUSH_MB");
  const size_t flush_n = fl ? (size_t)atol(fl) << 20 : 0;
  unsigned char *flush = flush_n ? malloc(flush_n) : NULL;
  for (size_t si = 0; si < sizeof kShapes / sizeof kShapes[0]; si++) {
    const conv_shape *s = &kShapes[si];
    if (argc > 3 && !strstr(s->name, argv[3])) continue;
    int64_t OH = (s->H + 2 * s->P - s->K) / s->S + 1, OW = (s->W + 2 * s->P - s->K) / s->S + 1;
    fbx_tensor in[3] = {mk(1, s->C, s->H, s->W), mk(s->M, s->C / s->G, s->K, s->K),
                        {.dtype = FBX_DTYPE_F32, .rank = 1, .dims = {s->M}}};
    in[2].data = calloc((size_t)s->M, sizeof(float));
    fbx_tensor y = mk(1, s->M, OH, OW);
    fbx_ir_node nd = {.op = FBX_IR_OP_CONV, .n_inputs = 3, .n_outputs = 1};
    nd.params.conv.nd = 2;
    nd.params.conv.kernel[0] = nd.params.conv.kernel[1] = s->K;
    nd.params.conv.strides[0] = nd.params.conv.strides[1] = s->S;
    nd.params.conv.dilations[0] = nd.params.conv.dilations[1] = 1;
    for (int i = 0; i < 4; i++) nd.params.conv.pads[i] = s->P;
    nd.params.conv.group = s->G;
    fbx_kernel_info info = {0};
    void *state = NULL;
    const fbx_tensor *consts[3] = {NULL, &in[1], &in[2]};
    if (be->vt->node_prepare) st = be->vt->node_prepare(be, &nd, consts, in, &state);
    for (int r = -2; r < reps && !st; r++) {
      if (flush) memset(flush, r & 0xff, flush_n);
      double t0 = now_s(), c0 = cpu_s();
      st = be->vt->run_node(be, &nd, state, in, 3, &y, 1, &info);
      if (r >= 0) t[r] = now_s() - t0, tc[r] = cpu_s() - c0;
    }
    if (st) {
      fprintf(stderr, "%s: %s\n", s->name, fbx_status_message(st));
      return 1;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    qsort(tc, (size_t)reps, sizeof *tc, cmp_d);
    printf("| %s | %d | %s | %.3f | %.3f | %.1f | %.1f |\n", s->name, threads, info.variant ? info.variant : "?",
           t[0] * 1e3, t[reps / 2] * 1e3, info.flops / t[0] * 1e-9, info.flops / tc[reps / 2] * 1e-9);
    if (state && be->vt->node_release) be->vt->node_release(be, &nd, state);
    for (int i = 0; i < 3; i++) free(in[i].data);
    free(y.data);
  }
  free(t);
  free(tc);
  free(flush);
  fbx_backend_destroy(be);
  return 0;
}
