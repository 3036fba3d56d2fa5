/* The opaque test backend and the backend table's optional members:
 *  - DEVICE buffers are handles outside the user address space (a host load
 *    through one would fault), data moves only through the copies;
 *  - run_node runs the CPU kernel on handles (Add checked against a naive
 *    sum) and refuses a host pointer where a device buffer belongs, naming
 *    the node and argument; copies refuse swapped host/device sides;
 *  - async device-to-host copies are unreadable (poisoned) until
 *    synchronize, right after it; events record and synchronise;
 *  - supports() declines the op it was asked to, with the device's name;
 *  - a table written against the first interface (no optional members) gets
 *    the documented fallbacks from the fbx_backend_* helpers. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "common/check.h"

static fbx_tensor vec(int64_t n, void *data) {
  fbx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = FBX_DTYPE_F32;
  t.rank = 1;
  t.dims[0] = n;
  t.data = data;
  return t;
}

static void test_buffers_and_kernels(fbx_backend *be) {
  enum { N = 37 };
  float a[N], b[N], y[N];
  for (int i = 0; i < N; i++) a[i] = (float)i * 0.5f, b[i] = 3.0f - (float)i;
  void *da = NULL, *db = NULL, *dy = NULL;
  fbx_status *st = be->vt->buffer_alloc(be, sizeof a, &da);
  if (!st) st = be->vt->buffer_alloc(be, sizeof b, &db);
  if (!st) st = be->vt->buffer_alloc(be, sizeof y, &dy);
  CHECK(!st, "alloc: %s", st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (!da || !db || !dy) return;
  CHECK((uintptr_t)da >= ((uintptr_t)1 << 47), "a DEVICE buffer is not a user-space address (%p)", da);
  CHECK(!fbx_backend_buft_info(be, FBX_BUFT_DEVICE).host_access &&
            fbx_backend_buft_info(be, FBX_BUFT_HOST_PINNED).host_access,
        "buffer types: DEVICE not host-accessible, pinned host is");
  CHECK(!be->vt->copy_from_host(be, da, a, sizeof a) && !be->vt->copy_from_host(be, db, b, sizeof b), "upload");

  fbx_ir_node add;
  memset(&add, 0, sizeof add);
  add.op = FBX_IR_OP_ADD;
  add.n_inputs = 2, add.n_outputs = 1, add.name = "add";
  fbx_tensor in[2] = {vec(N, da), vec(N, db)}, out = vec(N, dy);
  st = be->vt->run_node(be, &add, NULL, in, 2, &out, 1, NULL);
  CHECK(!st, "run_node ADD on handles: %s", st ? fbx_status_message(st) : "ok");
  fbx_status_free(st);
  memset(y, 0, sizeof y);
  st = be->vt->copy_to_host(be, y, dy, sizeof y);
  fbx_status_free(st);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += y[i] != a[i] + b[i];
  CHECK(!st && !bad, "ADD result read back through copy_to_host (%d wrong)", bad);

  in[1].data = b; /* a host pointer where a device buffer belongs */
  st = be->vt->run_node(be, &add, NULL, in, 2, &out, 1, NULL);
  CHECK(st && strstr(fbx_status_message(st), "input 1") && strstr(fbx_status_message(st), "host memory"),
        "run_node refuses a host pointer: %s", st ? fbx_status_message(st) : "(accepted)");
  fbx_status_free(st);
  st = be->vt->copy_from_host(be, b, da, 4); /* sides swapped */
  CHECK(st != NULL, "copy_from_host refuses a host destination / device source");
  fbx_status_free(st);

  /* async read-back: poisoned until synchronize */
  fbx_opaque_stats s0, s1;
  fbx_opaque_backend_stats(be, &s0);
  memset(y, 0, sizeof y);
  st = fbx_backend_copy_to_host_async(be, y, dy, sizeof y);
  fbx_status_free(st);
  bool poisoned = y[0] != a[0] + b[0];
  fbx_backend_event *ev = NULL;
  st = fbx_backend_event_create(be, &ev);
  if (!st) st = fbx_backend_event_record(be, ev);
  if (!st) st = fbx_backend_event_wait(be, ev);
  if (!st) st = fbx_backend_event_synchronize(be, ev);
  CHECK(!st && ev, "event create/record/wait/synchronize: %s", st ? fbx_status_message(st) : "ok");
  fbx_status_free(st);
  fbx_backend_event_destroy(be, ev);
  bad = 0;
  for (int i = 0; i < N; i++) bad += y[i] != a[i] + b[i];
  fbx_opaque_backend_stats(be, &s1);
  CHECK(poisoned && !bad, "async copy_to_host: unreadable before the sync, right after (%d wrong)", bad);
  CHECK(s1.syncs - s0.syncs == 1 && s1.d2h - s0.d2h == 1, "stats: 1 sync, 1 read-back");

  size_t fr = 0, tot = 0;
  st = be->vt->mem_info(be, &fr, &tot);
  CHECK(!st && tot > 0 && fr <= tot, "mem_info: %zu of %zu bytes free", fr, tot);
  fbx_status_free(st);
  be->vt->buffer_free(be, da);
  be->vt->buffer_free(be, db);
  be->vt->buffer_free(be, dy);
  CHECK(be->vt->memory_in_use(be) == 0, "every buffer freed");
}

static void test_supports(fbx_backend *be) {
  fbx_ir_node n;
  memset(&n, 0, sizeof n);
  fbx_tensor t = vec(4, NULL);
  char why[200] = "";
  n.op = FBX_IR_OP_ADD;
  CHECK(fbx_backend_supports(be, &n, &t, 1, &t, 1, why, sizeof why), "supports ADD");
  n.op = FBX_IR_OP_SOFTMAX;
  bool ok = fbx_backend_supports(be, &n, &t, 1, &t, 1, why, sizeof why);
  CHECK(!ok && strncmp(why, "opaque: SOFTMAX", 15) == 0, "declines SOFTMAX, reason names the device: '%s'", why);
}

/* ---- a first-version table: no optional member set ---- */
static int old_syncs;
static fbx_status *o_alloc(fbx_backend *be, size_t n, void **out) {
  *out = fbx_malloc_aligned(n ? n : 64);
  return *out ? NULL : FBX_ERR_OOM();
}
static void o_free(fbx_backend *be, void *p) { fbx_free_aligned(p); }
static fbx_status *o_copy(fbx_backend *be, void *d, const void *s, size_t n) {
  memcpy(d, s, n);
  return NULL;
}
static fbx_status *o_sync(fbx_backend *be) {
  old_syncs++;
  return NULL;
}
static const fbx_backend_vtable OLD_VT = {.name = "old", .host_visible = false, .buffer_alloc = o_alloc,
                                          .buffer_free = o_free, .copy_from_host = o_copy, .copy_to_host = o_copy,
                                          .copy_device = o_copy, .synchronize = o_sync};

static void test_fallbacks(void) {
  fbx_backend be = {&OLD_VT, NULL};
  fbx_buft_info d = fbx_backend_buft_info(&be, FBX_BUFT_DEVICE), h = fbx_backend_buft_info(&be, FBX_BUFT_HOST);
  CHECK(d.alignment == 64 && !d.host_access && h.alignment == 64 && h.host_access,
        "undescribed buffer types: 64-byte aligned, DEVICE follows host_visible");
  void *p = NULL;
  fbx_status *st = fbx_backend_host_alloc(&be, FBX_BUFT_HOST_PINNED, 100, &p);
  CHECK(!st && p && ((uintptr_t)p & 63) == 0, "host_alloc falls back to an aligned host buffer");
  fbx_status_free(st);
  int src[4] = {1, 2, 3, 4};
  st = fbx_backend_copy_from_host_async(&be, p, src, sizeof src);
  CHECK(!st && memcmp(p, src, sizeof src) == 0, "async copy falls back to the synchronous one");
  fbx_status_free(st);
  fbx_backend_host_free(&be, FBX_BUFT_HOST_PINNED, p);
  fbx_backend_event *ev = (fbx_backend_event *)&be;
  st = fbx_backend_event_create(&be, &ev);
  CHECK(!st && ev == NULL, "no event members: a NULL event");
  old_syncs = 0;
  st = fbx_backend_event_synchronize(&be, ev);
  CHECK(!st && old_syncs == 1, "event_synchronize without events is synchronize");
  char why[64] = "x";
  fbx_ir_node n;
  memset(&n, 0, sizeof n);
  CHECK(fbx_backend_supports(&be, &n, NULL, 0, NULL, 0, why, sizeof why), "no supports member: everything");
}

int main(void) {
  fbx_backend *be = NULL;
  fbx_opaque_options o = {.threads = 1, .decline_op = FBX_IR_OP_SOFTMAX};
  fbx_status *st = fbx_opaque_backend_create(&o, &be);
  if (st) {
    printf("FAIL create: %s\n", fbx_status_message(st));
    return 1;
  }
  test_buffers_and_kernels(be);
  test_supports(be);
  fbx_backend_destroy(be);
  test_fallbacks();
  printf("test_opaque_backend: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
