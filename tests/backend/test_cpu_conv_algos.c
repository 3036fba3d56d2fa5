/* CPU CONV, every algorithm (depthwise, 2D direct with K chunks, tiled
 * 1x1 / im2col, 1D and 3D) against a naive reference written here (double
 * accumulation): kernels 1x1/3x3/5x5/7x7, strides 1-3, asymmetric pads,
 * dilations, groups, depthwise, channel counts that are not multiples of the
 * 6/12-row or 16/32-column blocks, K above one 144-tap chunk (several chunks,
 * a partial last one), with and without bias, 1 and 2 threads.
 * Runs once with the CPU's best ISA, then re-executes itself with
 * FUSEBOX_AVX512=0 so the AVX2 kernels are checked on every machine. */
#include <unistd.h>

#include "cpu_test_util.h"

typedef struct cv {
  int nd;               /* spatial dims */
  int64_t N, C, M, G;
  int64_t in[3], k[3], s[3], d[3], pb[3], pe[3];
  int bias;
} cv;

static int64_t out_dim(const cv *c, int i) {
  return (c->in[i] + c->pb[i] + c->pe[i] - c->d[i] * (c->k[i] - 1) - 1) / c->s[i] + 1;
}

static void run_case(const cv *c, const char *what) {
  int64_t xd[5] = {c->N, c->C}, wd[5] = {c->M, c->C / c->G}, yd[5] = {c->N, c->M};
  int64_t IS = 1, OS = 1, KV = 1, os[3];
  for (int i = 0; i < c->nd; i++) {
    os[i] = out_dim(c, i);
    xd[2 + i] = c->in[i];
    wd[2 + i] = c->k[i];
    yd[2 + i] = os[i];
    IS *= c->in[i];
    OS *= os[i];
    KV *= c->k[i];
  }
  fbx_tensor in[3] = {tmake(FBX_DTYPE_F32, 2 + c->nd, xd), tmake(FBX_DTYPE_F32, 2 + c->nd, wd),
                      c->bias ? T(FBX_DTYPE_F32, c->M) : tabsent()};
  fbx_tensor y = tmake(FBX_DTYPE_F32, 2 + c->nd, yd);
  frand(&in[0]);
  frand(&in[1]);
  if (c->bias) frand(&in[2]);
  fbx_ir_params p = {.conv = {.nd = c->nd, .group = c->G}};
  for (int i = 0; i < c->nd; i++) {
    p.conv.kernel[i] = c->k[i];
    p.conv.strides[i] = c->s[i];
    p.conv.dilations[i] = c->d[i];
    p.conv.pads[i] = c->pb[i];
    p.conv.pads[c->nd + i] = c->pe[i];
  }
  run_ok(what, FBX_IR_OP_CONV, &p, in, 3, &y, 1);
  /* reference over 3 normalised dims (leading ones of size 1) */
  int64_t I3[3] = {1, 1, 1}, O3[3] = {1, 1, 1}, K3[3] = {1, 1, 1}, S3[3] = {1, 1, 1}, D3[3] = {1, 1, 1}, P3[3] = {0};
  for (int i = 0; i < c->nd; i++) {
    int j = 3 - c->nd + i;
    I3[j] = c->in[i], O3[j] = os[i], K3[j] = c->k[i], S3[j] = c->s[i], D3[j] = c->d[i], P3[j] = c->pb[i];
  }
  int64_t Cg = c->C / c->G, Mg = c->M / c->G, ny = c->N * c->M * OS;
  double *ref = malloc((size_t)ny * sizeof(double));
  const float *x = F(&in[0]), *w = F(&in[1]);
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t m = 0; m < c->M; m++) {
      int64_t g = m / Mg;
      for (int64_t od = 0; od < O3[0]; od++)
        for (int64_t oh = 0; oh < O3[1]; oh++)
          for (int64_t ow = 0; ow < O3[2]; ow++) {
            double acc = c->bias ? F(&in[2])[m] : 0.0;
            for (int64_t cc = 0; cc < Cg; cc++)
              for (int64_t kd = 0; kd < K3[0]; kd++)
                for (int64_t kh = 0; kh < K3[1]; kh++)
                  for (int64_t kw = 0; kw < K3[2]; kw++) {
                    int64_t id = od * S3[0] - P3[0] + kd * D3[0], ih = oh * S3[1] - P3[1] + kh * D3[1],
                            iw = ow * S3[2] - P3[2] + kw * D3[2];
                    if (id < 0 || id >= I3[0] || ih < 0 || ih >= I3[1] || iw < 0 || iw >= I3[2]) continue;
                    acc += (double)x[(((n * c->C + g * Cg + cc) * I3[0] + id) * I3[1] + ih) * I3[2] + iw] *
                           w[(((m * Cg + cc) * K3[0] + kd) * K3[1] + kh) * K3[2] + kw];
                  }
            ref[((n * c->M + m) * O3[0] + od) * O3[1] * O3[2] + oh * O3[2] + ow] = acc;
          }
    }
  /* fp32 sums of up to a few thousand products of [-1, 1) values */
  fclose_arr(F(&y), ref, ny, 2e-5 * (1 + (double)(Cg * KV) / 256), what);
  (void)IS;
  free(ref);
  tfree(&in[0]);
  tfree(&in[1]);
  if (c->bias) tfree(&in[2]);
  tfree(&y);
}

#define C2(N_, C_, M_, G_, H_, W_, K_, S_, D_, PB_, PE_, B_)                                                 \
  (cv) {                                                                                                   \
    .nd = 2, .N = N_, .C = C_, .M = M_, .G = G_, .in = {H_, W_}, .k = {K_, K_}, .s = {S_, S_}, .d = {D_, D_}, \
    .pb = {PB_, PB_}, .pe = {PE_, PE_}, .bias = B_                                                          \
  }

static void suite(void) {
  char what[200];
  const cv cases[] = {
      /* direct 2D: K = 40*9 = 360 (3 chunks, the last partial), M tails 5/13/31 */
      C2(1, 40, 24, 1, 23, 37, 3, 1, 1, 1, 1, 1),
      C2(1, 40, 13, 1, 17, 19, 3, 2, 1, 1, 1, 0),
      C2(2, 17, 31, 1, 12, 21, 5, 1, 1, 2, 2, 1),
      C2(1, 96, 24, 1, 20, 20, 3, 1, 1, 1, 1, 1),   /* the PP-OCR det neck shape, smaller plane */
      C2(1, 16, 5, 1, 15, 16, 7, 2, 1, 3, 3, 1),    /* 7x7 stride 2 (ResNet stem shape) */
      C2(1, 3, 16, 1, 33, 31, 3, 2, 1, 1, 1, 1),    /* 3-channel stem */
      C2(1, 20, 12, 1, 14, 14, 3, 1, 2, 2, 2, 1),   /* dilation 2 */
      C2(1, 18, 10, 1, 13, 11, 3, 3, 1, 1, 0, 1),   /* stride 3, asymmetric pads */
      C2(1, 24, 36, 2, 11, 13, 3, 1, 1, 1, 1, 1),   /* groups 2 */
      C2(1, 30, 15, 3, 9, 10, 5, 2, 1, 2, 1, 0),    /* groups 3, 5x5 stride 2 */
      C2(1, 64, 40, 1, 9, 9, 1, 2, 1, 0, 0, 1),     /* strided 1x1 (direct) */
      /* planes over 2 MiB: the direct path repacks per tile ("local" mode) */
      C2(1, 24, 8, 1, 160, 160, 3, 1, 1, 1, 1, 1),
      C2(1, 32, 6, 1, 321, 321, 3, 2, 1, 1, 1, 1),  /* stride 2: four phase planes, odd sizes */
      C2(1, 20, 5, 1, 170, 150, 3, 1, 2, 2, 2, 0),  /* dilation 2 */
      /* tiled: pointwise 1x1, channel counts off the blocks */
      C2(1, 37, 29, 1, 19, 23, 1, 1, 1, 0, 0, 1),
      C2(2, 200, 50, 1, 7, 9, 1, 1, 1, 0, 0, 1),
      C2(1, 16, 32, 1, 48, 48, 1, 1, 1, 0, 0, 1),
      /* pointwise read in place (AVX-512): several tiles of a deep input with a
       * masked last panel; one tile split by output channels at 2 threads */
      C2(1, 300, 20, 1, 40, 39, 1, 1, 1, 0, 0, 1),
      C2(1, 96, 60, 1, 7, 9, 1, 1, 1, 0, 0, 0),
      C2(1, 8, 10, 1, 70, 71, 1, 1, 1, 0, 0, 1),    /* over 4096 positions: packed panels again */
      /* depthwise (fast 2D, and the generic loop for dilation / stride 3) */
      C2(1, 19, 19, 19, 21, 35, 3, 1, 1, 1, 1, 1),
      C2(1, 16, 16, 16, 30, 33, 5, 2, 1, 2, 2, 1),
      C2(1, 8, 8, 8, 17, 17, 7, 1, 1, 3, 3, 0),
      C2(1, 12, 12, 12, 15, 15, 3, 1, 2, 2, 2, 1),
      C2(1, 6, 6, 6, 16, 16, 3, 3, 1, 1, 1, 1),
      C2(1, 5, 5, 5, 9, 140, 3, 1, 1, 1, 1, 1),     /* wide rows: 32-lane blocks where AVX-512 is on, tail 12 */
      C2(2, 3, 3, 3, 11, 270, 5, 2, 1, 2, 2, 1),    /* wide, stride 2, tail */
      C2(1, 4, 4, 4, 7, 64, 3, 1, 1, 1, 1, 0),      /* exactly two 32-lane blocks */
      /* 3x3 / 5x5 column stride 1 (the 4-row x 32-column kernel where AVX-512 is on):
       * row blocks 4 / 2 / 1, column blocks 32 + a 16-or-less tail, stride (2, 1) */
      C2(1, 7, 7, 7, 12, 80, 5, 1, 1, 2, 2, 1),     /* PP-OCR rec: OH 12 = 3 x 4, OW 80 = 32 + 32 + 16 */
      C2(1, 5, 5, 5, 3, 40, 5, 1, 1, 2, 2, 1),      /* OH 3: one 3-row block, OW 40 = 32 + 8 */
      C2(1, 3, 3, 3, 9, 17, 3, 1, 1, 1, 0, 1),      /* OW 16: one 16-lane vector; asymmetric pads */
      C2(1, 2, 2, 2, 5, 33, 3, 1, 1, 0, 1, 0),      /* OW 32 + 1 */
      C2(1, 3, 3, 3, 6, 20, 5, 1, 1, 2, 2, 1),      /* OH 6 = 3 + 3 */
      C2(1, 3, 3, 3, 5, 20, 5, 1, 1, 2, 2, 0),      /* OH 5 = 3 + 2 */
      C2(1, 3, 3, 3, 9, 20, 3, 1, 1, 1, 1, 1),      /* OH 9 = 4 + 3 + 2 */
      C2(1, 2, 2, 2, 1, 20, 3, 1, 1, 1, 1, 1),      /* OH 1 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const cv *c = &cases[i];
    snprintf(what, sizeof what, "CONV 2D N%lld C%lld M%lld G%lld %lldx%lld k%lld s%lld d%lld pad %lld/%lld bias %d",
             (long long)c->N, (long long)c->C, (long long)c->M, (long long)c->G, (long long)c->in[0],
             (long long)c->in[1], (long long)c->k[0], (long long)c->s[0], (long long)c->d[0], (long long)c->pb[0],
             (long long)c->pe[0], c->bias);
    run_case(c, what);
  }
  /* stride (2, 1): PP-OCR rec's 5x5 downsampling of H only; 3x3 likewise */
  const cv s21[] = {
      {.nd = 2, .N = 1, .C = 6, .M = 6, .G = 6, .in = {12, 80}, .k = {5, 5}, .s = {2, 1}, .d = {1, 1},
       .pb = {2, 2}, .pe = {2, 2}, .bias = 1},
      {.nd = 2, .N = 2, .C = 3, .M = 3, .G = 3, .in = {13, 45}, .k = {3, 3}, .s = {2, 1}, .d = {1, 1},
       .pb = {1, 1}, .pe = {1, 1}, .bias = 1},
      {.nd = 2, .N = 1, .C = 4, .M = 4, .G = 4, .in = {11, 23}, .k = {5, 5}, .s = {2, 1}, .d = {1, 1},
       .pb = {1, 2}, .pe = {2, 1}, .bias = 0},
  };
  for (size_t i = 0; i < sizeof s21 / sizeof s21[0]; i++) {
    snprintf(what, sizeof what, "CONV 2D depthwise C%lld %lldx%lld k%lld stride (2, 1)", (long long)s21[i].C,
             (long long)s21[i].in[0], (long long)s21[i].in[1], (long long)s21[i].k[0]);
    run_case(&s21[i], what);
  }
  cv c1 = {.nd = 1, .N = 1, .C = 33, .M = 14, .G = 1, .in = {50}, .k = {5}, .s = {2}, .d = {1}, .pb = {2}, .pe = {1}, .bias = 1};
  run_case(&c1, "CONV 1D k5 s2 C33 M14");
  cv c3 = {.nd = 3, .N = 1, .C = 5, .M = 7, .G = 1, .in = {6, 7, 8}, .k = {3, 3, 3}, .s = {1, 2, 1}, .d = {1, 1, 1},
           .pb = {1, 1, 0}, .pe = {1, 0, 1}, .bias = 1};
  run_case(&c3, "CONV 3D k3 C5 M7");
}

int main(int argc, char **argv) {
  (void)argc;
  const char *isa = getenv("FUSEBOX_AVX512");
  int portable = isa && isa[0] == '0';
  for (int threads = 1; threads <= 2; threads++) {
    test_setup(threads);
    suite();
    fbx_backend_destroy(g_be);
    g_be = NULL;
  }
  printf("cpu conv algos (%s): %d passed, %d failed\n", portable ? "AVX2" : "best ISA", g_pass, g_fail);
  if (g_fail) return 1;
  if (portable) return 0;
  fflush(stdout);
  setenv("FUSEBOX_AVX512", "0", 1);
  execv("/proc/self/exe", argv);
  perror("execv (the AVX2 pass)");
  return 1;
}
