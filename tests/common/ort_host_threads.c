// fbx_host_session_create_threads (ort_host.h): the same intra-op thread count for both EPs.
#include <stdio.h>

#include "common/ort_host.h"

char *fbx_host_session_create_threads(fbx_host *h, const char *model_path, int fusebox, int threads, int record,
                                      fbx_host_session **out) {
  fbx_host_session_opts o = fbx_host_session_opts_default();
  char tbuf[16];
  const char *k[1] = {"threads"}, *v[1] = {tbuf};
  snprintf(tbuf, sizeof tbuf, "%d", threads);
  o.use_fusebox = fusebox;
  o.intra_threads = threads;
  o.record_assignment = record;
  o.ep_keys = k;
  o.ep_vals = v;
  o.n_ep_opts = fusebox ? 1 : 0;
  return fbx_host_session_create(h, model_path, &o, out); /* ORT copies the options at create */
}
