// ort_host — a small host library over the ONNX Runtime C API, loaded with dlopen.
//
// Used by the `fusebox` program, the tests and the benchmarks. It never links ORT:
// libonnxruntime 1.29 and 1.30 export OrtGetApiBase under different symbol versions,
// so the library is dlopen'ed and the API table fetched with GetApi(ORT_API_VERSION)
// (29, from the 1.29 headers).
//
// Errors: every function that can fail returns `char *`: NULL on success, otherwise a
// heap-allocated message (ORT's own status text included) that the caller frees with
// fbx_host_err_free(). Nothing here calls exit() or abort().
//
// Typical use:
//   fbx_host *h; char *err = fbx_host_open(NULL, NULL, &h);       // env, paths resolved
//   fbx_host_session_opts o = fbx_host_session_opts_default(); o.use_fusebox = 1;
//   fbx_host_session *s; err = fbx_host_session_create(h, "m.onnx", &o, &s);
//   fbx_host_tensor in = {0}; err = fbx_host_tensor_alloc(&in, "x", FBX_HOST_F32, 2, dims);
//   fbx_host_tensor_fill_normal(&in, 42);
//   fbx_host_tensor *outs; size_t n_out; err = fbx_host_session_run(s, &in, 1, &outs, &n_out);
//   ... fbx_host_tensors_free(outs, n_out); fbx_host_tensor_free(&in);
//   fbx_host_session_destroy(s); fbx_host_close(h);
#ifndef FBX_TESTS_ORT_HOST_H
#define FBX_TESTS_ORT_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ONNX element types (the same numbers as ONNXTensorElementDataType / TensorProto.DataType).
enum {
  FBX_HOST_UNDEFINED = 0,
  FBX_HOST_F32 = 1,
  FBX_HOST_U8 = 2,
  FBX_HOST_I8 = 3,
  FBX_HOST_U16 = 4,
  FBX_HOST_I16 = 5,
  FBX_HOST_I32 = 6,
  FBX_HOST_I64 = 7,
  FBX_HOST_STRING = 8,
  FBX_HOST_BOOL = 9,
  FBX_HOST_F16 = 10,
  FBX_HOST_F64 = 11,
  FBX_HOST_U32 = 12,
  FBX_HOST_U64 = 13,
  FBX_HOST_BF16 = 16,
};

#define FBX_HOST_MAX_RANK 16
#define FBX_HOST_EP_NAME "FuseboxExecutionProvider"
#define FBX_HOST_EP_REGISTRATION "Fusebox"

typedef struct fbx_host fbx_host;                  // ORT library + OrtEnv (one per process)
typedef struct fbx_host_session fbx_host_session;  // one OrtSession + its I/O description

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

void fbx_host_err_free(char *err);                        // free(err); NULL is fine
char *fbx_host_errf(const char *fmt, ...)                 // build an error message (heap)
    __attribute__((format(printf, 1, 2)));

// ---------------------------------------------------------------------------------------
// Library / environment
// ---------------------------------------------------------------------------------------

// Open ONNX Runtime and create its OrtEnv (log level WARNING).
//   ort_lib: NULL -> $FUSEBOX_ORT_LIB -> <repo>/.deps/lib/libonnxruntime.1.30.so found by
//            walking up from the directory of /proc/self/exe (build/, build/tests/, ...).
//   ep_lib:  NULL -> $FUSEBOX_EP_LIB -> libfusebox_ep.so next to the executable or in a
//            parent directory (up to 3 levels). Resolved now, registered lazily at the
//            first session with use_fusebox (so ORT-only use works without the EP built).
// *out is owned by the caller: fbx_host_close().
char *fbx_host_open(const char *ort_lib, const char *ep_lib, fbx_host **out);
void fbx_host_close(fbx_host *h);  // releases env and dlclose()s; sessions must be gone

const char *fbx_host_ort_path(const fbx_host *h);  // resolved ORT library path
const char *fbx_host_ep_path(const fbx_host *h);   // resolved EP path ("" if none found)
const char *fbx_host_ort_version(const fbx_host *h);  // GetVersionString(), e.g. "1.30.0"
// Register the Fusebox EP library now (idempotent). Called by session create when needed.
char *fbx_host_register_fusebox(fbx_host *h);
// The underlying OrtApi (const OrtApi *) for callers that need more; cast as needed.
const void *fbx_host_ort_api(const fbx_host *h);
// The OrtEnv (OrtEnv *), likewise.
void *fbx_host_ort_env(const fbx_host *h);

// ---------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------

typedef struct fbx_host_session_opts {
  int use_fusebox;                  // 1: append the Fusebox EP (V2 API), else ORT CPU EP only
  const char *const *ep_keys;       // EP options given to SessionOptionsAppendExecutionProvider_V2
  const char *const *ep_vals;
  size_t n_ep_opts;
  int intra_threads;                // 0: ORT default
  const char *profile_prefix;       // non-NULL: EnableProfiling(prefix)
  const char *const *cfg_keys;      // session config entries (AddSessionConfigEntry)
  const char *const *cfg_vals;
  size_t n_cfg;
  int opt_level;                    // -1: ORT default; else GraphOptimizationLevel (0,1,2,99)
  int record_assignment;            // 1: session.record_ep_graph_assignment_info=1
  int fusebox_devices;              // which Fusebox OrtEpDevices to append: FBX_HOST_DEVICES_*
} fbx_host_session_opts;

enum { FBX_HOST_DEVICES_ALL = 0, FBX_HOST_DEVICES_CPU = 1, FBX_HOST_DEVICES_GPU = 2 };

fbx_host_session_opts fbx_host_session_opts_default(void);
// A session of model on Fusebox (fusebox = 1, EP option threads=N) or on ORT's CPU EP alone (0),
// both with `threads` intra-op threads: what a side-by-side test or benchmark compares. record: 1 sets
// record_assignment (ORT's own placement record, fbx_host_session_assignment).
char *fbx_host_session_create_threads(fbx_host *h, const char *model_path, int fusebox, int threads, int record,
                                      fbx_host_session **out);

// Create a session on `model_path`. *out owned by the caller: fbx_host_session_destroy().
char *fbx_host_session_create(fbx_host *h, const char *model_path,
                              const fbx_host_session_opts *opts, fbx_host_session **out);
void fbx_host_session_destroy(fbx_host_session *s);

// One model input or output as the session describes it. Owned by the session.
typedef struct fbx_host_io {
  char *name;
  int dtype;               // FBX_HOST_*; FBX_HOST_UNDEFINED for non-tensor values
  int rank;                // -1 if unknown
  int64_t dims[FBX_HOST_MAX_RANK];       // -1 for a dynamic dim
  char *dim_names[FBX_HOST_MAX_RANK];    // symbolic names ("" if none), never NULL
} fbx_host_io;

size_t fbx_host_session_input_count(const fbx_host_session *s);
size_t fbx_host_session_output_count(const fbx_host_session *s);
const fbx_host_io *fbx_host_session_input(const fbx_host_session *s, size_t i);
const fbx_host_io *fbx_host_session_output(const fbx_host_session *s, size_t i);
// Index of the named input/output or -1.
long fbx_host_session_input_find(const fbx_host_session *s, const char *name);
long fbx_host_session_output_find(const fbx_host_session *s, const char *name);

// The underlying OrtSession * (cast as needed).
void *fbx_host_session_ort(const fbx_host_session *s);
// The library the session was created with.
fbx_host *fbx_host_session_host(const fbx_host_session *s);

// ---------------------------------------------------------------------------------------
// Tensors (owned, CPU, C order)
// ---------------------------------------------------------------------------------------

typedef struct fbx_host_tensor {
  char *name;                        // heap, may be NULL
  int dtype;                         // FBX_HOST_*
  int rank;
  int64_t dims[FBX_HOST_MAX_RANK];
  void *data;                        // heap, nbytes long (may be NULL when nbytes == 0)
  size_t nbytes;
} fbx_host_tensor;

size_t fbx_host_dtype_size(int dtype);        // bytes per element, 0 if unsupported
const char *fbx_host_dtype_name(int dtype);   // "float32", "int64", ...
size_t fbx_host_tensor_numel(const fbx_host_tensor *t);

// Allocate a zero-filled tensor (t is overwritten; free with fbx_host_tensor_free).
char *fbx_host_tensor_alloc(fbx_host_tensor *t, const char *name, int dtype, int rank,
                            const int64_t *dims);
// The same with the data left uninitialised: for a caller that writes every byte (a copy).
char *fbx_host_tensor_alloc_for_copy(fbx_host_tensor *t, const char *name, int dtype, int rank,
                                     const int64_t *dims);
// Deep copy src into dst (dst overwritten).
char *fbx_host_tensor_copy(fbx_host_tensor *dst, const fbx_host_tensor *src);
void fbx_host_tensor_free(fbx_host_tensor *t);            // frees members, zeroes t
void fbx_host_tensors_free(fbx_host_tensor *ts, size_t n);  // frees members of each + the array
// Rename (copies name).
char *fbx_host_tensor_set_name(fbx_host_tensor *t, const char *name);

// Deterministic fills (seeded xorshift; same seed -> same data on every machine).
// Float types: N(0,1) (normal) or uniform [lo, hi). Integer types: uniform in [lo, hi]
// inclusive (the *_int variants). bool: fill_int with lo=0, hi=1.
void fbx_host_tensor_fill_normal(fbx_host_tensor *t, uint64_t seed);
void fbx_host_tensor_fill_uniform(fbx_host_tensor *t, uint64_t seed, double lo, double hi);
void fbx_host_tensor_fill_int(fbx_host_tensor *t, uint64_t seed, int64_t lo, int64_t hi);
void fbx_host_tensor_fill_const(fbx_host_tensor *t, double v);   // any numeric dtype

// Element access as double (any numeric dtype incl. f16/bf16/bool); set likewise.
double fbx_host_tensor_get(const fbx_host_tensor *t, size_t i);
void fbx_host_tensor_set(fbx_host_tensor *t, size_t i, double v);

// fp16 / bf16 helpers.
float fbx_host_f16_to_f32(uint16_t h);
uint16_t fbx_host_f32_to_f16(float f);

// .npy (format 1.0/2.0, little-endian, C order): float32 float64 float16 int64 int32 int8
// uint8 bool int16 uint16 uint32 uint64. Read: t overwritten (name left NULL).
char *fbx_host_npy_read(const char *path, fbx_host_tensor *t);
char *fbx_host_npy_write(const char *path, const fbx_host_tensor *t);

// ---------------------------------------------------------------------------------------
// Run
// ---------------------------------------------------------------------------------------

// Run with `inputs` (matched to the model inputs by name; every model input must be given,
// extra names are an error). Fetches every model output in session order and copies each into
// a fresh owned tensor: *outputs is a heap array of *n_outputs tensors, free with
// fbx_host_tensors_free(*outputs, *n_outputs). Input data is wrapped, not copied.
char *fbx_host_session_run(fbx_host_session *s, const fbx_host_tensor *inputs, size_t n_inputs,
                           fbx_host_tensor **outputs, size_t *n_outputs);

// ---------------------------------------------------------------------------------------
// IOBinding (ort_host_bind.c): inputs and outputs bound to host buffers the caller owns, so an
// output lands in memory the caller chose — e.g. present.* in the very buffer bound as
// past_key_values.* (one max-length KV buffer shared by past and present, as ONNX Runtime
// GenAI binds it with past_present_share_buffer).
// ---------------------------------------------------------------------------------------

typedef struct fbx_host_binding fbx_host_binding;

// *out owned by the caller: fbx_host_binding_destroy() (before the session).
char *fbx_host_binding_create(fbx_host_session *s, fbx_host_binding **out);
void fbx_host_binding_destroy(fbx_host_binding *b);
// Bind t under `name` (NULL: t->name) as an input / an output. t->data is wrapped, not copied
// (borrowed: it must outlive every run of the binding); an output's shape must be the one the
// model produces for that run. Binding a name again replaces the earlier value.
char *fbx_host_binding_input(fbx_host_binding *b, const char *name, const fbx_host_tensor *t);
char *fbx_host_binding_output(fbx_host_binding *b, const char *name, const fbx_host_tensor *t);
// RunWithBinding; outputs are in their bound buffers when it returns.
char *fbx_host_binding_run(fbx_host_binding *b);

// End profiling (session created with profile_prefix); *path is heap (free()).
char *fbx_host_session_end_profiling(fbx_host_session *s, char **path);

// ORT's own view of node placement (session created with record_assignment=1).
typedef struct fbx_host_assign {
  char *ep;       // EP name, e.g. "FuseboxExecutionProvider" or "CPUExecutionProvider"
  char *op_type;
  char *domain;
  char *node;     // node name
  int subgraph;   // index of ORT's assigned subgraph holding it (one per fused node of a compiling EP)
} fbx_host_assign;
// *nodes: heap array (free with fbx_host_assign_free). Fails when the ORT library lacks the
// API (older than 1.24) or recording was not enabled.
char *fbx_host_session_assignment(fbx_host_session *s, fbx_host_assign **nodes, size_t *n);
void fbx_host_assign_free(fbx_host_assign *nodes, size_t n);

// ---------------------------------------------------------------------------------------
// Compare
// ---------------------------------------------------------------------------------------

typedef struct fbx_host_cmp {
  int shape_mismatch;   // dtype or shape differ (other fields then 0)
  size_t numel;
  size_t n_bad;         // elements with |a-b| > atol + rtol*|b| (ints/bool: a != b); NaN==NaN
  double max_abs;       // max |a-b| over finite pairs
  double max_rel;       // max |a-b| / max(|b|, 1e-12) over finite pairs
  size_t worst_index;   // element index of max_abs
} fbx_host_cmp;

// a = candidate, b = reference. Fills *r; returns 1 if within tolerance, else 0.
int fbx_host_compare(const fbx_host_tensor *a, const fbx_host_tensor *b, double rtol, double atol,
                     fbx_host_cmp *r);

// Find a file of the repository (e.g. "models/gen/decoder_tiny.onnx"): $FUSEBOX_REPO/rel, else
// rel in the executable's directory and up to 5 parents, else rel from the working directory.
// 0 and out filled on success, -1 if not found.
int fbx_host_find_repo_file(const char *rel, char *out, size_t cap);

// "1x3x224x224" into buf (returns buf).
char *fbx_host_shape_str(int rank, const int64_t *dims, char *buf, size_t cap);

// Monotonic clock in seconds.
double fbx_host_now(void);
// Sleep ms milliseconds before a timed run, so the other EP's thread pool (ORT's workers and
// ours both spin a while after a run) has gone idle and does not steal this run's cores.
void fbx_host_settle(int ms);

#ifdef __cplusplus
}
#endif

#endif  // FBX_TESTS_ORT_HOST_H
