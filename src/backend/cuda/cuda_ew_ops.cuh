// The semantics of every elementwise op on CUDA, in one place: included by
// cuda_ew.cu (the interpreter kernel, nvcc) and, as text, by every kernel
// cuda_ew_gen.c generates for one fused program (NVRTC). The generated
// kernels call exec() with instructions whose fields are literals, so the
// switches below fold away there; the interpreter runs them as written.
// Needs cuda_kernels.h (kinds, fbx_cuda_ew_ins) and ir_ops.h (the op list).
#ifndef FBX_CUDA_EW_OPS_CUH
#define FBX_CUDA_EW_OPS_CUH

#ifndef FBX_EW_FN
#define FBX_EW_FN __device__ __forceinline__
#endif

// half <-> float through PTX, round to nearest even (as __float2half_rn)
__device__ __forceinline__ float fbx_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short fbx_f2h(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// op -> FBX_IR_CLASS_*, from the one op list (a switch, so a literal op folds)
__device__ __forceinline__ int op_class(int op) {
  switch (op) {
#define X(name, cls, mask) case FBX_IR_OP_##name: return cls;
    FBX_IR_OP_LIST(X)
#undef X
    default: return -1;
  }
}

union reg {
  float f;
  long long i;
};

__device__ __forceinline__ bool ek_is_float(int ek) { return ek == FBX_CUDA_EK_F32 || ek == FBX_CUDA_EK_F16; }

__device__ __forceinline__ reg load(const void *p, int ek, long long off) {
  reg r;
  switch (ek) {
    case FBX_CUDA_EK_F32: r.f = ((const float *)p)[off]; break;
    case FBX_CUDA_EK_F16: r.f = fbx_h2f(((const unsigned short *)p)[off]); break;
    case FBX_CUDA_EK_I64: r.i = ((const long long *)p)[off]; break;
    case FBX_CUDA_EK_I32: r.i = ((const int *)p)[off]; break;
    case FBX_CUDA_EK_I16: r.i = ((const short *)p)[off]; break;
    case FBX_CUDA_EK_I8: r.i = ((const signed char *)p)[off]; break;
    case FBX_CUDA_EK_U16: r.i = ((const unsigned short *)p)[off]; break;
    case FBX_CUDA_EK_U32: r.i = ((const unsigned int *)p)[off]; break;
    case FBX_CUDA_EK_BOOL: r.i = ((const unsigned char *)p)[off] != 0; break;
    default: r.i = ((const unsigned char *)p)[off]; break;
  }
  return r;
}

__device__ __forceinline__ void store(void *p, int ek, long long off, reg r) {
  switch (ek) {
    case FBX_CUDA_EK_F32: ((float *)p)[off] = r.f; break;
    case FBX_CUDA_EK_F16: ((unsigned short *)p)[off] = fbx_f2h(r.f); break;
    case FBX_CUDA_EK_I64: ((long long *)p)[off] = r.i; break;
    case FBX_CUDA_EK_I32: ((int *)p)[off] = (int)r.i; break;
    case FBX_CUDA_EK_I16: ((short *)p)[off] = (short)r.i; break;
    case FBX_CUDA_EK_I8: ((signed char *)p)[off] = (signed char)r.i; break;
    case FBX_CUDA_EK_U16: ((unsigned short *)p)[off] = (unsigned short)r.i; break;
    case FBX_CUDA_EK_U32: ((unsigned int *)p)[off] = (unsigned int)r.i; break;
    default: ((unsigned char *)p)[off] = (unsigned char)r.i; break;
  }
}

// wrap an int64 result to the width of kind ek (as storing and reloading would)
__device__ __forceinline__ long long wrap(long long v, int ek) {
  switch (ek) {
    case FBX_CUDA_EK_I32: return (int)v;
    case FBX_CUDA_EK_I16: return (short)v;
    case FBX_CUDA_EK_I8: return (signed char)v;
    case FBX_CUDA_EK_U8: return (unsigned char)v;
    case FBX_CUDA_EK_U16: return (unsigned short)v;
    case FBX_CUDA_EK_U32: return (unsigned int)v;
    case FBX_CUDA_EK_BOOL: return v != 0;
    default: return v;
  }
}

__device__ __forceinline__ float softplus(float x) { return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

FBX_EW_FN float un_f(int op, float x, float al, float be, float ga) {
  switch (op) {
    case FBX_IR_OP_IDENTITY: return x;
    case FBX_IR_OP_NEG: return -x;
    case FBX_IR_OP_ABS: return fabsf(x);
    case FBX_IR_OP_SQRT: return sqrtf(x);
    case FBX_IR_OP_EXP: return expf(x);
    case FBX_IR_OP_LOG: return logf(x);
    case FBX_IR_OP_RECIPROCAL: return 1.f / x;
    case FBX_IR_OP_ERF: return erff(x);
    case FBX_IR_OP_TANH: return tanhf(x);
    case FBX_IR_OP_SIGMOID: return 1.f / (1.f + expf(-x));
    case FBX_IR_OP_RELU: return x > 0 ? x : 0.f;
    case FBX_IR_OP_LEAKY_RELU: return x < 0 ? al * x : x;
    case FBX_IR_OP_HARD_SIGMOID: { float v = al * x + be, t = v < 1.f ? v : 1.f; return t > 0.f ? t : 0.f; }
    case FBX_IR_OP_HARD_SWISH: { float v = x / 6.f + 0.5f, t = v < 1.f ? v : 1.f; return x * (t > 0.f ? t : 0.f); }
    case FBX_IR_OP_FLOOR: return floorf(x);
    case FBX_IR_OP_CEIL: return ceilf(x);
    case FBX_IR_OP_ROUND: return rintf(x);
    case FBX_IR_OP_SIGN: return (float)((x > 0) - (x < 0));
    case FBX_IR_OP_SIN: return sinf(x);
    case FBX_IR_OP_COS: return cosf(x);
    case FBX_IR_OP_TAN: return tanf(x);
    case FBX_IR_OP_ASIN: return asinf(x);
    case FBX_IR_OP_ACOS: return acosf(x);
    case FBX_IR_OP_ATAN: return atanf(x);
    case FBX_IR_OP_SINH: return sinhf(x);
    case FBX_IR_OP_COSH: return coshf(x);
    case FBX_IR_OP_ASINH: return asinhf(x);
    case FBX_IR_OP_ACOSH: return acoshf(x);
    case FBX_IR_OP_ATANH: return atanhf(x);
    case FBX_IR_OP_SOFTPLUS: return softplus(x);
    case FBX_IR_OP_SOFTSIGN: return x / (1.f + fabsf(x));
    case FBX_IR_OP_ELU: return x < 0 ? al * (expf(x) - 1.f) : x;
    case FBX_IR_OP_SELU: return x <= 0 ? ga * (al * expf(x) - al) : ga * x;
    case FBX_IR_OP_CELU: return fmaxf(0.f, x) + fminf(0.f, al * (expf(x / al) - 1.f));
    case FBX_IR_OP_MISH: return x * tanhf(softplus(x));
    case FBX_IR_OP_THRESHOLDED_RELU: return x > al ? x : 0.f;
    case FBX_IR_OP_GELU:
      if (al != 0) return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
      return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
    default: return nanf("");
  }
}

FBX_EW_FN float bin_f(int op, float x, float y, float al) {
  switch (op) {
    case FBX_IR_OP_ADD: return x + y;
    case FBX_IR_OP_SUB: return x - y;
    case FBX_IR_OP_MUL: return x * y;
    case FBX_IR_OP_DIV: return x / y;
    case FBX_IR_OP_POW: return y == 2.f ? x * x : powf(x, y);
    case FBX_IR_OP_MAX: return (x != x || x > y) ? x : y;
    case FBX_IR_OP_MIN: return (x != x || x < y) ? x : y;
    case FBX_IR_OP_PRELU: return x < 0 ? x * y : x;
    case FBX_IR_OP_MOD: {
      float r = fmodf(x, y);
      if (al == 0 && r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
    default: return nanf("");
  }
}

FBX_EW_FN long long un_i(int op, long long x) {
  switch (op) {
    case FBX_IR_OP_IDENTITY: return x;
    case FBX_IR_OP_NEG: return (long long)(0ull - (unsigned long long)x);
    case FBX_IR_OP_ABS: return x < 0 ? (long long)(0ull - (unsigned long long)x) : x;
    case FBX_IR_OP_SIGN: return (x > 0) - (x < 0);
    case FBX_IR_OP_RELU: return x > 0 ? x : 0;
    case FBX_IR_OP_NOT: return x == 0;
    case FBX_IR_OP_BITWISE_NOT: return ~x;
    default: return 0;
  }
}

FBX_EW_FN long long bin_i(int op, long long x, long long y, float al) {
  typedef unsigned long long u64;
  switch (op) {
    case FBX_IR_OP_ADD: return (long long)((u64)x + (u64)y);
    case FBX_IR_OP_SUB: return (long long)((u64)x - (u64)y);
    case FBX_IR_OP_MUL: return (long long)((u64)x * (u64)y);
    case FBX_IR_OP_DIV: return y == 0 ? 0 : y == -1 ? (long long)(0ull - (u64)x) : x / y;
    case FBX_IR_OP_MOD: {
      if (y == 0 || y == -1) return 0;
      long long r = x % y;
      if (al == 0 && r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
    case FBX_IR_OP_POW: return (long long)pow((double)x, (double)y);
    case FBX_IR_OP_MAX: return x > y ? x : y;
    case FBX_IR_OP_MIN: return x < y ? x : y;
    case FBX_IR_OP_AND: return (x != 0) & (y != 0);
    case FBX_IR_OP_OR: return (x != 0) | (y != 0);
    case FBX_IR_OP_XOR: return (x != 0) ^ (y != 0);
    case FBX_IR_OP_BITSHIFT_LEFT: return (u64)y >= 64 ? 0 : (long long)((u64)x << (u64)y);
    case FBX_IR_OP_BITSHIFT_RIGHT: return (u64)y >= 64 ? 0 : (long long)((u64)x >> (u64)y);
    case FBX_IR_OP_BITWISE_AND: return x & y;
    case FBX_IR_OP_BITWISE_OR: return x | y;
    case FBX_IR_OP_BITWISE_XOR: return x ^ y;
    case FBX_IR_OP_PRELU: return x < 0 ? (long long)((u64)x * (u64)y) : x;
    default: return 0;
  }
}

template <typename T> __device__ __forceinline__ long long cmp(int op, T x, T y) {
  switch (op) {
    case FBX_IR_OP_EQUAL: return x == y;
    case FBX_IR_OP_LESS: return x < y;
    case FBX_IR_OP_LESS_EQUAL: return x <= y;
    case FBX_IR_OP_GREATER: return x > y;
    default: return x >= y;
  }
}

__device__ __forceinline__ reg to_kind(reg v, int from_ek, int to_ek) {
  reg r;
  bool ff = ek_is_float(from_ek), tf = ek_is_float(to_ek);
  if (ff && tf) r.f = v.f;
  else if (ff) r.i = to_ek == FBX_CUDA_EK_BOOL ? (v.f != 0.f) : (long long)v.f;
  else if (tf) r.f = (float)v.i;
  else r.i = v.i;
  if (tf) { if (to_ek == FBX_CUDA_EK_F16) r.f = fbx_h2f(fbx_f2h(r.f)); }
  else r.i = wrap(r.i, to_ek);
  return r;
}

FBX_EW_FN reg exec(const fbx_cuda_ew_ins &in, const reg *R, const unsigned char *K) {
  reg r;
  int op = in.op, ka = K[in.a];
  reg x = R[in.a];
  switch (op) {
    case FBX_IR_OP_CAST: return to_kind(x, ka, in.ek);
    case FBX_IR_OP_ISNAN: r.i = ek_is_float(ka) ? isnan(x.f) : 0; return r;
    case FBX_IR_OP_ISINF:
      r.i = ek_is_float(ka) && isinf(x.f) && ((x.f > 0 && in.alpha != 0) || (x.f < 0 && in.beta != 0));
      return r;
    case FBX_IR_OP_WHERE: return R[in.a].i ? R[in.b] : R[in.c];
    case FBX_IR_OP_EQUAL: case FBX_IR_OP_LESS: case FBX_IR_OP_LESS_EQUAL:
    case FBX_IR_OP_GREATER: case FBX_IR_OP_GREATER_EQUAL: {
      reg y = R[in.b];
      if (ek_is_float(ka) != ek_is_float(K[in.b])) y = to_kind(y, K[in.b], ka);
      r.i = ek_is_float(ka) ? cmp<float>(op, x.f, y.f) : cmp<long long>(op, x.i, y.i);
      return r;
    }
    default: break;
  }
  if (op_class(op) == FBX_IR_CLASS_EW1) {
    if (ek_is_float(ka)) r.f = un_f(op, x.f, in.alpha, in.beta, in.gamma);
    else r.i = un_i(op, x.i);
  } else {
    reg y = R[in.b];
    if (ek_is_float(ka) != ek_is_float(K[in.b])) y = to_kind(y, K[in.b], ka);
    if (ek_is_float(ka)) r.f = bin_f(op, x.f, y.f, in.alpha);
    else r.i = bin_i(op, x.i, y.i, in.alpha);
  }
  if (ek_is_float(in.ek) != ek_is_float(ka)) return to_kind(r, ka, in.ek);
  if (ek_is_float(in.ek)) { if (in.ek == FBX_CUDA_EK_F16) r.f = fbx_h2f(fbx_f2h(r.f)); }
  else r.i = wrap(r.i, in.ek);
  return r;
}


#endif
