// cmd_check_all.h — `fusebox check --all-tensors`: the first node whose output diverges.
#ifndef FBX_TOOLS_CMD_CHECK_ALL_H
#define FBX_TOOLS_CMD_CHECK_ALL_H

#include "cli.h"

// Every main-graph node output becomes a graph output (a rewritten copy of c->model in
// $TMPDIR); the copy runs through Fusebox and through ORT's CPU EP on the same inputs, and the
// values are compared in graph order with |a-b| <= atol*max(1, max|b|) + rtol*|b| (NaN == NaN,
// ints exact: atol scales with the tensor, whose rounding differences come from sums of terms
// that large).
// Prints the first divergent node (op, EP, kernel variant from a FUSEBOX_TRACE of the run, its
// outputs' and inputs' errors) and returns 0 (none diverges), 1 (one does, or an error).
// c is parsed and opened (fbx_cli_open); it stays the caller's.
int fbx_cmd_check_all_tensors(fbx_cli *c, double rtol, double atol, int verbose);

#endif  // FBX_TOOLS_CMD_CHECK_ALL_H
