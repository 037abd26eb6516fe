// `gpud npd-check`: node-problem-detector's custom-plugin protocol over the daemon's current
// states. NPD (pkg/custompluginmonitor) runs the plugin on an interval, reads its exit status
// (0 OK, 1 NonOK: the condition is set, 2 Unknown) and keeps at most max_output_length (80) bytes
// of its stdout as the condition's message. The verb never runs a check: it reads /v1/states and,
// to name the GPU, /v1/gpus.
#pragma once

#include <nlohmann/json.hpp>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "app/client.h"
#include "core/result.h"

namespace gpud::app {

inline constexpr int kNpdOk = 0;
inline constexpr int kNpdProblem = 1;
inline constexpr int kNpdUnknown = 2;
// NPD cuts a plugin's message here; the verb's line never needs cutting.
inline constexpr size_t kNpdMaxOutputBytes = 80;

// What one NPD condition covers: component names, and name prefixes (the presets).
struct NpdSelection {
  std::string label;  // for messages: "gpu", "kernel", "runtime", "all", or the list as given
  std::vector<std::string> names;
  std::vector<std::string> prefixes;
  bool everything = false;
  bool selects(std::string_view component) const;
};

// "gpu" (every accelerator-nvidia-* component: GPUs, NVLink, NVSwitch, fabric, Xid/SXid),
// "kernel" (the host's kernel and hardware: os, kernel-module, cpu, memory, disk, fd, pci, fuse,
// power-supply, nfs), "runtime" (containerd, docker, kubelet, library, systemd), "all", or a
// comma-separated list of component names and presets. An empty or unknown preset is an error.
[[nodiscard]] Result<NpdSelection> parse_npd_selection(std::string_view spec);

struct NpdAnswer {
  int exit_code = kNpdUnknown;
  std::string line;  // at most kNpdMaxOutputBytes, valid UTF-8, no newline
};

// The answer over a checked /v1/states document (parse_states_reply) and, when the daemon has
// them, its /v1/gpus entries (null otherwise). An Unhealthy selected state is a problem (1), named
// by its GPU (index and bus id, when /v1/gpus attributes the component to one), its suggested
// action and its reason; Degraded is OK (0) and says so; a selection that is still Initializing
// and has nothing Unhealthy is Unknown (2).
NpdAnswer npd_answer(const nlohmann::json& states, const nlohmann::json& gpus,
                     const NpdSelection& selection);

// npd_answer over the daemon's /v1/states (and /v1/gpus, to name a GPU), all within `budget`; a
// daemon that does not answer, or answers with an error, is Unknown with the reason.
NpdAnswer daemon_npd_answer(const ClientOptions& options, const NpdSelection& selection,
                            std::chrono::milliseconds budget);

// Cuts `s` to at most `max_bytes` on a UTF-8 character boundary, newlines made spaces.
std::string npd_line(std::string_view s, size_t max_bytes = kNpdMaxOutputBytes);

}  // namespace gpud::app
