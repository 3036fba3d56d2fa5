/* CONV_INT (the integer convolution of quantize_dynamic models) throughput on
 * the U-Net's layer shapes, per integer-GEMM path (scalar, AVX2 vpmaddwd,
 * AVX-512 VNNI), through the CPU backend. Each shape runs for at least
 * min_seconds; reported: GMAC/s by wall time and by the process's CPU time
 * (the CPU-time figure survives a shared machine better; with N threads,
 * divide by N for per-core figures), and a register-only vpdpbusd loop's
 * rate as the peak of one core.
 * Usage: bench_qconv [threads=1] [min_seconds_per_shape=0.5] */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_qgemm.h"

static double now_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static int peak_vnni(long long iters) {
  __m512i a[16], x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-5);
  for (int i = 0; i < 16; i++) a[i] = _mm512_set1_epi32(i);
  for (long long n = 0; n < iters; n++)
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) a[i] = _mm512_dpbusd_epi32(a[i], x, y);
  __m512i s = a[0];
  for (int i = 1; i < 16; i++) s = _mm512_add_epi32(s, a[i]);
  return _mm512_reduce_add_epi32(s);
}

typedef struct { const char *name; int64_t C, M, H, W, k; } shape;

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  double min_s = argc > 2 ? atof(argv[2]) : 0.5;
  fbx_cpu_options o = {.threads = threads};
  fbx_backend *be = NULL;
  fbx_status *st = fbx_cpu_backend_create(&o, &be);
  if (st) { fprintf(stderr, "backend: %s\n", fbx_status_message(st)); return 1; }
  if (fbx_cpu_qg_available(FBX_QG_VNNI)) {
    long long it = 20000000;
    double t0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    volatile int sink = peak_vnni(it);
    (void)sink;
    double t = now_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
    printf("peak vpdpbusd (1 core, register-only): %.1f GMAC/s\n", (double)it * 16 * 64 / t * 1e-9);
  }
  static const shape shapes[] = {
      {"3x3 16->16 @256x256", 16, 16, 256, 256, 3},  {"3x3 32->32 @128x128", 32, 32, 128, 128, 3},
      {"3x3 64->64 @64x64", 64, 64, 64, 64, 3},       {"3x3 128->128 @32x32", 128, 128, 32, 32, 3},
      {"3x3 256->256 @16x16", 256, 256, 16, 16, 3},   {"3x3 48->16 @256x256", 48, 16, 256, 256, 3},
      {"1x1 16->4 @256x256", 16, 4, 256, 256, 1},
  };
  printf("threads %d\n| shape | path | ms/run | GMAC/s (wall) | GMAC/s (cpu time) |\n|---|---|---:|---:|---:|\n", threads);
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const shape *s = &shapes[si];
    fbx_tensor in[4] = {{.dtype = FBX_DTYPE_U8, .rank = 4, .dims = {1, s->C, s->H, s->W}},
                        {.dtype = FBX_DTYPE_U8, .rank = 4, .dims = {s->M, s->C, s->k, s->k}},
                        {.dtype = FBX_DTYPE_U8, .rank = 0},
                        {.dtype = FBX_DTYPE_U8, .rank = 0}};
    fbx_tensor out = {.dtype = FBX_DTYPE_I32, .rank = 4, .dims = {1, s->M, s->H, s->W}};
    for (int i = 0; i < 4; i++) {
      size_t n = fbx_tensor_nbytes(&in[i]);
      in[i].data = malloc(n ? n : 1);
      for (size_t b = 0; b < n; b++) ((uint8_t *)in[i].data)[b] = (uint8_t)(b * 2654435761u >> 13);
    }
    out.data = malloc(fbx_tensor_nbytes(&out));
    fbx_ir_node nd = {.op = FBX_IR_OP_CONV_INT, .n_inputs = 4, .n_outputs = 1};
    nd.params.conv.nd = 2;
    nd.params.conv.group = 1;
    for (int i = 0; i < 2; i++) {
      nd.params.conv.kernel[i] = s->k;
      nd.params.conv.strides[i] = nd.params.conv.dilations[i] = 1;
      nd.params.conv.pads[i] = nd.params.conv.pads[2 + i] = s->k / 2;
    }
    double macs = (double)s->M * (double)s->H * (double)s->W * (double)s->C * (double)(s->k * s->k);
    for (int p = FBX_QG_SCALAR; p <= FBX_QG_VNNI; p++) {
      if (!fbx_cpu_qg_available((fbx_qg_path)p)) continue;
      if (p == FBX_QG_SCALAR && macs > 2e8) continue; /* minutes; the scalar path is the portable fallback */
      fbx_cpu_qg_force((fbx_qg_path)p);
      fbx_kernel_info info;
      st = be->vt->run_node(be, &nd, NULL, in, 4, &out, 1, &info); /* warm-up */
      if (st) { fprintf(stderr, "run: %s\n", fbx_status_message(st)); return 1; }
      int runs = 0;
      double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID), w = 0;
      do {
        st = be->vt->run_node(be, &nd, NULL, in, 4, &out, 1, &info);
        if (st) { fprintf(stderr, "run: %s\n", fbx_status_message(st)); return 1; }
        runs++;
        w = now_s(CLOCK_MONOTONIC) - w0;
      } while (w < min_s);
      double cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
      printf("| %s | %s | %.3f | %.1f | %.1f |\n", s->name, fbx_cpu_qg_name((fbx_qg_path)p), w / runs * 1e3,
             macs * runs / w * 1e-9, macs * runs / cpu * 1e-9 * threads);
    }
    for (int i = 0; i < 4; i++) free(in[i].data);
    free(out.data);
  }
  fbx_backend_destroy(be);
  return 0;
}
