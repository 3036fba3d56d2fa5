/* GQA: ORT's GroupQueryAttention on the CPU, causal, with rotary inside.
 *
 * Per batch entry b (ORT's contrib-op definition): total_b = seqlens_k[b] + 1
 * tokens are valid after this step; the first prompt (S == total_sequence_length)
 * has no past, otherwise past_b = total_b - S rows of the cache are valid. The
 * new keys/values go to present rows [past_b, past_b + S); when present and
 * past are different buffers the past rows are copied first. When the
 * executor bound present to past's own buffer (params.gqa.kv_in_place: a KV
 * buffer shared by past and present, GenAI's past_present_share_buffer),
 * only the new rows are written and every other row is left as it is. Query s (absolute position past_b + s) attends to keys
 * [0, min(past_b + s + 1, total_b)).
 *
 * Rotary (do_rotary): q and the new k at position past_b + s, with
 * cos/sin (max_pos, rot/2): half-split pairs (i, i + rot/2), or interleaved
 * pairs (2i, 2i + 1); dims >= rot pass through.
 *
 * Row kernel: one task per (b, kv group, query row); every head of the
 * group is scored against each key row while it is in cache, so K and V are
 * read once per group, not once per head. Decode (S = 1) with few groups per
 * thread splits each group's keys into nc chunks (one task each: partial max,
 * sum and unnormalised output per head), then combines them (fbx__gqa_combine),
 * so every thread streams part of every cache (B kvh = 2 groups on 2 threads
 * left one thread per group, and any descheduled thread held a whole group).
 *
 * Shapes: q (B, S, nh*H) or packed (B, S, (nh + 2 kvh) * H); k, v (B, S, kvh*H);
 * past/present (B, kvh, len, H); out (B, S, nh*H). */
#include <math.h>
#include <string.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "cpu_gqa.h"
#include "cpu_internal.h"
#include "cpu_simd.h"

/* y(H) = rotary(x) at one position (cs, sn: rot/2 values); y may not alias x. */
static void fbx__att_rope(const float *x, float *y, int64_t H, int64_t rot, const float *cs, const float *sn,
                          int interleaved) {
  int64_t half = rot / 2;
  if (interleaved)
    for (int64_t i = 0; i < half; i++) {
      float a = x[2 * i], b = x[2 * i + 1];
      y[2 * i] = a * cs[i] - b * sn[i];
      y[2 * i + 1] = b * cs[i] + a * sn[i];
    }
  else
    for (int64_t i = 0; i < half; i++) {
      float a = x[i], b = x[i + half];
      y[i] = a * cs[i] - b * sn[i];
      y[i + half] = b * cs[i] + a * sn[i];
    }
  for (int64_t i = rot; i < H; i++) y[i] = x[i];
}

typedef struct fbx__att_job {
  const float *q;          /* (B, S, nh, H): rotated q (scratch) or the input's q part (row stride q_row) */
  int64_t q_row;           /* floats between tokens of q */
  const float *pk, *pv;    /* present (B, kvh, L, H) */
  float *out;              /* (B, S, nh*H) */
  const int32_t *past, *keys; /* per b: past_b, total_b */
  int64_t B, S, nh, kvh, H, L;
  float scale, softcap;
  float *scratch;          /* per worker: hpg * L scores */
  int64_t nc;              /* split decode: chunks per (b, group) */
  float *po, *pm, *pl;     /* split decode: (B kvh nc, hpg, H) outputs, (B kvh nc, hpg) maxima and sums */
} fbx__att_job;

/* Split decode: keys per chunk at least this many (below it the combine and the extra
 * tasks cost more than the parallel streaming gains). */
#define FBX__GQA_CHUNK_KEYS 128

/* Task i = ((b * kvh) + g) * S + s. */
static void fbx__att_rows(void *arg, int64_t i0, int64_t i1, int worker) {
  const fbx__att_job *j = arg;
  const int64_t H = j->H, L = j->L, hpg = j->nh / j->kvh;
  float *sc = j->scratch + (size_t)worker * (size_t)(hpg * L);
  for (int64_t i = i0; i < i1; i++) {
    int64_t s = i % j->S, g = (i / j->S) % j->kvh, b = i / (j->S * j->kvh);
    int64_t n = j->past[b] + s + 1;
    if (n > j->keys[b]) n = j->keys[b];
    const float *K = j->pk + ((b * j->kvh + g) * L) * H, *V = j->pv + ((b * j->kvh + g) * L) * H;
    const float *q0 = j->q + (b * j->S + s) * j->q_row + g * hpg * H;
    float *o0 = j->out + (b * j->S + s) * j->nh * H + g * hpg * H;
    fbx__gqa_group_row(q0, K, V, n, hpg, H, j->scale, j->softcap, sc, L, o0); /* cpu_gqa_rows.c */
  }
}

/* Split decode, task i = (b kvh + g) nc + c: chunk c of the keys of group g, in steps of
 * ck = ceil(n / nc) rounded up to 8 keys (the row kernel's score blocks). */
static void fbx__att_parts(void *arg, int64_t i0, int64_t i1, int worker) {
  const fbx__att_job *j = arg;
  const int64_t H = j->H, L = j->L, hpg = j->nh / j->kvh;
  float *sc = j->scratch + (size_t)worker * (size_t)(hpg * L);
  for (int64_t i = i0; i < i1; i++) {
    const int64_t c = i % j->nc, g = (i / j->nc) % j->kvh, b = i / (j->nc * j->kvh);
    int64_t n = j->past[b] + 1;
    if (n > j->keys[b]) n = j->keys[b];
    const int64_t ck = ((n + j->nc - 1) / j->nc + 7) & ~(int64_t)7;
    const int64_t t0 = c * ck < n ? c * ck : n, t1 = t0 + ck < n ? t0 + ck : n;
    const float *K = j->pk + ((b * j->kvh + g) * L + t0) * H, *V = j->pv + ((b * j->kvh + g) * L + t0) * H;
    const float *q0 = j->q + b * j->q_row + g * hpg * H;
    fbx__gqa_group_part(q0, K, V, t1 - t0, hpg, H, j->scale, j->softcap, sc, L, j->po + i * hpg * H,
                        j->pm + i * hpg, j->pl + i * hpg); /* cpu_gqa_rows.c */
  }
}

/* Split decode: chunks per (b, group) for n_max keys, or 1 (no split). */
static int64_t fbx__att_chunks(int64_t groups, int64_t n_max, int64_t threads) {
  if (threads <= 1) return 1;
  int64_t nc = (4 * threads + groups - 1) / groups; /* >= 4 tasks per thread */
  if (nc > n_max / FBX__GQA_CHUNK_KEYS) nc = n_max / FBX__GQA_CHUNK_KEYS;
  if (nc > FBX__GQA_MAX_CHUNKS) nc = FBX__GQA_MAX_CHUNKS;
  return nc > 1 ? nc : 1;
}

fbx_status *fbx_cpu_k_GQA(FBX_CPU_KERNEL_ARGS) {
  (void)state;
  const fbx_ir_params *p = &node->params;
  if (n_in < 7 || n_out < 3) return FBX_ERR_ARG("GQA: needs 7 inputs and 3 outputs");
  const fbx_tensor *Q = &in[0];
  const bool packed = !fbx_cpu_present(in, n_in, 1);
  const int64_t B = Q->dims[0], S = Q->dims[1], nh = p->gqa.num_heads, kvh = p->gqa.kv_num_heads;
  const int64_t H = Q->dims[2] / (packed ? nh + 2 * kvh : nh), L = out[1].dims[2];
  const int64_t P = fbx_cpu_present(in, n_in, 3) ? in[3].dims[2] : 0;
  for (int i = 0; i < 9; i++)
    if (fbx_cpu_present(in, n_in, i) && in[i].dtype != (i == 5 || i == 6 ? FBX_DTYPE_I32 : FBX_DTYPE_F32))
      return FBX_ERR_NOTIMPL("GQA: input %d dtype %s", i, fbx_dtype_name(in[i].dtype));
  if (fbx_cpu_numel(&in[5]) < B)
    return FBX_ERR_ARG("GQA: seqlens_k has %lld entries for batch %lld", (long long)fbx_cpu_numel(&in[5]),
                       (long long)B);
  const int32_t *seqlens = in[5].data;
  const int64_t total = ((const int32_t *)in[6].data)[0];
  const bool first_prompt = S == total;
  if (!first_prompt && S > 1 && B != 1) return FBX_ERR_ARG("GQA: sequence_length > 1 with past context needs batch 1");
  const bool rot = p->gqa.do_rotary && fbx_cpu_present(in, n_in, 7) && fbx_cpu_present(in, n_in, 8);
  const int64_t rdim = rot ? 2 * in[7].dims[1] : 0, max_pos = rot ? in[7].dims[0] : 0;
  const float *cosc = rot ? in[7].data : NULL, *sinc = rot ? in[8].data : NULL;
  if (rot && (rdim > H || in[8].dims[1] != in[7].dims[1])) return FBX_ERR_ARG("GQA: cos/sin cache shape");
  const int64_t hpg = nh / kvh, threads = c->threads > 0 ? c->threads : 1;
  const int64_t q_row = packed ? (nh + 2 * kvh) * H : nh * H; /* floats per token of the query input */
  int64_t n_max = 0; /* keys of the longest row (decode: split over chunks of them) */
  for (int64_t b = 0; b < B; b++) n_max = (int64_t)seqlens[b] + 1 > n_max ? (int64_t)seqlens[b] + 1 : n_max;
  const int64_t nc = S == 1 && !first_prompt ? fbx__att_chunks(B * kvh, n_max, threads) : 1;
  const size_t parts = nc > 1 ? (size_t)(B * kvh * nc * hpg) : 0; /* split decode: partial rows */
  /* scratch: past/keys per b, rotated q (B, S, nh, H), per-worker scores (hpg, L), then the
   * split decode's partial outputs (parts, H), maxima and sums (parts) */
  size_t need = (size_t)B * 8 + 64 + (rot ? (size_t)(B * S * nh * H) * 4 : 0) + (size_t)(threads * hpg * L) * 4 + 64 +
                parts * (size_t)(H + 2) * 4;
  unsigned char *mem = fbx_cpu_scratch(c, need);
  if (!mem) return FBX_ERR_OOM();
  int32_t *pastb = (int32_t *)mem, *keys = pastb + B;
  float *qr = (float *)(mem + (((size_t)B * 8 + 63) & ~(size_t)63));
  float *scores = rot ? qr + B * S * nh * H : qr;
  bool in_place[2];
  for (int kv = 0; kv < 2; kv++) { /* the in-place contract (ir_graph.h params.gqa) agrees with the buffers */
    in_place[kv] = (p->gqa.kv_in_place >> kv) & 1u;
    bool has = fbx_cpu_present(in, n_in, 3 + kv), same = has && in[3 + kv].data == out[1 + kv].data;
    if (in_place[kv] != same && (in_place[kv] || fbx_cpu_numel(&in[3 + kv]) > 0))
      return FBX_ERR_ARG("GQA: present_%s %s past's buffer but kv_in_place says %d", kv ? "value" : "key",
                         same ? "is" : "is not", (int)in_place[kv]);
    if (in_place[kv] && in[3 + kv].dims[2] != L)
      return FBX_ERR_ARG("GQA: in-place present has %lld rows, past %lld", (long long)L, (long long)in[3 + kv].dims[2]);
  }
  for (int64_t b = 0; b < B; b++) {
    int64_t tb = (int64_t)seqlens[b] + 1, pb = first_prompt ? 0 : tb - S;
    if (pb < 0 || pb + S > L || (first_prompt && tb > S) || tb > L)
      return FBX_ERR_ARG("GQA: seqlens_k[%lld] = %d does not fit sequence %lld, total %lld, cache %lld", (long long)b,
                         seqlens[b], (long long)S, (long long)total, (long long)L);
    if (pb > P)
      return FBX_ERR_ARG("GQA: %lld past rows needed, past_key holds %lld", (long long)pb, (long long)P);
    pastb[b] = (int32_t)pb;
    keys[b] = (int32_t)tb;
  }
  float *pk = out[1].data, *pv = out[2].data;
  /* past rows into present (separate buffers only); the rest of present is zeroed */
  for (int kv = 0; kv < 2; kv++) {
    const float *past = in[3 + kv].data;
    float *pres = kv ? pv : pk;
    if (in_place[kv]) continue;
    for (int64_t b = 0; b < B; b++)
      for (int64_t g = 0; g < kvh; g++) {
        float *dst = pres + (b * kvh + g) * L * H;
        if (pastb[b]) memcpy(dst, past + (b * kvh + g) * P * H, sizeof(float) * (size_t)(pastb[b] * H));
        if (L > pastb[b] + S) memset(dst + (pastb[b] + S) * H, 0, sizeof(float) * (size_t)((L - pastb[b] - S) * H));
      }
  }
  /* new k (rotated) and v rows; rotated q */
  const float *qin = Q->data;
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < S; s++) {
      int64_t pos = pastb[b] + s;
      if (rot && pos >= max_pos)
        return FBX_ERR_ARG("GQA: position %lld outside the cos/sin cache (%lld)", (long long)pos, (long long)max_pos);
      const float *cs = rot ? cosc + pos * (rdim / 2) : NULL, *sn = rot ? sinc + pos * (rdim / 2) : NULL;
      const float *tok = qin + (b * S + s) * q_row;
      const float *kt = packed ? tok + nh * H : (const float *)in[1].data + (b * S + s) * kvh * H;
      const float *vt = packed ? tok + (nh + kvh) * H : (const float *)in[2].data + (b * S + s) * kvh * H;
      for (int64_t g = 0; g < kvh; g++) {
        float *kd = pk + ((b * kvh + g) * L + pos) * H, *vd = pv + ((b * kvh + g) * L + pos) * H;
        if (rot) fbx__att_rope(kt + g * H, kd, H, rdim, cs, sn, p->gqa.interleaved);
        else memcpy(kd, kt + g * H, sizeof(float) * (size_t)H);
        memcpy(vd, vt + g * H, sizeof(float) * (size_t)H);
      }
      if (rot)
        for (int64_t h = 0; h < nh; h++)
          fbx__att_rope(tok + h * H, qr + ((b * S + s) * nh + h) * H, H, rdim, cs, sn, p->gqa.interleaved);
    }
  fbx__att_job j = {.q = rot ? qr : qin, .q_row = rot ? nh * H : q_row, .pk = pk, .pv = pv, .out = out[0].data,
                    .past = pastb, .keys = keys, .B = B, .S = S, .nh = nh, .kvh = kvh, .H = H, .L = L,
                    .scale = p->gqa.scale > 0 ? p->gqa.scale : 1.0f / sqrtf((float)H), .softcap = p->gqa.softcap,
                    .scratch = scores, .nc = nc};
  if (nc > 1) {
    j.po = scores + threads * hpg * L;
    j.pm = j.po + parts * (size_t)H, j.pl = j.pm + parts;
    info->variant = "gqa_decode_split";
    info->reason = "keys of each KV group in chunks over the threads, partial softmax per chunk, then combined";
    info->flops = 4.0 * (double)(B * nh * H) * (double)L;
    fbx_cpu_par(c, B * kvh * nc, 1, fbx__att_parts, &j);
    for (int64_t i = 0; i < B * kvh; i++) /* (b, g) = i: its nc parts into the output row */
      fbx__gqa_combine(j.po + i * nc * hpg * H, j.pm + i * nc * hpg, j.pl + i * nc * hpg, nc, hpg, H,
                       j.out + (i / kvh) * nh * H + (i % kvh) * hpg * H);
    return NULL;
  }
  int64_t tasks = B * kvh * S;
  info->variant = S == 1 ? "gqa_decode_grouped" : "gqa_causal_prefill";
  info->reason = rot ? "rotary inside; heads of a KV group share each K/V row read"
                     : "heads of a KV group share each K/V row read";
  info->flops = 4.0 * (double)(B * S * nh * H) * (double)L;
  if (tasks > 1 && B * S * nh * L * H >= 16384) fbx_cpu_par(c, tasks, 1, fbx__att_rows, &j);
  else fbx__att_rows(&j, 0, tasks, 0);
  return NULL;
}

/* ROTARY (RotaryEmbedding): x (B, S, N*H) or (B, N, S, H); position of token
 * (b, s) = position_ids[b, s], or position_ids[0] + s for a (1) tensor. */
fbx_status *fbx_cpu_k_ROTARY(FBX_CPU_KERNEL_ARGS) {
  (void)state, (void)c;
  const fbx_ir_params *p = &node->params;
  const fbx_tensor *X = &in[0], *pos = &in[1], *cs = &in[2], *sn = &in[3];
  if (n_in < 4 || X->dtype != FBX_DTYPE_F32 || pos->dtype != FBX_DTYPE_I64 || cs->dtype != FBX_DTYPE_F32 ||
      sn->dtype != FBX_DTYPE_F32)
    return FBX_ERR_NOTIMPL("ROTARY: float32 input and caches, int64 position_ids only");
  const bool bnsh = X->rank == 4;
  const int64_t B = X->dims[0], S = bnsh ? X->dims[2] : X->dims[1];
  const int64_t H = bnsh ? X->dims[3] : p->rope.num_heads > 0 ? X->dims[2] / p->rope.num_heads : 2 * cs->dims[1];
  const int64_t N = bnsh ? X->dims[1] : X->dims[2] / H, rot = p->rope.rot_dim > 0 ? p->rope.rot_dim : H;
  const int64_t half = cs->dims[1], max_pos = cs->dims[0];
  const int64_t np = fbx_cpu_numel(pos);
  if (np != 1 && np != B * S) return FBX_ERR_ARG("ROTARY: position_ids has %lld elements", (long long)np);
  const int64_t *pid = pos->data;
  const float *x = X->data;
  float *y = out[0].data;
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < S; s++) {
      int64_t ps = np == 1 ? pid[0] + s : pid[b * S + s];
      if (ps < 0 || ps >= max_pos)
        return FBX_ERR_ARG("ROTARY: position %lld outside the cache (%lld)", (long long)ps, (long long)max_pos);
      for (int64_t h = 0; h < N; h++) {
        int64_t off = bnsh ? ((b * N + h) * S + s) * H : (b * S + s) * N * H + h * H;
        fbx__att_rope(x + off, y + off, H, rot, (const float *)cs->data + ps * half,
                      (const float *)sn->data + ps * half, p->rope.interleaved);
      }
    }
  info->variant = "rope";
  info->reason = p->rope.interleaved ? "interleaved pairs" : "half-split pairs";
  return NULL;
}
