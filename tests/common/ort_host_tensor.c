// ort_host_tensor.c — owned CPU tensors: allocation, seeded fills, .npy I/O, comparison.
#include "ort_host.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// dtypes
// ---------------------------------------------------------------------------------------

size_t fbx_host_dtype_size(int dtype) {
  switch (dtype) {
    case FBX_HOST_F32: case FBX_HOST_I32: case FBX_HOST_U32: return 4;
    case FBX_HOST_F64: case FBX_HOST_I64: case FBX_HOST_U64: return 8;
    case FBX_HOST_F16: case FBX_HOST_BF16: case FBX_HOST_I16: case FBX_HOST_U16: return 2;
    case FBX_HOST_U8: case FBX_HOST_I8: case FBX_HOST_BOOL: return 1;
    default: return 0;
  }
}

const char *fbx_host_dtype_name(int dtype) {
  switch (dtype) {
    case FBX_HOST_F32: return "float32";
    case FBX_HOST_F64: return "float64";
    case FBX_HOST_F16: return "float16";
    case FBX_HOST_BF16: return "bfloat16";
    case FBX_HOST_I64: return "int64";
    case FBX_HOST_I32: return "int32";
    case FBX_HOST_I16: return "int16";
    case FBX_HOST_I8: return "int8";
    case FBX_HOST_U64: return "uint64";
    case FBX_HOST_U32: return "uint32";
    case FBX_HOST_U16: return "uint16";
    case FBX_HOST_U8: return "uint8";
    case FBX_HOST_BOOL: return "bool";
    case FBX_HOST_STRING: return "string";
    default: return "undefined";
  }
}

static int host__is_float(int dt) {
  return dt == FBX_HOST_F32 || dt == FBX_HOST_F64 || dt == FBX_HOST_F16 || dt == FBX_HOST_BF16;
}

float fbx_host_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do { e++; man <<= 1; } while (!(man & 0x400));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t fbx_host_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 0x1f) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) {  // subnormal or zero, round to nearest even
    if (e < -10) return sign;
    man |= 0x800000;
    int shift = 14 - e;
    uint32_t half = 1u << (shift - 1), rem = man & ((1u << shift) - 1), r = man >> shift;
    if (rem > half || (rem == half && (r & 1))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;  // may carry into exp: still correct
  return (uint16_t)(sign | r);
}

static float host__bf16_to_f32(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint16_t host__f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

double fbx_host_tensor_get(const fbx_host_tensor *t, size_t i) {
  const void *p = t->data;
  switch (t->dtype) {
    case FBX_HOST_F32: return ((const float *)p)[i];
    case FBX_HOST_F64: return ((const double *)p)[i];
    case FBX_HOST_F16: return fbx_host_f16_to_f32(((const uint16_t *)p)[i]);
    case FBX_HOST_BF16: return host__bf16_to_f32(((const uint16_t *)p)[i]);
    case FBX_HOST_I64: return (double)((const int64_t *)p)[i];
    case FBX_HOST_I32: return ((const int32_t *)p)[i];
    case FBX_HOST_I16: return ((const int16_t *)p)[i];
    case FBX_HOST_I8: return ((const int8_t *)p)[i];
    case FBX_HOST_U64: return (double)((const uint64_t *)p)[i];
    case FBX_HOST_U32: return ((const uint32_t *)p)[i];
    case FBX_HOST_U16: return ((const uint16_t *)p)[i];
    case FBX_HOST_U8: return ((const uint8_t *)p)[i];
    case FBX_HOST_BOOL: return ((const uint8_t *)p)[i] ? 1.0 : 0.0;
    default: return 0.0;
  }
}

void fbx_host_tensor_set(fbx_host_tensor *t, size_t i, double v) {
  void *p = t->data;
  switch (t->dtype) {
    case FBX_HOST_F32: ((float *)p)[i] = (float)v; break;
    case FBX_HOST_F64: ((double *)p)[i] = v; break;
    case FBX_HOST_F16: ((uint16_t *)p)[i] = fbx_host_f32_to_f16((float)v); break;
    case FBX_HOST_BF16: ((uint16_t *)p)[i] = host__f32_to_bf16((float)v); break;
    case FBX_HOST_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case FBX_HOST_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case FBX_HOST_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case FBX_HOST_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case FBX_HOST_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case FBX_HOST_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case FBX_HOST_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case FBX_HOST_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case FBX_HOST_BOOL: ((uint8_t *)p)[i] = v != 0.0; break;
    default: break;
  }
}

// ---------------------------------------------------------------------------------------
// Allocation
// ---------------------------------------------------------------------------------------

size_t fbx_host_tensor_numel(const fbx_host_tensor *t) {
  size_t n = 1;
  for (int d = 0; d < t->rank; d++) n *= (size_t)(t->dims[d] > 0 ? t->dims[d] : 0);
  return n;
}

// zero: calloc; else the caller overwrites every byte (a copy) and the zeroing is skipped: a decode
// loop's outputs are megabytes a step (24 presents of 0.5 MB), and glibc's calloc of reused heap
// memory zeroes them all, which both EPs' timed loops paid.
static char *host_tensor_alloc(fbx_host_tensor *t, const char *name, int dtype, int rank, const int64_t *dims,
                               bool zero) {
  memset(t, 0, sizeof *t);
  size_t es = fbx_host_dtype_size(dtype);
  if (!es) return fbx_host_errf("ort_host: unsupported dtype %s (%d)", fbx_host_dtype_name(dtype), dtype);
  if (rank < 0 || rank > FBX_HOST_MAX_RANK)
    return fbx_host_errf("ort_host: rank %d out of range (max %d)", rank, FBX_HOST_MAX_RANK);
  t->dtype = dtype;
  t->rank = rank;
  for (int d = 0; d < rank; d++) {
    if (dims[d] < 0)
      return fbx_host_errf("ort_host: tensor %s: negative dim %lld", name ? name : "",
                           (long long)dims[d]);
    t->dims[d] = dims[d];
  }
  t->nbytes = fbx_host_tensor_numel(t) * es;
  if (t->nbytes) {
    t->data = zero ? calloc(1, t->nbytes) : malloc(t->nbytes);
    if (!t->data) return fbx_host_errf("ort_host: out of memory (%zu bytes)", t->nbytes);
  }
  if (name) {
    t->name = strdup(name);
    if (!t->name) { fbx_host_tensor_free(t); return fbx_host_errf("ort_host: out of memory"); }
  }
  return NULL;
}

char *fbx_host_tensor_alloc(fbx_host_tensor *t, const char *name, int dtype, int rank,
                            const int64_t *dims) {
  return host_tensor_alloc(t, name, dtype, rank, dims, true);
}

char *fbx_host_tensor_alloc_for_copy(fbx_host_tensor *t, const char *name, int dtype, int rank,
                                     const int64_t *dims) {
  return host_tensor_alloc(t, name, dtype, rank, dims, false);
}

char *fbx_host_tensor_copy(fbx_host_tensor *dst, const fbx_host_tensor *src) {
  char *err = fbx_host_tensor_alloc_for_copy(dst, src->name, src->dtype, src->rank, src->dims);
  if (!err && src->nbytes) memcpy(dst->data, src->data, src->nbytes);
  return err;
}

char *fbx_host_tensor_set_name(fbx_host_tensor *t, const char *name) {
  char *n = strdup(name);
  if (!n) return fbx_host_errf("ort_host: out of memory");
  free(t->name);
  t->name = n;
  return NULL;
}

void fbx_host_tensor_free(fbx_host_tensor *t) {
  if (!t) return;
  free(t->name);
  free(t->data);
  memset(t, 0, sizeof *t);
}

void fbx_host_tensors_free(fbx_host_tensor *ts, size_t n) {
  if (!ts) return;
  for (size_t i = 0; i < n; i++) fbx_host_tensor_free(&ts[i]);
  free(ts);
}

// ---------------------------------------------------------------------------------------
// Seeded fills (splitmix64 -> xorshift64*)
// ---------------------------------------------------------------------------------------

typedef struct { uint64_t s; } host__rng;

static host__rng host__rng_make(uint64_t seed) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  host__rng r = {z ? z : 0x2545f4914f6cdd1dull};
  return r;
}

static uint64_t host__rng_next(host__rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 0x2545f4914f6cdd1dull;
}

static double host__rng_unit(host__rng *r) {  // [0, 1)
  return (double)(host__rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

void fbx_host_tensor_fill_normal(fbx_host_tensor *t, uint64_t seed) {
  host__rng r = host__rng_make(seed);
  size_t n = fbx_host_tensor_numel(t);
  for (size_t i = 0; i < n; i += 2) {  // Box-Muller, two values per draw
    double u1 = host__rng_unit(&r), u2 = host__rng_unit(&r);
    double m = sqrt(-2.0 * log(1.0 - u1));
    fbx_host_tensor_set(t, i, m * cos(6.283185307179586 * u2));
    if (i + 1 < n) fbx_host_tensor_set(t, i + 1, m * sin(6.283185307179586 * u2));
  }
}

void fbx_host_tensor_fill_uniform(fbx_host_tensor *t, uint64_t seed, double lo, double hi) {
  host__rng r = host__rng_make(seed);
  size_t n = fbx_host_tensor_numel(t);
  for (size_t i = 0; i < n; i++) fbx_host_tensor_set(t, i, lo + (hi - lo) * host__rng_unit(&r));
}

void fbx_host_tensor_fill_int(fbx_host_tensor *t, uint64_t seed, int64_t lo, int64_t hi) {
  host__rng r = host__rng_make(seed);
  size_t n = fbx_host_tensor_numel(t);
  if (hi < lo) hi = lo;
  uint64_t span = (uint64_t)(hi - lo) + 1;
  for (size_t i = 0; i < n; i++) {
    int64_t v = lo + (int64_t)(span ? host__rng_next(&r) % span : host__rng_next(&r));
    if (t->dtype == FBX_HOST_I64) ((int64_t *)t->data)[i] = v;  // exact beyond 2^53
    else fbx_host_tensor_set(t, i, (double)v);
  }
}

void fbx_host_tensor_fill_const(fbx_host_tensor *t, double v) {
  size_t n = fbx_host_tensor_numel(t);
  for (size_t i = 0; i < n; i++) fbx_host_tensor_set(t, i, v);
}

// ---------------------------------------------------------------------------------------
// .npy
// ---------------------------------------------------------------------------------------

static const struct { const char *descr; int dtype; } host__npy_types[] = {
    {"<f4", FBX_HOST_F32}, {"<f8", FBX_HOST_F64}, {"<f2", FBX_HOST_F16},
    {"<i8", FBX_HOST_I64}, {"<i4", FBX_HOST_I32}, {"<i2", FBX_HOST_I16},
    {"|i1", FBX_HOST_I8},  {"|u1", FBX_HOST_U8},  {"|b1", FBX_HOST_BOOL},
    {"<u2", FBX_HOST_U16}, {"<u4", FBX_HOST_U32}, {"<u8", FBX_HOST_U64},
};
#define HOST_NPY_NTYPES (sizeof host__npy_types / sizeof host__npy_types[0])

char *fbx_host_npy_read(const char *path, fbx_host_tensor *t) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "rb");
  if (!f) return fbx_host_errf("npy %s: cannot open", path);
  char *err = NULL, *hdr = NULL;
  unsigned char pre[12];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    err = fbx_host_errf("npy %s: not a .npy file", path);
    goto done;
  }
  size_t hlen;
  if (pre[6] == 1) {
    hlen = (size_t)pre[8] | ((size_t)pre[9] << 8);
  } else {
    if (fread(pre + 10, 1, 2, f) != 2) { err = fbx_host_errf("npy %s: truncated", path); goto done; }
    hlen = (size_t)pre[8] | ((size_t)pre[9] << 8) | ((size_t)pre[10] << 16) | ((size_t)pre[11] << 24);
  }
  if (hlen > (1u << 20)) { err = fbx_host_errf("npy %s: header too large", path); goto done; }
  hdr = calloc(1, hlen + 1);
  if (!hdr || fread(hdr, 1, hlen, f) != hlen) { err = fbx_host_errf("npy %s: truncated header", path); goto done; }
  // {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 224, 224), }
  const char *d = strstr(hdr, "'descr'");
  const char *fo = strstr(hdr, "'fortran_order'");
  const char *sh = strstr(hdr, "'shape'");
  if (!d || !fo || !sh) { err = fbx_host_errf("npy %s: malformed header", path); goto done; }
  d = strchr(d + 7, '\'');
  if (!d) { err = fbx_host_errf("npy %s: malformed descr", path); goto done; }
  d++;
  int dtype = 0;
  for (size_t i = 0; i < HOST_NPY_NTYPES; i++) {
    const char *ds = host__npy_types[i].descr;
    // '=' and '|' byte orders are the same as '<' on little-endian for our purposes.
    if ((d[0] == ds[0] || d[0] == '=' || d[0] == '|' || ds[0] == '|') && strncmp(d + 1, ds + 1, 2) == 0 &&
        d[3] == '\'') {
      dtype = host__npy_types[i].dtype;
      break;
    }
  }
  if (!dtype) { err = fbx_host_errf("npy %s: unsupported dtype descr '%.8s'", path, d); goto done; }
  fo = strchr(fo + 15, ':');
  if (fo) {
    fo++;
    while (*fo == ' ') fo++;
    if (strncmp(fo, "True", 4) == 0) {
      err = fbx_host_errf("npy %s: fortran_order arrays are not supported", path);
      goto done;
    }
  }
  const char *p = strchr(sh, '(');
  if (!p) { err = fbx_host_errf("npy %s: malformed shape", path); goto done; }
  p++;
  int64_t dims[FBX_HOST_MAX_RANK];
  int rank = 0;
  while (*p && *p != ')') {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ')') break;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p) { err = fbx_host_errf("npy %s: malformed shape", path); goto done; }
    if (rank == FBX_HOST_MAX_RANK) { err = fbx_host_errf("npy %s: rank too large", path); goto done; }
    dims[rank++] = v;
    p = end;
  }
  if ((err = fbx_host_tensor_alloc(t, NULL, dtype, rank, dims))) goto done;
  if (t->nbytes && fread(t->data, 1, t->nbytes, f) != t->nbytes) {
    fbx_host_tensor_free(t);
    err = fbx_host_errf("npy %s: truncated data", path);
  }
done:
  free(hdr);
  fclose(f);
  return err;
}

char *fbx_host_npy_write(const char *path, const fbx_host_tensor *t) {
  const char *descr = NULL;
  for (size_t i = 0; i < HOST_NPY_NTYPES; i++)
    if (host__npy_types[i].dtype == t->dtype) descr = host__npy_types[i].descr;
  if (!descr) return fbx_host_errf("npy %s: dtype %s not writable", path, fbx_host_dtype_name(t->dtype));
  char shape[512];
  size_t o = 0;
  o += (size_t)snprintf(shape + o, sizeof shape - o, "(");
  for (int d = 0; d < t->rank && o < sizeof shape; d++)
    o += (size_t)snprintf(shape + o, sizeof shape - o, "%lld%s", (long long)t->dims[d],
                          (t->rank == 1 || d + 1 < t->rank) ? ", " : "");
  if (o < sizeof shape) snprintf(shape + o, sizeof shape - o, ")");
  char hdr[700];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
  if (n < 0 || (size_t)n + 12 >= sizeof hdr) return fbx_host_errf("npy %s: header too long", path);
  size_t total = 10 + (size_t)n + 1;
  size_t pad = (64 - total % 64) % 64;
  for (size_t i = 0; i < pad; i++) hdr[n++] = ' ';
  hdr[n++] = '\n';
  FILE *f = fopen(path, "wb");
  if (!f) return fbx_host_errf("npy %s: cannot create", path);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff),
                           (unsigned char)(n >> 8)};
  int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)n, f) == (size_t)n &&
           (t->nbytes == 0 || fwrite(t->data, 1, t->nbytes, f) == t->nbytes);
  if (fclose(f) != 0) ok = 0;
  return ok ? NULL : fbx_host_errf("npy %s: write failed", path);
}

// ---------------------------------------------------------------------------------------
// Compare
// ---------------------------------------------------------------------------------------

int fbx_host_compare(const fbx_host_tensor *a, const fbx_host_tensor *b, double rtol, double atol,
                     fbx_host_cmp *r) {
  memset(r, 0, sizeof *r);
  int same = a->dtype == b->dtype && a->rank == b->rank;
  for (int d = 0; same && d < a->rank; d++) same = a->dims[d] == b->dims[d];
  if (!same) {
    r->shape_mismatch = 1;
    return 0;
  }
  size_t n = fbx_host_tensor_numel(a);
  r->numel = n;
  if (!host__is_float(a->dtype)) {  // exact; int64 compared as integers
    size_t es = fbx_host_dtype_size(a->dtype);
    for (size_t i = 0; i < n; i++) {
      if (memcmp((const char *)a->data + i * es, (const char *)b->data + i * es, es) != 0) {
        double diff = fabs(fbx_host_tensor_get(a, i) - fbx_host_tensor_get(b, i));
        if (r->n_bad == 0 || diff > r->max_abs) { r->max_abs = diff; r->worst_index = i; }
        r->n_bad++;
      }
    }
    if (r->max_abs > 0) r->max_rel = 1.0;
    return r->n_bad == 0;
  }
  for (size_t i = 0; i < n; i++) {
    double x = fbx_host_tensor_get(a, i), y = fbx_host_tensor_get(b, i);
    if (isnan(x) || isnan(y)) {
      if (!(isnan(x) && isnan(y))) r->n_bad++;
      continue;
    }
    if (isinf(x) || isinf(y)) {
      if (x != y) r->n_bad++;
      continue;
    }
    double diff = fabs(x - y);
    double rel = diff / fmax(fabs(y), 1e-12);
    if (diff > r->max_abs) { r->max_abs = diff; r->worst_index = i; }
    if (rel > r->max_rel) r->max_rel = rel;
    if (diff > atol + rtol * fabs(y)) r->n_bad++;
  }
  return r->n_bad == 0;
}

char *fbx_host_shape_str(int rank, const int64_t *dims, char *buf, size_t cap) {
  size_t o = 0;
  if (cap == 0) return buf;
  buf[0] = 0;
  if (rank == 0) { snprintf(buf, cap, "scalar"); return buf; }
  for (int d = 0; d < rank && o < cap; d++)
    o += (size_t)snprintf(buf + o, cap - o, d ? "x%lld" : "%lld", (long long)dims[d]);
  return buf;
}
