/* The lazy array graph.
 *
 * A graph is a list of values and a topologically ordered list of nodes.
 * Nothing is computed when a graph is built: values carry a dtype and a
 * (possibly symbolic) shape; nodes record an op, input/output value ids and
 * small params. Constants hold host data owned by the graph.
 *
 * Memory: every allocation of a graph (values, nodes, names, constant data,
 * fused programs) comes from the graph's own arena and is freed at once by
 * fbx_ir_graph_destroy(). Value and node ids are stable indices.
 *
 * Shapes: rank is always known (translators decline unknown ranks). A dim is
 * >= 0 when static, FBX_IR_DIM_DYNAMIC when only known at run time; for
 * graph inputs, dim_sym[] names the symbol ("" when ORT gave none). */
#ifndef FBX_IR_GRAPH_H
#define FBX_IR_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/dtype.h"
#include "../base/status.h"
#include "ir_ops.h"

#define FBX_IR_DIM_DYNAMIC (-1)
#define FBX_IR_MAX_INPUTS 64    /* Concat/Sum with more inputs are declined */
#define FBX_IR_MAX_OUTPUTS 64   /* Split with more outputs are declined */
#define FBX_IR_SCAN_MAX 16      /* SCAN: scan inputs / scan outputs at most (more are declined) */
#define FBX_IR_NONE (-1)        /* an absent optional input */

typedef enum fbx_ir_value_kind {
  FBX_IR_VALUE_INPUT,     /* graph input, bound at run time */
  FBX_IR_VALUE_CONST,     /* host data in the graph arena (initializer / folded) */
  FBX_IR_VALUE_NODE,      /* produced by a node */
} fbx_ir_value_kind;

typedef struct fbx_ir_value {
  fbx_ir_value_kind kind;
  fbx_dtype dtype;
  int rank;
  int64_t dims[FBX_MAX_RANK];       /* FBX_IR_DIM_DYNAMIC when unknown before run */
  const char *dim_sym[FBX_MAX_RANK];/* inputs only: ORT's symbolic dim name or NULL */
  const char *name;                 /* ONNX value name (for traces), may be NULL */
  int producer;                     /* node id, or FBX_IR_NONE */
  int input_index;                  /* kind INPUT: position in graph inputs */
  void *data;                       /* kind CONST: host data, row-major, dims all static */
  size_t nbytes;                    /* kind CONST */
} fbx_ir_value;

/* Conv/pool geometry, up to 3 spatial dims. pads: begin[0..nd) then end[0..nd). */
typedef enum fbx_ir_auto_pad {
  FBX_IR_PAD_NOTSET, FBX_IR_PAD_VALID, FBX_IR_PAD_SAME_UPPER, FBX_IR_PAD_SAME_LOWER,
} fbx_ir_auto_pad;

typedef enum fbx_ir_resize_mode { FBX_IR_RESIZE_NEAREST, FBX_IR_RESIZE_LINEAR, FBX_IR_RESIZE_CUBIC } fbx_ir_resize_mode;
typedef enum fbx_ir_resize_coord {
  FBX_IR_COORD_HALF_PIXEL, FBX_IR_COORD_ASYMMETRIC, FBX_IR_COORD_PYTORCH_HALF_PIXEL,
  FBX_IR_COORD_ALIGN_CORNERS, FBX_IR_COORD_TF_HALF_PIXEL_FOR_NN, FBX_IR_COORD_TF_CROP_AND_RESIZE,
} fbx_ir_resize_coord;
typedef enum fbx_ir_resize_nearest {
  FBX_IR_NEAREST_ROUND_PREFER_FLOOR, FBX_IR_NEAREST_ROUND_PREFER_CEIL,
  FBX_IR_NEAREST_FLOOR, FBX_IR_NEAREST_CEIL,
} fbx_ir_resize_nearest;
typedef enum fbx_ir_pad_mode { FBX_IR_PADMODE_CONSTANT, FBX_IR_PADMODE_REFLECT, FBX_IR_PADMODE_EDGE, FBX_IR_PADMODE_WRAP } fbx_ir_pad_mode;

typedef struct fbx_ir_ew_program fbx_ir_ew_program;

/* Activations of the recurrent ops (ONNX RNN/GRU/LSTM 'activations'), with
 * their alpha/beta already resolved (defaults of the ONNX operators). */
typedef enum fbx_ir_rnn_act {
  FBX_IR_ACT_SIGMOID, FBX_IR_ACT_TANH, FBX_IR_ACT_RELU, FBX_IR_ACT_AFFINE, FBX_IR_ACT_LEAKY_RELU,
  FBX_IR_ACT_THRESHOLDED_RELU, FBX_IR_ACT_SCALED_TANH, FBX_IR_ACT_HARD_SIGMOID, FBX_IR_ACT_ELU,
  FBX_IR_ACT_SOFTSIGN, FBX_IR_ACT_SOFTPLUS,
} fbx_ir_rnn_act;
#define FBX_IR_RNN_MAX_ACTS 6   /* 3 per direction (LSTM f, g, h), 2 directions */

/* Per-op parameters. Which member is used is given by the op (see ir_ops.h).
 * All axes are normalised (non-negative) by the translator. */
typedef union fbx_ir_params {
  struct { float alpha, beta, gamma; fbx_dtype to; } ew;
  /* MATMUL / MATMUL_INT. epilogue, epilogue_reg: MATMUL_INT only, as params.conv.epilogue (read
   * both through fbx_ir_node_epilogue); the program's other registers are node inputs 4.. */
  struct { int trans_a, trans_b; float alpha; struct fbx_ir_ew_program *epilogue; int epilogue_reg; } matmul;
  struct { int axis; } axis;
  struct { int axis; float epsilon; } norm;
  struct { uint32_t axes_mask; int keepdims; } reduce; /* mask 0 = all axes (unless noop handled by translator) */
  struct { int axis; int keepdims; int select_last; } arg;
  struct { int axis; int exclusive; int reverse; } cumsum;
  struct { uint32_t axes_mask; } axes;                 /* SQUEEZE / UNSQUEEZE */
  struct { int allowzero; } reshape;
  struct { int perm[FBX_MAX_RANK]; } transpose;
  struct { int64_t start, end; int has_end; } shape;   /* raw ONNX start/end; normalised at run */
  struct { fbx_dtype dtype; double value; } fill;      /* CONSTANT_OF_SHAPE */
  struct { fbx_ir_pad_mode mode; } pad;
  struct { int upper; } trilu;
  struct { int blocksize; int crd; } d2s;              /* crd: 1 = CRD mode, 0 = DCR */
  struct { int axis; int largest; int sorted; } topk;
  struct { int axis; int reduction; } scatter;         /* reduction 0 none,1 add,2 mul,3 max,4 min */
  struct { int size; float alpha, beta, bias; } lrn;
  struct {
    int nd;                          /* spatial dims: 1..3 */
    int64_t kernel[3], strides[3], dilations[3];
    int64_t pads[6];                 /* begin..., end... (explicit or from auto_pad at run) */
    int64_t output_padding[3];       /* CONV_TRANSPOSE */
    int64_t output_shape[3];         /* CONV_TRANSPOSE, 0 = not given */
    int64_t group;
    fbx_ir_auto_pad auto_pad;
    int ceil_mode, count_include_pad; /* pools */
    int64_t p;                        /* LPPOOL */
    /* CONV/CONV_TRANSPOSE epilogue (plan pass exec_fuse_epilogue.c; NULL = none):
     * an elementwise program the kernel applies in place to its output.
     * Register epilogue_reg is the conv output; the program's other
     * registers, in order, are node inputs 3.. (input 2, the bias, is
     * FBX_IR_NONE when absent). The node's output then has the program's
     * result (same shape and dtype as the conv output). */
    struct fbx_ir_ew_program *epilogue;
    int epilogue_reg;
  } conv;
  struct {
    fbx_ir_resize_mode mode;
    fbx_ir_resize_coord coord;
    fbx_ir_resize_nearest nearest;
    float cubic_a;
    int exclude_outside;
    float extrapolation_value;
  } resize;
  struct { fbx_ir_ew_program *prog; } fused;           /* FUSED_EW */
  /* SKIP_NORM: y = (s - mean) / sqrt(var + eps) * gamma (+ beta) over the last
   * dim, s = x (+ skip (+ bias)); simplified (RMSNorm): mean = 0, var = mean(s^2).
   * has_sum: output 1 is s; has_inv: the last output is 1/sqrt(var + eps). */
  struct { float epsilon; int simplified, has_sum, has_inv; } skipnorm;
  /* MATMUL_NBITS: Y(..., N) = A(..., K) @ dequant(B)^T (+ bias), B's column n
   * block b dequantised as (q - zp) * scale; zp_u8: zero points packed like B
   * (else float, one per block); accuracy_level 4: A quantised to int8 per block.
   * glu (never set by translation: the gate/up packing pass, ir_pack_nbits.c):
   * B holds N columns, gate columns [0, N/2) then up columns [N/2, N), and Y
   * (..., N/2) = silu(gate) * up, silu(g) = g * sigmoid(g) (bias, if any, of N,
   * added before). */
  struct { int64_t K, N; int bits, block_size, accuracy_level, zp_u8, glu; } nbits;
  /* GQA (GroupQueryAttention): q (B, S, nh*H) or packed qkv (B, S, (nh+2kvh)*H)
   * with k = v = NONE; past/present (B, kvh, len, H); rotary on q and new k
   * when do_rotary (cos/sin (max_pos, rot/2)); scale 0 = 1/sqrt(H); softcap
   * > 0: scores = softcap * tanh(scores / softcap). Causal.
   * kv_in_place (set by the executor for one run, never by translation; see
   * fbx_ir_op_append_input): bit 0 present_key, bit 1 present_value is bound
   * to its past input's own buffer (out[1].data == in[3].data, resp. out[2] /
   * in[4]): the kernel writes only the new rows (fbx_ir_append_rows) and
   * leaves every other row as it is. Bit clear: present is a separate buffer
   * (past rows copied in, the rows past the valid length zeroed). */
  struct { int num_heads, kv_num_heads, do_rotary, interleaved; float scale, softcap; unsigned kv_in_place; } gqa;
  /* ROTARY (RotaryEmbedding): num_heads 0 = head_size from the cos cache;
   * rot_dim 0 = the whole head; rotation as in GQA. */
  struct { int num_heads, rot_dim, interleaved; } rope;
  /* LSTM / GRU / RNN: direction 0 forward, 1 reverse, 2 bidirectional;
   * layout 0: X (seq, batch, in), Y (seq, dirs, batch, hidden), states
   * (dirs, batch, hidden); layout 1: X (batch, seq, in), Y (batch, seq, dirs,
   * hidden), states (batch, dirs, hidden). act[d * n_per_dir + k] is
   * activation k (f, g, h) of direction d. clip <= 0: none. */
  struct {
    int64_t hidden;
    int direction, layout, input_forget, linear_before_reset, n_per_dir;
    float clip;
    fbx_ir_rnn_act act[FBX_IR_RNN_MAX_ACTS];
    float act_alpha[FBX_IR_RNN_MAX_ACTS], act_beta[FBX_IR_RNN_MAX_ACTS];
  } rnn;
  /* IF: branch[0] runs when the condition is true (ONNX then_branch), branch[1]
   * otherwise (else_branch). Each branch is a graph of its own (owned by the
   * graph holding this node, fbx_ir_graph_adopt) whose inputs are the IF's
   * inputs 1.. (the outer values its bodies read), in order, and whose
   * outputs are the IF's outputs (same count and dtypes; the shapes may
   * differ between the branches: the executor takes them from the branch run). */
  struct { struct fbx_ir_graph *branch[2]; } cond;
  /* LOOP / SCAN: body is a graph of its own (owned by the graph holding this
   * node, fbx_ir_graph_adopt) that the executor runs once per iteration
   * (exec_control.c). The node's captures (its inputs after the ONNX ones)
   * are the body's last inputs, in order.
   * LOOP body: inputs (iteration: int64 rank 0, cond: bool rank 0, carried x
   * n_carried, captures...), outputs (cond, carried x n_carried, scan slices...);
   * the node's scan output k is the slices stacked along a new axis 0.
   * SCAN body: inputs (state x n_carried, slices x n_scan_in, captures...),
   * outputs (state x n_carried, slices...); scan input i is sliced along
   * in_axis[i] (an axis of the input), scan output k stacks the slices along
   * out_axis[k] (an axis of the output); bit i of in_rev / out_rev: reverse
   * direction. n_scan_in = 0 and no axes for LOOP. */
  struct {
    struct fbx_ir_graph *body;
    int n_carried, n_scan_in;
    int8_t in_axis[FBX_IR_SCAN_MAX], out_axis[FBX_IR_SCAN_MAX];
    uint32_t in_rev, out_rev;
  } loop;
} fbx_ir_params;

typedef struct fbx_ir_node {
  fbx_ir_op op;
  int n_inputs, n_outputs;
  int *inputs;               /* value ids, FBX_IR_NONE for an absent optional input */
  int *outputs;              /* value ids */
  fbx_ir_params params;
  const char *name;          /* ONNX node name (for traces); may be "" */
  const char *onnx_op;       /* ONNX op type this node came from (for traces) */
  const char *onnx_domain;   /* ... and its domain ("com.microsoft"; NULL or "" = ai.onnx) */
  int onnx_node_index;       /* index of that node in the fused subgraph, or -1 */
  /* Non-NULL when this node is part of a composed fallback: the ONNX op has a
   * fast path in Fusebox but this configuration was built from generic ops
   * instead; the static string says why (traced as "<Op> [composed]"). */
  const char *composed_reason;
} fbx_ir_node;

/* ---- the fused elementwise program (FUSED_EW) ----
 * Registers 0..n_inputs-1 hold the node's inputs (broadcast to the output
 * shape); register n_inputs+i holds the result of instr i. The node's single
 * output is register out_reg. Each instr is an EW1/EW2/EW3 op. */
typedef struct fbx_ir_ew_instr {
  fbx_ir_op op;
  int a, b, c;               /* operand registers (b, c unused for unary) */
  fbx_dtype dtype;           /* result dtype */
  fbx_ir_params params;      /* .ew */
} fbx_ir_ew_instr;

struct fbx_ir_ew_program {
  int n_inputs;
  int n_instrs;
  int out_reg;
  fbx_dtype in_dtypes[FBX_IR_MAX_INPUTS];
  fbx_ir_ew_instr *instrs;
};

/* The in-kernel elementwise epilogue of a node (exec_fuse_epilogue.c), or NULL:
 * CONV / CONV_TRANSPOSE / CONV_INT keep it in params.conv, MATMUL_INT in
 * params.matmul. *reg (when reg is non-NULL) gets the register that reads the
 * node's own result. */
static inline const fbx_ir_ew_program *fbx_ir_node_epilogue(const fbx_ir_node *n, int *reg) {
  bool mm = n->op == FBX_IR_OP_MATMUL_INT;
  if (reg) *reg = mm ? n->params.matmul.epilogue_reg : n->params.conv.epilogue_reg;
  return mm ? n->params.matmul.epilogue : n->params.conv.epilogue;
}

typedef struct fbx_ir_graph {
  struct fbx_arena *arena;
  fbx_ir_value *values; int n_values, cap_values;
  fbx_ir_node *nodes;   int n_nodes, cap_nodes;
  int *inputs;  int n_inputs, cap_inputs;     /* value ids, in ORT input order */
  int *outputs; int n_outputs, cap_outputs;   /* value ids, in ORT output order */
  struct fbx_ir_graph **subgraphs; int n_subgraphs, cap_subgraphs; /* IF branches, LOOP/SCAN bodies this graph owns */
} fbx_ir_graph;

/* Create/destroy. destroy frees everything the graph owns (NULL is fine). */
fbx_status *fbx_ir_graph_create(fbx_ir_graph **out);
void fbx_ir_graph_destroy(fbx_ir_graph *g);

/* g takes ownership of sub (an IF branch of one of its nodes): destroyed with
 * g. On failure sub is destroyed. */
fbx_status *fbx_ir_graph_adopt(fbx_ir_graph *g, fbx_ir_graph *sub);

/* Arena allocation tied to the graph's lifetime (zeroed). NULL on OOM. */
void *fbx_ir_graph_alloc(fbx_ir_graph *g, size_t bytes);
const char *fbx_ir_graph_strdup(fbx_ir_graph *g, const char *s);

/* Add a graph input; returns its value id in *id. dims may contain FBX_IR_DIM_DYNAMIC;
 * dim_sym may be NULL. */
fbx_status *fbx_ir_graph_add_input(fbx_ir_graph *g, const char *name, fbx_dtype dt, int rank,
                                   const int64_t *dims, const char *const *dim_sym, int *id);
/* Add a constant; data (nbytes = numel*dtype size) is copied into the arena. */
fbx_status *fbx_ir_graph_add_const(fbx_ir_graph *g, const char *name, fbx_dtype dt, int rank,
                                   const int64_t *dims, const void *data, int *id);
/* Convenience scalar/1-D constants. */
fbx_status *fbx_ir_graph_add_const_f32(fbx_ir_graph *g, float v, int *id);           /* rank 0 */
fbx_status *fbx_ir_graph_add_const_i64s(fbx_ir_graph *g, const int64_t *v, int n, int *id); /* rank 1 */
/* Add a value produced by a node (shape filled by inference; rank/dims may be set by caller). */
fbx_status *fbx_ir_graph_add_value(fbx_ir_graph *g, const char *name, fbx_dtype dt, int rank, int *id);
/* Add a node; inputs/outputs arrays are copied. Sets producer of each output. */
fbx_status *fbx_ir_graph_add_node(fbx_ir_graph *g, fbx_ir_op op, const int *inputs, int n_inputs,
                                  const int *outputs, int n_outputs, const fbx_ir_params *params,
                                  const char *name, const char *onnx_op, int onnx_node_index,
                                  int *node_id);
/* One-call helper: a node with n_inputs inputs and one new output value of dtype dt
 * and rank `rank` (-1: infer later); returns the output value id. */
fbx_status *fbx_ir_graph_emit(fbx_ir_graph *g, fbx_ir_op op, const int *inputs, int n_inputs,
                              const fbx_ir_params *params, fbx_dtype dt, int rank,
                              const char *name, const char *onnx_op, int onnx_node_index,
                              int *out_value);
fbx_status *fbx_ir_graph_mark_output(fbx_ir_graph *g, int value_id);

/* Number of elements of a value whose dims are all static (-1 if any dynamic). */
int64_t fbx_ir_value_numel(const fbx_ir_value *v);
/* Debug dump to a FILE* (one line per node). */
void fbx_ir_graph_dump(const fbx_ir_graph *g, void *file);

/* Output dtype of an elementwise op (EW1/EW2/EW3) given its input dtypes:
 * comparisons/ISNAN/ISINF/NOT/AND/OR/XOR -> BOOL, CAST -> p->ew.to,
 * WHERE -> in_dtypes[1], otherwise in_dtypes[0]. */
fbx_dtype fbx_ir_ew_out_dtype(fbx_ir_op op, const fbx_ir_params *p, const fbx_dtype *in_dtypes, int n);
/* ONNX Slice clamping for one axis of size dim (negative start/end count from
 * the end; INT64_MAX/MIN ends allowed; step != 0). Returns the number of
 * selected elements; *start_out (may be NULL) gets the clamped first index. */
int64_t fbx_ir_slice_resolve(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *start_out);

/* Gates of a recurrent op: LSTM 4 (i, o, f, c), GRU 3 (z, r, h), RNN 1. */
int fbx_ir_rnn_gates(fbx_ir_op op);

struct fbx_tensor;
/* Conv/ConvTranspose/pool geometry (ir_geometry.c, the one place it is worked
 * out) for a concrete input x (N, C, spatial...) and weight w (NULL for pools):
 * kernel[i] (params.conv.kernel, else from w), effective pads (begin[0..nd),
 * end[0..nd); auto_pad resolved as the ONNX spec and ORT >= 1.13 do) and
 * output spatial dims. Shape inference and the CPU conv/pool kernels call it. */
fbx_status *fbx_ir_conv_geometry(const fbx_ir_node *node, const struct fbx_tensor *x, const struct fbx_tensor *w,
                                 int64_t kernel[3], int64_t pads[6], int64_t out_spatial[3]);

#endif
