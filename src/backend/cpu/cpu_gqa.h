/* GQA internals shared by cpu_attention.c (the op) and cpu_gqa_rows.c (its row kernel). */
#ifndef FBX_BACKEND_CPU_GQA_H
#define FBX_BACKEND_CPU_GQA_H

#include <stdint.h>

/* One query row of one KV group: for each of the group's hpg heads h,
 *   o[h H .. h H + H) = softmax_t(score(q_h . K[t])) @ V[0..n),
 * score(x) = scale x, or softcap tanh(scale x / softcap) when softcap > 0.
 * q (hpg, H) rows of H floats; K, V (n, H) rows of H floats; sc: scratch for the
 * probabilities, (hpg, ldsc) with ldsc >= n; o (hpg, H). n >= 1. */
void fbx__gqa_group_row(const float *q, const float *K, const float *V, int64_t n, int64_t hpg, int64_t H,
                        float scale, float softcap, float *sc, int64_t ldsc, float *o);

/* The same over one chunk of the keys (split decode: every thread streams part of the
 * cache), unnormalised: per head h, mh[h] = max_t score, lh[h] = sum_t exp(score - mh[h]),
 * o[h H ..) = sum_t exp(score - mh[h]) V[t]. n = 0 gives mh = -inf, lh = 0, o = 0. */
void fbx__gqa_group_part(const float *q, const float *K, const float *V, int64_t n, int64_t hpg, int64_t H,
                         float scale, float softcap, float *sc, int64_t ldsc, float *o, float *mh, float *lh);

/* Most chunks one query row's keys are split into (fbx__gqa_combine's stack). */
#define FBX__GQA_MAX_CHUNKS 64

/* The softmax over all chunks from nc <= FBX__GQA_MAX_CHUNKS parts of fbx__gqa_group_part:
 * M = max_c pm, w_c = exp(pm_c - M), o_h = sum_c w_c po_c / sum_c w_c pl_c (exact softmax
 * semantics: the same sums regrouped). po (nc, hpg, H), pm / pl (nc, hpg); o (hpg, H). */
void fbx__gqa_combine(const float *po, const float *pm, const float *pl, int64_t nc, int64_t hpg, int64_t H,
                      float *o);

#endif
