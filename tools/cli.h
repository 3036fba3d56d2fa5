// cli.h — what the `fusebox` subcommands share: global options, input preparation, sessions.
#ifndef FBX_TOOLS_CLI_H
#define FBX_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "common/ort_host.h"

#define FBX_CLI_MAX_KV 64

typedef struct fbx_cli_kv {
  const char *key;
  const char *val;
} fbx_cli_kv;

typedef struct fbx_cli {
  const char *prog;            // "fusebox run", ... for messages
  const char *model;           // first positional argument
  const char *ort;             // --ort LIB
  const char *ep;              // --ep LIB
  int threads;                 // --threads N (0: default)
  uint64_t seed;               // --seed N (default 42)
  fbx_cli_kv ep_opts[FBX_CLI_MAX_KV];  size_t n_ep_opts;   // --ep-option k=v
  int ep_devices;              // --ep-devices all|cpu|gpu: FBX_HOST_DEVICES_* (default all)
  const char *ort_profile;     // non-NULL: ORT's own profiling into <prefix>_<date>.json (run --ort-profile)
  fbx_cli_kv npy[FBX_CLI_MAX_KV];      size_t n_npy;       // --input name=file.npy
  fbx_cli_kv ranges[FBX_CLI_MAX_KV];   size_t n_ranges;    // --int-range name=lo:hi
  fbx_cli_kv dimv[FBX_CLI_MAX_KV];     size_t n_dimv;      // --dim SYMBOL=N
  fbx_cli_kv shapes[FBX_CLI_MAX_KV];   size_t n_shapes;    // --shape name=AxBxC
  const char *extra[FBX_CLI_MAX_KV];   size_t n_extra;     // positionals after the model
  fbx_host *host;
} fbx_cli;

// Per-command option callback: return the number of argv entries consumed (1 or 2) if `arg`
// is one of the command's options, 0 if unknown, -1 on a bad value (message printed).
typedef int (*fbx_cli_opt_fn)(void *ctx, const char *arg, const char *next);

// Parse argv[1..] (argv[0] is the subcommand): global options, command options via `fn`,
// positionals (the first is the model). Prints `usage` on --help (returns 1) and errors
// (returns 2). 0 = go on. require_model: error if no model was given.
int fbx_cli_parse(fbx_cli *c, const char *prog, int argc, char **argv, const char *usage,
                  fbx_cli_opt_fn fn, void *ctx, int require_model);

// Help text for the global options (appended to each command's usage).
extern const char fbx_cli_global_help[];

// Open ORT (c->host). Prints the error; returns 0 on success.
int fbx_cli_open(fbx_cli *c);
void fbx_cli_close(fbx_cli *c);

// Create a session: Fusebox (EP options from the command line, plus threads=N when --threads
// is given and the user set no threads EP option) or ORT CPU. Same intra-op threads for both.
// extra cfg entries optional. Prints the error; returns NULL on failure.
fbx_host_session *fbx_cli_session(fbx_cli *c, int use_fusebox, int record_assignment);

// Build one input tensor per session input: --input npy files, else seeded random data with
// dims from --shape / --dim / defaults and name-based int ranges. *ins heap array, free with
// fbx_host_tensors_free. Prints the error; returns 0 on success.
int fbx_cli_inputs(fbx_cli *c, fbx_host_session *s, fbx_host_tensor **ins, size_t *n);

// Parse helpers (return 0 on success).
int fbx_cli_parse_int(const char *s, long long lo, long long hi, long long *out);
int fbx_cli_parse_double(const char *s, double *out);
// Split "key=value" into a kv (pointers into s, which is modified). 0 on success.
int fbx_cli_split_kv(char *s, fbx_cli_kv *kv);

void fbx_cli_print_shape(const fbx_host_tensor *t);
// Sort and take the median of n doubles (modifies v).
double fbx_cli_median(double *v, size_t n);
double fbx_cli_min(const double *v, size_t n);

#endif  // FBX_TOOLS_CLI_H
