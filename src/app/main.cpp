// gpud's entry point: hands argv to the CLI.
#include <malloc.h>

#include "app/cli.h"

int main(int argc, char** argv) {
  // glibc gives each thread that allocates an arena of its own (up to 8 per core). The daemon has
  // a dozen mostly idle threads (scheduler, NVML worker, Xid watcher, kernel-log follower, HTTP
  // pool) whose allocations are small and short-lived; two shared arenas keep their heap pages
  // from being spread over a dozen arenas, which cut about 1 MiB of resident memory when measured.
  mallopt(M_ARENA_MAX, 2);
  return gpud::app::run_cli(argc, argv);
}
