/* Convex clustering: hand-built DAGs (incl. the diamond through an unclaimed
 * node), the merging of independent pieces, the cap on the number of groups,
 * and random DAGs checked against a naive reachability reference: every group
 * convex, and no two groups left that could legally be one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "onnx/onnx_cluster.h"

#include "common/check.h"

/* A test graph: value 0 is the graph input, node i writes value i+1 and
 * reads the outputs of its predecessors (or value 0 when it has none). */
#define MAXN 4096
#define MAXP 4
typedef struct tg {
  fbx_onnx_graph g;
  fbx_onnx_node nodes[MAXN];
  fbx_onnx_value values[MAXN + 1];
  int ins[MAXN][MAXP];
  int outs[MAXN];
  int npred[MAXN];
  int pred[MAXN][MAXP];
} tg;

static tg *tg_new(int n) {
  tg *t = calloc(1, sizeof *t);
  t->g.n_nodes = n;
  t->g.n_values = n + 1;
  t->g.nodes = t->nodes;
  t->g.values = t->values;
  for (int i = 0; i <= n; i++) t->values[i].name = "v";
  return t;
}
static void tg_edge(tg *t, int from, int to) { t->pred[to][t->npred[to]++] = from; }
static void tg_finish(tg *t) {
  for (int i = 0; i < t->g.n_nodes; i++) {
    fbx_onnx_node *nd = &t->nodes[i];
    nd->name = "n"; nd->op_type = "Op"; nd->domain = "";
    if (t->npred[i] == 0) {
      t->ins[i][0] = 0;
      nd->n_inputs = 1;
    } else {
      for (int k = 0; k < t->npred[i]; k++) t->ins[i][k] = t->pred[i][k] + 1;
      nd->n_inputs = t->npred[i];
    }
    nd->inputs = t->ins[i];
    t->outs[i] = i + 1;
    nd->outputs = &t->outs[i];
    nd->n_outputs = 1;
  }
}

/* ---- naive reference: reach[i][j] = path i -> j (length >= 1) ---- */
static unsigned char *naive_reach(const tg *t) {
  int n = t->g.n_nodes;
  unsigned char *r = calloc((size_t)n * n, 1);
  for (int j = 0; j < n; j++) /* topological: reach into j from preds and their reach */
    for (int k = 0; k < t->npred[j]; k++) {
      int p = t->pred[j][k];
      r[(size_t)p * n + j] = 1;
      for (int i = 0; i < n; i++)
        if (r[(size_t)i * n + p]) r[(size_t)i * n + j] = 1;
    }
  return r;
}
static int naive_convex(const tg *t, const unsigned char *r, const bool *in) {
  int n = t->g.n_nodes;
  for (int w = 0; w < n; w++) {
    if (in[w]) continue;
    int from = 0, to = 0;
    for (int s = 0; s < n; s++)
      if (in[s]) {
        from |= r[(size_t)s * n + w];
        to |= r[(size_t)w * n + s];
      }
    if (from && to) return 0;
  }
  return 1;
}

/* Every group convex (by the reference), claimed nodes only, contiguous ids. */
static int check_clusters(const tg *t, const bool *claimed, const int *cl, int nc, int min_nodes) {
  int n = t->g.n_nodes;
  unsigned char *r = naive_reach(t);
  bool *in = calloc((size_t)n, 1);
  int ok = 1;
  for (int i = 0; i < n; i++) {
    if (cl[i] >= 0 && !claimed[i]) ok = 0;
    if (cl[i] >= nc || cl[i] < FBX_ONNX_CLUSTER_OVER_LIMIT) ok = 0;
    if (min_nodes <= 1 && claimed[i] && cl[i] < 0) ok = 0;
  }
  for (int c = 0; c < nc && ok; c++) {
    int sz = 0;
    for (int i = 0; i < n; i++) { in[i] = cl[i] == c; sz += in[i]; }
    if (sz < min_nodes || sz == 0) ok = 0;
    if (!naive_convex(t, r, in)) ok = 0;
    if (!fbx_onnx_group_is_convex(&t->g, in)) ok = 0;
  }
  free(in);
  free(r);
  return ok;
}

/* No two groups whose union is still convex (by the reference): merging went as far as it may. */
static int check_no_mergeable_pair(const tg *t, const int *cl, int nc) {
  int n = t->g.n_nodes;
  unsigned char *r = naive_reach(t);
  bool *in = calloc((size_t)n, 1);
  int ok = 1;
  for (int a = 0; a < nc && ok; a++)
    for (int b = a + 1; b < nc && ok; b++) {
      for (int i = 0; i < n; i++) in[i] = cl[i] == a || cl[i] == b;
      if (naive_convex(t, r, in)) ok = 0;
    }
  free(in);
  free(r);
  return ok;
}

static void test_chain(void) {
  tg *t = tg_new(5);
  for (int i = 1; i < 5; i++) tg_edge(t, i - 1, i);
  tg_finish(t);
  bool cl[5] = {1, 1, 1, 1, 1};
  int of[5], nc = -1;
  fbx_status *s = fbx_onnx_cluster(&t->g, cl, 1, 0, of, &nc);
  CHECK(!s && nc == 1, "chain: one group, got %d", nc);
  CHECK(check_clusters(t, cl, of, nc, 1), "chain: clusters valid");
  /* an unclaimed node in the middle splits it */
  cl[2] = false;
  s = fbx_onnx_cluster(&t->g, cl, 1, 0, of, &nc);
  CHECK(!s && nc == 2 && of[2] == -1 && of[0] == of[1] && of[3] == of[4] && of[0] != of[3],
        "chain with a hole: two groups, got %d", nc);
  /* min_nodes 3 releases both 2-node groups */
  s = fbx_onnx_cluster(&t->g, cl, 3, 0, of, &nc);
  CHECK(!s && nc == 0 && of[0] == -1 && of[4] == -1, "min_nodes=3 releases small groups, got %d", nc);
  free(t);
}

/* a -> b -> d, a -> c -> d ; b unclaimed: {a,c,d} is not convex. */
static void test_diamond_through_unclaimed(void) {
  tg *t = tg_new(4);
  tg_edge(t, 0, 1); tg_edge(t, 0, 2); tg_edge(t, 1, 3); tg_edge(t, 2, 3);
  tg_finish(t);
  bool acd[4] = {1, 0, 1, 1}, ac[4] = {1, 0, 1, 0}, all[4] = {1, 1, 1, 1}, ad[4] = {1, 0, 0, 1};
  CHECK(!fbx_onnx_group_is_convex(&t->g, acd), "diamond: {a,c,d} not convex");
  CHECK(!fbx_onnx_group_is_convex(&t->g, ad), "diamond: {a,d} not convex");
  CHECK(fbx_onnx_group_is_convex(&t->g, ac), "diamond: {a,c} convex");
  CHECK(fbx_onnx_group_is_convex(&t->g, all), "diamond: all convex");
  int of[4], nc = -1;
  fbx_status *s = fbx_onnx_cluster(&t->g, acd, 1, 0, of, &nc);
  CHECK(!s && nc == 2 && of[1] == -1 && of[0] == of[2] && of[3] != of[0],
        "diamond: {a,c} + {d}, got nc=%d of=%d,%d,%d,%d", nc, of[0], of[1], of[2], of[3]);
  CHECK(check_clusters(t, acd, of, nc, 1), "diamond: clusters valid");
  s = fbx_onnx_cluster(&t->g, all, 1, 0, of, &nc);
  CHECK(!s && nc == 1, "diamond all claimed: one group, got %d", nc);
  free(t);
}

/* Two independent claimed branches joined by a claimed node merge into one. */
static void test_join_merges(void) {
  tg *t = tg_new(5); /* 0->1, 2->3, (1,3)->4 */
  tg_edge(t, 0, 1); tg_edge(t, 2, 3); tg_edge(t, 1, 4); tg_edge(t, 3, 4);
  tg_finish(t);
  bool cl[5] = {1, 1, 1, 1, 1};
  int of[5], nc = -1;
  fbx_status *s = fbx_onnx_cluster(&t->g, cl, 1, 0, of, &nc);
  CHECK(!s && nc == 1, "join: one group, got %d", nc);
  /* branch 2->3 passes through an unclaimed node 3 and 0->... : 0->1->4, 0->3(unclaimed)->4 */
  tg *u = tg_new(4); /* 0->1->3, 0->2->3, 2 unclaimed ; plus join */
  tg_edge(u, 0, 1); tg_edge(u, 1, 3); tg_edge(u, 0, 2); tg_edge(u, 2, 3);
  tg_finish(u);
  bool c2[4] = {1, 1, 0, 1};
  s = fbx_onnx_cluster(&u->g, c2, 1, 0, of, &nc);
  CHECK(!s && check_clusters(u, c2, of, nc, 1) && of[0] != of[3], "join through unclaimed stays split");
  free(t);
  free(u);
}

/* Independent pieces: 8 chains of 3 nodes with no edge between them, all feeding
 * node 24 (unclaimed), which feeds node 25 (claimed). The chains become one
 * group; 25 cannot join it (the path 24 -> 25 leaves through an unclaimed node). */
static void test_independent_pieces_merge(void) {
  tg *t = tg_new(26);
  for (int c = 0; c < 8; c++) {
    tg_edge(t, 3 * c, 3 * c + 1);
    tg_edge(t, 3 * c + 1, 3 * c + 2);
  }
  tg_finish(t);
  /* node 24 reads the last node of 4 of the chains (MAXP inputs), 25 reads 24 */
  t->npred[24] = 0;
  for (int c = 0; c < 4; c++) tg_edge(t, 3 * c + 2, 24);
  tg_edge(t, 24, 25);
  tg_finish(t);
  bool cl[26];
  for (int i = 0; i < 26; i++) cl[i] = i != 24;
  int of[26], nc = -1;
  fbx_status *s = fbx_onnx_cluster(&t->g, cl, 1, 0, of, &nc);
  int same = 1;
  for (int i = 1; i < 24; i++) same &= of[i] == of[0];
  CHECK(!s && nc == 2 && same && of[24] == FBX_ONNX_CLUSTER_NONE && of[25] >= 0 && of[25] != of[0],
        "8 independent chains -> one group, the node behind the unclaimed one apart (got %d groups)", nc);
  CHECK(check_clusters(t, cl, of, nc, 1) && check_no_mergeable_pair(t, of, nc), "independent pieces: valid");
  fbx_status_free(s);
  /* without node 25 claimed: one group of 24 nodes */
  cl[25] = false;
  s = fbx_onnx_cluster(&t->g, cl, 1, 0, of, &nc);
  CHECK(!s && nc == 1, "independent pieces into an unclaimed node: one group, got %d", nc);
  fbx_status_free(s);
  free(t);
}

/* The cap: 40 segments in a chain, segment k = (k % 4) + 1 claimed nodes then one
 * unclaimed node, so no two segments may merge. max_groups = 10 keeps the 10
 * largest (all of 4 nodes) and marks the rest FBX_ONNX_CLUSTER_OVER_LIMIT. */
static void test_group_cap(void) {
  int n = 0, seg_len[40];
  for (int k = 0; k < 40; k++) seg_len[k] = k % 4 + 1, n += seg_len[k] + 1;
  tg *t = tg_new(n);
  bool *cl = calloc((size_t)n, 1);
  int *seg = calloc((size_t)n, sizeof(int)), v = 0;
  for (int k = 0; k < 40; k++)
    for (int j = 0; j <= seg_len[k]; j++, v++) {
      if (v) tg_edge(t, v - 1, v);
      cl[v] = j < seg_len[k];
      seg[v] = k;
    }
  tg_finish(t);
  int *of = calloc((size_t)n, sizeof(int)), nc = -1;
  fbx_status *s = fbx_onnx_cluster(&t->g, cl, 1, 0, of, &nc);
  CHECK(!s && nc == 40, "40 separated segments, no cap: 40 groups, got %d", nc);
  fbx_status_free(s);
  s = fbx_onnx_cluster(&t->g, cl, 1, 10, of, &nc);
  int kept_small = 0, over = 0, wrong = 0;
  for (int i = 0; i < n; i++) {
    if (!cl[i]) wrong += of[i] != FBX_ONNX_CLUSTER_NONE;
    else if (of[i] >= 0) kept_small += seg_len[seg[i]] < 4;
    else over += of[i] == FBX_ONNX_CLUSTER_OVER_LIMIT;
  }
  /* 10 segments of 4 nodes kept; the other 30 segments (1+2+3 nodes each, 10 of each) marked */
  CHECK(!s && nc == 10 && kept_small == 0 && over == 60 && wrong == 0,
        "cap 10: %d groups kept, %d nodes of smaller segments kept, %d over the limit, %d wrong", nc, kept_small,
        over, wrong);
  CHECK(check_clusters(t, cl, of, nc, 2), "cap: kept groups valid");
  fbx_status_free(s);
  free(of); free(seg); free(cl); free(t);
}

static unsigned long long rng = 88172645463325252ull;
static unsigned rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (unsigned)(rng >> 11); }

static tg *random_dag(int n, int maxp, int window) {
  tg *t = tg_new(n);
  for (int i = 1; i < n; i++) {
    int np = (int)(rnd() % (unsigned)(maxp + 1));
    for (int k = 0; k < np; k++) {
      int lo = i - window < 0 ? 0 : i - window;
      int p = lo + (int)(rnd() % (unsigned)(i - lo));
      bool dup = false;
      for (int q = 0; q < t->npred[i]; q++) dup |= t->pred[i][q] == p;
      if (!dup) tg_edge(t, p, i);
    }
  }
  tg_finish(t);
  return t;
}

static void test_random(void) {
  int bad = 0, groups = 0, unmerged = 0;
  for (int it = 0; it < 300; it++) {
    int n = 4 + (int)(rnd() % 40);
    tg *t = random_dag(n, 3, 8);
    bool cl[64];
    int pct = 50 + (int)(rnd() % 50);
    for (int i = 0; i < n; i++) cl[i] = (int)(rnd() % 100) < pct;
    int of[64], nc = -1;
    fbx_status *s = fbx_onnx_cluster(&t->g, cl, 1, 0, of, &nc);
    if (s || !check_clusters(t, cl, of, nc, 1)) bad++;
    if (!s && !check_no_mergeable_pair(t, of, nc)) unmerged++;
    fbx_status_free(s);
    groups += nc;
    free(t);
  }
  CHECK(bad == 0, "random DAGs: %d of 300 had a non-convex or bad grouping", bad);
  CHECK(unmerged == 0, "random DAGs: %d of 300 left two groups that could be one", unmerged);
  CHECK(groups > 0, "random DAGs made groups");
}

static void test_big_fast(void) {
  int n = 4000;
  tg *t = random_dag(n, 3, 12);
  bool *cl = malloc((size_t)n);
  for (int i = 0; i < n; i++) cl[i] = (rnd() % 100) < 92;
  int *of = malloc((size_t)n * sizeof(int)), nc = -1;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  fbx_status *s = fbx_onnx_cluster(&t->g, cl, 1, 0, of, &nc);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
  CHECK(!s && nc > 0, "4000 nodes clustered");
  CHECK(ms < 1000.0, "4000 nodes in %.1f ms (< 1 s)", ms);
  /* spot-check convexity of every group with the library's own check (the
   * naive reference is O(n^3) at this size) */
  bool *in = malloc((size_t)n);
  int badc = 0;
  for (int c = 0; c < nc; c++) {
    for (int i = 0; i < n; i++) in[i] = of[i] == c;
    badc += !fbx_onnx_group_is_convex(&t->g, in);
  }
  CHECK(badc == 0, "4000 nodes: %d non-convex groups", badc);
  printf("  big graph: %d nodes -> %d groups in %.1f ms\n", n, nc, ms);
  free(in); free(cl); free(of); free(t);
}

/* The merge pass's worst case: a chain alternating claimed and unclaimed nodes,
 * where no two of the 2,000 groups may merge (every pair is checked). */
static void test_alternating_chain(void) {
  int n = 4000;
  tg *t = tg_new(n);
  bool *cl = malloc((size_t)n);
  for (int i = 0; i < n; i++) {
    if (i) tg_edge(t, i - 1, i);
    cl[i] = i % 2 == 0;
  }
  tg_finish(t);
  int *of = malloc((size_t)n * sizeof(int)), nc = -1;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  fbx_status *s = fbx_onnx_cluster(&t->g, cl, 1, 0, of, &nc);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
  CHECK(!s && nc == n / 2, "alternating chain: %d groups, expected %d", nc, n / 2);
  fbx_status_free(s);
  s = fbx_onnx_cluster(&t->g, cl, 1, FBX_ONNX_CLUSTER_MAX_GROUPS, of, &nc);
  CHECK(!s && nc == FBX_ONNX_CLUSTER_MAX_GROUPS, "alternating chain capped: %d groups", nc);
  fbx_status_free(s);
  printf("  alternating chain: %d nodes -> %d groups, uncapped in %.1f ms\n", n, n / 2, ms);
  free(of); free(cl); free(t);
}

int main(void) {
  test_chain();
  test_diamond_through_unclaimed();
  test_join_merges();
  test_independent_pieces_merge();
  test_group_cap();
  test_random();
  test_big_fast();
  test_alternating_chain();
  printf("cluster: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
