/* Integer GEMM: path choice, A packing and the portable (scalar) path. The
 * arithmetic and layouts are described in cpu_qgemm.h; every sum is done in
 * uint32 (wrapping, so no signed overflow) and read back as int32. */
#include "cpu_qgemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int fbx__qg_cpu = -1; /* best path by CPUID, before the env cap */

bool fbx_cpu_qg_available(fbx_qg_path p) {
  __builtin_cpu_init();
  switch (p) {
    case FBX_QG_SCALAR: return true;
    case FBX_QG_AVX2: return __builtin_cpu_supports("avx2");
    case FBX_QG_VNNI:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vnni");
    case FBX_QG_AMX: return fbx_cpu_qg_available(FBX_QG_VNNI) && fbx__qg_amx_usable();
  }
  return false;
}

const char *fbx_cpu_qg_name(fbx_qg_path p) {
  return p == FBX_QG_AMX ? "amx_int8" : p == FBX_QG_VNNI ? "vnni512" : p == FBX_QG_AVX2 ? "avx2_madd16" : "scalar";
}

fbx_qg_path fbx_cpu_qg_best(void) {
  int b = __atomic_load_n(&fbx__qg_cpu, __ATOMIC_RELAXED);
  if (b < 0) {
    b = fbx_cpu_qg_available(FBX_QG_AMX)    ? FBX_QG_AMX
        : fbx_cpu_qg_available(FBX_QG_VNNI) ? FBX_QG_VNNI
        : fbx_cpu_qg_available(FBX_QG_AVX2) ? FBX_QG_AVX2
                                            : FBX_QG_SCALAR;
    const char *e = getenv("FUSEBOX_QGEMM");
    int cap = b;
    if (e && strcmp(e, "scalar") == 0) cap = FBX_QG_SCALAR;
    else if (e && strcmp(e, "avx2") == 0) cap = FBX_QG_AVX2;
    else if (e && strcmp(e, "vnni") == 0) cap = FBX_QG_VNNI;
    if (cap < b) b = cap;
    __atomic_store_n(&fbx__qg_cpu, b, __ATOMIC_RELAXED);
  }
  return (fbx_qg_path)b;
}

void fbx_cpu_qg_force(fbx_qg_path p) { __atomic_store_n(&fbx__qg_cpu, (int)p, __ATOMIC_RELAXED); }

/* VNNI and AMX share domains and layouts (bytes); AMX pads K to whole tile rows of 64 */
static bool fbx__qg_bytes(fbx_qg_path p) { return p == FBX_QG_VNNI || p == FBX_QG_AMX; }

int64_t fbx_cpu_qg_kpad(fbx_qg_path p, int64_t K) {
  return p == FBX_QG_AMX ? (K + 63) / 64 * 64 : p == FBX_QG_VNNI ? (K + 3) / 4 * 4 : (K + 1) / 2 * 2;
}
size_t fbx_cpu_qg_esz(fbx_qg_path p) { return fbx__qg_bytes(p) ? 1 : 2; }
size_t fbx_cpu_qg_panel_bytes(fbx_qg_path p, int64_t K) {
  return (size_t)fbx_cpu_qg_kpad(p, K) * FBX_QG_NR * fbx_cpu_qg_esz(p);
}
int fbx_cpu_qg_oa(fbx_qg_path p, bool a_signed) { return fbx__qg_bytes(p) && !a_signed ? 128 : 0; }
int fbx_cpu_qg_ob(fbx_qg_path p, bool b_signed) { return fbx__qg_bytes(p) && b_signed ? -128 : 0; }

void fbx_cpu_qg_pack_a(fbx_qg_path p, const uint8_t *a, int64_t lda, bool a_signed, int64_t M, int64_t K, void *ap,
                       int32_t *rs) {
  int64_t kp = fbx_cpu_qg_kpad(p, K);
  for (int64_t m = 0; m < M; m++) {
    const uint8_t *src = a + m * lda;
    uint32_t s = 0;
    if (fbx__qg_bytes(p)) {
      int8_t *d = (int8_t *)ap + m * kp;
      uint8_t x = a_signed ? 0 : 0x80; /* u8 -> s8 domain: a' = a - 128 */
      for (int64_t k = 0; k < K; k++) {
        d[k] = (int8_t)(src[k] ^ x);
        s += (uint32_t)(int32_t)d[k];
      }
      for (int64_t k = K; k < kp; k++) d[k] = 0;
    } else {
      int16_t *d = (int16_t *)ap + m * kp;
      for (int64_t k = 0; k < K; k++) {
        d[k] = a_signed ? (int16_t)(int8_t)src[k] : (int16_t)src[k];
        s += (uint32_t)(int32_t)d[k];
      }
      for (int64_t k = K; k < kp; k++) d[k] = 0;
    }
    rs[m] = (int32_t)s;
  }
}

/* ---- scalar path: int16 layout, plain loops ---- */

static void fbx__qg_pack_b_scalar(const uint8_t *const *rows, bool b_signed, int64_t K, int64_t width, void *panels,
                                  int32_t *cs) {
  int64_t kp = fbx_cpu_qg_kpad(FBX_QG_SCALAR, K), np = (width + FBX_QG_NR - 1) / FBX_QG_NR;
  memset(panels, 0, (size_t)np * fbx_cpu_qg_panel_bytes(FBX_QG_SCALAR, K));
  uint32_t *u = (uint32_t *)cs;
  for (int64_t n = 0; n < np * FBX_QG_NR; n++) u[n] = 0;
  for (int64_t k = 0; k < K; k++) {
    const uint8_t *r = rows[k];
    for (int64_t n = 0; n < width; n++) {
      int16_t v = b_signed ? (int16_t)(int8_t)r[n] : (int16_t)r[n];
      int16_t *pan = (int16_t *)panels + (n / FBX_QG_NR) * kp * FBX_QG_NR;
      pan[((k / 2) * FBX_QG_NR + n % FBX_QG_NR) * 2 + (k & 1)] = v;
      u[n] += (uint32_t)(int32_t)v;
    }
  }
}

float fbx_cpu_qg_out_apply1(const fbx_qg_out *o, float v, int64_t m, int64_t n) {
  float sl[FBX_QG_OUT_SLOTS] = {0};
  for (int s = 0; s < o->n_steps; s++) {
    int st = o->step[s].src;
    if (o->step[s].kind == FBX_QG_OUT_SAVE) {
      sl[o->step[s].slot] = v;
      continue;
    }
    if (o->step[s].kind == FBX_QG_OUT_ERF) {
      v = erff(v);
      continue;
    }
    float k = st == FBX_QG_OUT_SLOT     ? sl[o->step[s].slot]
              : st == FBX_QG_OUT_TENSOR ? o->step[s].p[m * o->ldt + n]
              : st == FBX_QG_OUT_SCALAR ? o->step[s].p[0]
                                        : o->step[s].p[n];
    switch (o->step[s].op) {
      case FBX_QG_OUT_MUL: v = v * k; break;
      case FBX_QG_OUT_ADD: v = v + k; break;
      case FBX_QG_OUT_SUB: v = v - k; break;
      case FBX_QG_OUT_RSUB: v = k - v; break;
      case FBX_QG_OUT_DIV: v = v / k; break;
      default: v = k / v; break;
    }
    __asm__("" : "+x"(v)); /* no contraction of a Mul and an Add into an FMA (-mfma builds) */
  }
  return v;
}

static void fbx__qg_kernel_scalar(const void *ap, int64_t M, int64_t K, const int32_t *rs, const int32_t *alpha,
                                  const void *panels, int64_t width, const int32_t *beta, const int32_t *cb,
                                  int32_t *y, int64_t ldy, const fbx_qg_out *o) {
  int64_t kp = fbx_cpu_qg_kpad(FBX_QG_SCALAR, K);
  for (int64_t m = 0; m < M; m++) {
    const int16_t *a = (const int16_t *)ap + m * kp;
    for (int64_t n = 0; n < width; n++) {
      const int16_t *pan = (const int16_t *)panels + (n / FBX_QG_NR) * kp * FBX_QG_NR;
      int64_t j = n % FBX_QG_NR;
      uint32_t acc = 0;
      for (int64_t k = 0; k < kp; k++)
        acc += (uint32_t)((int32_t)a[k] * (int32_t)pan[((k / 2) * FBX_QG_NR + j) * 2 + (k & 1)]);
      acc += (uint32_t)beta[n] * (uint32_t)rs[m] + (uint32_t)alpha[m] * (uint32_t)cb[n];
      if (o) {
        float f = fbx_cpu_qg_out_apply1(o, (float)(int32_t)acc, m, n);
        memcpy(&y[m * ldy + n], &f, sizeof f);
      } else {
        y[m * ldy + n] = (int32_t)acc;
      }
    }
  }
}

void fbx_cpu_qg_pack_b(fbx_qg_path p, const uint8_t *const *rows, bool b_signed, int64_t K, int64_t width,
                       void *panels, int32_t *cs) {
  switch (p) {
    case FBX_QG_AMX:
    case FBX_QG_VNNI: fbx__qg_pack_b_vnni(rows, b_signed, K, fbx_cpu_qg_kpad(p, K), width, panels, cs); return;
    case FBX_QG_AVX2: fbx__qg_pack_b_avx2(rows, b_signed, K, width, panels, cs); return;
    default: fbx__qg_pack_b_scalar(rows, b_signed, K, width, panels, cs); return;
  }
}

void fbx_cpu_qg_kernel_out(fbx_qg_path p, const void *ap, int64_t M, int64_t K, const int32_t *rs, const int32_t *alpha,
                           const void *panels, int64_t width, const int32_t *beta, const int32_t *cb, int32_t *y,
                           int64_t ldy, const fbx_qg_out *o) {
  switch (p) {
    case FBX_QG_AMX: fbx__qg_kernel_amx(ap, M, fbx_cpu_qg_kpad(p, K), rs, alpha, panels, width, beta, cb, y, ldy, o); return;
    case FBX_QG_VNNI:
      fbx__qg_kernel_vnni(ap, M, fbx_cpu_qg_kpad(p, K), rs, alpha, panels, width, beta, cb, y, ldy, o);
      return;
    case FBX_QG_AVX2: fbx__qg_kernel_avx2(ap, M, K, rs, alpha, panels, width, beta, cb, y, ldy, o); return;
    default: fbx__qg_kernel_scalar(ap, M, K, rs, alpha, panels, width, beta, cb, y, ldy, o); return;
  }
}

void fbx_cpu_qg_kernel(fbx_qg_path p, const void *ap, int64_t M, int64_t K, const int32_t *rs, const int32_t *alpha,
                       const void *panels, int64_t width, const int32_t *beta, const int32_t *cb, int32_t *y,
                       int64_t ldy) {
  fbx_cpu_qg_kernel_out(p, ap, M, K, rs, alpha, panels, width, beta, cb, y, ldy, NULL);
}
