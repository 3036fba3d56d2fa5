/* EP options: the keys a host passes to SessionOptionsAppendExecutionProvider_V2.
 * Pure string parsing, no ORT types, so tests/ep/test_options.c can check it
 * without a runtime. ORT stores the keys as session config entries
 * "ep.fuseboxexecutionprovider.<key>"; ep_ep.c strips that prefix and calls
 * fbx_ep_options_set() per key. */
#ifndef FBX_EP_OPTIONS_H
#define FBX_EP_OPTIONS_H

#include <stdbool.h>

#include "../base/status.h"

typedef enum fbx_ep_device { FBX_EP_DEVICE_CPU, FBX_EP_DEVICE_CUDA } fbx_ep_device;

/* Upper bounds of the numeric options (a value past one is refused, never clamped). */
#define FBX_EP_DEVICE_ID_MAX 1023   /* parsed; validate() then wants 0 for the one CPU device */
#define FBX_EP_THREADS_MAX 256      /* the CPU thread pool's own limit */
#define FBX_EP_CACHE_LIMIT_MAX 1024 /* the plan table is allocated at this size per fused subgraph */

typedef struct fbx_ep_options {
  fbx_ep_device device;   /* "cpu" (default) | "cuda" */
  int device_id;          /* 0..FBX_EP_DEVICE_ID_MAX, default 0; must be 0 on the CPU */
  int threads;            /* 0..FBX_EP_THREADS_MAX, 0 = all online cores (default) */
  bool compile;           /* "on" (default) | "off": off = always eager */
  int cache_limit;        /* 1..FBX_EP_CACHE_LIMIT_MAX, default 16: plans cached per fused subgraph */
  bool tf32;              /* "on" | "off" (default): TF32 tensor cores for fp32 GEMMs on cuda */
  bool ort_stream;        /* "on" (default) | "off": on a GPU OrtEpDevice, Compute runs on the stream ORT gives it
                             and leaves the wait to ORT; off: on Fusebox's own queue, waited for at the end of
                             every Compute (the behaviour before streams; for A/B measurements) */
  bool device_set;        /* the host gave 'device' (else the OrtEpDevice decides: ep_ep.c) */
  bool device_id_set;     /* the host gave 'device_id' */
} fbx_ep_options;

/* The session config prefix ORT gives our keys: "ep." + lower-case EP name + ".". */
#define FBX_EP_NAME "FuseboxExecutionProvider"
#define FBX_EP_OPTION_PREFIX "ep.fuseboxexecutionprovider."

void fbx_ep_options_default(fbx_ep_options *o);
/* Set one key. Unknown key or bad value -> FBX_STATUS_INVALID_ARG naming the
 * key and the accepted keys/values. Numbers are plain decimal digits, nothing
 * around them (" 2", "2x", "-1", "" are bad values). */
fbx_status *fbx_ep_options_set(fbx_ep_options *o, const char *key, const char *value);
/* Checks that need the whole set (e.g. tf32 only with device=cuda). */
fbx_status *fbx_ep_options_validate(const fbx_ep_options *o);

#endif
