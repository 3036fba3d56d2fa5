/* Shape inference for the recurrent ops LSTM, GRU, RNN (ONNX semantics).
 * Dispatch lives in ir_shape.c.
 *   X (seq, batch, in) [layout 1: (batch, seq, in)]
 *   W (dirs, gates*hidden, in), R (dirs, gates*hidden, hidden), B (dirs, 2*gates*hidden)
 *   sequence_lens (batch) int32, initial_h / initial_c like Y_h, P (dirs, 3*hidden)
 *   Y (seq, dirs, batch, hidden) [layout 1: (batch, seq, dirs, hidden)]
 *   Y_h, Y_c (dirs, batch, hidden) [layout 1: (batch, dirs, hidden)]
 * gates: LSTM 4 (i, o, f, c), GRU 3 (z, r, h), RNN 1. */
#include <string.h>

#include "ir_shape_util.h"

int fbx_ir_rnn_gates(fbx_ir_op op) { return op == FBX_IR_OP_LSTM ? 4 : op == FBX_IR_OP_GRU ? 3 : 1; }

static bool fbx__ir_rnn_dims_are(const fbx_tensor *t, int rank, int64_t d0, int64_t d1, int64_t d2) {
  if (t->rank != rank) return false;
  const int64_t want[3] = {d0, d1, d2};
  for (int i = 0; i < rank; i++)
    if (t->dims[i] != want[i]) return false;
  return true;
}

fbx_status *fbx__ir_infer_rnn(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out, int n_out) {
  FBX__IR_NEED_IN(node, n_in, 3);
  const bool lstm = node->op == FBX_IR_OP_LSTM;
  const int want_out = lstm ? 3 : 2;
  if (n_out != want_out) return FBX__IR_FAIL(node, "%d outputs, expected %d", n_out, want_out);
  const fbx_tensor *x = &in[0], *w = &in[1], *r = &in[2];
  const int layout = node->params.rnn.layout;
  const int64_t H = node->params.rnn.hidden, G = fbx_ir_rnn_gates(node->op);
  const int64_t D = node->params.rnn.direction == 2 ? 2 : 1;
  if (x->rank != 3) return FBX__IR_FAIL(node, "X must be 3-D, got rank %d", x->rank);
  if (x->dtype != FBX_DTYPE_F32) return FBX__IR_FAIL(node, "X must be float32");
  const int64_t S = layout ? x->dims[1] : x->dims[0], Bn = layout ? x->dims[0] : x->dims[1], I = x->dims[2];
  if (H < 1 || H > (1 << 24)) return FBX__IR_FAIL(node, "hidden_size %lld outside 1..2^24", (long long)H);
  if (!fbx__ir_rnn_dims_are(w, 3, D, G * H, I))
    return FBX__IR_FAIL(node, "W must be (%lld, %lld, %lld)", (long long)D, (long long)(G * H), (long long)I);
  if (!fbx__ir_rnn_dims_are(r, 3, D, G * H, H))
    return FBX__IR_FAIL(node, "R must be (%lld, %lld, %lld)", (long long)D, (long long)(G * H), (long long)H);
  if (fbx__ir_present(in, n_in, 3) && !fbx__ir_rnn_dims_are(&in[3], 2, D, 2 * G * H, 0))
    return FBX__IR_FAIL(node, "B must be (%lld, %lld)", (long long)D, (long long)(2 * G * H));
  if (fbx__ir_present(in, n_in, 4)) {
    if (in[4].rank != 1 || in[4].dims[0] != Bn || in[4].dtype != FBX_DTYPE_I32)
      return FBX__IR_FAIL(node, "sequence_lens must be int32 (%lld)", (long long)Bn);
  }
  const int64_t s0 = layout ? Bn : D, s1 = layout ? D : Bn;
  for (int i = 5; i <= (lstm ? 6 : 5); i++)
    if (fbx__ir_present(in, n_in, i) && !fbx__ir_rnn_dims_are(&in[i], 3, s0, s1, H))
      return FBX__IR_FAIL(node, "%s must be (%lld, %lld, %lld)", i == 5 ? "initial_h" : "initial_c", (long long)s0,
                          (long long)s1, (long long)H);
  if (lstm && fbx__ir_present(in, n_in, 7) && !fbx__ir_rnn_dims_are(&in[7], 2, D, 3 * H, 0))
    return FBX__IR_FAIL(node, "P must be (%lld, %lld)", (long long)D, (long long)(3 * H));
  for (int i = 3; i < n_in; i++)
    if (fbx__ir_present(in, n_in, i) && i != 4 && in[i].dtype != FBX_DTYPE_F32)
      return FBX__IR_FAIL(node, "input %d must be float32", i);
  out[0].rank = 4;
  if (layout) out[0].dims[0] = Bn, out[0].dims[1] = S;
  else out[0].dims[0] = S, out[0].dims[1] = D;
  out[0].dims[2] = layout ? D : Bn;
  out[0].dims[3] = H;
  for (int o = 1; o < n_out; o++) {
    out[o].rank = 3;
    out[o].dims[0] = s0, out[o].dims[1] = s1, out[o].dims[2] = H;
  }
  for (int o = 0; o < n_out; o++) out[o].dtype = FBX_DTYPE_F32;
  return NULL;
}
