/* Element types. One X-macro; the numbers are the ONNX TensorProto ones
 * (ORT's ONNXTensorElementDataType uses the same), so conversion is a cast
 * after fbx_dtype_from_onnx() has checked the value. */
#ifndef FBX_BASE_DTYPE_H
#define FBX_BASE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/*           NAME  onnx  bytes  C type     name */
#define FBX_DTYPE_LIST(X)                  \
  X(F32,  1,  4, float,    "float32")      \
  X(U8,   2,  1, uint8_t,  "uint8")        \
  X(I8,   3,  1, int8_t,   "int8")         \
  X(U16,  4,  2, uint16_t, "uint16")       \
  X(I16,  5,  2, int16_t,  "int16")        \
  X(I32,  6,  4, int32_t,  "int32")        \
  X(I64,  7,  8, int64_t,  "int64")        \
  X(BOOL, 9,  1, uint8_t,  "bool")         \
  X(F16,  10, 2, uint16_t, "float16")      \
  X(F64,  11, 8, double,   "float64")      \
  X(U32,  12, 4, uint32_t, "uint32")       \
  X(U64,  13, 8, uint64_t, "uint64")

typedef enum fbx_dtype {
  FBX_DTYPE_UNDEFINED = 0,
#define X(name, onnx, bytes, ctype, str) FBX_DTYPE_##name = onnx,
  FBX_DTYPE_LIST(X)
#undef X
} fbx_dtype;

/* Largest rank any value may have. ONNX allows more; such nodes are declined. */
#define FBX_MAX_RANK 8

/* Inline: the executor asks per tensor per node. */
static inline size_t fbx_dtype_size(fbx_dtype t) { /* 0 for an unknown type */
  static const unsigned char k_size[16] = {
#define X(name, onnx, bytes, ctype, str) [onnx] = bytes,
      FBX_DTYPE_LIST(X)
#undef X
  };
  return (unsigned)t < 16 ? k_size[(unsigned)t] : 0;
}
static inline const char *fbx_dtype_name(fbx_dtype t) { /* "float32", ...; "undefined" */
  switch (t) {
#define X(name, onnx, bytes, ctype, str) case FBX_DTYPE_##name: return str;
    FBX_DTYPE_LIST(X)
#undef X
    default: return "undefined";
  }
}
bool fbx_dtype_is_valid(int onnx_type);       /* one of FBX_DTYPE_LIST */
bool fbx_dtype_is_float(fbx_dtype t);         /* F16, F32, F64 */
bool fbx_dtype_is_int(fbx_dtype t);           /* signed or unsigned integers (not bool) */

/* IEEE half <-> float, round-to-nearest-even. */
float fbx_f16_to_f32(uint16_t h);
uint16_t fbx_f32_to_f16(float f);

#endif
