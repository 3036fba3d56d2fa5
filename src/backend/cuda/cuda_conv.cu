// Convolution helpers (im2col, a direct kernel for small reductions, bias)
// and pooling, float32, 2-D (1-D runs as H = 1). The GEMMs of a convolution
// go through cuBLASLt (cuda_matmul.c).
#include <math.h>

#include "cuda_launch.cuh"
#include "../../ir/ir_ops.h"

namespace {

using fbx::grid_for;

// col[(c * KH + kh) * KW + kw][oh * OW + ow] for one image, all groups
__global__ void im2col_kernel(const float *x, float *col, const fbx_cuda_conv_geom g) {
  fbx::pdl_enter();
  long long S = g.OH * g.OW, n = g.C * g.KH * g.KW * S;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    long long s = i % S, r = i / S;
    long long kw = r % g.KW, kh = (r / g.KW) % g.KH, c = r / (g.KW * g.KH);
    long long oh = s / g.OW, ow = s % g.OW;
    long long ih = oh * g.sh - g.ph + kh * g.dh, iw = ow * g.sw - g.pw + kw * g.dw;
    col[i] = (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) ? x[(c * g.H + ih) * g.W + iw] : 0.f;
  }
}

__global__ void conv_direct_kernel(const float *x, const float *w, const float *bias, float *y,
                                   const fbx_cuda_conv_geom g) {
  fbx::pdl_enter();
  long long n_out = g.N * g.M * g.OH * g.OW;
  long long Cg = g.C / g.group, Mg = g.M / g.group;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n_out;
       i += (long long)gridDim.x * blockDim.x) {
    long long ow = i % g.OW, oh = (i / g.OW) % g.OH, m = (i / (g.OW * g.OH)) % g.M, n = i / (g.OW * g.OH * g.M);
    long long grp = m / Mg;
    float acc = bias ? bias[m] : 0.f;
    const float *wm = w + m * Cg * g.KH * g.KW;
    for (long long cc = 0; cc < Cg; cc++) {
      const float *xc = x + ((n * g.C) + grp * Cg + cc) * g.H * g.W;
      for (long long kh = 0; kh < g.KH; kh++) {
        long long ih = oh * g.sh - g.ph + kh * g.dh;
        if (ih < 0 || ih >= g.H) continue;
        for (long long kw = 0; kw < g.KW; kw++) {
          long long iw = ow * g.sw - g.pw + kw * g.dw;
          if (iw < 0 || iw >= g.W) continue;
          acc += xc[ih * g.W + iw] * wm[(cc * g.KH + kh) * g.KW + kw];
        }
      }
    }
    y[i] = acc;
  }
}

__global__ void bias_kernel(float *y, const float *b, long long M, long long S, long long n) {
  fbx::pdl_enter();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] += b[(i / S) % M];
}

__global__ void col2im_kernel(const float *col, const float *bias, float *y, const fbx_cuda_conv_geom g) {
  fbx::pdl_enter();
  long long OS = g.OH * g.OW, HW = g.H * g.W, n = g.M * OS;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    long long ow = i % g.OW, oh = (i / g.OW) % g.OH, m = i / OS;
    float acc = bias ? bias[m] : 0.f;
    for (long long kh = 0; kh < g.KH; kh++) {
      long long th = oh + g.ph - kh * g.dh;
      if (th < 0 || th % g.sh) continue;
      long long ih = th / g.sh;
      if (ih >= g.H) continue;
      for (long long kw = 0; kw < g.KW; kw++) {
        long long tw = ow + g.pw - kw * g.dw;
        if (tw < 0 || tw % g.sw) continue;
        long long iw = tw / g.sw;
        if (iw >= g.W) continue;
        acc += col[((m * g.KH + kh) * g.KW + kw) * HW + ih * g.W + iw];
      }
    }
    y[i] = acc;
  }
}

__global__ void pool_kernel(const float *x, float *y, const fbx_cuda_pool_args a) {
  fbx::pdl_enter();
  const fbx_cuda_conv_geom &g = a.g;
  long long n_out = g.N * g.C * g.OH * g.OW;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n_out;
       i += (long long)gridDim.x * blockDim.x) {
    long long ow = i % g.OW, oh = (i / g.OW) % g.OH, p = i / (g.OW * g.OH);
    const float *xp = x + p * g.H * g.W;
    long long h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    long long h1 = h0 + (g.KH - 1) * g.dh + 1, w1 = w0 + (g.KW - 1) * g.dw + 1;
    long long he = h1 < g.H + a.pe_h ? h1 : g.H + a.pe_h, we = w1 < g.W + a.pe_w ? w1 : g.W + a.pe_w;
    long long pad_count = (he - h0) * (we - w0);
    double acc = a.op == FBX_IR_OP_MAXPOOL ? -INFINITY : 0.0;
    long long cnt = 0;
    bool any = false;
    for (long long ih = h0; ih < h1; ih += g.dh) {
      if (ih < 0 || ih >= g.H) continue;
      for (long long iw = w0; iw < w1; iw += g.dw) {
        if (iw < 0 || iw >= g.W) continue;
        float v = xp[ih * g.W + iw];
        if (a.op == FBX_IR_OP_MAXPOOL) {
          if (v > acc || !any) acc = v;
          any = true;
        } else if (a.op == FBX_IR_OP_LPPOOL) {
          acc += pow(fabs((double)v), (double)a.p);
        } else {
          acc += v;
        }
        cnt++;
      }
    }
    if (a.op == FBX_IR_OP_AVGPOOL) acc = acc / (double)(a.count_include_pad ? pad_count : (cnt ? cnt : 1));
    else if (a.op == FBX_IR_OP_LPPOOL) acc = pow(acc, 1.0 / (double)a.p);
    y[i] = (float)acc;
  }
}

__global__ void global_pool_kernel(const float *x, float *y, long long S, int is_max) {
  fbx::pdl_enter();
  __shared__ double sh[256];
  const float *xr = x + blockIdx.x * S;
  double acc = is_max ? -INFINITY : 0.0;
  for (long long i = threadIdx.x; i < S; i += blockDim.x) acc = is_max ? fmax(acc, (double)xr[i]) : acc + xr[i];
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] = is_max ? fmax(sh[threadIdx.x], sh[threadIdx.x + s]) : sh[threadIdx.x] + sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = (float)(is_max ? sh[0] : (S ? sh[0] / (double)S : 0.0));
}

}  // namespace

extern "C" int fbx_cuda_launch_im2col(const float *x_n, float *col, const fbx_cuda_conv_geom *g, cudaStream_t s) {
  long long n = g->C * g->KH * g->KW * g->OH * g->OW;
  if (n <= 0) return 0;
  fbx::launch(im2col_kernel, grid_for(n), 256, 0, s, x_n, col, *g);
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_conv_direct(const float *x, const float *w, const float *bias, float *y,
                                           const fbx_cuda_conv_geom *g, cudaStream_t s) {
  long long n = g->N * g->M * g->OH * g->OW;
  if (n <= 0) return 0;
  fbx::launch(conv_direct_kernel, grid_for(n), 256, 0, s, x, w, bias, y, *g);
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_bias_add(float *y, const float *bias, int64_t N, int64_t M, int64_t S, cudaStream_t s) {
  long long n = N * M * S;
  if (n <= 0) return 0;
  fbx::launch(bias_kernel, grid_for(n), 256, 0, s, y, bias, M, S, n);
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_col2im(const float *col, const float *bias, float *y_n, const fbx_cuda_conv_geom *g,
                                      cudaStream_t s) {
  long long n = g->M * g->OH * g->OW;
  if (n <= 0) return 0;
  fbx::launch(col2im_kernel, grid_for(n), 256, 0, s, col, bias, y_n, *g);
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_pool(const float *x, float *y, const fbx_cuda_pool_args *a, cudaStream_t s) {
  long long n = a->g.N * a->g.C * a->g.OH * a->g.OW;
  if (n <= 0) return 0;
  fbx::launch(pool_kernel, grid_for(n), 256, 0, s, x, y, *a);
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_global_pool(const float *x, float *y, int64_t rows, int64_t S, int is_max,
                                           cudaStream_t s) {
  if (rows <= 0) return 0;
  fbx::launch(global_pool_kernel, (unsigned)rows, 256, 0, s, x, y, S, is_max);
  return (int)cudaGetLastError();
}
