/* MAXPOOL / AVGPOOL / LPPOOL (1-3 spatial dims, pads, strides, dilations,
 * ceil_mode via the given output shape, count_include_pad) and the global
 * pools. F32. Parallel over (n, c) planes. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

typedef struct fbx__pl_job {
  const float *x;
  float *y;
  int64_t *idx;          /* MAXPOOL indices output or NULL */
  fbx_ir_op op;
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  int include_pad;
  double p;
} fbx__pl_job;

static void fbx__pl_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__pl_job *j = arg;
  int64_t IS = j->in[0] * j->in[1] * j->in[2], OS = j->out[0] * j->out[1] * j->out[2];
  for (int64_t p = p0; p < p1; p++) {
    const float *x = j->x + p * IS;
    float *y = j->y + p * OS;
    for (int64_t od = 0; od < j->out[0]; od++)
      for (int64_t oh = 0; oh < j->out[1]; oh++)
        for (int64_t ow = 0; ow < j->out[2]; ow++) {
          int64_t o[3] = {od, oh, ow}, st[3], en[3], lo[3], hi[3];
          int64_t pad_count = 1;
          for (int q = 0; q < 3; q++) {
            st[q] = o[q] * j->s[q] - j->pb[q];
            en[q] = st[q] + (j->k[q] - 1) * j->d[q] + 1;
            /* window limited to the padded extent (ceil_mode windows may pass it) */
            int64_t pe = en[q] < j->in[q] + j->pe[q] ? en[q] : j->in[q] + j->pe[q];
            pad_count *= pe - st[q];
            lo[q] = st[q];
            hi[q] = en[q];
          }
          double acc = j->op == FBX_IR_OP_MAXPOOL ? -INFINITY : 0.0;
          int64_t cnt = 0, arg = -1;
          for (int64_t a = lo[0]; a < hi[0]; a += j->d[0]) {
            if (a < 0 || a >= j->in[0]) continue;
            for (int64_t b = lo[1]; b < hi[1]; b += j->d[1]) {
              if (b < 0 || b >= j->in[1]) continue;
              for (int64_t c = lo[2]; c < hi[2]; c += j->d[2]) {
                if (c < 0 || c >= j->in[2]) continue;
                int64_t off = (a * j->in[1] + b) * j->in[2] + c;
                float v = x[off];
                if (j->op == FBX_IR_OP_MAXPOOL) {
                  if (v > acc || arg < 0) { acc = v; arg = off; }
                } else if (j->op == FBX_IR_OP_LPPOOL) {
                  acc += pow(fabs(v), j->p);
                } else {
                  acc += v;
                }
                cnt++;
              }
            }
          }
          int64_t oi = (od * j->out[1] + oh) * j->out[2] + ow;
          if (j->op == FBX_IR_OP_AVGPOOL) acc = acc / (double)(j->include_pad ? pad_count : (cnt ? cnt : 1));
          else if (j->op == FBX_IR_OP_LPPOOL) acc = pow(acc, 1.0 / j->p);
          y[oi] = (float)acc;
          if (j->idx) j->idx[p * OS + oi] = p * IS + (arg < 0 ? 0 : arg);
        }
  }
}

static fbx_status *fbx__pool(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_tensor *y = &out[0];
  const char *op = fbx_ir_op_name(node->op);
  int nd = x->rank - 2;
  if (nd < 1 || nd > 3 || x->dtype != FBX_DTYPE_F32) return FBX_ERR_NOTIMPL("%s: F32 with 1..3 spatial dims only", op);
  const typeof(node->params.conv) *p = &node->params.conv;
  fbx__pl_job j = {.x = x->data, .y = y->data, .op = node->op, .include_pad = p->count_include_pad,
                   .p = p->p > 0 ? (double)p->p : 2.0};
  for (int i = 0; i < 3; i++) {
    int sd = i - (3 - nd);
    if (sd < 0) {
      j.in[i] = j.out[i] = j.k[i] = j.s[i] = j.d[i] = 1;
      j.pb[i] = j.pe[i] = 0;
      continue;
    }
    j.in[i] = x->dims[2 + sd];
    j.out[i] = y->dims[2 + sd];
    j.k[i] = p->kernel[sd];
    j.s[i] = p->strides[sd] > 0 ? p->strides[sd] : 1;
    j.d[i] = p->dilations[sd] > 0 ? p->dilations[sd] : 1;
    int64_t ek = (j.k[i] - 1) * j.d[i] + 1;
    if (p->auto_pad == FBX_IR_PAD_SAME_UPPER || p->auto_pad == FBX_IR_PAD_SAME_LOWER) {
      int64_t total = (j.out[i] - 1) * j.s[i] + ek - j.in[i];
      if (total < 0) total = 0;
      j.pb[i] = p->auto_pad == FBX_IR_PAD_SAME_UPPER ? total / 2 : total - total / 2;
      j.pe[i] = total - j.pb[i];
    } else if (p->auto_pad == FBX_IR_PAD_VALID) {
      j.pb[i] = j.pe[i] = 0;
    } else {
      j.pb[i] = p->pads[sd];
      j.pe[i] = p->pads[nd + sd];
    }
    if (j.k[i] < 1) return FBX_ERR_ARG("%s: kernel size %lld", op, (long long)j.k[i]);
  }
  if (node->op == FBX_IR_OP_MAXPOOL && n_out > 1 && out[1].data && out[1].dtype == FBX_DTYPE_I64) j.idx = out[1].data;
  int64_t planes = x->dims[0] * x->dims[1];
  info->variant = "pool_direct";
  fbx_cpu_par(c, planes, 1, fbx__pl_task, &j);
  return NULL;
}

fbx_status *fbx_cpu_k_MAXPOOL(FBX_CPU_KERNEL_ARGS) { return fbx__pool(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_AVGPOOL(FBX_CPU_KERNEL_ARGS) { return fbx__pool(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_LPPOOL(FBX_CPU_KERNEL_ARGS) { return fbx__pool(c, node, state, in, n_in, out, n_out, info); }

typedef struct fbx__gp_job { const float *x; float *y; int64_t S; bool max; } fbx__gp_job;

static void fbx__gp_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__gp_job *j = arg;
  for (int64_t p = p0; p < p1; p++) {
    const float *x = j->x + p * j->S;
    if (j->max) {
      float m = -INFINITY;
      for (int64_t i = 0; i < j->S; i++) m = x[i] > m ? x[i] : m;
      j->y[p] = m;
    } else {
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = 0;
      for (; i + 4 <= j->S; i += 4) { s0 += x[i]; s1 += x[i + 1]; s2 += x[i + 2]; s3 += x[i + 3]; }
      for (; i < j->S; i++) s0 += x[i];
      j->y[p] = (float)(((double)s0 + s1 + s2 + s3) / (double)(j->S ? j->S : 1));
    }
  }
}

static fbx_status *fbx__gpool(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (x->dtype != FBX_DTYPE_F32 || x->rank < 2) return FBX_ERR_NOTIMPL("%s: F32 NC... only", fbx_ir_op_name(node->op));
  fbx__gp_job j = {.x = x->data, .y = out[0].data, .S = 1, .max = node->op == FBX_IR_OP_GLOBAL_MAXPOOL};
  for (int d = 2; d < x->rank; d++) j.S *= x->dims[d];
  int64_t planes = x->dims[0] * x->dims[1];
  if (planes * j.S >= 65536) fbx_cpu_par(c, planes, 1 + 16384 / (j.S + 1), fbx__gp_task, &j);
  else fbx__gp_task(&j, 0, planes, 0);
  return NULL;
}

fbx_status *fbx_cpu_k_GLOBAL_AVGPOOL(FBX_CPU_KERNEL_ARGS) { return fbx__gpool(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_GLOBAL_MAXPOOL(FBX_CPU_KERNEL_ARGS) { return fbx__gpool(c, node, state, in, n_in, out, n_out, info); }
