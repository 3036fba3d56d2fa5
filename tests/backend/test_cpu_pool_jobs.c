/* The CPU pool under back-to-back jobs: every item of every job runs exactly
 * once, with that job's arguments, and fbx_cpu_pool_for returns only after all
 * of them ran.
 *
 * Each job lives in a stack frame that the next job reuses (as the kernels'
 * job structs do), its item count changes from job to job (2..40 items, grain
 * 1: 2..8+ chunks) and items take different times, so a worker that finishes
 * the last chunk of one job while the caller publishes the next one is
 * common. The regression: a worker that had read the previous job's ticket
 * (every chunk claimed) compared its chunk index with the NEW job's chunk
 * count, claimed a chunk that did not exist under the old generation, ran
 * the new job's function on it and counted it done, so the caller returned
 * early while items were still running on its stack frame (a crash in the
 * prepacked GEMM, seen about once in 20 decoder runs). Pools of 2, 3 and 5
 * threads on however many cores the machine has (more threads than cores
 * make descheduled workers likely). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "common/check.h"

#define MAX_ITEMS 40

typedef struct job {
  uint64_t id;
  int64_t n;
  _Atomic int runs[MAX_ITEMS];
  _Atomic int64_t wrong_job; /* items run with another job's arguments or out of range */
} job;

static _Atomic uint64_t current_id;

static void task(void *arg, int64_t b, int64_t e, int worker) {
  (void)worker;
  job *j = arg;
  for (int64_t i = b; i < e; i++) {
    if (j->id != atomic_load(&current_id) || i < 0 || i >= j->n) {
      atomic_fetch_add(&j->wrong_job, 1);
      continue;
    }
    /* uneven item times: 0..~2 us; none for the first (packing-like) job of a pair */
    volatile unsigned spin = 0;
    for (unsigned k = 0; (j->id & 1) == 0 && k < (unsigned)((j->id * 7 + (uint64_t)i * 13) % 600); k++) spin += k;
    atomic_fetch_add(&j->runs[i], 1);
  }
}

/* Two jobs back to back in one frame, as the prepacked GEMM runs its packing
 * and its product (the caller publishes the second while workers may still
 * be leaving the first); false when an item ran twice, not at all, with the
 * wrong arguments, or after its call returned. */
static __attribute__((noinline)) bool two_jobs(fbx_cpu_pool *p, uint64_t id, int64_t n1, int64_t n2) {
  job j1, j2;
  memset(&j1, 0, sizeof j1);
  memset(&j2, 0, sizeof j2);
  j1.id = id;
  j1.n = n1;
  j2.id = id + 1;
  j2.n = n2;
  atomic_store(&current_id, j1.id);
  fbx_cpu_pool_for(p, n1, 1, task, &j1, "pool_jobs");
  atomic_store(&current_id, j2.id);
  fbx_cpu_pool_for(p, n2, 1, task, &j2, "pool_jobs");
  bool ok = atomic_load(&j1.wrong_job) == 0 && atomic_load(&j2.wrong_job) == 0;
  int snapshot[MAX_ITEMS];
  for (int64_t i = 0; i < n1; i++) ok = ok && atomic_load(&j1.runs[i]) == 1;
  for (int64_t i = 0; i < n2; i++) ok = ok && (snapshot[i] = atomic_load(&j2.runs[i])) == 1;
  /* anything still running on this frame after the return would change it */
  for (volatile int k = 0; k < 200; k++) {
  }
  for (int64_t i = 0; i < n2 && ok; i++) ok = atomic_load(&j2.runs[i]) == snapshot[i];
  return ok;
}

int main(void) {
  const int threads[] = {2, 3, 5};
  for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
    fbx_cpu_pool *p = NULL;
    fbx_status *st = fbx_cpu_pool_create(threads[t], &p);
    CHECK(st == NULL && p != NULL, "pool of %d threads: %s", threads[t], st ? fbx_status_message(st) : "NULL");
    if (st) fbx_status_free(st);
    if (!p) continue;
    const int jobs = 200000;
    int bad = 0, first_bad = -1;
    for (int k = 0; k < jobs; k++) {
      int64_t n1 = 2 + ((int64_t)k * 7919) % 7, n2 = 2 + ((int64_t)k * 104729) % (MAX_ITEMS - 1);
      if (!two_jobs(p, (uint64_t)t * 1000000u + 2u * (uint64_t)k + 1, n1, n2)) {
        if (first_bad < 0) first_bad = k;
        bad++;
      }
    }
    CHECK(bad == 0, "%d threads: %d of %d job pairs ran an item twice, not at all, with another job's arguments "
          "or after the call returned (first: job %d)", threads[t], bad, jobs, first_bad);
    fbx_cpu_pool_destroy(p);
  }
  printf("cpu pool jobs: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
