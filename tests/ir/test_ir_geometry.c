/* fbx_ir_conv_geometry, the one conv/conv-transpose/pool geometry (issue 8, defect 9a):
 *   - SAME_UPPER / SAME_LOWER with odd and even total padding, strides 1-3, kernels 1-5,
 *     dilations 1-2, for Conv, MaxPool and ConvTranspose: output size and both pads against
 *     the formulas of the ONNX spec, written out again here (SAME_UPPER puts the odd pad at
 *     the end for all three; before, ConvTranspose put it at the start);
 *   - ConvTranspose with output_shape (NOTSET): the odd pad at the start;
 *   - attributes so large that the geometry overflows int64 fail instead of wrapping;
 *   - pools whose window is wider than the (padded) input: the spec's output size
 *     floor((in + pads - ek) / s) + 1 is <= 0, an empty output (before: an error, where ORT
 *     returns an empty tensor; the fuzz class `invalid` found it); a Conv's is still an error;
 *   - VALID with ceil_mode: the spec's ceil((in - ek + 1) / s), i.e. no ceil effect. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "exec/exec_compiled.h"

#include "common/check.h"

static fbx_tensor X(int64_t h, int64_t w) {
  fbx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = FBX_DTYPE_F32;
  t.rank = 4;
  t.dims[0] = 1;
  t.dims[1] = 2;
  t.dims[2] = h;
  t.dims[3] = w;
  return t;
}

static fbx_ir_node node(fbx_ir_op op, fbx_ir_auto_pad ap, int64_t k, int64_t s, int64_t d) {
  fbx_ir_node n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.name = "g";
  n.onnx_op = fbx_ir_op_name(op);
  n.params.conv.nd = 2;
  n.params.conv.auto_pad = ap;
  for (int i = 0; i < 2; i++) {
    n.params.conv.kernel[i] = k;
    n.params.conv.strides[i] = s;
    n.params.conv.dilations[i] = d;
  }
  return n;
}

static void check_same(void) {
  int cases = 0, odd = 0;
  const fbx_ir_op ops[3] = {FBX_IR_OP_CONV, FBX_IR_OP_MAXPOOL, FBX_IR_OP_CONV_TRANSPOSE};
  const fbx_ir_auto_pad aps[2] = {FBX_IR_PAD_SAME_UPPER, FBX_IR_PAD_SAME_LOWER};
  for (int o = 0; o < 3; o++)
    for (int a = 0; a < 2; a++)
      for (int64_t s = 1; s <= 3; s++)
        for (int64_t k = 1; k <= 5; k++)
          for (int64_t d = 1; d <= 2; d++)
            for (int64_t in = 1; in <= 7; in++) {
              fbx_ir_node n = node(ops[o], aps[a], k, s, d);
              fbx_tensor x = X(in, in + 1);
              int64_t kern[3], pads[6], os[3];
              fbx_status *st = fbx_ir_conv_geometry(&n, &x, NULL, kern, pads, os);
              CHECK(!st, "%s: %s", fbx_ir_op_name(ops[o]), st ? fbx_status_message(st) : "");
              fbx_status_free(st);
              if (st) continue;
              for (int i = 0; i < 2; i++) {
                int64_t len = x.dims[2 + i], ek = d * (k - 1) + 1, out, total;
                if (ops[o] == FBX_IR_OP_CONV_TRANSPOSE) {
                  int64_t full = s * (len - 1) + ek;
                  total = full - len * s > 0 ? full - len * s : 0;
                  out = full - total;
                } else {
                  out = (len + s - 1) / s;
                  total = (out - 1) * s + ek - len;
                  if (total < 0) total = 0;
                }
                /* ONNX: "the extra padding is added at the end for SAME_UPPER and at the beginning for SAME_LOWER" */
                int64_t begin = aps[a] == FBX_IR_PAD_SAME_UPPER ? total / 2 : (total + 1) / 2;
                cases++;
                odd += total % 2;
                CHECK(os[i] == out && pads[i] == begin && pads[2 + i] == total - begin,
                      "%s %s s%lld k%lld d%lld in %lld: out %lld pads (%lld, %lld), want %lld (%lld, %lld)",
                      fbx_ir_op_name(ops[o]), a ? "SAME_LOWER" : "SAME_UPPER", (long long)s, (long long)k, (long long)d,
                      (long long)len, (long long)os[i], (long long)pads[i], (long long)pads[2 + i], (long long)out,
                      (long long)begin, (long long)(total - begin));
              }
            }
  printf("SAME geometry: %d axes checked, %d with an odd total\n", cases, odd);
}

static void check_output_shape(void) {
  /* ConvTranspose k4 s2, in 3, output_shape 7: total = 2*2 + 4 - 7 = 1, the odd pad at the start */
  fbx_ir_node n = node(FBX_IR_OP_CONV_TRANSPOSE, FBX_IR_PAD_NOTSET, 4, 2, 1);
  n.params.conv.output_shape[0] = n.params.conv.output_shape[1] = 7;
  fbx_tensor x = X(3, 3);
  int64_t kern[3], pads[6], os[3];
  fbx_status *st = fbx_ir_conv_geometry(&n, &x, NULL, kern, pads, os);
  CHECK(!st && os[0] == 7 && pads[0] == 1 && pads[2] == 0, "output_shape: out %lld pads (%lld, %lld), want 7 (1, 0)",
        (long long)os[0], (long long)pads[0], (long long)pads[2]);
  fbx_status_free(st);
}

static void check_overflow(void) {
  fbx_ir_node n = node(FBX_IR_OP_CONV_TRANSPOSE, FBX_IR_PAD_NOTSET, 3, INT64_C(1) << 62, 1);
  fbx_tensor x = X(9, 9);
  int64_t kern[3], pads[6], os[3];
  fbx_status *st = fbx_ir_conv_geometry(&n, &x, NULL, kern, pads, os);
  CHECK(st && strstr(fbx_status_message(st), "overflows int64"), "stride 2^62 x 8: %s",
        st ? fbx_status_message(st) : "accepted");
  fbx_status_free(st);
  n = node(FBX_IR_OP_CONV, FBX_IR_PAD_NOTSET, INT64_MAX, 1, INT64_MAX);
  st = fbx_ir_conv_geometry(&n, &x, NULL, kern, pads, os);
  CHECK(st != NULL, "kernel and dilation INT64_MAX accepted");
  fbx_status_free(st);
}

static void check_empty_pool(void) {
  const fbx_ir_op ops[3] = {FBX_IR_OP_MAXPOOL, FBX_IR_OP_AVGPOOL, FBX_IR_OP_CONV};
  const fbx_ir_auto_pad aps[2] = {FBX_IR_PAD_VALID, FBX_IR_PAD_NOTSET};
  int n_empty = 0;
  for (int o = 0; o < 3; o++)
    for (int a = 0; a < 2; a++)
      for (int64_t s = 1; s <= 3; s++)
        for (int64_t k = 1; k <= 4; k++)
          for (int64_t d = 1; d <= 2; d++)
            for (int64_t in = 1; in <= 6; in++)
              for (int ceil = 0; ceil <= 1; ceil++) {
                fbx_ir_node n = node(ops[o], aps[a], k, s, d);
                n.params.conv.ceil_mode = ceil;
                int64_t pb = aps[a] == FBX_IR_PAD_NOTSET && k > 1 ? 1 : 0;  // pads < kernel
                for (int i = 0; i < 4; i++) n.params.conv.pads[i] = pb;
                fbx_tensor x = X(in, in);
                int64_t kern[3], pads[6], os[3];
                fbx_status *st = fbx_ir_conv_geometry(&n, &x, NULL, kern, pads, os);
                // the spec (MaxPool): ek = d (k - 1) + 1; VALID: floor((in - ek) / s) + 1 (its
                // ceil_mode form ceil((in - ek + 1) / s) is the same); explicit pads:
                // floor or, with ceil_mode, ceil((in + 2 pb - ek) / s) + 1, less a last window
                // starting in the end pad; a size <= 0 is an empty output
                int64_t ek = d * (k - 1) + 1, num = in + 2 * pb - ek, want;
                if (ceil && aps[a] == FBX_IR_PAD_NOTSET && ops[o] != FBX_IR_OP_CONV) {
                  want = (num >= 0 ? (num + s - 1) / s : -((-num) / s)) + 1;
                  if (want > 0 && (want - 1) * s >= in + pb) want--;
                } else {
                  want = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
                }
                if (want < 0) want = 0;
                if (ops[o] == FBX_IR_OP_CONV && num < 0) {
                  CHECK(st != NULL, "Conv k%lld d%lld in %lld: window wider than the input accepted", (long long)k,
                        (long long)d, (long long)in);
                } else {
                  CHECK(!st && os[0] == want && os[1] == want, "%s %s ceil %d s%lld k%lld d%lld in %lld: %s out %lld, want %lld",
                        fbx_ir_op_name(ops[o]), a ? "NOTSET" : "VALID", ceil, (long long)s, (long long)k, (long long)d,
                        (long long)in, st ? fbx_status_message(st) : "", st ? -1LL : (long long)os[0], (long long)want);
                  n_empty += !st && want == 0;
                }
                fbx_status_free(st);
              }
  CHECK(n_empty > 20, "only %d empty-output pool cases", n_empty);
  printf("pool windows wider than the input: %d empty outputs checked\n", n_empty);
}

int main(void) {
  check_same();
  check_empty_pool();
  check_output_shape();
  check_overflow();
  printf("ir geometry: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
