/* Our events inside ONNX Runtime's own profile (OrtEpProfilerImpl).
 *
 * Wiring (the OrtEp's CreateProfiler callback):
 *   static OrtStatus *ORT_API_CALL ep_create_profiler(OrtEp *this_ptr, OrtEpProfilerImpl **out) {
 *     fbx_ep *ep = (fbx_ep *)this_ptr;
 *     return fbx_ep_profiler_create(FBX_ORT, FBX_ORT_EP, ep->trace, out);
 *   }
 * CreateProfiler runs for every session; collection starts only at
 * StartProfiling (which sets FBX_TRACE_F_PROFILER, so fbx_trace_complete /
 * fbx_trace_instant also buffer their events) and the events go to ORT at
 * EndProfiling as "Kernel" events, timestamps mapped with
 *   ts_us = (offset_ns + (ep_now - ep_start)) / 1000.
 * Each event carries its Fusebox category as arg "fbx_cat". */
#ifndef FBX_EP_PROFILER_H
#define FBX_EP_PROFILER_H

#include <onnxruntime_c_api.h>

#include "../trace/trace.h"

/* *out: a new profiler that ORT owns (it calls Release). session: the OrtEp's
 * trace session (may be NULL): events recorded on threads bound to another
 * session are left out. api/ep_api must outlive the profiler. */
OrtStatus *fbx_ep_profiler_create(const OrtApi *api, const OrtEpApi *ep_api, fbx_trace_session *session,
                                  OrtEpProfilerImpl **out);

#endif
