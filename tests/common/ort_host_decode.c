// ort_host_decode.c — greedy KV-cache decode loop on one session (see ort_host_decode.h).
#include "ort_host_decode.h"
#include "ort_host_devkv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kPastPrefix = "past_key_values.";

char *fbx_host_decoder_init(fbx_host_decoder *d, fbx_host_session *s) {
  memset(d, 0, sizeof *d);
  d->s = s;
  if (fbx_host_session_input_find(s, "input_ids") < 0)
    return fbx_host_errf("decoder: model has no input 'input_ids'");
  if (fbx_host_session_output_find(s, "logits") < 0)
    return fbx_host_errf("decoder: model has no output 'logits'");
  d->has_position_ids = fbx_host_session_input_find(s, "position_ids") >= 0;
  d->has_attention_mask = fbx_host_session_input_find(s, "attention_mask") >= 0;
  // Count layers: past_key_values.<i>.key for i = 0, 1, ...
  for (;;) {
    char nm[128];
    snprintf(nm, sizeof nm, "%s%d.key", kPastPrefix, d->n_layers);
    long i = fbx_host_session_input_find(s, nm);
    if (i < 0) break;
    const fbx_host_io *io = fbx_host_session_input(s, (size_t)i);
    if (io->rank != 4 || io->dims[1] <= 0 || io->dims[3] <= 0 || io->dtype != FBX_HOST_F32)
      return fbx_host_errf("decoder: %s must be float32 [B,H,P,D] with static H and D", nm);
    if (d->n_layers == 0) {
      d->heads = io->dims[1];
      d->head_dim = io->dims[3];
    }
    d->n_layers++;
  }
  if (d->n_layers == 0) return fbx_host_errf("decoder: model has no input past_key_values.0.key");
  d->past = calloc((size_t)(2 * d->n_layers), sizeof *d->past);
  if (!d->past) return fbx_host_errf("decoder: out of memory");
  return fbx_host_decoder_reset(d);
}

char *fbx_host_decoder_init_shared(fbx_host_decoder *d, fbx_host_session *s, int64_t capacity) {
  if (capacity < 1) return fbx_host_errf("decoder: shared KV capacity must be >= 1");
  char *err = fbx_host_decoder_init(d, s);  // allocates empty pasts; replaced by the reset below
  if (!err) err = fbx_host_binding_create(s, &d->bind);
  if (err) return err;
  d->capacity = capacity;
  return fbx_host_decoder_reset(d);
}

char *fbx_host_decoder_init_shared_device(fbx_host_decoder *d, fbx_host_session *s, int64_t capacity,
                                          int64_t max_step) {
  if (capacity < 1 || max_step < 1) return fbx_host_errf("decoder: shared KV capacity and step must be >= 1");
  char *err = fbx_host_decoder_init(d, s);
  if (err) return err;
  fbx_host_tensors_free(d->past, (size_t)(2 * d->n_layers)); /* the caches live on the device */
  d->past = NULL;
  d->capacity = capacity;
  if ((err = fbx__host_devkv_create(d, max_step))) return err;
  return fbx_host_decoder_reset(d);
}

char *fbx_host_decoder_reset(fbx_host_decoder *d) {
  if (d->dev) {
    d->past_len = 0;
    return fbx__host_devkv_reset(d);
  }
  // (batch, heads, past=0 | capacity, head_dim): zero-filled
  int64_t dims[4] = {1, d->heads, d->capacity, d->head_dim};
  for (int i = 0; i < 2 * d->n_layers; i++) {
    char nm[128];
    snprintf(nm, sizeof nm, "%s%d.%s", kPastPrefix, i / 2, (i & 1) ? "value" : "key");
    fbx_host_tensor_free(&d->past[i]);
    char *err = fbx_host_tensor_alloc(&d->past[i], nm, FBX_HOST_F32, 4, dims);
    if (err) return err;
  }
  d->past_len = 0;
  fbx_host_tensor_free(&d->logits);
  return NULL;
}

// Shared mode: bind the step's inputs, the KV buffers as past and present, and logits into
// d->logits (1, n, V); ORT writes the presents' new rows into the buffers.
static char *decoder__step_shared(fbx_host_decoder *d, fbx_host_tensor *in, size_t n_own, int64_t n) {
  char *err = NULL;
  if (d->past_len + n > d->capacity)
    return fbx_host_errf("decoder: %lld + %lld tokens exceed the shared KV capacity %lld", (long long)d->past_len,
                         (long long)n, (long long)d->capacity);
  long lo = fbx_host_session_output_find(d->s, "logits");
  const fbx_host_io *io = fbx_host_session_output(d->s, (size_t)lo);
  int64_t ldims[3] = {1, n, io->rank == 3 ? io->dims[2] : -1};  // (batch, seq, vocab)
  if (ldims[2] < 1) return fbx_host_errf("decoder: shared mode needs a static vocabulary dim on logits");
  if (d->logits.rank != 3 || d->logits.dims[1] != n) {
    fbx_host_tensor_free(&d->logits);
    if ((err = fbx_host_tensor_alloc(&d->logits, "logits", FBX_HOST_F32, 3, ldims))) return err;
  }
  for (size_t i = 0; i < n_own && !err; i++) err = fbx_host_binding_input(d->bind, NULL, &in[i]);
  for (int i = 0; i < 2 * d->n_layers && !err; i++) {
    char pnm[128];
    snprintf(pnm, sizeof pnm, "present.%d.%s", i / 2, (i & 1) ? "value" : "key");
    err = fbx_host_binding_input(d->bind, NULL, &d->past[i]);  // past_key_values.<i>.*
    if (!err) err = fbx_host_binding_output(d->bind, pnm, &d->past[i]);  // the same memory
  }
  if (!err) err = fbx_host_binding_output(d->bind, NULL, &d->logits);
  double t0 = fbx_host_now();
  if (!err) err = fbx_host_binding_run(d->bind);
  d->last_run_s = fbx_host_now() - t0;
  if (!err) d->past_len += n;
  return err;
}

char *fbx_host_decoder_step(fbx_host_decoder *d, const int64_t *ids, int64_t n) {
  char *err = NULL;
  size_t n_in = (size_t)(2 * d->n_layers) + 3;
  fbx_host_tensor *in = calloc(n_in, sizeof *in);  // ids, positions, mask, then borrowed pasts
  fbx_host_tensor *outs = NULL;
  size_t n_out = 0, k = 0;
  if (!in) return fbx_host_errf("decoder: out of memory");
  int64_t dims_ids[2] = {1, n};                    // (batch, seq)
  int64_t dims_mask[2] = {1, d->past_len + n};     // (batch, total)
  if ((err = fbx_host_tensor_alloc(&in[k], "input_ids", FBX_HOST_I64, 2, dims_ids))) goto out;
  memcpy(in[k].data, ids, (size_t)n * sizeof(int64_t));
  k++;
  if (d->has_position_ids) {
    if ((err = fbx_host_tensor_alloc(&in[k], "position_ids", FBX_HOST_I64, 2, dims_ids))) goto out;
    for (int64_t i = 0; i < n; i++) ((int64_t *)in[k].data)[i] = d->past_len + i;
    k++;
  }
  if (d->has_attention_mask) {
    if ((err = fbx_host_tensor_alloc(&in[k], "attention_mask", FBX_HOST_I64, 2, dims_mask))) goto out;
    fbx_host_tensor_fill_int(&in[k], 0, 1, 1);
    k++;
  }
  size_t n_own = k;
  if (d->dev) {
    err = fbx__host_devkv_step(d, in, n_own, n);
    goto out;
  }
  if (d->capacity) {
    err = decoder__step_shared(d, in, n_own, n);
    goto out;
  }
  for (int i = 0; i < 2 * d->n_layers; i++) in[k++] = d->past[i];  // shallow: borrowed
  double t0 = fbx_host_now();
  err = fbx_host_session_run(d->s, in, k, &outs, &n_out);
  d->last_run_s = fbx_host_now() - t0;
  // forget the borrowed pasts before freeing the owned inputs
  memset(&in[n_own], 0, (k - n_own) * sizeof *in);
  if (err) goto out;
  // Move outputs: logits -> d->logits, present.<i>.<kv> -> past_key_values.<i>.<kv>.
  for (size_t o = 0; o < n_out; o++) {
    const char *nm = outs[o].name;
    if (strcmp(nm, "logits") == 0) {
      fbx_host_tensor_free(&d->logits);
      d->logits = outs[o];
      memset(&outs[o], 0, sizeof outs[o]);
      continue;
    }
    int layer;
    char kv[16];
    if (sscanf(nm, "present.%d.%15s", &layer, kv) == 2 && layer >= 0 && layer < d->n_layers) {
      int idx = 2 * layer + (strcmp(kv, "value") == 0 ? 1 : 0);
      char pnm[128];
      snprintf(pnm, sizeof pnm, "%s%d.%s", kPastPrefix, layer, kv);
      fbx_host_tensor_free(&d->past[idx]);
      d->past[idx] = outs[o];
      memset(&outs[o], 0, sizeof outs[o]);
      if ((err = fbx_host_tensor_set_name(&d->past[idx], pnm))) goto out;
      if (d->past[idx].rank != 4 || d->past[idx].dims[2] != d->past_len + n) {
        err = fbx_host_errf("decoder: %s has %lld positions, expected %lld", nm,
                            (long long)(d->past[idx].rank == 4 ? d->past[idx].dims[2] : -1),
                            (long long)(d->past_len + n));
        goto out;
      }
    }
  }
  d->past_len += n;
out:
  for (size_t i = 0; i < n_in; i++) fbx_host_tensor_free(&in[i]);
  free(in);
  fbx_host_tensors_free(outs, n_out);
  return err;
}

int64_t fbx_host_decoder_argmax(const fbx_host_decoder *d) {
  const fbx_host_tensor *l = &d->logits;
  if (!l->data || l->rank < 1 || l->dtype != FBX_HOST_F32) return -1;
  int64_t v = l->dims[l->rank - 1];
  size_t n = fbx_host_tensor_numel(l);
  if (v <= 0 || n < (size_t)v) return -1;
  const float *row = (const float *)l->data + (n - (size_t)v);  // last position
  int64_t best = 0;
  for (int64_t i = 1; i < v; i++)
    if (row[i] > row[best]) best = i;
  return best;
}

void fbx_host_decoder_free(fbx_host_decoder *d) {
  fbx__host_devkv_free(d);
  fbx_host_binding_destroy(d->bind);
  if (d->past) fbx_host_tensors_free(d->past, (size_t)(2 * d->n_layers));
  fbx_host_tensor_free(&d->logits);
  memset(d, 0, sizeof *d);
}
