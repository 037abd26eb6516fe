// Kernel-log matchers: turn one kernel message into the events GPUd's components would record
// (Xid, SXid, OOM, hung tasks, panics, disk, NFS, NVLink, InfiniBand, peermem, NCCL, PCIe AER).
// Every line first passes a cheap multi-substring prefilter; regexes (RE2) run only on hits.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/nvlink_decode.h"
#include "core/health.h"
#include "core/pci_address.h"

namespace gpud::kmsg {

struct Match {
  std::string component;  // GPUd component name, e.g. "accelerator-nvidia-error-xid"
  std::string name;       // GPUd event name, e.g. "error_xid"
  EventType type = EventType::kWarning;
  std::string message;  // human-readable, valid UTF-8
  nlohmann::json extra_info = nlohmann::json::object();
};

// Component names.
inline constexpr std::string_view kComponentXid = "accelerator-nvidia-error-xid";
inline constexpr std::string_view kComponentSxid = "accelerator-nvidia-error-sxid";
inline constexpr std::string_view kComponentNvlink = "accelerator-nvidia-nvlink";
inline constexpr std::string_view kComponentInfiniband = "accelerator-nvidia-infiniband";
inline constexpr std::string_view kComponentPeermem = "accelerator-nvidia-peermem";
inline constexpr std::string_view kComponentNccl = "accelerator-nvidia-nccl";

// True when the message may match some matcher (no false negatives). Cheap: a sampled 4-byte
// window lookup, then substring checks on hits only.
bool may_match(std::string_view msg);

// All single-line matchers. Multi-line forms (OOM sequences, kernel panics with their CPU line,
// the multi-line "fallen off the bus") need KernelLogMatcher; the multi-line fallen-off-the-bus
// form is also recognised here when it arrives as one message with embedded newlines.
std::vector<Match> match_message(std::string_view msg);

// The match an Xid becomes wherever it was seen (a kernel line, NVML's event stream): its meaning
// is looked up in the catalog here, once. `log_line` is the kernel line ("" when NVML reported
// it); `nvlink` the decoded Xid 144-150 fields when the line carried them.
Match make_xid_match(int code, std::string_view pci_bus_id, std::string_view log_line,
                     const std::optional<catalog::NvlinkDecoded>& nvlink = std::nullopt,
                     nlohmann::json extra = nlohmann::json::object());

// Stateful matcher over a stream of messages (one per kernel record, in order). Not thread-safe:
// one per stream.
class KernelLogMatcher {
 public:
  std::vector<Match> feed(std::string_view msg);
  void reset();
  // A multi-line sequence is open: the next lines must be fed whatever they contain.
  bool pending() const { return oom_pending_ || panic_lines_left_ > 0 || fallen_lines_left_ > 0; }

 private:
  // OOM: "invoked oom-killer" seen, waiting for the victim line.
  bool oom_pending_ = false;
  std::string oom_task_memcg_;  // legacy "Task in X killed as a result of limit"
  // Panic: "Kernel panic" seen; the CPU/PID/Comm line must follow within 10 lines.
  int panic_lines_left_ = 0;
  // Fallen off the bus, multi-line: "NVRM: The NVIDIA GPU <bdf>" seen.
  std::string fallen_bdf_;
  int fallen_lines_left_ = 0;
};

}  // namespace gpud::kmsg
