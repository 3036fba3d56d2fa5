/* Name/class/shape-data tables generated from the op list (ir_ops.h). */
#include "ir_graph.h"
#include "ir_ops.h"

static const char *const fbx__ir_op_names[] = {
#define X(name, cls, mask) #name,
    FBX_IR_OP_LIST(X)
#undef X
};
static const unsigned char fbx__ir_op_classes[] = {
#define X(name, cls, mask) cls,
    FBX_IR_OP_LIST(X)
#undef X
};
static const unsigned fbx__ir_op_masks[] = {
#define X(name, cls, mask) mask,
    FBX_IR_OP_LIST(X)
#undef X
};
_Static_assert(sizeof(fbx__ir_op_names) / sizeof(fbx__ir_op_names[0]) == FBX_IR_OP_COUNT,
               "op name table out of sync with FBX_IR_OP_LIST");
_Static_assert(sizeof(fbx__ir_op_classes) == FBX_IR_OP_COUNT, "op class table out of sync");
_Static_assert(sizeof(fbx__ir_op_masks) / sizeof(fbx__ir_op_masks[0]) == FBX_IR_OP_COUNT,
               "op shape-mask table out of sync");

const char *fbx_ir_op_name(fbx_ir_op op) {
  if ((unsigned)op >= FBX_IR_OP_COUNT) return "?";
  return fbx__ir_op_names[op];
}

int fbx_ir_op_class(fbx_ir_op op) {
  if ((unsigned)op >= FBX_IR_OP_COUNT) return FBX_IR_CLASS_OTHER;
  return fbx__ir_op_classes[op];
}

unsigned fbx_ir_op_shape_data_inputs(fbx_ir_op op) {
  if ((unsigned)op >= FBX_IR_OP_COUNT) return 0;
  return fbx__ir_op_masks[op];
}

