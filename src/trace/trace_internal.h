/* Internals shared by the src/trace/ files; nothing outside src/trace/ includes this. */
#ifndef FBX_TRACE_INTERNAL_H
#define FBX_TRACE_INTERNAL_H

#include "trace/trace.h"

#include <stdint.h>
#include <stdio.h>

/* Gate (trace_gate.c) */
extern int64_t fbx__trace_max_events;   /* FUSEBOX_TRACE_MAX_EVENTS, default 1,000,000 */
extern uint64_t fbx__trace_t0_ns;       /* clock at init: trace timestamps are relative to it */
const char *fbx__trace_path(void);      /* FUSEBOX_TRACE value, or NULL */
void fbx__trace_flags_set(int bits);    /* atomically OR bits into fbx__trace_flags */
void fbx__trace_flags_clear(int bits);
int fbx__trace_tid(void);               /* kernel thread id, cached per thread */

/* Writer (trace_writer.c) */
/* Opens the file and writes the header and trailer; 0 on success. Called once by the gate. */
int fbx__trace_writer_open(const char *path);
/* The growable character buffer that JSON is formatted into. */
typedef struct fbx__sbuf {
  char *p;
  size_t len, cap;
  int oom; /* set once an append failed; the buffer content is then incomplete */
} fbx__sbuf;
void fbx__sbuf_put(fbx__sbuf *b, const char *s, size_t n);
void fbx__sbuf_puts(fbx__sbuf *b, const char *s);
void fbx__sbuf_str(fbx__sbuf *b, const char *s);      /* a JSON string literal, escaped; NULL -> "" */
void fbx__sbuf_i64(fbx__sbuf *b, int64_t v);
void fbx__sbuf_dbl(fbx__sbuf *b, double v);            /* NaN/Inf -> null */
void fbx__sbuf_ts(fbx__sbuf *b, uint64_t ns);          /* microseconds with 3 decimals */
void fbx__sbuf_args(fbx__sbuf *b, const fbx_trace_arg *args, int n_args); /* a JSON object */
void fbx__sbuf_free(fbx__sbuf *b);
/* Appends one pre-formatted event object (no leading comma) for the calling
 * thread. counted=false bypasses the event cap (metadata, summary). */
void fbx__trace_emit_raw(const char *json, size_t n, bool counted);
int64_t fbx__trace_dropped(void);
int64_t fbx__trace_recorded(void);

/* Session (trace_session.c): fast/composed spans seen by fbx_trace_complete. */
void fbx__trace_session_note_span(const char *name, const char *cat, const fbx_trace_arg *args, int n_args);

/* Profiler store (trace_profiler.c) */
void fbx__trace_profiler_record(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns,
                                const fbx_trace_arg *args, int n_args);

#endif
