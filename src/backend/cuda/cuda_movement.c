/* Data movement on CUDA: reshapes are device copies, Transpose/Slice/Expand/
 * Tile one strided-copy kernel with strides worked out here, Concat/Split
 * 2-D memcpys, Gather a kernel, Shape/ConstantOfShape/Range small fills.
 * Shape-data inputs (Slice starts/ends/axes/steps, Range start/delta) are
 * read back to the host: a stream synchronisation each (step 1; plan-time
 * shapes remove it). */
#include <string.h>

#include "../../base/alloc.h"
#include "cuda_internal.h"

bool fbx_cuda_s_movement(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size) {
  if (n_in < 1) return true;
  size_t e = fbx_dtype_size(in[0].dtype);
  if (node->op != FBX_IR_OP_RANGE && node->op != FBX_IR_OP_SHAPE && node->op != FBX_IR_OP_CONSTANT_OF_SHAPE &&
      e != 1 && e != 2 && e != 4 && e != 8) {
    snprintf(why, why_size, "%s of dtype %s", fbx_ir_op_name(node->op), fbx_dtype_name(in[0].dtype));
    return false;
  }
  if (node->op == FBX_IR_OP_GATHER && n_in > 1 && in[1].dtype != FBX_DTYPE_I64 && in[1].dtype != FBX_DTYPE_I32) {
    snprintf(why, why_size, "GATHER indices of dtype %s (int32/int64)", fbx_dtype_name(in[1].dtype));
    return false;
  }
  if (node->op == FBX_IR_OP_RANGE && in[0].dtype != FBX_DTYPE_F32 && in[0].dtype != FBX_DTYPE_I64 &&
      in[0].dtype != FBX_DTYPE_I32) {
    snprintf(why, why_size, "RANGE of dtype %s (float32/int32/int64)", fbx_dtype_name(in[0].dtype));
    return false;
  }
  return true;
}

static fbx_status *fbx__mv_d2d(fbx_cuda_ctx *c, void *dst, const void *src, size_t bytes) {
  if (!bytes || dst == src) return NULL;
  return fbx_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream), "device copy");
}

/* RESHAPE / SQUEEZE / UNSQUEEZE / FLATTEN / IDENTITY-like: same bytes, new shape */
fbx_status *fbx_cuda_k_copy(FBX_CUDA_KERNEL_ARGS) {
  info->variant = "copy_d2d";
  info->reason = "same bytes, new shape";
  return fbx__mv_d2d(c, out[0].data, in[0].data, fbx_tensor_nbytes(&out[0]));
}

static fbx_status *fbx__mv_launch(fbx_cuda_ctx *c, fbx_cuda_copy_args *a, const fbx_tensor *x, const fbx_tensor *y,
                                  const char *op) {
  a->n = fbx_tensor_numel(y);
  a->rank = y->rank;
  a->esize = (int)fbx_dtype_size(x->dtype);
  a->x = x->data;
  a->y = y->data;
  for (int d = 0; d < y->rank; d++) a->out_dims[d] = y->dims[d];
  return fbx_cuda_launched(fbx_cuda_launch_copy(a, c->stream), op);
}

fbx_status *fbx_cuda_k_transpose(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_cuda_copy_args a;
  memset(&a, 0, sizeof a);
  int64_t st[FBX_MAX_RANK];
  fbx_cuda_strides(x, st);
  for (int d = 0; d < x->rank; d++) {
    int p = node->params.transpose.perm[d];
    if (p < 0 || p >= x->rank) return FBX_ERR_ARG("device 'cuda': TRANSPOSE: bad perm");
    a.strides[d] = st[p];
  }
  info->variant = "strided_copy";
  return fbx__mv_launch(c, &a, x, &out[0], "TRANSPOSE");
}

fbx_status *fbx_cuda_k_slice(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  int64_t n = fbx_tensor_numel(&in[1]);
  if (n > FBX_MAX_RANK || fbx_tensor_numel(&in[2]) != n) return FBX_ERR_ARG("device 'cuda': SLICE: starts/ends");
  int64_t starts[FBX_MAX_RANK], ends[FBX_MAX_RANK], axes[FBX_MAX_RANK], steps[FBX_MAX_RANK];
  /* host copies, converted to int64 (starts/ends may be int32) */
  unsigned char buf[4][FBX_MAX_RANK * 8];
  int64_t *dst[4] = {starts, ends, axes, steps};
  for (int k = 0; k < 4; k++) {
    int i = k + 1;
    bool have = fbx_cuda_present(in, n_in, i) && fbx_tensor_numel(&in[i]) > 0;
    if (have) FBX_TRY(fbx_cuda_read_small(c, &in[i], buf[k], sizeof buf[k]));
    for (int64_t j = 0; j < n; j++)
      dst[k][j] = have ? fbx_cuda_host_i64(in[i].dtype, buf[k], j) : (k == 2 ? j : 1);
  }
  fbx_cuda_copy_args a;
  memset(&a, 0, sizeof a);
  int64_t st[FBX_MAX_RANK];
  fbx_cuda_strides(x, st);
  for (int d = 0; d < x->rank; d++) a.strides[d] = st[d];
  for (int64_t j = 0; j < n; j++) {
    int64_t ax = axes[j] < 0 ? axes[j] + x->rank : axes[j];
    if (ax < 0 || ax >= x->rank || steps[j] == 0) return FBX_ERR_ARG("device 'cuda': SLICE: bad axis/step");
    int64_t s0 = 0;
    fbx_ir_slice_resolve(x->dims[ax], starts[j], ends[j], steps[j], &s0);
    a.base += s0 * st[ax];
    a.strides[ax] = st[ax] * steps[j];
  }
  info->variant = "strided_copy";
  return fbx__mv_launch(c, &a, x, &out[0], "SLICE");
}

/* x broadcast (right-aligned) to y */
fbx_status *fbx_cuda_k_expand(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0], *y = &out[0];
  if (x->rank > y->rank) return FBX_ERR_ARG("device 'cuda': EXPAND: rank");
  fbx_cuda_copy_args a;
  memset(&a, 0, sizeof a);
  int64_t st[FBX_MAX_RANK];
  fbx_cuda_strides(x, st);
  for (int d = 0; d < y->rank; d++) {
    int j = d - (y->rank - x->rank);
    a.strides[d] = (j < 0 || x->dims[j] == 1) ? 0 : st[j];
  }
  info->variant = "strided_copy";
  return fbx__mv_launch(c, &a, x, y, "EXPAND");
}

fbx_status *fbx_cuda_k_tile(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_cuda_copy_args a;
  memset(&a, 0, sizeof a);
  int64_t st[FBX_MAX_RANK];
  fbx_cuda_strides(x, st);
  for (int d = 0; d < x->rank; d++) {
    a.strides[d] = st[d];
    a.mod_dims[d] = x->dims[d] ? x->dims[d] : 1;
  }
  info->variant = "strided_copy";
  return fbx__mv_launch(c, &a, x, &out[0], "TILE");
}

/* Concat (to_out = true) and Split: rows = outer, each part a 2-D block of
 * width dims[axis] * inner elements inside the whole's rows. */
static fbx_status *fbx__mv_parts(fbx_cuda_ctx *c, const fbx_tensor *whole, const fbx_tensor *parts, int n_parts,
                                 int axis, bool to_whole) {
  if (axis < 0 || axis >= whole->rank) return FBX_ERR_ARG("device 'cuda': concat/split axis %d", axis);
  size_t e = fbx_dtype_size(whole->dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= whole->dims[d];
  for (int d = axis + 1; d < whole->rank; d++) inner *= whole->dims[d];
  size_t pitch = (size_t)(whole->dims[axis] * inner) * e;
  size_t off = 0;
  for (int i = 0; i < n_parts; i++) {
    if (parts[i].rank < 0) continue;
    size_t width = (size_t)(parts[i].dims[axis] * inner) * e;
    if (width && outer) {
      unsigned char *w = (unsigned char *)whole->data + off;
      cudaError_t er = to_whole
          ? cudaMemcpy2DAsync(w, pitch, parts[i].data, width, width, (size_t)outer, cudaMemcpyDeviceToDevice, c->stream)
          : cudaMemcpy2DAsync(parts[i].data, width, w, pitch, width, (size_t)outer, cudaMemcpyDeviceToDevice, c->stream);
      FBX_TRY(fbx_cuda_check(er, to_whole ? "CONCAT copy" : "SPLIT copy"));
    }
    off += width;
  }
  return NULL;
}

/* One kernel for the whole concat (a 2-D copy per part costs a launch each;
 * decode concatenates its KV cache and its rotary halves every layer). */
fbx_status *fbx_cuda_k_concat(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *y = &out[0];
  int axis = node->params.axis.axis;
  if (n_in <= FBX_CUDA_CONCAT_MAX && axis >= 0 && axis < y->rank) {
    fbx_cuda_concat_args a;
    memset(&a, 0, sizeof a);
    int64_t inner = 1;
    for (int d = axis + 1; d < y->rank; d++) inner *= y->dims[d];
    a.n = fbx_tensor_numel(y);
    a.pitch = y->dims[axis] * inner;
    a.esize = (int)fbx_dtype_size(y->dtype);
    a.y = y->data;
    for (int i = 0; i < n_in; i++) {
      if (in[i].rank < 0) continue;
      a.src[a.n_parts] = in[i].data;
      a.off[a.n_parts + 1] = a.off[a.n_parts] + in[i].dims[axis] * inner;
      a.n_parts++;
    }
    if (a.n_parts > 0 && a.off[a.n_parts] == a.pitch) {
      info->variant = "concat_kernel";
      info->reason = "all parts in one launch";
      return fbx_cuda_launched(fbx_cuda_launch_concat(&a, c->stream), "CONCAT");
    }
  }
  info->variant = "memcpy2d";
  return fbx__mv_parts(c, &out[0], in, n_in, node->params.axis.axis, true);
}

fbx_status *fbx_cuda_k_split(FBX_CUDA_KERNEL_ARGS) {
  info->variant = "memcpy2d";
  return fbx__mv_parts(c, &in[0], out, n_out, node->params.axis.axis, false);
}

fbx_status *fbx_cuda_k_gather(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0], *ix = &in[1];
  int axis = node->params.axis.axis;
  if (axis < 0 || axis >= x->rank) return FBX_ERR_ARG("device 'cuda': GATHER: axis %d", axis);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
  info->variant = "gather";
  int err = fbx_cuda_launch_gather(x->data, ix->data, ix->dtype == FBX_DTYPE_I64, out[0].data,
                                   (int)fbx_dtype_size(x->dtype), outer, x->dims[axis], inner,
                                   fbx_tensor_numel(ix), c->err_flag, c->stream);
  return fbx_cuda_launched(err, "GATHER");
}

/* Small host-computed outputs: upload through pageable staging (safe to reuse the source at once). */
static fbx_status *fbx__mv_upload(fbx_cuda_ctx *c, void *dst, const void *src, size_t bytes) {
  if (!bytes) return NULL;
  return fbx_cuda_upload_h2d(c, dst, src, bytes, "upload");
}

fbx_status *fbx_cuda_k_shape(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (out[0].dtype != FBX_DTYPE_I64) return FBX_ERR_NOTIMPL("device 'cuda': SHAPE: output dtype %s", fbx_dtype_name(out[0].dtype));
  int64_t r = x->rank, s = node->params.shape.start;
  if (s < 0) s += r;
  if (s < 0) s = 0;
  if (s > r) s = r;
  int64_t n = fbx_tensor_numel(&out[0]), v[FBX_MAX_RANK];
  if (s + n > r) return FBX_ERR_ARG("device 'cuda': SHAPE: output length %lld too long", (long long)n);
  for (int64_t i = 0; i < n; i++) v[i] = x->dims[s + i];
  info->variant = "host_upload";
  return fbx__mv_upload(c, out[0].data, v, (size_t)n * sizeof(int64_t));
}

fbx_status *fbx_cuda_k_constant_of_shape(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *y = &out[0];
  double v = node->params.fill.value;
  uint64_t bits = 0;
  switch (y->dtype) {
    case FBX_DTYPE_F32: { float f = (float)v; memcpy(&bits, &f, 4); break; }
    case FBX_DTYPE_F64: memcpy(&bits, &v, 8); break;
    case FBX_DTYPE_F16: bits = fbx_f32_to_f16((float)v); break;
    case FBX_DTYPE_BOOL: bits = v != 0; break;
    default: { int64_t i = (int64_t)v; memcpy(&bits, &i, 8); break; } /* ints: low bytes, little-endian */
  }
  info->variant = "fill";
  return fbx_cuda_launched(fbx_cuda_launch_fill(y->data, (int)fbx_dtype_size(y->dtype), bits, fbx_tensor_numel(y), c->stream),
                           "CONSTANT_OF_SHAPE");
}

fbx_status *fbx_cuda_k_range(FBX_CUDA_KERNEL_ARGS) {
  if (n_in < 3) return FBX_ERR_ARG("device 'cuda': RANGE: needs start, limit, delta");
  unsigned char s[8] = {0}, d[8] = {0};
  FBX_TRY(fbx_cuda_read_small(c, &in[0], s, sizeof s));
  FBX_TRY(fbx_cuda_read_small(c, &in[2], d, sizeof d));
  int ek;
  if (!fbx_cuda_ek(out[0].dtype, &ek) || (ek != FBX_CUDA_EK_F32 && ek != FBX_CUDA_EK_I64 && ek != FBX_CUDA_EK_I32))
    return FBX_ERR_NOTIMPL("device 'cuda': RANGE: dtype %s", fbx_dtype_name(out[0].dtype));
  info->variant = "range";
  int err = fbx_cuda_launch_range(out[0].data, ek, fbx_cuda_host_f64(in[0].dtype, s, 0), fbx_cuda_host_f64(in[2].dtype, d, 0),
                                  fbx_cuda_host_i64(in[0].dtype, s, 0), fbx_cuda_host_i64(in[2].dtype, d, 0),
                                  fbx_tensor_numel(&out[0]), c->stream);
  return fbx_cuda_launched(err, "RANGE");
}
