/* The backend table's stream members (backend.h, "streams", set_stream) on
 * the opaque test backend (every machine) and on CUDA (skipped, saying why,
 * without a GPU): what the EP's OrtSyncStreamImpl and Compute on ORT's stream
 * are made of. Per backend, with a second instance of it as "another
 * backend of the same device" (the EP's sessions and the GPU's own one):
 *
 *  - a bound stream carries the work: pinned host -> device -> device ->
 *    pinned host enqueued while bound; the bytes are there after
 *    stream_synchronize (opaque: the device-to-host copy is still
 *    unreadable, poisoned, before it: the copy was asynchronous);
 *  - switching back orders the backend's own queue after the stream: an
 *    upload enqueued on the stream, then a synchronous read on the own queue
 *    right after set_stream(NULL), reads the new bytes (CUDA: 64 MiB, so a
 *    missing wait would show);
 *  - an event recorded on the stream orders the other backend's queue
 *    (event_wait there, then its synchronous read sees the bytes);
 *  - the opaque backend refuses a handle that is not one of its streams and
 *    counts streams, binds and stream waits;
 *  - CUDA: a GATHER index error of a run on a bound stream (which nothing
 *    waits for) is reported by the next bind, once;
 *  - CUDA: pinned host_alloc memory (the EP's HOST_ACCESSIBLE allocator) is
 *    page-locked, as the driver sees it. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/backend_cuda.h"
#include "common/check.h"

static void check_floats(const float *got, const float *want, size_t n, const char *what, const char *dev) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += got[i] != want[i];
  CHECK(!bad, "%s: %s: %zu of %zu values wrong", dev, what, bad, n);
}

static void test_streams(fbx_backend *be, fbx_backend *other, size_t n, bool opaque) {
  const char *dev = be->vt->name;
  size_t bytes = n * sizeof(float);
  CHECK(fbx_backend_has_streams(be), "%s: has the stream members", dev);
  if (!fbx_backend_has_streams(be)) return;
  fbx_backend_stream *s = NULL;
  fbx_backend_event *ev = NULL;
  float *src = NULL, *dst = NULL, *src2 = NULL, *back = NULL;
  void *a = NULL, *b = NULL;
  CHECK_TRY(be->vt->stream_create(be, &s));
  void *h = be->vt->stream_handle(be, s);
  CHECK(h != NULL, "%s: the stream has a native handle", dev);
  fbx_status *st = fbx_backend_host_alloc(be, FBX_BUFT_HOST_PINNED, bytes, (void **)&src);
  if (!st) st = fbx_backend_host_alloc(be, FBX_BUFT_HOST_PINNED, bytes, (void **)&dst);
  if (!st) st = fbx_backend_host_alloc(be, FBX_BUFT_HOST_PINNED, bytes, (void **)&src2);
  if (!st) st = fbx_backend_host_alloc(be, FBX_BUFT_HOST, bytes, (void **)&back);
  if (!st) st = be->vt->buffer_alloc(be, bytes, &a);
  if (!st) st = be->vt->buffer_alloc(be, bytes, &b);
  if (!st) st = fbx_backend_event_create(be, &ev);
  CHECK(!st, "%s: set-up: %s", dev, st ? fbx_status_message(st) : "");
  if (st) goto done;
  for (size_t i = 0; i < n; i++) {
    src[i] = (float)(i % 1000) * 0.25f - 3.f;
    src2[i] = (float)(i % 777) * -0.5f + 1.f;
    dst[i] = 0.f;
  }

  /* the bound stream carries the work */
  st = be->vt->set_stream(be, h);
  if (!st) st = fbx_backend_copy_from_host_async(be, a, src, bytes);
  if (!st) st = be->vt->copy_device(be, b, a, bytes);
  if (!st) st = fbx_backend_copy_to_host_async(be, dst, b, bytes);
  bool poisoned = opaque && dst[0] != src[0];
  if (!st) st = be->vt->stream_synchronize(be, s);
  CHECK(!st, "%s: work on the bound stream: %s", dev, st ? fbx_status_message(st) : "");
  if (opaque) CHECK(poisoned, "%s: the device-to-host copy on the stream was asynchronous (unreadable before the wait)", dev);
  if (!st) check_floats(dst, src, n, "pinned -> device -> device -> pinned on the bound stream", dev);

  /* back to the own queue: it follows the stream */
  if (!st) st = fbx_backend_copy_from_host_async(be, a, src2, bytes); /* still bound: on the stream */
  if (!st) st = be->vt->set_stream(be, NULL);
  if (!st) st = be->vt->copy_to_host(be, back, a, bytes); /* the own queue */
  CHECK(!st, "%s: switch back: %s", dev, st ? fbx_status_message(st) : "");
  if (!st) check_floats(back, src2, n, "own queue after set_stream(NULL) reads what the stream wrote", dev);

  /* an event on the stream orders another backend of the device */
  if (!st) st = be->vt->set_stream(be, h);
  if (!st) st = fbx_backend_copy_from_host_async(be, b, src, bytes);
  if (!st) st = be->vt->set_stream(be, NULL);
  if (!st) st = be->vt->stream_record(be, s, ev);
  if (!st) st = fbx_backend_event_wait(other, ev);
  memset(back, 0, bytes);
  if (!st) st = other->vt->copy_to_host(other, back, b, bytes);
  CHECK(!st, "%s: cross-backend event: %s", dev, st ? fbx_status_message(st) : "");
  if (!st) check_floats(back, src, n, "another backend's queue after event_wait on the stream's event", dev);
  if (!st) st = fbx_backend_event_synchronize(be, ev);
  CHECK(!st, "%s: event_synchronize: %s", dev, st ? fbx_status_message(st) : "");

  if (opaque) {
    int junk = 0;
    fbx_status *e = be->vt->set_stream(be, &junk);
    CHECK(e != NULL, "%s: set_stream refuses a handle that is not a stream", dev);
    fbx_status_free(e);
    fbx_opaque_stats os;
    CHECK(fbx_opaque_backend_stats(be, &os) && os.streams == 1 && os.stream_binds == 2 && os.stream_syncs == 1,
          "%s: counted 1 stream, 2 binds, 1 stream wait (got %lld, %lld, %lld)", dev, (long long)os.streams,
          (long long)os.stream_binds, (long long)os.stream_syncs);
  }
done:
  fbx_status_free(st);
  fbx_backend_event_destroy(be, ev);
  be->vt->buffer_free(be, a);
  be->vt->buffer_free(be, b);
  fbx_backend_host_free(be, FBX_BUFT_HOST_PINNED, src);
  fbx_backend_host_free(be, FBX_BUFT_HOST_PINNED, dst);
  fbx_backend_host_free(be, FBX_BUFT_HOST_PINNED, src2);
  fbx_backend_host_free(be, FBX_BUFT_HOST, back);
  if (s) be->vt->stream_destroy(be, s);
}

/* CUDA: a device-side error (a GATHER index out of range) of a run on a bound stream is not lost
 * although nothing waits: the next bind reports it, and the flag is cleared after. */
static void test_late_error(fbx_backend *be) {
  float data[3 * 5 * 2] = {0};
  int64_t idx[2] = {1, 7}; /* 7 >= 5: out of range on axis 1 */
  void *d = NULL, *ix = NULL, *y = NULL;
  fbx_backend_stream *s = NULL;
  fbx_status *st = be->vt->buffer_alloc(be, sizeof data, &d);
  if (!st) st = be->vt->buffer_alloc(be, sizeof idx, &ix);
  if (!st) st = be->vt->buffer_alloc(be, 3 * 2 * 2 * sizeof(float), &y);
  if (!st) st = be->vt->copy_from_host(be, d, data, sizeof data);
  if (!st) st = be->vt->copy_from_host(be, ix, idx, sizeof idx);
  if (!st) st = be->vt->stream_create(be, &s);
  CHECK(!st, "cuda: late error set-up: %s", st ? fbx_status_message(st) : "");
  if (!st) {
    void *h = be->vt->stream_handle(be, s);
    fbx_tensor in[2] = {{.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {3, 5, 2}, .data = d},
                        {.dtype = FBX_DTYPE_I64, .rank = 1, .dims = {2}, .data = ix}};
    fbx_tensor out = {.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {3, 2, 2}, .data = y};
    fbx_ir_node nd = {.op = FBX_IR_OP_GATHER, .n_inputs = 2, .n_outputs = 1, .params = {.axis = {.axis = 1}}};
    st = be->vt->set_stream(be, h);
    if (!st) st = be->vt->run_node(be, &nd, NULL, in, 2, &out, 1, NULL);
    if (!st) st = be->vt->set_stream(be, NULL);
    CHECK(!st, "cuda: a run on the bound stream returns without waiting: %s", st ? fbx_status_message(st) : "");
    fbx_status_free(st);
    st = be->vt->stream_synchronize(be, s); /* the flag's copy was enqueued there */
    fbx_status *late = st ? NULL : be->vt->set_stream(be, h);
    CHECK(late && strstr(fbx_status_message(late), "GATHER") && strstr(fbx_status_message(late), "earlier run"),
          "cuda: the next bind reports the earlier run's GATHER index error: %s",
          late ? fbx_status_message(late) : "no error");
    fbx_status_free(late);
    fbx_status_free(be->vt->set_stream(be, NULL));
    fbx_status *after = fbx_backend_synchronize(be);
    CHECK(!after, "cuda: reported once, then cleared: %s", after ? fbx_status_message(after) : "");
    fbx_status_free(after);
  }
  fbx_status_free(st);
  if (s) be->vt->stream_destroy(be, s);
  be->vt->buffer_free(be, d);
  be->vt->buffer_free(be, ix);
  be->vt->buffer_free(be, y);
}

/* CUDA: host_alloc(FBX_BUFT_HOST_PINNED), which the EP's HOST_ACCESSIBLE allocator returns, is
 * page-locked: the driver knows it as host memory of the context (cuPointerGetAttribute,
 * CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2 -> CU_MEMORYTYPE_HOST = 1), which it does not for
 * pageable memory (FBX_BUFT_HOST). The driver library is asked directly: an independent view. */
static void test_pinned(fbx_backend *be) {
  typedef int (*get_attr_fn)(void *data, int attribute, unsigned long long ptr);
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  get_attr_fn get_attr = drv ? (get_attr_fn)dlsym(drv, "cuPointerGetAttribute") : NULL;
  CHECK(get_attr != NULL, "cuda: libcuda.so.1 cuPointerGetAttribute found");
  void *pin = NULL, *plain = NULL;
  fbx_status *st = fbx_backend_host_alloc(be, FBX_BUFT_HOST_PINNED, 1 << 20, &pin);
  if (!st) st = fbx_backend_host_alloc(be, FBX_BUFT_HOST, 1 << 20, &plain);
  CHECK(!st, "cuda: host_alloc: %s", st ? fbx_status_message(st) : "");
  if (!st && get_attr) {
    fbx_status_free(fbx_backend_synchronize(be)); /* makes the backend's context current on this thread */
    unsigned int mt_pin = 0, mt_plain = 0;
    int r_pin = get_attr(&mt_pin, 2, (unsigned long long)(uintptr_t)pin);
    int r_plain = get_attr(&mt_plain, 2, (unsigned long long)(uintptr_t)plain);
    CHECK(r_pin == 0 && mt_pin == 1, "cuda: pinned host_alloc memory is page-locked host memory (result %d, type %u)",
          r_pin, mt_pin);
    CHECK(r_plain != 0 || mt_plain != 1, "cuda: FBX_BUFT_HOST memory is not (result %d, type %u)", r_plain, mt_plain);
  }
  fbx_status_free(st);
  fbx_backend_host_free(be, FBX_BUFT_HOST_PINNED, pin);
  fbx_backend_host_free(be, FBX_BUFT_HOST, plain);
  if (drv) dlclose(drv);
}

static void run_opaque(void) {
  fbx_backend *be = NULL, *other = NULL;
  fbx_opaque_options o = {.threads = 1, .decline_op = -1};
  fbx_status *st = fbx_opaque_backend_create(&o, &be);
  if (!st) st = fbx_opaque_backend_create(&o, &other);
  CHECK(!st, "opaque backends: %s", st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (be && other) test_streams(be, other, 4096, true);
  fbx_backend_destroy(be);
  fbx_backend_destroy(other);
}

static void run_cuda(void) {
  char exe[4096], lib[4200];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1); /* the library sits in build/, we in build/tests/ */
  exe[n > 0 ? n : 0] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  snprintf(lib, sizeof lib, "%s/../libfusebox_cuda.so", slash ? exe : ".");
  fbx_cuda_options go = {.device_id = 0, .library = lib};
  fbx_backend *be = NULL, *other = NULL;
  fbx_status *st = fbx_cuda_backend_open(&go, &be);
  if (st) {
    bool skip = fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED;
    printf("test_backend_stream: cuda: %s: %s\n", skip ? "SKIP" : "FAIL", fbx_status_message(st));
    if (!skip) failed++;
    fbx_status_free(st);
    return;
  }
  st = fbx_cuda_backend_open(&go, &other);
  CHECK(!st, "a second CUDA backend: %s", st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (other) test_streams(be, other, (size_t)16 << 20, false); /* 64 MiB: a missing wait would show */
  test_late_error(be);
  test_pinned(be);
  fbx_backend_destroy(be);
  fbx_backend_destroy(other);
}

int main(void) {
  run_opaque();
  run_cuda();
  printf("test_backend_stream: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
