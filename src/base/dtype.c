#include "dtype.h"

#include <string.h>

bool fbx_dtype_is_valid(int onnx_type) { return fbx_dtype_size((fbx_dtype)onnx_type) != 0; }

bool fbx_dtype_is_float(fbx_dtype t) {
  return t == FBX_DTYPE_F16 || t == FBX_DTYPE_F32 || t == FBX_DTYPE_F64;
}

bool fbx_dtype_is_int(fbx_dtype t) {
  switch (t) {
    case FBX_DTYPE_U8: case FBX_DTYPE_I8: case FBX_DTYPE_U16: case FBX_DTYPE_I16:
    case FBX_DTYPE_I32: case FBX_DTYPE_I64: case FBX_DTYPE_U32: case FBX_DTYPE_U64:
      return true;
    default:
      return false;
  }
}

float fbx_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: renormalise */
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) { man <<= 1; exp--; }
      man &= 0x3ff;
      bits = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t fbx_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow to inf */
  if (absx < 0x38800000u) { /* result is subnormal or zero */
    if (absx < 0x33000000u) return (uint16_t)sign;
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t half = m >> (shift - 1 + 0);
    /* round to nearest even on the bits shifted out */
    uint32_t res = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    (void)half;
    if (rem > mid || (rem == mid && (res & 1))) res++;
    return (uint16_t)(sign | res);
  }
  uint32_t res = ((absx >> 13) - (112u << 10));
  uint32_t rem = absx & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (res & 1))) res++;
  return (uint16_t)(sign | res);
}
