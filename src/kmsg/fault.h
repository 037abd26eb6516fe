// Fault injection: what `gpud inject-fault` and POST /inject-fault write into the kernel log.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpud::kmsg {

struct FaultRequest {
  std::optional<int> xid;
  std::optional<int> sxid;
  std::string pci = "0000:00:00.0";  // GPU (Xid) or NVSwitch (SXid) bus id
  std::string kernel_message;        // any line (used when no Xid/SXid is given)
  int level = 3;                     // KERN_ERR
};

// "KERN_ERR", "err", "kern.err", "error", "3" -> 3; nullopt for anything else.
std::optional<int> parse_kernel_log_level(std::string_view s);

// GPUd's fault-injector.Request: {"xid":{"id":79,"pci":"…"}} (also "xid_to_inject"),
// {"sxid":{"id":20034,"pci":"…"}}, {"kernel_message":{"priority":"KERN_ERR","message":"…"}}.
// An error (status 400) for anything else.
[[nodiscard]] Result<FaultRequest> parse_fault_request(const nlohmann::json& body);

// Renders and writes the request's line, marked with kInjectedMarker, into `path` (/dev/kmsg);
// returns the line written (marker included, without the "<P>" prefix).
[[nodiscard]] Result<std::string> inject_fault(const FaultRequest& req, const std::string& path);

}  // namespace gpud::kmsg
