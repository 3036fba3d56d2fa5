/* GPU observability glue between the executor, the backend's observability
 * members (backend_obs.h) and the trace (trace_gpu.c, trace_gpu_nvml.c).
 *
 * Per eval (one plan run) on a backend with obs members, when FUSEBOX_TRACE
 * or FUSEBOX_GPU_CAPTURE is set:
 *   begin: the eval's number; activity recording on (FUSEBOX_TRACE: from the
 *          first eval on; capture only: for the captured eval) for the first
 *          FUSEBOX_GPU_DETAIL evals (up to the captured one; all with ORT's
 *          profiler on), then off; the eval tag;
 *          cudaProfilerStart for the captured eval;
 *   steps: each traced step that enqueues work (not a dry pass) tags it with
 *          its trace site (a pointer the trace owns; the backend sees an
 *          opaque number: with CUPTI's callback mode a store, no call);
 *   graphs: while a segment is captured, the launches of each step are
 *          counted (activity_counts) into the graph's map of nodes in launch
 *          order; its launches are tagged with the map, so the trace splits a
 *          replay's records over the nodes by capture order (trace_gpu.c);
 *   end:   tags cleared; the captured eval stops the profiler, flushes the
 *          activity buffers (the eval is complete: the run synchronised) and
 *          writes the capture file; the gpu counters are sampled. Records are
 *          handed to the trace on the profiling library's own thread as it
 *          delivers them (activity_sink: full buffers), which stores each
 *          binary (a copy; trace_gpu.c formats them at the trace's flush):
 *          the hot path neither waits for nor formats them. Without a sink,
 *          each eval's end hands over what was delivered (the old way), a
 *          copy per record on the eval's thread.
 * NVTX: a "fusebox.eval" range per eval on every backend (FUSEBOX_NVTX, or
 * tracing/capture on) and, on device backends while tracing, one range per
 * node named by its op type, in NVTX's default domain (as trace_nvtx.c). */
#include "exec_gpuobs.h"

#include <pthread.h>
#include <stdio.h>

#include "../base/alloc.h"
#include "../trace/trace_profiler.h"

static int g_recording;                /* activity recording is on (process-wide: the profiler is) */
static int g_detail;                   /* its records are on (off after FUSEBOX_GPU_DETAIL evals) */
static int g_failed;                   /* enabling failed once: not retried, said once */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static fbx_backend *g_total_be;        /* the backend whose total memory is cached */
static size_t g_total;

typedef struct drain_ctx { int n; } drain_ctx;

/* A tag is (0x8000 | eval number mod 2^15) << 48 | the site's address
 * (user-space addresses fit in 48 bits on x86-64 and arm64; the top bit
 * keeps a tag of no site non-zero), so one correlation id per launch carries
 * both; 0 = none. A graph launch's tag holds its map's address | 1 instead
 * (sites and maps are malloc'd: bit 0 is free). The full eval number is
 * recovered from the newest one begun (records are drained within a few
 * evals of their own, far less than 2^15 evals apart). */
#define TAG_SITE_MASK ((UINT64_C(1) << 48) - 1)
static uint64_t g_last_eval; /* the newest eval begun (atomic) */

static uint64_t tag_make(uint64_t eval, const fbx_trace_op_site *site) {
  return eval ? ((0x8000 | (eval & 0x7FFF)) << 48) | ((uint64_t)(uintptr_t)site & TAG_SITE_MASK) : 0;
}
static uint64_t tag_eval(uint64_t tag) {
  if (!tag) return 0;
  uint64_t last = __atomic_load_n(&g_last_eval, __ATOMIC_RELAXED);
  uint64_t back = ((last & 0x7FFF) - ((tag >> 48) & 0x7FFF)) & 0x7FFF;
  return back < last ? last - back : 0;
}

static bool cap_account(fbx__gpuobs_eval *e, uint64_t k, uint64_t c);
static int g_sink;    /* records reach the trace through the backend's sink (exec_gpuobs.c's on_record) */

static void on_record(void *ctx, const fbx_device_activity *r) {
  if (ctx) ((drain_ctx *)ctx)->n++;
  const uint64_t eval = tag_eval(r->tag);
  if (eval && !fbx_trace_gpu_eval_in_window(eval)) return; /* the lead-out's (FUSEBOX_GPU_DETAIL) */
  uintptr_t v = (uintptr_t)(r->tag & TAG_SITE_MASK);
  fbx_trace_gpu_act a = {.kind = r->kind, .name = r->name, .start_ns = r->start_ns, .end_ns = r->end_ns,
                         .stream = r->stream, .correlation = r->correlation, .eval = eval,
                         .site = (v & 1) ? NULL : (fbx_trace_op_site *)v,
                         .map = (v & 1) ? (const fbx_trace_gpu_map *)(v & ~(uintptr_t)1) : NULL,
                         .registers = r->registers, .shared_bytes = r->shared_bytes, .bytes = r->bytes,
                         .copy_kind = r->copy_kind, .graph = r->graph};
  for (int i = 0; i < 3; i++) {
    a.grid[i] = r->grid[i];
    a.block[i] = r->block[i];
  }
  fbx_trace_gpu_activity(&a);
}

static void drain(fbx_backend *be, bool flush) {
  const fbx_backend_obs *o = be->vt->obs;
  if (!o || !o->activity_drain) return;
  drain_ctx c = {0};
  fbx_status *st = o->activity_drain(be, flush, on_record, &c);
  if (st) {
    fprintf(stderr, "[fusebox] device activity: %s\n", fbx_status_message(st));
    fbx_status_free(st);
  }
  fbx_trace_gpu_drained(flush);
}

/* Device records off once the window of detailed evals (FUSEBOX_GPU_DETAIL)
 * and the eval after it are over: the backend's recording switched off once
 * (CUPTI: kinds and launch callbacks), never back on: a replayed kernel's
 * record gets its end time from that graph node's next recorded run, so the
 * eval after the window is recorded and its records dropped (on_record).
 * Process-wide, as recording is. */
static void detail_off(fbx_backend *be) {
  pthread_mutex_lock(&g_mu);
  if (g_recording && g_detail) {
    fbx_status *st = be->vt->obs->activity_enable(be, false);
    if (st) fbx_status_free(st);
    else g_detail = 0;
  }
  pthread_mutex_unlock(&g_mu);
}

static bool recording_on(fbx_backend *be) {
  const fbx_backend_obs *o = be->vt->obs;
  pthread_mutex_lock(&g_mu);
  if (!g_recording && !g_failed && o->activity_enable) {
    fbx_status *st = o->activity_enable(be, true);
    if (st) {
      g_failed = 1;
      fprintf(stderr, "[fusebox] no device activity in the trace: %s\n", fbx_status_message(st));
      fbx_status_free(st);
    } else {
      g_recording = 1;
      g_detail = 1;
      if (o->activity_sink) { /* records go to the trace on the profiling library's thread */
        o->activity_sink(be, on_record, NULL);
        g_sink = 1;
      }
      fbx_trace_gpu_set_mode(o->activity_mode ? o->activity_mode(be) : NULL);
    }
  }
  bool on = g_recording;
  pthread_mutex_unlock(&g_mu);
  return on;
}

void fbx__gpuobs_begin_slow(fbx_backend *be, fbx__gpuobs_eval *e) {
  int f = fbx_trace_flags();
  if (f & FBX_TRACE_F_NVTX) {
    fbx_trace_nvtx_push("fusebox.eval");
    e->nvtx = true;
  }
  const fbx_backend_obs *o = be->vt->obs;
  if (!o || !(f & (FBX_TRACE_F_JSON | FBX_TRACE_F_GPU_CAPTURE | FBX_TRACE_F_PROFILER))) return;
  bool capture = false;
  uint64_t eval = fbx_trace_gpu_eval_begin(&capture);
  __atomic_store_n(&g_last_eval, eval, __ATOMIC_RELAXED);
  if (!(f & (FBX_TRACE_F_JSON | FBX_TRACE_F_PROFILER)) && !capture) return; /* capture only, and not this eval */
  e->eval = eval;
  e->capture = capture;
  if (f & FBX_TRACE_F_PROFILER) fbx_trace_profiler_eval_parent(eval); /* its records' link to ORT's node event */
  bool rec = recording_on(be);
  /* the window of FUSEBOX_GPU_DETAIL and its lead-out over: recording off */
  if (!fbx_trace_gpu_eval_detailed(eval) && !fbx_trace_gpu_eval_lead_out(eval) && rec) detail_off(be);
  if (capture && o->profiler_range) {
    fbx_status *st = o->profiler_range(be, true);
    if (st) {
      fprintf(stderr, "[fusebox] FUSEBOX_GPU_CAPTURE: %s\n", fbx_status_message(st));
      fbx_status_free(st);
    }
  }
  if (rec && o->activity_tag) {
    e->tagging = true;
    o->activity_tag(be, tag_make(eval, NULL));
  }
}

void fbx__gpuobs_node_slow(fbx_backend *be, fbx__gpuobs_eval *e, fbx_trace_op_site *site) {
  /* NVTX: one range per node on a device backend, named like its op span (nested in fusebox.eval) */
  if (e->nvtx_node) fbx_trace_nvtx_pop();
  e->nvtx_node = site && (fbx_trace_flags() & FBX_TRACE_F_NVTX);
  if (e->nvtx_node) fbx_trace_nvtx_push(fbx_trace_op_site_name(site));
  if (e->capturing) { /* the launches since the last boundary were the previous node's */
    uint64_t k = 0, c = 0;
    if (be->vt->obs->activity_counts(be, &k, &c) && !cap_account(e, k, c)) e->capturing = false;
    e->cap_site = site;
  }
  if (!e->tagging || !be->vt->obs->activity_tag) return;
  be->vt->obs->activity_tag(be, tag_make(e->eval, site));
}

/* Appends n copies of site to *arr (length *len, capacity *cap). false on OOM. */
static bool cap_push(fbx_trace_op_site ***arr, int64_t *len, int64_t *cap, fbx_trace_op_site *site, uint64_t n) {
  if (*len + (int64_t)n > *cap) {
    int64_t nc = *cap ? *cap : 256;
    while (nc < *len + (int64_t)n) nc *= 2;
    fbx_trace_op_site **p = fbx_realloc(*arr, sizeof *p * (size_t)nc);
    if (!p) return false;
    *arr = p;
    *cap = nc;
  }
  for (uint64_t i = 0; i < n; i++) (*arr)[(*len)++] = site;
  return true;
}

/* The counts now are k, c: the launches since the last boundary go to e->cap_site. */
static bool cap_account(fbx__gpuobs_eval *e, uint64_t k, uint64_t c) {
  bool ok = cap_push(&e->ks, &e->nk, &e->capk, e->cap_site, k - e->cap_k) &&
            cap_push(&e->cs, &e->nc, &e->capc, e->cap_site, c - e->cap_c);
  e->cap_k = k;
  e->cap_c = c;
  return ok;
}

static void cap_free(fbx__gpuobs_eval *e) {
  fbx_free(e->ks);
  fbx_free(e->cs);
  e->ks = e->cs = NULL;
  e->nk = e->nc = e->capk = e->capc = 0;
  e->capturing = false;
}

void fbx__gpuobs_capture_begin(fbx_backend *be, fbx__gpuobs_eval *e) {
  cap_free(e);
  const fbx_backend_obs *o = be->vt->obs;
  uint64_t k = 0, c = 0;
  if (!e->tagging || !o->activity_counts || !o->activity_counts(be, &k, &c)) return;
  e->capturing = true;
  e->cap_site = NULL; /* launches before the first step: no node */
  e->cap_k = k;
  e->cap_c = c;
}

fbx_trace_gpu_map *fbx__gpuobs_capture_end(fbx_backend *be, fbx__gpuobs_eval *e) {
  fbx_trace_gpu_map *m = NULL;
  uint64_t k = 0, c = 0;
  if (e->capturing && be->vt->obs->activity_counts(be, &k, &c) && cap_account(e, k, c))
    m = fbx_trace_gpu_map_create(e->ks, e->nk, e->cs, e->nc);
  cap_free(e);
  return m;
}

void fbx__gpuobs_graph(fbx_backend *be, fbx__gpuobs_eval *e, const fbx_trace_gpu_map *map) {
  if (e->nvtx_node) fbx_trace_nvtx_pop();
  e->nvtx_node = false;
  if (!e->tagging || !be->vt->obs->activity_tag) return;
  uint64_t tag = map ? tag_make(e->eval, (const fbx_trace_op_site *)((uintptr_t)map | 1)) : tag_make(e->eval, NULL);
  be->vt->obs->activity_tag(be, tag);
}

void fbx__gpuobs_end_slow(fbx_backend *be, fbx__gpuobs_eval *e) {
  const fbx_backend_obs *o = be->vt->obs;
  if (e->eval && o) {
    if (e->tagging && o->activity_tag) o->activity_tag(be, 0);
    e->tagging = false;
    if (e->capture) {
      if (o->profiler_range) fbx_status_free(o->profiler_range(be, false));
      drain(be, true); /* the run synchronised: every record of this eval is complete */
      if (fbx_trace_gpu_capture_write())
        fprintf(stderr, "[fusebox] FUSEBOX_GPU_CAPTURE: the capture file was not written\n");
      if (!(fbx_trace_flags() & (FBX_TRACE_F_JSON | FBX_TRACE_F_PROFILER)) && o->activity_enable) {
        pthread_mutex_lock(&g_mu);
        if (g_recording) fbx_status_free(o->activity_enable(be, false));
        g_recording = 0;
        pthread_mutex_unlock(&g_mu);
      }
    } else if (!g_sink) {
      drain(be, false);
    }
    if (fbx_trace_flags() & FBX_TRACE_F_JSON) {
      pthread_mutex_lock(&g_mu);
      if (g_total_be != be) { /* the device's size: asked once per backend */
        size_t fr = 0, tot = 0;
        if (be->vt->mem_info) fbx_status_free(be->vt->mem_info(be, &fr, &tot));
        g_total_be = be;
        g_total = tot;
      }
      size_t total = g_total;
      pthread_mutex_unlock(&g_mu);
      size_t used = be->vt->memory_in_use ? be->vt->memory_in_use(be) : 0;
      fbx_trace_sample_gpu(o->bus_id ? o->bus_id(be) : NULL, used, total);
    }
  }
  e->eval = 0;
  cap_free(e); /* an error mid-capture */
  if (e->nvtx_node) fbx_trace_nvtx_pop(); /* the last node's range (an error mid-run skips the clearing tag) */
  e->nvtx_node = false;
  if (e->nvtx) fbx_trace_nvtx_pop();
  e->nvtx = false;
}

void fbx_exec_gpuobs_finish(fbx_backend *be) {
  if (!be || !be->vt->obs ||
      !(fbx_trace_flags() & (FBX_TRACE_F_JSON | FBX_TRACE_F_GPU_CAPTURE | FBX_TRACE_F_PROFILER)))
    return;
  pthread_mutex_lock(&g_mu);
  bool rec = g_recording;
  if (g_total_be == be) g_total_be = NULL;
  pthread_mutex_unlock(&g_mu);
  if (rec) drain(be, true);
  else fbx_trace_gpu_drained(true);
}
