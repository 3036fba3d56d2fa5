/* Pieces shared by the GPU OrtEpDevice tests (test_e2e_gpu_device, test_e2e_gpu_stream): ORT status
 * to message, a tolerance check that says what is off, and decoder_tiny's fixed 4-step decode. */
#ifndef FBX_TESTS_GPU_EP_TEST_H
#define FBX_TESTS_GPU_EP_TEST_H

#include <onnxruntime_c_api.h>
#include <stdint.h>

#include "common/ort_host.h"

#define FBX_TEST_SIM_VENDOR 0xFB0Eu /* src/ep/ep_internal.h FBX_EP_VENDOR_SIM: the simulated GPU */
#define FBX_TEST_NVIDIA_VENDOR 0x10DEu
#define FBX_TEST_GPU_RTOL 1e-3 /* Fusebox on the GPU device vs ORT's CPU EP */
#define FBX_TEST_GPU_ATOL 1e-4

/* One test's view of Fusebox's OrtEpDevices: ORT's API and env, the CPU and GPU devices, the GPU's
 * memory infos and ORT's shared allocators for them. */
typedef struct fbx_test_gpu {
  fbx_host *h;
  const OrtApi *ort;
  OrtEnv *env;
  const OrtEpDevice *cpu_dev, *gpu_dev;
  const OrtMemoryInfo *dev_mem, *pin_mem;
  OrtAllocator *dev_alloc, *pin_alloc;
  OrtMemoryInfo *cpu_mem;
  int real;                 /* a real GPU (FBX_TEST_REAL_GPU=1), not the simulated one */
  uint32_t vendor;          /* of the GPU device and its memory */
  char trace[512];          /* FUSEBOX_TRACE file, where a test reads its summary */
} fbx_test_gpu;

/* NULL when st is NULL, else "what: ORT's message" (heap; st released). */
char *fbx_test_ort_err(const OrtApi *ort, OrtStatus *st, const char *what);

/* a within rtol/atol of ref; when not, prints how many elements are off and by how much. */
int fbx_test_close_enough(const fbx_host_tensor *a, const fbx_host_tensor *ref, double rtol, double atol,
                          const char *what);

/* decoder_tiny's sequence: prefill the 5-token prompt, then decode the 3 next tokens one by one. */
extern const int64_t fbx_test_dec_prompt[5], fbx_test_dec_next[3];

/* That sequence on a session of model (opts NULL: ORT's CPU EP alone); the logits of every step
 * into logits[0..3] (owned by the caller). */
char *fbx_test_run_decoder(fbx_host *h, const char *model, const fbx_host_session_opts *opts,
                           fbx_host_tensor logits[4]);

#endif
