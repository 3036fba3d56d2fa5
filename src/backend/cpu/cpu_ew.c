/* The elementwise program interpreter (FUSED_EW) and every single EW op.
 *
 * Values are computed in four classes: f32 (F32, F16), f64, i64 (all signed
 * ints, U8/U16/U32, BOOL) and u64. Each register is a block of up to
 * FBX_EW_BLOCK elements in its class; a result whose dtype is narrower than
 * its class is wrapped (ints) or rounded to half (F16) after each instruction,
 * so a fused chain gives the same values as the unfused one.
 *
 * Broadcasting is resolved once per run: dims are coalesced and every input
 * gets one stride per coalesced dim (0 where broadcast); the innermost stride
 * is 0 or 1, so loading a block is a few memcpy/fill runs. Inputs already in
 * their class layout and contiguous over a block are read in place. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_simd.h"
#include "cpu_epi_chain.h"

#define FBX_EW_BLOCK 2048 /* elements per block: amortises per-block setup, slots stay in L2 */
#define FBX_EW_PAR_MIN 32768

typedef enum { FBX__EW_F32, FBX__EW_F64, FBX__EW_I64, FBX__EW_U64 } fbx__ew_class;

static fbx__ew_class fbx__ew_class_of(fbx_dtype t) {
  switch (t) {
    case FBX_DTYPE_F32: case FBX_DTYPE_F16: return FBX__EW_F32;
    case FBX_DTYPE_F64: return FBX__EW_F64;
    case FBX_DTYPE_U64: return FBX__EW_U64;
    default: return FBX__EW_I64;
  }
}

/* ---- vectorised transcendental helpers (f32: AVX2; f64: libm) ----
 * Each comment gives the max error measured over the float range by
 * tests/backend/test_cpu_math_ulp.c (SIMD body and scalar tail), in ulps of
 * the correctly rounded result. */

/* max 1.25 ulp (tail: glibc expf, 0.5); exp(x > 88.7228) = +inf, subnormal
 * results down to 2^-149 */
static void fbx__ew_exp_f32(const float *a, float *o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, fbx__exp256(_mm256_loadu_ps(a + i)));
  for (; i < n; i++) o[i] = expf(a[i]);
}

/* erf: fbx__erf256 (max 0.98 ulp), the tail glibc erff */
static void fbx__ew_erf_f32(const float *a, float *o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, fbx__erf256(_mm256_loadu_ps(a + i)));
  for (; i < n; i++) o[i] = erff(a[i]);
}
static void fbx__ew_erf_f64(const double *a, double *o, int64_t n) {
  for (int64_t i = 0; i < n; i++) o[i] = erf(a[i]);
}

/* sigmoid: fbx__sigmoid256 (cpu_simd.h, max 2.35 ulp), the tail fbx__sigmoid1 (1.84) */
static void fbx__ew_sigmoid_f32(const float *a, float *o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, fbx__sigmoid256(_mm256_loadu_ps(a + i)));
  for (; i < n; i++) o[i] = fbx__sigmoid1(a[i]);
}
/* tanh: fbx__tanh256 (cpu_simd.h, max 1.43 ulp), the tail glibc tanhf (1.96) */
static void fbx__ew_tanh_f32(const float *a, float *o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, fbx__tanh256(_mm256_loadu_ps(a + i)));
  for (; i < n; i++) o[i] = tanhf(a[i]);
}
void fbx_cpu_sigmoid_f32(const float *a, float *o, int64_t n) { fbx__ew_sigmoid_f32(a, o, n); }
void fbx_cpu_tanh_f32(const float *a, float *o, int64_t n) { fbx__ew_tanh_f32(a, o, n); }

/* max(0, min(1, alpha x + beta)), NaN -> NaN: minps/maxps with the constant
 * first return the NaN operand (GCC compiles the select form to compares and
 * blends, ~20% slower). */
static inline float fbx__hard_sigmoid1(float x, float al, float be) {
  float v = al * x + be, t = v > 1.f ? 1.f : v;
  return t < 0.f ? 0.f : t;
}
static void fbx__ew_hard_sigmoid_f32(const float *a, float *o, int64_t n, float al, float be) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.f), zero = _mm256_setzero_ps();
  const __m256 va = _mm256_set1_ps(al), vb = _mm256_set1_ps(be);
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), va, vb);
    _mm256_storeu_ps(o + i, _mm256_max_ps(zero, _mm256_min_ps(one, v)));
  }
  for (; i < n; i++) o[i] = fbx__hard_sigmoid1(a[i], al, be);
}
static void fbx__ew_hard_sigmoid_f64(const double *a, double *o, int64_t n, double al, double be) {
  for (int64_t i = 0; i < n; i++) {
    double v = al * a[i] + be, t = v > 1 ? 1 : v;
    o[i] = t < 0 ? 0 : t;
  }
}

/* x * max(0, min(1, x/6 + 1/2)); t == 0 (x <= -3, also -inf) gives 0, not
 * -inf * 0; NaN -> NaN (the min/max operand order keeps it). Written with
 * intrinsics: GCC does not if-convert the scalar form (8 ns/element). */
static inline float fbx__hard_swish1(float x) {
  float v = x / 6.f + 0.5f, t0 = v > 1.f ? 1.f : v, t = t0 < 0.f ? 0.f : t0;
  return t == 0.f ? 0.f : x * t;
}
static void fbx__ew_hard_swish_f32(const float *a, float *o, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.f), zero = _mm256_setzero_ps();
  const __m256 six = _mm256_set1_ps(6.f), half = _mm256_set1_ps(0.5f);
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(a + i);
    __m256 v = _mm256_add_ps(_mm256_div_ps(x, six), half);
    __m256 t = _mm256_max_ps(zero, _mm256_min_ps(one, v)); /* minps/maxps return v when v is NaN */
    __m256 r = _mm256_mul_ps(x, t);
    _mm256_storeu_ps(o + i, _mm256_andnot_ps(_mm256_cmp_ps(t, zero, _CMP_EQ_OQ), r));
  }
  for (; i < n; i++) o[i] = fbx__hard_swish1(a[i]);
}
static void fbx__ew_hard_swish_f64(const double *a, double *o, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double x = a[i], v = x / 6 + 0.5, t0 = v > 1 ? 1 : v, t = t0 < 0 ? 0 : t0;
    o[i] = t == 0 ? 0 : x * t;
  }
}
static void fbx__ew_exp_f64(const double *a, double *o, int64_t n) {
  for (int64_t i = 0; i < n; i++) o[i] = exp(a[i]);
}
static void fbx__ew_sigmoid_f64(const double *a, double *o, int64_t n) {
  for (int64_t i = 0; i < n; i++) { /* same formulation as fbx__sigmoid1 */
    double e = exp(-fabs(a[i]));
    o[i] = (a[i] >= 0 ? 1.0 : e) / (1.0 + e);
  }
}
static void fbx__ew_tanh_f64(const double *a, double *o, int64_t n) {
  for (int64_t i = 0; i < n; i++) o[i] = tanh(a[i]);
}

/* ---- op bodies per class ---- */
#define FBX__EW_CAT2(a, b) a##b
#define FBX__EW_CAT(a, b) FBX__EW_CAT2(a, b)

#define FBX_EW_T float
#define FBX_EW_SFX f32
#define FBX_EW_FLOAT 1
#define FBX_EW_MF f
#include "cpu_ew_ops.inc"
#undef FBX_EW_T
#undef FBX_EW_SFX
#undef FBX_EW_MF

#define FBX_EW_T double
#define FBX_EW_SFX f64
#define FBX_EW_MF
#include "cpu_ew_ops.inc"
#undef FBX_EW_T
#undef FBX_EW_SFX
#undef FBX_EW_MF
#undef FBX_EW_FLOAT

#define FBX_EW_FLOAT 0
#define FBX_EW_T int64_t
#define FBX_EW_SIGNED 1
#define FBX_EW_SFX i64
#include "cpu_ew_ops.inc"
#undef FBX_EW_T
#undef FBX_EW_SFX
#undef FBX_EW_SIGNED

#define FBX_EW_T uint64_t
#define FBX_EW_SIGNED 0
#define FBX_EW_SFX u64
#include "cpu_ew_ops.inc"
#undef FBX_EW_SIGNED
#undef FBX_EW_T
#undef FBX_EW_SFX
#undef FBX_EW_FLOAT

/* ---- conversions between a tensor dtype and a class, and between classes ---- */

/* dst[0..n) (class of dt) <- src elements src_off.. with stride 0 or 1. */
static void fbx__ew_load(void *dst, fbx_dtype dt, const void *src, int64_t off, int stride, int64_t n) {
#define LD(CT, ST)                                                  \
  do {                                                              \
    CT *d = dst;                                                    \
    const ST *s = (const ST *)src + off;                            \
    if (stride) {                                                   \
      for (int64_t i = 0; i < n; i++) d[i] = (CT)s[i];              \
    } else {                                                        \
      CT v = (CT)s[0];                                              \
      for (int64_t i = 0; i < n; i++) d[i] = v;                     \
    }                                                               \
  } while (0)
  switch (dt) {
    case FBX_DTYPE_F32: LD(float, float); break;
    case FBX_DTYPE_F64: LD(double, double); break;
    case FBX_DTYPE_F16: {
      float *d = dst;
      const uint16_t *s = (const uint16_t *)src + off;
      if (stride) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
          _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
        for (; i < n; i++) d[i] = _cvtsh_ss(s[i]);
      } else {
        float v = _cvtsh_ss(s[0]);
        for (int64_t i = 0; i < n; i++) d[i] = v;
      }
      break;
    }
    case FBX_DTYPE_I8: LD(int64_t, int8_t); break;
    case FBX_DTYPE_U8: case FBX_DTYPE_BOOL: LD(int64_t, uint8_t); break;
    case FBX_DTYPE_I16: LD(int64_t, int16_t); break;
    case FBX_DTYPE_U16: LD(int64_t, uint16_t); break;
    case FBX_DTYPE_I32: LD(int64_t, int32_t); break;
    case FBX_DTYPE_U32: LD(int64_t, uint32_t); break;
    case FBX_DTYPE_I64: LD(int64_t, int64_t); break;
    case FBX_DTYPE_U64: LD(uint64_t, uint64_t); break;
    default: break;
  }
#undef LD
}

/* dst tensor elements off.. <- src[0..n) (class of dt). */
static void fbx__ew_store(void *dst, fbx_dtype dt, int64_t off, const void *src, int64_t n) {
#define ST(DT, CT)                                              \
  do {                                                          \
    DT *d = (DT *)dst + off;                                    \
    const CT *s = src;                                          \
    for (int64_t i = 0; i < n; i++) d[i] = (DT)s[i];            \
  } while (0)
  switch (dt) {
    case FBX_DTYPE_F32: ST(float, float); break;
    case FBX_DTYPE_F64: ST(double, double); break;
    case FBX_DTYPE_F16: {
      uint16_t *d = (uint16_t *)dst + off;
      const float *s = src;
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
      for (; i < n; i++) d[i] = _cvtss_sh(s[i], _MM_FROUND_TO_NEAREST_INT);
      break;
    }
    case FBX_DTYPE_I8: ST(int8_t, int64_t); break;
    case FBX_DTYPE_U8: ST(uint8_t, int64_t); break;
    case FBX_DTYPE_BOOL: {
      uint8_t *d = (uint8_t *)dst + off;
      const int64_t *s = src;
      for (int64_t i = 0; i < n; i++) d[i] = s[i] != 0;
      break;
    }
    case FBX_DTYPE_I16: ST(int16_t, int64_t); break;
    case FBX_DTYPE_U16: ST(uint16_t, int64_t); break;
    case FBX_DTYPE_I32: ST(int32_t, int64_t); break;
    case FBX_DTYPE_U32: ST(uint32_t, int64_t); break;
    case FBX_DTYPE_I64: ST(int64_t, int64_t); break;
    case FBX_DTYPE_U64: ST(uint64_t, uint64_t); break;
    default: break;
  }
#undef ST
}

/* Wrap/round a class buffer in place to the range of dtype dt. */
static void fbx__ew_narrow(void *buf, fbx_dtype dt, int64_t n) {
#define NR(NT)                                                        \
  do {                                                                \
    int64_t *d = buf;                                                 \
    for (int64_t i = 0; i < n; i++) d[i] = (int64_t)(NT)d[i];         \
  } while (0)
  switch (dt) {
    case FBX_DTYPE_F16: {
      float *d = buf;
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(d + i), _MM_FROUND_TO_NEAREST_INT)));
      for (; i < n; i++) d[i] = _cvtsh_ss(_cvtss_sh(d[i], _MM_FROUND_TO_NEAREST_INT));
      break;
    }
    case FBX_DTYPE_I8: NR(int8_t); break;
    case FBX_DTYPE_U8: NR(uint8_t); break;
    case FBX_DTYPE_I16: NR(int16_t); break;
    case FBX_DTYPE_U16: NR(uint16_t); break;
    case FBX_DTYPE_I32: NR(int32_t); break;
    case FBX_DTYPE_U32: NR(uint32_t); break;
    case FBX_DTYPE_BOOL: {
      int64_t *d = buf;
      for (int64_t i = 0; i < n; i++) d[i] = d[i] != 0;
      break;
    }
    default: break;
  }
#undef NR
}

static inline int64_t fbx__f2i(double v) { return v != v ? 0 : (int64_t)v; }
static inline uint64_t fbx__f2u(double v) {
  return v != v ? 0 : v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
}

/* Class-to-class conversion (CAST and mixed-class operands). to_bool: x != 0. */
static void fbx__ew_convert(fbx__ew_class sc, const void *src, fbx__ew_class dc, void *dst,
                            int64_t n, bool to_bool) {
#define CV(ST, DT, EXPR)                                          \
  do {                                                            \
    const ST *s = src;                                            \
    DT *d = dst;                                                  \
    for (int64_t i = 0; i < n; i++) {                             \
      ST x = s[i];                                                \
      d[i] = (EXPR);                                              \
    }                                                             \
  } while (0)
#define CVS(ST)                                                   \
  do {                                                            \
    if (to_bool) {                                                \
      CV(ST, int64_t, x != 0);                                    \
    } else if (dc == FBX__EW_F32) {                               \
      CV(ST, float, (float)x);                                    \
    } else if (dc == FBX__EW_F64) {                               \
      CV(ST, double, (double)x);                                  \
    } else if (dc == FBX__EW_I64) {                               \
      if (sc == FBX__EW_F32 || sc == FBX__EW_F64) CV(ST, int64_t, fbx__f2i((double)x)); \
      else CV(ST, int64_t, (int64_t)x);                           \
    } else {                                                      \
      if (sc == FBX__EW_F32 || sc == FBX__EW_F64) CV(ST, uint64_t, fbx__f2u((double)x)); \
      else CV(ST, uint64_t, (uint64_t)x);                         \
    }                                                             \
  } while (0)
  switch (sc) {
    case FBX__EW_F32: CVS(float); break;
    case FBX__EW_F64: CVS(double); break;
    case FBX__EW_I64: CVS(int64_t); break;
    case FBX__EW_U64: CVS(uint64_t); break;
  }
#undef CVS
#undef CV
}

/* f32 binary op with b one value over the block (a per-channel or scalar
 * operand): the same arithmetic as the array loop, without reading b. */
static bool fbx__ew_bin_f32_splat_b(fbx_ir_op op, const float *restrict a, float y, float *restrict o, int64_t n) {
#define SPL(expr)                     \
  for (int64_t i = 0; i < n; i++) {   \
    const float x = a[i];             \
    o[i] = (expr);                    \
  }                                   \
  return true
  switch (op) {
    case FBX_IR_OP_ADD: SPL(x + y);
    case FBX_IR_OP_SUB: SPL(x - y);
    case FBX_IR_OP_MUL: SPL(x * y);
    case FBX_IR_OP_DIV: SPL(x / y);
    case FBX_IR_OP_MAX: SPL((x != x || x > y) ? x : y);
    case FBX_IR_OP_MIN: SPL((x != x || x < y) ? x : y);
    case FBX_IR_OP_POW: /* x^2 (RMSNorm's Pow) as the general loop computes it, vectorised; others there */
      if (y != 2.f) return false;
      SPL(x * x);
    default: return false;
  }
#undef SPL
}

/* ---- one instruction over a block ---- */
static bool fbx__ew_exec(const fbx_ir_ew_instr *ins, const fbx_dtype *rdt, void *const *regs,
                         const bool *splat, void *dst, void *tmp, int64_t n) {
  fbx__ew_class oc = fbx__ew_class_of(ins->dtype);
  fbx__ew_class ac = fbx__ew_class_of(rdt[ins->a]);
  const void *a = regs[ins->a];
  int cls = fbx_ir_op_class(ins->op);
  if (ins->op == FBX_IR_OP_CAST) {
    if (ac == oc && ins->dtype != FBX_DTYPE_BOOL) {
      memcpy(dst, a, (size_t)n * (oc == FBX__EW_F32 ? 4 : 8));
    } else {
      fbx__ew_convert(ac, a, oc, dst, n, ins->dtype == FBX_DTYPE_BOOL);
    }
    return true;
  }
  if (ins->op == FBX_IR_OP_ISNAN || ins->op == FBX_IR_OP_ISINF) {
    int64_t *o = dst;
    bool pos = ins->params.ew.alpha != 0, neg = ins->params.ew.beta != 0;
    for (int64_t i = 0; i < n; i++) {
      double x = ac == FBX__EW_F32 ? (double)((const float *)a)[i]
               : ac == FBX__EW_F64 ? ((const double *)a)[i] : 0.0;
      o[i] = ins->op == FBX_IR_OP_ISNAN ? (x != x) : ((pos && x == INFINITY) || (neg && x == -INFINITY));
    }
    return true;
  }
  if (cls == FBX_IR_CLASS_EW1) {
    if (ac != oc) return false;
    switch (oc) {
      case FBX__EW_F32: return fbx__ew_un_f32(ins->op, &ins->params, a, dst, n);
      case FBX__EW_F64: return fbx__ew_un_f64(ins->op, &ins->params, a, dst, n);
      case FBX__EW_I64: return fbx__ew_un_i64(ins->op, &ins->params, a, dst, n);
      case FBX__EW_U64: return fbx__ew_un_u64(ins->op, &ins->params, a, dst, n);
    }
    return false;
  }
  if (ins->op == FBX_IR_OP_WHERE) {
    fbx__ew_class cc = ac;
    const void *b = regs[ins->b], *cv = regs[ins->c];
    if (fbx__ew_class_of(rdt[ins->b]) != oc || fbx__ew_class_of(rdt[ins->c]) != oc) return false;
    const void *cond = a;
    if (cc != FBX__EW_I64) {
      fbx__ew_convert(cc, a, FBX__EW_I64, tmp, n, true);
      cond = tmp;
    }
    const int64_t *k = cond;
    if (oc == FBX__EW_F32) {
      const float *x = b, *y = cv;
      float *o = dst;
      for (int64_t i = 0; i < n; i++) o[i] = k[i] ? x[i] : y[i];
    } else {
      const uint64_t *x = b, *y = cv;
      uint64_t *o = dst;
      for (int64_t i = 0; i < n; i++) o[i] = k[i] ? x[i] : y[i];
    }
    return true;
  }
  /* binary */
  const void *b = regs[ins->b];
  fbx__ew_class bc = fbx__ew_class_of(rdt[ins->b]);
  if (oc == FBX__EW_F32 && ac == FBX__EW_F32 && bc == FBX__EW_F32) {
    if (splat[ins->b] && fbx__ew_bin_f32_splat_b(ins->op, a, *(const float *)b, dst, n)) return true;
    bool comm = ins->op == FBX_IR_OP_ADD || ins->op == FBX_IR_OP_MUL;
    if (comm && splat[ins->a] && fbx__ew_bin_f32_splat_b(ins->op, b, *(const float *)a, dst, n)) return true;
  }
  if (bc != ac) { /* POW with an exponent of another class */
    fbx__ew_convert(bc, b, ac, tmp, n, false);
    b = tmp;
  }
  switch (ins->op) {
    case FBX_IR_OP_EQUAL: case FBX_IR_OP_LESS: case FBX_IR_OP_LESS_EQUAL:
    case FBX_IR_OP_GREATER: case FBX_IR_OP_GREATER_EQUAL:
      if (oc != FBX__EW_I64) return false;
      switch (ac) {
        case FBX__EW_F32: return fbx__ew_cmp_f32(ins->op, a, b, dst, n);
        case FBX__EW_F64: return fbx__ew_cmp_f64(ins->op, a, b, dst, n);
        case FBX__EW_I64: return fbx__ew_cmp_i64(ins->op, a, b, dst, n);
        case FBX__EW_U64: return fbx__ew_cmp_u64(ins->op, a, b, dst, n);
      }
      return false;
    default: break;
  }
  if (ac != oc) return false;
  switch (oc) {
    case FBX__EW_F32: return fbx__ew_bin_f32(ins->op, &ins->params, a, b, dst, n);
    case FBX__EW_F64: return fbx__ew_bin_f64(ins->op, &ins->params, a, b, dst, n);
    case FBX__EW_I64: return fbx__ew_bin_i64(ins->op, &ins->params, a, b, dst, n);
    case FBX__EW_U64: return fbx__ew_bin_u64(ins->op, &ins->params, a, b, dst, n);
  }
  return false;
}

/* ---- the per-run plan ---- */
typedef struct fbx__ew_input {
  const void *data;
  fbx_dtype dtype;
  int64_t strides[FBX_MAX_RANK];   /* per coalesced dim, 0 = broadcast */
  bool direct;                     /* class layout == dtype layout: may be read in place */
  bool all0;                       /* every stride 0: one value for the whole tensor */
} fbx__ew_input;

/* Per worker and input: the input's slot holds element `src` broadcast over
 * n elements (src NULL: unknown). Saves refilling per-channel/scalar
 * operands block after block; input slots are never reused by instructions. */
typedef struct fbx__ew_memo {
  const void *src;
  int64_t n;
} fbx__ew_memo;

typedef struct fbx__ew_plan {
  const fbx_ir_ew_program *prog;
  fbx_dtype *rdt;                  /* (n_regs) dtype of every register */
  int *slot;                       /* (n_regs) buffer slot of every register */
  int n_slots;
  int rank;                        /* coalesced */
  int64_t dims[FBX_MAX_RANK];
  int64_t row;                     /* > 0: blocks stop at multiples of this (the innermost dim), so
                                    * an operand broadcast along it is one value per block (splat) */
  fbx__ew_input in[FBX_IR_MAX_INPUTS];
  void *out;
  fbx_dtype out_dtype;
  unsigned char *bufs;             /* per worker: (n_slots + 1) * FBX_EW_BLOCK * 8 bytes */
  size_t worker_bytes;
  _Atomic int failed;
} fbx__ew_plan;

/* Load block [pos, pos+n) of input j into buf, or point *reg at the input. */
static void fbx__ew_load_block(const fbx__ew_plan *pl, const fbx__ew_input *in, int64_t pos,
                               int64_t n, void *buf, void **reg, fbx__ew_memo *memo, bool *splat) {
  int r = pl->rank;
  int64_t idx[FBX_MAX_RANK];
  int64_t rem = pos, off = 0;
  *reg = buf;
  *splat = true;
  if (in->all0) {
    if (memo->src != in->data || memo->n < n) fbx__ew_load(buf, in->dtype, in->data, 0, 0, n);
    memo->src = in->data;
    memo->n = n > memo->n ? n : memo->n;
    return;
  }
  for (int d = r - 1; d >= 0; d--) {
    idx[d] = rem % pl->dims[d];
    rem /= pl->dims[d];
    off += idx[d] * in->strides[d];
  }
  int64_t inner = pl->dims[r - 1];
  int s1 = in->strides[r - 1] != 0;
  if (s1 && idx[r - 1] + n <= inner && in->direct) {
    *reg = (unsigned char *)in->data + off * (int64_t)fbx_dtype_size(in->dtype);
    *splat = n == 1;
    return;
  }
  if (!s1 && idx[r - 1] + n <= inner) { /* one value over the block */
    const void *src = (const unsigned char *)in->data + off * (int64_t)fbx_dtype_size(in->dtype);
    if (memo->src != src || memo->n < n) {
      fbx__ew_load(buf, in->dtype, in->data, off, 0, n);
      memo->src = src;
      memo->n = n;
    }
    return;
  }
  memo->src = NULL;
  *splat = n == 1;
  size_t esz = fbx__ew_class_of(in->dtype) == FBX__EW_F32 ? 4 : 8;
  int64_t done = 0;
  while (done < n) {
    int64_t run = inner - idx[r - 1];
    if (run > n - done) run = n - done;
    fbx__ew_load((unsigned char *)buf + done * esz, in->dtype, in->data, off, s1, run);
    done += run;
    if (done >= n) break;
    /* advance the multi-index by `run` (reaches the end of the innermost dim) */
    off += run * in->strides[r - 1];
    idx[r - 1] += run;
    for (int d = r - 1; d > 0 && idx[d] == pl->dims[d]; d--) {
      off -= idx[d] * in->strides[d];
      idx[d] = 0;
      idx[d - 1]++;
      off += in->strides[d - 1];
    }
  }
}

/* Copy element 0 of buf (esz bytes) over its n elements, doubling. */
static void fbx__ew_splat_fill(void *buf, size_t esz, int64_t n) {
  unsigned char *p = buf;
  for (int64_t have = 1; have < n;) {
    int64_t k = have < n - have ? have : n - have;
    memcpy(p + (size_t)have * esz, p, (size_t)k * esz);
    have += k;
  }
}

/* Run the program over flattened output elements [begin, end) in blocks of
 * at most FBX_EW_BLOCK (not crossing a multiple of pl->row where set), with
 * worker `worker`'s register buffers. */
static void fbx__ew_range(fbx__ew_plan *pl, int64_t begin, int64_t end, int worker) {
  const fbx_ir_ew_program *prog = pl->prog;
  int n_regs = prog->n_inputs + prog->n_instrs;
  unsigned char *base = pl->bufs + (size_t)worker * pl->worker_bytes;
  void *tmp = base + (size_t)pl->n_slots * FBX_EW_BLOCK * 8;
  fbx__ew_memo *memo = (fbx__ew_memo *)(base + (size_t)(pl->n_slots + 1) * FBX_EW_BLOCK * 8);
  void *regs[n_regs > 0 ? n_regs : 1];
  bool splat[n_regs > 0 ? n_regs : 1]; /* register holds one value over the block */
  for (int64_t pos = begin, n; pos < end; pos += n) {
    n = end - pos < FBX_EW_BLOCK ? end - pos : FBX_EW_BLOCK;
    if (pl->row && n > pl->row - pos % pl->row) n = pl->row - pos % pl->row;
    for (int j = 0; j < prog->n_inputs; j++)
      fbx__ew_load_block(pl, &pl->in[j], pos, n, base + (size_t)pl->slot[j] * FBX_EW_BLOCK * 8, &regs[j],
                         &memo[j], &splat[j]);
    for (int i = 0; i < prog->n_instrs; i++) splat[prog->n_inputs + i] = false;
    for (int i = 0; i < prog->n_instrs; i++) {
      const fbx_ir_ew_instr *ins = &prog->instrs[i];
      int r = prog->n_inputs + i;
      void *dst = base + (size_t)pl->slot[r] * FBX_EW_BLOCK * 8;
      /* every operand one value over the block (RMSNorm's per-row 1/sqrt(mean + eps)):
       * one element computed, then copied over the block, which stays a splat */
      int cls = fbx_ir_op_class(ins->op);
      bool one = n > 1 && splat[ins->a] && (cls < FBX_IR_CLASS_EW2 || splat[ins->b]) &&
                 (cls != FBX_IR_CLASS_EW3 || splat[ins->c]);
      int64_t m = one ? 1 : n;
      if (!fbx__ew_exec(ins, pl->rdt, regs, splat, dst, tmp, m)) {
        atomic_store(&pl->failed, 1);
        return;
      }
      fbx__ew_narrow(dst, ins->dtype, m);
      if (one) {
        fbx__ew_splat_fill(dst, fbx__ew_class_of(ins->dtype) == FBX__EW_F32 ? 4 : 8, n);
        splat[r] = true;
      }
      regs[r] = dst;
    }
    fbx__ew_store(pl->out, pl->out_dtype, pos, regs[prog->out_reg], n);
  }
}

static void fbx__ew_task(void *arg, int64_t b0, int64_t b1, int worker) {
  fbx__ew_plan *pl = arg;
  int64_t total = 1;
  for (int d = 0; d < pl->rank; d++) total *= pl->dims[d];
  int64_t end = b1 * FBX_EW_BLOCK < total ? b1 * FBX_EW_BLOCK : total;
  fbx__ew_range(pl, b0 * FBX_EW_BLOCK, end, worker);
}

/* Register slots of a program (liveness) and the memory its plan needs. */
typedef struct fbx__ew_layout {
  int slot[256];       /* per register */
  int n_slots, n_regs;
  size_t hdr, worker_bytes;
} fbx__ew_layout;

static fbx_status *fbx__ew_layout_make(const fbx_ir_ew_program *prog, fbx__ew_layout *lay) {
  int n_regs = prog->n_inputs + prog->n_instrs;
  if (prog->out_reg < 0 || prog->out_reg >= n_regs) return FBX_ERR_ARG("FUSED_EW: bad out_reg");
  /* liveness: last use of every register */
  int last[256];
  if (n_regs > 256) return FBX_ERR_NOTIMPL("FUSED_EW: program with %d registers (max 256)", n_regs);
  for (int i = 0; i < n_regs; i++) last[i] = -1;
  for (int i = 0; i < prog->n_instrs; i++) {
    const fbx_ir_ew_instr *ins = &prog->instrs[i];
    int cls = fbx_ir_op_class(ins->op);
    if (ins->a < 0 || ins->a >= prog->n_inputs + i) return FBX_ERR_ARG("FUSED_EW: bad operand");
    last[ins->a] = i;
    if (cls >= FBX_IR_CLASS_EW2) {
      if (ins->b < 0 || ins->b >= prog->n_inputs + i) return FBX_ERR_ARG("FUSED_EW: bad operand");
      last[ins->b] = i;
    }
    if (cls == FBX_IR_CLASS_EW3) {
      if (ins->c < 0 || ins->c >= prog->n_inputs + i) return FBX_ERR_ARG("FUSED_EW: bad operand");
      last[ins->c] = i;
    }
    if (cls == FBX_IR_CLASS_OTHER) return FBX_ERR_ARG("FUSED_EW: non-elementwise op %s", fbx_ir_op_name(ins->op));
  }
  last[prog->out_reg] = prog->n_instrs;
  int free_slots[256], n_free = 0, n_slots = 0;
  for (int j = 0; j < prog->n_inputs; j++) lay->slot[j] = n_slots++;
  for (int i = 0; i < prog->n_instrs; i++) {
    int rr = prog->n_inputs + i;
    lay->slot[rr] = n_free ? free_slots[--n_free] : n_slots++;
    const fbx_ir_ew_instr *ins = &prog->instrs[i];
    int ops[3] = {ins->a, fbx_ir_op_class(ins->op) >= FBX_IR_CLASS_EW2 ? ins->b : -1,
                  fbx_ir_op_class(ins->op) == FBX_IR_CLASS_EW3 ? ins->c : -1};
    for (int k = 0; k < 3; k++) {
      int o = ops[k];
      if (o < 0 || last[o] != i) continue;
      bool dup = false;
      for (int q = 0; q < k; q++) dup |= ops[q] == o;
      if (!dup && o >= prog->n_inputs) free_slots[n_free++] = lay->slot[o]; /* input slots stay (memo) */
    }
  }
  lay->n_slots = n_slots;
  lay->n_regs = n_regs;
  lay->hdr = ((sizeof(fbx__ew_plan) + (size_t)n_regs * (sizeof(fbx_dtype) + sizeof(int)) + 63) / 64) * 64;
  lay->worker_bytes = (size_t)(n_slots + 1) * FBX_EW_BLOCK * 8 +
                     ((sizeof(fbx__ew_memo) * (size_t)(prog->n_inputs + 1) + 63) / 64) * 64;
  return NULL;
}

/* Fill the plan in mem (lay->hdr + threads * lay->worker_bytes bytes) for
 * inputs in[0..n_inputs) broadcast to out. */
static fbx_status *fbx__ew_plan_fill(unsigned char *mem, const fbx__ew_layout *lay, const fbx_ir_ew_program *prog,
                                     const fbx_tensor *in, const fbx_tensor *out, int threads, fbx__ew_plan **plo) {
  int n_regs = lay->n_regs;
  int r = out->rank;
  for (int j = 0; j < prog->n_inputs; j++)
    if (in[j].rank > r) return FBX_ERR_ARG("EW: input %d rank %d > output rank %d", j, in[j].rank, r);
  fbx_dtype odt = fbx__ew_class_of(out->dtype) == fbx__ew_class_of(prog->out_reg < prog->n_inputs
      ? in[prog->out_reg].dtype : prog->instrs[prog->out_reg - prog->n_inputs].dtype) ? out->dtype : FBX_DTYPE_UNDEFINED;
  if (odt == FBX_DTYPE_UNDEFINED) return FBX_ERR_NOTIMPL("EW: output dtype %s does not match program", fbx_dtype_name(out->dtype));
  fbx__ew_plan *pl = (fbx__ew_plan *)mem;
  memset(pl, 0, sizeof(*pl));
  pl->prog = prog;
  pl->rdt = (fbx_dtype *)(mem + sizeof(*pl));
  pl->slot = (int *)(pl->rdt + n_regs);
  for (int j = 0; j < prog->n_inputs; j++) pl->rdt[j] = in[j].dtype;
  for (int i = 0; i < prog->n_instrs; i++) pl->rdt[prog->n_inputs + i] = prog->instrs[i].dtype;
  memcpy(pl->slot, lay->slot, (size_t)n_regs * sizeof(int));
  pl->n_slots = lay->n_slots;
  pl->bufs = mem + lay->hdr;
  pl->worker_bytes = lay->worker_bytes;
  pl->out = out->data;
  pl->out_dtype = out->dtype;

  /* broadcast strides, right-aligned, then coalesce */
  int64_t st[FBX_IR_MAX_INPUTS][FBX_MAX_RANK];
  for (int j = 0; j < prog->n_inputs; j++) {
    int64_t s = 1;
    int off = r - in[j].rank;
    for (int d = r - 1; d >= 0; d--) {
      int id = d - off;
      int64_t dim = id >= 0 ? in[j].dims[id] : 1;
      if (dim != 1 && dim != out->dims[d])
        return FBX_ERR_ARG("EW: input %d dim %d (%lld) does not broadcast to %lld", j, d,
                           (long long)dim, (long long)out->dims[d]);
      st[j][d] = dim == 1 ? 0 : s;
      s *= dim;
    }
  }
  int cr = 0;
  for (int d = 0; d < r; d++) {
    if (out->dims[d] == 1) continue;
    bool merge = cr > 0;
    for (int j = 0; merge && j < prog->n_inputs; j++)
      merge = st[j][d] * out->dims[d] == pl->in[j].strides[cr - 1] || (st[j][d] == 0 && pl->in[j].strides[cr - 1] == 0);
    if (merge) {
      pl->dims[cr - 1] *= out->dims[d];
      for (int j = 0; j < prog->n_inputs; j++) pl->in[j].strides[cr - 1] = st[j][d];
    } else {
      pl->dims[cr] = out->dims[d];
      for (int j = 0; j < prog->n_inputs; j++) pl->in[j].strides[cr] = st[j][d];
      cr++;
    }
  }
  if (cr == 0) {
    pl->dims[0] = 1;
    for (int j = 0; j < prog->n_inputs; j++) pl->in[j].strides[0] = 0;
    cr = 1;
  }
  pl->rank = cr;
  /* row-aligned blocks where an operand is broadcast along a long innermost dim
   * (a (rows, 1) statistic over (rows, cols)): it is then one value per block */
  pl->row = 0;
  for (int j = 0; j < prog->n_inputs && cr > 1 && pl->dims[cr - 1] >= 64; j++) {
    bool all0 = true;
    for (int d = 0; d < cr; d++) all0 &= pl->in[j].strides[d] == 0;
    if (!all0 && pl->in[j].strides[cr - 1] == 0) pl->row = pl->dims[cr - 1];
  }
  for (int j = 0; j < prog->n_inputs; j++) {
    pl->in[j].data = in[j].data;
    pl->in[j].dtype = in[j].dtype;
    fbx_dtype t = in[j].dtype;
    pl->in[j].direct = t == FBX_DTYPE_F32 || t == FBX_DTYPE_F64 || t == FBX_DTYPE_I64 || t == FBX_DTYPE_U64;
    if (!in[j].data) return FBX_ERR_ARG("EW: input %d has no data", j);
    pl->in[j].all0 = true;
    for (int d = 0; d < cr; d++) pl->in[j].all0 &= pl->in[j].strides[d] == 0;
  }
  for (int w = 0; w < threads; w++) {
    fbx__ew_memo *memo = (fbx__ew_memo *)(pl->bufs + (size_t)w * lay->worker_bytes +
                                          (size_t)(lay->n_slots + 1) * FBX_EW_BLOCK * 8);
    for (int j = 0; j < prog->n_inputs; j++) memo[j].src = NULL, memo[j].n = 0;
  }
  *plo = pl;
  return NULL;
}

static fbx_status *fbx__ew_failed_status(const fbx_ir_ew_program *prog, const fbx_tensor *out) {
  return FBX_ERR_NOTIMPL("EW: unsupported op/dtype combination in program (first op %s, out %s)",
                         prog->n_instrs ? fbx_ir_op_name(prog->instrs[0].op) : "-",
                         fbx_dtype_name(out->dtype));
}

static fbx_status *fbx__ew_run_program(fbx_cpu_ctx *c, const fbx_ir_ew_program *prog,
                                       const fbx_tensor *in, int n_in, fbx_tensor *out) {
  if (n_in < prog->n_inputs) return FBX_ERR_ARG("FUSED_EW: %d inputs for a program of %d", n_in, prog->n_inputs);
  fbx__ew_layout lay;
  FBX_TRY(fbx__ew_layout_make(prog, &lay));
  int64_t total = fbx_cpu_numel(out);
  if (total == 0) return NULL;
  unsigned char *mem = fbx_cpu_scratch(c, lay.hdr + lay.worker_bytes * (size_t)c->threads);
  if (!mem) return FBX_ERR_OOM();
  fbx__ew_plan *pl;
  FBX_TRY(fbx__ew_plan_fill(mem, &lay, prog, in, out, c->threads, &pl));
  int64_t nblk = (total + FBX_EW_BLOCK - 1) / FBX_EW_BLOCK;
  if (total >= FBX_EW_PAR_MIN)
    fbx_cpu_par(c, nblk, 4, fbx__ew_task, pl);
  else
    fbx__ew_task(pl, 0, nblk, 0);
  if (atomic_load(&pl->failed)) return fbx__ew_failed_status(prog, out);
  return NULL;
}

/* ---- epilogues: a node's elementwise program applied in place to ranges of
 * its output by the producing kernel (see cpu_internal.h). ---- */
fbx_status *fbx_cpu_epi_begin(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                              int first_extra, fbx_tensor *out, size_t caller_bytes, void **caller_mem,
                              fbx_cpu_epi *epi) {
  int reg;
  const fbx_ir_ew_program *prog = fbx_ir_node_epilogue(node, &reg);
  caller_bytes = (caller_bytes + 63) & ~(size_t)63;
  epi->pl = NULL;
  epi->chain = NULL;
  epi->prog = prog;
  epi->out = out;
  if (!prog) {
    *caller_mem = caller_bytes ? fbx_cpu_scratch(c, caller_bytes) : NULL;
    return caller_bytes && !*caller_mem ? FBX_ERR_OOM() : NULL;
  }
  if (reg < 0 || reg >= prog->n_inputs) return FBX_ERR_ARG("%s: bad epilogue register", fbx_ir_op_name(node->op));
  if (n_in - first_extra != prog->n_inputs - 1)
    return FBX_ERR_ARG("%s: %d epilogue inputs for a program of %d", fbx_ir_op_name(node->op), n_in - first_extra,
                       prog->n_inputs);
  fbx_tensor pin[FBX_IR_MAX_INPUTS];
  for (int j = 0, k = first_extra; j < prog->n_inputs; j++) pin[j] = j == reg ? *out : in[k++];
  /* the kernel's own result may have another dtype than the program's (CONV_INT: int32
   * accumulators converted in place to the float output, both 4 bytes) */
  if (prog->in_dtypes[reg] != FBX_DTYPE_UNDEFINED) pin[reg].dtype = prog->in_dtypes[reg];
  if (fbx_dtype_size(pin[reg].dtype) != fbx_dtype_size(out->dtype))
    return FBX_ERR_ARG("%s: epilogue input dtype %s and output %s differ in size", fbx_ir_op_name(node->op),
                       fbx_dtype_name(pin[reg].dtype), fbx_dtype_name(out->dtype));
  fbx_cpu_epi_chain chain; /* programs of per-channel/scalar operands: evaluated in registers */
  if (fbx_cpu_epi_chain_compile(prog, reg, pin, out, &chain)) {
    unsigned char *mem = fbx_cpu_scratch(c, caller_bytes + sizeof chain);
    if (!mem) return FBX_ERR_OOM();
    *caller_mem = caller_bytes ? mem : NULL;
    epi->chain = (fbx_cpu_epi_chain *)(mem + caller_bytes);
    memcpy(epi->chain, &chain, sizeof chain);
    return NULL;
  }
  fbx__ew_layout lay;
  FBX_TRY(fbx__ew_layout_make(prog, &lay));
  unsigned char *mem = fbx_cpu_scratch(c, caller_bytes + lay.hdr + lay.worker_bytes * (size_t)c->threads);
  if (!mem) return FBX_ERR_OOM();
  *caller_mem = caller_bytes ? mem : NULL;
  return fbx__ew_plan_fill(mem + caller_bytes, &lay, prog, pin, out, c->threads, &epi->pl);
}

void fbx_cpu_epi_apply(fbx_cpu_epi *epi, int64_t begin, int64_t end, int worker) {
  if (!epi || end <= begin) return;
  if (epi->chain)
    fbx_cpu_epi_chain_apply(epi->chain, begin, end);
  else if (epi->pl)
    fbx__ew_range(epi->pl, begin, end, worker);
}

fbx_status *fbx_cpu_epi_end(fbx_cpu_epi *epi) {
  if (epi->pl && atomic_load(&epi->pl->failed)) return fbx__ew_failed_status(epi->prog, epi->out);
  return NULL;
}

fbx_status *fbx_cpu_ew_run(FBX_CPU_KERNEL_ARGS) {
  if (n_out < 1) return FBX_ERR_ARG("EW: no output");
  int cls = fbx_ir_op_class(node->op);
  int need = cls == FBX_IR_CLASS_EW1 ? 1 : cls == FBX_IR_CLASS_EW2 ? 2 : 3;
  if (n_in < need) return FBX_ERR_ARG("%s: %d inputs, need %d", fbx_ir_op_name(node->op), n_in, need);
  if (node->op == FBX_IR_OP_IDENTITY && in[0].data == out[0].data) return NULL;
  fbx_ir_ew_instr ins = {.op = node->op, .a = 0, .b = 1, .c = 2, .dtype = out[0].dtype, .params = node->params};
  fbx_ir_ew_program prog = {.n_inputs = need, .n_instrs = 1, .out_reg = need, .instrs = &ins};
  for (int i = 0; i < need; i++) prog.in_dtypes[i] = in[i].dtype;
  info->variant = "ew_interp";
  info->reason = "single elementwise op as a one-instruction program";
  info->flops = (double)fbx_cpu_numel(&out[0]);
  fbx_status *st = fbx__ew_run_program(c, &prog, in, need, &out[0]);
  if (st && fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED) {
    fbx_status_free(st);
    return FBX_ERR_NOTIMPL("%s: dtype %s -> %s not implemented on cpu", fbx_ir_op_name(node->op),
                           fbx_dtype_name(in[0].dtype), fbx_dtype_name(out[0].dtype));
  }
  return st;
}

/* FUSED_EW through the register chain (cpu_epi_chain.h) when one input has
 * the output's float32 shape and the others are values, per-channel values
 * or tensors of that shape (a squeeze-excitation scale, a residual + Relu). */
#define FBX__EW_CHAIN_BLOCK 4096
typedef struct fbx__ew_chain_job {
  fbx_cpu_epi_chain ch;
  int64_t total;
} fbx__ew_chain_job;

static void fbx__ew_chain_task(void *arg, int64_t b0, int64_t b1, int worker) {
  (void)worker;
  const fbx__ew_chain_job *j = arg;
  int64_t end = b1 * FBX__EW_CHAIN_BLOCK < j->total ? b1 * FBX__EW_CHAIN_BLOCK : j->total;
  fbx_cpu_epi_chain_apply(&j->ch, b0 * FBX__EW_CHAIN_BLOCK, end);
}

static bool fbx__ew_chain_run(fbx_cpu_ctx *c, const fbx_ir_ew_program *prog, const fbx_tensor *in, int n_in,
                              fbx_tensor *out) {
  if (n_in < prog->n_inputs || out->dtype != FBX_DTYPE_F32) return false;
  int64_t total = fbx_cpu_numel(out);
  for (int reg = 0; reg < prog->n_inputs; reg++) {
    if (in[reg].dtype != FBX_DTYPE_F32 || fbx_cpu_numel(&in[reg]) != total || in[reg].rank != out->rank) continue;
    fbx__ew_chain_job j = {.total = total};
    if (!fbx_cpu_epi_chain_compile(prog, reg, in, out, &j.ch)) return false;
    int64_t nblk = (total + FBX__EW_CHAIN_BLOCK - 1) / FBX__EW_CHAIN_BLOCK;
    if (total >= FBX_EW_PAR_MIN)
      fbx_cpu_par(c, nblk, 1, fbx__ew_chain_task, &j);
    else
      fbx__ew_chain_task(&j, 0, nblk, 0);
    return true;
  }
  return false;
}

fbx_status *fbx_cpu_k_FUSED_EW(FBX_CPU_KERNEL_ARGS) {
  const fbx_ir_ew_program *prog = node->params.fused.prog;
  if (!prog) return FBX_ERR_ARG("FUSED_EW: no program");
  if (n_out < 1) return FBX_ERR_ARG("FUSED_EW: no output");
  info->flops = (double)fbx_cpu_numel(&out[0]) * prog->n_instrs;
  if (fbx__ew_chain_run(c, prog, in, n_in, &out[0])) {
    info->variant = "ew_chain";
    info->reason = "fused elementwise program in registers (per-channel/scalar/same-shape operands)";
    return NULL;
  }
  info->variant = "ew_fused";
  info->reason = "fused elementwise program, blocked interpreter";
  info->flops = (double)fbx_cpu_numel(&out[0]) * prog->n_instrs;
  return fbx__ew_run_program(c, prog, in, n_in, &out[0]);
}
