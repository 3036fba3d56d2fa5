/* CONV with output channels in the vector lanes (cpu_conv_oc512.c: W packed
 * in 32-channel blocks at the first run, 14-position x 32-channel AVX-512
 * tiles) against a naive double convolution written here: the ResNet-18 3x3
 * shapes (stride 1 and 2) at reduced sizes, channel counts that are not
 * multiples of the 32-channel block nor of the 16-channel K chunk (C 3, 5, 17,
 * 33, 40; M 17, 29, 35, 60, 62, 125; M 5 and 24, where more than 1/8 of the
 * last block would be dropped, take another path: same reference), rows that are not multiples of the 14-position tile (7, 9, 15,
 * 29), asymmetric pads, dilation 2, the 7x7 stride-2 stem, a 1x1 stride-2
 * projection (read in place: no padding), 5x3 taps, no-padding 3x3s, tall maps in many row groups, bias / no bias,
 * batch 2-3, 1, 2, 5 and 16 threads; each
 * case run twice (the second reuses the pack). The AVX-512 pass must take the
 * path; it runs under each FUSEBOX_CONV_OC_LOCAL mode (default 1, 2 and 3: task-local
 * padded rows, 0: the first version), re-executing itself, and
 * then once more with FUSEBOX_AVX512=0 (the path
 * is off, whatever else runs must give the same numbers). The fused epilogues
 * on this path (bias + residual Add + HardSwish through a compiled graph) are
 * in test_cpu_conv_epilogue.c. */
#include <unistd.h>

#include "cpu_test_util.h"

typedef struct occase {
  int64_t N, C, M, H, W, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr;
  int bias;
} occase;

static void run_case(const occase *c, int avx512) {
  const int64_t OH = (c->H + c->pt + c->pb - c->dh * (c->KH - 1) - 1) / c->sh + 1;
  const int64_t OW = (c->W + c->pl + c->pr - c->dw * (c->KW - 1) - 1) / c->sw + 1;
  char name[160];
  snprintf(name, sizeof name, "N%lld C%lld->M%lld %lldx%lld k%lldx%lld s(%lld,%lld) d(%lld,%lld) pads(%lld,%lld,%lld,%lld)%s",
           (long long)c->N, (long long)c->C, (long long)c->M, (long long)c->H, (long long)c->W, (long long)c->KH,
           (long long)c->KW, (long long)c->sh, (long long)c->sw, (long long)c->dh, (long long)c->dw, (long long)c->pt,
           (long long)c->pl, (long long)c->pb, (long long)c->pr, c->bias ? " bias" : "");
  int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->M, c->C, c->KH, c->KW}, yd[4] = {c->N, c->M, OH, OW};
  fbx_tensor in[3] = {tmake(FBX_DTYPE_F32, 4, xd), tmake(FBX_DTYPE_F32, 4, wd), tabsent()};
  frand(&in[0]), frand(&in[1]);
  if (c->bias) in[2] = T(FBX_DTYPE_F32, c->M), frand(&in[2]);
  fbx_tensor y = tmake(FBX_DTYPE_F32, 4, yd);
  const int64_t OS = OH * OW, n_out = c->N * c->M * OS;
  double *ref = calloc((size_t)n_out, sizeof(double));
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t m = 0; m < c->M; m++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double acc = c->bias ? F(&in[2])[m] : 0;
          for (int64_t ci = 0; ci < c->C; ci++)
            for (int64_t kh = 0; kh < c->KH; kh++)
              for (int64_t kw = 0; kw < c->KW; kw++) {
                const int64_t ih = oh * c->sh - c->pt + kh * c->dh, iw = ow * c->sw - c->pl + kw * c->dw;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                acc += (double)F(&in[0])[((n * c->C + ci) * c->H + ih) * c->W + iw] *
                       (double)F(&in[1])[((m * c->C + ci) * c->KH + kh) * c->KW + kw];
              }
          ref[((n * c->M + m) * OH + oh) * OW + ow] = acc;
        }
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.conv.nd = 2, p.conv.group = 1, p.conv.auto_pad = FBX_IR_PAD_NOTSET;
  p.conv.kernel[0] = c->KH, p.conv.kernel[1] = c->KW, p.conv.strides[0] = c->sh, p.conv.strides[1] = c->sw;
  p.conv.dilations[0] = c->dh, p.conv.dilations[1] = c->dw;
  p.conv.pads[0] = c->pt, p.conv.pads[1] = c->pl, p.conv.pads[2] = c->pb, p.conv.pads[3] = c->pr;
  fbx_ir_node nd = {.op = FBX_IR_OP_CONV, .n_inputs = 3, .n_outputs = 1, .params = p};
  const fbx_tensor *cins[3] = {NULL, &in[1], NULL};
  void *state = NULL;
  fbx_status *st = g_be->vt->node_prepare(g_be, &nd, cins, in, &state);
  check(st == NULL && state != NULL, "%s: node_prepare: %s", name, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  /* float sums of C*KH*KW products against the double reference: the error grows as sqrt(K) */
  const double tol = fmax(2e-5, 2e-6 * sqrt((double)(c->C * c->KH * c->KW)));
  for (int run = 0; run < 2; run++) {
    memset(y.data, 0xff, fbx_tensor_nbytes(&y)); /* NaN: every output must be written */
    fbx_kernel_info info = {0};
    st = g_be->vt->run_node(g_be, &nd, state, in, 3, &y, 1, &info);
    check(st == NULL, "%s: run %d: %s", name, run, st ? fbx_status_message(st) : "");
    fbx_status_free(st);
    const bool oc = info.variant && strcmp(info.variant, "conv_oc_avx512") == 0;
    /* the path's rule (fbx_cpu_conv_oc_ok): not 1x1 stride 1, at most 1/8 of the last 32-channel block
       dropped unless C * taps < 32 */
    const int64_t padded = (c->M + 31) / 32 * 32, KV = c->KH * c->KW;
    const bool want = avx512 && !(KV == 1 && c->sh == 1 && c->sw == 1) &&
                      ((padded - c->M) * 8 <= padded || c->C * KV < 32);
    check(want ? oc : !oc, "%s: variant %s (%s pass)", name, info.variant ? info.variant : "?",
          avx512 ? "AVX-512" : "AVX2");
    char what[200];
    snprintf(what, sizeof what, "%s run %d (%s)", name, run, info.variant ? info.variant : "?");
    fclose_arr(F(&y), ref, n_out, tol, what);
  }
  if (state) g_be->vt->node_release(g_be, &nd, state);
  free(ref);
  for (int i = 0; i < 3; i++) tfree(&in[i]);
  tfree(&y);
}

int main(int argc, char **argv) {
  (void)argc;
  const char *isa = getenv("FUSEBOX_AVX512");
  const int portable = isa && isa[0] == '0';
  __builtin_cpu_init();
  const int avx512 = !portable && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  static const occase cases[] = {
      /* N, C, M, H, W, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, bias */
      /* ResNet-18 3x3 shapes, channels cut down: 56x56 -> 15x15, 28 -> 29 (tiles 14 + 14 + 1), 7x7 */
      {1, 64, 64, 15, 15, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      {2, 64, 128, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},
      {1, 40, 60, 29, 29, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},
      {1, 512, 64, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      {3, 33, 62, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      /* odd channel counts (a partial K chunk, a partial 32-channel block), asymmetric and zero pads */
      {1, 17, 29, 11, 13, 3, 3, 1, 1, 1, 1, 0, 1, 1, 0, 1},
      {1, 17, 5, 11, 13, 3, 3, 1, 1, 1, 1, 0, 1, 1, 0, 1},
      {2, 5, 125, 12, 19, 3, 3, 2, 2, 1, 1, 1, 0, 0, 1, 0},
      {1, 3, 17, 10, 10, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1},
      /* dilation 2; stride (2, 1) and (1, 2); 5x3 taps */
      {1, 20, 60, 14, 14, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1},
      {1, 18, 32, 13, 15, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1},
      {2, 18, 32, 13, 15, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 0},
      {1, 9, 24, 12, 17, 5, 3, 1, 1, 1, 1, 2, 1, 2, 1, 1},
      /* the stem (7x7 stride 2, pad 3, C 3) and a 1x1 stride-2 projection */
      {1, 3, 64, 37, 33, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 1},
      {2, 64, 96, 14, 14, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0},
      {1, 20, 40, 15, 16, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1},
      /* no padding (X read in place), and padding at the end only (copied) */
      {2, 19, 35, 12, 17, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1},
      {1, 19, 35, 13, 12, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 0},
      {1, 19, 35, 12, 12, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 1},
      /* tall maps in many row groups (task-local padded rows: first / last groups meet the pads) */
      {1, 24, 64, 57, 41, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      {2, 16, 33, 45, 30, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
      {1, 3, 40, 61, 45, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 1},
      {1, 7, 32, 40, 9, 3, 3, 1, 1, 2, 2, 2, 2, 0, 2, 1},
  };
  static const int threads[] = {1, 2, 5, 16};
  for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
    test_setup(threads[t]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], avx512);
    fbx_backend_destroy(g_be);
    g_be = NULL;
  }
  const char *lm = getenv("FUSEBOX_CONV_OC_LOCAL");
  printf("cpu conv oc (%s, FUSEBOX_CONV_OC_LOCAL=%s%s): %d passed, %d failed\n", avx512 ? "AVX-512" : "AVX2",
         lm ? lm : "unset", getenv("FUSEBOX_CONV_OC_ROWS") ? ", ROWS=sim, XPF=all" : "", g_pass, g_fail);
  if (g_fail) return 1;
  if (!avx512) return 0;
  fflush(stdout);
  /* the X handling / task split modes of cpu_conv_oc512.c: default (1: per-image copy, new row
     groups), then 2 (task-local padded rows where they fit), 3 (always), 0 (the first version) */
  if (!lm || lm[0] != '0') {
    setenv("FUSEBOX_CONV_OC_LOCAL", !lm ? "2" : lm[0] == '2' ? "3" : "0", 1);
    /* from the second pass on also the simulated row groups and the X prefetch on every conv */
    setenv("FUSEBOX_CONV_OC_ROWS", "sim", 1);
    setenv("FUSEBOX_CONV_OC_XPF", "all", 1);
    execv("/proc/self/exe", argv);
    perror("execv (the next FUSEBOX_CONV_OC_LOCAL pass)");
    return 1;
  }
  setenv("FUSEBOX_AVX512", "0", 1);
  execv("/proc/self/exe", argv);
  perror("execv (the AVX2 pass)");
  return 1;
}
