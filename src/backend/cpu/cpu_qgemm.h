/* Integer GEMM for the quantized ops (CONV_INT, MATMUL_INT):
 *   C(M, N) int32 = sum_k (A[m,k] - za[m]) * (B[k,n] - zb[n])
 * A, B 8-bit (u8 or s8, any mix), zero points per row of A / per column of B
 * (a scalar zero point is the same value in every entry). Exact: the int32
 * accumulation wraps modulo 2^32 like every correction term, so C is the
 * true sum whenever that fits int32 (and its value modulo 2^32 otherwise),
 * for every input range and every K.
 *
 * Each path stores A and B in its own "domain" a' = a - oa, b' = b - ob:
 *   VNNI (AVX-512 vpdpbusd, u8 x s8 -> int32): B as u8 (s8 input: b' = b ^ 0x80,
 *        ob = -128), A as s8 (u8 input: a' = a ^ 0x80, oa = 128); bytes.
 *   AMX (Intel AMX-INT8 tdpbsud, s8 x u8 -> int32): the VNNI domains and layouts, with
 *        K padded to 64 (one tile row of A, 16 tile rows of a B panel, per 64 k); a panel
 *        of 16 columns is exactly a B tile. Rows of a block past a multiple of 16 run on
 *        the VNNI kernel over the same packed data.
 *   AVX2 (vpmaddwd on int16 widened values: vpmaddubsw's int16 pair sums would
 *        saturate) and SCALAR: int16 values, oa = ob = 0.
 * Then with alpha[m] = oa - za[m], beta[n] = ob - zb[n], rs[m] = sum_k a'[m,k],
 * cs[n] = sum_k b'[k,n], cb[n] = cs[n] + K * beta[n]:
 *   C[m,n] = sum_k a'b' + beta[n] * rs[m] + alpha[m] * cb[n]      (mod 2^32).
 *
 * Layouts (K padded to kpad(K) with zeros, which add nothing):
 *   packed A: row m at ap + m * lda_bytes (lda_bytes = kpad * esz), esz 1 (VNNI) / 2.
 *   B panels of 16 columns: VNNI: panel[(kq*16 + j)*4 + kk] = b'[4kq+kk, j] (bytes);
 *        AVX2/SCALAR: panel[(kp*16 + j)*2 + kk] = b'[2kp+kk, j] (int16).
 *   Panel q of a block at panels + q * panel_bytes(K). */
#ifndef FBX_BACKEND_CPU_QGEMM_H
#define FBX_BACKEND_CPU_QGEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum fbx_qg_path { FBX_QG_SCALAR = 0, FBX_QG_AVX2 = 1, FBX_QG_VNNI = 2, FBX_QG_AMX = 3 } fbx_qg_path;
#define FBX_QG_LAST FBX_QG_AMX /* tests loop over every path up to it */

#define FBX_QG_NR 16 /* columns per B panel */

/* The best path this CPU runs (CPUID once), capped by FUSEBOX_QGEMM=scalar|avx2|vnni. */
fbx_qg_path fbx_cpu_qg_best(void);
/* Tests: make p the path the op kernels use (p must be available). */
void fbx_cpu_qg_force(fbx_qg_path p);
/* Whether the CPU can run path p (tests force each path they can). */
bool fbx_cpu_qg_available(fbx_qg_path p);
const char *fbx_cpu_qg_name(fbx_qg_path p);

int64_t fbx_cpu_qg_kpad(fbx_qg_path p, int64_t K);
size_t fbx_cpu_qg_esz(fbx_qg_path p);
size_t fbx_cpu_qg_panel_bytes(fbx_qg_path p, int64_t K);
int fbx_cpu_qg_oa(fbx_qg_path p, bool a_signed);
int fbx_cpu_qg_ob(fbx_qg_path p, bool b_signed);

/* Rows [0, M) of A (element (m,k) at a[m*lda + k], 8-bit, a_signed: s8) into
 * the path's domain at ap (row stride kpad*esz bytes, padding zeroed);
 * rs[m] = sum_k a'[m,k]. */
void fbx_cpu_qg_pack_a(fbx_qg_path p, const uint8_t *a, int64_t lda, bool a_signed, int64_t M, int64_t K, void *ap,
                       int32_t *rs);

/* B block of `width` columns (row k of it: rows[k], `width` contiguous bytes)
 * into ceil(width/16) panels (zero padded past K and width), and
 * cs[0 .. roundup(width,16)) = column sums of b' (0 past width). */
void fbx_cpu_qg_pack_b(fbx_qg_path p, const uint8_t *const *rows, bool b_signed, int64_t K, int64_t width,
                       void *panels, int32_t *cs);

/* Y rows [0, M) (row stride ldy), columns [0, width) =
 * sum_k a'b' + beta[n] * rs[m] + alpha[m] * cb[n]; beta, cb hold
 * roundup(width,16) entries (any values past width). */
void fbx_cpu_qg_kernel(fbx_qg_path p, const void *ap, int64_t M, int64_t K, const int32_t *rs, const int32_t *alpha,
                       const void *panels, int64_t width, const int32_t *beta, const int32_t *cb, int32_t *y,
                       int64_t ldy);

/* A float epilogue done in registers before the store (MATMUL_INT's Cast -> Mul(scale) -> Add(bias)
 * [-> Add(residual)] [-> Erf Gelu] chain): V = (float)acc, then the steps in order, each op rounded
 * to float32 on its own (no fused multiply-add: the bits of ORT's separate Mul and Add), and the
 * float V stored over the int32 (y reinterpreted as float, same ldy). Steps: BIN: V = V op src (or
 * src op V for RSUB / RDIV); SAVE: S[slot] = V; ERF: V = erf(V) (fbx__erf256; the scalar path erff).
 * A BIN's src: COL: p[n], TENSOR: p[m * ldt + n] (both width entries per row, already offset to the
 * block's first row / column), SCALAR: p[0], or SLOT: S[slot]. */
#define FBX_QG_OUT_MAX_STEPS 16
#define FBX_QG_OUT_SLOTS 3
typedef enum fbx_qg_out_kind { FBX_QG_OUT_BIN = 0, FBX_QG_OUT_SAVE, FBX_QG_OUT_ERF } fbx_qg_out_kind;
typedef enum fbx_qg_out_op {
  FBX_QG_OUT_MUL = 0, FBX_QG_OUT_ADD, FBX_QG_OUT_SUB, FBX_QG_OUT_RSUB, FBX_QG_OUT_DIV, FBX_QG_OUT_RDIV
} fbx_qg_out_op;
typedef enum fbx_qg_out_src { FBX_QG_OUT_COL = 0, FBX_QG_OUT_TENSOR, FBX_QG_OUT_SLOT, FBX_QG_OUT_SCALAR } fbx_qg_out_src;
typedef struct fbx_qg_out {
  int n_steps;
  struct { uint8_t kind, op, src, slot; const float *p; } step[FBX_QG_OUT_MAX_STEPS];
  int64_t ldt;
} fbx_qg_out;
/* Whether step s of o reads p at an offset of the block (COL, TENSOR). */
static inline bool fbx_cpu_qg_out_moves(const fbx_qg_out *o, int s) {
  return o->step[s].kind == FBX_QG_OUT_BIN && (o->step[s].src == FBX_QG_OUT_COL || o->step[s].src == FBX_QG_OUT_TENSOR);
}

/* o with its operands moved to a block: TENSOR steps by tensor_off floats, COL steps by col_off; the
 * copy goes to *buf. NULL when o is (no epilogue). */
static inline const fbx_qg_out *fbx_cpu_qg_out_at(const fbx_qg_out *o, int64_t tensor_off, int64_t col_off,
                                                  fbx_qg_out *buf) {
  if (!o) return NULL;
  *buf = *o;
  for (int s = 0; s < buf->n_steps; s++)
    if (fbx_cpu_qg_out_moves(buf, s)) buf->step[s].p += buf->step[s].src == FBX_QG_OUT_TENSOR ? tensor_off : col_off;
  return buf;
}

/* fbx_cpu_qg_kernel with the float epilogue o (NULL: the int32 store). */
void fbx_cpu_qg_kernel_out(fbx_qg_path p, const void *ap, int64_t M, int64_t K, const int32_t *rs, const int32_t *alpha,
                           const void *panels, int64_t width, const int32_t *beta, const int32_t *cb, int32_t *y,
                           int64_t ldy, const fbx_qg_out *o);
/* One value of the epilogue in scalar form (v: the accumulator as float; the scalar path and tests). */
float fbx_cpu_qg_out_apply1(const fbx_qg_out *o, float v, int64_t m, int64_t n);

/* Path internals (cpu_qgemm_avx2.c / cpu_qgemm_vnni.c). */
void fbx__qg_pack_b_avx2(const uint8_t *const *rows, bool b_signed, int64_t K, int64_t width, void *panels,
                         int32_t *cs);
void fbx__qg_kernel_avx2(const void *ap, int64_t M, int64_t K, const int32_t *rs, const int32_t *alpha,
                         const void *panels, int64_t width, const int32_t *beta, const int32_t *cb, int32_t *y,
                         int64_t ldy, const fbx_qg_out *o);
/* VNNI and AMX: kp = the path's kpad(K) (a multiple of 4). */
void fbx__qg_pack_b_vnni(const uint8_t *const *rows, bool b_signed, int64_t K, int64_t kp, int64_t width,
                         void *panels, int32_t *cs);
void fbx__qg_kernel_vnni(const void *ap, int64_t M, int64_t kp, const int32_t *rs, const int32_t *alpha,
                         const void *panels, int64_t width, const int32_t *beta, const int32_t *cb, int32_t *y,
                         int64_t ldy, const fbx_qg_out *o);
/* Rows [0, mr) (mr <= 32) of a block of np (1 or 2) panels whose sum_k a'b' is in acc (row r,
 * column j of panel h at acc[r * 32 + h * 16 + j]): the correction terms, the epilogue o (already
 * moved to the block) and the store, as the VNNI kernel finishes its blocks. */
void fbx__qg_finish_vnni(const int32_t *acc, int mr, int np, int64_t w, const int32_t *rs, const int32_t *alpha,
                         const int32_t *beta, const int32_t *cb, int32_t *y, int64_t ldy, const fbx_qg_out *o);
/* AMX: whether the CPU has AMX-INT8 and Linux granted this process the tile data (once). */
bool fbx__qg_amx_usable(void);
void fbx__qg_kernel_amx(const void *ap, int64_t M, int64_t kp, const int32_t *rs, const int32_t *alpha,
                        const void *panels, int64_t width, const int32_t *beta, const int32_t *cb, int32_t *y,
                        int64_t ldy, const fbx_qg_out *o);

#endif
