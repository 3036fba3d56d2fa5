/* Convex clustering of claimed nodes (see onnx_cluster.h).
 *
 * Facts used: nodes are in topological order, so when node v is visited every
 * group built so far holds only nodes before v and no path leads from v back
 * into them. A set S is convex iff no node p outside S that is a direct
 * predecessor of some x in S has an ancestor in S (the last outside node of
 * any path that leaves S and re-enters it is such a p).
 *
 * Memory: anc[v] is a bitset of v's ancestors, n*n/8 bytes (4 MiB for 5,800
 * nodes); groups are bitsets too. Everything is freed before returning. */
#include "onnx_cluster.h"

#include <stdint.h>
#include <string.h>

#include "../base/alloc.h"

typedef uint64_t word;

typedef struct dag {
  int n, words;
  int *pred_start, *preds;  /* CSR: direct predecessors of each node */
  word *anc;                /* (n, words): ancestors of each node */
} dag;

static inline bool bit_get(const word *b, int i) { return (b[i >> 6] >> (i & 63)) & 1; }
static inline void bit_set(word *b, int i) { b[i >> 6] |= (word)1 << (i & 63); }
static inline bool bits_meet(const word *a, const word *b, int words) {
  for (int i = 0; i < words; i++)
    if (a[i] & b[i]) return true;
  return false;
}

static void dag_free(dag *d) {
  fbx_free(d->pred_start);
  fbx_free(d->preds);
  fbx_free(d->anc);
  memset(d, 0, sizeof *d);
}

static fbx_status *dag_build(const fbx_onnx_graph *g, dag *d) {
  memset(d, 0, sizeof *d);
  int n = g->n_nodes;
  d->n = n;
  d->words = (n + 63) / 64;
  int nv = g->n_values > 0 ? g->n_values : 1;
  int *producer = fbx_malloc((size_t)nv * sizeof(int));
  int total = 0;
  for (int i = 0; i < n; i++) total += g->nodes[i].n_inputs;
  d->pred_start = fbx_malloc((size_t)(n + 1) * sizeof(int));
  d->preds = fbx_malloc((size_t)(total ? total : 1) * sizeof(int));
  d->anc = fbx_calloc((size_t)(n ? n : 1) * (size_t)(d->words ? d->words : 1), sizeof(word));
  if (!producer || !d->pred_start || !d->preds || !d->anc) {
    fbx_free(producer);
    dag_free(d);
    return FBX_ERR_OOM();
  }
  for (int i = 0; i < nv; i++) producer[i] = -1;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < g->nodes[i].n_outputs; k++) {
      int v = g->nodes[i].outputs[k];
      if (v >= 0 && v < g->n_values) producer[v] = i;
    }
  int m = 0;
  for (int i = 0; i < n; i++) {
    d->pred_start[i] = m;
    word *ai = d->anc + (size_t)i * d->words;
    for (int k = 0; k < g->nodes[i].n_inputs; k++) {
      int v = g->nodes[i].inputs[k];
      int p = (v >= 0 && v < g->n_values) ? producer[v] : -1;
      if (p < 0 || p == i) continue;
      if (p > i) { /* not topological: refuse rather than build bad groups */
        fbx_free(producer);
        dag_free(d);
        return FBX_ERR_ARG("cluster: nodes are not in topological order (node %d reads node %d)", i, p);
      }
      bool dup = false;
      for (int j = d->pred_start[i]; j < m; j++) dup |= d->preds[j] == p;
      if (dup) continue;
      d->preds[m++] = p;
      const word *ap = d->anc + (size_t)p * d->words;
      for (int w = 0; w < d->words; w++) ai[w] |= ap[w];
      bit_set(ai, p);
    }
  }
  d->pred_start[n] = m;
  fbx_free(producer);
  return NULL;
}

/* Is S convex, checking only the predecessors of the nodes in `members`
 * (the nodes of S)? */
static bool set_is_convex(const dag *d, const word *S, const int *members, int n_members) {
  for (int mi = 0; mi < n_members; mi++) {
    int x = members[mi];
    for (int j = d->pred_start[x]; j < d->pred_start[x + 1]; j++) {
      int p = d->preds[j];
      if (bit_get(S, p)) continue;
      if (bits_meet(d->anc + (size_t)p * d->words, S, d->words)) return false;
    }
  }
  return true;
}

bool fbx_onnx_group_is_convex(const fbx_onnx_graph *g, const bool *in_group) {
  dag d;
  fbx_status *st = dag_build(g, &d);
  if (st) {
    fbx_status_free(st);
    return false;
  }
  word *S = fbx_calloc((size_t)(d.words ? d.words : 1), sizeof(word));
  int *members = fbx_malloc((size_t)(d.n ? d.n : 1) * sizeof(int));
  bool ok = false;
  if (S && members) {
    int k = 0;
    for (int i = 0; i < d.n; i++)
      if (in_group[i]) {
        bit_set(S, i);
        members[k++] = i;
      }
    ok = set_is_convex(&d, S, members, k);
  }
  fbx_free(S);
  fbx_free(members);
  dag_free(&d);
  return ok;
}

fbx_status *fbx_onnx_cluster(const fbx_onnx_graph *g, const bool *claimed, int min_nodes,
                             int *cluster_of, int *n_clusters) {
  *n_clusters = 0;
  int n = g->n_nodes;
  for (int i = 0; i < n; i++) cluster_of[i] = -1;
  if (n == 0) return NULL;
  dag d;
  FBX_TRY(dag_build(g, &d));
  int W = d.words;
  /* groups: bitset + member list; at most n groups */
  word *gbits = fbx_calloc((size_t)n * (size_t)W, sizeof(word));
  int *next = fbx_malloc((size_t)n * sizeof(int));       /* next member of the same group */
  int *head = fbx_malloc((size_t)n * sizeof(int));
  int *size = fbx_calloc((size_t)n, sizeof(int));
  int *alias = fbx_malloc((size_t)n * sizeof(int));      /* merged group -> surviving group */
  int *cand = fbx_malloc((size_t)n * sizeof(int));
  word *S = fbx_malloc((size_t)W * sizeof(word));
  int *tmp = fbx_malloc((size_t)n * sizeof(int));
  fbx_status *st = NULL;
  if (!gbits || !next || !head || !size || !alias || !cand || !S || !tmp) {
    st = FBX_ERR_OOM();
    goto done;
  }
  int ng = 0;
  for (int v = 0; v < n; v++) {
    if (!claimed[v]) continue;
    /* candidate groups: distinct groups of v's claimed direct predecessors */
    int nc = 0;
    for (int j = d.pred_start[v]; j < d.pred_start[v + 1]; j++) {
      int p = d.preds[j];
      int c = cluster_of[p];
      if (c < 0) continue;
      while (alias[c] != c) c = alias[c];
      bool seen = false;
      for (int k = 0; k < nc; k++) seen |= cand[k] == c;
      if (!seen) cand[nc++] = c;
    }
    int chosen = -1;
    if (nc >= 2) { /* try joining all candidate groups through v */
      memset(S, 0, (size_t)W * sizeof(word));
      int k = 0;
      for (int c = 0; c < nc; c++) {
        const word *gb = gbits + (size_t)cand[c] * W;
        for (int w = 0; w < W; w++) S[w] |= gb[w];
        for (int x = head[cand[c]]; x >= 0; x = next[x]) tmp[k++] = x;
      }
      bit_set(S, v);
      tmp[k++] = v;
      if (set_is_convex(&d, S, tmp, k)) {
        chosen = cand[0];
        for (int c = 1; c < nc; c++) { /* merge cand[c] into chosen */
          int h = cand[c];
          word *gb = gbits + (size_t)chosen * W, *hb = gbits + (size_t)h * W;
          for (int w = 0; w < W; w++) gb[w] |= hb[w];
          int x = head[h];
          while (x >= 0) {
            int nx = next[x];
            cluster_of[x] = chosen;
            next[x] = head[chosen];
            head[chosen] = x;
            x = nx;
          }
          size[chosen] += size[h];
          size[h] = 0;
          head[h] = -1;
          alias[h] = chosen;
        }
      }
    }
    if (chosen < 0) { /* join the first single group that stays convex with v */
      for (int c = 0; c < nc && chosen < 0; c++) {
        const word *gb = gbits + (size_t)cand[c] * W;
        bool ok = true;
        for (int j = d.pred_start[v]; j < d.pred_start[v + 1] && ok; j++) {
          int p = d.preds[j];
          if (bit_get(gb, p)) continue;
          if (bits_meet(d.anc + (size_t)p * W, gb, W)) ok = false;
        }
        if (ok) chosen = cand[c];
      }
    }
    if (chosen < 0) { /* a new group */
      chosen = ng++;
      head[chosen] = -1;
      alias[chosen] = chosen;
    }
    bit_set(gbits + (size_t)chosen * W, v);
    cluster_of[v] = chosen;
    next[v] = head[chosen];
    head[chosen] = v;
    size[chosen]++;
  }
  /* release small groups, renumber the rest densely in order of first node */
  for (int c = 0; c < ng; c++) tmp[c] = -1;
  int out = 0;
  for (int v = 0; v < n; v++) {
    int c = cluster_of[v];
    if (c < 0) continue;
    if (size[c] < min_nodes) {
      cluster_of[v] = -1;
      continue;
    }
    if (tmp[c] < 0) tmp[c] = out++;
    cluster_of[v] = tmp[c];
  }
  *n_clusters = out;
done:
  fbx_free(gbits); fbx_free(next); fbx_free(head); fbx_free(size);
  fbx_free(alias); fbx_free(cand); fbx_free(S); fbx_free(tmp);
  dag_free(&d);
  return st;
}
