/* Persistent thread pool with a low-latency, self-balancing parallel-for.
 *
 * Dispatch: the caller publishes a job and bumps an atomic generation counter.
 * [0, n) is cut into chunks (at least `grain` items, up to 4 per thread) that
 * every participant - the caller included - claims from one atomic ticket
 * (generation << 32 | next chunk), so a worker that wakes late (or was
 * descheduled on a busy machine) simply finds fewer chunks left, and the
 * caller never waits for a worker that has not started.
 *
 * Idle workers spin on the generation counter for ~2 ms (decode runs many
 * 100-400 us ops back to back, and a condvar wake-up costs more than the op):
 * first with `pause`, then with sched_yield() so a spinning worker gives way to
 * any other runnable thread, then sleep on a condvar. */
#include <immintrin.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "../../trace/trace.h"
#include "cpu_internal.h"

#define FBX_CPU_SPIN_PAUSE_NS 100000ull  /* pure pause spinning */
#define FBX_CPU_SPIN_NS 2000000ull       /* then sched_yield spinning, then sleep */
#define FBX_CPU_CHUNKS_PER_THREAD 4
#define FBX_CPU_WAIT_PAUSE_SPINS 1024u   /* caller's wait: ~10-40 us of pause, then sched_yield */

typedef struct fbx_cpu_worker {
  fbx_cpu_pool *pool;
  pthread_t thread;
  int index;
} fbx_cpu_worker;

struct fbx_cpu_pool {
  int threads;                   /* including the caller */
  fbx_cpu_worker *workers;       /* threads - 1 */
  int n_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic uint64_t gen;          /* bumped per job (low 32 bits used in the ticket) */
  _Atomic uint64_t ticket;       /* (gen << 32) | next chunk to claim */
  _Atomic int sleepers;
  _Atomic int64_t done;          /* chunks finished in the current job */
  _Atomic int quit;
  /* the current job (stable while any of its chunks is unfinished) */
  fbx_cpu_task_fn fn;
  void *arg;
  int64_t n, chunk;
  int64_t n_chunks;
  const char *name;
};

static uint64_t fbx__cpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Claims and runs chunks of job generation `g` until none is left. Traced:
 * one op.worker span for this thread's whole share of the job (first chunk
 * claimed to last chunk done; begin/end: the items of its first and last
 * chunk), so load imbalance shows per thread, at one event per thread. */
static void fbx__cpu_pool_drain(fbx_cpu_pool *p, uint32_t g, int w) {
  bool traced = fbx_trace_enabled();
  uint64_t t0 = 0;
  int64_t first = -1, last_e = 0;
  const char *name = NULL;
  for (;;) {
    uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
    if ((uint32_t)(t >> 32) != g) break;
    int64_t i = (int64_t)(t & 0xffffffffull);
    if (i >= p->n_chunks) break;
    if (!atomic_compare_exchange_weak_explicit(&p->ticket, &t, t + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue;
    /* chunk i of job g is ours: the job fields stay valid until we report it done */
    int64_t b = i * p->chunk, e = b + p->chunk;
    if (e > p->n) e = p->n;
    if (__builtin_expect(traced && first < 0, 0)) {
      t0 = fbx_trace_now_ns();
      first = b;
      name = p->name; /* read while the job is ours: the next job may replace it */
    }
    p->fn(p->arg, b, e, w);
    last_e = e;
    atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
  }
  if (__builtin_expect(traced && first >= 0, 0))
    fbx_trace_slice(name ? name : "op", t0, fbx_trace_now_ns(), w, first, last_e);
}

static void *fbx__cpu_worker_main(void *arg) {
  fbx_cpu_worker *wk = arg;
  fbx_cpu_pool *p = wk->pool;
  uint64_t seen = atomic_load(&p->gen);
  for (;;) {
    uint64_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (g == seen) {
      uint64_t t0 = fbx__cpu_now_ns();
      int spins = 0;
      bool yielding = false;
      while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
        if (yielding) sched_yield();
        else _mm_pause();
        if (++spins == 64) {
          spins = 0;
          uint64_t dt = fbx__cpu_now_ns() - t0;
          if (dt > FBX_CPU_SPIN_NS) break;
          yielding = dt > FBX_CPU_SPIN_PAUSE_NS;
        }
      }
      if (g == seen) {
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add(&p->sleepers, 1);
        while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->quit))
          pthread_cond_wait(&p->cv, &p->mu);
        atomic_fetch_sub(&p->sleepers, 1);
        pthread_mutex_unlock(&p->mu);
      }
    }
    if (atomic_load(&p->quit)) return NULL;
    seen = g;
    fbx__cpu_pool_drain(p, (uint32_t)g, wk->index);
  }
}

fbx_status *fbx_cpu_pool_create(int threads, fbx_cpu_pool **out) {
  *out = NULL;
  if (threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    threads = n > 0 ? (int)n : 1;
  }
  if (threads > 256) threads = 256;
  fbx_cpu_pool *p = fbx_calloc(1, sizeof(*p));
  if (!p) return FBX_ERR_OOM();
  p->threads = threads;
  if (pthread_mutex_init(&p->mu, NULL) != 0) {
    fbx_free(p);
    return FBX_ERR("cpu backend: pthread_mutex_init failed");
  }
  if (pthread_cond_init(&p->cv, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    fbx_free(p);
    return FBX_ERR("cpu backend: pthread_cond_init failed");
  }
  if (threads > 1) {
    p->workers = fbx_calloc((size_t)threads - 1, sizeof(*p->workers));
    if (!p->workers) {
      fbx_cpu_pool_destroy(p);
      return FBX_ERR_OOM();
    }
    for (int i = 0; i < threads - 1; i++) {
      p->workers[i].pool = p;
      p->workers[i].index = i + 1;
      if (pthread_create(&p->workers[i].thread, NULL, fbx__cpu_worker_main, &p->workers[i]) != 0) {
        fbx_cpu_pool_destroy(p);
        return FBX_ERR("cpu backend: pthread_create failed for worker %d", i + 1);
      }
      p->n_started++;
    }
  }
  *out = p;
  return NULL;
}

void fbx_cpu_pool_destroy(fbx_cpu_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->quit, 1);
  atomic_fetch_add(&p->gen, 1);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_started; i++) pthread_join(p->workers[i].thread, NULL);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  fbx_free(p->workers);
  fbx_free(p);
}

int fbx_cpu_pool_threads(const fbx_cpu_pool *p) { return p ? p->threads : 1; }

void fbx_cpu_pool_for(fbx_cpu_pool *p, int64_t n, int64_t grain, fbx_cpu_task_fn fn, void *arg,
                      const char *name) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int nt = p ? p->threads : 1;
  if (nt <= 1 || n <= grain) {
    fn(arg, 0, n, 0);
    return;
  }
  int64_t target = (int64_t)nt * FBX_CPU_CHUNKS_PER_THREAD;
  int64_t chunk = (n + target - 1) / target;
  if (chunk < grain) chunk = grain;
  int64_t n_chunks = (n + chunk - 1) / chunk;
  if (n_chunks > 0x7fffffff) {
    chunk = (n + 0x7ffffffe) / 0x7fffffff;
    n_chunks = (n + chunk - 1) / chunk;
  }
  if (n_chunks <= 1) {
    fn(arg, 0, n, 0);
    return;
  }
  /* Close the previous job's ticket before its fields change. A worker leaving that job may
   * have read its ticket (every chunk claimed) and not yet compared the index with n_chunks:
   * against the NEW job's count it would claim a chunk that does not exist, under the old
   * generation, run the new job's function on it and count it done, so that the caller could
   * return while a chunk still runs on its stack frame (test_cpu_pool_jobs). A closed ticket
   * (index 0xffffffff, above any n_chunks) fails that worker's compare-exchange and then its
   * bounds check. The fence keeps the close ahead of the field stores below. */
  uint64_t g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
  atomic_store_explicit(&p->ticket, ((uint64_t)(uint32_t)(g - 1) << 32) | 0xffffffffull, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  p->chunk = chunk;
  p->n_chunks = n_chunks;
  p->name = name;
  atomic_store_explicit(&p->done, 0, memory_order_relaxed);
  atomic_store_explicit(&p->ticket, (uint64_t)(uint32_t)g << 32, memory_order_release);
  atomic_store(&p->gen, g); /* seq_cst: orders the job before the sleeper check */
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  fbx__cpu_pool_drain(p, (uint32_t)g, 0);
  /* Wait for chunks other workers hold. After a short pause-spin, yield: on
   * a busy machine (2 cores, another process' threads spinning) the worker we
   * wait for may be queued on our own core, and a pure spin would keep it off
   * the CPU for a whole scheduler slice (ms). */
  for (unsigned spins = 0; atomic_load_explicit(&p->done, memory_order_acquire) < n_chunks; spins++) {
    if (spins < FBX_CPU_WAIT_PAUSE_SPINS) _mm_pause();
    else sched_yield();
  }
}
