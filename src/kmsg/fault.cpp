#include "kmsg/fault.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "kmsg/rules.h"
#include "kmsg/writer.h"

namespace gpud::kmsg {

std::optional<int> parse_kernel_log_level(std::string_view s) {
  std::string v(s);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  for (std::string_view prefix : {"kern_", "kern.", "log_"})
    if (v.starts_with(prefix)) v.erase(0, prefix.size());
  if (v.size() == 1 && v[0] >= '0' && v[0] <= '7') return v[0] - '0';
  static constexpr std::array<std::pair<std::string_view, int>, 11> kNames = {{{"emerg", 0},
                                                                               {"alert", 1},
                                                                               {"crit", 2},
                                                                               {"err", 3},
                                                                               {"error", 3},
                                                                               {"warning", 4},
                                                                               {"warn", 4},
                                                                               {"notice", 5},
                                                                               {"info", 6},
                                                                               {"debug", 7},
                                                                               {"default", 6}}};
  for (const auto& [name, level] : kNames)
    if (v == name) return level;
  return std::nullopt;
}

namespace {

Result<void> read_code(const nlohmann::json& obj, std::string_view what, FaultRequest& req,
                       std::optional<int>& code) {
  if (!obj.is_object() || !obj.contains("id") || !obj["id"].is_number_integer() ||
      obj["id"].get<int64_t>() <= 0 || obj["id"].get<int64_t>() > 1'000'000)
    return make_error(std::string(what) + " needs a positive integer \"id\"", 400);
  code = obj["id"].get<int>();
  if (obj.contains("pci")) {
    if (!obj["pci"].is_string())
      return make_error(std::string(what) + ".pci must be a string", 400);
    req.pci = obj["pci"].get<std::string>();
  }
  return {};
}

}  // namespace

Result<FaultRequest> parse_fault_request(const nlohmann::json& body) {
  if (!body.is_object()) return make_error("request body must be a JSON object", 400);
  FaultRequest req;
  for (const char* key : {"xid", "xid_to_inject"}) {
    if (!body.contains(key)) continue;
    if (auto r = read_code(body[key], key, req, req.xid); !r) return r.error();
    return req;
  }
  if (body.contains("sxid")) {
    if (auto r = read_code(body["sxid"], "sxid", req, req.sxid); !r) return r.error();
    return req;
  }
  if (body.contains("kernel_message")) {
    const auto& km = body["kernel_message"];
    if (!km.is_object() || !km.contains("message") || !km["message"].is_string() ||
        km["message"].get<std::string>().empty())
      return make_error("kernel_message needs a non-empty \"message\"", 400);
    req.kernel_message = km["message"].get<std::string>();
    req.level = 6;
    if (km.contains("priority")) {
      auto level = km["priority"].is_string()
                       ? parse_kernel_log_level(km["priority"].get<std::string>())
                       : std::nullopt;
      if (!level) return make_error("kernel_message.priority must be KERN_EMERG..KERN_DEBUG", 400);
      req.level = *level;
    }
    return req;
  }
  return make_error("request needs one of \"xid\", \"sxid\" or \"kernel_message\"", 400);
}

Result<std::string> inject_fault(const FaultRequest& req, const std::string& path) {
  std::string line;
  if (req.xid)
    line = xid_line(*req.xid, req.pci);
  else if (req.sxid)
    line = sxid_line(*req.sxid, req.pci);
  else
    line = req.kernel_message;
  if (line.empty()) return make_error("nothing to inject", 400);
  WriteOptions opts;
  opts.path = path;
  opts.level = req.level;
  opts.suffix = kInjectedMarker;
  if (auto r = write_kmsg(line, opts); !r) return r.error();
  // What the kernel log now holds: the line as written, cut and marked, without "<P>" and "\n".
  std::string written = format_kmsg_write(line, opts.level, opts.facility, opts.suffix);
  written.erase(0, written.find('>') + 1);
  written.pop_back();
  return written;
}

}  // namespace gpud::kmsg
