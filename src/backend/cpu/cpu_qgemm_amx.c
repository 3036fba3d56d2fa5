/* Integer GEMM, Intel AMX-INT8 path (cpu_qgemm.h). The VNNI path's domains
 * and layouts (A s8, B u8 in panels of 16 columns x 4 k), K padded to 64: a
 * panel's 64 k are exactly one B tile (16 rows of 16 columns x 4 bytes) and
 * 16 rows of A's 64 k one A tile, so nothing is repacked. tdpbsud multiplies
 * s8 (A) by u8 (B) into int32 without saturation, like vpdpbusd with the
 * operands swapped.
 *
 * Blocking: 32 rows x 32 columns a block, four C tiles (tmm0-3) over two A
 * tiles (tmm4-5) and two B tiles (tmm6-7), K in steps of 64; the C tiles go
 * through a stack block and the VNNI path's finish (correction terms,
 * epilogue, masked store). Rows past the last multiple of 16 run on the VNNI
 * kernel over the same packed data (it reads kp and panels alike).
 *
 * Why: on the Xeon this was measured on (2 cores of a Sapphire-Rapids-class VM),
 * ORT's MLAS uses AMX for quantize_dynamic models and the VNNI kernel could not
 * keep up (quantized BERT 0.71x at 2 threads). Linux hands out the tile state
 * only on request (arch_prctl ARCH_REQ_XCOMP_PERM), once per process; each
 * thread loads the tile configuration when it enters the kernel and releases
 * it when it leaves. */
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu_qgemm.h"

#define FBX__QA_TGT __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vnni")))

enum { FBX__QA_ARCH_REQ_XCOMP_PERM = 0x1023, FBX__QA_XFEATURE_XTILEDATA = 18 };

bool fbx__qg_amx_usable(void) {
  static atomic_int state; /* 0 unknown, 1 usable, 2 not */
  int s = atomic_load_explicit(&state, memory_order_relaxed);
  if (s == 0) {
    unsigned a = 0, b = 0, c = 0, d = 0; /* CPUID.(7,0):EDX bit 24 AMX-TILE, bit 25 AMX-INT8 */
    bool ok = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 25 & 1);
    if (ok) ok = syscall(SYS_arch_prctl, FBX__QA_ARCH_REQ_XCOMP_PERM, FBX__QA_XFEATURE_XTILEDATA) == 0;
    s = ok ? 1 : 2;
    atomic_store_explicit(&state, s, memory_order_relaxed);
  }
  return s == 1;
}

/* LDTILECFG's 64-byte operand: palette 1, every tile 16 rows of 64 bytes. */
typedef struct __attribute__((aligned(64))) fbx__qa_cfg {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} fbx__qa_cfg;

/* One block of mt (1 or 2) A tiles x np (1 or 2) panels: sum_k a'b' into acc (32 x 32 int32). */
static inline __attribute__((always_inline)) FBX__QA_TGT void fbx__qa_block(const int mt, const int np,
                                                                            const uint8_t *a, int64_t kp,
                                                                            const uint8_t *p0, const uint8_t *p1,
                                                                            int32_t *acc) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t k = 0; k < kp; k += 64) {
    _tile_loadd(4, a + k, kp);
    _tile_loadd(6, p0 + k * FBX_QG_NR, 64);
    _tile_dpbsud(0, 4, 6);
    if (np == 2) {
      _tile_loadd(7, p1 + k * FBX_QG_NR, 64);
      _tile_dpbsud(1, 4, 7);
    }
    if (mt == 2) {
      _tile_loadd(5, a + 16 * kp + k, kp);
      _tile_dpbsud(2, 5, 6);
      if (np == 2) _tile_dpbsud(3, 5, 7);
    }
  }
  _tile_stored(0, acc, 32 * sizeof(int32_t));
  if (np == 2) _tile_stored(1, acc + 16, 32 * sizeof(int32_t));
  if (mt == 2) {
    _tile_stored(2, acc + 16 * 32, 32 * sizeof(int32_t));
    if (np == 2) _tile_stored(3, acc + 16 * 32 + 16, 32 * sizeof(int32_t));
  }
}

FBX__QA_TGT void fbx__qg_kernel_amx(const void *ap, int64_t M, int64_t kp, const int32_t *rs, const int32_t *alpha,
                                    const void *panels, int64_t width, const int32_t *beta, const int32_t *cb,
                                    int32_t *y, int64_t ldy, const fbx_qg_out *o) {
  const int64_t np = (width + FBX_QG_NR - 1) / FBX_QG_NR, mfull = M / 16 * 16;
  const size_t pb = (size_t)kp * FBX_QG_NR;
  const uint8_t *A = ap, *P = panels;
  if (mfull > 0) {
    fbx__qa_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
    int32_t acc[32 * 32] __attribute__((aligned(64)));
    for (int64_t m = 0; m < mfull; m += 32) {
      const int mt = mfull - m >= 32 ? 2 : 1;
      const uint8_t *a = A + m * kp;
      for (int64_t q = 0; q < np; q += 2) {
        const int npq = q + 1 < np ? 2 : 1;
        const int64_t c0 = q * FBX_QG_NR;
        const uint8_t *p0 = P + (size_t)q * pb, *p1 = p0 + pb;
        if (mt == 2 && npq == 2) fbx__qa_block(2, 2, a, kp, p0, p1, acc);
        else if (mt == 2) fbx__qa_block(2, 1, a, kp, p0, p0, acc);
        else if (npq == 2) fbx__qa_block(1, 2, a, kp, p0, p1, acc);
        else fbx__qa_block(1, 1, a, kp, p0, p0, acc);
        fbx_qg_out ob; /* the epilogue's operands moved to this block */
        fbx__qg_finish_vnni(acc, 16 * mt, npq, width - c0, rs + m, alpha + m, beta + c0, cb + c0, y + m * ldy + c0,
                            ldy, fbx_cpu_qg_out_at(o, o ? m * o->ldt + c0 : 0, c0, &ob));
      }
    }
    _tile_release();
  }
  if (mfull < M) { /* the last rows (< 16) on the VNNI kernel, the epilogue's tensors moved to them */
    fbx_qg_out ob;
    fbx__qg_kernel_vnni(A + mfull * kp, M - mfull, kp, rs + mfull, alpha + mfull, panels, width, beta, cb,
                        y + mfull * ldy, ldy, fbx_cpu_qg_out_at(o, o ? mfull * o->ldt : 0, 0, &ob));
  }
}
