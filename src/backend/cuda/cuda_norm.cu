// Softmax, LayerNorm/InstanceNorm and reductions, float32. A row (or one
// output of a reduction) is one block of 256 threads with a shared-memory
// tree; accumulation in double, as the CPU reference does for its sums.
#include <float.h>
#include <math.h>

#include "cuda_launch.cuh"
#include "../../ir/ir_ops.h"

namespace {

constexpr int kThreads = 256;

using fbx::grid_for;
inline unsigned rows_grid(long long rows) { return (unsigned)(rows > 2147483647LL ? 2147483647LL : rows); }

// sum of v over the block (all threads get it)
__device__ double block_sum(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

__device__ float block_max(float v, float *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  float r = sh[0];
  __syncthreads();
  return r;
}

// softmax over contiguous rows (inner == 1): one block per row
__global__ void softmax_rows(const float *x, float *y, long long n, int mode) {
  fbx::pdl_enter();
  __shared__ double shd[kThreads];
  __shared__ float shf[kThreads];
  const float *xr = x + blockIdx.x * n;
  float *yr = y + blockIdx.x * n;
  if (mode == 2) {  // hardmax: 1 at the first maximum
    float m = -INFINITY;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = block_max(m, shf);
    long long first = n;
    for (long long i = threadIdx.x; i < n; i += blockDim.x)
      if (xr[i] == m && i < first) first = i;
    shd[threadIdx.x] = (double)first;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) shd[threadIdx.x] = fmin(shd[threadIdx.x], shd[threadIdx.x + s]);
      __syncthreads();
    }
    long long f = (long long)shd[0];
    for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = i == f ? 1.f : 0.f;
    return;
  }
  float m = -INFINITY;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, xr[i]);
  m = block_max(m, shf);
  double s = 0;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) s += (double)expf(xr[i] - m);
  s = block_sum(s, shd);
  if (mode == 1) {
    float ls = (float)log(s);
    for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] - m - ls;
  } else {
    float inv = (float)(1.0 / s);
    for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
  }
}

// softmax over a strided axis: one thread per (outer, inner) column
__global__ void softmax_cols(const float *x, float *y, long long outer, long long n, long long inner, int mode) {
  fbx::pdl_enter();
  long long cols = outer * inner;
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < cols;
       t += (long long)gridDim.x * blockDim.x) {
    long long o = t / inner, c = t % inner;
    const float *xc = x + o * n * inner + c;
    float *yc = y + o * n * inner + c;
    float m = -INFINITY;
    long long am = 0;
    for (long long i = 0; i < n; i++)
      if (xc[i * inner] > m) { m = xc[i * inner]; am = i; }
    if (mode == 2) {
      for (long long i = 0; i < n; i++) yc[i * inner] = i == am ? 1.f : 0.f;
      continue;
    }
    double s = 0;
    for (long long i = 0; i < n; i++) s += (double)expf(xc[i * inner] - m);
    if (mode == 1) {
      float ls = (float)log(s);
      for (long long i = 0; i < n; i++) yc[i * inner] = xc[i * inner] - m - ls;
    } else {
      float inv = (float)(1.0 / s);
      for (long long i = 0; i < n; i++) yc[i * inner] = expf(xc[i * inner] - m) * inv;
    }
  }
}

// one block per row; scale/bias indexed by column % n, or by row % C (chan > 0, InstanceNorm)
__global__ void norm_rows(const float *x, const float *scale, long long scale_n, const float *bias, long long bias_n,
                          float *y, long long cols, float eps, long long chan) {
  fbx::pdl_enter();
  __shared__ double sh[kThreads];
  const float *xr = x + blockIdx.x * cols;
  float *yr = y + blockIdx.x * cols;
  double s = 0;
  for (long long i = threadIdx.x; i < cols; i += blockDim.x) s += xr[i];
  double mean = cols ? block_sum(s, sh) / (double)cols : 0;
  double q = 0;
  for (long long i = threadIdx.x; i < cols; i += blockDim.x) q += (xr[i] - mean) * (xr[i] - mean);
  q = block_sum(q, sh);
  float inv = (float)(1.0 / sqrt((cols ? q / (double)cols : 0) + eps));
  float fm = (float)mean;
  long long ch = chan > 0 ? (long long)blockIdx.x % chan : 0;
  for (long long i = threadIdx.x; i < cols; i += blockDim.x) {
    float sc = chan > 0 ? scale[ch] : scale[i % scale_n];
    float bi = chan > 0 ? bias[ch] : (bias ? bias[i % bias_n] : 0.f);
    yr[i] = (xr[i] - fm) * inv * sc + bi;
  }
}

__device__ __forceinline__ long long red_offset(const fbx_cuda_reduce_args &a, long long r) {
  long long off = 0;
  for (int d = a.n_red_dims - 1; d >= 0; d--) {
    off += (r % a.red_dims[d]) * a.red_strides[d];
    r /= a.red_dims[d];
  }
  return off;
}

// one block per output element
__global__ void reduce_kernel(const fbx_cuda_reduce_args a) {
  fbx::pdl_enter();
  __shared__ double sh[kThreads];
  __shared__ long long shi[kThreads];
  long long o = blockIdx.x, rem = o, base = 0;
  for (int d = a.n_out_dims - 1; d >= 0; d--) {
    base += (rem % a.out_dims[d]) * a.out_strides[d];
    rem /= a.out_dims[d];
  }
  const float *x = a.x + base;
  int op = a.op;
  if (op == FBX_IR_OP_ARGMAX || op == FBX_IR_OP_ARGMIN) {
    bool mx = op == FBX_IR_OP_ARGMAX;
    double best = mx ? -INFINITY : INFINITY;
    long long bi = -1;
    for (long long r = threadIdx.x; r < a.n_red; r += blockDim.x) {
      double v = x[red_offset(a, r)];
      bool better = bi < 0 || (mx ? v > best : v < best) || (a.select_last && v == best);
      if (better) { best = v; bi = r; }
    }
    sh[threadIdx.x] = best;
    shi[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        double v = sh[threadIdx.x + s];
        long long j = shi[threadIdx.x + s], i = shi[threadIdx.x];
        if (j >= 0) {
          double b = sh[threadIdx.x];
          bool take = i < 0 || (mx ? v > b : v < b) || (v == b && (a.select_last ? j > i : j < i));
          if (take) { sh[threadIdx.x] = v; shi[threadIdx.x] = j; }
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) ((long long *)a.y)[o] = shi[0] < 0 ? 0 : shi[0];
    return;
  }
  double m = 0;
  if (op == FBX_IR_OP_REDUCE_LOG_SUM_EXP || op == FBX_IR_OP_REDUCE_MAX || op == FBX_IR_OP_REDUCE_MIN) {
    bool mn = op == FBX_IR_OP_REDUCE_MIN;
    double v = mn ? INFINITY : -INFINITY;
    for (long long r = threadIdx.x; r < a.n_red; r += blockDim.x) {
      double e = x[red_offset(a, r)];
      if (e != e) v = e;  // NaN propagates
      else if (v == v) v = mn ? fmin(v, e) : fmax(v, e);
    }
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        double p = sh[threadIdx.x], q = sh[threadIdx.x + s];
        sh[threadIdx.x] = (p != p || q != q) ? NAN : mn ? fmin(p, q) : fmax(p, q);
      }
      __syncthreads();
    }
    m = sh[0];
    __syncthreads();
    if (op != FBX_IR_OP_REDUCE_LOG_SUM_EXP) {
      if (threadIdx.x == 0) ((float *)a.y)[o] = (float)m;
      return;
    }
    if (isinf(m)) m = 0;
  }
  double acc = op == FBX_IR_OP_REDUCE_PROD ? 1.0 : 0.0;
  for (long long r = threadIdx.x; r < a.n_red; r += blockDim.x) {
    double e = x[red_offset(a, r)];
    switch (op) {
      case FBX_IR_OP_REDUCE_PROD: acc *= e; break;
      case FBX_IR_OP_REDUCE_L1: acc += fabs(e); break;
      case FBX_IR_OP_REDUCE_L2: case FBX_IR_OP_REDUCE_SUM_SQUARE: acc += e * e; break;
      case FBX_IR_OP_REDUCE_LOG_SUM_EXP: acc += exp(e - m); break;
      default: acc += e; break;
    }
  }
  if (op == FBX_IR_OP_REDUCE_PROD) {
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) sh[threadIdx.x] *= sh[threadIdx.x + s];
      __syncthreads();
    }
    acc = sh[0];
  } else {
    acc = block_sum(acc, sh);
  }
  if (threadIdx.x) return;
  switch (op) {
    case FBX_IR_OP_REDUCE_MEAN: acc = a.n_red ? acc / (double)a.n_red : NAN; break;
    case FBX_IR_OP_REDUCE_L2: acc = sqrt(acc); break;
    case FBX_IR_OP_REDUCE_LOG_SUM: acc = log(acc); break;
    case FBX_IR_OP_REDUCE_LOG_SUM_EXP: acc = m + log(acc); break;
    default: break;
  }
  ((float *)a.y)[o] = (float)acc;
}

// REDUCE_SUM of int32 / int64 (an attention mask's row sum: GenAI's seqlens_k): one block per
// output element, summed in 64-bit two's complement, so an overflow wraps as the CPU kernel's
// integer arithmetic does (int32: the low 32 bits of the sum)
__global__ void reduce_sum_int_kernel(const fbx_cuda_reduce_args a) {
  fbx::pdl_enter();
  __shared__ unsigned long long sh[kThreads];
  long long o = blockIdx.x, rem = o, base = 0;
  for (int d = a.n_out_dims - 1; d >= 0; d--) {
    base += (rem % a.out_dims[d]) * a.out_strides[d];
    rem /= a.out_dims[d];
  }
  unsigned long long acc = 0;
  for (long long r = threadIdx.x; r < a.n_red; r += blockDim.x) {
    const long long i = base + red_offset(a, r);
    acc += a.int_bytes == 8 ? (unsigned long long)((const long long *)a.x)[i]
                            : (unsigned long long)(long long)((const int *)a.x)[i];
  }
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x) return;
  if (a.int_bytes == 8) ((long long *)a.y)[o] = (long long)sh[0];
  else ((int *)a.y)[o] = (int)(unsigned)sh[0];
}

}  // namespace

extern "C" int fbx_cuda_launch_softmax(const float *x, float *y, int64_t outer, int64_t n, int64_t inner, int mode,
                                       cudaStream_t s) {
  if (outer * n * inner <= 0) return 0;
  if (inner == 1) fbx::launch(softmax_rows, rows_grid(outer), kThreads, 0, s, x, y, n, mode);
  else fbx::launch(softmax_cols, grid_for(outer * inner), kThreads, 0, s, x, y, outer, n, inner, mode);
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_layernorm(const float *x, const float *scale, int64_t scale_n, const float *bias,
                                         int64_t bias_n, float *y, int64_t rows, int64_t cols, float eps,
                                         cudaStream_t s) {
  if (rows <= 0) return 0;
  fbx::launch(norm_rows, rows_grid(rows), kThreads, 0, s, x, scale, scale_n, bias, bias_n, y, cols, eps, 0);
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_instnorm(const float *x, const float *scale, const float *bias, float *y, int64_t N,
                                        int64_t C, int64_t S, float eps, cudaStream_t s) {
  if (N * C <= 0) return 0;
  fbx::launch(norm_rows, rows_grid(N * C), kThreads, 0, s, x, scale, 1, bias, 1, y, S, eps, C);
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_reduce(const fbx_cuda_reduce_args *a, cudaStream_t s) {
  if (a->n_out <= 0) return 0;
  if (a->int_bytes) fbx::launch(reduce_sum_int_kernel, rows_grid(a->n_out), kThreads, 0, s, *a);
  else fbx::launch(reduce_kernel, rows_grid(a->n_out), kThreads, 0, s, *a);
  return (int)cudaGetLastError();
}
