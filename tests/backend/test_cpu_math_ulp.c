/* Float32 math of the CPU backend against libm in double, over the whole
 * float range: max error in ulps per function, special values and the
 * overflow/underflow boundaries.
 *
 * Every function runs as a one-op node through the elementwise interpreter,
 * so the values take the same code the kernels (and fused programs, and conv
 * epilogues) use: a large array exercises the AVX2 bodies (blocks of 2048,
 * 8 lanes), arrays of 7 elements the scalar tails. The sample is every
 * 4096th bit pattern (jittered low bits: ±0, subnormals, normals, ±inf and
 * NaNs), every 256th one in |x| in [1/16, 256) where the kernels switch
 * formulas, and +-64 ulps around every boundary (exp overflow/FLT_MIN/
 * subnormal limits, the tanh switch point, ...).
 *
 * Error of a result g for the double reference r: if float(r) is NaN or
 * +-inf, g must be the same; otherwise |g - r| / ulp(float(r)) (the ulp of a
 * subnormal is 2^-149). The bound per function is the measured maximum
 * rounded up (README "Numerics" lists the measured figures). */
#include <float.h>
#include <stdint.h>

#include "cpu_test_util.h"
#include "../../src/backend/cpu/cpu_simd.h"
#include "../../src/backend/cpu/cpu_simd512.h"

/* Sample density: log2 of the bit-pattern strides. The sanitizer build checks
 * memory, not values, and runs ~30x slower: a 16x sparser sample there. */
#ifdef __SANITIZE_ADDRESS__
#define SPARSE_LOG2 16
#define DENSE_LOG2 12
#else
#define SPARSE_LOG2 12
#define DENSE_LOG2 8
#endif

typedef double (*ref_fn)(double x, const fbx_ir_params *p);

static double r_exp(double x, const fbx_ir_params *p) { (void)p; return exp(x); }
static double r_log(double x, const fbx_ir_params *p) { (void)p; return log(x); }
static double r_sqrt(double x, const fbx_ir_params *p) { (void)p; return sqrt(x); }
static double r_recip(double x, const fbx_ir_params *p) { (void)p; return 1.0 / x; }
static double r_erf(double x, const fbx_ir_params *p) { (void)p; return erf(x); }
static double r_tanh(double x, const fbx_ir_params *p) { (void)p; return tanh(x); }
static double r_sin(double x, const fbx_ir_params *p) { (void)p; return sin(x); }
static double r_cos(double x, const fbx_ir_params *p) { (void)p; return cos(x); }
static double r_tan(double x, const fbx_ir_params *p) { (void)p; return tan(x); }
static double r_asin(double x, const fbx_ir_params *p) { (void)p; return asin(x); }
static double r_acos(double x, const fbx_ir_params *p) { (void)p; return acos(x); }
static double r_atan(double x, const fbx_ir_params *p) { (void)p; return atan(x); }
static double r_sinh(double x, const fbx_ir_params *p) { (void)p; return sinh(x); }
static double r_cosh(double x, const fbx_ir_params *p) { (void)p; return cosh(x); }
static double r_asinh(double x, const fbx_ir_params *p) { (void)p; return asinh(x); }
static double r_acosh(double x, const fbx_ir_params *p) { (void)p; return acosh(x); }
static double r_atanh(double x, const fbx_ir_params *p) { (void)p; return atanh(x); }
/* e^x / (1 + e^x) written so neither side overflows */
static double r_sigmoid(double x, const fbx_ir_params *p) {
  (void)p;
  return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}
static double r_softplus(double x, const fbx_ir_params *p) {
  (void)p;
  return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
static double r_softsign(double x, const fbx_ir_params *p) {
  (void)p;
  return isinf(x) ? copysign(1.0, x) : x / (1.0 + fabs(x));
}
/* alpha / gamma as the kernel sees them: float attributes */
static double r_elu(double x, const fbx_ir_params *p) { return x < 0 ? (double)p->ew.alpha * expm1(x) : x; }
static double r_selu(double x, const fbx_ir_params *p) {
  return x <= 0 ? (double)p->ew.gamma * (double)p->ew.alpha * expm1(x) : (double)p->ew.gamma * x;
}
static double r_celu(double x, const fbx_ir_params *p) {
  double a = p->ew.alpha;
  return x > 0 ? x : a * expm1(x / a);
}
/* limits at -inf: Mish, Gelu -> 0 */
static double r_mish(double x, const fbx_ir_params *p) {
  (void)p;
  if (x == -INFINITY) return 0;
  return x * tanh(r_softplus(x, NULL));
}
static double r_gelu_erf(double x, const fbx_ir_params *p) {
  (void)p;
  if (x == -INFINITY) return 0;
  return 0.5 * x * erfc(-x / sqrt(2.0));
}
/* 0.5 x (1 + tanh(u)) = x e^2u / (1 + e^2u) (the same value; no cancellation) */
static double r_gelu_tanh(double x, const fbx_ir_params *p) {
  (void)p;
  if (x == -INFINITY) return 0;
  double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return u >= 0 ? x / (1.0 + exp(-2.0 * u)) : x * exp(2.0 * u) / (1.0 + exp(2.0 * u));
}

typedef struct fcase {
  const char *name;
  fbx_ir_op op;
  float alpha, beta, gamma;
  ref_fn ref;
  double bound;      /* max ulp allowed */
  bool zsign;        /* a zero result must carry the reference's sign */
  double pow_y;      /* POW: the exponent (a broadcast scalar); else 0 */
} fcase;

static double r_pow_y;
static double r_pow(double x, const fbx_ir_params *p) { (void)p; return pow(x, r_pow_y); }

static const fcase k_cases[] = {
    {"Exp", FBX_IR_OP_EXP, 0, 0, 0, r_exp, 1.5, false, 0},
    {"Log", FBX_IR_OP_LOG, 0, 0, 0, r_log, 1, true, 0},
    {"Sqrt", FBX_IR_OP_SQRT, 0, 0, 0, r_sqrt, 0.5, true, 0},
    {"Reciprocal", FBX_IR_OP_RECIPROCAL, 0, 0, 0, r_recip, 0.5, true, 0},
    {"Erf", FBX_IR_OP_ERF, 0, 0, 0, r_erf, 1, true, 0},
    {"Tanh", FBX_IR_OP_TANH, 0, 0, 0, r_tanh, 2.5, true, 0},
    {"Sigmoid", FBX_IR_OP_SIGMOID, 0, 0, 0, r_sigmoid, 3, false, 0},
    {"Softplus", FBX_IR_OP_SOFTPLUS, 0, 0, 0, r_softplus, 2, false, 0},
    {"Softsign", FBX_IR_OP_SOFTSIGN, 0, 0, 0, r_softsign, 2, true, 0},
    {"Elu", FBX_IR_OP_ELU, 0.7f, 0, 0, r_elu, 2, false, 0},
    {"Selu", FBX_IR_OP_SELU, 1.67326319217681884765625f, 0, 1.05070102214813232421875f, r_selu, 3, false, 0},
    {"Celu", FBX_IR_OP_CELU, 1.5f, 0, 0, r_celu, 2, false, 0},
    {"Mish", FBX_IR_OP_MISH, 0, 0, 0, r_mish, 5, false, 0},
    {"Gelu(erf)", FBX_IR_OP_GELU, 0, 0, 0, r_gelu_erf, 2.5, false, 0},
    {"Gelu(tanh)", FBX_IR_OP_GELU, 1, 0, 0, r_gelu_tanh, 1, false, 0},
    {"Sin", FBX_IR_OP_SIN, 0, 0, 0, r_sin, 1, true, 0},
    {"Cos", FBX_IR_OP_COS, 0, 0, 0, r_cos, 1, false, 0},
    {"Tan", FBX_IR_OP_TAN, 0, 0, 0, r_tan, 1.5, true, 0},
    {"Asin", FBX_IR_OP_ASIN, 0, 0, 0, r_asin, 1, true, 0},
    {"Acos", FBX_IR_OP_ACOS, 0, 0, 0, r_acos, 1, false, 0},
    {"Atan", FBX_IR_OP_ATAN, 0, 0, 0, r_atan, 1, true, 0},
    {"Sinh", FBX_IR_OP_SINH, 0, 0, 0, r_sinh, 2.5, true, 0},
    {"Cosh", FBX_IR_OP_COSH, 0, 0, 0, r_cosh, 2.5, false, 0},
    {"Asinh", FBX_IR_OP_ASINH, 0, 0, 0, r_asinh, 2.5, true, 0},
    {"Acosh", FBX_IR_OP_ACOSH, 0, 0, 0, r_acosh, 2.5, false, 0},
    {"Atanh", FBX_IR_OP_ATANH, 0, 0, 0, r_atanh, 2.5, true, 0},
    {"Pow(x,2)", FBX_IR_OP_POW, 0, 0, 0, r_pow, 0.5, false, 2},
    {"Pow(x,0.5)", FBX_IR_OP_POW, 0, 0, 0, r_pow, 1, false, 0.5},
    {"Pow(x,3)", FBX_IR_OP_POW, 0, 0, 0, r_pow, 1, false, 3},
    {"Pow(x,-1.5)", FBX_IR_OP_POW, 0, 0, 0, r_pow, 1, false, -1.5},
};

static float f_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- the sample ---- */
static float *g_x;
static int64_t g_n, g_cap;
static void add(float v) {
  if (g_n == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 1 << 20;
    g_x = realloc(g_x, (size_t)g_cap * sizeof(float));
  }
  g_x[g_n++] = v;
}
/* v and the 64 floats on either side of it, both signs */
static void add_around(float v) {
  for (int s = 0; s < 2; s++) {
    float c = s ? -v : v, lo = c, hi = c;
    add(c);
    for (int k = 0; k < 64; k++) {
      lo = nextafterf(lo, -INFINITY);
      hi = nextafterf(hi, INFINITY);
      add(lo);
      add(hi);
    }
  }
}
static void make_sample(void) {
  const uint32_t jmask = (1u << SPARSE_LOG2) - 1;
  for (uint64_t i = 0; i < (1ull << (32 - SPARSE_LOG2)); i++) /* every 4096th pattern, jittered low bits */
    add(f_of((uint32_t)(i << SPARSE_LOG2) | ((uint32_t)((i * 2654435761u) >> 8) & jmask)));
  for (int s = 0; s < 2; s++) /* |x| in [2^-4, 2^8): exponents 123..134, every 256th pattern */
    for (uint32_t u = 123u << 23; u < 135u << 23; u += 1u << DENSE_LOG2)
      add(f_of((s ? 0x80000000u : 0) | u | (((u * 2654435761u) >> 24) & ((1u << DENSE_LOG2) - 1))));
  const float specials[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, -NAN, f_of(0x7f800001u) /* sNaN */,
                            f_of(1), f_of(0x807fffffu), FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, 1, -1, 0.5f, 2};
  for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) add(specials[i]);
  const float bounds[] = {
      88.72283935546875f,  /* ln(FLT_MAX): exp overflows above */
      88.3762626647949f,   /* the old exp clamp */
      87.3365447504f,      /* -ln(FLT_MIN): exp subnormal below - */
      103.972077083991796f, /* exp(-x) < 2^-150: rounds to 0 */
      104.f, 89.f, 0.549306144f /* tanh switch ln(3)/2 */, 0.125f, 9.f, 80.f, 40.f, 16.63553f,
      0.3465735903f /* ln2/2 */, 1e-4f, 1e-20f, 3.f, 6.f, 1.f, 1e4f};
  for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) add_around(bounds[i]);
}

/* ---- error measure ---- */
static double ulp_err(float g, double r) {
  if (isnan(r)) return isnan(g) ? 0 : INFINITY;
  float rf = (float)r;
  if (isinf(rf)) return g == rf ? 0 : INFINITY;
  if (!isfinite(g)) return INFINITY;
  double a = fabs(r), ulp;
  if (a < FLT_MIN) {
    ulp = ldexp(1, -149);
  } else {
    int e;
    frexp((double)fabsf(rf), &e); /* |rf| = m 2^e, m in [0.5, 1) */
    ulp = ldexp(1, e - 24);
  }
  return fabs((double)g - r) / ulp;
}

typedef struct worst {
  double err;
  float x, got;
  double ref;
  int64_t bad_zero_sign;
} worst;

static void score(const fcase *fc, const fbx_ir_params *p, const float *x, const float *y, int64_t n, worst *w) {
  for (int64_t i = 0; i < n; i++) {
    double r = fc->ref((double)x[i], p);
    double e = ulp_err(y[i], r);
    if (!(e <= w->err)) {
      w->err = e;
      w->x = x[i];
      w->got = y[i];
      w->ref = r;
    }
    if (fc->zsign && r == 0 && y[i] == 0 && !signbit(r) != !signbit(y[i])) w->bad_zero_sign++;
  }
}

/* Run fc over x[0..n) in one node of n elements. */
static void run_fn(const fcase *fc, const fbx_ir_params *p, const float *x, float *y, int64_t n) {
  fbx_tensor in[2] = {{.dtype = FBX_DTYPE_F32, .rank = 1, .dims = {n}, .data = (void *)x},
                      {.dtype = FBX_DTYPE_F32, .rank = 0}};
  float yv = (float)fc->pow_y;
  in[1].data = &yv;
  fbx_tensor out = {.dtype = FBX_DTYPE_F32, .rank = 1, .dims = {n}, .data = y};
  fbx_status *st = run_node(fc->op, p, in, fc->op == FBX_IR_OP_POW ? 2 : 1, &out, 1, NULL);
  check(st == NULL, "%s: run failed: %s", fc->name, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
}

static void test_case(const fcase *fc, float *y) {
  fbx_ir_params p = {.ew = {.alpha = fc->alpha, .beta = fc->beta, .gamma = fc->gamma}};
  r_pow_y = fc->pow_y;
  /* vector bodies: the whole sample in one array (n % 8 == 7: the tail too) */
  int64_t nv = g_n - (g_n + 1) % 8;
  worst wv = {0}, wt = {0};
  run_fn(fc, &p, g_x, y, nv);
  score(fc, &p, g_x, y, nv, &wv);
  /* scalar tails: arrays of 7 over every 16th sample value, plus all specials/bounds at the end */
  float xt[7], yt[7];
  int64_t tail_from = (1 << (32 - SPARSE_LOG2)) + 2 * ((135 - 123) << (23 - DENSE_LOG2)); /* specials, bounds */
  int k = 0;
  for (int64_t i = 0; i < g_n; i++) {
    if (i < tail_from && i % 16) continue;
    xt[k++] = g_x[i];
    if (k == 7 || i == g_n - 1) {
      run_fn(fc, &p, xt, yt, k);
      score(fc, &p, xt, yt, k, &wt);
      k = 0;
    }
  }
  printf("  %-12s max ulp: vector %.3g (x=%a got %a want %.17g), tail %.3g (x=%a)\n", fc->name, wv.err,
         (double)wv.x, (double)wv.got, wv.ref, wt.err, (double)wt.x);
  check(wv.err <= fc->bound, "%s vector path: %.3g ulp > bound %g at x=%a (%.9g): got %.9g want %.17g", fc->name,
        wv.err, fc->bound, (double)wv.x, (double)wv.x, (double)wv.got, wv.ref);
  check(wt.err <= fc->bound, "%s scalar tail: %.3g ulp > bound %g at x=%a (%.9g): got %.9g want %.17g", fc->name,
        wt.err, fc->bound, (double)wt.x, (double)wt.x, (double)wt.got, wt.ref);
  check(wv.bad_zero_sign == 0 && wt.bad_zero_sign == 0, "%s: %lld zero results with the wrong sign", fc->name,
        (long long)(wv.bad_zero_sign + wt.bad_zero_sign));
}

/* The named special values, exactly (beyond the ulp bound). */
static void test_specials(float *y) {
  struct { fbx_ir_op op; float x, want; const char *what; } sv[] = {
      {FBX_IR_OP_EXP, 89.f, INFINITY, "exp(89) = +inf"},
      {FBX_IR_OP_EXP, 88.8f, INFINITY, "exp(88.8) = +inf"},
      {FBX_IR_OP_EXP, INFINITY, INFINITY, "exp(+inf) = +inf"},
      {FBX_IR_OP_EXP, -INFINITY, 0.f, "exp(-inf) = 0"},
      {FBX_IR_OP_EXP, -104.f, 0.f, "exp(-104) = 0"},
      {FBX_IR_OP_EXP, -103.f, (float)exp(-103.0), "exp(-103) subnormal"},
      {FBX_IR_OP_EXP, -88.f, (float)exp(-88.0), "exp(-88) subnormal"},
      {FBX_IR_OP_LOG, 0.f, -INFINITY, "log(0) = -inf"},
      {FBX_IR_OP_LOG, -1.f, NAN, "log(-1) = NaN"},
      {FBX_IR_OP_LOG, INFINITY, INFINITY, "log(+inf) = +inf"},
      {FBX_IR_OP_TANH, INFINITY, 1.f, "tanh(+inf) = 1"},
      {FBX_IR_OP_TANH, -INFINITY, -1.f, "tanh(-inf) = -1"},
      {FBX_IR_OP_TANH, NAN, NAN, "tanh(NaN) = NaN"},
      {FBX_IR_OP_SIGMOID, -INFINITY, 0.f, "sigmoid(-inf) = 0"},
      {FBX_IR_OP_SIGMOID, INFINITY, 1.f, "sigmoid(+inf) = 1"},
      {FBX_IR_OP_SIGMOID, -100.f, (float)exp(-100.0), "sigmoid(-100) subnormal"},
      {FBX_IR_OP_SIGMOID, NAN, NAN, "sigmoid(NaN) = NaN"},
      {FBX_IR_OP_SQRT, -1.f, NAN, "sqrt(-1) = NaN"},
      {FBX_IR_OP_RECIPROCAL, 0.f, INFINITY, "1/0 = +inf"},
      {FBX_IR_OP_SOFTPLUS, INFINITY, INFINITY, "softplus(+inf) = +inf"},
      {FBX_IR_OP_SOFTPLUS, -INFINITY, 0.f, "softplus(-inf) = 0"},
      {FBX_IR_OP_SOFTSIGN, INFINITY, 1.f, "softsign(+inf) = 1"},
      {FBX_IR_OP_MISH, -INFINITY, 0.f, "mish(-inf) = 0"},
      {FBX_IR_OP_GELU, -INFINITY, 0.f, "gelu(-inf) = 0"},
      {FBX_IR_OP_GELU, INFINITY, INFINITY, "gelu(+inf) = +inf"},
      {FBX_IR_OP_HARD_SWISH, -INFINITY, 0.f, "hardswish(-inf) = 0"},
      {FBX_IR_OP_HARD_SWISH, INFINITY, INFINITY, "hardswish(+inf) = +inf"},
      {FBX_IR_OP_ELU, -INFINITY, -1.f, "elu(-inf) = -alpha"},
  };
  /* each value in lane 3 of a 16-element vector array and alone in a 1-element (tail) array */
  for (size_t i = 0; i < sizeof(sv) / sizeof(sv[0]); i++) {
    fbx_ir_params p = {.ew = {.alpha = 1.f}};
    if (sv[i].op == FBX_IR_OP_GELU) p.ew.alpha = 0;
    float x[16];
    for (int k = 0; k < 16; k++) x[k] = 0.25f * (float)k;
    x[3] = sv[i].x;
    fcase fc = {.name = sv[i].what, .op = sv[i].op};
    for (int len = 16; len >= 1; len = len == 16 ? 1 : 0) {
      const float *xs = len == 16 ? x : &x[3];
      run_fn(&fc, &p, xs, y, len);
      float got = len == 16 ? y[3] : y[0];
      bool ok = isnan(sv[i].want) ? isnan(got) : got == sv[i].want;
      check(ok, "%s (%s path): got %a", sv[i].what, len == 16 ? "vector" : "tail", (double)got);
    }
  }
}

/* fbx__exp512 / erf512 / sigmoid512 / tanh512 (the AVX-512 kernels' epilogues and register chains) against
 * the 8-lane forms, bit for bit, over the whole sample (NaNs compared as NaN) */
static const char *const g_f512[] = {"exp", "erf", "sigmoid", "tanh"};
static FBX__S512_TGT __m512 f512(int f, __m512 v) {
  return f == 0 ? fbx__exp512(v) : f == 1 ? fbx__erf512(v) : f == 2 ? fbx__sigmoid512(v) : fbx__tanh512(v);
}
static __m256 f256(int f, __m256 v) {
  return f == 0 ? fbx__exp256(v) : f == 1 ? fbx__erf256(v) : f == 2 ? fbx__sigmoid256(v) : fbx__tanh256(v);
}
static FBX__S512_TGT int64_t diff512(int f, int64_t *first) {
  int64_t bad = 0;
  *first = -1;
  for (int64_t i = 0; i + 16 <= g_n; i += 16) {
    float a[16], b[16];
    _mm512_storeu_ps(a, f512(f, _mm512_loadu_ps(g_x + i)));
    for (int h = 0; h < 2; h++) _mm256_storeu_ps(b + 8 * h, f256(f, _mm256_loadu_ps(g_x + i + 8 * h)));
    for (int j = 0; j < 16; j++)
      if (memcmp(&a[j], &b[j], 4) && !(isnan(a[j]) && isnan(b[j]))) {
        if (*first < 0) *first = i + j;
        bad++;
      }
  }
  return bad;
}

static void test_simd512(void) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) {
    printf("exp512 / erf512 / sigmoid512 / tanh512: no AVX-512 on this CPU (skipped)\n");
    return;
  }
  for (int f = 0; f < 4; f++) {
    int64_t first = -1, bad = diff512(f, &first);
    check(bad == 0, "%s512 equals %s256 bit for bit over %lld floats: %lld differ (first x = %a)", g_f512[f],
          g_f512[f], (long long)g_n, (long long)bad, first >= 0 ? (double)g_x[first] : 0.0);
  }
}

int main(void) {
  test_setup(2);
  make_sample();
  test_simd512();
  float *y = malloc((size_t)g_n * sizeof(float));
  printf("sample: %lld floats\n", (long long)g_n);
  for (size_t i = 0; i < sizeof(k_cases) / sizeof(k_cases[0]); i++) test_case(&k_cases[i], y);
  test_specials(y);
  free(y);
  free(g_x);
  return test_finish("cpu math ulp");
}
