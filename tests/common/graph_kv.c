/* The small decoder-like IR graph shared by the graph-capture tests (graph_kv.h). */
#include <string.h>

#include "common/graph_kv.h"

enum { D = FBX_TEST_KV_D };

/* x (1, S, D), past (1, P, D); symbolic "seq"/"past_seq" when decoder, else fixed (S0, P0):
 *   kv = Concat(past, x; 1)                                              -> output 1
 *   r  = Reshape(kv, Concat([1], Gather(Shape(kv), [1]), [2], [D/2]))    -> output 2 (1, P+S, 2, D/2)
 *   y  = Tanh(Softmax(x @ W, 2) * 2)                                     -> output 0 */
fbx_ir_graph *fbx_test_graph_kv(bool decoder, int64_t S0, int64_t P0, const float *W) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int x, past, w, i1, c1, c2, ch, two;
  if (decoder) {
    fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 3, (int64_t[]){1, -1, D}, (const char *[]){"batch", "seq", NULL}, &x);
    fbx_ir_graph_add_input(g, "past", FBX_DTYPE_F32, 3, (int64_t[]){1, -1, D},
                           (const char *[]){"batch", "past_seq", NULL}, &past);
  } else {
    fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 3, (int64_t[]){1, S0, D}, NULL, &x);
    fbx_ir_graph_add_input(g, "past", FBX_DTYPE_F32, 3, (int64_t[]){1, P0, D}, NULL, &past);
  }
  fbx_ir_graph_add_const(g, "W", FBX_DTYPE_F32, 2, (int64_t[]){D, D}, (void *)W, &w);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){1}, 1, &i1);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){1}, 1, &c1);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){2}, 1, &c2);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){D / 2}, 1, &ch);
  fbx_ir_graph_add_const_f32(g, 2.0f, &two);
  fbx_ir_params a0, a1, a2, none;
  memset(&a0, 0, sizeof a0);
  memset(&none, 0, sizeof none);
  a1 = a2 = a0;
  a1.axis.axis = 1;
  a2.axis.axis = 2;
  int kv, s_kv, len, ns, r, q, sm, m, y;
  fbx_ir_graph_emit(g, FBX_IR_OP_CONCAT, (int[]){past, x}, 2, &a1, FBX_DTYPE_F32, 3, "kv", "Concat", 0, &kv);
  fbx_ir_graph_emit(g, FBX_IR_OP_SHAPE, (int[]){kv}, 1, &none, FBX_DTYPE_I64, 1, "shape_kv", "Shape", 1, &s_kv);
  fbx_ir_graph_emit(g, FBX_IR_OP_GATHER, (int[]){s_kv, i1}, 2, &a0, FBX_DTYPE_I64, 1, "len", "Gather", 2, &len);
  fbx_ir_graph_emit(g, FBX_IR_OP_CONCAT, (int[]){c1, len, c2, ch}, 4, &a0, FBX_DTYPE_I64, 1, "ns", "Concat", 3, &ns);
  fbx_ir_graph_emit(g, FBX_IR_OP_RESHAPE, (int[]){kv, ns}, 2, &none, FBX_DTYPE_F32, 4, "r", "Reshape", 4, &r);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){x, w}, 2, NULL, FBX_DTYPE_F32, 3, "q", "MatMul", 5, &q);
  fbx_ir_graph_emit(g, FBX_IR_OP_SOFTMAX, (int[]){q}, 1, &a2, FBX_DTYPE_F32, 3, "sm", "Softmax", 6, &sm);
  fbx_ir_graph_emit(g, FBX_IR_OP_MUL, (int[]){sm, two}, 2, NULL, FBX_DTYPE_F32, 3, "m", "Mul", 7, &m);
  fbx_ir_graph_emit(g, FBX_IR_OP_TANH, (int[]){m}, 1, NULL, FBX_DTYPE_F32, 3, "y", "Tanh", 8, &y);
  fbx_ir_graph_mark_output(g, y);
  fbx_ir_graph_mark_output(g, kv);
  fbx_ir_graph_mark_output(g, r);
  return g;
}

