// test_e2e_msft_gqa: com.microsoft GroupQueryAttention and RotaryEmbedding as one-node models.
// GroupQueryAttention: causal first prompt,
// one-token decode (batch 1 and a ragged batch 2 whose past is right-padded; pasts of 400-700,
// where the CPU kernel splits each group's keys over the threads), a past buffer
// longer than the sequence (present keeps the buffer's length), separate and packed QKV, rotary
// half-split and interleaved (full and partial rotary_dim), softcap. Run on ORT's CPU EP and with
// Fusebox; both are checked against a float64 reference written here from the contrib-op docs
// (seqlens_k = valid length - 1, first prompt when sequence_length == total_sequence_length,
// new rows at [past_b, past_b + S), rotary at absolute positions, causal softmax over the
// valid keys). Tolerance rtol 1e-4 + atol 2e-5: float32 dots over head_size and a softmax.
// Present K/V are compared on their valid rows [0, seqlens_k + 1) only (the rest is unspecified).
// RotaryEmbedding: 3-D (with num_heads / rotary_embedding_dim) and 4-D inputs, (B, S) and (1)
// position_ids, both pair layouts, against the same float64 rotation (rtol 1e-5 + atol 1e-6).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "common/node_model.h"

typedef struct gqa_case {
  int B, S, nh, kvh, H;
  int past_len;        // past buffer length (dim 2 of past_key)
  int total;           // total_sequence_length
  int seqlens[2];      // seqlens_k per batch entry
  int packed, rotary, interleaved, rot_half; // rot_half: cos/sin width (rotary_dim / 2)
  float softcap;
} gqa_case;

static double getf(const fbx_host_tensor *t, int64_t i) { return fbx_host_tensor_get(t, (size_t)i); }

// float64 reference: out (B,S,nh*H), present k/v (B,kvh,L,H) on valid rows.
static void reference(const gqa_case *c, const fbx_host_tensor *q, const fbx_host_tensor *k, const fbx_host_tensor *v,
                      const fbx_host_tensor *pk, const fbx_host_tensor *pv, const fbx_host_tensor *cs,
                      const fbx_host_tensor *sn, int L, double *out, double *rk, double *rv) {
  const int B = c->B, S = c->S, nh = c->nh, kvh = c->kvh, H = c->H, P = c->past_len, R = 2 * c->rot_half;
  const int qrow = c->packed ? (nh + 2 * kvh) * H : nh * H;
  const int first = S == c->total;
  double *qr = malloc(sizeof(double) * (size_t)(B * S * nh * H)), x[256], y[256];
  for (int b = 0; b < B; b++) {
    int tb = c->seqlens[b] + 1, pb = first ? 0 : tb - S;
    for (int g = 0; g < kvh; g++)
      for (int t = 0; t < pb; t++)
        for (int d = 0; d < H; d++) {
          rk[((b * kvh + g) * L + t) * H + d] = getf(pk, ((b * kvh + g) * P + t) * H + d);
          rv[((b * kvh + g) * L + t) * H + d] = getf(pv, ((b * kvh + g) * P + t) * H + d);
        }
    for (int s = 0; s < S; s++) {
      int pos = pb + s;
      for (int hh = 0; hh < nh + kvh; hh++) { // heads of q, then of k
        int is_k = hh >= nh, h = is_k ? hh - nh : hh;
        for (int d = 0; d < H; d++)
          x[d] = is_k ? (c->packed ? getf(q, (b * S + s) * qrow + (nh + h) * H + d)
                                   : getf(k, (b * S + s) * kvh * H + h * H + d))
                      : getf(q, (b * S + s) * qrow + h * H + d);
        memcpy(y, x, sizeof(double) * (size_t)H);
        if (c->rotary)
          for (int i = 0; i < R / 2; i++) {
            int i1 = c->interleaved ? 2 * i : i, i2 = c->interleaved ? 2 * i + 1 : i + R / 2;
            double co = getf(cs, pos * (R / 2) + i), si = getf(sn, pos * (R / 2) + i);
            y[i1] = x[i1] * co - x[i2] * si;
            y[i2] = x[i2] * co + x[i1] * si;
          }
        for (int d = 0; d < H; d++) {
          if (is_k) rk[((b * kvh + h) * L + pos) * H + d] = y[d];
          else qr[((b * S + s) * nh + h) * H + d] = y[d];
        }
      }
      for (int h = 0; h < kvh; h++)
        for (int d = 0; d < H; d++)
          rv[((b * kvh + h) * L + pos) * H + d] = c->packed ? getf(q, (b * S + s) * qrow + (nh + kvh + h) * H + d)
                                                            : getf(v, (b * S + s) * kvh * H + h * H + d);
    }
    for (int s = 0; s < S; s++)
      for (int h = 0; h < nh; h++) {
        int g = h / (nh / kvh), n = pb + s + 1 < tb ? pb + s + 1 : tb;
        double *sc = malloc(sizeof(double) * (size_t)n), mx = -1e300, sum = 0;
        for (int t = 0; t < n; t++) {
          double d = 0;
          for (int e = 0; e < H; e++) d += qr[((b * S + s) * nh + h) * H + e] * rk[((b * kvh + g) * L + t) * H + e];
          d /= sqrt((double)H);
          if (c->softcap > 0) d = c->softcap * tanh(d / c->softcap);
          sc[t] = d;
          if (d > mx) mx = d;
        }
        for (int t = 0; t < n; t++) sum += sc[t] = exp(sc[t] - mx);
        for (int e = 0; e < H; e++) {
          double o = 0;
          for (int t = 0; t < n; t++) o += sc[t] / sum * rv[((b * kvh + g) * L + t) * H + e];
          out[((b * S + s) * nh + h) * H + e] = o;
        }
        free(sc);
      }
  }
  free(qr);
}

static size_t count_bad(const fbx_host_tensor *t, const double *ref, const gqa_case *c, int L, int present,
                        double *worst) {
  size_t bad = 0;
  *worst = 0;
  size_t n = fbx_host_tensor_numel(t);
  for (size_t i = 0; i < n; i++) {
    if (present) { // (B, kvh, L, H): valid rows only
      int row = (int)((i / (size_t)c->H) % (size_t)L), b = (int)(i / ((size_t)c->kvh * (size_t)L * (size_t)c->H));
      if (row > c->seqlens[b]) continue;
    }
    double d = fabs(fbx_host_tensor_get(t, i) - ref[i]);
    if (d > *worst) *worst = d;
    bad += d > 2e-5 + 1e-4 * fabs(ref[i]);
  }
  return bad;
}

static void run_case(fbx_host *h, const gqa_case *c, const char *dir, int idx) {
  char desc[220], path[512];
  snprintf(desc, sizeof desc,
           "GQA B=%d S=%d heads=%d/%d H=%d past=%d total=%d seqlens=%d,%d packed=%d rotary=%d%s rot=%d softcap=%g",
           c->B, c->S, c->nh, c->kvh, c->H, c->past_len, c->total, c->seqlens[0], c->B > 1 ? c->seqlens[1] : -1,
           c->packed, c->rotary, c->interleaved ? "i" : "", 2 * c->rot_half, c->softcap);
  snprintf(path, sizeof path, "%s/gqa%d.onnx", dir, idx);
  const int B = c->B, S = c->S, nh = c->nh, kvh = c->kvh, H = c->H;
  const int L = c->total > c->past_len ? c->total : c->past_len;
  fbx_host_tensor q = {0}, k = {0}, v = {0}, pk = {0}, pv = {0}, sl = {0}, tot = {0}, cs = {0}, sn = {0};
  int64_t qd[3] = {B, S, (int64_t)(c->packed ? nh + 2 * kvh : nh) * H}, kd[3] = {B, S, (int64_t)kvh * H};
  int64_t pd[4] = {B, kvh, c->past_len, H}, bd[1] = {B}, cd[2] = {c->total + 3, c->rot_half};
  fbx_host_tensor_alloc(&q, "query", FBX_HOST_F32, 3, qd);
  fbx_host_tensor_fill_normal(&q, 10 + (uint64_t)idx);
  fbx_host_tensor_alloc(&k, "key", FBX_HOST_F32, 3, kd);
  fbx_host_tensor_fill_normal(&k, 20 + (uint64_t)idx);
  fbx_host_tensor_alloc(&v, "value", FBX_HOST_F32, 3, kd);
  fbx_host_tensor_fill_normal(&v, 30 + (uint64_t)idx);
  fbx_host_tensor_alloc(&pk, "past_key", FBX_HOST_F32, 4, pd);
  fbx_host_tensor_fill_normal(&pk, 40 + (uint64_t)idx);
  fbx_host_tensor_alloc(&pv, "past_value", FBX_HOST_F32, 4, pd);
  fbx_host_tensor_fill_normal(&pv, 50 + (uint64_t)idx);
  fbx_host_tensor_alloc(&sl, "seqlens_k", FBX_HOST_I32, 1, bd);
  for (int b = 0; b < B; b++) ((int32_t *)sl.data)[b] = c->seqlens[b];
  fbx_host_tensor_alloc(&tot, "total_sequence_length", FBX_HOST_I32, 0, NULL);
  ((int32_t *)tot.data)[0] = c->total;
  fbx_host_tensor_alloc(&cs, "cos_cache", FBX_HOST_F32, 2, cd);
  fbx_host_tensor_alloc(&sn, "sin_cache", FBX_HOST_F32, 2, cd);
  for (int p = 0; p < c->total + 3; p++) // the usual theta = 10000^(-2i/rot) table
    for (int i = 0; i < c->rot_half; i++) {
      double th = p * pow(10000.0, -2.0 * i / (2.0 * c->rot_half));
      ((float *)cs.data)[p * c->rot_half + i] = (float)cos(th);
      ((float *)sn.data)[p * c->rot_half + i] = (float)sin(th);
    }
  nm_model m = nm_model_init("GroupQueryAttention", "com.microsoft");
  nm_input(&m, &q, "batch,seq,");
  if (c->packed) nm_absent(&m), nm_absent(&m);
  else nm_input(&m, &k, "batch,seq,"), nm_input(&m, &v, "batch,seq,");
  nm_input(&m, &pk, "batch,,past,");
  nm_input(&m, &pv, "batch,,past,");
  nm_input(&m, &sl, "batch");
  nm_input(&m, &tot, "");
  if (c->rotary) nm_init(&m, &cs), nm_init(&m, &sn);
  nm_attr_i(&m, "num_heads", nh);
  nm_attr_i(&m, "kv_num_heads", kvh);
  if (c->rotary) nm_attr_i(&m, "do_rotary", 1), nm_attr_i(&m, "rotary_interleaved", c->interleaved);
  if (c->softcap > 0) nm_attr_f(&m, "softcap", c->softcap);
  nm_output(&m, "output", FBX_HOST_F32);
  nm_output(&m, "present_key", FBX_HOST_F32);
  nm_output(&m, "present_value", FBX_HOST_F32);
  CHECK(nm_write(&m, path) == 0, "%s: cannot write model", desc);
  fbx_host_tensor feeds[7];
  size_t nf = 0;
  feeds[nf++] = q;
  if (!c->packed) feeds[nf++] = k, feeds[nf++] = v;
  feeds[nf++] = pk, feeds[nf++] = pv, feeds[nf++] = sl, feeds[nf++] = tot;
  size_t no = (size_t)(B * S * nh * H), np = (size_t)(B * kvh * L * H);
  double *ro = calloc(no, sizeof(double)), *rk = calloc(np, sizeof(double)), *rv = calloc(np, sizeof(double));
  reference(c, &q, &k, &v, &pk, &pv, &cs, &sn, L, ro, rk, rv);
  for (int w = 0; w < 2; w++) {
    fbx_host_tensor *o = NULL;
    size_t n_o = 0;
    int claimed = 0;
    char *e = nm_run(h, path, w, feeds, nf, &o, &n_o, w ? &claimed : NULL);
    const char *who = w ? "Fusebox" : "ORT CPU (reference sanity)";
    CHECK(!e, "%s: %s: %s", desc, who, e ? e : "");
    fbx_host_err_free(e);
    if (w) CHECK(claimed, "%s: not placed on Fusebox", desc);
    if (!o || n_o != 3 || fbx_host_tensor_numel(&o[0]) != no || fbx_host_tensor_numel(&o[1]) != np) {
      CHECK(0, "%s: %s: wrong outputs (%zu)", desc, who, n_o);
    } else {
      double wo, wk, wv;
      size_t bo = count_bad(&o[0], ro, c, L, 0, &wo), bk = count_bad(&o[1], rk, c, L, 1, &wk),
             bv = count_bad(&o[2], rv, c, L, 1, &wv);
      CHECK(bo == 0 && bk == 0 && bv == 0,
            "%s: %s: off the float64 reference: output %zu (max %g), present_key %zu (%g), present_value %zu (%g)",
            desc, who, bo, wo, bk, wk, bv, wv);
      CHECK(o[1].dims[2] == L, "%s: %s: present length %lld, want %d", desc, who, (long long)o[1].dims[2], L);
    }
    if (o) fbx_host_tensors_free(o, n_o);
  }
  free(ro), free(rk), free(rv);
  fbx_host_tensor *all[] = {&q, &k, &v, &pk, &pv, &sl, &tot, &cs, &sn};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fbx_host_tensor_free(all[i]);
}

typedef struct rope_case {
  int B, S, N, H, bnsh, rot, interleaved, pos_scalar, attr_heads;
} rope_case;

static void run_rope(fbx_host *h, const rope_case *c, const char *dir, int idx) {
  char desc[160], path[512];
  snprintf(desc, sizeof desc, "RotaryEmbedding B=%d S=%d N=%d H=%d %s rot=%d interleaved=%d pos=%s", c->B, c->S, c->N,
           c->H, c->bnsh ? "BNSH" : "BSD", c->rot, c->interleaved, c->pos_scalar ? "(1)" : "(B,S)");
  snprintf(path, sizeof path, "%s/rope%d.onnx", dir, idx);
  const int B = c->B, S = c->S, N = c->N, H = c->H, R = c->rot ? c->rot : H, maxp = 40;
  fbx_host_tensor x = {0}, pos = {0}, cs = {0}, sn = {0};
  int64_t xd4[4] = {B, N, S, H}, xd3[3] = {B, S, (int64_t)N * H}, pd[2] = {B, S}, p1[1] = {1}, cd[2] = {maxp, R / 2};
  fbx_host_tensor_alloc(&x, "x", FBX_HOST_F32, c->bnsh ? 4 : 3, c->bnsh ? xd4 : xd3);
  fbx_host_tensor_fill_normal(&x, 70 + (uint64_t)idx);
  fbx_host_tensor_alloc(&pos, "position_ids", FBX_HOST_I64, c->pos_scalar ? 1 : 2, c->pos_scalar ? p1 : pd);
  for (size_t i = 0; i < fbx_host_tensor_numel(&pos); i++)
    ((int64_t *)pos.data)[i] = c->pos_scalar ? 5 : (int64_t)((i * 7 + 3) % maxp);
  fbx_host_tensor_alloc(&cs, "cos_cache", FBX_HOST_F32, 2, cd);
  fbx_host_tensor_alloc(&sn, "sin_cache", FBX_HOST_F32, 2, cd);
  for (int p = 0; p < maxp; p++)
    for (int i = 0; i < R / 2; i++) {
      double th = p * pow(10000.0, -2.0 * i / R);
      ((float *)cs.data)[p * (R / 2) + i] = (float)cos(th);
      ((float *)sn.data)[p * (R / 2) + i] = (float)sin(th);
    }
  nm_model m = nm_model_init("RotaryEmbedding", "com.microsoft");
  nm_input(&m, &x, c->bnsh ? "batch,,seq," : "batch,seq,");
  nm_input(&m, &pos, "");
  nm_init(&m, &cs);
  nm_init(&m, &sn);
  nm_attr_i(&m, "interleaved", c->interleaved);
  if (c->attr_heads) nm_attr_i(&m, "num_heads", N);
  if (c->rot) nm_attr_i(&m, "rotary_embedding_dim", c->rot);
  nm_output(&m, "y", FBX_HOST_F32);
  CHECK(nm_write(&m, path) == 0, "%s: cannot write model", desc);
  size_t n = fbx_host_tensor_numel(&x);
  double *ref = malloc(sizeof(double) * n);
  for (int b = 0; b < B; b++)
    for (int s = 0; s < S; s++) {
      int64_t ps = c->pos_scalar ? 5 + s : ((int64_t *)pos.data)[b * S + s];
      for (int hh = 0; hh < N; hh++) {
        size_t off = c->bnsh ? (size_t)(((b * N + hh) * S + s) * H) : (size_t)((b * S + s) * N * H + hh * H);
        for (int d = 0; d < H; d++) ref[off + d] = getf(&x, (int64_t)off + d);
        for (int i = 0; i < R / 2; i++) {
          int i1 = c->interleaved ? 2 * i : i, i2 = c->interleaved ? 2 * i + 1 : i + R / 2;
          double a = getf(&x, (int64_t)off + i1), bb = getf(&x, (int64_t)off + i2);
          double co = getf(&cs, ps * (R / 2) + i), si = getf(&sn, ps * (R / 2) + i);
          ref[off + i1] = a * co - bb * si;
          ref[off + i2] = bb * co + a * si;
        }
      }
    }
  fbx_host_tensor feeds[2] = {x, pos};
  for (int w = 0; w < 2; w++) {
    fbx_host_tensor *o = NULL;
    size_t n_o = 0;
    int claimed = 0;
    char *e = nm_run(h, path, w, feeds, 2, &o, &n_o, w ? &claimed : NULL);
    const char *who = w ? "Fusebox" : "ORT CPU (reference sanity)";
    CHECK(!e, "%s: %s: %s", desc, who, e ? e : "");
    fbx_host_err_free(e);
    if (w) CHECK(claimed, "%s: not placed on Fusebox", desc);
    if (o && n_o == 1 && fbx_host_tensor_numel(&o[0]) == n) {
      size_t bad = 0;
      for (size_t i = 0; i < n; i++) bad += fabs(fbx_host_tensor_get(&o[0], i) - ref[i]) > 1e-6 + 1e-5 * fabs(ref[i]);
      CHECK(bad == 0, "%s: %s: %zu of %zu elements off the float64 reference", desc, who, bad, n);
    } else {
      CHECK(0, "%s: %s: no output", desc, who);
    }
    if (o) fbx_host_tensors_free(o, n_o);
  }
  free(ref);
  fbx_host_tensor_free(&x), fbx_host_tensor_free(&pos), fbx_host_tensor_free(&cs), fbx_host_tensor_free(&sn);
}

int main(void) {
  char dir[] = "/tmp/fbx_msft_gqa_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "cannot open ORT: %s\n", e);
    return 1;
  }
  const gqa_case cases[] = {
      // B S nh kvh H  past total seqlens   packed rot inter rot/2 softcap
      {1, 5, 4, 2, 16, 0, 5, {4, 0}, 0, 1, 0, 8, 0},      // first prompt, half-split rotary
      {2, 4, 4, 1, 16, 0, 4, {3, 3}, 1, 1, 1, 8, 0},      // packed QKV, interleaved
      {1, 1, 4, 2, 16, 7, 8, {7, 0}, 0, 1, 0, 8, 0},      // decode, past 7
      {1, 1, 6, 2, 32, 9, 10, {9, 0}, 1, 1, 0, 8, 0},     // decode, partial rotary (16 of 32)
      {2, 1, 4, 2, 16, 6, 7, {6, 6}, 0, 0, 0, 8, 30.f},   // decode, no rotary, softcap
      {2, 1, 4, 2, 16, 6, 6, {5, 3}, 0, 1, 0, 8, 0},      // ragged decode: right-padded past
      {1, 1, 4, 2, 16, 16, 9, {8, 0}, 0, 1, 1, 8, 0},     // past buffer longer than the sequence
      {1, 3, 4, 2, 16, 4, 7, {6, 0}, 0, 1, 0, 8, 0},      // a 3-token step after a prompt (batch 1)
      // split decode (keys in chunks over the threads, partial softmax per chunk, combined):
      {1, 1, 14, 2, 64, 700, 701, {700, 0}, 0, 1, 0, 32, 0}, // Qwen2.5-0.5B's heads, past 700
      {2, 1, 4, 2, 16, 400, 400, {399, 150}, 1, 1, 0, 8, 0}, // ragged: chunks per entry's length
      {1, 1, 4, 1, 32, 520, 521, {520, 0}, 0, 0, 0, 8, 30.f}, // one KV group, softcap
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) run_case(h, &cases[i], dir, i);
  const rope_case ropes[] = {
      // B S N  H  bnsh rot inter pos1 heads-attr
      {2, 3, 4, 16, 0, 0, 0, 0, 0}, {1, 4, 2, 32, 1, 0, 1, 1, 0}, {2, 2, 3, 32, 0, 16, 0, 0, 1},
      {1, 1, 4, 64, 0, 0, 1, 1, 1}, {2, 5, 2, 16, 1, 0, 0, 0, 0},
  };
  for (int i = 0; i < (int)(sizeof ropes / sizeof ropes[0]); i++) run_rope(h, &ropes[i], dir, i);
  fbx_host_close(h);
  printf("msft-gqa: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
