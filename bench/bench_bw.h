/* The machine's read bandwidth, measured on the CPU backend's own pool: chunks of
 * 1 MiB of a huge-page buffer (larger than any cache) summed with 4 independent
 * ymm chains. The bound a batch-1 decode GEMV can reach (bench_gemv, bench_mnb). */
#ifndef FBX_BENCH_BW_H
#define FBX_BENCH_BW_H

#include <immintrin.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_internal.h"

static double bench_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU seconds of the calling thread (bench_gemv at 1 thread: time off the core left out). */
static inline double bench_cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define BENCH_READ_CHUNK (1 << 18) /* floats */
typedef struct { const float *buf; float sums[64]; } bench_read_job;
static void bench_read_task(void *arg, int64_t b, int64_t e, int worker) {
  bench_read_job *j = arg;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (const float *p = j->buf + b * BENCH_READ_CHUNK, *end = j->buf + e * BENCH_READ_CHUNK; p < end; p += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(p));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(p + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(p + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(p + 24));
  }
  float t[8];
  _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  j->sums[worker & 63] += t[0] + t[7];
}

/* Seconds of one read pass over buf (bytes: a multiple of 1 MiB, pages touched). */
static inline double bench_read_pass(fbx_backend *be, const float *buf, size_t bytes) {
  bench_read_job j = {.buf = buf};
  fbx_cpu_ctx *c = be->ctx;
  double t0 = bench_now_s();
  fbx_cpu_pool_for(c->pool, (int64_t)(bytes / (BENCH_READ_CHUNK * 4)), 8, bench_read_task, &j, "read");
  return bench_now_s() - t0;
}

/* Best GB/s over reps passes of bytes (multiple of 1 MiB) with the pool of be; 0 on OOM. */
static double bench_read_bandwidth(fbx_backend *be, size_t bytes, int reps) {
  float *buf = fbx_malloc_huge(bytes);
  if (!buf) return 0;
  memset(buf, 0, bytes); /* touch every page */
  bench_read_job j = {.buf = buf};
  double best = 1e30;
  fbx_cpu_ctx *c = be->ctx;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now_s();
    fbx_cpu_pool_for(c->pool, (int64_t)(bytes / (BENCH_READ_CHUNK * 4)), 8, bench_read_task, &j, "read");
    double t = bench_now_s() - t0;
    if (t < best) best = t;
  }
  fbx_free_aligned(buf);
  return (double)bytes / best / 1e9;
}

#endif
