/* NVRTC loading, compiling and the on-disk cubin cache (cuda_nvrtc.h). */
#include "cuda_nvrtc.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../base/alloc.h"

/* The NVRTC entry points used (nvrtc.h's signatures; nvrtcProgram is a pointer). */
typedef int (*nvrtc_create_fn)(void **prog, const char *src, const char *name, int n_headers,
                               const char *const *headers, const char *const *include_names);
typedef int (*nvrtc_compile_fn)(void *prog, int n_opts, const char *const *opts);
typedef int (*nvrtc_size_fn)(void *prog, size_t *size);
typedef int (*nvrtc_get_fn)(void *prog, char *out);
typedef int (*nvrtc_destroy_fn)(void **prog);
typedef int (*nvrtc_version_fn)(int *major, int *minor);
typedef const char *(*nvrtc_errstr_fn)(int result);

static struct {
  pthread_once_t once;
  pthread_mutex_t mu;
  bool ok;
  const char *why;
  int major, minor;
  nvrtc_create_fn create;
  nvrtc_compile_fn compile;
  nvrtc_size_fn log_size, cubin_size;
  nvrtc_get_fn log, cubin;
  nvrtc_destroy_fn destroy;
  nvrtc_errstr_fn errstr;
  fbx_cuda_nvrtc_stats stats;
  char cache_dir[4096];
  bool cache_dir_set;
} g_rtc = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static void fbx__rtc_load(void) {
  const char *flag = getenv("FUSEBOX_CUDA_NVRTC");
  if (flag && !strcmp(flag, "off")) {
    g_rtc.why = "FUSEBOX_CUDA_NVRTC=off";
    return;
  }
  /* libfusebox_cuda.so's RUNPATH names the toolkit's lib folder, which dlopen searches too */
  static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13"};
  void *h = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    g_rtc.why = "libnvrtc.so.13 not found (CUDA toolkit's NVRTC)";
    return;
  }
  g_rtc.create = (nvrtc_create_fn)dlsym(h, "nvrtcCreateProgram");
  g_rtc.compile = (nvrtc_compile_fn)dlsym(h, "nvrtcCompileProgram");
  g_rtc.log_size = (nvrtc_size_fn)dlsym(h, "nvrtcGetProgramLogSize");
  g_rtc.log = (nvrtc_get_fn)dlsym(h, "nvrtcGetProgramLog");
  g_rtc.cubin_size = (nvrtc_size_fn)dlsym(h, "nvrtcGetCUBINSize");
  g_rtc.cubin = (nvrtc_get_fn)dlsym(h, "nvrtcGetCUBIN");
  g_rtc.destroy = (nvrtc_destroy_fn)dlsym(h, "nvrtcDestroyProgram");
  g_rtc.errstr = (nvrtc_errstr_fn)dlsym(h, "nvrtcGetErrorString");
  nvrtc_version_fn version = (nvrtc_version_fn)dlsym(h, "nvrtcVersion");
  if (!g_rtc.create || !g_rtc.compile || !g_rtc.log_size || !g_rtc.log || !g_rtc.cubin_size || !g_rtc.cubin ||
      !g_rtc.destroy || !g_rtc.errstr || !version || version(&g_rtc.major, &g_rtc.minor)) {
    g_rtc.why = "libnvrtc lacks an entry point Fusebox uses";
    return; /* the handle stays open: unloading a half-used library buys nothing */
  }
  g_rtc.ok = true;
}

bool fbx_cuda_nvrtc_available(const char **why) {
  pthread_once(&g_rtc.once, fbx__rtc_load);
  if (why) *why = g_rtc.ok ? NULL : g_rtc.why;
  return g_rtc.ok;
}

/* ---- the disk cache ---- */

static bool fbx__mkdirs(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    int r = mkdir(path, 0755);
    *p = '/';
    if (r && errno != EEXIST) return false;
  }
  return !mkdir(path, 0755) || errno == EEXIST;
}

const char *fbx_cuda_nvrtc_cache_dir(void) {
  pthread_mutex_lock(&g_rtc.mu);
  if (!g_rtc.cache_dir_set) {
    g_rtc.cache_dir_set = true;
    const char *env = getenv("FUSEBOX_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n = -1;
    if (env && !strcmp(env, "off")) n = -1;
    else if (env && *env) n = snprintf(g_rtc.cache_dir, sizeof g_rtc.cache_dir, "%s/nvrtc", env);
    else if (xdg && *xdg) n = snprintf(g_rtc.cache_dir, sizeof g_rtc.cache_dir, "%s/fusebox/nvrtc", xdg);
    else if (home && *home) n = snprintf(g_rtc.cache_dir, sizeof g_rtc.cache_dir, "%s/.cache/fusebox/nvrtc", home);
    if (n <= 0 || (size_t)n >= sizeof g_rtc.cache_dir || !fbx__mkdirs(g_rtc.cache_dir)) g_rtc.cache_dir[0] = 0;
  }
  pthread_mutex_unlock(&g_rtc.mu);
  return g_rtc.cache_dir[0] ? g_rtc.cache_dir : NULL;
}

static uint64_t fbx__fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static const char k_magic[8] = {'F', 'B', 'X', 'K', '1', '\n', 0, 0};

/* File layout: magic[8], u64 source length, source, u64 cubin length, cubin. */
static bool fbx__disk_read(const char *file, const char *src, void **cubin, size_t *size) {
  FILE *f = fopen(file, "rb");
  if (!f) return false;
  bool ok = false;
  char magic[8];
  uint64_t n_src = 0, n_bin = 0;
  size_t want = strlen(src);
  char *buf = NULL;
  void *bin = NULL;
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, k_magic, 8) || fread(&n_src, 8, 1, f) != 1 || n_src != want)
    goto done;
  if (!(buf = fbx_malloc(want + 1)) || fread(buf, 1, want, f) != want || memcmp(buf, src, want)) goto done;
  if (fread(&n_bin, 8, 1, f) != 1 || !n_bin || n_bin > ((uint64_t)1 << 30)) goto done;
  if (!(bin = fbx_malloc((size_t)n_bin)) || fread(bin, 1, (size_t)n_bin, f) != n_bin) goto done;
  *cubin = bin;
  *size = (size_t)n_bin;
  bin = NULL;
  ok = true;
done:
  fbx_free(buf);
  fbx_free(bin);
  fclose(f);
  return ok;
}

static bool fbx__disk_write(const char *file, const char *src, const void *cubin, size_t size) {
  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.%d.tmp", file, (int)getpid()) >= (int)sizeof tmp) return false;
  FILE *f = fopen(tmp, "wb");
  if (!f) return false;
  uint64_t n_src = strlen(src), n_bin = size;
  bool ok = fwrite(k_magic, 1, 8, f) == 8 && fwrite(&n_src, 8, 1, f) == 1 && fwrite(src, 1, n_src, f) == n_src &&
            fwrite(&n_bin, 8, 1, f) == 1 && fwrite(cubin, 1, size, f) == size;
  ok = !fclose(f) && ok;
  if (ok) ok = !rename(tmp, file); /* atomic: a concurrent reader sees the old file or the whole new one */
  if (!ok) unlink(tmp);
  return ok;
}

/* ---- compiling ---- */

static fbx_status *fbx__compile(const char *src, int arch, void **cubin, size_t *size) {
  const char *hdr[16], *names[16];
  int nh = fbx_cuda_n_embedded_headers < 16 ? fbx_cuda_n_embedded_headers : 16;
  for (int i = 0; i < nh; i++) {
    names[i] = fbx_cuda_embedded_headers[i].name;
    hdr[i] = fbx_cuda_embedded_headers[i].text;
  }
  void *prog = NULL;
  int r = g_rtc.create(&prog, src, "fusebox_ew.cu", nh, hdr, names);
  if (r) return FBX_ERR("device 'cuda': NVRTC: nvrtcCreateProgram: %s", g_rtc.errstr(r));
  char opt_arch[32];
  snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=sm_%d", arch);
  /* -fmad=false: a*b+c rounds twice, as the CPU backend's and the interpreter's scalar code does */
  const char *opts[] = {opt_arch, "-std=c++17", "--fmad=false", "-default-device"};
  r = g_rtc.compile(prog, (int)(sizeof opts / sizeof opts[0]), opts);
  fbx_status *st = NULL;
  if (r) {
    size_t n = 0;
    char log[2048] = "";
    if (!g_rtc.log_size(prog, &n) && n) {
      char *full = fbx_malloc(n + 1);
      if (full && !g_rtc.log(prog, full)) snprintf(log, sizeof log, "%s", full);
      fbx_free(full);
    }
    st = FBX_ERR("device 'cuda': NVRTC could not compile a generated kernel (%s): %s", g_rtc.errstr(r), log);
  } else {
    size_t n = 0;
    void *bin = NULL;
    if (g_rtc.cubin_size(prog, &n) || !n) st = FBX_ERR("device 'cuda': NVRTC produced no cubin");
    else if (!(bin = fbx_malloc(n))) st = FBX_ERR_OOM();
    else if (g_rtc.cubin(prog, bin)) {
      fbx_free(bin);
      st = FBX_ERR("device 'cuda': NVRTC: reading the cubin failed");
    } else {
      *cubin = bin;
      *size = n;
    }
  }
  g_rtc.destroy(&prog);
  return st;
}

fbx_status *fbx_cuda_nvrtc_cubin(const char *src, int arch, void **cubin, size_t *size, bool *from_disk) {
  const char *why;
  *cubin = NULL;
  *size = 0;
  *from_disk = false;
  if (!fbx_cuda_nvrtc_available(&why)) return FBX_ERR_NOTIMPL("device 'cuda': NVRTC unavailable: %s", why);
  const char *dir = fbx_cuda_nvrtc_cache_dir();
  char file[4200] = "";
  if (dir) {
    int key[3] = {arch, g_rtc.major, g_rtc.minor};
    uint64_t h = fbx__fnv(fbx__fnv(14695981039346656037ull, key, sizeof key), src, strlen(src));
    snprintf(file, sizeof file, "%s/%016llx.fbxk", dir, (unsigned long long)h);
    if (fbx__disk_read(file, src, cubin, size)) {
      pthread_mutex_lock(&g_rtc.mu);
      g_rtc.stats.disk_hits++;
      pthread_mutex_unlock(&g_rtc.mu);
      *from_disk = true;
      return NULL;
    }
  }
  fbx_status *st = fbx__compile(src, arch, cubin, size);
  bool wrote = !st && file[0] && fbx__disk_write(file, src, *cubin, *size);
  pthread_mutex_lock(&g_rtc.mu);
  if (st) g_rtc.stats.failures++;
  else g_rtc.stats.compiles++;
  if (wrote) g_rtc.stats.disk_writes++;
  pthread_mutex_unlock(&g_rtc.mu);
  return st;
}

fbx_cuda_nvrtc_stats fbx_cuda_nvrtc_stats_get(void) {
  pthread_mutex_lock(&g_rtc.mu);
  fbx_cuda_nvrtc_stats s = g_rtc.stats;
  pthread_mutex_unlock(&g_rtc.mu);
  return s;
}
