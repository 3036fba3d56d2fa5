// cmd_trace.h — `fusebox trace ...` (implemented by tools/cmd_trace.c).
#ifndef FBX_TOOLS_CMD_TRACE_H
#define FBX_TOOLS_CMD_TRACE_H

// argv[0] is "trace"; returns the process exit code.
int fbx_cmd_trace(int argc, char **argv);

#endif  // FBX_TOOLS_CMD_TRACE_H
