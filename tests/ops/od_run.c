// od_run.c — sessions for one differential case and the call to the decision rule (od_run.h).
#include "ops/od_run.h"

#include <stdio.h>
#include <string.h>

#include "ops/od_model.h"
#include "ops/od_ref.h"

// Write c's model to path and run it once (Fusebox registered or not); *claimed |= any node
// went to Fusebox. Returns an error message (heap) or NULL; *out as fbx_host_session_run.
static char *od_session(fbx_host *h, const od_case *c, const char *path, int fusebox, int *claimed,
                        fbx_host_tensor **out, size_t *n_out) {
  int dts[OD_MAX_OUT];
  od_out_dtypes(c, dts);
  if (od_model_write(c, dts, path)) return fbx_host_errf("cannot write model");
  fbx_host_tensor feeds[OD_MAX_IN];
  size_t nf = 0;
  for (int i = 0; i < c->n_in; i++)
    if (c->in[i].rank >= 0 && !c->is_init[i]) feeds[nf++] = c->in[i];
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = fusebox;
  o.intra_threads = 1;
  o.record_assignment = fusebox;
  fbx_host_session *s = NULL;
  char *e = fbx_host_session_create(h, path, &o, &s);
  if (!e) e = fbx_host_session_run(s, feeds, nf, out, n_out);
  if (!e && fusebox && claimed) {
    fbx_host_assign *as;
    size_t na;
    char *e2 = fbx_host_session_assignment(s, &as, &na);
    if (!e2) {
      for (size_t k = 0; k < na; k++) *claimed |= !strcmp(as[k].ep, FBX_HOST_EP_NAME);
      fbx_host_assign_free(as, na);
    }
    fbx_host_err_free(e2);
  }
  if (s) fbx_host_session_destroy(s);
  return e;
}

static int od_has_f16(const od_case *c) {
  for (int i = 0; i < c->n_in; i++)
    if (c->in[i].rank >= 0 && c->in[i].dtype == FBX_HOST_F16) return 1;
  return 0;
}

// Reference for a float16 case ORT's CPU EP has no float16 kernel for: the same model with
// every float16 input widened to float32, run on ORT's CPU EP, its float32 outputs rounded
// to float16 where the float16 model's outputs are float16.
static char *od_f32_reference(fbx_host *h, const od_case *c, const char *path, fbx_host_tensor **out, size_t *n_out) {
  od_case f = *c;
  for (int i = 0; i < c->n_in; i++) {
    if (c->in[i].rank < 0) continue;
    int dt = c->in[i].dtype == FBX_HOST_F16 ? FBX_HOST_F32 : c->in[i].dtype;
    char *e = fbx_host_tensor_alloc(&f.in[i], c->in[i].name, dt, c->in[i].rank, c->in[i].dims);
    if (e) { f.n_in = i; od_case_free(&f); return e; }
    size_t n = fbx_host_tensor_numel(&c->in[i]);
    for (size_t k = 0; k < n; k++) fbx_host_tensor_set(&f.in[i], k, fbx_host_tensor_get(&c->in[i], k));
  }
  char *e = od_session(h, &f, path, 0, NULL, out, n_out);
  od_case_free(&f);
  if (e) return e;
  int dts[OD_MAX_OUT];
  od_out_dtypes(c, dts);
  for (size_t i = 0; i < *n_out && i < OD_MAX_OUT; i++) {
    fbx_host_tensor *t = &(*out)[i];
    if (dts[i] != FBX_HOST_F16 || t->dtype != FBX_HOST_F32) continue;
    fbx_host_tensor r;
    e = fbx_host_tensor_alloc(&r, t->name, FBX_HOST_F16, t->rank, t->dims);
    if (e) return e;
    size_t n = fbx_host_tensor_numel(t);
    for (size_t k = 0; k < n; k++) fbx_host_tensor_set(&r, k, fbx_host_tensor_get(t, k));
    fbx_host_tensor_free(t);
    *t = r;
  }
  return NULL;
}

void od_corrupt(fbx_host_tensor *t) {
  if (!fbx_host_tensor_numel(t)) return;
  double v = fbx_host_tensor_get(t, 0);
  fbx_host_tensor_set(t, 0, v > 0 ? v - 1 : v + 1);
}

void od_run(fbx_host *h, const od_case *c, const char *path, const od_run_opts *o, od_result *res) {
  memset(res, 0, sizeof *res);
  res->j.ref_vs_ort = -1;
  od_judgement *j = &res->j;
  fbx_host_tensor *ort = NULL, *fbx = NULL, *ref = NULL;
  size_t n_ort = 0, n_fbx = 0, n_ref = 0;
  char ort_err[240] = "";

  char *e = od_session(h, c, path, 0, NULL, &ort, &n_ort);
  if (e && od_has_f16(c)) {
    char *e2 = od_f32_reference(h, c, path, &ort, &n_ort);
    if (!e2) { fbx_host_err_free(e); e = NULL; res->f32ref = 1; }
    else fbx_host_err_free(e2);
  }
  if (e) {  // ORT cannot run this combination: judged by the reference alone, if there is one
    snprintf(ort_err, sizeof ort_err, "%.200s", e);
    fbx_host_err_free(e);
    ort = NULL;
    n_ort = 0;
  }
  if (od_ref_has(c)) {
    e = od_ref_run(c, &ref, &n_ref);
    if (e) {
      j->verdict = OD_VERDICT_FAIL;
      snprintf(j->msg, sizeof j->msg, "independent reference: %.400s", e);
      fbx_host_err_free(e);
      goto done;
    }
    res->has_ref = 1;
  }
  if (!ort && !ref) {
    j->verdict = OD_VERDICT_SKIP;
    snprintf(j->msg, sizeof j->msg, "ORT CPU: %s", ort_err);
    goto done;
  }
  if (o && o->corrupt_ort && ort && n_ort) od_corrupt(&ort[0]);
  if (o && o->corrupt_ref && ref && n_ref) od_corrupt(&ref[0]);

  e = od_session(h, c, path, 1, &res->claimed, &fbx, &n_fbx);
  if (e) {
    // When ORT alone could not run it either, Fusebox may have declined the node (allowed) and
    // the session failed in ORT's kernel again, and nothing says the model is valid: a skip.
    j->verdict = ort ? OD_VERDICT_FAIL : OD_VERDICT_SKIP;
    snprintf(j->msg, sizeof j->msg, "%s%.200s%sFusebox: %.300s", ort ? "" : "ORT CPU: ", ort ? "" : ort_err,
             ort ? "" : "; ", e);
    fbx_host_err_free(e);
    goto done;
  }
  od_judge((od_outputs){fbx, n_fbx}, (od_outputs){ort, n_ort}, (od_outputs){ref, n_ref}, res->claimed, c->rtol,
           c->atol, j);
  if (res->f32ref && j->msg[0]) {
    size_t k = strlen(j->msg);
    snprintf(j->msg + k, sizeof j->msg - k, " (ORT ran the model widened to float32)");
  }
done:
  if (ort) fbx_host_tensors_free(ort, n_ort);
  if (fbx) fbx_host_tensors_free(fbx, n_fbx);
  if (ref) fbx_host_tensors_free(ref, n_ref);
}
