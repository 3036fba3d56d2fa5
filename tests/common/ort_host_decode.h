// ort_host_decode — a greedy decode loop over a decoder model with a KV cache, on one session.
//
// Model contract (models/gen/gen_decoder.py, ONNX Runtime GenAI style):
//   inputs  input_ids [B,S] int64, position_ids [B,S] int64 (optional),
//           attention_mask [B,T] int64 (optional), past_key_values.<i>.key/.value [B,H,P,D] f32
//   outputs logits [B,S,V] f32, present.<i>.key/.value [B,H,T,D] f32      (T = P + S)
// The layer count, H and D come from the session's input list. Batch is 1.
#ifndef FBX_TESTS_ORT_HOST_DECODE_H
#define FBX_TESTS_ORT_HOST_DECODE_H

#include "ort_host.h"

// Shared mode (fbx_host_decoder_init_shared), as ONNX Runtime GenAI runs with
// past_present_share_buffer: one (1,H,capacity,D) buffer per cache, bound with IOBinding as
// both past_key_values.<i>.* and present.<i>.* (the model writes the new rows in place);
// attention_mask is (1, P + S), so the valid length comes from it, never from the capacity.
typedef struct fbx_host_decoder {
  fbx_host_session *s;          // borrowed
  int64_t capacity;             // shared mode: rows of each KV buffer; 0: pasts fed, presents moved back
  fbx_host_binding *bind;       // shared mode: the session's binding
  int n_layers;
  int64_t heads, head_dim;      // H, D of the KV cache
  int64_t past_len;             // P: tokens already in the cache
  int has_position_ids, has_attention_mask;
  fbx_host_tensor *past;        // 2 * n_layers tensors [1,H,P,D] ([1,H,capacity,D] shared), named
                                // past_key_values.<i>.key/.value
  fbx_host_tensor logits;       // logits of the last step [1,S,V]
  double last_run_s;            // seconds of the last Run (host wall clock; device mode: the ids upload,
                                // the Run and the logits download)
  struct fbx_host_devkv *dev;   // device mode (fbx_host_decoder_init_shared_device), else NULL
  int dev_host_io;              // device mode with input_ids, attention_mask and logits as host tensors
                                // bound every step (ORT copies them through Fusebox's data transfer,
                                // into and out of device buffers it allocates per Run), as
                                // onnxruntime's Python client does with numpy arrays; set after init
} fbx_host_decoder;

// Inspect the session and set up an empty cache. d is overwritten.
char *fbx_host_decoder_init(fbx_host_decoder *d, fbx_host_session *s);
// The same in shared mode with KV buffers of `capacity` rows (P + S may not exceed it).
char *fbx_host_decoder_init_shared(fbx_host_decoder *d, fbx_host_session *s, int64_t capacity);
// Shared mode with every bound buffer in the memory of Fusebox's GPU OrtEpDevice (ORT's shared
// allocator for its DEFAULT memory info), as GenAI runs on a GPU: the KV buffers (1,H,capacity,D),
// input_ids (a (1,max_step) buffer, the step's ids copied in through ORT's CopyTensors = Fusebox's
// data transfer), attention_mask (a (1,capacity) buffer of ones, bound as its (1,P+S) prefix) and
// logits (a (1,max_step,V) buffer, copied to d->logits after each Run). Every step binds the same
// device addresses, so a captured plan replays. The session must run on that GPU device
// (--ep-devices gpu, or the CPU and GPU devices with device=cuda); position_ids, where the model has
// them, stay host tensors (ORT copies them).
char *fbx_host_decoder_init_shared_device(fbx_host_decoder *d, fbx_host_session *s, int64_t capacity,
                                          int64_t max_step);
// Drop the cache (P = 0; shared buffers zeroed).
char *fbx_host_decoder_reset(fbx_host_decoder *d);
// Run one step with n ids (prefill when n > 1, decode when n == 1); the presents become the
// next pasts and the logits are kept in d->logits.
char *fbx_host_decoder_step(fbx_host_decoder *d, const int64_t *ids, int64_t n);
// argmax over the vocabulary at the last position of d->logits (-1 if there are none).
int64_t fbx_host_decoder_argmax(const fbx_host_decoder *d);
void fbx_host_decoder_free(fbx_host_decoder *d);

#endif  // FBX_TESTS_ORT_HOST_DECODE_H
