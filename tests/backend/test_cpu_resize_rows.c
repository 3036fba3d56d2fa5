/* CPU RESIZE over the last two dims (the row fast path) and over other dims
 * (the generic path), nearest (every rounding mode) and linear, every
 * non-crop coordinate transform, F32 and int32 (nearest), against a naive
 * reference written from the ONNX spec here (double arithmetic). Shapes
 * include the PP-OCR FPN upsamplings (x2, x4, x8) and odd ratios. */
#include "cpu_test_util.h"

typedef struct rs_case {
  fbx_ir_resize_mode mode;
  fbx_ir_resize_coord coord;
  fbx_ir_resize_nearest nearest;
} rs_case;

/* ONNX Resize: input coordinate of output index o along one axis */
static double ref_coord(fbx_ir_resize_coord cm, double o, int64_t in, int64_t out) {
  double s = (double)out / (double)in;
  switch (cm) {
    case FBX_IR_COORD_ASYMMETRIC: return o / s;
    case FBX_IR_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? (o + 0.5) / s - 0.5 : 0.0;
    case FBX_IR_COORD_ALIGN_CORNERS: return out == 1 ? 0.0 : o * (double)(in - 1) / (double)(out - 1);
    case FBX_IR_COORD_TF_HALF_PIXEL_FOR_NN: return (o + 0.5) / s;
    default: return (o + 0.5) / s - 0.5; /* half_pixel */
  }
}

static int64_t ref_near(fbx_ir_resize_nearest nm, double v, int64_t in) {
  int64_t k;
  switch (nm) {
    case FBX_IR_NEAREST_FLOOR: k = (int64_t)floor(v); break;
    case FBX_IR_NEAREST_CEIL: k = (int64_t)ceil(v); break;
    case FBX_IR_NEAREST_ROUND_PREFER_CEIL: k = (int64_t)floor(v + 0.5); break;
    default: k = (int64_t)ceil(v - 0.5); break; /* round_prefer_floor */
  }
  return k < 0 ? 0 : k >= in ? in - 1 : k;
}

/* linear taps of one axis: lo, hi, weight of hi */
static void ref_lin(double v, int64_t in, int64_t *lo, int64_t *hi, double *w) {
  if (v < 0) v = 0;
  if (v > (double)(in - 1)) v = (double)(in - 1);
  *lo = (int64_t)floor(v);
  *hi = *lo + 1 < in ? *lo + 1 : in - 1;
  *w = v - (double)*lo;
}

/* x (A, B, IH, IW) -> (A', B', OH, OW); resizes every axis whose size changes */
static void check_case(const rs_case *rc, const int64_t *id, const int64_t *od, bool as_int, const char *what) {
  fbx_tensor x = tmake(as_int ? FBX_DTYPE_I32 : FBX_DTYPE_F32, 4, id);
  fbx_tensor y = tmake(as_int ? FBX_DTYPE_I32 : FBX_DTYPE_F32, 4, od);
  int64_t nx = fbx_tensor_numel(&x), ny = fbx_tensor_numel(&y);
  for (int64_t i = 0; i < nx; i++) {
    if (as_int) ((int32_t *)x.data)[i] = (int32_t)(i * 7919 % 100003);
    else F(&x)[i] = (float)rnd();
  }
  fbx_tensor rin[4] = {x, tabsent(), tabsent(), tabsent()};
  fbx_ir_params p = {.resize = {.mode = rc->mode, .coord = rc->coord, .nearest = rc->nearest}};
  run_ok(what, FBX_IR_OP_RESIZE, &p, rin, 4, &y, 1);
  double *ref = malloc((size_t)ny * sizeof(double));
  int64_t xs[4] = {id[1] * id[2] * id[3], id[2] * id[3], id[3], 1};
  for (int64_t o = 0; o < ny; o++) {
    int64_t oi[4] = {o / (od[1] * od[2] * od[3]), o / (od[2] * od[3]) % od[1], o / od[3] % od[2], o % od[3]};
    if (rc->mode == FBX_IR_RESIZE_NEAREST) {
      int64_t off = 0; /* the transform applies to every axis, unchanged ones too */
      for (int d = 0; d < 4; d++)
        off += ref_near(rc->nearest, ref_coord(rc->coord, (double)oi[d], id[d], od[d]), id[d]) * xs[d];
      ref[o] = as_int ? (double)((int32_t *)x.data)[off] : F(&x)[off];
      continue;
    }
    double acc = 0;
    for (int m = 0; m < 16; m++) {
      double w = 1;
      int64_t off = 0;
      for (int d = 0; d < 4; d++) {
        bool hi = (m >> d) & 1;
        if (id[d] == od[d]) {
          if (hi) { w = 0; break; }
          off += oi[d] * xs[d];
          continue;
        }
        int64_t lo_, hi_;
        double wh;
        ref_lin(ref_coord(rc->coord, (double)oi[d], id[d], od[d]), id[d], &lo_, &hi_, &wh);
        w *= hi ? wh : 1 - wh;
        off += (hi ? hi_ : lo_) * xs[d];
      }
      if (w != 0) acc += w * F(&x)[off];
    }
    ref[o] = acc;
  }
  if (as_int) {
    int ok = 1;
    for (int64_t o = 0; o < ny; o++) ok &= ((int32_t *)y.data)[o] == (int32_t)ref[o];
    check(ok, "%s", what);
  } else {
    fclose_arr(F(&y), ref, ny, rc->mode == FBX_IR_RESIZE_NEAREST ? 0 : 1e-5, what);
  }
  free(ref);
  tfree(&x);
  tfree(&y);
}

int main(void) {
  test_setup(2);
  const int64_t shapes[][2][4] = {
      {{1, 24, 20, 20}, {1, 24, 160, 160}}, /* x8 (FPN) */
      {{1, 96, 20, 20}, {1, 96, 40, 40}},   /* x2 */
      {{1, 24, 40, 40}, {1, 24, 160, 160}}, /* x4 */
      {{2, 3, 7, 8}, {2, 3, 10, 13}},       /* odd ratios, batch 2 */
      {{1, 2, 9, 6}, {1, 2, 4, 5}},         /* downsampling */
      {{1, 3, 5, 1}, {1, 3, 11, 3}},        /* width 1 */
      {{1, 4, 6, 6}, {1, 4, 6, 12}},        /* only W changes */
      {{1, 4, 3, 5}, {1, 8, 3, 5}},         /* a channel resize: the generic path */
      {{1, 4, 3, 5}, {2, 4, 6, 10}},        /* batch + spatial: the generic path */
  };
  const fbx_ir_resize_coord coords[] = {FBX_IR_COORD_HALF_PIXEL, FBX_IR_COORD_ASYMMETRIC,
                                        FBX_IR_COORD_PYTORCH_HALF_PIXEL, FBX_IR_COORD_ALIGN_CORNERS,
                                        FBX_IR_COORD_TF_HALF_PIXEL_FOR_NN};
  const fbx_ir_resize_nearest nears[] = {FBX_IR_NEAREST_ROUND_PREFER_FLOOR, FBX_IR_NEAREST_ROUND_PREFER_CEIL,
                                         FBX_IR_NEAREST_FLOOR, FBX_IR_NEAREST_CEIL};
  char what[160];
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t ci = 0; ci < sizeof coords / sizeof coords[0]; ci++) {
      for (size_t ni = 0; ni < sizeof nears / sizeof nears[0]; ni++) {
        rs_case rc = {FBX_IR_RESIZE_NEAREST, coords[ci], nears[ni]};
        snprintf(what, sizeof what, "RESIZE nearest shape %zu coord %zu rounding %zu f32", si, ci, ni);
        check_case(&rc, shapes[si][0], shapes[si][1], false, what);
        snprintf(what, sizeof what, "RESIZE nearest shape %zu coord %zu rounding %zu int32", si, ci, ni);
        check_case(&rc, shapes[si][0], shapes[si][1], true, what);
      }
      if (coords[ci] == FBX_IR_COORD_TF_HALF_PIXEL_FOR_NN) continue; /* nearest-only transform */
      rs_case rc = {FBX_IR_RESIZE_LINEAR, coords[ci], FBX_IR_NEAREST_ROUND_PREFER_FLOOR};
      snprintf(what, sizeof what, "RESIZE linear shape %zu coord %zu", si, ci);
      check_case(&rc, shapes[si][0], shapes[si][1], false, what);
    }
  return test_finish("cpu resize rows");
}
