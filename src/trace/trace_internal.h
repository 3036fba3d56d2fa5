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
/* The text of a FBX_TARG_SHAPES value (trace.h), unquoted: "1x16x64,1x64". */
void fbx__sbuf_shapes(fbx__sbuf *b, const int64_t *v, int64_t n);
/* ---- binary event records (hot path -> per-thread buffers; JSON only at flush) ----
 * A record is an fbx__rec header followed by, in order: the name string, the
 * category string (not for RAW/META), then per argument: one type byte
 * (fbx_trace_arg_type), the key string, the value (8 bytes for INT/DBL, a
 * string for STR; for SHAPES a uint32 count n + n int64s). Records are padded
 * to 8 bytes with zeros (the flush memoizes formatting by record bytes). A string is either
 * FBX__REC_STR_PTR + a uint32 (0 = NULL, else 1 + the offset of a literal in
 * this module's read-only segment, fbx__trace_ro_base: valid until the module
 * is unloaded, and the module flushes before that) or FBX__REC_STR_COPY +
 * uint32 length + the bytes + NUL. No field is aligned: read with memcpy. */
extern const char *fbx__trace_ro_base;
enum { FBX__REC_X = 1, FBX__REC_I, FBX__REC_C, FBX__REC_META, FBX__REC_RAW, FBX__REC_OP };
enum { FBX__REC_STR_PTR = 0, FBX__REC_STR_COPY = 1 };
typedef struct fbx__rec {
  uint32_t size;    /* bytes, header included, multiple of 8 */
  uint8_t kind;     /* FBX__REC_* */
  uint8_t counted;  /* subject to the event cap */
  uint16_t n_args;
  uint64_t t0, t1;  /* clock ns; for C, t1 holds the double value's bits */
} fbx__rec;
/* FBX__REC_OP (fbx_trace_op): no name or category; n_args is 0 (the site
 * knows how many events the record stands for: fbx_trace_op_site.n_events).
 * Body: the site pointer (8), flops (double), the strings dtype, variant,
 * reason, then uint32 n_in and n_out and the n_in + n_out tensors, each a
 * uint32 head (bits 0-7: the rank as int8, -1 = absent; 8-23: the element
 * size; 31: wide) followed by rank dims, uint32 each, or int64 each when
 * wide (a dim >= 2^31). Smaller records: the buffer's memory traffic is a
 * large part of tracing's cost. */

/* Formats one record (",\n{...}") for thread tid; base = trace clock origin. */
void fbx__trace_format_rec(fbx__sbuf *b, const fbx__rec *r, int pid, int tid, uint64_t base);
/* Formats the first `allow` (>= 1) of the events of a FBX__REC_OP record;
 * returns how many were written (0 on OOM, with b as it was). */
int fbx__trace_format_op(fbx__sbuf *b, const fbx__rec *r, int pid, int tid, uint64_t base, int allow);
/* {"name":kind,"ph":"M",...,"args":{"name":name}} */
void fbx__trace_append_meta(fbx__sbuf *b, const char *kind, int pid, int tid, const char *name);

/* The writer's flush, for events formatted outside the thread buffers (the
 * GPU module's device records): emit appends one event object (no leading
 * comma); counted ones are admitted against the event cap like every other
 * (json NULL: one counted event lost, counted as dropped); room says whether
 * a counted event would still be admitted (past the cap, skip formatting it).
 * Valid only during the flush's call of fbx__trace_gpu_process. */
typedef struct fbx__trace_out {
  void (*emit)(const char *json, size_t n, bool counted);
  bool (*room)(void);
  int pid;
} fbx__trace_out;
/* Formats every thread buffer's records and then the device records waiting
 * in trace_gpu.c (closing its open slices when gpu_final) into the file. */
void fbx__trace_flush_all(bool gpu_final);

/* Appends one pre-formatted event object (no leading comma) for the calling
 * thread. counted=false bypasses the event cap (metadata, summary). */
void fbx__trace_emit_raw(const char *json, size_t n, bool counted);
int64_t fbx__trace_dropped(void);
int64_t fbx__trace_recorded(void);

/* ---- op sites (trace_op.c) ---- */
struct fbx_trace_op_site {
  uint64_t ns, calls;          /* executions and their host time (atomic adds) */
  fbx_trace_session *session;  /* owner (NULL: the process-wide table) */
  struct fbx_trace_op_site *next; /* hash chain of the owner's table */
  uint64_t hash;
  const void *scope;
  int node_id;
  int n_events;                /* events per execution: the op span, [fast], [composed] and its counter sample */
  char *op, *node, *domain, *device, *fast_span, *fast_kernel, *variant_suffix, *composed_op, *composed_reason;
  void *json;                  /* constant JSON pieces (trace_json.c), built at the first flush */
  uint64_t dev_ns, dev_calls;  /* device time of its kernels and executions that had some (trace_gpu.c; atomic adds) */
  char *dev_json;              /* trace_gpu.c: its device records' constant args, "op":..,"node":..,"node_id":N, */
  size_t dev_json_len;         /* (escaped once, under trace_gpu.c's builder lock) */
};
/* A table of sites, interned by content; the session embeds one. */
typedef struct fbx__site_table {
  int lk;                      /* spin lock: lookups happen at plan build, not per op */
  struct fbx_trace_op_site **slots;
  uint32_t cap, n;
} fbx__site_table;
fbx__site_table *fbx__trace_session_sites(fbx_trace_session *s); /* trace_session.c */
/* Calls fn on every site of t (under its lock). */
void fbx__site_table_visit(fbx__site_table *t, void (*fn)(void *ctx, const struct fbx_trace_op_site *), void *ctx);
void fbx__site_table_free(fbx__site_table *t); /* the sites and their JSON pieces */
/* Writer (trace_writer.c): one FBX__REC_OP record for the calling thread. */
void fbx__trace_record_op(struct fbx_trace_op_site *site, uint64_t t0, uint64_t t1, const fbx_trace_op_run *r);
/* One execution of site into its statistics (atomic adds). With FUSEBOX_TRACE
 * on, the flush does this per record, so the recording thread never touches
 * the site (a cache miss per node); records dropped on the hot path come here
 * directly. */
void fbx__trace_site_account(struct fbx_trace_op_site *site, uint64_t ns);
/* Session: one more composed execution; emits the fusebox.composed_path_count counter. */
void fbx__trace_session_composed_tick(fbx_trace_session *s);
/* Session: one more composed execution; returns the running count (the
 * counter sample an op record's flush writes). */
int64_t fbx__trace_session_composed_next(fbx_trace_session *s);

/* Session (trace_session.c): fast/composed spans seen by fbx_trace_complete. */
void fbx__trace_session_note_span(const char *name, const char *cat, const fbx_trace_arg *args, int n_args);

/* Profiler store (trace_profiler.c) */
void fbx__trace_profiler_record(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns,
                                const fbx_trace_arg *args, int n_args);
/* A device record's event (any thread): linked to ORT's event through its eval, owned by session. */
void fbx__trace_profiler_record_dev(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns,
                                    const fbx_trace_arg *args, int n_args, uint64_t eval,
                                    const fbx_trace_session *session);

/* Records the (wall, cpu) starting point of the util_pct counter, so the very
 * first sample after init already has an interval (trace_counters.c). */
void fbx__trace_counters_baseline(void);

/* GPU (trace_gpu.c): reads FUSEBOX_GPU_CAPTURE / FUSEBOX_GPU_CAPTURE_EVAL at
 * init; returns the flags they turn on (FBX_TRACE_F_GPU_CAPTURE | FBX_TRACE_F_NVTX). */
int fbx__trace_gpu_env(void);
/* GPU (trace_gpu.c): the session summary's device-time lines (process-wide
 * totals over the device-side evals so far); nothing when no device record came. */
void fbx__trace_gpu_summary(fbx__sbuf *o);
/* GPU (trace_gpu.c): runs the device records that wait (stored binary at
 * arrival) through the slice builder: their events go to out (the writer's
 * flush, under its lock) or, out NULL (no trace file), only to the capture
 * file, ORT's profiler store and the statistics; final also closes the open
 * slices. Takes the GPU module's locks: never call it holding them. */
void fbx__trace_gpu_process(const fbx__trace_out *out, bool final);
/* GPU (trace_gpu.c): the waiting device records processed now, through the
 * writer when a trace file is open (ORT's profiler calls it before reading). */
void fbx__trace_gpu_pending_flush(void);

#endif
