// fz_gen.h — the structured side of the fuzz target: a byte string read as a description
// of a small ONNX graph (ops, attributes, shapes, constant inputs, input values) and written
// as a model with fz_model.h. Every byte string is a valid description, so libFuzzer's byte
// mutations change ops, attributes and shapes instead of breaking protobuf framing.
//
// Mutation classes (FZ_CLASS_*), each switchable off so that a CI run can leave out a class
// whose known findings are being fixed elsewhere (scripts/fuzz.sh, README "Testing"):
//   nan      NaN/inf input values and the ops that make them from finite inputs (Log, Sqrt,
//            Div, Pow, Exp, Reciprocal, ReduceProd, ...)
//   bigint   huge or extreme integers in shape / index / slice inputs (2^62+1, INT64_MIN, ...)
//   invalid  attributes a valid model cannot have (pads >= kernel, output_padding >= stride,
//            a scale of the wrong length, out-of-range axes and indices, ...)
//   samepad  auto_pad SAME_UPPER/SAME_LOWER on ConvTranspose, or with a dilation > 1 on any op:
//            where ORT's padding arithmetic and the spec's part ways (odd or negative total
//            padding; ORT's pools leave the dilation out of SAME padding)
//   empty    tensors with a 0 dim made by ConstantOfShape or Pad and fed to further ops (ORT
//            1.30 itself crashes creating a session for some: a reflect Pad of an empty dim)
#ifndef FBX_TESTS_FUZZ_FZ_GEN_H
#define FBX_TESTS_FUZZ_FZ_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "common/ort_host.h"

enum {
  FZ_CLASS_NAN = 1,
  FZ_CLASS_BIGINT = 2,
  FZ_CLASS_INVALID = 4,
  FZ_CLASS_SAMEPAD = 8,
  FZ_CLASS_EMPTY = 16,
  FZ_CLASS_ALL = 31
};

#define FZ_MAX_INPUTS 2
#define FZ_MAX_NODES 6
#define FZ_MAX_CONSTS 40

// The graph as the generator wrote it, for the independent reference (fz_ref.h): each node's
// op, value names and attributes (copied), and each initializer's value.
typedef struct fz_rattr {
  const char *name;     // a string literal of fz_gen.c
  int type;             // FZM_ATTR_* (fz_model.h)
  float f;
  int64_t i;
  const char *s;        // a string literal of fz_gen.c
  int64_t ints[8];
  int n;
} fz_rattr;

typedef struct fz_rnode {
  const char *op;       // a string literal of fz_gen.c
  char in[5][16], out[2][16];
  int n_in, n_out;
  fz_rattr at[8];
  int n_at;
} fz_rnode;

typedef struct fz_model {
  unsigned char *bytes;  // the ModelProto (heap)
  size_t n_bytes;
  fbx_host_tensor inputs[FZ_MAX_INPUTS];  // values for the graph inputs (owned)
  size_t n_inputs;
  fz_rnode nodes[2 * FZ_MAX_NODES + 2];   // in graph order (a recipe may write two)
  int n_nodes;
  fbx_host_tensor consts[FZ_MAX_CONSTS];  // the initializers (owned; name = the value's)
  int n_consts;
  int recorded;          // 1 when nodes/consts hold the whole graph (0: a table was full)
  int ort_unsafe;        // an op-shape that crashes ORT 1.30 itself (a reflect Pad of an empty
                         // dim) or whose element count overflows int64 (ConstantOfShape/Expand/
                         // Tile/Pad): the harness does not give the model to ORT
  int too_big;           // a valid result of over 2^24 elements (ConstantOfShape/Expand/Tile/Pad
                         // by 2^32, ...): not run at all (both engines would allocate it)
  unsigned used;         // FZ_CLASS_* whose hostile parts this graph actually has
  char desc[4096];       // a readable summary of the graph, printed with a finding
} fz_model;

// Build a model from the description data[0..n) using only the classes in `classes`.
// 0 on success (free with fz_model_free), -1 when out of memory.
int fz_model_gen(const uint8_t *data, size_t n, unsigned classes, fz_model *m);
void fz_model_free(fz_model *m);

// "nan,bigint,invalid,samepad,empty" or "all" -> bits (unknown names ignored, reported in *bad when non-NULL).
unsigned fz_classes_parse(const char *s, const char **bad);

#endif  // FBX_TESTS_FUZZ_FZ_GEN_H
