// GPUd's flags of `run`, `scan` and `up`, each with what gpud does with it: the one table that
// registers the flags gpud accepts without using (or refuses), words their warning, and that
// docs/CLI.md's "GPUd's flags" table is checked against.
#pragma once

#include <CLI/CLI.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpud::app {

// Which of GPUd's verbs has the flag (bits).
enum GpudVerb : unsigned { kGpudRun = 1, kGpudScan = 2, kGpudUp = 4 };

enum class GpudFlagUse {
  kImplemented,   // gpud's own flag of that name, with GPUd's meaning (docs/CLI.md)
  kControlPlane,  // accepted with a warning: gpud has no managed control plane
  kHostCommand,   // accepted with a warning: gpud reads /proc, /sys and sockets itself
  kRefused,       // GPUd's test injector: refused, naming the fake-NVML scenario to use
};

struct GpudFlag {
  std::string_view name;  // without dashes
  unsigned verbs;         // GpudVerb bits
  bool takes_value;       // false: a boolean flag (`--pprof`, `--pprof=false`)
  GpudFlagUse use;
  // kRefused: what to use instead.
  std::string_view instead;
};

// Every flag of GPUd's `run`, `scan` and `up` (GPUd's cmd/gpud/command/command.go).
std::span<const GpudFlag> gpud_flags();
// "implemented", "control plane", "host command", "refused": the words of
// docs/CLI.md's table.
std::string_view use_name(GpudFlagUse use);

// The --help groups of the flags add_gpud_flags registers.
inline constexpr const char* kGpudAcceptedGroup = "GPUd flags (accepted, not used; docs/CLI.md)";
inline constexpr const char* kGpudRefusedGroup = "GPUd test injectors (refused; docs/CLI.md)";

// The flags given that gpud accepts without using, by kind, as typed ("--token").
struct GpudFlagsGiven {
  std::vector<std::string> control_plane;
  std::vector<std::string> host_command;
};

// Registers on `cmd` GPUd's flags of `verb` that are not gpud's own: the accepted ones record that
// they were given in `given`, the refused ones fail the parse with a message saying what to use.
void add_gpud_flags(CLI::App& cmd, GpudVerb verb, GpudFlagsGiven& given);
// One line per kind of flag given (none when none was): what gpud does instead.
std::vector<std::string> gpud_flag_warnings(const GpudFlagsGiven& given);

}  // namespace gpud::app
