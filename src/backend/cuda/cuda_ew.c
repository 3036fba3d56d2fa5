/* Elementwise ops on CUDA: a single EW1/EW2/EW3 node becomes a one-
 * instruction program and runs through the interpreter kernel in
 * cuda_ew.cu; FUSED_EW carries its own program and runs a kernel generated
 * for it with NVRTC (cuda_ew_rtc.c), or the interpreter where none can be
 * made. Broadcasting is resolved here, once per
 * node, into per-input strides over the output index space. */
#include <string.h>

#include "cuda_internal.h"

static bool fbx__ew_kind_ok(fbx_dtype dt, char *why, size_t n, const char *what) {
  int ek;
  if (fbx_cuda_ek(dt, &ek)) return true;
  snprintf(why, n, "%s dtype %s has no elementwise kernel (float32/float16/int/bool)", what, fbx_dtype_name(dt));
  return false;
}

bool fbx_cuda_s_ew(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size) {
  int n_regs = n_in;
  if (node->op == FBX_IR_OP_FUSED_EW) {
    const fbx_ir_ew_program *pg = node->params.fused.prog;
    if (!pg) {
      snprintf(why, why_size, "fused program missing");
      return false;
    }
    if (pg->n_inputs > FBX_CUDA_EW_MAX_IN || pg->n_inputs + pg->n_instrs > FBX_CUDA_EW_MAX_REGS) {
      snprintf(why, why_size, "fused program of %d inputs, %d instructions (at most %d inputs, %d registers)",
               pg->n_inputs, pg->n_instrs, FBX_CUDA_EW_MAX_IN, FBX_CUDA_EW_MAX_REGS);
      return false;
    }
    for (int i = 0; i < pg->n_instrs; i++)
      if (!fbx__ew_kind_ok(pg->instrs[i].dtype, why, why_size, fbx_ir_op_name(pg->instrs[i].op))) return false;
    n_regs = pg->n_inputs + pg->n_instrs;
  }
  if (n_in > FBX_CUDA_EW_MAX_IN) {
    snprintf(why, why_size, "%d inputs (at most %d)", n_in, FBX_CUDA_EW_MAX_IN);
    return false;
  }
  (void)n_regs;
  /* a single op's result kind: CAST names it (to float64, say, which no kernel stores) */
  if (node->op == FBX_IR_OP_CAST && !fbx__ew_kind_ok(node->params.ew.to, why, why_size, "CAST result")) return false;
  for (int i = 0; i < n_in; i++)
    if (in[i].rank >= 0 && !fbx__ew_kind_ok(in[i].dtype, why, why_size, "input")) return false;
  return true;
}

fbx_status *fbx_cuda_k_ew(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *y = &out[0];
  fbx_cuda_ew_args a;
  memset(&a, 0, sizeof a);
  fbx_cuda_ew_ins one;
  const fbx_cuda_ew_ins *prog_host = &one;
  fbx_cuda_ew_ins prog[FBX_CUDA_EW_MAX_REGS]; /* a fused program's instructions (bounded by supports): no allocation per run */
  int ek;
  if (!fbx_cuda_ek(y->dtype, &ek)) return FBX_ERR_NOTIMPL("device 'cuda': %s: output dtype %s", fbx_ir_op_name(node->op), fbx_dtype_name(y->dtype));
  a.out_ek = ek;
  a.out = y->data;
  if (node->op == FBX_IR_OP_FUSED_EW) {
    const fbx_ir_ew_program *pg = node->params.fused.prog;
    if (pg->n_inputs != n_in) return FBX_ERR_ARG("device 'cuda': FUSED_EW: %d inputs for a %d-input program", n_in, pg->n_inputs);
    if (pg->n_instrs > FBX_CUDA_EW_MAX_REGS)
      return FBX_ERR_NOTIMPL("device 'cuda': FUSED_EW: %d instructions (at most %d)", pg->n_instrs, FBX_CUDA_EW_MAX_REGS);
    for (int i = 0; i < pg->n_instrs; i++) {
      const fbx_ir_ew_instr *s = &pg->instrs[i];
      int iek = 0;
      fbx_cuda_ek(s->dtype, &iek);
      prog[i] = (fbx_cuda_ew_ins){.op = s->op, .a = s->a, .b = s->b, .c = s->c, .ek = iek,
                                   .alpha = s->params.ew.alpha, .beta = s->params.ew.beta, .gamma = s->params.ew.gamma};
    }
    prog_host = prog;
    a.n_ins = pg->n_instrs;
    a.out_reg = pg->out_reg;
    info->variant = "ew_fused_interp";
    info->reason = "fused elementwise program, one thread per element (interpreter)";
  } else {
    one = (fbx_cuda_ew_ins){.op = node->op, .a = 0, .b = n_in > 1 ? 1 : 0, .c = n_in > 2 ? 2 : 0, .ek = ek,
                            .alpha = node->params.ew.alpha, .beta = node->params.ew.beta, .gamma = node->params.ew.gamma};
    a.n_ins = 1;
    a.out_reg = n_in;
    info->variant = "ew";
    info->reason = "one elementwise op, one thread per element";
  }
  a.n = fbx_tensor_numel(y);
  a.rank = y->rank;
  a.n_in = n_in;
  for (int d = 0; d < y->rank; d++) a.out_dims[d] = y->dims[d];
  for (int k = 0; k < n_in; k++) {
    const fbx_tensor *x = &in[k];
    int xek;
    if (!fbx_cuda_ek(x->dtype, &xek) || x->rank > y->rank) {
      return FBX_ERR_NOTIMPL("device 'cuda': %s: input %d (%s, rank %d)", fbx_ir_op_name(node->op), k,
                             fbx_dtype_name(x->dtype), x->rank);
    }
    a.in[k] = x->data;
    a.in_ek[k] = (unsigned char)xek;
    int64_t st[FBX_MAX_RANK];
    fbx_cuda_strides(x, st);
    bool same = x->rank == y->rank;
    for (int d = 0; d < y->rank; d++) {
      int j = d - (y->rank - x->rank);
      int64_t dim = j >= 0 ? x->dims[j] : 1;
      a.in_strides[k][d] = (j < 0 || dim == 1) ? 0 : st[j];
      if (dim != y->dims[d]) same = false;
    }
    a.in_same[k] = same;
  }
  if (a.n == 0) return NULL;
  if (node->op == FBX_IR_OP_FUSED_EW) { /* a kernel generated for this program, when NVRTC makes one */
    int err = 0;
    if (fbx_cuda_ew_rtc_launch(c, &a, prog_host, &err)) {
      info->variant = "ew_fused_nvrtc";
      info->reason = "fused elementwise program compiled with NVRTC (program, kinds and broadcast pattern baked in)";
      return fbx_cuda_launched(err, fbx_ir_op_name(node->op));
    }
  }
  if (a.n_ins <= FBX_CUDA_EW_INLINE) { /* no upload: the program rides in the launch parameters */
    memcpy(a.inline_prog, prog_host, sizeof(fbx_cuda_ew_ins) * (size_t)a.n_ins);
  } else {
    void *dprog = NULL;
    FBX_TRY(fbx_cuda_upload_params(c, prog_host, sizeof(fbx_cuda_ew_ins) * (size_t)a.n_ins, &dprog));
    a.prog = dprog;
  }
  return fbx_cuda_launched(fbx_cuda_launch_ew(&a, c->stream), fbx_ir_op_name(node->op));
}
