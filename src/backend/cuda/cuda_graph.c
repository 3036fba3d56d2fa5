/* CUDA graphs: the backend table's graph members (backend.h, "graphs")
 * through stream capture of the backend's one stream.
 *
 * graph_begin puts the stream in capture mode (relaxed: a buffer_alloc in
 * the capture may still cudaMalloc); the capturing thread's run_node and
 * copies are recorded, and other threads' calls wait for graph_end
 * (fbx_cuda_lock), so nothing else lands in the graph. Kernel parameter
 * tables and host-computed outputs (an ew program, SHAPE's dims) are
 * uploaded from host memory that is gone after the node: during a capture
 * they are staged in pinned buffers the graph owns, which every launch
 * reads. A kernel that needs its shape data on the host (fbx_cuda_read_small:
 * Slice starts, Pad pads, Resize scales) cannot be captured: it fails, and
 * graph_end returns the error so the executor runs that plan live. The
 * graph is instantiated once and launched as is: the executor captures only
 * work it proved identical (pointers and shapes) to the captured one. */
#include <string.h>

#include "../../base/alloc.h"
#include "cuda_internal.h"

struct fbx_backend_graph {
  cudaGraphExec_t exec;
  void **pinned;               /* staged uploads (cudaMallocHost), read by every launch */
  int n_pinned, cap_pinned;
};

static fbx_cuda_ctx *fbx__g_ctx(fbx_backend *be) { return be->ctx; }

void fbx_cuda_lock(fbx_cuda_ctx *c) {
  pthread_mutex_lock(&c->lock);
  while (c->capture && !pthread_equal(c->capturer, pthread_self())) pthread_cond_wait(&c->capture_done, &c->lock);
}

bool fbx_cuda_capturing(const fbx_cuda_ctx *c) { return c->capture != NULL; }

fbx_status *fbx_cuda_upload_h2d(fbx_cuda_ctx *c, void *dst, const void *src, size_t bytes, const char *what) {
  if (!bytes) return NULL;
  fbx_backend_graph *g = c->capture;
  if (g) { /* the source dies with the node: a pinned copy the graph keeps */
    if (g->n_pinned == g->cap_pinned) {
      int nc = g->cap_pinned ? g->cap_pinned * 2 : 16;
      void **np = fbx_realloc(g->pinned, sizeof *np * (size_t)nc);
      if (!np) return FBX_ERR_OOM();
      g->pinned = np;
      g->cap_pinned = nc;
    }
    void *h = NULL;
    FBX_TRY(fbx_cuda_check(cudaMallocHost(&h, bytes), what));
    g->pinned[g->n_pinned++] = h;
    memcpy(h, src, bytes);
    src = h;
  }
  return fbx_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream), what);
}

static void fbx__cuda_graph_free(fbx_backend_graph *g) {
  if (!g) return;
  if (g->exec) cudaGraphExecDestroy(g->exec);
  for (int i = 0; i < g->n_pinned; i++) cudaFreeHost(g->pinned[i]);
  fbx_free(g->pinned);
  fbx_free(g);
}

fbx_status *fbx_cuda_graph_begin(fbx_backend *be) {
  fbx_cuda_ctx *c = fbx__g_ctx(be);
  fbx_cuda_lock(c);
  fbx_status *st = NULL;
  if (c->capture) st = FBX_ERR("device 'cuda': graph_begin: a capture is already in progress on this thread");
  if (!st && !(c->capture = fbx_calloc(1, sizeof *c->capture))) st = FBX_ERR_OOM();
  if (!st) {
    cudaSetDevice(c->device);
    c->capturer = pthread_self();
    st = fbx_cuda_check(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
    if (st) {
      fbx_free(c->capture);
      c->capture = NULL;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return st;
}

fbx_status *fbx_cuda_graph_end(fbx_backend *be, fbx_backend_graph **out) {
  fbx_cuda_ctx *c = fbx__g_ctx(be);
  *out = NULL;
  fbx_cuda_lock(c);
  fbx_backend_graph *g = c->capture;
  if (!g) {
    pthread_mutex_unlock(&c->lock);
    return FBX_ERR("device 'cuda': graph_end without graph_begin");
  }
  cudaSetDevice(c->device);
  cudaGraph_t graph = NULL;
  fbx_status *st = fbx_cuda_check(cudaStreamEndCapture(c->stream, &graph), "cudaStreamEndCapture");
  c->capture = NULL;
  pthread_cond_broadcast(&c->capture_done);
  if (!st) st = fbx_cuda_check(cudaGraphInstantiate(&g->exec, graph, 0), "cudaGraphInstantiate");
  if (graph) cudaGraphDestroy(graph);
  (void)cudaGetLastError(); /* a failed capture leaves a sticky-free error: clear it for the live run */
  pthread_mutex_unlock(&c->lock);
  if (st) {
    fbx__cuda_graph_free(g);
    return st;
  }
  *out = g;
  return NULL;
}

fbx_status *fbx_cuda_graph_launch(fbx_backend *be, fbx_backend_graph *g) {
  fbx_cuda_ctx *c = fbx__g_ctx(be);
  fbx_cuda_lock(c);
  cudaSetDevice(c->device);
  fbx_status *st = fbx_cuda_check(cudaGraphLaunch(g->exec, c->stream), "cudaGraphLaunch");
  pthread_mutex_unlock(&c->lock);
  return st;
}

void fbx_cuda_graph_destroy(fbx_backend *be, fbx_backend_graph *g) {
  (void)be;
  fbx__cuda_graph_free(g); /* the executor destroys graphs only after a synchronize */
}

uint64_t fbx_cuda_graph_epoch(fbx_backend *be) {
  fbx_cuda_ctx *c = fbx__g_ctx(be);
  fbx_cuda_lock(c);
  uint64_t e = c->graph_epoch;
  pthread_mutex_unlock(&c->lock);
  /* A graph instantiated while CUPTI recorded may carry its per-kernel timing into every later
   * replay (its records of replayed kernels end at that node's next recorded run: RESULTS,
   * session 10), so each switch of recording re-captures the graphs, as a reallocated buffer
   * does. Measured on the H200 (session 11): decode traced after FUSEBOX_GPU_DETAIL's window
   * cost +20-30% with CUPTI attached and recording off, within 5% with this re-capture and
   * CUPTI detached (cuda_cupti.c); the re-capture alone was not told apart from noise. Both
   * counters only grow, so their sum moves when either does. */
  return e + fbx_cuda_activity_generation();
}
