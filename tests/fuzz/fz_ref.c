// fz_ref.c — the graph walk of the fuzz reference (see fz_ref.h).
#include "fz_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZR_MAX_VALUES 64

typedef struct fzr_env {
  fbx_host_tensor v[FZR_MAX_VALUES];  // the reference's values (owned; name = value name)
  int n;
} fzr_env;

static const fbx_host_tensor *fzr_find(const fbx_host_tensor *t, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (t[i].name && !strcmp(t[i].name, name)) return &t[i];
  return NULL;
}

// The same values to within float rounding (|a-b| <= 1e-5 max(1, |b|); NaN == NaN, inf ==
// inf; same dtype and shape): whether ORT ran a node on the reference's numbers. (A naive op
// in double and ORT's float kernel may round the last bit apart; the ops of fz_gen.c whose
// result would jump on such a difference read graph inputs only.)
static int fzr_same(const fbx_host_tensor *a, const fbx_host_tensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return 0;
  for (int k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) return 0;
  size_t n = fbx_host_tensor_numel(a);
  for (size_t i = 0; i < n; i++) {
    double x = fbx_host_tensor_get(a, i), y = fbx_host_tensor_get(b, i);
    if (x == y || (isnan(x) && isnan(y))) continue;
    if (isnan(x) || isnan(y) || isinf(x) || isinf(y) || fabs(x - y) > 1e-5 * fmax(1, fabs(y))) return 0;
  }
  return 1;
}

// 1 when err is NULL; frees err.
static int fzr_ok(char *err) {
  fbx_host_err_free(err);
  return err == NULL;
}

static int fzr_put(fzr_env *e, const char *name, fbx_host_tensor *t) {
  if (e->n >= FZR_MAX_VALUES || !fzr_ok(fbx_host_tensor_set_name(t, name))) {
    fbx_host_tensor_free(t);
    return -1;
  }
  e->v[e->n++] = *t;
  memset(t, 0, sizeof *t);
  return 0;
}

fbx_host_tensor *fz_ref_run(const fz_model *m, const fbx_host_tensor *ort, size_t n_ort, const char *const *names,
                            size_t n, char *why, size_t cap) {
  fzr_env e;
  memset(&e, 0, sizeof e);
  fbx_host_tensor *out = NULL;
  snprintf(why, cap, "out of memory");
  if (!m->recorded) {
    snprintf(why, cap, "graph not recorded");
    return NULL;
  }
  for (size_t i = 0; i < m->n_inputs; i++) {
    fbx_host_tensor t;
    if (!fzr_ok(fbx_host_tensor_copy(&t, &m->inputs[i])) || fzr_put(&e, m->inputs[i].name, &t)) goto fail;
  }
  for (int i = 0; i < m->n_consts; i++) {
    fbx_host_tensor t;
    if (!fzr_ok(fbx_host_tensor_copy(&t, &m->consts[i])) || fzr_put(&e, m->consts[i].name, &t)) goto fail;
  }
  for (int k = 0; k < m->n_nodes; k++) {
    const fz_rnode *nd = &m->nodes[k];
    const fbx_host_tensor *x[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < nd->n_in; i++) {
      if (!nd->in[i][0]) continue;  // an absent optional input
      x[i] = fzr_find(e.v, (size_t)e.n, nd->in[i]);
      if (!x[i]) {
        snprintf(why, cap, "node %d %s: no reference value for input %s", k, nd->op, nd->in[i]);
        goto fail;
      }
    }
    fbx_host_tensor y[2];
    memset(y, 0, sizeof y);
    fz_ref_fn fn = fz_ref_lookup(nd->op);
    const char *err = NULL;
    if (fn) {
      err = fn(nd, x, nd->n_in, y);
    } else {  // ORT's output, where ORT ran the node on the reference's input values
      err = ort ? NULL : "no naive reference and no ORT run";
      for (int i = 0; i < nd->n_in && !err; i++) {
        if (!x[i]) continue;
        const fbx_host_tensor *o = fzr_find(ort, n_ort, nd->in[i]);
        // not an ORT output: a graph input or initializer, the same bytes in both
        if (o && !fzr_same(x[i], o)) err = "no naive reference, and ORT's inputs differ from the reference's";
      }
      for (int i = 0; i < nd->n_out && !err; i++) {
        const fbx_host_tensor *o = fzr_find(ort, n_ort, nd->out[i]);
        if (!o) err = "no naive reference, and ORT did not give this output";
        else if (!fzr_ok(fbx_host_tensor_copy(&y[i], o))) err = "out of memory";
      }
    }
    if (err) {
      for (int i = 0; i < 2; i++) fbx_host_tensor_free(&y[i]);
      snprintf(why, cap, "node %d %s: %s", k, nd->op, err);
      goto fail;
    }
    for (int i = 0; i < nd->n_out; i++)
      if (fzr_put(&e, nd->out[i], &y[i])) {
        for (int j = i + 1; j < nd->n_out; j++) fbx_host_tensor_free(&y[j]);
        goto fail;
      }
  }
  out = calloc(n ? n : 1, sizeof *out);
  if (!out) goto fail;
  for (size_t i = 0; i < n; i++) {
    const fbx_host_tensor *t = fzr_find(e.v, (size_t)e.n, names[i]);
    if (!t) {
      snprintf(why, cap, "no reference value for output %s", names[i]);
      fbx_host_tensors_free(out, n);
      out = NULL;
      goto fail;
    }
    if (!fzr_ok(fbx_host_tensor_copy(&out[i], t))) {
      fbx_host_tensors_free(out, n);
      out = NULL;
      goto fail;
    }
  }
fail:
  for (int i = 0; i < e.n; i++) fbx_host_tensor_free(&e.v[i]);
  return out;
}
