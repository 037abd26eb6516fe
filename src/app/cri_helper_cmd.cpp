// `gpud cri-helper` (hidden, internal): one CRI call through the cri module, its reply on stdout.
// The daemon runs it as a child for every containerd or pod-resources listing (runtimes::CriClient
// with a CriHelper), so gRPC, protobuf and abseil are mapped in a process that lives for one call,
// never in the daemon.
#include <cstdio>
#include <memory>
#include <string>

#include "app/verbs.h"
#include "runtimes/cri.h"

namespace gpud::app {

void add_cri_helper(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string call;
    std::string socket;
    int64_t timeout_ms = 10000;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("cri-helper", "Internal: one CRI call for the daemon");
  cmd->group("");  // hidden: the daemon's own helper, not a user's verb
  cmd->add_option("call", flags->call, "version, list-pods or list-pod-resources")->required();
  cmd->add_option("--socket", flags->socket, "The CRI (or pod-resources) unix socket")->required();
  cmd->add_option("--timeout-ms", flags->timeout_ms, "The call's deadline")
      ->check(CLI::Range(int64_t{1}, int64_t{600000}));
  cmd->callback([flags, exit_code] {
    const auto call = runtimes::parse_cri_call(flags->call);
    if (!call) {
      std::fprintf(stderr, "cri-helper: unknown call \"%s\"\n", flags->call.c_str());
      *exit_code = kExitUsage;
      return;
    }
    auto r = runtimes::call_cri_module(*call, flags->socket,
                                       std::chrono::milliseconds(flags->timeout_ms));
    // A failed call is a reply too (its code and words): the exit status says only that the
    // helper itself worked.
    const std::string out =
        r ? runtimes::format_cri_helper_reply(GPUD_CRI_OK, *r)
          : runtimes::format_cri_helper_reply(r.error().code, r.error().message);
    const bool written =
        std::fwrite(out.data(), 1, out.size(), stdout) == out.size() && std::fflush(stdout) == 0;
    *exit_code = written ? kExitOk : kExitUsage;
  });
}

}  // namespace gpud::app
