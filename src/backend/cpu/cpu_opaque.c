/* The opaque test backend: the CPU kernels behind DEVICE buffers that the
 * host cannot dereference, so that every !host_visible path of the engine
 * runs (and fails loudly when wrong) on a machine without a GPU.
 *
 * A DEVICE buffer is a tagged handle: the real host address XOR a tag in the
 * top 16 bits. x86-64 user addresses are below 2^47, so a handle is a
 * non-canonical address and any load or store through it faults; pointer
 * arithmetic inside a buffer still works (the low bits are the address), as
 * with a device pointer. Only this file turns handles back into addresses:
 * in the copies and in run_node/node_prepare before calling the CPU kernels.
 * A host pointer where a handle belongs (or the reverse) is an error naming
 * the node and the argument.
 *
 * Work runs synchronously, but device-to-host async copies are deferred to
 * the next operation that touches the queue (in-order semantics are kept)
 * and their host destination is poisoned until then, so a caller that reads
 * an output before synchronize() reads garbage and a test sees it.
 *
 * Graphs: between graph_begin and graph_end, the capturing thread's
 * run_node, copy_device and copy_from_host_async calls are recorded (node,
 * state, tensors with their handles; host source pointer and size) instead
 * of run, and graph_launch runs the list again: what a CUDA stream capture
 * does, with the same traps (a host source is re-read at launch; a sync
 * call during capture fails the capture), so the executor's capture logic
 * is tested without a GPU. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cpu_internal.h"

#define FBX__OPQ_TAG ((uintptr_t)0xFB0EULL << 48)
#define FBX__OPQ_MASK ((uintptr_t)0xFFFFULL << 48)
#define FBX__OPQ_POISON 0xA5

typedef struct fbx__opq_copy {
  void *dst;        /* host */
  const void *src;  /* real device address */
  size_t bytes;
} fbx__opq_copy;

typedef enum { FBX__OPQ_RUN, FBX__OPQ_H2D, FBX__OPQ_D2D } fbx__opq_op_kind;

/* One recorded operation. */
typedef struct fbx__opq_op {
  fbx__opq_op_kind kind;
  const fbx_ir_node *node;     /* RUN: the plan's node (outlives the graph: the plan owns both) */
  void *state;
  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS]; /* RUN: handles as given */
  int n_in, n_out;
  void *dst;                   /* H2D/D2D: device handle */
  const void *src;             /* H2D: host pointer (re-read at launch); D2D: handle */
  size_t bytes;
} fbx__opq_op;

struct fbx_backend_graph {
  fbx__opq_op *ops;
  int n_ops, cap_ops;
  uint64_t epoch;              /* the backend's epoch at capture: a launch under another one fails */
};

typedef struct fbx__opq_ctx {
  pthread_mutex_t mu;          /* one queue shared by the session's subgraphs: every member runs under it */
  fbx_backend *cpu;            /* owned: the kernels, buffers and memory accounting */
  fbx_opaque_stats st;
  int decline_op;
  fbx__opq_copy *pending;      /* deferred device-to-host copies, in enqueue order */
  int n_pending, cap_pending;
  fbx_backend_graph *capture;  /* the graph being recorded, or NULL */
  pthread_t capturer;          /* the thread whose work is recorded */
  bool capture_failed;         /* a call not allowed during capture was made */
  uint64_t epoch;              /* graph epoch (fbx_opaque_backend_epoch_bump) */
} fbx__opq_ctx;

struct fbx_backend_event {
  int64_t recorded;            /* launches + copies enqueued when recorded */
};

static fbx__opq_ctx *fbx__opq(fbx_backend *be) { return be->ctx; }
static bool fbx__opq_is_handle(const void *p) { return ((uintptr_t)p & FBX__OPQ_MASK) == FBX__OPQ_TAG; }
static void *fbx__opq_handle(void *p) { return (void *)((uintptr_t)p ^ FBX__OPQ_TAG); }
static void *fbx__opq_addr(const void *h) { return (void *)((uintptr_t)h ^ FBX__OPQ_TAG); }

/* Run the deferred copies: before any later work (in-order queue) and at synchronize. */
static void fbx__opq_flush(fbx__opq_ctx *c) {
  for (int i = 0; i < c->n_pending; i++) memcpy(c->pending[i].dst, c->pending[i].src, c->pending[i].bytes);
  c->n_pending = 0;
}

/* Whether the calling thread's work is being recorded. */
static bool fbx__opq_recording(const fbx__opq_ctx *c) {
  return c->capture && pthread_equal(c->capturer, pthread_self());
}

/* A synchronising call on the capturing thread: the capture will fail (as on CUDA). */
static void fbx__opq_sync_point(fbx__opq_ctx *c) {
  if (fbx__opq_recording(c)) c->capture_failed = true;
}

static fbx_status *fbx__opq_record(fbx__opq_ctx *c, const fbx__opq_op *op) {
  fbx_backend_graph *g = c->capture;
  if (g->n_ops == g->cap_ops) {
    int nc = g->cap_ops ? g->cap_ops * 2 : 32;
    fbx__opq_op *np = fbx_realloc(g->ops, sizeof *np * (size_t)nc);
    if (!np) {
      c->capture_failed = true;
      return FBX_ERR_OOM();
    }
    g->ops = np;
    g->cap_ops = nc;
  }
  g->ops[g->n_ops++] = *op;
  return NULL;
}

static fbx_status *fbx__opq_buffer_alloc_u(fbx_backend *be, size_t bytes, void **out) {
  fbx__opq_ctx *c = fbx__opq(be);
  void *p = NULL;
  *out = NULL;
  FBX_TRY(c->cpu->vt->buffer_alloc(c->cpu, bytes, &p));
  c->st.allocs++;
  *out = fbx__opq_handle(p);
  return NULL;
}

static void fbx__opq_buffer_free_u(fbx_backend *be, void *h) {
  fbx__opq_ctx *c = fbx__opq(be);
  if (!h) return;
  if (!FBX_ASSERT(fbx__opq_is_handle(h))) return; /* not ours: leaking beats freeing a foreign pointer */
  fbx__opq_flush(c);
  c->st.frees++;
  c->cpu->vt->buffer_free(c->cpu, fbx__opq_addr(h));
}

static fbx_status *fbx__opq_check(const void *dev, const void *host, const char *what) {
  if (dev && !fbx__opq_is_handle(dev))
    return FBX_ERR("opaque: %s: device side %p is not a buffer of this backend", what, dev);
  if (host && fbx__opq_is_handle(host)) return FBX_ERR("opaque: %s: host side %p is a device handle", what, host);
  return NULL;
}

static fbx_status *fbx__opq_from_host_u(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  fbx__opq_ctx *c = fbx__opq(be);
  if (!bytes) return NULL;
  FBX_TRY(fbx__opq_check(dst, src, "copy_from_host"));
  fbx__opq_sync_point(c);
  fbx__opq_flush(c);
  c->st.h2d++;
  memcpy(fbx__opq_addr(dst), src, bytes);
  return NULL;
}

static fbx_status *fbx__opq_to_host_u(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  fbx__opq_ctx *c = fbx__opq(be);
  if (!bytes) return NULL;
  FBX_TRY(fbx__opq_check(src, dst, "copy_to_host"));
  fbx__opq_sync_point(c);
  fbx__opq_flush(c);
  c->st.d2h++;
  c->st.syncs++; /* a synchronous read-back waits for the queue */
  memcpy(dst, fbx__opq_addr(src), bytes);
  return NULL;
}

static fbx_status *fbx__opq_to_host_async_u(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  fbx__opq_ctx *c = fbx__opq(be);
  if (!bytes) return NULL;
  FBX_TRY(fbx__opq_check(src, dst, "copy_to_host_async"));
  fbx__opq_sync_point(c); /* not recorded: the executor copies outputs after the graph */
  if (c->n_pending == c->cap_pending) {
    int nc = c->cap_pending ? c->cap_pending * 2 : 16;
    fbx__opq_copy *np = fbx_realloc(c->pending, sizeof *np * (size_t)nc);
    if (!np) return FBX_ERR_OOM();
    c->pending = np;
    c->cap_pending = nc;
  }
  c->st.d2h++;
  memset(dst, FBX__OPQ_POISON, bytes); /* unreadable until synchronize */
  c->pending[c->n_pending++] = (fbx__opq_copy){dst, fbx__opq_addr(src), bytes};
  return NULL;
}

static fbx_status *fbx__opq_copy_device_u(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  fbx__opq_ctx *c = fbx__opq(be);
  if (!bytes) return NULL;
  if (!fbx__opq_is_handle(dst) || !fbx__opq_is_handle(src))
    return FBX_ERR("opaque: copy_device: %p -> %p is not device-to-device", src, dst);
  if (fbx__opq_recording(c))
    return fbx__opq_record(c, &(fbx__opq_op){.kind = FBX__OPQ_D2D, .dst = dst, .src = src, .bytes = bytes});
  fbx__opq_flush(c);
  c->st.d2d++;
  memmove(fbx__opq_addr(dst), fbx__opq_addr(src), bytes);
  return NULL;
}

/* Handles -> addresses for n tensors (what names the argument in errors). */
static fbx_status *fbx__opq_unwrap(const fbx_ir_node *node, const char *what, const fbx_tensor *t, int n,
                                   fbx_tensor *out) {
  for (int i = 0; i < n; i++) {
    out[i] = t[i];
    if (!t[i].data) continue;
    if (!fbx__opq_is_handle(t[i].data))
      return FBX_ERR("opaque: %s %d of %s '%s' is host memory %p, not a device buffer", what, i,
                     fbx_ir_op_name(node->op), node->name ? node->name : "", t[i].data);
    out[i].data = fbx__opq_addr(t[i].data);
  }
  return NULL;
}

static fbx_status *fbx__opq_run_node_u(fbx_backend *be, const fbx_ir_node *node, void *state,
                                     const fbx_tensor *inputs, int n_inputs, fbx_tensor *outputs, int n_outputs,
                                     fbx_kernel_info *info) {
  fbx__opq_ctx *c = fbx__opq(be);
  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
  if (n_inputs > FBX_IR_MAX_INPUTS || n_outputs > FBX_IR_MAX_OUTPUTS)
    return FBX_ERR_ARG("opaque: %d inputs / %d outputs", n_inputs, n_outputs);
  FBX_TRY(fbx__opq_unwrap(node, "input", inputs, n_inputs, in));
  FBX_TRY(fbx__opq_unwrap(node, "output", outputs, n_outputs, out));
  if (fbx__opq_recording(c)) {
    if (info) *info = (fbx_kernel_info){.variant = "captured", .reason = "recorded into a graph"};
    fbx__opq_op op = {.kind = FBX__OPQ_RUN, .node = node, .state = state, .n_in = n_inputs, .n_out = n_outputs};
    memcpy(op.in, inputs, sizeof(fbx_tensor) * (size_t)n_inputs);
    memcpy(op.out, outputs, sizeof(fbx_tensor) * (size_t)n_outputs);
    return fbx__opq_record(c, &op);
  }
  fbx__opq_flush(c);
  c->st.launches++;
  return c->cpu->vt->run_node(c->cpu, node, state, in, n_inputs, out, n_outputs, info);
}

static fbx_status *fbx__opq_node_prepare(fbx_backend *be, const fbx_ir_node *node,
                                         const fbx_tensor *const *const_inputs, const fbx_tensor *inputs,
                                         void **state) {
  fbx__opq_ctx *c = fbx__opq(be);
  fbx_tensor in[FBX_IR_MAX_INPUTS];
  *state = NULL;
  if (!c->cpu->vt->node_prepare) return NULL;
  if (node->n_inputs > FBX_IR_MAX_INPUTS) return FBX_ERR_ARG("opaque: %d inputs", node->n_inputs);
  for (int i = 0; i < node->n_inputs; i++)
    if (const_inputs[i]) FBX_TRY(fbx__opq_check(NULL, const_inputs[i]->data, "node_prepare constant"));
  FBX_TRY(fbx__opq_unwrap(node, "prepared input", inputs, node->n_inputs, in));
  return c->cpu->vt->node_prepare(c->cpu, node, const_inputs, in, state);
}

static void fbx__opq_node_release(fbx_backend *be, const fbx_ir_node *node, void *state) {
  fbx__opq_ctx *c = fbx__opq(be);
  if (c->cpu->vt->node_release) c->cpu->vt->node_release(c->cpu, node, state);
}

/* copy_from_host_async: done on return (allowed: the host may reuse src at
 * once), or recorded with its host source during a capture. */
static fbx_status *fbx__opq_from_host_async_u(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  fbx__opq_ctx *c = fbx__opq(be);
  if (!bytes) return NULL;
  FBX_TRY(fbx__opq_check(dst, src, "copy_from_host_async"));
  if (fbx__opq_recording(c))
    return fbx__opq_record(c, &(fbx__opq_op){.kind = FBX__OPQ_H2D, .dst = dst, .src = src, .bytes = bytes});
  fbx__opq_flush(c);
  c->st.h2d++;
  memcpy(fbx__opq_addr(dst), src, bytes);
  return NULL;
}

static fbx_status *fbx__opq_graph_begin_u(fbx_backend *be) {
  fbx__opq_ctx *c = fbx__opq(be);
  if (c->capture) return FBX_ERR("opaque: graph_begin: a capture is already in progress");
  if (!(c->capture = fbx_calloc(1, sizeof *c->capture))) return FBX_ERR_OOM();
  c->capturer = pthread_self();
  c->capture_failed = false;
  return NULL;
}

static void fbx__opq_graph_destroy(fbx_backend *be, fbx_backend_graph *g) {
  (void)be;
  if (!g) return;
  fbx_free(g->ops);
  fbx_free(g);
}

static fbx_status *fbx__opq_graph_end_u(fbx_backend *be, fbx_backend_graph **out) {
  fbx__opq_ctx *c = fbx__opq(be);
  *out = NULL;
  if (!fbx__opq_recording(c)) return FBX_ERR("opaque: graph_end without graph_begin on this thread");
  fbx_backend_graph *g = c->capture;
  c->capture = NULL;
  if (c->capture_failed) {
    fbx__opq_graph_destroy(be, g);
    return FBX_ERR("opaque: capture failed: a synchronising call was made while recording");
  }
  c->st.graph_captures++;
  g->epoch = c->epoch;
  *out = g;
  return NULL;
}

/* Runs the recorded list in order, as the live calls would have. */
static fbx_status *fbx__opq_graph_launch_u(fbx_backend *be, fbx_backend_graph *g) {
  fbx__opq_ctx *c = fbx__opq(be);
  if (fbx__opq_recording(c)) return FBX_ERR("opaque: graph_launch during a capture");
  if (g->epoch != c->epoch) /* on a GPU: kernels reading a freed scratch buffer */
    return FBX_ERR("opaque: graph_launch of a graph captured at epoch %llu, now %llu (its internal buffers were "
                   "reallocated)", (unsigned long long)g->epoch, (unsigned long long)c->epoch);
  fbx__opq_flush(c);
  c->st.graph_launches++;
  for (int i = 0; i < g->n_ops; i++) {
    const fbx__opq_op *op = &g->ops[i];
    c->st.replayed++;
    if (op->kind == FBX__OPQ_H2D) {
      memcpy(fbx__opq_addr(op->dst), op->src, op->bytes);
    } else if (op->kind == FBX__OPQ_D2D) {
      memmove(fbx__opq_addr(op->dst), fbx__opq_addr(op->src), op->bytes);
    } else {
      fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
      FBX_TRY(fbx__opq_unwrap(op->node, "input", op->in, op->n_in, in));
      FBX_TRY(fbx__opq_unwrap(op->node, "output", op->out, op->n_out, out));
      FBX_TRY(c->cpu->vt->run_node(c->cpu, op->node, op->state, in, op->n_in, out, op->n_out, NULL));
    }
  }
  return NULL;
}

static fbx_status *fbx__opq_synchronize_u(fbx_backend *be) {
  fbx__opq_ctx *c = fbx__opq(be);
  fbx__opq_sync_point(c);
  fbx__opq_flush(c);
  c->st.syncs++;
  return NULL;
}

static size_t fbx__opq_memory_in_use(fbx_backend *be) {
  fbx__opq_ctx *c = fbx__opq(be);
  return c->cpu->vt->memory_in_use(c->cpu);
}

static bool fbx__opq_supports_epilogue(fbx_backend *be, const fbx_ir_node *node) {
  fbx__opq_ctx *c = fbx__opq(be);
  return c->cpu->vt->supports_epilogue && c->cpu->vt->supports_epilogue(c->cpu, node);
}

static fbx_status *fbx__opq_mem_info(fbx_backend *be, size_t *free_bytes, size_t *total_bytes) {
  fbx__opq_ctx *c = fbx__opq(be);
  return c->cpu->vt->mem_info(c->cpu, free_bytes, total_bytes);
}

static fbx_status *fbx__opq_event_create(fbx_backend *be, fbx_backend_event **out) {
  *out = fbx_calloc(1, sizeof **out);
  return *out ? NULL : FBX_ERR_OOM();
}

static void fbx__opq_event_destroy(fbx_backend *be, fbx_backend_event *ev) { fbx_free(ev); }

static fbx_status *fbx__opq_event_record_u(fbx_backend *be, fbx_backend_event *ev) {
  fbx__opq_ctx *c = fbx__opq(be);
  ev->recorded = c->st.launches + c->st.h2d + c->st.d2h + c->st.d2d;
  return NULL;
}

/* ---- the table's entries: each runs its _u body under the queue's lock ---- */
#define FBX__OPQ_LOCKED(be, call)                   \
  do {                                              \
    fbx__opq_ctx *c_ = fbx__opq(be);                \
    pthread_mutex_lock(&c_->mu);                    \
    fbx_status *st_ = (call);                       \
    pthread_mutex_unlock(&c_->mu);                  \
    return st_;                                     \
  } while (0)

static fbx_status *fbx__opq_buffer_alloc(fbx_backend *be, size_t bytes, void **out) {
  FBX__OPQ_LOCKED(be, fbx__opq_buffer_alloc_u(be, bytes, out));
}
static void fbx__opq_buffer_free(fbx_backend *be, void *h) {
  fbx__opq_ctx *c = fbx__opq(be);
  pthread_mutex_lock(&c->mu);
  fbx__opq_buffer_free_u(be, h);
  pthread_mutex_unlock(&c->mu);
}
static fbx_status *fbx__opq_from_host(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  FBX__OPQ_LOCKED(be, fbx__opq_from_host_u(be, dst, src, bytes));
}
static fbx_status *fbx__opq_to_host(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  FBX__OPQ_LOCKED(be, fbx__opq_to_host_u(be, dst, src, bytes));
}
static fbx_status *fbx__opq_to_host_async(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  FBX__OPQ_LOCKED(be, fbx__opq_to_host_async_u(be, dst, src, bytes));
}
static fbx_status *fbx__opq_copy_device(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  FBX__OPQ_LOCKED(be, fbx__opq_copy_device_u(be, dst, src, bytes));
}
static fbx_status *fbx__opq_run_node(fbx_backend *be, const fbx_ir_node *node, void *state,
                                     const fbx_tensor *inputs, int n_inputs, fbx_tensor *outputs, int n_outputs,
                                     fbx_kernel_info *info) {
  FBX__OPQ_LOCKED(be, fbx__opq_run_node_u(be, node, state, inputs, n_inputs, outputs, n_outputs, info));
}
static fbx_status *fbx__opq_synchronize(fbx_backend *be) { FBX__OPQ_LOCKED(be, fbx__opq_synchronize_u(be)); }
static fbx_status *fbx__opq_event_record(fbx_backend *be, fbx_backend_event *ev) {
  FBX__OPQ_LOCKED(be, fbx__opq_event_record_u(be, ev));
}

static fbx_status *fbx__opq_from_host_async(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  FBX__OPQ_LOCKED(be, fbx__opq_from_host_async_u(be, dst, src, bytes));
}
static fbx_status *fbx__opq_graph_begin(fbx_backend *be) { FBX__OPQ_LOCKED(be, fbx__opq_graph_begin_u(be)); }
static fbx_status *fbx__opq_graph_end(fbx_backend *be, fbx_backend_graph **out) {
  FBX__OPQ_LOCKED(be, fbx__opq_graph_end_u(be, out));
}
static fbx_status *fbx__opq_graph_launch(fbx_backend *be, fbx_backend_graph *g) {
  FBX__OPQ_LOCKED(be, fbx__opq_graph_launch_u(be, g));
}

static fbx_status *fbx__opq_event_wait(fbx_backend *be, fbx_backend_event *ev) {
  (void)be, (void)ev; /* one in-order queue: later work already follows the event */
  return NULL;
}

static fbx_status *fbx__opq_event_synchronize(fbx_backend *be, fbx_backend_event *ev) {
  (void)ev;
  return fbx__opq_synchronize(be); /* coarser than needed, never wrong */
}

/* ---- streams: a handle ORT passes around; work stays synchronous on the one queue ----
 * A stream is a tagged object, so set_stream can refuse a handle that is not one
 * (proof, on the simulated GPU, that Compute got the handle our OrtSyncStreamImpl
 * gave ORT). Switching streams and synchronising one run the deferred
 * device-to-host copies, as the in-order queue they stand for would. */
#define FBX__OPQ_STREAM_MAGIC 0x5354524Du /* "STRM" */
struct fbx_backend_stream {
  uint32_t magic;
  int64_t id;
};

static fbx_status *fbx__opq_stream_create(fbx_backend *be, fbx_backend_stream **out) {
  fbx__opq_ctx *c = fbx__opq(be);
  *out = fbx_calloc(1, sizeof **out);
  if (!*out) return FBX_ERR_OOM();
  pthread_mutex_lock(&c->mu);
  (*out)->magic = FBX__OPQ_STREAM_MAGIC;
  (*out)->id = ++c->st.streams;
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

static void fbx__opq_stream_destroy(fbx_backend *be, fbx_backend_stream *s) {
  if (!s) return;
  fbx__opq_ctx *c = fbx__opq(be);
  pthread_mutex_lock(&c->mu);
  fbx__opq_flush(c); /* waits for the stream's work first */
  pthread_mutex_unlock(&c->mu);
  s->magic = 0; /* a dangling handle bound later is refused */
  fbx_free(s);
}

static void *fbx__opq_stream_handle(fbx_backend *be, fbx_backend_stream *s) {
  (void)be;
  return s;
}

static fbx_status *fbx__opq_stream_check(const void *h, const char *what) {
  if (!h || ((const fbx_backend_stream *)h)->magic != FBX__OPQ_STREAM_MAGIC)
    return FBX_ERR_ARG("opaque: %s: %p is not a stream of an opaque backend", what, h);
  return NULL;
}

static fbx_status *fbx__opq_set_stream_u(fbx_backend *be, void *native) {
  fbx__opq_ctx *c = fbx__opq(be);
  if (native) FBX_TRY(fbx__opq_stream_check(native, "set_stream"));
  fbx__opq_flush(c); /* the new queue follows the old one */
  if (native) c->st.stream_binds++;
  return NULL;
}

static fbx_status *fbx__opq_stream_record_u(fbx_backend *be, fbx_backend_stream *s, fbx_backend_event *ev) {
  FBX_TRY(fbx__opq_stream_check(s, "stream_record"));
  return ev ? fbx__opq_event_record_u(be, ev) : NULL;
}

static fbx_status *fbx__opq_stream_wait(fbx_backend *be, fbx_backend_stream *s, fbx_backend_event *ev) {
  (void)be, (void)ev; /* synchronous work: what the event marks is done */
  return fbx__opq_stream_check(s, "stream_wait");
}

static fbx_status *fbx__opq_stream_synchronize_u(fbx_backend *be, fbx_backend_stream *s) {
  FBX_TRY(fbx__opq_stream_check(s, "stream_synchronize"));
  fbx__opq_ctx *c = fbx__opq(be);
  c->st.stream_syncs++;
  return fbx__opq_synchronize_u(be);
}

static fbx_status *fbx__opq_set_stream(fbx_backend *be, void *native) {
  FBX__OPQ_LOCKED(be, fbx__opq_set_stream_u(be, native));
}
static fbx_status *fbx__opq_stream_record(fbx_backend *be, fbx_backend_stream *s, fbx_backend_event *ev) {
  FBX__OPQ_LOCKED(be, fbx__opq_stream_record_u(be, s, ev));
}
static fbx_status *fbx__opq_stream_synchronize(fbx_backend *be, fbx_backend_stream *s) {
  FBX__OPQ_LOCKED(be, fbx__opq_stream_synchronize_u(be, s));
}

static bool fbx__opq_supports(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs,
                              const fbx_tensor *outputs, int n_outputs, char *reason, size_t cap) {
  fbx__opq_ctx *c = fbx__opq(be);
  if ((int)node->op != c->decline_op) return true;
  snprintf(reason, cap, "%s has no kernel here (declined on request: FUSEBOX_TEST_BACKEND)", fbx_ir_op_name(node->op));
  return false;
}

static void fbx__opq_destroy(fbx_backend *be) {
  if (!be) return;
  fbx__opq_ctx *c = fbx__opq(be);
  if (c) {
    fbx__opq_graph_destroy(be, c->capture);
    fbx_backend_destroy(c->cpu);
    pthread_mutex_destroy(&c->mu);
    fbx_free(c->pending);
    fbx_free(c);
  }
  fbx_free(be);
}

static uint64_t fbx__opq_graph_epoch(fbx_backend *be) {
  fbx__opq_ctx *c = fbx__opq(be);
  pthread_mutex_lock(&c->mu);
  uint64_t e = c->epoch;
  pthread_mutex_unlock(&c->mu);
  return e;
}

static const fbx_backend_vtable fbx__opq_vtable = {
    .name = "opaque",
    .host_visible = false,
    .buffer_alloc = fbx__opq_buffer_alloc,
    .buffer_free = fbx__opq_buffer_free,
    .copy_from_host = fbx__opq_from_host,
    .copy_to_host = fbx__opq_to_host,
    .copy_device = fbx__opq_copy_device,
    .node_prepare = fbx__opq_node_prepare,
    .node_release = fbx__opq_node_release,
    .run_node = fbx__opq_run_node,
    .synchronize = fbx__opq_synchronize,
    .memory_in_use = fbx__opq_memory_in_use,
    .destroy = fbx__opq_destroy,
    .supports_epilogue = fbx__opq_supports_epilogue,
    .buft = {[FBX_BUFT_DEVICE] = {64, false}, [FBX_BUFT_HOST_PINNED] = {64, true}, [FBX_BUFT_HOST] = {64, true}},
    .mem_info = fbx__opq_mem_info,
    .copy_from_host_async = fbx__opq_from_host_async,
    .copy_to_host_async = fbx__opq_to_host_async,
    .event_create = fbx__opq_event_create,
    .event_destroy = fbx__opq_event_destroy,
    .event_record = fbx__opq_event_record,
    .event_wait = fbx__opq_event_wait,
    .event_synchronize = fbx__opq_event_synchronize,
    .set_stream = fbx__opq_set_stream,
    .stream_create = fbx__opq_stream_create,
    .stream_destroy = fbx__opq_stream_destroy,
    .stream_handle = fbx__opq_stream_handle,
    .stream_record = fbx__opq_stream_record,
    .stream_wait = fbx__opq_stream_wait,
    .stream_synchronize = fbx__opq_stream_synchronize,
    .supports = fbx__opq_supports,
    .graph_begin = fbx__opq_graph_begin,
    .graph_end = fbx__opq_graph_end,
    .graph_launch = fbx__opq_graph_launch,
    .graph_destroy = fbx__opq_graph_destroy,
    .graph_epoch = fbx__opq_graph_epoch,
};

fbx_status *fbx_opaque_backend_create(const fbx_opaque_options *opt, fbx_backend **out) {
  *out = NULL;
  fbx_backend *be = fbx_calloc(1, sizeof(*be));
  fbx__opq_ctx *c = fbx_calloc(1, sizeof(*c));
  if (!be || !c) {
    fbx_free(be);
    fbx_free(c);
    return FBX_ERR_OOM();
  }
  pthread_mutex_init(&c->mu, NULL);
  be->vt = &fbx__opq_vtable;
  be->ctx = c;
  c->decline_op = opt ? opt->decline_op : -1;
  fbx_cpu_options co = {.threads = opt ? opt->threads : 0};
  fbx_status *st = fbx_cpu_backend_create(&co, &c->cpu);
  if (st) {
    fbx__opq_destroy(be);
    return st;
  }
  *out = be;
  return NULL;
}

bool fbx_opaque_backend_stats(const fbx_backend *be, fbx_opaque_stats *out) {
  if (!be || be->vt != &fbx__opq_vtable) return false;
  fbx__opq_ctx *c = be->ctx;
  pthread_mutex_lock(&c->mu);
  *out = c->st;
  pthread_mutex_unlock(&c->mu);
  return true;
}

bool fbx_opaque_backend_epoch_bump(fbx_backend *be) {
  if (!be || be->vt != &fbx__opq_vtable) return false;
  fbx__opq_ctx *c = be->ctx;
  pthread_mutex_lock(&c->mu);
  c->epoch++;
  pthread_mutex_unlock(&c->mu);
  return true;
}
