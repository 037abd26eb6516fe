#include "kmsg/matchers.h"

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <bitset>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <vector>

#include "catalog/nvlink_decode.h"
#include "catalog/sxid_catalog.h"
#include "catalog/xid_catalog.h"
#include "core/parse_number.h"
#include "core/pci_address.h"
#include "kmsg/parser.h"

namespace gpud::kmsg {
namespace {

// ---- prefilter -------------------------------------------------------------------------------

// Literals at least one of which every single-line trigger contains. Follow-up lines of
// multi-line matchers are checked by KernelLogMatcher while a sequence is open.
// Every keyword is sampled through an anchor: min_len bytes of it (min_len = the shortest keyword)
// starting at `anchor`, chosen where ordinary log text rarely matches (not "Kernel" of "Kernel
// panic", which every "NVIDIA Kernel Mode Setting" line has, nor "filesystem" of "mounted
// filesystem"): a window hit on a common word costs a compare per line. The longer the shortest
// keyword, the fewer 4-byte windows are sampled (one every min_len - 3 bytes), so each keyword is
// the longest literal its matcher's pattern requires.
struct Keyword {
  std::string_view text;
  uint8_t anchor;  // offset of the sampled part
};
constexpr std::array<Keyword, 34> kKeywords = {{
    {"NVRM: Xid (", 5},  // " Xid ("
    {"SXid (", 0},
    {"fallen off the bus", 0},
    {"The NVIDIA GPU", 8},  // "IA GPU"
    {"oom-killer", 0},
    {"blocked for more than", 0},
    {"soft lockup", 5},   // "lockup"
    {"Kernel panic", 5},  // "l pani"
    {"Kernel Panic", 5},
    {"filesystem read-only", 11},  // "read-o"
    {"available path", 8},         // "e path"
    {"reset controller", 6},       // "contro"
    {"after reset failure", 6},    // "reset "
    {"Buffer I/O error", 0},
    {"Disk failure on", 0},
    {"beyond end of device", 0},
    {"writing superblock", 8},  // "superb"
    {"nfs: server", 0},
    {"Lock reclaim failed", 5},  // "reclai"
    {"nfs_lock_and_join_requests+", 0},
    {"nfs_wb_all+", 0},
    {"nfs_page_async_flush+", 0},
    {"nfs_writepages_callback+", 0},
    {"file-max limit", 0},
    {"invalid context", 8},  // "contex"
    {"in libnccl", 3},       // "libncc"
    {"insufficient power", 0},
    {"High Temperature", 5},  // "Temper"
    {"ACCESS_REG", 0},
    {"Rx Detect Link mask", 3},  // "Detect"
    {"postRxDetLinkMask", 0},
    {"AER: Corr", 0},
    {"AER: Unco", 0},
    {"AER: Mult", 0},
}};

class Prefilter {
 public:
  Prefilter() {
    min_len_ = SIZE_MAX;
    for (const Keyword& k : kKeywords) min_len_ = std::min(min_len_, k.text.size());
    for (uint8_t ki = 0; ki < kKeywords.size(); ++ki) {
      const Keyword& k = kKeywords[ki];
      // An anchor that does not fit would miss matches: fall back to the keyword's start.
      const size_t anchor = k.anchor + min_len_ <= k.text.size() ? k.anchor : 0;
      for (size_t off = anchor; off + 4 <= anchor + min_len_; ++off) {
        const uint16_t h = hash(load(k.text.data() + off));
        bloom_.set(h);
        candidates_.push_back({h, ki, static_cast<uint8_t>(off)});
      }
    }
    std::sort(candidates_.begin(), candidates_.end(),
              [](const Candidate& a, const Candidate& b) { return a.hash < b.hash; });
    step_ = min_len_ - 3;
  }

  // Any occurrence of a keyword covers its anchor's min_len_ bytes, so one of the 4-byte windows
  // sampled every step_ bytes lies inside them, at a known offset in the keyword: a window hit is
  // verified by comparing only the keywords that have that window, in place (no search).
  bool may_match(std::string_view s) const {
    if (s.size() < min_len_) return false;
    const char* p = s.data();
    const size_t n = s.size();
    for (size_t i = 0; i + 4 <= n; i += step_) {
      const uint16_t h = hash(load(p + i));
      if (!bloom_.test(h)) continue;
      // Bloom hits are rare (a few hundred bits set of 65536): a binary search is enough.
      auto it = std::lower_bound(candidates_.begin(), candidates_.end(), h,
                                 [](const Candidate& c, uint16_t v) { return c.hash < v; });
      for (; it != candidates_.end() && it->hash == h; ++it) {
        if (i < it->offset) continue;
        const std::string_view k = kKeywords[it->keyword].text;
        const size_t start = i - it->offset;
        if (n - start >= k.size() && std::memcmp(p + start, k.data(), k.size()) == 0) return true;
      }
    }
    return false;
  }

 private:
  struct Candidate {
    uint16_t hash;
    uint8_t keyword;
    uint8_t offset;
  };
  static uint32_t load(const char* p) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    return w;
  }
  static uint16_t hash(uint32_t w) { return static_cast<uint16_t>((w * 2654435761u) >> 16); }

  std::bitset<65536> bloom_;           // 8 KiB
  std::vector<Candidate> candidates_;  // sorted by window hash (a table per hash value was 1.5 MiB)
  size_t min_len_ = 0;
  size_t step_ = 1;
};

const Prefilter& prefilter() {
  static const Prefilter kPrefilter;
  return kPrefilter;
}

bool has(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

std::string_view type_name(EventType t) { return to_string(t); }

nlohmann::json actions_json(const std::vector<RepairAction>& acts) {
  auto a = nlohmann::json::array();
  for (auto r : acts) a.push_back(std::string(to_string(r)));
  return a;
}

Match make(std::string_view component, std::string_view name, EventType type, std::string message,
           nlohmann::json extra = nlohmann::json::object()) {
  Match m;
  m.component = std::string(component);
  m.name = std::string(name);
  m.type = type;
  m.message = sanitize_utf8(message);
  m.extra_info = std::move(extra);
  return m;
}

// "PCI:0000:3b:00" as the kernel prints it (no function).
std::string device_id(const std::string& bdf) {
  std::string d = bdf;
  if (d.size() > 2 && d[d.size() - 2] == '.') d.resize(d.size() - 2);
  return "PCI:" + d;
}

// ---- Xid -------------------------------------------------------------------------------------

void add_xid(std::vector<Match>& out, int code, const std::string& raw_pci, std::string_view line,
             const std::optional<catalog::NvlinkDecoded>& nv = std::nullopt,
             nlohmann::json extra = nlohmann::json::object()) {
  out.push_back(make_xid_match(code, raw_pci, line, nv, std::move(extra)));
}

}  // namespace

Match make_xid_match(int code, std::string_view raw_pci, std::string_view line,
                     const std::optional<catalog::NvlinkDecoded>& nv, nlohmann::json extra) {
  const auto info = catalog::lookup_xid(code);
  const std::string bdf = normalize_pci_bus_id(raw_pci);
  const std::string dev = device_id(bdf);
  EventType type = info.type;
  std::vector<RepairAction> actions = info.repair_actions;
  std::string description = info.description;
  extra["pci_bus_id"] = bdf;
  extra["device_id"] = dev;
  extra["xid"] = code;
  extra["mnemonic"] = info.mnemonic;
  extra["known"] = info.known;
  std::string head = "XID " + std::to_string(code);
  if (nv) {
    type = nv->type;
    actions = {nv->action};
    if (!nv->description.empty()) description = nv->description;
    extra["sub_code"] = nv->sub_code;
    extra["investigatory_hint"] = nv->investigatory_hint;
    if (nv->rule != nullptr) extra["severity"] = std::string(nv->rule->severity);
    head += "." + std::to_string(nv->sub_code);
    char buf[40];
    std::snprintf(buf, sizeof(buf), " (err status 0x%08x)", extra.value("error_status", 0u));
    head += buf;
  }
  extra["description"] = description;
  extra["event_type"] = std::string(type_name(type));
  extra["repair_actions"] = actions_json(actions);
  extra["reboot_class"] = !actions.empty() && actions.front() == RepairAction::kRebootSystem;
  if (!line.empty()) extra["log_line"] = sanitize_utf8(line.substr(0, 1024));
  std::string msg = head;
  if (!info.mnemonic.empty()) msg += " " + info.mnemonic;
  msg += " " + description + " detected on GPU " + dev;
  return make(kComponentXid, "error_xid", type, std::move(msg), std::move(extra));
}

namespace {

bool match_xid(std::string_view s, std::vector<Match>& out) {
  if (has(s, "Xid (")) {
    const re2::StringPiece in(s.data(), s.size());
    static const RE2 kNvlink(
        R"(NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)(?:, pid=(?:\d+|'<unknown>'), name=[^,]+)?, )"
        R"(([A-Z_]+(?:/[A-Z_]+)?)\s+(Nonfatal|Fatal)\s+XC[01]\s+i\d+\s+Link\s+(-?\d+)\s+)"
        R"(\((0x[0-9a-fA-F]+)\s+(0x[0-9a-fA-F]+))");
    std::string pci, unit, sev, intr, status;
    int code = 0, link = 0;
    // An NVLink field wider than 32 bits cannot be decoded: the line is still an Xid (below), with
    // the fields marked invalid.
    bool nvlink_fields_invalid = false;
    if (RE2::PartialMatch(in, kNvlink, &pci, &code, &unit, &sev, &link, &intr, &status)) {
      const auto intrinfo = parse_integer<uint32_t>(intr, 16);
      const auto err = parse_integer<uint32_t>(status, 16);
      if (intrinfo && err) {
        const auto nv = catalog::decode_nvlink(code, unit, *intrinfo, *err, sev == "Fatal");
        nlohmann::json extra = {{"unit", unit},
                                {"log_severity", sev},
                                {"link", link},
                                {"intrinfo", *intrinfo},
                                {"error_status", *err}};
        add_xid(out, code, pci, s, nv, std::move(extra));
        return true;
      }
      nvlink_fields_invalid = true;
    }
    static const RE2 kStd(R"(NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)((?: [^)]*)?)\):\s*(\d+))");
    std::string rest;
    if (RE2::PartialMatch(in, kStd, &pci, &rest, &code)) {
      nlohmann::json extra = nlohmann::json::object();
      if (nvlink_fields_invalid) extra["nvlink_fields_invalid"] = true;
      static const RE2 kGi(R"(GPU-I:(\d+))");
      int gi = 0;
      if (!rest.empty() && RE2::PartialMatch(rest, kGi, &gi)) extra["gpu_instance"] = gi;
      static const RE2 kPid(R"(, pid=('<unknown>'|\d+), name=([^,]*),)");
      std::string pid, name;
      if (RE2::PartialMatch(in, kPid, &pid, &name)) {
        if (pid.front() != '\'') {
          // A pid that does not fit is kept out of the event and marked, not trusted.
          if (auto v = parse_integer<int64_t>(pid))
            extra["pid"] = *v;
          else
            extra["pid_invalid"] = true;
        }
        if (name != "<unknown>") extra["process_name"] = sanitize_utf8(name);
      }
      add_xid(out, code, pci, s, std::nullopt, std::move(extra));
      return true;
    }
  }
  if (has(s, "fallen off the bus")) {
    static const RE2 kSingle(
        R"(NVRM:\s+GPU ((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.0:\s+GPU has fallen off the bus)");
    static const RE2 kMulti(
        R"((?s)NVRM:\s+The NVIDIA GPU ((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.0.*?fallen off the bus and is not responding to commands)");
    const re2::StringPiece in(s.data(), s.size());
    std::string bdf;
    if (RE2::PartialMatch(in, kSingle, &bdf) || RE2::PartialMatch(in, kMulti, &bdf)) {
      add_xid(out, 79, bdf, s);
      return true;
    }
  }
  return false;
}

// ---- SXid ------------------------------------------------------------------------------------

bool match_sxid(std::string_view s, std::vector<Match>& out) {
  if (!has(s, "SXid (")) return false;
  static const RE2 kSxid(
      R"(SXid \((?:PCI:)?([0-9a-fA-F:.]+)\):\s*(\d+)(?:,\s*(Non-fatal|Fatal))?)");
  const re2::StringPiece in(s.data(), s.size());
  std::string pci, sev;
  int code = 0;
  if (!RE2::PartialMatch(in, kSxid, &pci, &code, &sev)) return false;
  const auto info = catalog::lookup_sxid(code);
  const std::string bdf = normalize_pci_bus_id(pci);
  nlohmann::json extra = {{"pci_bus_id", bdf},
                          {"device_id", "PCI:" + bdf},
                          {"sxid", code},
                          {"name", info.name},
                          {"description", info.name},
                          {"category", info.category},
                          {"known", info.known},
                          {"event_type", std::string(type_name(info.type))},
                          {"repair_actions", actions_json(info.repair_actions)},
                          {"reboot_class", info.reboot_class()},
                          {"log_line", sanitize_utf8(s.substr(0, 1024))}};
  if (!sev.empty()) extra["log_severity"] = sev;
  static const RE2 kSwitch(R"(nvidia-nvswitch(\d+):)");
  int sw = 0;
  if (RE2::PartialMatch(in, kSwitch, &sw)) extra["nvswitch"] = sw;
  out.push_back(make(kComponentSxid, "error_sxid", info.type,
                     "SXID " + std::to_string(code) + "(" + info.name + ") detected on PCI:" + bdf,
                     std::move(extra)));
  return true;
}

// ---- host families ---------------------------------------------------------------------------

struct SimpleRule {
  std::string_view literal;  // cheap check before the regex
  std::string_view component;
  std::string_view name;
  const char* pattern;         // RE2; group 1 (optional) goes into the message
  std::string_view message;    // "{}" is replaced by group 1
  std::string_view group_key;  // extra_info key for group 1
};

constexpr SimpleRule kRules[] = {
    {"blocked for more than", "cpu", "cpu_blocked_too_long",
     R"((?:INFO: )?task (\S+:\d+) .*blocked for more than \d+ seconds)",
     "CPU task blocked for more than 120 seconds ({})", "task"},
    {"soft lockup", "cpu", "cpu_soft_lockup",
     R"(soft lockup - CPU#\d+ stuck for \d+s! \[([^:]+:\d+)\])",
     "CPU soft lockup detected, not reporting for potentially too long ({})", "task"},
    {"Disk failure on", "disk", "raid_array_failure",
     R"(md/raid.*: Disk failure on (\S+) detected, failing array)",
     "RAID array has a disk failure ({})", "device"},
    {"read-only", "disk", "filesystem_read_only",
     R"(^(?:.*?\(([^)]+)\): )?.*Remounting filesystem read-only)",
     "filesystem remounted as read-only", "device"},
    {"available path", "disk", "nvme_path_failure",
     R"(block (nvme\S*): no available path - failing I/O)", "NVMe path failure detected ({})",
     "device"},
    {"reset controller", "disk", "nvme_controller_timeout",
     R"(nvme (nvme[0-9]+): I/O .* timeout, reset controller)", "NVMe controller timeout ({})",
     "device"},
    {"after reset failure", "disk", "nvme_device_disabled",
     R"(nvme (nvme[0-9]+): Disabling device after reset failure)",
     "NVMe device disabled after reset failure ({})", "device"},
    {"beyond end of device", "disk", "beyond_end_of_device",
     R"(attempt to access beyond end of device)", "I/O attempted beyond end of device", ""},
    {"Buffer I/O error", "disk", "buffer_io_error",
     R"(Buffer I/O error on dev ([^ ,]+), logical block [0-9]+)", "buffer I/O error on device ({})",
     "device"},
    {"writing superblock", "disk", "superblock_write_error",
     R"(I/O error while writing superblock)", "superblock write error", ""},
    {"nfs: server", "nfs", "nfs_server_not_responding", R"(nfs: server ([^ ]+) not responding)",
     "NFS server {} not responding", "server"},
    {"nfs: server", "nfs", "nfs_server_ok", R"(nfs: server ([^ ]+) OK)", "NFS server {} OK",
     "server"},
    {"Lock reclaim failed", "nfs", "nfs_lock_reclaim_failed",
     R"(nfs4_reclaim_open_state: Lock reclaim failed)", "NFS lock reclaim failed", ""},
    {"+0x", "nfs", "nfs_writeback_hang",
     R"((?:^|\s)(nfs_lock_and_join_requests|nfs_wb_all|nfs_page_async_flush|nfs_writepages_callback)\+0x[0-9a-f]+)",
     "NFS writeback hang suspected ({})", "function"},
    {"file-max limit", "os", "vfs_file_max_limit_reached", R"(VFS: file-max limit (\d+) reached)",
     "VFS file-max limit reached", "file_max"},
    {"invalid context", "accelerator-nvidia-peermem", "nvidia_peermem_invalid_context",
     R"(ERROR detected invalid context, skipping further processing)",
     "peermem error detected (possible GPU communication issue)", ""},
    {"libnccl", "accelerator-nvidia-nccl", "nvidia_nccl_segfault_in_libnccl",
     R"(segfault at.*in (libnccl\.so\S*))", "NCCL communication error (segfault in libnccl.so)",
     "library"},
    {"insufficient power", "accelerator-nvidia-infiniband", "pci_power_insufficient",
     R"(Detected insufficient power on the PCIe slot \(([0-9]+W)\))",
     "Insufficient power on MLX5 PCIe slot", "power"},
    {"High Temperature", "accelerator-nvidia-infiniband", "port_module_high_temperature",
     R"(Port module event.*High Temperature)", "Overheated MLX5 adapter", ""},
    {"Rx Detect Link mask", "accelerator-nvidia-nvlink", "nvlink_post_rx_detect_failure",
     R"(NVRM: knvlinkUpdatePostRxDetectLinkMask_[A-Za-z0-9_]+: Failed to update Rx Detect Link mask!)",
     "NVIDIA driver failed to update an NVLink post-RX-detection link mask", ""},
    {"postRxDetLinkMask", "accelerator-nvidia-nvlink", "nvlink_post_rx_detect_failure",
     R"(NVRM: knvlinkDiscoverPostRxDetLinks_[A-Za-z0-9_]+: Getting peer[0-9]+(?:'s)? postRxDetLinkMask failed!)",
     "NVIDIA driver failed to update an NVLink post-RX-detection link mask", ""},
};

const std::vector<std::unique_ptr<RE2>>& compiled_rules() {
  static const std::vector<std::unique_ptr<RE2>> kCompiled = [] {
    std::vector<std::unique_ptr<RE2>> v;
    for (const auto& r : kRules) v.push_back(std::make_unique<RE2>(r.pattern));
    return v;
  }();
  return kCompiled;
}

void match_simple(std::string_view s, std::vector<Match>& out) {
  const auto& res = compiled_rules();
  const re2::StringPiece in(s.data(), s.size());
  for (size_t i = 0; i < std::size(kRules); ++i) {
    const auto& r = kRules[i];
    if (!has(s, r.literal)) continue;
    std::string g;
    const bool ok = res[i]->NumberOfCapturingGroups() > 0 ? RE2::PartialMatch(in, *res[i], &g)
                                                          : RE2::PartialMatch(in, *res[i]);
    if (!ok) continue;
    std::string msg(r.message);
    if (auto p = msg.find("{}"); p != std::string::npos) msg.replace(p, 2, g);
    nlohmann::json extra = {{"log_line", sanitize_utf8(s.substr(0, 1024))}};
    if (!r.group_key.empty() && !g.empty()) extra[std::string(r.group_key)] = sanitize_utf8(g);
    out.push_back(make(r.component, r.name, EventType::kWarning, std::move(msg), std::move(extra)));
  }
}

bool match_access_reg(std::string_view s, std::vector<Match>& out) {
  if (!has(s, "ACCESS_REG")) return false;
  static const RE2 kRe(R"(mlx5_cmd_out_err.*ACCESS_REG.*failed)");
  static const RE2 kPci(R"(([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]))");
  const re2::StringPiece in(s.data(), s.size());
  if (!RE2::PartialMatch(in, kRe)) return false;
  std::string pci;
  nlohmann::json extra = {{"log_line", sanitize_utf8(s.substr(0, 1024))}};
  std::string msg = "MLX5 ACCESS_REG command failed - device may have restricted PF access";
  if (RE2::PartialMatch(in, kPci, &pci)) {
    pci = normalize_pci_bus_id(pci);
    extra["pci_bus_id"] = pci;
    msg += " (PCI device " + pci + ")";
  }
  out.push_back(make(kComponentInfiniband, "access_reg_failed", EventType::kWarning, std::move(msg),
                     std::move(extra)));
  return true;
}

bool match_aer(std::string_view s, std::vector<Match>& out) {
  if (!has(s, "AER: ")) return false;
  static const RE2 kRe(
      R"(AER: (?:Multiple )?(Corrected|Correctable|Uncorrected \(Non-Fatal\)|Uncorrectable \(Non-Fatal\)|Uncorrected \(Fatal\)|Uncorrectable \(Fatal\)) error (?:message )?received(?: from)?:? (?:id=)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]|[0-9a-fA-F]{4}))");
  const re2::StringPiece in(s.data(), s.size());
  std::string sev, dev;
  if (!RE2::PartialMatch(in, kRe, &sev, &dev)) return false;
  EventType type = EventType::kWarning;
  std::string name = "pcie_aer_corrected";
  std::string what = "corrected";
  if (has(sev, "Fatal)") && !has(sev, "Non-Fatal")) {
    type = EventType::kFatal, name = "pcie_aer_uncorrected_fatal", what = "uncorrected fatal";
  } else if (has(sev, "Non-Fatal")) {
    type = EventType::kCritical, name = "pcie_aer_uncorrected_nonfatal";
    what = "uncorrected non-fatal";
  }
  nlohmann::json extra = {{"severity", sev}, {"log_line", sanitize_utf8(s.substr(0, 1024))}};
  if (dev.find(':') != std::string::npos) {
    dev = normalize_pci_bus_id(dev);
    extra["pci_bus_id"] = dev;
  } else {
    extra["requester_id"] = dev;
  }
  static const RE2 kPort(R"(([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): AER:)");
  std::string port;
  if (RE2::PartialMatch(in, kPort, &port)) extra["reporting_port"] = normalize_pci_bus_id(port);
  out.push_back(make("pci", name, type, "PCIe AER " + what + " error on " + dev, std::move(extra)));
  return true;
}

void match_single(std::string_view s, std::vector<Match>& out) {
  if (!prefilter().may_match(s)) return;
  if (!match_sxid(s, out)) match_xid(s, out);
  match_simple(s, out);
  match_access_reg(s, out);
  match_aer(s, out);
}

}  // namespace

bool may_match(std::string_view msg) { return prefilter().may_match(msg); }

std::vector<Match> match_message(std::string_view msg) {
  std::vector<Match> out;
  match_single(msg, out);
  return out;
}

std::vector<Match> KernelLogMatcher::feed(std::string_view s) {
  std::vector<Match> out;
  const bool open = oom_pending_ || panic_lines_left_ > 0 || fallen_lines_left_ > 0;
  if (!open && !prefilter().may_match(s)) return out;
  const re2::StringPiece in(s.data(), s.size());

  // Multi-line fallen off the bus: "NVRM: The NVIDIA GPU 0000:3b:00.0" ... "fallen off the bus
  // and is not responding to commands."
  if (fallen_lines_left_ > 0) {
    --fallen_lines_left_;
    if (has(s, "fallen off the bus and is not responding")) {
      if (!has(s, "The NVIDIA GPU")) add_xid(out, 79, fallen_bdf_, s);
      fallen_lines_left_ = 0;
    }
  }
  if (has(s, "The NVIDIA GPU") && !has(s, "fallen off the bus")) {
    static const RE2 kStart(
        R"(NVRM:\s+The NVIDIA GPU ((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.0)");
    if (RE2::PartialMatch(in, kStart, &fallen_bdf_)) fallen_lines_left_ = 5;
  }

  // OOM.
  if (has(s, "invoked oom-killer")) {
    oom_pending_ = true;
    oom_task_memcg_.clear();
  } else if (oom_pending_) {
    static const RE2 kOomKill(R"(oom-kill:.*?task_memcg=([^,]*),task=([^,]+),pid=(\d+))");
    static const RE2 kOomMemcg(R"(oom_memcg=([^,]*))");
    static const RE2 kTaskIn(R"(Task in (.*) killed as a result of limit of (.*))");
    static const RE2 kKilled(R"(Kill(?:ed)? process (\d+) \(([^)]*)\))");
    std::string oom_memcg, task_memcg, name, memcg, limit;
    long long pid = 0;
    bool victim = false;
    bool cgroup = false;
    if (has(s, "oom-kill:") && RE2::PartialMatch(in, kOomKill, &task_memcg, &name, &pid)) {
      victim = true;
      (void)RE2::PartialMatch(in, kOomMemcg, &oom_memcg);
      cgroup = !oom_memcg.empty() && oom_memcg != "/";
    } else if (has(s, "killed as a result of limit") &&
               RE2::PartialMatch(in, kTaskIn, &memcg, &limit)) {
      oom_task_memcg_ = memcg;
    } else if (has(s, "ill") && RE2::PartialMatch(in, kKilled, &pid, &name)) {
      victim = true;
      cgroup = !oom_task_memcg_.empty() && oom_task_memcg_ != "/";
      task_memcg = oom_task_memcg_;
    }
    if (victim) {
      oom_pending_ = false;
      nlohmann::json extra = {{"victim_process", sanitize_utf8(name)},
                              {"pid", pid},
                              {"log_line", sanitize_utf8(s.substr(0, 1024))}};
      if (!task_memcg.empty()) extra["task_memcg"] = sanitize_utf8(task_memcg);
      if (!oom_memcg.empty()) extra["oom_memcg"] = sanitize_utf8(oom_memcg);
      out.push_back(make("memory", "OOM", EventType::kWarning,
                         std::string(cgroup ? "OOM encountered" : "System OOM encountered") +
                             ", victim process: " + name + ", pid: " + std::to_string(pid),
                         std::move(extra)));
    }
  }

  // Kernel panic, then "CPU: 3 PID: 1234 Comm: bash" within 10 lines.
  if (has(s, "Kernel panic") || has(s, "Kernel Panic")) {
    panic_lines_left_ = 10;
  } else if (panic_lines_left_ > 0) {
    --panic_lines_left_;
    static const RE2 kCpu(R"(CPU: (\d+) PID: (\d+) Comm: (\S+))");
    int cpu = 0;
    long long pid = 0;
    std::string comm;
    if (has(s, "Comm: ") && RE2::PartialMatch(in, kCpu, &cpu, &pid, &comm)) {
      panic_lines_left_ = 0;
      out.push_back(make("os", "kernel_panic", EventType::kWarning,
                         "Kernel panic detected - CPU: " + std::to_string(cpu) +
                             ", PID: " + std::to_string(pid) + ", Process: " + comm,
                         {{"cpu", cpu}, {"pid", pid}, {"process", sanitize_utf8(comm)}}));
    }
  }

  match_single(s, out);
  return out;
}

void KernelLogMatcher::reset() { *this = KernelLogMatcher(); }

}  // namespace gpud::kmsg
