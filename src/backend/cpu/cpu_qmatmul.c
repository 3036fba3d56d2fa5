/* MATMUL_INT (A, B[, a_zp][, b_zp]) -> int32: numpy batched matmul (the shared
 * MatMul geometry) of 8-bit operands, exact int32 accumulation over the integer
 * GEMM of cpu_qgemm.c (VNNI / AVX2 / scalar, chosen at run time); a_zp scalar or
 * per row of A [M], b_zp scalar or per column of B [N].
 *
 * Constant B (quantize_dynamic's weights, (K, N)): packed once into the path's
 * 16-column panels with their column sums at node_prepare (fbx_cpu_qmatmul_prepare);
 * a run packs only A. Other B: packed per distinct batch matrix per run.
 *
 * Epilogue (params.matmul.epilogue, exec_fuse_epilogue.c; quantize_dynamic's
 * Cast -> Mul(a_scale * w_scale) -> Add(bias) [-> Add(residual)]): when the
 * program is that chain (a Cast of the accumulator, then Mul/Add/Sub with values
 * per column or scalars, or with tensors of the output's shape; instructions on
 * those values alone are evaluated once per run into column vectors), the GEMM
 * kernel applies it in registers and stores floats, so the int32 never goes to
 * memory; any other program runs through the generic epilogue (fbx_cpu_epi_apply)
 * on each block right after the kernel stored it.
 *
 * Work split: row blocks (multiples of 8) x panel blocks, about 2 units per
 * thread; M = 1 (GEMV) splits the columns only. */
#include <string.h>

#include "cpu_internal.h"
#include "cpu_qgemm.h"
#include "cpu_qint.h"

/* ---- prepacked constant B ---- */

typedef struct fbx__qm_state {
  fbx_qg_path path;
  int64_t K, N;
  bool b_signed;
  uint8_t *panels; /* ceil(N/16) panels of fbx_cpu_qg_panel_bytes(path, K) */
  int32_t *cs;     /* column sums of b', roundup(N, 16) entries */
} fbx__qm_state;

void fbx_cpu_qmatmul_release(void *state) {
  fbx__qm_state *s = state;
  if (!s) return;
  fbx_free_aligned(s->panels);
  fbx_free_aligned(s->cs);
  fbx_free(s);
}

fbx_status *fbx_cpu_qmatmul_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                    const fbx_tensor *inputs, void **state) {
  (void)c;
  (void)node;
  (void)inputs;
  *state = NULL;
  if (!const_inputs || !const_inputs[1]) return NULL;
  const fbx_tensor *b = const_inputs[1];
  if (!fbx_cpu_q_dt(b->dtype) || b->rank != 2 || !b->data) return NULL;
  int64_t K = b->dims[0], N = b->dims[1];
  if (K <= 0 || N <= 0) return NULL;
  fbx_qg_path path = fbx_cpu_qg_best();
  int64_t np = (N + FBX_QG_NR - 1) / FBX_QG_NR;
  fbx__qm_state *s = fbx_calloc(1, sizeof(*s));
  const uint8_t **rows = fbx_calloc((size_t)K, sizeof(*rows));
  if (s) {
    s->panels = fbx_malloc_aligned((size_t)np * fbx_cpu_qg_panel_bytes(path, K));
    s->cs = fbx_malloc_aligned((size_t)(np * FBX_QG_NR) * sizeof(int32_t));
  }
  if (!s || !rows || !s->panels || !s->cs) {
    fbx_free(rows);
    fbx_cpu_qmatmul_release(s);
    return FBX_ERR_OOM();
  }
  s->path = path;
  s->K = K;
  s->N = N;
  s->b_signed = b->dtype == FBX_DTYPE_I8;
  for (int64_t k = 0; k < K; k++) rows[k] = (const uint8_t *)b->data + k * N;
  fbx_cpu_qg_pack_b(path, rows, s->b_signed, K, N, s->panels, s->cs);
  fbx_free(rows);
  *state = s;
  return NULL;
}

/* ---- the epilogue as register steps (cpu_qgemm.h fbx_qg_out) ---- */

#define FBX__QM_MAX_COLV 12 /* column vectors (inputs per column, scalars, values computed from them) */

enum { FBX__QM_R_NONE = 0, FBX__QM_R_SELF, FBX__QM_R_FLOW, FBX__QM_R_COL, FBX__QM_R_TENSOR, FBX__QM_R_SCALAR };

/* Compiles prog into o when it fits the register form of cpu_qgemm.h: a Cast of the accumulator
 * (register reg) to float starts the running value V; then Mul/Add/Sub/Div of a running value with a
 * value per column (or a scalar), a tensor of the output's shape, or another running value, and Erf
 * of a running value; instructions on per-column values alone are evaluated here, once, into column
 * vectors. A running value that a later instruction reads again is saved to a slot. colv:
 * FBX__QM_MAX_COLV vectors of NP = roundup(N, 16) floats. Returns false (o unusable) for any other
 * program. */
static bool fbx__qm_out_compile(const fbx_ir_ew_program *prog, int reg, const fbx_tensor *in, int n_in, int first,
                                const fbx_tensor *y, int64_t N, float *colv, fbx_qg_out *o) {
  int nr = prog->n_inputs + prog->n_instrs;
  if (nr > 64 || n_in - first != prog->n_inputs - 1) return false;
  int64_t NP = (N + FBX_QG_NR - 1) / FBX_QG_NR * FBX_QG_NR;
  uint8_t kind[64];
  const float *ptr[64];
  int slot_of[64], last_use[64], ncol = 0, cur = -1, nslots = 0;
  memset(o, 0, sizeof *o);
  o->ldt = N;
  for (int r = 0; r < nr; r++) {
    slot_of[r] = -1;
    last_use[r] = -1;
  }
  for (int i = 0; i < prog->n_instrs; i++) { /* the last instruction reading each register */
    const fbx_ir_ew_instr *ins = &prog->instrs[i];
    int cls = fbx_ir_op_class(ins->op);
    last_use[ins->a] = i;
    if (cls >= FBX_IR_CLASS_EW2) last_use[ins->b] = i;
    if (cls == FBX_IR_CLASS_EW3) last_use[ins->c] = i;
  }
  for (int r = 0, k = first; r < prog->n_inputs; r++) {
    if (r == reg) {
      kind[r] = FBX__QM_R_SELF;
      continue;
    }
    const fbx_tensor *t = &in[k++];
    kind[r] = FBX__QM_R_NONE;
    if (t->dtype != FBX_DTYPE_F32 || !t->data) continue;
    int64_t n = fbx_cpu_numel(t);
    bool col = t->rank >= 1 && t->dims[t->rank - 1] == N && n == N && t->rank <= y->rank;
    bool same = t->rank == y->rank && n == fbx_cpu_numel(y);
    for (int d = 0; same && d < y->rank; d++) same = t->dims[d] == y->dims[d];
    if (same && !(n == N && col)) {
      kind[r] = FBX__QM_R_TENSOR;
      ptr[r] = t->data;
    } else if (n == 1 || col) { /* read in place */
      kind[r] = n == 1 ? FBX__QM_R_SCALAR : FBX__QM_R_COL;
      ptr[r] = t->data;
    }
  }
#define FBX__QM_STEP(KIND, OP, SRC, SLOT, P)                                                                 \
  do {                                                                                                       \
    if (o->n_steps >= FBX_QG_OUT_MAX_STEPS) return false;                                                    \
    o->step[o->n_steps].kind = (KIND), o->step[o->n_steps].op = (OP), o->step[o->n_steps].src = (SRC);       \
    o->step[o->n_steps].slot = (uint8_t)(SLOT), o->step[o->n_steps].p = (P), o->n_steps++;                   \
  } while (0)
  for (int i = 0; i < prog->n_instrs; i++) {
    const fbx_ir_ew_instr *ins = &prog->instrs[i];
    int dst = prog->n_inputs + i;
    kind[dst] = FBX__QM_R_NONE;
    if (ins->dtype != FBX_DTYPE_F32) return false;
    if (ins->op == FBX_IR_OP_CAST) {
      if (kind[ins->a] != FBX__QM_R_SELF || cur >= 0) return false;
      kind[dst] = FBX__QM_R_FLOW;
      cur = dst;
      continue;
    }
    bool erf = ins->op == FBX_IR_OP_ERF;
    int op = ins->op == FBX_IR_OP_MUL ? FBX_QG_OUT_MUL : ins->op == FBX_IR_OP_ADD ? FBX_QG_OUT_ADD
             : ins->op == FBX_IR_OP_SUB ? FBX_QG_OUT_SUB : ins->op == FBX_IR_OP_DIV ? FBX_QG_OUT_DIV : -1;
    if (!erf && op < 0) return false;
    int ka = kind[ins->a], kb = erf ? FBX__QM_R_NONE : kind[ins->b];
    bool ca = ka == FBX__QM_R_COL || ka == FBX__QM_R_SCALAR, cb = kb == FBX__QM_R_COL || kb == FBX__QM_R_SCALAR;
    if (!erf && ca && cb) { /* values per column (or scalars) alone: once, here */
      if (ncol >= FBX__QM_MAX_COLV) return false;
      float *v = colv + ncol++ * NP;
      const float *a = ptr[ins->a], *b = ptr[ins->b];
      bool sa = ka == FBX__QM_R_SCALAR, sb = kb == FBX__QM_R_SCALAR;
      int64_t n = sa && sb ? 1 : N;
      for (int64_t j = 0; j < n; j++) {
        float x = a[sa ? 0 : j], z = b[sb ? 0 : j];
        v[j] = op == FBX_QG_OUT_MUL ? x * z : op == FBX_QG_OUT_ADD ? x + z : op == FBX_QG_OUT_SUB ? x - z : x / z;
      }
      kind[dst] = sa && sb ? FBX__QM_R_SCALAR : FBX__QM_R_COL;
      ptr[dst] = v;
      continue;
    }
    bool fa = ka == FBX__QM_R_FLOW, fb = kb == FBX__QM_R_FLOW;
    if (!fa && !fb) return false;
    /* V must hold one running operand; the other (if running) must sit in a slot */
    int vop = fa && ins->a == cur ? ins->a : fb && ins->b == cur ? ins->b : -1;
    if (vop < 0) return false; /* an older running value as the only running operand: not this form */
    bool twice = !erf && ins->a == cur && ins->b == cur; /* V op V */
    if ((last_use[cur] > i || twice) && slot_of[cur] < 0) { /* V is read again: keep it */
      if (nslots >= FBX_QG_OUT_SLOTS) return false;
      slot_of[cur] = nslots++;
      FBX__QM_STEP(FBX_QG_OUT_SAVE, 0, 0, slot_of[cur], NULL);
    }
    if (erf) {
      FBX__QM_STEP(FBX_QG_OUT_ERF, 0, 0, 0, NULL);
    } else {
      bool v_left = vop == ins->a;
      int other = v_left ? ins->b : ins->a, ko = kind[other];
      int src, slot = 0;
      const float *p = NULL;
      if (ko == FBX__QM_R_FLOW) {
        if (other == cur) {
          slot = slot_of[cur]; /* V op V: the copy saved above */
        } else if ((slot = slot_of[other]) < 0) {
          return false;
        }
        src = FBX_QG_OUT_SLOT;
      } else if (ko == FBX__QM_R_COL || ko == FBX__QM_R_TENSOR || ko == FBX__QM_R_SCALAR) {
        src = ko == FBX__QM_R_TENSOR ? FBX_QG_OUT_TENSOR : ko == FBX__QM_R_SCALAR ? FBX_QG_OUT_SCALAR : FBX_QG_OUT_COL;
        p = ptr[other];
      } else {
        return false;
      }
      if (!v_left) op = op == FBX_QG_OUT_SUB ? FBX_QG_OUT_RSUB : op == FBX_QG_OUT_DIV ? FBX_QG_OUT_RDIV : op;
      FBX__QM_STEP(FBX_QG_OUT_BIN, op, src, slot, p);
    }
    kind[dst] = FBX__QM_R_FLOW;
    cur = dst;
  }
#undef FBX__QM_STEP
  return cur >= 0 && prog->out_reg == cur;
}

/* ---- the kernel ---- */

/* out[i] = base - zp[i] for i < n (zp: the optional zero point input idx, 1 or n entries; absent: 0),
 * out[i] = base for n <= i < n_out. */
static void fbx__qm_offsets(const fbx_tensor *in, int n_in, int idx, int64_t n, int64_t n_out, int32_t base,
                            int32_t *out) {
  bool has = fbx_cpu_present(in, n_in, idx);
  const uint8_t *z = has ? in[idx].data : NULL;
  bool sgn = has && in[idx].dtype == FBX_DTYPE_I8, one = has && fbx_cpu_numel(&in[idx]) == 1;
  for (int64_t i = 0; i < n_out; i++) {
    int32_t v = !z || i >= n ? 0 : sgn ? (int32_t)(int8_t)z[one ? 0 : i] : (int32_t)z[one ? 0 : i];
    out[i] = base - v;
  }
}

typedef struct fbx__qm_job {
  fbx_qg_path path;
  const uint8_t *a, *b; /* this batch item */
  int32_t *y;
  int64_t M, N, K, kp, np, mstep, pstep, nmb, npb, ybase; /* ybase: flat output index of this item */
  bool a_signed, b_signed;
  uint8_t *ap;
  const uint8_t *bp;
  uint8_t *bp_own; /* per-run B panels (no prepacked state) */
  int32_t *rs, *alpha, *beta, *cb;
  const int32_t *cs;
  int32_t *cs_own;
  const uint8_t **rows; /* per worker: K pointers */
  const fbx_qg_out *out; /* register epilogue, or NULL */
  fbx_cpu_epi *epi;      /* generic epilogue (prog NULL: none) */
} fbx__qm_job;

static void fbx__qm_pack_b_task(void *arg, int64_t q0, int64_t q1, int worker) {
  const fbx__qm_job *j = arg;
  const uint8_t **rows = j->rows + (size_t)worker * (size_t)j->K;
  int64_t c0 = q0 * FBX_QG_NR, c1 = q1 * FBX_QG_NR < j->N ? q1 * FBX_QG_NR : j->N;
  for (int64_t k = 0; k < j->K; k++) rows[k] = j->b + k * j->N + c0;
  size_t pb = fbx_cpu_qg_panel_bytes(j->path, j->K);
  fbx_cpu_qg_pack_b(j->path, rows, j->b_signed, j->K, c1 - c0, j->bp_own + (size_t)q0 * pb, j->cs_own + c0);
}

static void fbx__qm_pack_a_task(void *arg, int64_t m0, int64_t m1, int worker) {
  (void)worker;
  const fbx__qm_job *j = arg;
  fbx_cpu_qg_pack_a(j->path, j->a + m0 * j->K, j->K, j->a_signed, m1 - m0, j->K,
                    j->ap + (size_t)m0 * (size_t)j->kp * fbx_cpu_qg_esz(j->path), j->rs + m0);
}

static void fbx__qm_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__qm_job *j = arg;
  size_t pb = fbx_cpu_qg_panel_bytes(j->path, j->K), esz = fbx_cpu_qg_esz(j->path);
  for (int64_t t = t0; t < t1; t++) {
    int64_t mb = t / j->npb, qb = t % j->npb;
    int64_t m0 = mb * j->mstep, m1 = m0 + j->mstep < j->M ? m0 + j->mstep : j->M;
    int64_t q0 = qb * j->pstep, c0 = q0 * FBX_QG_NR, c1 = (q0 + j->pstep) * FBX_QG_NR;
    if (c1 > j->N) c1 = j->N;
    if (m1 <= m0 || c1 <= c0) continue;
    fbx_qg_out ob; /* operands moved to this block: tensors by (item, m0, c0), columns by c0 */
    const fbx_qg_out *o = fbx_cpu_qg_out_at(j->out, j->ybase + m0 * j->N + c0, c0, &ob);
    fbx_cpu_qg_kernel_out(j->path, j->ap + (size_t)m0 * (size_t)j->kp * esz, m1 - m0, j->K, j->rs + m0,
                          j->alpha + m0, j->bp + (size_t)q0 * pb, c1 - c0, j->beta + c0, j->cb + c0,
                          j->y + m0 * j->N + c0, j->N, o);
    if (j->epi->prog && !o) /* the block is still in cache: the generic epilogue turns it into floats */
      for (int64_t m = m0; m < m1; m++) {
        int64_t e0 = j->ybase + m * j->N;
        fbx_cpu_epi_apply(j->epi, e0 + c0, e0 + c1, worker);
      }
  }
}

fbx_status *fbx_cpu_k_MATMUL_INT(FBX_CPU_KERNEL_ARGS) {
  (void)n_out;
  if (n_in < 2) return FBX_ERR_ARG("MATMUL_INT: needs A and B");
  const fbx_tensor *A = &in[0], *B = &in[1];
  fbx_tensor *Y = &out[0];
  int ereg;
  const fbx_ir_ew_program *prog = fbx_ir_node_epilogue(node, &ereg);
  if (!fbx_cpu_q_dt(A->dtype) || !fbx_cpu_q_dt(B->dtype) || (Y->dtype != FBX_DTYPE_I32 && !prog))
    return FBX_ERR_NOTIMPL("MATMUL_INT: dtypes %s x %s -> %s (u8/s8 -> int32 only)", fbx_dtype_name(A->dtype),
                           fbx_dtype_name(B->dtype), fbx_dtype_name(Y->dtype));
  if (fbx_dtype_size(Y->dtype) != 4) return FBX_ERR_NOTIMPL("MATMUL_INT: epilogue to %s", fbx_dtype_name(Y->dtype));
  fbx_matmul_geom g;
  FBX_TRY(fbx_matmul_geom_get(node, A, B, Y, &g));
  if (g.ta || g.tb) return FBX_ERR_NOTIMPL("MATMUL_INT: transposed operands");
  FBX_TRY(fbx_cpu_q_zp_check("MATMUL_INT", in, n_in, 2, A->dtype, g.M, "a_zero_point"));
  FBX_TRY(fbx_cpu_q_zp_check("MATMUL_INT", in, n_in, 3, B->dtype, g.N, "b_zero_point"));
  info->flops = 2.0 * (double)g.nbatch * (double)g.M * (double)g.N * (double)g.K;
  if (g.nbatch * g.M * g.N == 0) return NULL;
  fbx__qm_job j;
  memset(&j, 0, sizeof j);
  j.path = fbx_cpu_qg_best();
  j.M = g.M;
  j.N = g.N;
  j.K = g.K;
  j.kp = fbx_cpu_qg_kpad(j.path, j.K);
  j.np = (g.N + FBX_QG_NR - 1) / FBX_QG_NR;
  j.a_signed = A->dtype == FBX_DTYPE_I8;
  j.b_signed = B->dtype == FBX_DTYPE_I8;
  const fbx__qm_state *st = state;
  bool pre = st && st->path == j.path && st->K == g.K && st->N == g.N && st->b_signed == j.b_signed && g.sb == 1;
  int64_t nt = c->threads > 1 ? c->threads : 1, NP = j.np * FBX_QG_NR;
  size_t esz = fbx_cpu_qg_esz(j.path);
  size_t a_b = ((size_t)(g.M * j.kp) * esz + 63) / 64 * 64;
  size_t b_b = pre ? 0 : ((size_t)j.np * fbx_cpu_qg_panel_bytes(j.path, j.K) + 63) / 64 * 64;
  size_t v_b = ((size_t)(2 * g.M + 3 * NP) * sizeof(int32_t) + 63) / 64 * 64;
  size_t r_b = ((size_t)(nt * j.K) * sizeof(void *) + 63) / 64 * 64;
  size_t c_b = prog ? (size_t)(FBX__QM_MAX_COLV * NP) * sizeof(float) : 0;
  fbx_cpu_epi epi;
  void *vmem = NULL;
  FBX_TRY(fbx_cpu_epi_begin(c, node, in, n_in, 4, Y, a_b + b_b + v_b + r_b + c_b, &vmem, &epi));
  uint8_t *mem = vmem;
  if (!mem) return FBX_ERR_OOM();
  if (g.K == 0) { /* empty sums: zeros, then the epilogue */
    memset(Y->data, 0, fbx_tensor_nbytes(Y));
    if (prog) fbx_cpu_epi_apply(&epi, 0, fbx_cpu_numel(Y), 0);
    return fbx_cpu_epi_end(&epi);
  }
  j.ap = mem;
  j.bp_own = mem + a_b;
  j.rs = (int32_t *)(void *)(mem + a_b + b_b);
  j.alpha = j.rs + g.M;
  j.cs_own = j.alpha + g.M;
  j.beta = j.cs_own + NP;
  j.cb = j.beta + NP;
  j.rows = (const uint8_t **)(void *)(mem + a_b + b_b + v_b);
  float *colv = (float *)(void *)(mem + a_b + b_b + v_b + r_b);
  j.epi = &epi;
  fbx_qg_out ro;
  if (prog && fbx__qm_out_compile(prog, ereg, in, n_in, 4, Y, g.N, colv, &ro)) j.out = &ro;
  j.bp = pre ? st->panels : j.bp_own;
  j.cs = pre ? st->cs : j.cs_own;
  int oa = fbx_cpu_qg_oa(j.path, j.a_signed), ob = fbx_cpu_qg_ob(j.path, j.b_signed);
  fbx__qm_offsets(in, n_in, 2, g.M, g.M, oa, j.alpha);
  fbx__qm_offsets(in, n_in, 3, g.N, NP, ob, j.beta);
  /* work split: row blocks of 8 x panel blocks, about 2 units per thread */
  j.mstep = g.M <= 8 ? g.M : ((g.M + 2 * nt - 1) / (2 * nt) + 7) / 8 * 8;
  if (j.mstep < 8 && g.M > 8) j.mstep = 8;
  j.nmb = (g.M + j.mstep - 1) / j.mstep;
  j.pstep = j.nmb >= 2 * nt ? j.np : (j.np + 2 * nt - 1) / (2 * nt);
  if (j.pstep < 1) j.pstep = 1;
  j.npb = (j.np + j.pstep - 1) / j.pstep;
  const char *vn[FBX_QG_LAST + 1][2] = {{"matmul_int_scalar", "matmul_int_scalar_prepacked"},
                                        {"matmul_int_avx2", "matmul_int_avx2_prepacked"},
                                        {"matmul_int_vnni512", "matmul_int_vnni512_prepacked"},
                                        {"matmul_int_amx", "matmul_int_amx_prepacked"}};
  info->variant = vn[j.path][pre];
  info->reason = pre ? (j.out ? "constant B packed at compile + int GEMM, Cast/Mul/Add/Erf epilogue in registers (no int32 store)"
                              : prog ? "constant B packed at compile + int GEMM + generic epilogue per block"
                                     : "constant B packed at compile + int GEMM (int32 accumulation, exact)")
                     : (j.out ? "B packed per run + int GEMM, Cast/Mul/Add/Erf epilogue in registers (no int32 store)"
                              : prog ? "B packed per run + int GEMM + generic epilogue per block"
                                     : "B packed into 16-column panels per batch item + int GEMM (int32 accumulation, exact)");
  int64_t last_ob = -1;
  for (int64_t bi = 0; bi < g.nbatch; bi++) {
    int64_t oa_i, ob_i;
    fbx_matmul_geom_batch(&g, bi, &oa_i, &ob_i);
    j.a = (const uint8_t *)A->data + oa_i * g.M * g.K;
    j.b = (const uint8_t *)B->data + ob_i * g.K * g.N;
    j.y = (int32_t *)Y->data + bi * g.M * g.N;
    j.ybase = bi * g.M * g.N;
    if (!pre && ob_i != last_ob) { /* B (and its column sums) packed once per distinct B matrix */
      fbx_cpu_par(c, j.np, 1, fbx__qm_pack_b_task, &j);
      last_ob = ob_i;
    }
    if (bi == 0 || !pre)
      for (int64_t n = 0; n < NP; n++) j.cb[n] = (int32_t)((uint32_t)j.cs[n] + (uint32_t)j.K * (uint32_t)j.beta[n]);
    fbx_cpu_par(c, g.M, 64, fbx__qm_pack_a_task, &j);
    fbx_cpu_par(c, j.nmb * j.npb, 1, fbx__qm_task, &j);
  }
  return fbx_cpu_epi_end(&epi);
}
