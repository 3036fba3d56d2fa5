/* The fallbacks of the backend table's optional members. */
#include "backend.h"

#include <stdio.h>

#include "../base/alloc.h"
#include "../base/checked.h"

void fbx_backend_destroy(fbx_backend *be) {
  if (be && be->vt && be->vt->destroy) be->vt->destroy(be);
}

fbx_buft_info fbx_backend_buft_info(const fbx_backend *be, fbx_buft t) {
  fbx_buft_info i = {0};
  if ((unsigned)t < FBX_BUFT_COUNT) i = be->vt->buft[t];
  if (!i.alignment) { /* not described: the first table's behaviour */
    i.alignment = 64;
    i.host_access = t != FBX_BUFT_DEVICE || be->vt->host_visible;
  }
  return i;
}

fbx_status *fbx_backend_host_alloc(fbx_backend *be, fbx_buft t, size_t bytes, void **out) {
  *out = NULL;
  if (t == FBX_BUFT_DEVICE) return FBX_ERR_ARG("%s: host_alloc of a DEVICE buffer", be->vt->name);
  if (be->vt->host_alloc) return be->vt->host_alloc(be, t, bytes, out);
  *out = fbx_malloc_aligned(bytes ? bytes : 64);
  return *out ? NULL : FBX_ERR_OOM();
}

void fbx_backend_host_free(fbx_backend *be, fbx_buft t, void *p) {
  if (!p) return;
  if (be->vt->host_free) be->vt->host_free(be, t, p);
  else fbx_free_aligned(p);
}

fbx_status *fbx_backend_copy_from_host_async(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  if (!bytes) return NULL;
  if (be->vt->copy_from_host_async) return be->vt->copy_from_host_async(be, dst, src, bytes);
  return be->vt->copy_from_host(be, dst, src, bytes);
}

fbx_status *fbx_backend_copy_to_host_async(fbx_backend *be, void *dst, const void *src, size_t bytes) {
  if (!bytes) return NULL;
  if (be->vt->copy_to_host_async) return be->vt->copy_to_host_async(be, dst, src, bytes);
  return be->vt->copy_to_host(be, dst, src, bytes);
}

fbx_status *fbx_backend_synchronize(fbx_backend *be) {
  return be->vt->synchronize ? be->vt->synchronize(be) : NULL;
}

fbx_status *fbx_backend_event_create(fbx_backend *be, fbx_backend_event **out) {
  *out = NULL;
  return be->vt->event_create ? be->vt->event_create(be, out) : NULL;
}

void fbx_backend_event_destroy(fbx_backend *be, fbx_backend_event *ev) {
  if (ev && be->vt->event_destroy) be->vt->event_destroy(be, ev);
}

fbx_status *fbx_backend_event_record(fbx_backend *be, fbx_backend_event *ev) {
  return be->vt->event_record && ev ? be->vt->event_record(be, ev) : NULL;
}

fbx_status *fbx_backend_event_wait(fbx_backend *be, fbx_backend_event *ev) {
  return be->vt->event_wait && ev ? be->vt->event_wait(be, ev) : NULL;
}

fbx_status *fbx_backend_event_synchronize(fbx_backend *be, fbx_backend_event *ev) {
  if (be->vt->event_synchronize && ev) return be->vt->event_synchronize(be, ev);
  return fbx_backend_synchronize(be);
}

bool fbx_backend_has_streams(const fbx_backend *be) {
  const fbx_backend_vtable *v = be ? be->vt : NULL;
  return v && v->set_stream && v->stream_create && v->stream_destroy && v->stream_handle && v->stream_record &&
         v->stream_wait && v->stream_synchronize;
}

bool fbx_backend_supports(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs,
                          const fbx_tensor *outputs, int n_outputs, char *reason, size_t cap) {
  if (!be->vt->supports) return true;
  char why[160] = "";
  if (be->vt->supports(be, node, inputs, n_inputs, outputs, n_outputs, why, sizeof why)) return true;
  if (reason && cap)
    snprintf(reason, cap, "%s: %s", be->vt->name ? be->vt->name : "device", why[0] ? why : "not supported");
  return false;
}

fbx_status *fbx_matmul_geom_get(const fbx_ir_node *node, const fbx_tensor *A, const fbx_tensor *B,
                                const fbx_tensor *Y, fbx_matmul_geom *g) {
  if (A->rank < 1 || B->rank < 1) return FBX_ERR_ARG("MATMUL: scalar operand");
  bool a1 = A->rank == 1, b1 = B->rank == 1;
  g->ta = !a1 && node->params.matmul.trans_a;
  g->tb = !b1 && node->params.matmul.trans_b;
  g->alpha = node->params.matmul.alpha == 0.f ? 1.f : node->params.matmul.alpha;
  int64_t ar = a1 ? 1 : A->dims[A->rank - 2], ac = A->dims[A->rank - 1];
  int64_t br = b1 ? B->dims[0] : B->dims[B->rank - 2], bc = b1 ? 1 : B->dims[B->rank - 1];
  g->M = g->ta ? ac : ar;
  g->K = g->ta ? ar : ac;
  int64_t Kb = g->tb ? bc : br;
  g->N = g->tb ? br : bc;
  if (g->K != Kb) return FBX_ERR_ARG("MATMUL: inner dims differ (%lld vs %lld)", (long long)g->K, (long long)Kb);
  int abr = a1 ? 0 : A->rank - 2, bbr = b1 ? 0 : B->rank - 2;
  g->obr = Y->rank - (a1 ? 0 : 1) - (b1 ? 0 : 1);
  if (g->obr < 0 || g->obr < abr || g->obr < bbr)
    return FBX_ERR_ARG("MATMUL: output rank %d inconsistent", Y->rank);
  g->nbatch = 1;
  g->sa = 1;
  g->sb = 1;
  for (int d = g->obr - 1; d >= 0; d--) {
    int ia = d - (g->obr - abr), ib = d - (g->obr - bbr);
    int64_t da = ia >= 0 ? A->dims[ia] : 1, db = ib >= 0 ? B->dims[ib] : 1;
    g->odims[d] = Y->dims[d];
    g->ast[d] = da == 1 ? 0 : g->sa;
    g->bst[d] = db == 1 ? 0 : g->sb;
    g->sa *= da;
    g->sb *= db;
    g->nbatch *= g->odims[d];
  }
  return NULL;
}

void fbx_matmul_geom_batch(const fbx_matmul_geom *g, int64_t bi, int64_t *oa, int64_t *ob) {
  int64_t rem = bi;
  *oa = *ob = 0;
  for (int d = g->obr - 1; d >= 0; d--) {
    int64_t i = rem % g->odims[d];
    rem /= g->odims[d];
    *oa += i * g->ast[d];
    *ob += i * g->bst[d];
  }
}
