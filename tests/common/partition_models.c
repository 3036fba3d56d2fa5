// partition_models.c — see partition_models.h. Field numbers: tests/ops/pb_writer.h.
#include "common/partition_models.h"

#include <stdio.h>

#include "common/ort_host.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* a header of static helpers; some unused here */
#include "ops/pb_writer.h"
#pragma GCC diagnostic pop

// ValueInfoProto of a float tensor (rows, cols).
static void value_info(pbw *g, int field, const char *name, int64_t rows, int64_t cols) {
  pbw vi = {0}, type = {0}, tensor = {0}, shape = {0}, d0 = {0}, d1 = {0};
  pbw_int(&d0, 1, rows);
  pbw_int(&d1, 1, cols);
  pbw_sub(&shape, 1, &d0);
  pbw_sub(&shape, 1, &d1);
  pbw_int(&tensor, 1, FBX_HOST_F32);
  pbw_sub(&tensor, 2, &shape);
  pbw_sub(&type, 1, &tensor);
  pbw_str(&vi, 1, name);
  pbw_sub(&vi, 2, &type);
  pbw_sub(g, field, &vi);
}

// Wraps graph g (freed) into a ModelProto, opset 17, and writes it to path.
static char *write_model(const char *path, pbw *g) {
  pbw m = {0}, opset = {0};
  pbw_int(&m, 1, 8); // ir_version
  pbw_str(&opset, 1, "");
  pbw_int(&opset, 2, 17);
  pbw_sub(&m, 8, &opset);
  pbw_sub(&m, 7, g);
  char *err = NULL;
  if (m.oom) {
    err = fbx_host_errf("partition_models: out of memory");
  } else {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(m.p, 1, m.n, f) != m.n) err = fbx_host_errf("partition_models: cannot write %s", path);
    if (f && fclose(f) != 0 && !err) err = fbx_host_errf("partition_models: cannot write %s", path);
  }
  free(m.p);
  return err;
}

// A scalar float initializer name = v.
static void scalar_init(pbw *g, const char *name, float v) {
  pbw init = {0};
  pbw_int(&init, 2, FBX_HOST_F32); // a scalar: no dims
  pbw_str(&init, 8, name);
  pbw_bytes(&init, 9, &v, sizeof v);
  pbw_sub(g, 5, &init);
}

char *fbx_fanin_model_write(const char *path, int n, int width) {
  if (n < 1 || width < 1) return fbx_host_errf("partition_models: n=%d width=%d must be >= 1", n, width);
  pbw g = {0}, concat = {0};
  char a[32], c[32], nm[32];
  pbw_str(&g, 2, "fanin");
  for (int i = 0; i < n; i++) {
    snprintf(a, sizeof a, "A%d", i);
    snprintf(c, sizeof c, "c%d", i);
    snprintf(nm, sizeof nm, "add%d", i);
    pbw node = {0};
    pbw_str(&node, 1, "X");
    pbw_str(&node, 1, c);
    pbw_str(&node, 2, a);
    pbw_str(&node, 3, nm);
    pbw_str(&node, 4, "Add");
    pbw_sub(&g, 1, &node);
    scalar_init(&g, c, (float)i);
    pbw_str(&concat, 1, a);
  }
  pbw attr = {0};
  pbw_str(&attr, 1, "axis");
  pbw_int(&attr, 3, 1);
  pbw_int(&attr, 20, 2); // AttributeProto.INT
  pbw_str(&concat, 2, "Y");
  pbw_str(&concat, 3, "concat");
  pbw_str(&concat, 4, "Concat");
  pbw_sub(&concat, 5, &attr);
  pbw_sub(&g, 1, &concat);
  value_info(&g, 11, "X", 1, width);
  value_info(&g, 12, "Y", 1, (int64_t)n * width);

  return write_model(path, &g);
}

char *fbx_chain_model_write(const char *path, int n, int width) {
  if (n < 1 || width < 1) return fbx_host_errf("partition_models: n=%d width=%d must be >= 1", n, width);
  int64_t *two = malloc((size_t)width * sizeof *two);
  if (!two) return fbx_host_errf("partition_models: out of memory");
  for (int j = 0; j < width; j++) two[j] = 2;
  pbw g = {0}, lens = {0};
  pbw_str(&g, 2, "chain");
  pbw_int(&lens, 1, width); // dims (W)
  pbw_int(&lens, 2, FBX_HOST_I64);
  pbw_str(&lens, 8, "lens");
  pbw_bytes(&lens, 9, two, (size_t)width * sizeof *two);
  free(two);
  pbw_sub(&g, 5, &lens);
  char in[32], a[32], out[32], c[32], nm[32];
  for (int i = 0; i < n; i++) {
    snprintf(in, sizeof in, i ? "Y%d" : "X", i);
    snprintf(a, sizeof a, "A%d", i);
    snprintf(out, sizeof out, i + 1 < n ? "Y%d" : "Y", i + 1);
    snprintf(c, sizeof c, "c%d", i);
    scalar_init(&g, c, (float)i);
    pbw add = {0}, rev = {0};
    pbw_str(&add, 1, in);
    pbw_str(&add, 1, c);
    pbw_str(&add, 2, a);
    snprintf(nm, sizeof nm, "add%d", i);
    pbw_str(&add, 3, nm);
    pbw_str(&add, 4, "Add");
    pbw_sub(&g, 1, &add);
    pbw_str(&rev, 1, a);
    pbw_str(&rev, 1, "lens");
    pbw_str(&rev, 2, out);
    snprintf(nm, sizeof nm, "rev%d", i);
    pbw_str(&rev, 3, nm);
    pbw_str(&rev, 4, "ReverseSequence");
    pbw_sub(&g, 1, &rev);
  }
  value_info(&g, 11, "X", 2, width);
  value_info(&g, 12, "Y", 2, width);
  return write_model(path, &g);
}
