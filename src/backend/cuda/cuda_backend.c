/* The CUDA backend's vtable and lifetime: device memory, copies on the
 * backend's stream, run_node through the op table (cuda_ops.c), and the
 * library's one exported entry point (cuda_abi.h). This is the only file
 * that fills fbx_backend_vtable, so a growing table (streams, events, buffer
 * types, supports) is adapted here. */
#include <stdlib.h>
#include <dlfcn.h>
#include <string.h>

#include "../../base/alloc.h"
#include "cuda_abi.h"
#include "cuda_internal.h"

#define FBX__CUDA_WS_BYTES (32u << 20)  /* cuBLASLt workspace */

static fbx_cuda_ctx *fbx__ctx(fbx_backend *be) { return be->ctx; }

/* ---- allocation table: pointer -> bytes, open addressing (memory_in_use) ---- */
static size_t fbx__slot_hash(const void *p, size_t n) { return (size_t)(((uintptr_t)p >> 8) * 0x9E3779B97F4A7C15ull) & (n - 1); }

static fbx_status *fbx__slots_put(fbx_cuda_ctx *c, void *p, size_t bytes) {
  if ((c->n_used + 1) * 2 > c->n_slots) {
    size_t n = c->n_slots ? c->n_slots * 2 : 256;
    fbx_cuda_alloc_slot *s = fbx_calloc(n, sizeof *s);
    if (!s) return FBX_ERR_OOM();
    for (size_t i = 0; i < c->n_slots; i++)
      if (c->slots[i].p) {
        size_t h = fbx__slot_hash(c->slots[i].p, n);
        while (s[h].p) h = (h + 1) & (n - 1);
        s[h] = c->slots[i];
      }
    fbx_free(c->slots);
    c->slots = s;
    c->n_slots = n;
  }
  size_t h = fbx__slot_hash(p, c->n_slots);
  while (c->slots[h].p) h = (h + 1) & (c->n_slots - 1);
  c->slots[h] = (fbx_cuda_alloc_slot){p, bytes};
  c->n_used++;
  c->mem_in_use += bytes;
  return NULL;
}

/* Returns the block's size, 0 when p is not ours. */
static size_t fbx__slots_del(fbx_cuda_ctx *c, void *p) {
  if (!c->n_slots) return 0;
  size_t h = fbx__slot_hash(p, c->n_slots);
  while (c->slots[h].p && c->slots[h].p != p) h = (h + 1) & (c->n_slots - 1);
  if (!c->slots[h].p) return 0;
  size_t bytes = c->slots[h].bytes;
  c->mem_in_use -= bytes;
  c->n_used--;
  /* backward-shift deletion keeps probe chains intact */
  size_t i = h;
  for (;;) {
    c->slots[i].p = NULL;
    size_t j = i;
    for (;;) {
      j = (j + 1) & (c->n_slots - 1);
      if (!c->slots[j].p) return bytes;
      size_t k = fbx__slot_hash(c->slots[j].p, c->n_slots);
      if ((i <= j) ? (i < k && k <= j) : (i < k || k <= j)) continue;
      c->slots[i] = c->slots[j];
      i = j;
      break;
    }
  }
}

/* Blocks are rounded to 256 bytes and kept on a free list when released, so
 * steady-state runs (and the eager path, which allocates per value per run)
 * reuse device memory instead of calling cudaMalloc/cudaFree, which
 * synchronise the device. Reuse is safe without events: every kernel and copy
 * runs on the one stream, so a block's next user is ordered after its last. */
#define FBX__CUDA_CACHE_MAX_BYTES ((size_t)2 << 30)

static void fbx__cuda_cache_release_all(fbx_cuda_ctx *c) {
  for (size_t i = 0; i < c->n_cached; i++) cudaFree(c->cached[i].p);
  c->n_cached = 0;
  c->cached_bytes = 0;
}

static fbx_status *fbx__cuda_buffer_alloc(fbx_backend *be, size_t bytes, void **out) {
  fbx_cuda_ctx *c = fbx__ctx(be);
  *out = NULL;
  size_t need = bytes ? (bytes + 255) & ~(size_t)255 : 256;
  pthread_mutex_lock(&c->lock);
  cudaSetDevice(c->device);
  void *p = NULL;
  size_t got = need, best = (size_t)-1;
  for (size_t i = 0; i < c->n_cached; i++) /* best fit, at most twice the size */
    if (c->cached[i].bytes >= need && c->cached[i].bytes <= 2 * need &&
        (best == (size_t)-1 || c->cached[i].bytes < c->cached[best].bytes)) best = i;
  fbx_status *st = NULL;
  if (best != (size_t)-1) {
    p = c->cached[best].p;
    got = c->cached[best].bytes;
    c->cached_bytes -= got;
    c->cached[best] = c->cached[--c->n_cached];
  } else {
    cudaError_t e = cudaMalloc(&p, need);
    if (e == cudaErrorMemoryAllocation && c->n_cached) { /* give the cache back, then try again */
      cudaGetLastError();
      cudaStreamSynchronize(c->stream);
      fbx__cuda_cache_release_all(c);
      e = cudaMalloc(&p, need);
    }
    st = fbx_cuda_check(e, "cudaMalloc");
  }
  if (!st && (st = fbx__slots_put(c, p, got))) cudaFree(p);
  pthread_mutex_unlock(&c->lock);
  if (!st) *out = p;
  return st;
}

static void fbx__cuda_buffer_free(fbx_backend *be, void *p) {
  if (!p) return;
  fbx_cuda_ctx *c = fbx__ctx(be);
  pthread_mutex_lock(&c->lock);
  cudaSetDevice(c->device);
  size_t bytes = fbx__slots_del(c, p);
  bool keep = bytes && c->cached_bytes + bytes <= FBX__CUDA_CACHE_MAX_BYTES;
  if (keep && c->n_cached == c->cap_cached) {
    size_t cap = c->cap_cached ? c->cap_cached * 2 : 64;
    fbx_cuda_alloc_slot *q = fbx_realloc(c->cached, cap * sizeof *q);
    if (q) {
      c->cached = q;
      c->cap_cached = cap;
    } else {
      keep = false;
    }
  }
  if (keep) {
    c->cached[c->n_cached++] = (fbx_cuda_alloc_slot){p, bytes};
    c->cached_bytes += bytes;
  } else {
    cudaFree(p); /* waits for work that may still read it */
  }
  pthread_mutex_unlock(&c->lock);
}

/* ---- copies: enqueued on the stream; to_host waits (the caller reads at once) ---- */
static fbx_status *fbx__cuda_copy(fbx_backend *be, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                                  bool wait, const char *what) {
  if (!bytes || dst == src) return NULL;
  fbx_cuda_ctx *c = fbx__ctx(be);
  fbx_cuda_lock(c); /* waits out another thread's capture */
  cudaSetDevice(c->device);
  fbx_status *st = fbx_cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, c->stream), what);
  if (!st && wait) st = fbx_cuda_check(cudaStreamSynchronize(c->stream), what);
  pthread_mutex_unlock(&c->lock);
  return st;
}

static fbx_status *fbx__cuda_copy_from_host(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  /* pageable source: the call returns once src is staged, so the caller may reuse it */
  return fbx__cuda_copy(be, dst, src, bytes, cudaMemcpyHostToDevice, false, "copy host to device");
}
static fbx_status *fbx__cuda_copy_to_host(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  return fbx__cuda_copy(be, dst, src, bytes, cudaMemcpyDeviceToHost, true, "copy device to host");
}
static fbx_status *fbx__cuda_copy_device(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  return fbx__cuda_copy(be, dst, src, bytes, cudaMemcpyDeviceToDevice, false, "copy device to device");
}

/* Host staging buffers: pinned (cudaMallocHost) so copies from them are DMA,
 * asynchronous and capturable; FBX_BUFT_HOST is plain aligned memory. */
static fbx_status *fbx__cuda_host_alloc(fbx_backend *be, fbx_buft type, size_t bytes, void **out) {
  *out = NULL;
  if (type != FBX_BUFT_HOST_PINNED) {
    *out = fbx_malloc_aligned(bytes ? bytes : 64);
    return *out ? NULL : FBX_ERR_OOM();
  }
  fbx_cuda_ctx *c = fbx__ctx(be);
  cudaSetDevice(c->device);
  return fbx_cuda_check(cudaMallocHost(out, bytes ? bytes : 64), "cudaMallocHost");
}

static void fbx__cuda_host_free(fbx_backend *be, fbx_buft type, void *p) {
  (void)be;
  if (!p) return;
  if (type == FBX_BUFT_HOST_PINNED) cudaFreeHost(p); /* the executor frees after a synchronize */
  else fbx_free_aligned(p);
}

/* Enqueued in stream order; from pinned memory it returns at once (the caller keeps src
 * unchanged until a synchronize), from pageable memory once src is staged. */
static fbx_status *fbx__cuda_copy_from_host_async(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  return fbx__cuda_copy(be, dst, src, bytes, cudaMemcpyHostToDevice, false, "copy host to device");
}

/* Enqueued; into pageable memory CUDA returns once the data has arrived, into pinned memory at once
 * (the caller reads after a synchronize or an event). */
static fbx_status *fbx__cuda_copy_to_host_async(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  return fbx__cuda_copy(be, dst, src, bytes, cudaMemcpyDeviceToHost, false, "copy device to host");
}

static fbx_status *fbx__cuda_run_node(fbx_backend *be, const fbx_ir_node *node, void *state, const fbx_tensor *inputs,
                                      int n_inputs, fbx_tensor *outputs, int n_outputs, fbx_kernel_info *info) {
  fbx_cuda_ctx *c = fbx__ctx(be);
  fbx_kernel_info dummy;
  if (!info) info = &dummy;
  info->variant = "cuda";
  info->reason = "";
  info->flops = 0;
  if ((unsigned)node->op >= FBX_IR_OP_COUNT) return FBX_ERR_ARG("device 'cuda': bad op %d", (int)node->op);
  char why[256];
  if (!fbx_cuda_supports(be, node, inputs, n_inputs, why, sizeof why)) return FBX_ERR_NOTIMPL("%s", why);
  fbx_cuda_lock(c); /* waits out another thread's capture */
  cudaSetDevice(c->device);
  fbx_cuda_node_bind(c, node, state); /* node_prepare's state: constant shape data, or an op's own */
  fbx_status *st = fbx_cuda_op(node->op)->run(c, node, inputs, n_inputs, outputs, n_outputs, info);
  fbx_cuda_node_bind(c, NULL, NULL);
  pthread_mutex_unlock(&c->lock);
  return st;
}

fbx_status *fbx_cuda_err_code_status(int code, const char *when) {
  const char *what = code == FBX_CUDA_ERR_GQA
                         ? "GQA: seqlens_k / total_sequence_length do not fit the sequence, the past or present cache, "
                           "or the cos/sin cache"
                     : code == FBX_CUDA_ERR_ROPE ? "ROTARY: position outside the cos/sin cache"
                                                 : "GATHER: index out of range";
  return FBX_ERR_ARG("device 'cuda': %s%s", what, when ? when : "");
}

static fbx_status *fbx__cuda_synchronize(fbx_backend *be) {
  fbx_cuda_ctx *c = fbx__ctx(be);
  fbx_cuda_lock(c); /* waits out another thread's capture */
  cudaSetDevice(c->device);
  fbx_status *st = fbx_cuda_check(cudaMemcpyAsync(c->err_host, c->err_flag, sizeof(int), cudaMemcpyDeviceToHost, c->stream),
                                  "read error flag");
  if (!st) st = fbx_cuda_check(cudaStreamSynchronize(c->stream), "synchronize");
  if (!st && *c->err_host) {
    int code = *c->err_host;
    *c->err_host = 0;
    cudaMemsetAsync(c->err_flag, 0, sizeof(int), c->stream);
    if (c->err_async) *c->err_async = 0; /* cuda_stream.c's copy of the same flag: reported here */
    st = fbx_cuda_err_code_status(code, NULL);
  }
  pthread_mutex_unlock(&c->lock);
  return st;
}

static size_t fbx__cuda_memory_in_use(fbx_backend *be) {
  fbx_cuda_ctx *c = fbx__ctx(be);
  pthread_mutex_lock(&c->lock);
  size_t n = c->mem_in_use;
  pthread_mutex_unlock(&c->lock);
  return n;
}

static void fbx__cuda_destroy(fbx_backend *be) {
  if (!be) return;
  fbx_cuda_ctx *c = fbx__ctx(be);
  if (c) {
    cudaSetDevice(c->device);
    if (c->stream) cudaStreamSynchronize(c->stream);
    fbx_cuda_stream_fini(c);
    for (size_t i = 0; i < c->n_slots; i++)
      if (c->slots[i].p) cudaFree(c->slots[i].p);  /* buffers the engine did not free */
    fbx_free(c->slots);
    fbx__cuda_cache_release_all(c);
    fbx_free(c->cached);
    fbx_cuda_gemm_plans_destroy(c);
    fbx_cuda_ew_rtc_destroy(c);
    if (c->lt) cublasLtDestroy(c->lt);
    cudaFree(c->lt_ws);
    cudaFree(c->params);
    cudaFree(c->scratch);
    cudaFree(c->counters);
    cudaFree(c->err_flag);
    if (c->err_host) cudaFreeHost(c->err_host);
    if (c->err_async) cudaFreeHost(c->err_async);
    if (c->stream) cudaStreamDestroy(c->stream);
    pthread_cond_destroy(&c->capture_done);
    pthread_mutex_destroy(&c->lock);
    fbx_free(c);
  }
  fbx_free(be);
}

/* The table's supports(): the op table's answer, without its "device 'cuda': "
 * head (fbx_backend_supports prefixes the device name itself). Claim time:
 * dims may be dynamic and data is NULL. */
static bool fbx__cuda_vt_supports(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs,
                                  const fbx_tensor *outputs, int n_outputs, char *reason, size_t cap) {
  (void)outputs;
  (void)n_outputs;
  char why[256] = "";
  if (fbx_cuda_supports(be, node, inputs, n_inputs, why, sizeof why)) return true;
  const char *head = "device 'cuda': ";
  const char *r = strncmp(why, head, strlen(head)) == 0 ? why + strlen(head) : why;
  if (reason && cap) snprintf(reason, cap, "%s", r);
  return false;
}

static const fbx_backend_vtable fbx__cuda_vtable = {
    .name = "cuda",
    .host_visible = false,
    .buffer_alloc = fbx__cuda_buffer_alloc,
    .buffer_free = fbx__cuda_buffer_free,
    .copy_from_host = fbx__cuda_copy_from_host,
    .copy_to_host = fbx__cuda_copy_to_host,
    .copy_device = fbx__cuda_copy_device,
    .node_prepare = fbx_cuda_node_prepare,
    .node_release = fbx_cuda_node_release,
    .run_node = fbx__cuda_run_node,
    .synchronize = fbx__cuda_synchronize,
    .memory_in_use = fbx__cuda_memory_in_use,
    .destroy = fbx__cuda_destroy,
    .supports_epilogue = NULL,
    .supports = fbx__cuda_vt_supports,
    .host_alloc = fbx__cuda_host_alloc,
    .host_free = fbx__cuda_host_free,
    .copy_from_host_async = fbx__cuda_copy_from_host_async,
    .copy_to_host_async = fbx__cuda_copy_to_host_async,
    .event_create = fbx_cuda_event_create, /* cuda_stream.c: events, streams for ORT, set_stream */
    .event_destroy = fbx_cuda_event_destroy,
    .event_record = fbx_cuda_event_record,
    .event_wait = fbx_cuda_event_wait,
    .event_synchronize = fbx_cuda_event_synchronize,
    .set_stream = fbx_cuda_set_stream,
    .stream_create = fbx_cuda_stream_create,
    .stream_destroy = fbx_cuda_stream_destroy,
    .stream_handle = fbx_cuda_stream_handle,
    .stream_record = fbx_cuda_stream_record,
    .stream_wait = fbx_cuda_stream_wait,
    .stream_synchronize = fbx_cuda_stream_synchronize,
    .graph_begin = fbx_cuda_graph_begin,
    .graph_end = fbx_cuda_graph_end,
    .graph_launch = fbx_cuda_graph_launch,
    .graph_destroy = fbx_cuda_graph_destroy,
    .graph_epoch = fbx_cuda_graph_epoch,
    .mem_info = fbx_cuda_mem_info,
    .obs = &fbx_cuda_obs, /* cuda_cupti.c */
};

static fbx_status *fbx__cuda_open(const fbx_cuda_options *opt, fbx_backend **out) {
  *out = NULL;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    /* cudart says "driver version is insufficient" also when there is no driver at all */
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (drv) dlclose(drv);
    return FBX_ERR_NOTIMPL("Fusebox: device 'cuda': no NVIDIA GPU found (cudaGetDeviceCount: %s%s)", cudaGetErrorString(e),
                           drv ? "" : "; no NVIDIA driver: libcuda.so.1 not found");
  }
  if (count < 1) return FBX_ERR_NOTIMPL("Fusebox: device 'cuda': no NVIDIA GPU found (cudaGetDeviceCount: 0 devices)");
  if (opt->device_id >= count)
    return FBX_ERR_ARG("Fusebox: device 'cuda': device_id %d out of range (%d device%s)", opt->device_id, count,
                       count == 1 ? "" : "s");
  fbx_backend *be = fbx_calloc(1, sizeof *be);
  fbx_cuda_ctx *c = fbx_calloc(1, sizeof *c);
  if (!be || !c) {
    fbx_free(be);
    fbx_free(c);
    return FBX_ERR_OOM();
  }
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->capture_done, NULL);
  be->vt = &fbx__cuda_vtable;
  be->ctx = c;
  c->device = opt->device_id;
  c->tf32 = opt->tf32;
  c->lt_ws_size = FBX__CUDA_WS_BYTES;
  const char *ks = getenv("FUSEBOX_CUDA_MNB_KSPLIT"); /* A/B of the split-K decode GEMV (cuda_mnb.cu) */
  c->mnb_ksplit = !(ks && ks[0] == '0');
  fbx_cuda_pdl_init();
  fbx_status *st = fbx_cuda_check(cudaSetDevice(c->device), "cudaSetDevice");
  struct cudaDeviceProp prop;
  if (!st) st = fbx_cuda_check(cudaGetDeviceProperties(&prop, c->device), "cudaGetDeviceProperties");
  if (!st) snprintf(c->device_name, sizeof c->device_name, "%s", prop.name);
  if (!st) c->arch = prop.major * 10 + prop.minor;
  if (!st) st = fbx_cuda_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  if (!st && cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS) st = FBX_ERR("device 'cuda': cublasLtCreate failed");
  if (!st) st = fbx_cuda_check(cudaMalloc(&c->lt_ws, c->lt_ws_size), "cuBLASLt workspace");
  if (!st) st = fbx_cuda_check(cudaMalloc((void **)&c->err_flag, sizeof(int)), "error flag");
  if (!st) st = fbx_cuda_check(cudaMemset(c->err_flag, 0, sizeof(int)), "error flag");
  if (!st) st = fbx_cuda_check(cudaMalloc((void **)&c->counters, sizeof(int) * FBX_CUDA_COUNTERS), "counters");
  if (!st) st = fbx_cuda_check(cudaMemset(c->counters, 0, sizeof(int) * FBX_CUDA_COUNTERS), "counters");
  if (!st) st = fbx_cuda_check(cudaMallocHost((void **)&c->err_host, sizeof(int)), "pinned error flag");
  if (st) {
    fbx__cuda_destroy(be);
    return st;
  }
  *c->err_host = 0;
  *out = be;
  return NULL;
}

static int fbx__cuda_device_count(void) {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0 ? count : 0;
}

static bool fbx__cuda_supports_entry(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs,
                                     char *reason, size_t reason_size) {
  return fbx_cuda_supports(be, node, inputs, n_inputs, reason, reason_size);
}

__attribute__((visibility("default"))) fbx_status *fbx_cuda_entry_get(const fbx_cuda_abi_check *check,
                                                                     fbx_cuda_entry *out);

fbx_status *fbx_cuda_entry_get(const fbx_cuda_abi_check *check, fbx_cuda_entry *out) {
  const fbx_cuda_abi_check mine = FBX_CUDA_ABI_CHECK_INIT;
  if (!check || memcmp(check, &mine, sizeof mine) != 0)
    return FBX_ERR("Fusebox: device 'cuda': libfusebox_cuda.so was built from a different Fusebox tree "
                   "(ABI %d, %d ops, node %zu / tensor %zu / vtable %zu bytes; the loader expects ABI %d, %d ops, "
                   "%zu / %zu / %zu)", mine.version, mine.op_count, mine.sz_node, mine.sz_tensor, mine.sz_vtable,
                   check ? check->version : -1, check ? check->op_count : -1, check ? check->sz_node : 0,
                   check ? check->sz_tensor : 0, check ? check->sz_vtable : 0);
  out->open = fbx__cuda_open;
  out->supports = fbx__cuda_supports_entry;
  out->device_count = fbx__cuda_device_count;
  return NULL;
}
