/* GQA (GroupQueryAttention) and ROTARY (RotaryEmbedding) on CUDA, float32
 * (kernels in cuda_attention.cu). Same semantics as cpu_attention.c: ORT's
 * seqlens_k / total_sequence_length, causal, rotary on q and the new k
 * (half-split or interleaved pairs), present K/V in BNSH with capacity L =
 * present's dim 2, past and present possibly the same buffers (GenAI's
 * past_present_share_buffer: only the new rows are written).
 *
 * The lengths are read by the kernels from device memory; a seqlens_k that
 * does not fit the sequence, the caches or the cos/sin table is reported by
 * synchronize (the CPU kernel reports it at once). Shapes: q (B, S, nh*H) or
 * packed (B, S, (nh + 2 kvh) * H); k, v (B, S, kvh*H); past/present
 * (B, kvh, len, H); out (B, S, nh*H). */
#include <math.h>

#include "cuda_internal.h"

#define FBX__GQA_BLOCKS 264                  /* blocks to aim for on a decode step (2 per SM on an H200) */
#define FBX__GQA_SPLIT_MIN 32                /* keys per split: the smallest (shared memory) */
#define FBX__GQA_SPLIT_STEP 64               /* and the step it is chosen in (thread per key: 128 a block) */
#define FBX__GQA_SPLIT_MAX 512

static bool fbx__cuda_f32(const fbx_tensor *t) { return t->rank < 0 || t->dtype == FBX_DTYPE_F32; }

bool fbx_cuda_s_gqa(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size) {
  const int nh = node->params.gqa.num_heads, kvh = node->params.gqa.kv_num_heads;
  if (n_in < 7 || nh < 1 || kvh < 1 || nh % kvh || in[0].rank != 3) {
    snprintf(why, why_size, "GQA needs query (B, S, D), seqlens_k, total_sequence_length and num_heads a multiple "
                            "of kv_num_heads");
    return false;
  }
  for (int i = 0; i < n_in && i < 9; i++) {
    bool ok = i == 5 || i == 6 ? in[i].rank >= 0 && in[i].dtype == FBX_DTYPE_I32 : fbx__cuda_f32(&in[i]);
    if (!ok) {
      snprintf(why, why_size, "GQA with input %d of dtype %s (float32, int32 seqlens_k / total_sequence_length)", i,
               fbx_dtype_name(in[i].dtype));
      return false;
    }
  }
  if (n_in > 9) {
    snprintf(why, why_size, "GQA with %d inputs (at most 9)", n_in);
    return false;
  }
  const bool packed = in[1].rank < 0;
  const int64_t D = in[0].dims[2], per = packed ? nh + 2 * kvh : nh;
  if (D >= 0) { /* claim time may not know it; run_node always does */
    const int64_t H = D / per, hpg = nh / kvh;
    if (fbx_cuda_gqa_smem(hpg, H, FBX__GQA_SPLIT_MIN, 0) > FBX_CUDA_GQA_SMEM_MAX) {
      snprintf(why, why_size, "GQA with %lld query heads per KV head of size %lld (shared memory)", (long long)hpg,
               (long long)H);
      return false;
    }
  }
  return true;
}

fbx_status *fbx_cuda_k_gqa(FBX_CUDA_KERNEL_ARGS) {
  const fbx_ir_params *p = &node->params;
  if (n_in < 7 || n_out < 3) return FBX_ERR_ARG("device 'cuda': GQA: needs 7 inputs and 3 outputs");
  const fbx_tensor *Q = &in[0];
  const bool packed = !fbx_cuda_present(in, n_in, 1);
  const int64_t B = Q->dims[0], S = Q->dims[1], nh = p->gqa.num_heads, kvh = p->gqa.kv_num_heads;
  const int64_t H = Q->dims[2] / (packed ? nh + 2 * kvh : nh), L = out[1].dims[2], hpg = nh / kvh;
  const bool has_past = fbx_cuda_present(in, n_in, 3) && fbx_cuda_present(in, n_in, 4);
  const int64_t P = has_past ? in[3].dims[2] : 0;
  if (fbx_tensor_numel(&in[5]) < B)
    return FBX_ERR_ARG("device 'cuda': GQA: seqlens_k has %lld entries for batch %lld",
                       (long long)fbx_tensor_numel(&in[5]), (long long)B);
  if (fbx_tensor_numel(&in[6]) != 1) return FBX_ERR_ARG("device 'cuda': GQA: total_sequence_length must be a scalar");
  if (out[1].dims[3] != H || out[1].dims[1] != kvh || out[2].dims[2] != L)
    return FBX_ERR_ARG("device 'cuda': GQA: present shapes");
  const bool rot = p->gqa.do_rotary && fbx_cuda_present(in, n_in, 7) && fbx_cuda_present(in, n_in, 8);
  const int64_t rdim = rot ? 2 * in[7].dims[1] : 0;
  if (rot && (rdim > H || in[8].dims[1] != in[7].dims[1] || in[8].dims[0] != in[7].dims[0]))
    return FBX_ERR_ARG("device 'cuda': GQA: cos/sin cache shape");
  const bool shared = has_past && in[3].data == out[1].data && in[4].data == out[2].data;
  if (has_past && !shared && (in[3].data == out[1].data || in[4].data == out[2].data))
    return FBX_ERR_ARG("device 'cuda': GQA: only one of past_key / past_value shares its present buffer");
  fbx_cuda_gqa_args a = {
      .q = Q->data, .k = packed ? NULL : in[1].data, .v = packed ? NULL : in[2].data,
      .q_row = packed ? (nh + 2 * kvh) * H : nh * H, .kv_row = kvh * H, .k_off = nh * H, .v_off = (nh + kvh) * H,
      .past_k = has_past ? in[3].data : NULL, .past_v = has_past ? in[4].data : NULL, .pk = out[1].data,
      .pv = out[2].data, .out = out[0].data, .seqlens = in[5].data, .total = in[6].data,
      .cs = rot ? in[7].data : NULL, .sn = rot ? in[8].data : NULL, .rot = rdim, .max_pos = rot ? in[7].dims[0] : 0,
      .B = B, .S = S, .nh = nh, .kvh = kvh, .H = H, .L = L, .P = P,
      .scale = p->gqa.scale > 0 ? p->gqa.scale : 1.0f / sqrtf((float)H), .softcap = p->gqa.softcap,
      .interleaved = p->gqa.interleaved, .shared = shared, .fuse_kv = shared, .err_flag = c->err_flag};
  if (B == 0 || S == 0 || L == 0) return NULL;
  /* key splits: enough blocks to fill the device on a decode step, within shared memory */
  const int64_t rows = B * kvh * S, want = (FBX__GQA_BLOCKS + rows - 1) / rows;
  int64_t split = (L + want - 1) / want;
  split = (split + FBX__GQA_SPLIT_STEP - 1) / FBX__GQA_SPLIT_STEP * FBX__GQA_SPLIT_STEP;
  if (split > FBX__GQA_SPLIT_MAX) split = FBX__GQA_SPLIT_MAX;
  while (split > FBX__GQA_SPLIT_MIN && fbx_cuda_gqa_smem(hpg, H, split, 0) > FBX_CUDA_GQA_SMEM_MAX) split -= FBX__GQA_SPLIT_MIN;
  if (fbx_cuda_gqa_smem(hpg, H, split, 0) > FBX_CUDA_GQA_SMEM_MAX)
    return FBX_ERR_NOTIMPL("device 'cuda': GQA: %lld heads per KV head of size %lld exceed shared memory",
                           (long long)hpg, (long long)H);
  /* decode: K / V tiles in shared memory (a latency-bound block), on shorter splits if that is what fits */
  if (S == 1) {
    int64_t ts = split;
    while (ts > FBX__GQA_SPLIT_MIN && fbx_cuda_gqa_smem(hpg, H, ts, 1) > FBX_CUDA_GQA_SMEM_MAX) ts -= FBX__GQA_SPLIT_MIN;
    if (fbx_cuda_gqa_smem(hpg, H, ts, 1) <= FBX_CUDA_GQA_SMEM_MAX) split = ts, a.tile = 1;
  }
  a.split_len = (int)split;
  a.n_split = (int)((L + split - 1) / split);
  if (a.n_split > 1 && fbx_cuda_gqa_combine_smem(a.n_split) > FBX_CUDA_GQA_SMEM_MAX)
    return FBX_ERR_NOTIMPL("device 'cuda': GQA: a present buffer of %lld rows needs %d key splits (too many)",
                           (long long)L, a.n_split);
  if (a.n_split > 1) {
    size_t bytes = sizeof(float) * (size_t)(B * S * nh) * (size_t)a.n_split * (size_t)(H + 2);
    FBX_TRY(fbx_cuda_scratch(c, bytes, (void **)&a.part));
    /* the merge in the last attend block of a group: its weights fit in that block's q and score area */
    if (rows <= FBX_CUDA_COUNTERS && a.n_split + 1 <= H + split) a.counters = c->counters;
  }
  a.warps = a.tile && fbx_cuda_gqa_decode_fits(&a);
  if (a.warps)
    info->variant = a.n_split > 1 ? "gqa_decode_warps_split" : "gqa_decode_warps";
  else
    info->variant = S == 1 ? (a.n_split > 1 ? "gqa_decode_split" : "gqa_decode") : "gqa_causal_prefill";
  info->reason = rot ? "rotary inside; heads of a KV group share each K/V row read; lengths read on the device"
                     : "heads of a KV group share each K/V row read; lengths read on the device";
  info->flops = 4.0 * (double)(B * S * nh * H) * (double)L;
  return fbx_cuda_launched(fbx_cuda_launch_gqa(&a, c->stream), "GQA");
}

bool fbx_cuda_s_rope(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size) {
  (void)node;
  if (n_in < 4 || (in[0].rank != 3 && in[0].rank != 4)) {
    snprintf(why, why_size, "ROTARY needs x (B, S, D) or (B, N, S, H), position_ids, cos and sin caches");
    return false;
  }
  if (in[0].dtype != FBX_DTYPE_F32 || in[1].dtype != FBX_DTYPE_I64 || in[2].dtype != FBX_DTYPE_F32 ||
      in[3].dtype != FBX_DTYPE_F32) {
    snprintf(why, why_size, "ROTARY with x %s / position_ids %s (float32 input and caches, int64 positions only)",
             fbx_dtype_name(in[0].dtype), fbx_dtype_name(in[1].dtype));
    return false;
  }
  return true;
}

fbx_status *fbx_cuda_k_rope(FBX_CUDA_KERNEL_ARGS) {
  (void)n_out;
  const fbx_ir_params *p = &node->params;
  if (n_in < 4) return FBX_ERR_ARG("device 'cuda': ROTARY: needs 4 inputs");
  const fbx_tensor *X = &in[0], *pos = &in[1], *cs = &in[2], *sn = &in[3];
  const bool bnsh = X->rank == 4;
  if (cs->rank != 2 || sn->rank != 2 || sn->dims[1] != cs->dims[1] || sn->dims[0] != cs->dims[0])
    return FBX_ERR_ARG("device 'cuda': ROTARY: cos/sin caches must be (max_pos, rot/2)");
  const int64_t B = X->dims[0], S = bnsh ? X->dims[2] : X->dims[1];
  const int64_t H = bnsh ? X->dims[3] : p->rope.num_heads > 0 ? X->dims[2] / p->rope.num_heads : 2 * cs->dims[1];
  if (H < 2) return FBX_ERR_ARG("device 'cuda': ROTARY: head size %lld", (long long)H);
  const int64_t N = bnsh ? X->dims[1] : X->dims[2] / H, rot = p->rope.rot_dim > 0 ? p->rope.rot_dim : H;
  if (!bnsh && X->dims[2] % H) return FBX_ERR_ARG("device 'cuda': ROTARY: hidden size is not heads * head_size");
  if (rot > H || rot % 2 || rot > 2 * cs->dims[1])
    return FBX_ERR_ARG("device 'cuda': ROTARY: rotary dim %lld does not fit head %lld / cache %lld", (long long)rot,
                       (long long)H, (long long)cs->dims[1]);
  const int64_t np = fbx_tensor_numel(pos);
  if (np != 1 && np != B * S) return FBX_ERR_ARG("device 'cuda': ROTARY: position_ids has %lld elements", (long long)np);
  fbx_cuda_rope_args a = {.x = X->data, .y = out[0].data, .pos = pos->data, .n_pos = np, .cs = cs->data,
                          .sn = sn->data, .half_cache = cs->dims[1], .max_pos = cs->dims[0], .B = B, .S = S, .N = N,
                          .H = H, .rot = rot, .bnsh = bnsh, .interleaved = p->rope.interleaved,
                          .err_flag = c->err_flag};
  info->variant = "rope";
  info->reason = p->rope.interleaved ? "interleaved pairs, thread per element" : "half-split pairs, thread per element";
  return fbx_cuda_launched(fbx_cuda_launch_rope(&a, c->stream), "ROTARY");
}
