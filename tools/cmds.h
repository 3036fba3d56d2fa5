// cmds.h — the `fusebox` subcommands. Each takes argv with argv[0] = the subcommand name and
// returns the process exit code (0 ok, 1 failure/beyond tolerance, 2 usage error).
#ifndef FBX_TOOLS_CMDS_H
#define FBX_TOOLS_CMDS_H

int fbx_cmd_run(int argc, char **argv);
int fbx_cmd_info(int argc, char **argv);
int fbx_cmd_check(int argc, char **argv);
int fbx_cmd_bench(int argc, char **argv);
int fbx_cmd_generate(int argc, char **argv);

#endif  // FBX_TOOLS_CMDS_H
