/* CONV with at most 16 output positions per image (cpu_conv.c, fbx__scv_*):
 * the transposed-columns dot-product path (no state) and the packed-W path
 * (node_prepare with constant W and static shapes, group 1), against a naive
 * double reference over 1-D, 2-D and 3-D convs with groups, strides,
 * dilations, asymmetric pads, bias / no bias and batch 2. */
#include "cpu_test_util.h"

#include "ir/ir_graph.h"

typedef struct ccase {
  int nd;
  int64_t N, C, M, G;
  int64_t in[3], k[3], s[3], d[3], pb[3], pe[3];
  int bias;
} ccase;

static void run_case(const char *name, const ccase *c) {
  int64_t out[3] = {1, 1, 1}, OS = 1, IS = 1, KV = 1;
  for (int i = 0; i < c->nd; i++) {
    out[i] = (c->in[i] + c->pb[i] + c->pe[i] - c->d[i] * (c->k[i] - 1) - 1) / c->s[i] + 1;
    OS *= out[i], IS *= c->in[i], KV *= c->k[i];
  }
  int64_t xd[5] = {c->N, c->C}, wd[5] = {c->M, c->C / c->G}, yd[5] = {c->N, c->M};
  for (int i = 0; i < c->nd; i++) xd[2 + i] = c->in[i], wd[2 + i] = c->k[i], yd[2 + i] = out[i];
  fbx_tensor in[3] = {tmake(FBX_DTYPE_F32, 2 + c->nd, xd), tmake(FBX_DTYPE_F32, 2 + c->nd, wd), tabsent()};
  frand(&in[0]), frand(&in[1]);
  if (c->bias) in[2] = T(FBX_DTYPE_F32, c->M), frand(&in[2]);
  fbx_tensor y = tmake(FBX_DTYPE_F32, 2 + c->nd, yd);
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.conv.nd = c->nd, p.conv.group = c->G, p.conv.auto_pad = FBX_IR_PAD_NOTSET;
  for (int i = 0; i < c->nd; i++) {
    p.conv.kernel[i] = c->k[i], p.conv.strides[i] = c->s[i], p.conv.dilations[i] = c->d[i];
    p.conv.pads[i] = c->pb[i], p.conv.pads[c->nd + i] = c->pe[i];
  }
  /* reference (spatial dims padded to 3 with size 1) */
  int64_t ri[3] = {1, 1, 1}, rk[3] = {1, 1, 1}, rs[3] = {1, 1, 1}, rdl[3] = {1, 1, 1}, rp[3] = {0, 0, 0}, ro[3] = {1, 1, 1};
  for (int i = 0; i < c->nd; i++) {
    int j = 3 - c->nd + i;
    ri[j] = c->in[i], rk[j] = c->k[i], rs[j] = c->s[i], rdl[j] = c->d[i], rp[j] = c->pb[i], ro[j] = out[i];
  }
  const int64_t Cg = c->C / c->G, Mg = c->M / c->G;
  double *ref = calloc((size_t)(c->N * c->M * OS), sizeof(double));
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t m = 0; m < c->M; m++)
      for (int64_t o0 = 0; o0 < ro[0]; o0++)
        for (int64_t o1 = 0; o1 < ro[1]; o1++)
          for (int64_t o2 = 0; o2 < ro[2]; o2++) {
            double acc = c->bias ? F(&in[2])[m] : 0;
            int64_t g = m / Mg;
            for (int64_t cc = 0; cc < Cg; cc++)
              for (int64_t a = 0; a < rk[0]; a++)
                for (int64_t b = 0; b < rk[1]; b++)
                  for (int64_t e = 0; e < rk[2]; e++) {
                    int64_t i0 = o0 * rs[0] - rp[0] + a * rdl[0], i1 = o1 * rs[1] - rp[1] + b * rdl[1];
                    int64_t i2 = o2 * rs[2] - rp[2] + e * rdl[2];
                    if (i0 < 0 || i0 >= ri[0] || i1 < 0 || i1 >= ri[1] || i2 < 0 || i2 >= ri[2]) continue;
                    double xv = F(&in[0])[(((n * c->C + g * Cg + cc) * ri[0] + i0) * ri[1] + i1) * ri[2] + i2];
                    double wv = F(&in[1])[(((m * Cg + cc) * rk[0] + a) * rk[1] + b) * rk[2] + e];
                    acc += xv * wv;
                  }
            ref[((n * c->M + m) * ro[0] + o0) * ro[1] * ro[2] + o1 * ro[2] + o2] = acc;
          }
  /* float sums of K = C/G * taps products against the double reference: the error grows as sqrt(K) */
  const double tol = fmax(2e-5, 2e-6 * sqrt((double)(c->C / c->G * KV)));
  for (int pass = 0; pass < 2; pass++) {
    void *state = NULL;
    fbx_ir_node nd = {.op = FBX_IR_OP_CONV, .n_inputs = 3, .n_outputs = 1, .params = p};
    if (pass == 1) {
      const fbx_tensor *cins[3] = {NULL, &in[1], NULL};
      fbx_status *st = g_be->vt->node_prepare(g_be, &nd, cins, in, &state);
      check(st == NULL && (state != NULL) == (c->G == 1), "%s: node_prepare (state %p, group %lld): %s", name, state,
            (long long)c->G, st ? fbx_status_message(st) : "");
      /* shape-only X, as a plan with a dynamic input dim passes it: the pack is made at the first run */
      in[0].dims[c->nd + 1] = -1;
      fbx_status_free(st);
      if (state) g_be->vt->node_release(g_be, &nd, state);
      state = NULL;
      st = g_be->vt->node_prepare(g_be, &nd, cins, in, &state);
      in[0].dims[c->nd + 1] = xd[c->nd + 1];
      fbx_status_free(st);
    }
    memset(y.data, 0xff, fbx_tensor_nbytes(&y)); /* NaN: must be overwritten */
    fbx_kernel_info info;
    fbx_status *st = g_be->vt->run_node(g_be, &nd, state, in, 3, &y, 1, &info);
    check(st == NULL, "%s: run: %s", name, st ? fbx_status_message(st) : "");
    fbx_status_free(st);
    const bool cols = strcmp(info.variant, "conv_cols_packed_gemm") == 0; /* the prepacked-B GEMM form */
    /* without the state (pass 0) a map of more than 16 positions takes another algorithm: any one */
    check(strncmp(info.variant, "conv_small_out", 14) == 0 || (pass == 1 && cols) || (pass == 0 && OS > 16),
          "%s: variant %s", name, info.variant);
    char what[128];
    snprintf(what, sizeof what, "%s (%s)", name, info.variant);
    fclose_arr(F(&y), ref, c->N * c->M * OS, tol, what);
    check(pass == 0 || c->G != 1 || cols || strcmp(info.variant, "conv_small_out_packed") == 0,
          "%s: packed path not taken (%s)", name, info.variant);
    if (pass == 1 && state) { /* second run: the pack is reused */
      memset(y.data, 0xff, fbx_tensor_nbytes(&y));
      st = g_be->vt->run_node(g_be, &nd, state, in, 3, &y, 1, &info);
      check(st == NULL, "%s: second run: %s", name, st ? fbx_status_message(st) : "");
      fbx_status_free(st);
      fclose_arr(F(&y), ref, c->N * c->M * OS, tol, what);
    }
    if (state) g_be->vt->node_release(g_be, &nd, state);
  }
  free(ref);
  for (int i = 0; i < 3; i++) tfree(&in[i]);
  tfree(&y);
  (void)IS;
}

int main(void) {
  /* the maps above 16 positions with a packed W would take the AVX-512 output-channel kernel (its own
     test, test_cpu_conv_oc.c): off here, so the im2col + prepacked-B GEMM path (what AVX2 CPUs run) stays
     checked on every machine */
  setenv("FUSEBOX_CONV_OC", "0", 1);
  test_setup(2);
  const ccase cases[] = {
      /* the VAD's STFT and encoder shapes */
      {1, 1, 1, 258, 1, {768}, {256}, {128}, {1}, {0}, {0}, 0},
      {1, 1, 129, 128, 1, {5}, {3}, {1}, {1}, {1}, {1}, 1},
      {1, 1, 128, 64, 1, {5}, {3}, {2}, {1}, {1}, {1}, 1},
      /* batch 2, groups, dilation, asymmetric pads, odd channel counts (tails of 8 and of 4) */
      {1, 2, 12, 9, 3, {11}, {3}, {2}, {2}, {2}, {0}, 1},
      {1, 2, 7, 13, 1, {16}, {1}, {1}, {1}, {0}, {0}, 0},
      {2, 1, 5, 6, 1, {4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 0}, {0, 1}, 1},
      {2, 2, 8, 4, 2, {7, 6}, {3, 2}, {2, 3}, {1, 2}, {1, 1}, {1, 0}, 1},
      {3, 1, 3, 5, 1, {3, 4, 5}, {2, 2, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {1, 0, 0}, 1},
      /* small maps of a ResNet's deep stages (more than 16 positions, > 32 MFLOP a thread: with the packed
         W, im2col rows and the prepacked-B GEMM): 14x14, stride 2 with asymmetric pads (7x7 out, batch
         2), dilation 2, stride 3 along W (batch 3) */
      {2, 1, 256, 128, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},
      {2, 2, 512, 96, 1, {14, 14}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 1}, 1},
      {2, 1, 256, 128, 1, {12, 12}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 1},
      {2, 3, 192, 128, 1, {9, 20}, {3, 3}, {1, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
  };
  char name[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(name, sizeof name, "conv case %zu (%dd)", i, cases[i].nd);
    run_case(name, &cases[i]);
  }
  return test_finish("test_cpu_conv_small");
}
