// fanin_model.c — see fanin_model.h. Field numbers: tests/ops/pb_writer.h.
#include "common/fanin_model.h"

#include <stdio.h>

#include "common/ort_host.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* a header of static helpers; some unused here */
#include "ops/pb_writer.h"
#pragma GCC diagnostic pop

// ValueInfoProto of a float tensor (1, cols).
static void value_info(pbw *g, int field, const char *name, int64_t cols) {
  pbw vi = {0}, type = {0}, tensor = {0}, shape = {0}, d0 = {0}, d1 = {0};
  pbw_int(&d0, 1, 1);
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

char *fbx_fanin_model_write(const char *path, int n, int width) {
  if (n < 1 || width < 1) return fbx_host_errf("fanin_model: n=%d width=%d must be >= 1", n, width);
  pbw g = {0}, concat = {0};
  char a[32], c[32], nm[32];
  pbw_str(&g, 2, "fanin");
  for (int i = 0; i < n; i++) {
    snprintf(a, sizeof a, "A%d", i);
    snprintf(c, sizeof c, "c%d", i);
    snprintf(nm, sizeof nm, "add%d", i);
    pbw node = {0}, init = {0};
    pbw_str(&node, 1, "X");
    pbw_str(&node, 1, c);
    pbw_str(&node, 2, a);
    pbw_str(&node, 3, nm);
    pbw_str(&node, 4, "Add");
    pbw_sub(&g, 1, &node);
    float v = (float)i;
    pbw_int(&init, 2, FBX_HOST_F32); // a scalar: no dims
    pbw_str(&init, 8, c);
    pbw_bytes(&init, 9, &v, sizeof v);
    pbw_sub(&g, 5, &init);
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
  value_info(&g, 11, "X", width);
  value_info(&g, 12, "Y", (int64_t)n * width);

  pbw m = {0}, opset = {0};
  pbw_int(&m, 1, 8); // ir_version
  pbw_str(&opset, 1, "");
  pbw_int(&opset, 2, 17);
  pbw_sub(&m, 8, &opset);
  pbw_sub(&m, 7, &g);
  char *err = NULL;
  if (m.oom) {
    err = fbx_host_errf("fanin_model: out of memory");
  } else {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(m.p, 1, m.n, f) != m.n) err = fbx_host_errf("fanin_model: cannot write %s", path);
    if (f && fclose(f) != 0 && !err) err = fbx_host_errf("fanin_model: cannot write %s", path);
  }
  free(m.p);
  return err;
}
