/* GPU counter tracks at eval boundaries: the engine's device memory (the
 * backend's own accounting, handed in) and, through NVML, utilisation and SM
 * clock. NVML is the driver's library: dlopened on first use (no header or
 * link dependency; the few entry points are declared here with NVML's stable
 * C ABI), and where it is missing, has no such device or a query fails, the
 * counter is simply not sampled. NVML's utilisation is itself an average over
 * a driver sample period (1/6 s to 1 s), so reading it more often than every
 * 20 ms would only cost time (a driver call per read). */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { NVML_SAMPLE_NS = 20000000 };

typedef struct nvml_util { unsigned int gpu, memory; } nvml_util; /* nvmlUtilization_t */
typedef void *nvml_dev;                                             /* nvmlDevice_t */
enum { NVML_CLOCK_SM = 1 };                                         /* nvmlClockType_t */

static struct {
  int state; /* 0 not tried, 1 loaded, -1 unavailable */
  void *lib;
  int (*init)(void);
  int (*by_bus)(const char *bus, nvml_dev *d);
  int (*by_index)(unsigned int i, nvml_dev *d);
  int (*util)(nvml_dev d, nvml_util *u);
  int (*clock)(nvml_dev d, int type, unsigned int *mhz);
  nvml_dev dev;
  char bus[32];
  int have_dev;
  uint64_t last_ns;
} g_nvml;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* FUSEBOX_NVML_LIB overrides the library name (tests point it at a file that is not there). */
static void nvml_load(void) {
  g_nvml.state = -1;
  const char *name = getenv("FUSEBOX_NVML_LIB");
  void *h = dlopen(name && *name ? name : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  g_nvml.init = (int (*)(void))dlsym(h, "nvmlInit_v2");
  g_nvml.by_bus = (int (*)(const char *, nvml_dev *))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
  g_nvml.by_index = (int (*)(unsigned int, nvml_dev *))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  g_nvml.util = (int (*)(nvml_dev, nvml_util *))dlsym(h, "nvmlDeviceGetUtilizationRates");
  g_nvml.clock = (int (*)(nvml_dev, int, unsigned int *))dlsym(h, "nvmlDeviceGetClockInfo");
  if (!g_nvml.init || !g_nvml.by_index || !g_nvml.util || g_nvml.init() != 0) {
    dlclose(h);
    return;
  }
  g_nvml.lib = h; /* stays loaded: nvmlShutdown at exit would race other users of NVML */
  g_nvml.state = 1;
}

/* Under g_mu: the NVML device for bus (cached per bus id). */
static int nvml_device(const char *bus) {
  const char *key = bus ? bus : "";
  if (g_nvml.have_dev && !strcmp(g_nvml.bus, key)) return 1;
  nvml_dev d = NULL;
  int rc = bus && *bus && g_nvml.by_bus ? g_nvml.by_bus(bus, &d) : g_nvml.by_index(0, &d);
  if (rc != 0 || !d) return 0;
  g_nvml.dev = d;
  snprintf(g_nvml.bus, sizeof g_nvml.bus, "%s", key);
  g_nvml.have_dev = 1;
  return 1;
}

void fbx_trace_sample_gpu(const char *bus_id, size_t engine_bytes, size_t total_bytes) {
  if (__builtin_expect(!(fbx_trace_flags() & FBX_TRACE_F_JSON), 1)) return;
  fbx_trace_counter("fusebox.gpu_mem_bytes", (double)engine_bytes);
  if (total_bytes) fbx_trace_counter("fusebox.gpu_mem_pct", 100.0 * (double)engine_bytes / (double)total_bytes);
  uint64_t now = fbx_trace_now_ns();
  if (pthread_mutex_trylock(&g_mu)) return; /* another thread is sampling */
  if (!g_nvml.state) nvml_load();
  double util = -1, mhz = -1;
  if (g_nvml.state == 1 && (!g_nvml.last_ns || now - g_nvml.last_ns >= NVML_SAMPLE_NS) && nvml_device(bus_id)) {
    g_nvml.last_ns = now;
    nvml_util u;
    unsigned int clk = 0;
    if (g_nvml.util(g_nvml.dev, &u) == 0) util = u.gpu;
    if (g_nvml.clock && g_nvml.clock(g_nvml.dev, NVML_CLOCK_SM, &clk) == 0) mhz = clk;
  }
  pthread_mutex_unlock(&g_mu);
  if (util >= 0) fbx_trace_counter("fusebox.gpu_util_pct", util);
  if (mhz >= 0) fbx_trace_counter("fusebox.gpu_sm_clock_mhz", mhz);
}

#else
typedef int fbx__trace_gpu_nvml_compiled_out;
#endif
