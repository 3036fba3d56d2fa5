/* CUDA test programs: find this build's libfusebox_cuda.so, probe for a GPU
 * and run sections in forked children.
 *
 * CUDA cannot be used in a child forked after the parent initialised it, so
 * the parent never touches CUDA: the probe and every section run in a child.
 * A crashing section is a failed section, not a dead test program. */
#ifndef FBX_TESTS_CUDA_FORK_H
#define FBX_TESTS_CUDA_FORK_H

#include <stddef.h>

/* lib <- "<dir of this executable>/../libfusebox_cuda.so" (build/tests/ -> build/). */
void fbx_test_cuda_library(char *lib, size_t size);

enum { FBX_TEST_CUDA_RUN = 0, FBX_TEST_CUDA_FAIL = 1, FBX_TEST_CUDA_SKIP = 2 };

/* Opens the CUDA backend of lib in a child. RUN: a device is there; SKIP: none
 * (the reason is printed as "<test>: SKIP: ..."); FAIL: the open failed for
 * another reason or crashed (printed as "<test>: FAIL: ..."). */
int fbx_test_cuda_probe(const char *test, const char *lib);

/* Runs child(ctx) in a forked child and waits; its return value is the
 * child's exit status. Prints "<test>: section <name> ok|FAILED".
 * Returns 0 when the child exited 0, 1 when it exited non-zero, 2 when it
 * did not exit normally (crashed: the caller counts a failure). */
int fbx_test_fork_section(const char *test, const char *name, int (*child)(void *ctx), void *ctx);

#endif
