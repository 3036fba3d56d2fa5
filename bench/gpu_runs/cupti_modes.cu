// Experiment (session 10, bench/RESULTS.md "GPU tracing"): the cost of CUPTI activity kinds on a
// replayed graph of 150 small PDL kernels. nvcc -arch=sm_90 -O2 -std=c++17 -o cupti_modes cupti_modes.cu -lcupti
// ./cupti_modes MODE [kernels] [replays] [every] [sync]: 0 nothing, 1 kernel records, 2 graph records,
// 3 graph + kernels every n-th, 4 kernels every n-th, 5 both, 6 graph records with kernels every n-th.
// Experiment: cost of CUPTI modes on a replayed graph of small PDL kernels.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <cupti.h>
#include <atomic>
#include <chrono>

static std::atomic<long> n_kernel{0}, n_graph{0}, n_other{0}, n_long{0};
static std::atomic<unsigned long long> dur_sum{0}, dur_max{0}, zero_start{0};
#include <time.h>
static uint64_t CUPTIAPI mono(void) { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec; }
static void CUPTIAPI req(uint8_t **b, size_t *sz, size_t *mr) { *sz = 8 << 20; *b = (uint8_t *)aligned_alloc(8, *sz); *mr = 0; }
static void CUPTIAPI done(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid) {
  CUpti_Activity *r = NULL;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      n_kernel++;
      const CUpti_ActivityKernel9 *k = (const CUpti_ActivityKernel9 *)r;
      if (!k->start) zero_start++;
      unsigned long long d = k->end > k->start ? k->end - k->start : 0;
      dur_sum += d;
      if (d > 1000000) n_long++;
      unsigned long long m = dur_max.load();
      while (d > m && !dur_max.compare_exchange_weak(m, d)) {}
    }
    else if (r->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) n_graph++;
    else n_other++;
  }
  free(b);
}
__global__ void k(float *x, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; for (int j = 0; j < 64; j++) v = v * 0.999f + 0.001f; x[i] = v; }
}
static const char *res(CUptiResult r) { const char *s; cuptiGetResultString(r, &s); return s; }
int main(int argc, char **argv) {
  int mode = atoi(argv[1]), nk = argc > 2 ? atoi(argv[2]) : 150, reps = argc > 3 ? atoi(argv[3]) : 2000, every = argc > 4 ? atoi(argv[4]) : 16;
  float *x; cudaMalloc(&x, 1 << 24); cudaMemset(x, 0, 1 << 24);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (mode) {
    if (getenv("TSCB")) printf("ts callback: %s\n", res(cuptiActivityRegisterTimestampCallback(mono)));
    cuptiActivityRegisterCallbacks(req, done);
    if (mode == 1 || mode == 5) printf("enable kernel: %s\n", res(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)));
    if (mode == 2 || mode == 3 || mode == 5 || mode == 6) printf("enable graph: %s\n", res(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)));
  }
  cudaGraph_t g; cudaGraphExec_t ge;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; i < nk; i++) {
    cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t c = {}; c.gridDim = 16; c.blockDim = 256; c.stream = s; c.attrs = at; c.numAttrs = 1;
    cudaLaunchKernelEx(&c, k, x + (i % 8) * 4096, 4096);
  }
  cudaStreamEndCapture(s, &g);
  cudaGraphInstantiate(&ge, g, 0);
  for (int i = 0; i < 50; i++) cudaGraphLaunch(ge, s);
  cudaStreamSynchronize(s);
  cuptiActivityFlushAll(1);
  n_kernel = n_graph = n_other = 0; n_long = 0; dur_sum = 0; dur_max = 0; zero_start = 0;
  double best = 1e30;
  for (int round = 0; round < 3; round++) {
    auto t0 = std::chrono::steady_clock::now();
    double toggle_us = 0;
    for (int r = 0; r < reps; r++) {
      bool sample = (r % every) == 0;
      if ((mode == 3 || mode == 4) && sample) {
        auto a = std::chrono::steady_clock::now();
        CUptiResult e = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        toggle_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
        if (e != CUPTI_SUCCESS && r == 0) printf("toggle enable: %s\n", res(e));
      }
      if (mode == 6 && sample) { cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE); cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); }
      cudaGraphLaunch(ge, s);
      if (mode == 6 && sample) { cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE); }
      if ((mode == 3 || mode == 4) && sample) {
        auto a = std::chrono::steady_clock::now();
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        toggle_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
      }
      if (argc > 5) cudaStreamSynchronize(s);  // per-step sync like a decode loop
    }
    cudaStreamSynchronize(s);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
    if (us < best) best = us;
    printf("  round %d: %.2f us/replay (toggle %.2f us/replay)\n", round, us, toggle_us / reps);
  }
  cuptiActivityFlushAll(1);
  printf("mode %d nk %d every %d: best %.2f us/replay; records kernel %ld graph %ld other %ld (per replay kernel %.2f)\n", mode, nk, every, best,
         n_kernel.load(), n_graph.load(), n_other.load(), (double)n_kernel.load() / (3.0 * reps));
  printf("   kernel durations: mean %.2f us, max %.2f us, %ld longer than 1 ms, %llu with start 0\n",
         n_kernel ? dur_sum.load() / 1e3 / n_kernel.load() : 0.0, dur_max.load() / 1e3, n_long.load(), zero_start.load());
  return 0;
}
