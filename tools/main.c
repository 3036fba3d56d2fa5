// main.c — `fusebox`: run / info / check / bench / generate / trace.
#include <stdio.h>
#include <string.h>

#include "cmd_trace.h"
#include "cmds.h"

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} kCommands[] = {
    {"run", fbx_cmd_run, "run a model with Fusebox; print outputs and time"},
    {"info", fbx_cmd_info, "claim report: which nodes Fusebox takes, and why not the others"},
    {"check", fbx_cmd_check, "compare Fusebox against ORT's CPU EP on the same inputs"},
    {"bench", fbx_cmd_bench, "latency of Fusebox vs ORT's CPU EP, interleaved"},
    {"generate", fbx_cmd_generate, "greedy decode with a KV-cache decoder, Fusebox vs ORT CPU"},
    {"trace", fbx_cmd_trace, "read a FUSEBOX_TRACE file (see `fusebox trace --help`)"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: fusebox COMMAND [options] ...\n\ncommands:\n");
  for (size_t i = 0; i < sizeof kCommands / sizeof kCommands[0]; i++)
    fprintf(f, "  %-9s %s\n", kCommands[i].name, kCommands[i].help);
  fprintf(f, "\n`fusebox COMMAND --help` shows the options of a command.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof kCommands / sizeof kCommands[0]; i++)
    if (strcmp(argv[1], kCommands[i].name) == 0) return kCommands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "fusebox: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
