/* Convex clustering of claimed nodes (see onnx_cluster.h).
 *
 * Facts used: nodes are in topological order, so when node v is visited every
 * group built so far holds only nodes before v and no path leads from v back
 * into them. A set S is convex iff no node p outside S that is a direct
 * predecessor of some x in S has an ancestor in S (the last outside node of
 * any path that leaves S and re-enters it is such a p).
 *
 * Memory: anc[v] is a bitset of v's ancestors, n*n/8 bytes (4 MiB for 5,800
 * nodes); groups are bitsets too, and so are each group's outside predecessors
 * and their ancestors (for the merge pass): about 4 * n*n/8 bytes at most.
 * Everything is freed before returning. */
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
  for (int i = 0; i < n; i++) total += g->nodes[i].n_inputs + g->nodes[i].n_implicit;
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
    /* an If's bodies read outer values (implicit inputs): edges like any input's */
    const fbx_onnx_node *nd = &g->nodes[i];
    for (int k = 0; k < nd->n_inputs + nd->n_implicit; k++) {
      int v = k < nd->n_inputs ? nd->inputs[k] : nd->implicit[k - nd->n_inputs];
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

/* ---- groups: a bitset and a member list each; merged groups are left empty ---- */

typedef struct groups {
  int W;          /* words per bitset */
  int ng;         /* group ids handed out (0..ng-1) */
  word *bits;     /* (n, W): members of each group */
  /* For the merge pass (NULL before it), (ng, W) each, over the direct predecessors p
   * of a group's members outside the group (kept as supersets across merges):
   * xpred = those p, xanc = the union of their ancestors anc(p). */
  word *xpred, *xanc;
  int *head;      /* first member, -1 when empty */
  int *next;      /* (n nodes): next member of the same group */
  int *size;
  int *alias;     /* a merged group -> the group it went into */
} groups;

static int group_find(const groups *G, int c) {
  while (G->alias[c] != c) c = G->alias[c];
  return c;
}

static int group_new(groups *G) {
  int c = G->ng++;
  G->head[c] = -1;
  G->alias[c] = c;
  return c;
}

static void group_add(groups *G, int c, int v, int *cluster_of) {
  bit_set(G->bits + (size_t)c * G->W, v);
  cluster_of[v] = c;
  G->next[v] = G->head[c];
  G->head[c] = v;
  G->size[c]++;
}

/* Moves every member of h into c (bits, xanc, member list) and leaves h empty. */
static void group_absorb(groups *G, int c, int h, int *cluster_of) {
  if (!FBX_ASSERT(c != h && G->alias[c] == c && G->alias[h] == h)) return;
  word *cb = G->bits + (size_t)c * G->W, *hb = G->bits + (size_t)h * G->W;
  for (int w = 0; w < G->W; w++) cb[w] |= hb[w];
  if (G->xanc) {
    word *cx = G->xanc + (size_t)c * G->W, *hx = G->xanc + (size_t)h * G->W;
    word *cp = G->xpred + (size_t)c * G->W, *hp = G->xpred + (size_t)h * G->W;
    for (int w = 0; w < G->W; w++) {
      cx[w] |= hx[w];
      cp[w] |= hp[w];
    }
  }
  int x = G->head[h];
  while (x >= 0) {
    int nx = G->next[x];
    cluster_of[x] = c;
    G->next[x] = G->head[c];
    G->head[c] = x;
    x = nx;
  }
  G->size[c] += G->size[h];
  G->size[h] = 0;
  G->head[h] = -1;
  G->alias[h] = c;
}

/* Is group c convex? (set_is_convex over its member list) */
static bool group_is_convex(const dag *d, const groups *G, int c) {
  const word *S = G->bits + (size_t)c * G->W;
  for (int x = G->head[c]; x >= 0; x = G->next[x])
    for (int j = d->pred_start[x]; j < d->pred_start[x + 1]; j++) {
      int p = d->preds[j];
      if (!bit_get(S, p) && bits_meet(d->anc + (size_t)p * G->W, S, G->W)) return false;
    }
  return true;
}

/* Half of "may the disjoint convex groups from and to become one?": false when a path
 * leads from `from` through an outside node into `to` (the other half swaps them).
 * The last outside node of such a path is an outside predecessor p of `to` whose
 * ancestors meet `from`. If xanc[to] misses `from`, there is none; if it meets `from`
 * but no node of `from` is in xpred[to], such a p lies outside both (a recorded p
 * inside `to` leads back, through `to`'s own entry, to one of these two cases); only
 * when `from` feeds `to` directly are the predecessors walked. */
static bool one_way_ok(const dag *d, const groups *G, int from, int to) {
  int W = G->W;
  const word *fb = G->bits + (size_t)from * W;
  if (!bits_meet(G->xanc + (size_t)to * W, fb, W)) return true;
  if (!bits_meet(G->xpred + (size_t)to * W, fb, W)) return false;
  const word *tb = G->bits + (size_t)to * W;
  for (int x = G->head[to]; x >= 0; x = G->next[x])
    for (int j = d->pred_start[x]; j < d->pred_start[x + 1]; j++) {
      int p = d->preds[j];
      if (bit_get(tb, p) || bit_get(fb, p)) continue;
      if (bits_meet(d->anc + (size_t)p * W, fb, W)) return false;
    }
  return true;
}

/* Independent pieces (no path between them through an outside node) are merged
 * into one group, first fit in order of group id (the order of each group's first
 * node): N Adds feeding one node ORT keeps become one fused subgraph instead of N
 * (issue 8: ORT's partitioning grows about cubically with the number of fused nodes).
 * A merge can make another one legal (a node between two groups now inside one), so
 * the pass repeats until nothing merges, at most MERGE_PASSES times.
 * kept: scratch, (ng). Returns the merges made by the last pass. */
enum { MERGE_PASSES = 8 };

static int merge_pass(const dag *d, groups *G, int *cluster_of, int *kept) {
  int nk = 0, merged = 0;
  for (int c = 0; c < G->ng; c++) {
    if (G->size[c] == 0) continue;
    int into = -1;
    for (int t = 0; t < nk && into < 0; t++)
      if (one_way_ok(d, G, kept[t], c) && one_way_ok(d, G, c, kept[t])) into = kept[t];
    if (into >= 0) {
      group_absorb(G, into, c, cluster_of);
      merged++;
    } else {
      kept[nk++] = c;
    }
  }
  return merged;
}

static int merge_pieces(const dag *d, groups *G, int *cluster_of, int *kept) {
  int merged = 0;
  for (int pass = 0; pass < MERGE_PASSES; pass++) {
    merged = merge_pass(d, G, cluster_of, kept);
    if (!merged) break;
  }
  return merged;
}

fbx_status *fbx_onnx_cluster(const fbx_onnx_graph *g, const bool *claimed, int min_nodes, int max_groups,
                             int *cluster_of, int *n_clusters) {
  *n_clusters = 0;
  int n = g->n_nodes;
  for (int i = 0; i < n; i++) cluster_of[i] = FBX_ONNX_CLUSTER_NONE;
  if (n == 0) return NULL;
  dag d;
  FBX_TRY(dag_build(g, &d));
  int W = d.words;
  groups G = {.W = W};
  G.bits = fbx_calloc((size_t)n * (size_t)W, sizeof(word));
  G.next = fbx_malloc((size_t)n * sizeof(int));
  G.head = fbx_malloc((size_t)n * sizeof(int));
  G.size = fbx_calloc((size_t)n, sizeof(int));
  G.alias = fbx_malloc((size_t)n * sizeof(int));
  int *cand = fbx_malloc((size_t)n * sizeof(int));
  word *S = fbx_malloc((size_t)W * sizeof(word));
  int *tmp = fbx_malloc((size_t)n * sizeof(int));
  int *tmp2 = fbx_malloc((size_t)n * sizeof(int));
  fbx_status *st = NULL;
  if (!G.bits || !G.next || !G.head || !G.size || !G.alias || !cand || !S || !tmp || !tmp2) {
    st = FBX_ERR_OOM();
    goto done;
  }
  for (int v = 0; v < n; v++) {
    if (!claimed[v]) continue;
    /* candidate groups: distinct groups of v's claimed direct predecessors */
    int nc = 0;
    for (int j = d.pred_start[v]; j < d.pred_start[v + 1]; j++) {
      int c = cluster_of[d.preds[j]];
      if (c < 0) continue;
      c = group_find(&G, c);
      bool seen = false;
      for (int k = 0; k < nc; k++) seen |= cand[k] == c;
      if (!seen) cand[nc++] = c;
    }
    int chosen = -1;
    if (nc >= 2) { /* try joining all candidate groups through v */
      memset(S, 0, (size_t)W * sizeof(word));
      int k = 0;
      for (int c = 0; c < nc; c++) {
        const word *gb = G.bits + (size_t)cand[c] * W;
        for (int w = 0; w < W; w++) S[w] |= gb[w];
        for (int x = G.head[cand[c]]; x >= 0; x = G.next[x]) tmp[k++] = x;
      }
      bit_set(S, v);
      tmp[k++] = v;
      if (set_is_convex(&d, S, tmp, k)) {
        chosen = cand[0];
        for (int c = 1; c < nc; c++) group_absorb(&G, chosen, cand[c], cluster_of);
      }
    }
    if (chosen < 0) { /* join the first single group that stays convex with v */
      for (int c = 0; c < nc && chosen < 0; c++) {
        const word *gb = G.bits + (size_t)cand[c] * W;
        bool ok = true;
        for (int j = d.pred_start[v]; j < d.pred_start[v + 1] && ok; j++) {
          int p = d.preds[j];
          if (bit_get(gb, p)) continue;
          if (bits_meet(d.anc + (size_t)p * W, gb, W)) ok = false;
        }
        if (ok) chosen = cand[c];
      }
    }
    if (chosen < 0) chosen = group_new(&G);
    group_add(&G, chosen, v, cluster_of);
  }
  /* xpred and xanc of every group (the pass above merges through v and needs neither) */
  G.xpred = fbx_calloc((size_t)(G.ng ? G.ng : 1) * (size_t)W, sizeof(word));
  G.xanc = fbx_calloc((size_t)(G.ng ? G.ng : 1) * (size_t)W, sizeof(word));
  if (!G.xpred || !G.xanc) {
    st = FBX_ERR_OOM();
    goto done;
  }
  for (int v = 0; v < n; v++) {
    int c = cluster_of[v];
    if (c < 0) continue;
    const word *gb = G.bits + (size_t)c * W;
    word *gx = G.xanc + (size_t)c * W, *gp = G.xpred + (size_t)c * W;
    for (int j = d.pred_start[v]; j < d.pred_start[v + 1]; j++) {
      int p = d.preds[j];
      if (bit_get(gb, p)) continue;
      bit_set(gp, p);
      const word *ap = d.anc + (size_t)p * W;
      for (int w = 0; w < W; w++) gx[w] |= ap[w];
    }
  }
  merge_pieces(&d, &G, cluster_of, tmp);

  /* Groups kept: at least min_nodes nodes, and beyond max_groups only the largest
   * (earlier first on ties). live = tmp[0..n_live), in id order. */
  int n_live = 0;
  for (int c = 0; c < G.ng; c++)
    if (G.size[c] > 0 && G.size[c] >= min_nodes) tmp[n_live++] = c;
  int n_keep = max_groups > 0 && n_live > max_groups ? max_groups : n_live;
  for (int i = 0; i < n_keep && n_keep < n_live; i++) { /* partial selection sort by size */
    int best = i;
    for (int j = i + 1; j < n_live; j++) {
      int a = tmp[j], b = tmp[best];
      if (G.size[a] > G.size[b] || (G.size[a] == G.size[b] && a < b)) best = j;
    }
    int t = tmp[i];
    tmp[i] = tmp[best];
    tmp[best] = t;
  }
  /* fate of each group (tmp2): KEPT, FBX_ONNX_CLUSTER_OVER_LIMIT, or NONE (too small, merged away) */
  enum { KEPT = 1 };
  for (int c = 0; c < G.ng; c++) tmp2[c] = FBX_ONNX_CLUSTER_NONE;
  for (int i = 0; i < n_live; i++) tmp2[tmp[i]] = i < n_keep ? KEPT : FBX_ONNX_CLUSTER_OVER_LIMIT;
  /* Every step above keeps groups convex; were one not, ORT would drop every claim of
   * the call, so in a release build such a group goes back to ORT instead. Cost: each
   * claimed node's predecessors once, W words each. */
  for (int i = 0; i < n_keep; i++)
    if (!FBX_ASSERT(group_is_convex(&d, &G, tmp[i]))) tmp2[tmp[i]] = FBX_ONNX_CLUSTER_NONE;
  /* renumber the kept groups densely in order of first node */
  for (int c = 0; c < G.ng; c++) tmp[c] = -1;
  int out = 0;
  for (int v = 0; v < n; v++) {
    int c = cluster_of[v];
    if (c < 0) continue;
    if (tmp2[c] != KEPT) {
      cluster_of[v] = tmp2[c];
      continue;
    }
    if (tmp[c] < 0) tmp[c] = out++;
    cluster_of[v] = tmp[c];
  }
  *n_clusters = out;
done:
  fbx_free(G.bits); fbx_free(G.xpred); fbx_free(G.xanc); fbx_free(G.next); fbx_free(G.head); fbx_free(G.size);
  fbx_free(G.alias); fbx_free(cand); fbx_free(S); fbx_free(tmp); fbx_free(tmp2);
  dag_free(&d);
  return st;
}
