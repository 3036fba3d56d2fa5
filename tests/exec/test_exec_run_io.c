/* fbx_exec_compiled_run_io: inputs and outputs in device memory (what a GPU
 * OrtEpDevice gives Compute), on the opaque backend, whose device buffers the
 * host cannot dereference, against a naive reference computed here.
 *
 * Graph: x (2, 4) float32
 *   out0 = Relu(x) * 2      a device step's result: written in place into the output buffer
 *   out1 = x                a graph input passed through: copied on the device
 *   out2 = Shape(x)         host-side shape data: uploaded into the output buffer
 *   out3 = out0 again       a second position of one value: copied on the device
 * Cases: device input + device outputs (compiled, twice: the second run allocates
 * nothing, wraps the input, synchronises once; and eager), host input + device
 * outputs (uploaded, not wrapped), device input + host outputs (copied back), and
 * device io on a host-visible backend (refused with a message).
 * Aliasing: out = Transpose(x) bound to x's own buffer (IOBinding may bind one
 * buffer to an input and an output): a transpose written in place would read
 * what it already overwrote; the result must still be the transpose. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "common/check.h"
#include "exec/exec_compiled.h"

enum { R = 2, C = 4, N = R * C };

static fbx_ir_graph *build(void) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int x, two, r, y, s;
  fbx_ir_params sh;
  memset(&sh, 0, sizeof sh);
  fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, (int64_t[]){R, C}, (const char *[]){NULL, NULL}, &x);
  fbx_ir_graph_add_const_f32(g, 2.0f, &two);
  fbx_ir_graph_emit(g, FBX_IR_OP_RELU, (int[]){x}, 1, NULL, FBX_DTYPE_F32, 2, "r", "Relu", 0, &r);
  fbx_ir_graph_emit(g, FBX_IR_OP_MUL, (int[]){r, two}, 2, NULL, FBX_DTYPE_F32, 2, "y", "Mul", 1, &y);
  fbx_ir_graph_emit(g, FBX_IR_OP_SHAPE, (int[]){x}, 1, &sh, FBX_DTYPE_I64, 1, "s", "Shape", 2, &s);
  fbx_ir_graph_mark_output(g, y);
  fbx_ir_graph_mark_output(g, x);
  fbx_ir_graph_mark_output(g, s);
  fbx_ir_graph_mark_output(g, y);
  return g;
}

/* Output buffers: device buffers of be (dev) or host memory, one per output, kept across runs. */
typedef struct outs {
  fbx_backend *be;
  bool dev;
  void *buf[4];
  size_t bytes[4];
} outs;

static fbx_status *out_fn(void *ctx, int idx, const fbx_tensor *t, void **data, int *same_as_input) {
  outs *o = ctx;
  *same_as_input = -1;
  size_t n = fbx_tensor_nbytes(t);
  if (!o->buf[idx]) {
    o->bytes[idx] = n ? n : 1;
    if (o->dev) FBX_TRY(o->be->vt->buffer_alloc(o->be, o->bytes[idx], &o->buf[idx]));
    else if (!(o->buf[idx] = fbx_malloc(o->bytes[idx]))) return FBX_ERR_OOM();
  }
  if (o->bytes[idx] < n) return FBX_ERR("test: output %d grew", idx);
  *data = o->buf[idx];
  return NULL;
}

static void outs_free(outs *o) {
  for (int i = 0; i < 4; i++) {
    if (o->dev) o->be->vt->buffer_free(o->be, o->buf[i]);
    else fbx_free(o->buf[i]);
    o->buf[i] = NULL;
  }
}

/* The four outputs against the reference (read back from the device where they are there). */
static bool outputs_right(outs *o, const float *x) {
  float y[N], y2[N], xo[N];
  int64_t s[2];
  void *dst[4] = {y, xo, s, y2};
  size_t bytes[4] = {sizeof y, sizeof xo, sizeof s, sizeof y2};
  for (int i = 0; i < 4; i++) {
    fbx_status *st = o->dev ? o->be->vt->copy_to_host(o->be, dst[i], o->buf[i], bytes[i]) : NULL;
    if (!o->dev) memcpy(dst[i], o->buf[i], bytes[i]);
    if (st) {
      fbx_status_free(st);
      return false;
    }
  }
  for (int i = 0; i < N; i++) {
    float want = x[i] > 0 ? 2 * x[i] : 0;
    if (y[i] != want || y2[i] != want || xo[i] != x[i]) return false;
  }
  return s[0] == R && s[1] == C;
}

static void run_case(fbx_backend *opq, fbx_backend *cpu, bool compile, bool in_dev, bool out_dev, const char *what) {
  float x[N];
  for (int i = 0; i < N; i++) x[i] = (float)(i - 3) * 0.5f;
  void *dx = NULL;
  CHECK_TRY(opq->vt->buffer_alloc(opq, sizeof x, &dx));
  CHECK_TRY(opq->vt->copy_from_host(opq, dx, x, sizeof x));
  fbx_exec_compile_options co = {.compile = compile, .cache_limit = 4, .host = cpu};
  fbx_exec_compiled *c = NULL;
  fbx_status *st = fbx_exec_compiled_create(build(), opq, &co, what, &c);
  CHECK(!st, "%s: create: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  outs o = {.be = opq, .dev = out_dev};
  bool on[1] = {in_dev};
  fbx_exec_run_io io = {.input_on_device = on, .outputs_on_device = out_dev};
  fbx_tensor in = {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {R, C}, .data = in_dev ? dx : x};
  for (int run = 0; c && run < 2; run++) {
    fbx_exec_run_report r;
    st = fbx_exec_compiled_run_io(c, &in, 1, &io, out_fn, &o, &r);
    CHECK(!st, "%s run %d: %s", what, run, st ? fbx_status_message(st) : "");
    if (st) {
      fbx_status_free(st);
      break;
    }
    CHECK(outputs_right(&o, x), "%s run %d: outputs match the reference", what, run);
    CHECK(r.wrap_count == (in_dev ? 1 : 0), "%s run %d: %lld inputs wrapped in place", what, run,
          (long long)r.wrap_count);
    CHECK(r.host_syncs == 1, "%s run %d: %lld host syncs (want 1)", what, run, (long long)r.host_syncs);
    if (run) CHECK(r.allocs == 0, "%s run %d: %lld allocations (want 0)", what, run, (long long)r.allocs);
  }
  fbx_exec_compiled_destroy(c);
  outs_free(&o);
  opq->vt->buffer_free(opq, dx);
}

/* x (2, 4) -> Transpose -> (4, 2), its output bound to x's buffer. */
static fbx_status *alias_out_fn(void *ctx, int idx, const fbx_tensor *t, void **data, int *same_as_input) {
  (void)t;
  *same_as_input = -1; /* another shape than x's: the executor's own overlap check must catch it */
  *data = idx == 0 ? ctx : NULL;
  return idx == 0 ? NULL : FBX_ERR("test: one output");
}

static void run_alias(fbx_backend *opq, fbx_backend *cpu, bool compile) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int x, t;
  fbx_ir_params tp;
  memset(&tp, 0, sizeof tp);
  tp.transpose.perm[0] = 1, tp.transpose.perm[1] = 0;
  fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, (int64_t[]){R, C}, (const char *[]){NULL, NULL}, &x);
  fbx_ir_graph_emit(g, FBX_IR_OP_TRANSPOSE, (int[]){x}, 1, &tp, FBX_DTYPE_F32, 2, "t", "Transpose", 0, &t);
  fbx_ir_graph_mark_output(g, t);
  fbx_exec_compile_options co = {.compile = compile, .cache_limit = 4, .host = cpu};
  fbx_exec_compiled *c = NULL;
  CHECK_TRY(fbx_exec_compiled_create(g, opq, &co, "alias", &c));
  float x0[N], got[N];
  for (int i = 0; i < N; i++) x0[i] = (float)i;
  void *dx = NULL;
  CHECK_TRY(opq->vt->buffer_alloc(opq, sizeof x0, &dx));
  CHECK_TRY(opq->vt->copy_from_host(opq, dx, x0, sizeof x0));
  bool on[1] = {true};
  fbx_exec_run_io io = {.input_on_device = on, .outputs_on_device = true};
  fbx_tensor in = {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {R, C}, .data = dx};
  fbx_status *st = fbx_exec_compiled_run_io(c, &in, 1, &io, alias_out_fn, dx, NULL);
  CHECK(!st, "alias run: %s", st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  st = opq->vt->copy_to_host(opq, got, dx, sizeof got);
  fbx_status_free(st);
  bool ok = true;
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) ok = ok && got[j * R + i] == x0[i * C + j];
  CHECK(ok, "Transpose bound to its own input's buffer (%s): still the transpose", compile ? "compiled" : "eager");
  opq->vt->buffer_free(opq, dx);
  fbx_exec_compiled_destroy(c);
}

int main(void) {
  fbx_backend *opq = NULL, *cpu = NULL;
  fbx_opaque_options oo = {.threads = 1, .decline_op = -1};
  fbx_cpu_options cpo = {.threads = 1};
  fbx_status *st = fbx_opaque_backend_create(&oo, &opq);
  if (!st) st = fbx_cpu_backend_create(&cpo, &cpu);
  CHECK(!st, "backends: %s", st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (opq && cpu) {
    run_case(opq, cpu, true, true, true, "device in, device out");
    run_case(opq, cpu, false, true, true, "device in, device out, eager");
    run_case(opq, cpu, true, false, true, "host in, device out");
    run_case(opq, cpu, true, true, false, "device in, host out");
    run_alias(opq, cpu, true);
    run_alias(opq, cpu, false);
    /* a host-visible backend has no device memory to speak of: refused, naming it */
    fbx_exec_compile_options co = {.compile = true, .cache_limit = 4};
    fbx_exec_compiled *c = NULL;
    st = fbx_exec_compiled_create(build(), cpu, &co, "cpu", &c);
    CHECK(!st, "cpu create");
    fbx_status_free(st);
    float x[N] = {0};
    fbx_tensor in = {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {R, C}, .data = x};
    bool on[1] = {true};
    fbx_exec_run_io io = {.input_on_device = on};
    outs o = {.be = cpu, .dev = false};
    st = c ? fbx_exec_compiled_run_io(c, &in, 1, &io, out_fn, &o, NULL) : NULL;
    CHECK(st && fbx_status_code_of(st) == FBX_STATUS_INVALID_ARG && strstr(fbx_status_message(st), "host-visible"),
          "device io on the CPU backend is refused: %s", st ? fbx_status_message(st) : "(accepted)");
    fbx_status_free(st);
    outs_free(&o);
    fbx_exec_compiled_destroy(c);
  }
  fbx_backend_destroy(opq);
  fbx_backend_destroy(cpu);
  printf("exec run io: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
