/* The CUDA backend's generated elementwise kernels, without a GPU: for every
 * elementwise op of the IR op list (as a one-instruction program), a long
 * mixed-kind chain, every rank 0..8 and broadcast patterns, the source that
 * cuda_ew_gen.c writes must compile with NVRTC for sm_90 into an ELF cubin;
 * the specialisation key must separate what the source bakes in; the disk
 * cache must hand back the same cubin without compiling, and must not use a
 * file whose stored source differs. The generated kernels' results are
 * checked on a GPU by test_cuda_ops (FUSED_EW[...] cases against the CPU
 * backend). Skips with a line when built without the CUDA toolkit or when
 * NVRTC is not loadable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(FBX_HAVE_CUDA_GEN)
int main(void) {
  printf("SKIP test_cuda_nvrtc: built without the CUDA toolkit (no kernel generator)\n");
  return 0;
}
#else

#include <dirent.h>
#include <unistd.h>

#include "backend/cuda/cuda_ew_gen.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "common/check.h"
#include "ir/ir_ops.h"

static int g_compiled;

/* An args block of rank r (dims 2..), n_in inputs of kind ek, input k
 * broadcast (stride 0 on dim 0) when bcast_mask has bit k. */
static fbx_cuda_ew_args args_of(int rank, int n_in, int ek, unsigned bcast_mask, int out_ek, int n_ins) {
  fbx_cuda_ew_args a;
  memset(&a, 0, sizeof a);
  a.rank = rank;
  a.n = 1;
  for (int d = 0; d < rank; d++) a.n *= (a.out_dims[d] = 2 + d % 3);
  a.n_in = n_in;
  a.n_ins = n_ins;
  a.out_reg = n_in + n_ins - 1;
  a.out_ek = out_ek;
  for (int k = 0; k < n_in; k++) {
    a.in_ek[k] = (unsigned char)ek;
    a.in_same[k] = !(bcast_mask >> k & 1);
    int64_t st = 1;
    for (int d = rank - 1; d >= 0; d--) {
      a.in_strides[k][d] = (d == 0 && !a.in_same[k]) ? 0 : st;
      st *= a.out_dims[d];
    }
  }
  return a;
}

static int compile_ok(const char *what, const fbx_cuda_ew_args *a, const fbx_cuda_ew_ins *prog) {
  char *src = NULL;
  fbx_status *st = fbx_cuda_ew_gen_source(a, prog, fbx_cuda_ew_gen_idx32(a), &src);
  CHECK(!st, "%s: source: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (!src) return 0;
  void *bin = NULL;
  size_t size = 0;
  bool disk = true;
  st = fbx_cuda_nvrtc_cubin(src, 90, &bin, &size, &disk);
  CHECK(!st, "%s: NVRTC: %s\n--- source ---\n%s", what, st ? fbx_status_message(st) : "", src);
  fbx_status_free(st);
  CHECK(!st ? (size > 4 && !memcmp(bin, "\177ELF", 4)) : 1, "%s: the cubin is not an ELF image", what);
  if (bin) g_compiled++;
  free(bin);
  free(src);
  return 1;
}

/* Ops that have no float form: their one-instruction program runs on int64 (bool for the logical ones). */
static int int_only(int op) {
  return op == FBX_IR_OP_NOT || op == FBX_IR_OP_BITWISE_NOT || op == FBX_IR_OP_BITWISE_AND ||
         op == FBX_IR_OP_BITWISE_OR || op == FBX_IR_OP_BITWISE_XOR || op == FBX_IR_OP_BITSHIFT_LEFT ||
         op == FBX_IR_OP_BITSHIFT_RIGHT || op == FBX_IR_OP_AND || op == FBX_IR_OP_OR || op == FBX_IR_OP_XOR;
}

static void test_every_op(void) {
  for (int op = 0; op < FBX_IR_OP_COUNT; op++) {
    int cls = fbx_ir_op_class(op);
    if (cls != FBX_IR_CLASS_EW1 && cls != FBX_IR_CLASS_EW2 && cls != FBX_IR_CLASS_EW3) continue;
    int n_in = cls == FBX_IR_CLASS_EW1 ? 1 : cls == FBX_IR_CLASS_EW2 ? 2 : 3;
    /* float operands; int64 for the int-only ops and for the int paths of arithmetic */
    bool also_int = op == FBX_IR_OP_ADD || op == FBX_IR_OP_DIV || op == FBX_IR_OP_MOD || op == FBX_IR_OP_NEG;
    for (int pass = 0; pass < 2; pass++) {
      int ek = (pass == 0 && !int_only(op)) ? FBX_CUDA_EK_F32 : FBX_CUDA_EK_I64;
      if (pass == 1 && !also_int) break;
      fbx_cuda_ew_args a = args_of(3, n_in, ek, 2u, ek, 1);
      if (cls == FBX_IR_CLASS_EW3) a.in_ek[0] = FBX_CUDA_EK_BOOL; /* WHERE's condition */
      fbx_cuda_ew_ins one = {.op = op, .a = 0, .b = n_in > 1, .c = n_in > 2 ? 2 : 0, .ek = ek, .alpha = 0.3f,
                             .beta = 0.5f, .gamma = 1.05f};
      char what[96];
      snprintf(what, sizeof what, "%s on %s", fbx_ir_op_name(op), ek == FBX_CUDA_EK_F32 ? "f32" : "i64");
      compile_ok(what, &a, &one);
    }
  }
}

/* 60 instructions over f16, f32, bool and int kinds, with casts between them. */
static void test_long_chain(void) {
  enum { N = 60 };
  fbx_cuda_ew_ins prog[N];
  fbx_cuda_ew_args a = args_of(4, 2, FBX_CUDA_EK_F16, 1u, FBX_CUDA_EK_F16, N);
  a.in_ek[1] = FBX_CUDA_EK_F32;
  for (int i = 0; i < N; i++) {
    int prev = i == 0 ? 0 : 2 + i - 1;
    switch (i % 5) {
      case 0: prog[i] = (fbx_cuda_ew_ins){.op = FBX_IR_OP_MUL, .a = prev, .b = 1, .ek = FBX_CUDA_EK_F32}; break;
      case 1: prog[i] = (fbx_cuda_ew_ins){.op = FBX_IR_OP_TANH, .a = prev, .ek = FBX_CUDA_EK_F16}; break;
      case 2: prog[i] = (fbx_cuda_ew_ins){.op = FBX_IR_OP_CAST, .a = prev, .ek = FBX_CUDA_EK_I32}; break;
      case 3: prog[i] = (fbx_cuda_ew_ins){.op = FBX_IR_OP_GREATER, .a = prev, .b = 0, .ek = FBX_CUDA_EK_BOOL}; break;
      default: prog[i] = (fbx_cuda_ew_ins){.op = FBX_IR_OP_WHERE, .a = prev, .b = 1, .c = 0, .ek = FBX_CUDA_EK_F16}; break;
    }
  }
  compile_ok("60-instruction mixed-kind chain", &a, prog);
}

static void test_ranks(void) {
  fbx_cuda_ew_ins add = {.op = FBX_IR_OP_ADD, .a = 0, .b = 1, .ek = FBX_CUDA_EK_F32};
  for (int r = 0; r <= FBX_CUDA_RANK; r++)
    for (unsigned m = r ? 1 + (unsigned)r % 3 : 0; m == (r ? 1 + (unsigned)r % 3 : 0); m++) {
      fbx_cuda_ew_args a = args_of(r, 2, FBX_CUDA_EK_F32, m, FBX_CUDA_EK_F32, 1);
      char what[64];
      snprintf(what, sizeof what, "ADD rank %d broadcast mask %u", r, m);
      compile_ok(what, &a, &add);
    }
  /* 64-bit indexing: more than 2^31 elements */
  fbx_cuda_ew_args big = args_of(2, 2, FBX_CUDA_EK_F32, 2u, FBX_CUDA_EK_F32, 1);
  big.out_dims[0] = 1 << 20;
  big.out_dims[1] = 1 << 12;
  big.n = (int64_t)1 << 32;
  big.in_strides[0][0] = 1 << 12;
  CHECK(!fbx_cuda_ew_gen_idx32(&big), "2^32 elements must index in 64 bits");
  compile_ok("ADD with 64-bit indexing", &big, &add);
}

static void test_keys(void) {
  fbx_cuda_ew_ins add = {.op = FBX_IR_OP_ADD, .a = 0, .b = 1, .ek = FBX_CUDA_EK_F32};
  unsigned char k1[FBX_CUDA_EW_GEN_KEY_MAX], k2[FBX_CUDA_EW_GEN_KEY_MAX];
  fbx_cuda_ew_args a = args_of(3, 2, FBX_CUDA_EK_F32, 0, FBX_CUDA_EK_F32, 1);
  fbx_cuda_ew_args b = a;
  b.out_dims[2] = 77; /* sizes are parameters: same kernel */
  b.n = 2 * 3 * 77;
  size_t n1 = fbx_cuda_ew_gen_key(&a, &add, true, k1), n2 = fbx_cuda_ew_gen_key(&b, &add, true, k2);
  CHECK(n1 == n2 && !memcmp(k1, k2, n1), "another size must give the same key");
  b = a;
  b.in_same[1] = 0;
  n2 = fbx_cuda_ew_gen_key(&b, &add, true, k2);
  CHECK(n1 != n2 || memcmp(k1, k2, n1), "a broadcast input must change the key");
  n2 = fbx_cuda_ew_gen_key(&a, &add, false, k2);
  CHECK(n1 != n2 || memcmp(k1, k2, n1), "the index width must change the key");
  fbx_cuda_ew_ins mul = add;
  mul.alpha = 1e-30f; /* a parameter baked into the source */
  n2 = fbx_cuda_ew_gen_key(&a, &mul, true, k2);
  CHECK(n1 != n2 || memcmp(k1, k2, n1), "an instruction parameter must change the key");
}

/* The one cache file of the folder, or "" */
static void cache_file(const char *dir, char *out, size_t cap) {
  out[0] = 0;
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".fbxk")) snprintf(out, cap, "%s/%s", dir, e->d_name);
  closedir(d);
}

static void test_disk_cache(const char *root) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/nvrtc", root);
  const char *src = "#include \"cuda_kernels.h\"\nextern \"C\" __global__ void " FBX_CUDA_EW_GEN_ENTRY
                    "(float *y) { y[threadIdx.x] = 1.5f; }\n";
  fbx_cuda_nvrtc_stats s0 = fbx_cuda_nvrtc_stats_get();
  void *b1 = NULL, *b2 = NULL;
  size_t n1 = 0, n2 = 0;
  bool disk = true;
  fbx_status *st = fbx_cuda_nvrtc_cubin(src, 90, &b1, &n1, &disk);
  CHECK(!st && !disk, "first build compiles");
  fbx_status_free(st);
  st = fbx_cuda_nvrtc_cubin(src, 90, &b2, &n2, &disk);
  CHECK(!st && disk, "second build comes from the disk cache");
  fbx_status_free(st);
  CHECK(n1 && n1 == n2 && !memcmp(b1, b2, n1), "the cached cubin is the compiled one");
  fbx_cuda_nvrtc_stats s1 = fbx_cuda_nvrtc_stats_get();
  CHECK(s1.compiles == s0.compiles + 1 && s1.disk_hits == s0.disk_hits + 1, "one compile, one disk hit");
  free(b2);
  b2 = NULL;
  /* the stored source no longer matches (a collision, or a damaged file): never used */
  char file[1024];
  cache_file(dir, file, sizeof file);
  CHECK(file[0], "a cache file in %s", dir);
  FILE *f = file[0] ? fopen(file, "r+b") : NULL;
  if (f) {
    fseek(f, 8 + 8 + 3, SEEK_SET); /* inside the stored source */
    fputc('#', f);
    fclose(f);
  }
  st = fbx_cuda_nvrtc_cubin(src, 90, &b2, &n2, &disk);
  CHECK(!st && !disk, "a file whose source differs is compiled again, not loaded");
  fbx_status_free(st);
  free(b1);
  free(b2);
  /* a compile error is an error with NVRTC's log, not a crash */
  st = fbx_cuda_nvrtc_cubin("this is not CUDA", 90, &b1, &n1, &disk);
  CHECK(st && strstr(fbx_status_message(st), "NVRTC"), "a bad source fails with NVRTC's message");
  fbx_status_free(st);
}

int main(void) {
  const char *why = NULL;
  char root[] = "/tmp/fusebox_nvrtc_test.XXXXXX";
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  setenv("FUSEBOX_CACHE_DIR", root, 1); /* before the first cache use: read once */
  if (!fbx_cuda_nvrtc_available(&why)) {
    printf("SKIP test_cuda_nvrtc: NVRTC not available (%s)\n", why);
    return 0;
  }
  test_disk_cache(root); /* first: the cache folder then holds its one file */
  test_keys();
  test_every_op();
  test_long_chain();
  test_ranks();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", root);
  printf("cuda_nvrtc: %d kernels compiled for sm_90; %d passed, %d failed\n", g_compiled, passed, failed);
  return failed ? 1 : 0;
}
#endif
