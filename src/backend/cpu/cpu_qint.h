/* Helpers shared by the integer ops' kernels (cpu_qconv.c, cpu_qmatmul.c). */
#ifndef FBX_BACKEND_CPU_QINT_H
#define FBX_BACKEND_CPU_QINT_H

#include "cpu_internal.h"

/* Zero point entry i of the optional 8-bit input idx of 1 or n entries (0 when absent). */
int32_t fbx_cpu_q_zp(const fbx_tensor *in, int n_in, int idx, int64_t i);
/* Error unless the optional zero point input idx has dtype dt and 1 or n entries (1-D). */
fbx_status *fbx_cpu_q_zp_check(const char *op, const fbx_tensor *in, int n_in, int idx, fbx_dtype dt, int64_t n,
                               const char *what);
/* u8 or s8. */
bool fbx_cpu_q_dt(fbx_dtype d);

#endif
