/* The CPU backend: host buffers, memcpy copies, and a kernel table generated
 * from the IR op X-macro. Elementwise ops share the program interpreter;
 * every other op has its own kernel fbx_cpu_k_<OP>. */
#include <string.h>
#include <unistd.h>

#include "../../base/checked.h"
#include "cpu_internal.h"

/* Class token -> kernel: pasting the class macro *name* (not its value). */
#define FBX__CPU_PICK_FBX_IR_CLASS_EW1(name) fbx_cpu_ew_run
#define FBX__CPU_PICK_FBX_IR_CLASS_EW2(name) fbx_cpu_ew_run
#define FBX__CPU_PICK_FBX_IR_CLASS_EW3(name) fbx_cpu_ew_run
#define FBX__CPU_PICK_FBX_IR_CLASS_OTHER(name) fbx_cpu_k_##name

static const fbx_cpu_kernel_fn fbx__cpu_kernels[] = {
#define X(name, cls, mask) [FBX_IR_OP_##name] = FBX__CPU_PICK_##cls(name),
    FBX_IR_OP_LIST(X)
#undef X
};
_Static_assert(sizeof(fbx__cpu_kernels) / sizeof(fbx__cpu_kernels[0]) == FBX_IR_OP_COUNT,
               "CPU kernel table must cover every IR op");

/* IF is run by the executor (exec_run.c picks a branch and runs it as a graph
 * of its own); a backend is never asked to run one. */
fbx_status *fbx_cpu_k_IF(FBX_CPU_KERNEL_ARGS) {
  (void)c, (void)state, (void)in, (void)n_in, (void)out, (void)n_out, (void)info;
  return FBX_ERR("cpu backend: IF '%s' reached a kernel (the executor runs its branches)", node->name ? node->name : "");
}

/* LOOP and SCAN likewise: the executor runs their bodies (exec_control.c). */
fbx_status *fbx_cpu_k_LOOP(FBX_CPU_KERNEL_ARGS) {
  (void)c, (void)state, (void)in, (void)n_in, (void)out, (void)n_out, (void)info;
  return FBX_ERR("cpu backend: LOOP '%s' reached a kernel (the executor runs its body)", node->name ? node->name : "");
}

fbx_status *fbx_cpu_k_SCAN(FBX_CPU_KERNEL_ARGS) {
  (void)c, (void)state, (void)in, (void)n_in, (void)out, (void)n_out, (void)info;
  return FBX_ERR("cpu backend: SCAN '%s' reached a kernel (the executor runs its body)", node->name ? node->name : "");
}

static void *fbx__cpu_grow(void **buf, size_t *size, size_t bytes) {
  if (bytes <= *size) return *buf;
  size_t sz = *size ? *size : 64 * 1024;
  while (sz < bytes) sz *= 2;
  void *p = fbx_malloc_aligned(sz);
  if (!p) return NULL;
  fbx_free_aligned(*buf);
  *buf = p;
  *size = sz;
  return p;
}

void *fbx_cpu_scratch(fbx_cpu_ctx *c, size_t bytes) { return fbx__cpu_grow(&c->scratch, &c->scratch_size, bytes); }

void *fbx_cpu_gemm_ws(fbx_cpu_ctx *c, size_t bytes) { return fbx__cpu_grow(&c->gemm_ws, &c->gemm_ws_size, bytes); }

void *fbx_cpu_stage(fbx_cpu_ctx *c, size_t bytes) { return fbx__cpu_grow(&c->stage, &c->stage_size, bytes); }

static fbx_cpu_ctx *fbx__cpu(fbx_backend *be) { return be->ctx; }

/* Buffers carry a 64-byte header holding their size (memory_in_use). */
static fbx_status *fbx__cpu_buffer_alloc(fbx_backend *be, size_t bytes, void **out) {
  if ((uint64_t)bytes > FBX_TENSOR_MAX_BYTES)
    return FBX_ERR_ARG("cpu: a buffer of %zu bytes exceeds the %llu-byte tensor limit", bytes,
                       (unsigned long long)FBX_TENSOR_MAX_BYTES);
  unsigned char *p = fbx_malloc_aligned(bytes + 64);
  if (!p) return FBX_ERR_OOM();
  memcpy(p, &bytes, sizeof(bytes));
  atomic_fetch_add(&fbx__cpu(be)->mem_in_use, bytes);
  *out = p + 64;
  return NULL;
}

static void fbx__cpu_buffer_free(fbx_backend *be, void *q) {
  if (!q) return;
  unsigned char *p = (unsigned char *)q - 64;
  size_t bytes;
  memcpy(&bytes, p, sizeof(bytes));
  atomic_fetch_sub(&fbx__cpu(be)->mem_in_use, bytes);
  fbx_free_aligned(p);
}

static fbx_status *fbx__cpu_copy(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  (void)be;
  if (bytes && dst != src) memmove(dst, src, bytes);
  return NULL;
}

static fbx_status *fbx__cpu_node_prepare(fbx_backend *be, const fbx_ir_node *node,
                                         const fbx_tensor *const *const_inputs,
                                         const fbx_tensor *inputs, void **state) {
  *state = NULL;
  if (node->op == FBX_IR_OP_MATMUL)
    return fbx_cpu_matmul_prepare(fbx__cpu(be), node, const_inputs, inputs, state);
  if (node->op == FBX_IR_OP_MATMUL_NBITS) return fbx_cpu_mnb_prepare(fbx__cpu(be), node, const_inputs, inputs, state);
  if (node->op == FBX_IR_OP_LSTM || node->op == FBX_IR_OP_GRU || node->op == FBX_IR_OP_RNN)
    return fbx_cpu_rnn_prepare(fbx__cpu(be), node, const_inputs, inputs, state);
  if (node->op == FBX_IR_OP_CONV) return fbx_cpu_conv_prepare(fbx__cpu(be), node, const_inputs, inputs, state);
  if (node->op == FBX_IR_OP_MATMUL_INT) return fbx_cpu_qmatmul_prepare(fbx__cpu(be), node, const_inputs, inputs, state);
  return NULL;
}

static void fbx__cpu_node_release(fbx_backend *be, const fbx_ir_node *node, void *state) {
  (void)be;
  if (!state) return;
  if (node->op == FBX_IR_OP_MATMUL) fbx_cpu_matmul_release(state);
  if (node->op == FBX_IR_OP_MATMUL_NBITS) fbx_cpu_mnb_release(state);
  if (node->op == FBX_IR_OP_LSTM || node->op == FBX_IR_OP_GRU || node->op == FBX_IR_OP_RNN) fbx_cpu_rnn_release(state);
  if (node->op == FBX_IR_OP_CONV) fbx_cpu_conv_release(state);
  if (node->op == FBX_IR_OP_MATMUL_INT) fbx_cpu_qmatmul_release(state);
}

static fbx_status *fbx__cpu_run_node(fbx_backend *be, const fbx_ir_node *node, void *state,
                                     const fbx_tensor *inputs, int n_inputs, fbx_tensor *outputs,
                                     int n_outputs, fbx_kernel_info *info) {
  fbx_cpu_ctx *c = fbx__cpu(be);
  if ((unsigned)node->op >= FBX_IR_OP_COUNT) return FBX_ERR_ARG("cpu backend: bad op %d", (int)node->op);
  fbx_kernel_info dummy;
  if (!info) info = &dummy;
  info->variant = "cpu";
  info->reason = "";
  info->flops = 0;
  pthread_mutex_lock(&c->run_lock);
  c->op_name = fbx_ir_op_name(node->op);
  fbx_status *st = fbx__cpu_kernels[node->op](c, node, state, inputs, n_inputs, outputs, n_outputs, info);
  pthread_mutex_unlock(&c->run_lock);
  return st;
}

static fbx_status *fbx__cpu_synchronize(fbx_backend *be) {
  (void)be;
  return NULL;
}

/* Device memory is host RAM: what the machine has available. */
static fbx_status *fbx__cpu_mem_info(fbx_backend *be, size_t *free_bytes, size_t *total_bytes) {
  (void)be;
  long page = sysconf(_SC_PAGESIZE), avail = sysconf(_SC_AVPHYS_PAGES), total = sysconf(_SC_PHYS_PAGES);
  *free_bytes = page > 0 && avail > 0 ? (size_t)avail * (size_t)page : 0;
  *total_bytes = page > 0 && total > 0 ? (size_t)total * (size_t)page : 0;
  return NULL;
}

/* Work is complete when run_node returns: an event is a token that has
 * always passed (one static object; nothing to allocate or free). */
static char fbx__cpu_event_token;
static fbx_status *fbx__cpu_event_create(fbx_backend *be, fbx_backend_event **out) {
  (void)be;
  *out = (fbx_backend_event *)&fbx__cpu_event_token;
  return NULL;
}
static void fbx__cpu_event_destroy(fbx_backend *be, fbx_backend_event *ev) { (void)be, (void)ev; }
static fbx_status *fbx__cpu_event_noop(fbx_backend *be, fbx_backend_event *ev) {
  (void)be, (void)ev;
  return NULL;
}

static size_t fbx__cpu_memory_in_use(fbx_backend *be) { return atomic_load(&fbx__cpu(be)->mem_in_use); }

static void fbx__cpu_destroy(fbx_backend *be) {
  if (!be) return;
  fbx_cpu_ctx *c = fbx__cpu(be);
  if (c) {
    fbx_cpu_pool_destroy(c->pool);
    pthread_mutex_destroy(&c->run_lock);
    fbx_free_aligned(c->scratch);
    fbx_free_aligned(c->gemm_ws);
    fbx_free_aligned(c->stage);
    fbx_free(c);
  }
  fbx_free(be);
}

/* The one place that says which kernels apply their epilogue (cpu_conv.c, cpu_qconv.c, cpu_qmatmul.c). */
static bool fbx__cpu_supports_epilogue(fbx_backend *be, const fbx_ir_node *node) {
  (void)be;
  return node->op == FBX_IR_OP_CONV || node->op == FBX_IR_OP_CONV_TRANSPOSE || node->op == FBX_IR_OP_CONV_INT ||
         node->op == FBX_IR_OP_MATMUL_INT;
}

static const fbx_backend_vtable fbx__cpu_vtable = {
    .name = "cpu",
    .host_visible = true,
    .buffer_alloc = fbx__cpu_buffer_alloc,
    .buffer_free = fbx__cpu_buffer_free,
    .copy_from_host = fbx__cpu_copy,
    .copy_to_host = fbx__cpu_copy,
    .copy_device = fbx__cpu_copy,
    .node_prepare = fbx__cpu_node_prepare,
    .node_release = fbx__cpu_node_release,
    .run_node = fbx__cpu_run_node,
    .synchronize = fbx__cpu_synchronize,
    .memory_in_use = fbx__cpu_memory_in_use,
    .destroy = fbx__cpu_destroy,
    .supports_epilogue = fbx__cpu_supports_epilogue,
    /* host RAM everywhere: buffer_alloc aligns to 64 bytes (fbx_malloc_aligned + a 64-byte header) */
    .buft = {[FBX_BUFT_DEVICE] = {64, true}, [FBX_BUFT_HOST_PINNED] = {64, true}, [FBX_BUFT_HOST] = {64, true}},
    .mem_info = fbx__cpu_mem_info,
    .copy_from_host_async = fbx__cpu_copy, /* synchronous: done on return, which async allows */
    .copy_to_host_async = fbx__cpu_copy,
    .event_create = fbx__cpu_event_create,
    .event_destroy = fbx__cpu_event_destroy,
    .event_record = fbx__cpu_event_noop,
    .event_wait = fbx__cpu_event_noop,
    .event_synchronize = fbx__cpu_event_noop,
};

fbx_status *fbx_cpu_backend_create(const fbx_cpu_options *opt, fbx_backend **out) {
  *out = NULL;
  fbx_backend *be = fbx_calloc(1, sizeof(*be));
  fbx_cpu_ctx *c = fbx_calloc(1, sizeof(*c));
  if (!be || !c) {
    fbx_free(be);
    fbx_free(c);
    return FBX_ERR_OOM();
  }
  if (pthread_mutex_init(&c->run_lock, NULL) != 0) {
    fbx_free(be);
    fbx_free(c);
    return FBX_ERR("cpu backend: pthread_mutex_init failed");
  }
  be->vt = &fbx__cpu_vtable;
  be->ctx = c;
  fbx_status *st = fbx_cpu_pool_create(opt ? opt->threads : 0, &c->pool);
  if (st) {
    fbx__cpu_destroy(be);
    return st;
  }
  c->threads = fbx_cpu_pool_threads(c->pool);
  *out = be;
  return NULL;
}
