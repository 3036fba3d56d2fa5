/* tests/common/isa_rerun.h — run a kernel test a second time on the AVX2 kernels.
 *
 * Kernel tests check both instruction sets on a CPU that has AVX-512: after the
 * AVX-512 pass the program re-executes itself with FUSEBOX_AVX512=0 (the AVX2 paths,
 * what a CPU without AVX-512 takes) and that pass must pass too. */
#ifndef FBX_TEST_ISA_RERUN_H
#define FBX_TEST_ISA_RERUN_H

#include <stdbool.h>

/* After the first pass: when `avx512` (the first pass ran the AVX-512 kernels) and
 * FUSEBOX_AVX512 was not set, re-executes argv[0..] with FUSEBOX_AVX512=0 and waits.
 * Returns `rc` when that pass passed or was not needed, 1 (with a FAIL line) otherwise. */
int fbx_test_rerun_avx2(bool avx512, char **argv, int rc);

#endif
