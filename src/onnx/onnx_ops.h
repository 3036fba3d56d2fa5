/* Private to src/onnx/: the registry entry type, claim/translate contexts,
 * shared helpers (onnx_ops_common.c) and the per-family claim checks and
 * translators (onnx_ops_<family>.c). */
#ifndef FBX_ONNX_OPS_H
#define FBX_ONNX_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/checked.h"
#include "../base/tensor.h"
#include "../ir/ir_graph.h"
#include "onnx_graph.h"

/* The newest opset whose semantics we have checked for every registered op
 * (opsets 21/22 only widened types, which the dtype checks decline). */
#define FBX_ONNX_OPSET_MAX 22

/* ---- dtype masks (bit = 1u << fbx_dtype) ---- */
#define FBX__DT(d) (1u << (unsigned)FBX_DTYPE_##d)
#define FBX_ONNX_DT_FLOAT (FBX__DT(F32) | FBX__DT(F16) | FBX__DT(F64))
#define FBX_ONNX_DT_F32_F64 (FBX__DT(F32) | FBX__DT(F64))
#define FBX_ONNX_DT_SINT (FBX__DT(I8) | FBX__DT(I16) | FBX__DT(I32) | FBX__DT(I64))
#define FBX_ONNX_DT_UINT (FBX__DT(U8) | FBX__DT(U16) | FBX__DT(U32) | FBX__DT(U64))
#define FBX_ONNX_DT_INT (FBX_ONNX_DT_SINT | FBX_ONNX_DT_UINT)
#define FBX_ONNX_DT_NUM (FBX_ONNX_DT_FLOAT | FBX_ONNX_DT_INT)
#define FBX_ONNX_DT_ALL (FBX_ONNX_DT_NUM | FBX__DT(BOOL))
#define FBX_ONNX_DT_IDX (FBX__DT(I32) | FBX__DT(I64))

typedef struct fbx_onnx_entry fbx_onnx_entry;

/* Rank rules (onnx_rank.c): how a registry row's output ranks/dims follow
 * from its inputs when ORT left them unknown. Every registry row names one
 * (a missing column fails to compile); onnx_rank.c defines one function per
 * rule from this list (a missing function fails to compile or link).
 *   NONE     no rule (outputs data-dependent, or constants anyway)
 *   SAME     output 0 has input 0's shape;  SAME_ALL: every output does
 *   BCAST    output 0 is the numpy broadcast of all inputs
 *   KEEP     every output keeps input 0's rank, dims unknown
 *   RANK1/RANK2/SCALAR  output 0 has that rank
 *   the rest are one op family each (named after it; SKIPNORM: the
 *   com.microsoft Skip*LayerNormalization ops; MNB: MatMulNBits; GQA: GroupQueryAttention;
 *   RNN: LSTM/GRU/RNN; CF: Loop/Scan, from the described body). */
#define FBX_ONNX_RANK_RULES(X)                                                                     \
  X(NONE) X(SAME) X(SAME_ALL) X(BCAST) X(KEEP) X(RANK1) X(RANK2) X(SCALAR) X(LAYERNORM) X(MATMUL) \
  X(QLMATMUL) X(SLICE) X(RESHAPE) X(SQUEEZE) X(UNSQUEEZE) X(CONCAT) X(REDUCE) X(TRANSPOSE) X(SHAPE) \
  X(NONZERO) X(FLATTEN) X(GATHER) X(GATHER_ELEMENTS) X(GATHER_ND) X(ARG) X(CONV) X(GPOOL) X(EXPAND) \
  X(COFS) X(ONEHOT) X(COMPRESS) X(SKIPNORM) X(MNB) X(GQA) X(RNN) X(CF)

typedef enum fbx_onnx_rank_rule {
#define X(r) FBX_ONNX_RANK_##r,
  FBX_ONNX_RANK_RULES(X)
#undef X
  FBX_ONNX_RANK_COUNT
} fbx_onnx_rank_rule;

/* Claim context: everything a claim check needs, plus where the reason goes. */
typedef struct fbx_onnx_cctx {
  const fbx_onnx_graph *g;
  const fbx_onnx_node *n;
  const fbx_onnx_entry *e;
  char *reason;
  size_t reason_size;
} fbx_onnx_cctx;

/* Translate context: one ONNX node being lowered into ir. vmap maps ONNX
 * value index -> IR value id (-1 = not yet materialised). */
typedef struct fbx_onnx_tctx {
  const fbx_onnx_graph *g;
  const fbx_onnx_node *n;
  const fbx_onnx_entry *e;
  int node_index;
  fbx_ir_graph *ir;
  int *vmap;
  /* Set by a translator that takes a composed fallback (static string): every
   * IR node it emits is marked with it (fbx_ir_node.composed_reason). */
  const char *composed;
} fbx_onnx_tctx;

typedef bool (*fbx_onnx_claim_fn)(const fbx_onnx_cctx *c);
typedef fbx_status *(*fbx_onnx_translate_fn)(fbx_onnx_tctx *t);

struct fbx_onnx_entry {
  const char *op_type;
  const char *domain;        /* "" = ai.onnx */
  int min_opset, max_opset;
  fbx_onnx_claim_fn claim;
  fbx_onnx_translate_fn translate;
  fbx_onnx_rank_rule rank;   /* rank inference for its outputs (onnx_rank.c) */
  int aux;                   /* family-specific: usually an fbx_ir_op */
  const char *attrs;         /* comma-separated attribute names the claim check understands */
};

/* The registry entry for node n whose opset range holds n->opset (NULL if
 * none); *any = first entry with that op type and domain, any opset. */
const fbx_onnx_entry *fbx__onnx_registry_find(const fbx_onnx_node *n, const fbx_onnx_entry **any);
/* Registry row i (0 <= i < fbx_onnx_registry_count()), NULL out of range. */
const fbx_onnx_entry *fbx__onnx_registry_entry(int i);

/* ---- claim helpers (onnx_ops_common.c) ---- */
/* Writes "<op_type>: <msg>" into the reason; returns false. */
bool fbx__onnx_fail(const fbx_onnx_cctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Input/output i of the node, NULL when absent. */
const fbx_onnx_value *fbx__onnx_cin(const fbx_onnx_cctx *c, int i);
const fbx_onnx_value *fbx__onnx_cout(const fbx_onnx_cctx *c, int i);
/* dtype of v in mask? else reason "<Op>: <what> dtype int32 not supported (float32, ...)". */
bool fbx__onnx_dt_ok(const fbx_onnx_cctx *c, const fbx_onnx_value *v, uint32_t mask, const char *what);
/* Input i must be a readable initializer (what names it in the reason). */
const fbx_onnx_tensor *fbx__onnx_cconst(const fbx_onnx_cctx *c, int i, const char *what);
/* Optional output i (>= 1) must be absent. */
bool fbx__onnx_no_out(const fbx_onnx_cctx *c, int i, const char *what);

/* Constant data readers; false when the dtype is not int (resp. float) or there are more than max. */
bool fbx__onnx_tensor_ints(const fbx_onnx_tensor *t, int64_t *out, int max, int *n);
bool fbx__onnx_tensor_f64s(const fbx_onnx_tensor *t, double *out, int max, int *n);
int64_t fbx__onnx_tensor_numel(const fbx_onnx_tensor *t);
/* The readable initializer behind value index v, or NULL. */
const fbx_onnx_tensor *fbx__onnx_value_const(const fbx_onnx_graph *g, int v);
/* Normalise axis a against rank r (valid range [-r, r-1], or [-r, r] with inclusive_end). */
bool fbx__onnx_axis(int64_t a, int r, bool inclusive_end, int *out);

/* ---- translate helpers (onnx_ops_common.c) ---- */
/* IR value id of node input i (FBX_IR_NONE when absent); creates consts lazily. */
fbx_status *fbx__onnx_tin(fbx_onnx_tctx *t, int i, int *id);
/* IR value id of ONNX value index v. */
fbx_status *fbx__onnx_tvalue(fbx_onnx_tctx *t, int v, int *id);
/* Emit one IR node labelled with this ONNX node. */
fbx_status *fbx__onnx_emit(fbx_onnx_tctx *t, fbx_ir_op op, const int *ins, int n_ins,
                           const fbx_ir_params *p, fbx_dtype dt, int rank, int *out);
/* Node output i := IR value id (names the IR value after the ONNX value). */
void fbx__onnx_bind(fbx_onnx_tctx *t, int i, int id);
/* Emit and bind to output 0 in one go (dtype/rank from the ONNX output value). */
fbx_status *fbx__onnx_emit_out(fbx_onnx_tctx *t, fbx_ir_op op, const int *ins, int n_ins,
                               const fbx_ir_params *p);
/* ONNX value of node input/output i (never NULL for present ones). */
const fbx_onnx_value *fbx__onnx_tin_value(const fbx_onnx_tctx *t, int i);
const fbx_onnx_value *fbx__onnx_tout_value(const fbx_onnx_tctx *t, int i);
/* Scalar constant of dtype dt (rank 0) / 1-D int64 constant. */
fbx_status *fbx__onnx_const_scalar(fbx_onnx_tctx *t, fbx_dtype dt, double v, int *id);
fbx_status *fbx__onnx_const_i64s(fbx_onnx_tctx *t, const int64_t *v, int n, int *id);
/* An IR constant from a constant tensor in any float dtype, converted to dt, with the given shape. */
fbx_status *fbx__onnx_const_f64s(fbx_onnx_tctx *t, fbx_dtype dt, const double *v, int rank,
                                 const int64_t *dims, int *id);
/* Convert an index tensor to int64 (CAST node when not already int64). */
fbx_status *fbx__onnx_to_i64(fbx_onnx_tctx *t, int id, int *out);

/* params.conv of a Conv-like node from its attributes (w: the weight value, or
 * NULL for pools); false with a reason when an attribute is unusable (onnx_ops_conv.c). */
bool fbx__onnx_conv_params(const fbx_onnx_cctx *c, const fbx_onnx_value *w, fbx_ir_params *p);

/* ---- families: declare claim_X / tr_X for every registry column ---- */
#define FBX__ONNX_FAMILY(name)                        \
  bool fbx__onnx_claim_##name(const fbx_onnx_cctx *c); \
  fbx_status *fbx__onnx_tr_##name(fbx_onnx_tctx *t);

/* elementwise (onnx_ops_ew.c) */
FBX__ONNX_FAMILY(unary)
FBX__ONNX_FAMILY(binary)
FBX__ONNX_FAMILY(variadic)
FBX__ONNX_FAMILY(clip)
FBX__ONNX_FAMILY(cast)
FBX__ONNX_FAMILY(where)
FBX__ONNX_FAMILY(pow)
FBX__ONNX_FAMILY(mod)
FBX__ONNX_FAMILY(bitshift)
FBX__ONNX_FAMILY(prelu)
FBX__ONNX_FAMILY(identity)
FBX__ONNX_FAMILY(dropout)
/* matmul (onnx_ops_matmul.c) */
FBX__ONNX_FAMILY(matmul)
FBX__ONNX_FAMILY(gemm)
/* reduce (onnx_ops_reduce.c) */
FBX__ONNX_FAMILY(reduce)
FBX__ONNX_FAMILY(argmax)
FBX__ONNX_FAMILY(cumsum)
/* norm / softmax (onnx_ops_norm.c) */
FBX__ONNX_FAMILY(softmax)
FBX__ONNX_FAMILY(layernorm)
FBX__ONNX_FAMILY(instnorm)
FBX__ONNX_FAMILY(batchnorm)
FBX__ONNX_FAMILY(lrn)
FBX__ONNX_FAMILY(mvn)
/* movement (onnx_ops_movement.c) */
FBX__ONNX_FAMILY(reshape)
FBX__ONNX_FAMILY(squeeze)
FBX__ONNX_FAMILY(flatten)
FBX__ONNX_FAMILY(transpose)
FBX__ONNX_FAMILY(concat)
FBX__ONNX_FAMILY(split)
FBX__ONNX_FAMILY(slice)
FBX__ONNX_FAMILY(d2s)
/* gather / scatter (onnx_ops_gather.c) */
FBX__ONNX_FAMILY(gather)
FBX__ONNX_FAMILY(scatter)
FBX__ONNX_FAMILY(onehot)
FBX__ONNX_FAMILY(trilu)
FBX__ONNX_FAMILY(topk)
FBX__ONNX_FAMILY(nonzero)
/* shape ops (onnx_ops_shape.c) */
FBX__ONNX_FAMILY(shape)
FBX__ONNX_FAMILY(expand)
FBX__ONNX_FAMILY(cofs)
FBX__ONNX_FAMILY(range)
FBX__ONNX_FAMILY(tile)
FBX__ONNX_FAMILY(pad)
FBX__ONNX_FAMILY(constant)
/* conv / pool / resize (onnx_ops_conv.c, onnx_ops_resize.c) */
FBX__ONNX_FAMILY(conv)
FBX__ONNX_FAMILY(pool)
FBX__ONNX_FAMILY(gpool)
FBX__ONNX_FAMILY(resize)
/* composed ops (onnx_ops_extra.c) */
FBX__ONNX_FAMILY(size)
FBX__ONNX_FAMILY(shrink)
FBX__ONNX_FAMILY(eyelike)
FBX__ONNX_FAMILY(compress)
FBX__ONNX_FAMILY(einsum)
FBX__ONNX_FAMILY(unique)
/* quantisation (onnx_ops_quant.c) */
FBX__ONNX_FAMILY(dequant)
FBX__ONNX_FAMILY(quant)
FBX__ONNX_FAMILY(dynquant)
FBX__ONNX_FAMILY(mmint)
FBX__ONNX_FAMILY(qlmm)
FBX__ONNX_FAMILY(convint)
FBX__ONNX_FAMILY(qlconv)
/* decoder ops (onnx_ops_msft.c) */
FBX__ONNX_FAMILY(skipnorm)
FBX__ONNX_FAMILY(mnb)
FBX__ONNX_FAMILY(gqa)
FBX__ONNX_FAMILY(rope)
/* recurrent ops (onnx_ops_rnn.c) */
FBX__ONNX_FAMILY(rnn)
/* control flow (onnx_ops_cf.c) */
FBX__ONNX_FAMILY(cf_if)
FBX__ONNX_FAMILY(cf_loop)

/* A body graph (an If branch) -> a new IR graph (onnx_translate.c): its IR
 * inputs are the n_caps captures in order, named names[k], typed as outer's
 * values outer_ids[k] (whether the body reads them or not); its outputs are
 * the body's outputs in order. Caller owns *out. */
fbx_status *fbx__onnx_translate_body(const fbx_onnx_graph *body, int n_caps, const char *const *names,
                                     const fbx_ir_graph *outer, const int *outer_ids, fbx_ir_graph **out);
/* The same for a Loop/Scan body: its IR inputs are its first n_own inputs
 * (typed by own[k]'s dtype, rank and dims; FBX_IR_DIM_DYNAMIC where unknown),
 * then the captures. */
fbx_status *fbx__onnx_translate_body_io(const fbx_onnx_graph *body, int n_own, const fbx_tensor *own, int n_caps,
                                        const char *const *names, const fbx_ir_graph *outer, const int *outer_ids,
                                        fbx_ir_graph **out);

/* float16 via float32 (onnx_ops_f16.c): family X gets claim_X_h / tr_X_h,
 * which run X on a shadow of the node where float16 reads as float32 and
 * wrap float16 inputs/outputs in CASTs. */
#define FBX__ONNX_F16_LIST(X) \
  X(matmul) X(gemm) X(reduce) X(argmax) X(softmax) X(layernorm) X(instnorm) X(lrn) X(conv) X(pool) X(gpool) X(resize)
#define FBX__ONNX_F16_DECL(fam) FBX__ONNX_FAMILY(fam##_h)
FBX__ONNX_F16_LIST(FBX__ONNX_F16_DECL)

#endif
