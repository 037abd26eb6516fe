#include "runtimes/cri.h"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "host/command.h"
#include "runtimes/module_loader.h"

namespace gpud::runtimes {
namespace {

using nlohmann::json;

Result<const gpud_cri_table_v1*> cri_table() {
  auto sym = load_module_symbol("cri", GPUD_CRI_ENTRY);
  if (!sym) return make_error(sym.error().message, kCriModuleMissing);
  auto entry = reinterpret_cast<gpud_cri_client_v1_fn>(*sym);
  const gpud_cri_table_v1* t = entry();
  if (t == nullptr || t->abi_version != GPUD_CRI_ABI_VERSION || t->size < sizeof(gpud_cri_table_v1))
    return make_error(fmt::format("the cri module speaks another ABI (version {}, want {}): it was "
                                  "built from another gpud version",
                                  t == nullptr ? 0 : t->abi_version, GPUD_CRI_ABI_VERSION),
                      kCriModuleMissing);
  return t;
}

// Makes one call through the table and returns its text, or the error with its code.
template <typename Call>
Result<std::string> call_module(Call&& c) {
  auto t = cri_table();
  if (!t) return t.error();
  gpud_cri_reply r = c(**t);
  std::string text = r.text != nullptr ? r.text : "";
  (*t)->free_reply(&r);
  if (r.code != GPUD_CRI_OK)
    return make_error(text.empty() ? fmt::format("gRPC status {}", r.code) : text, r.code);
  return text;
}

int64_t millis(std::chrono::milliseconds timeout) { return timeout.count(); }

constexpr std::string_view kReplyHeader = "gpud-cri-reply 1 ";
// What of a child's words goes into an error message: the first `limit` bytes, control characters
// and non-ASCII bytes shown as '?'.
std::string printable(std::string_view text, size_t limit) {
  std::string out;
  for (char ch : text.substr(0, limit)) {
    const auto u = static_cast<unsigned char>(ch);
    out.push_back(u >= 0x20 && u < 0x7f ? ch : '?');
  }
  if (text.size() > limit) out += "...";
  return out;
}

std::string seconds_text(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? fmt::format("{} s", d.count() / 1000)
                               : fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000);
}

// The field `key` of object `j` as a string, "" when absent; an error when of another type.
bool get_string(const json& j, const char* key, std::string& out, std::string& err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_string()) {
    err = fmt::format("\"{}\" is not a string", key);
    return false;
  }
  out = it->get<std::string>();
  return true;
}

template <typename Int>
bool get_int(const json& j, const char* key, Int& out, std::string& err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number_integer()) {
    err = fmt::format("\"{}\" is not an integer", key);
    return false;
  }
  out = it->get<Int>();
  return true;
}

std::chrono::system_clock::time_point from_ns(int64_t ns) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(ns)));
}

Result<json> parse_object(std::string_view text, const char* what) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object())
    return make_error(fmt::format("the cri module's {} answer is not a JSON object: {}", what,
                                  text.substr(0, 200)));
  return j;
}

const json* array_field(const json& j, const char* key, std::string& err) {
  static const json kEmpty = json::array();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return &kEmpty;
  if (!it->is_array()) {
    err = fmt::format("\"{}\" is not an array", key);
    return nullptr;
  }
  return &*it;
}

}  // namespace

Result<CriVersion> parse_cri_version(std::string_view text) {
  auto j = parse_object(text, "Version");
  if (!j) return j.error();
  CriVersion v;
  std::string err;
  if (!get_string(*j, "runtime_name", v.runtime_name, err) ||
      !get_string(*j, "runtime_version", v.runtime_version, err) ||
      !get_string(*j, "runtime_api_version", v.runtime_api_version, err))
    return make_error("garbled Version answer: " + err);
  return v;
}

Result<CriPods> parse_cri_pods(std::string_view text) {
  auto j = parse_object(text, "list");
  if (!j) return j.error();
  CriPods out;
  std::string err;
  const json* sandboxes = array_field(*j, "sandboxes", err);
  const json* containers = sandboxes != nullptr ? array_field(*j, "containers", err) : nullptr;
  if (containers == nullptr) return make_error("garbled pod listing: " + err);
  for (const json& s : *sandboxes) {
    CriSandbox p;
    int64_t created_ns = 0;
    if (!s.is_object() || !get_string(s, "id", p.id, err) || !get_string(s, "name", p.name, err) ||
        !get_string(s, "namespace", p.pod_namespace, err) || !get_string(s, "uid", p.uid, err) ||
        !get_int(s, "attempt", p.attempt, err) || !get_string(s, "state", p.state, err) ||
        !get_int(s, "created_at_ns", created_ns, err) ||
        !get_string(s, "runtime_handler", p.runtime_handler, err))
      return make_error("garbled sandbox in the pod listing: " +
                        (err.empty() ? std::string("not an object") : err));
    if (p.id.empty()) return make_error("garbled sandbox in the pod listing: no id");
    p.created = from_ns(created_ns);
    out.sandboxes.push_back(std::move(p));
  }
  for (const json& c : *containers) {
    CriContainer k;
    int64_t created_ns = 0;
    if (!c.is_object() || !get_string(c, "id", k.id, err) || !get_string(c, "name", k.name, err) ||
        !get_string(c, "sandbox_id", k.sandbox_id, err) || !get_int(c, "attempt", k.attempt, err) ||
        !get_string(c, "state", k.state, err) || !get_int(c, "created_at_ns", created_ns, err) ||
        !get_string(c, "image", k.image, err))
      return make_error("garbled container in the pod listing: " +
                        (err.empty() ? std::string("not an object") : err));
    if (k.id.empty()) return make_error("garbled container in the pod listing: no id");
    k.created = from_ns(created_ns);
    out.containers.push_back(std::move(k));
  }
  return out;
}

Result<std::vector<PodResources>> parse_pod_resources(std::string_view text) {
  auto j = parse_object(text, "pod-resources List");
  if (!j) return j.error();
  std::string err;
  const json* pods = array_field(*j, "pod_resources", err);
  if (pods == nullptr) return make_error("garbled pod-resources listing: " + err);
  std::vector<PodResources> out;
  for (const json& p : *pods) {
    PodResources pr;
    const json* containers = nullptr;
    if (!p.is_object() || !get_string(p, "name", pr.name, err) ||
        !get_string(p, "namespace", pr.pod_namespace, err) ||
        (containers = array_field(p, "containers", err)) == nullptr)
      return make_error("garbled pod in the pod-resources listing: " +
                        (err.empty() ? std::string("not an object") : err));
    for (const json& c : *containers) {
      PodResourcesContainer pc;
      const json* devices = nullptr;
      if (!c.is_object() || !get_string(c, "name", pc.name, err) ||
          (devices = array_field(c, "devices", err)) == nullptr)
        return make_error("garbled container in the pod-resources listing: " +
                          (err.empty() ? std::string("not an object") : err));
      for (const json& d : *devices) {
        PodDevices pd;
        const json* ids = nullptr;
        if (!d.is_object() || !get_string(d, "resource_name", pd.resource_name, err) ||
            (ids = array_field(d, "device_ids", err)) == nullptr)
          return make_error("garbled devices in the pod-resources listing: " +
                            (err.empty() ? std::string("not an object") : err));
        for (const json& id : *ids) {
          if (!id.is_string())
            return make_error(
                "garbled devices in the pod-resources listing: a device id is not "
                "a string");
          pd.device_ids.push_back(id.get<std::string>());
        }
        pc.devices.push_back(std::move(pd));
      }
      pr.containers.push_back(std::move(pc));
    }
    out.push_back(std::move(pr));
  }
  return out;
}

std::string_view cri_call_name(CriCall call) {
  switch (call) {
    case CriCall::kVersion: return "version";
    case CriCall::kListPods: return "list-pods";
    case CriCall::kListPodResources: return "list-pod-resources";
  }
  return "";
}

std::optional<CriCall> parse_cri_call(std::string_view name) {
  for (CriCall c : {CriCall::kVersion, CriCall::kListPods, CriCall::kListPodResources})
    if (cri_call_name(c) == name) return c;
  return std::nullopt;
}

Result<std::string> call_cri_module(CriCall which, const std::string& socket,
                                    std::chrono::milliseconds timeout) {
  return call_module([&](const gpud_cri_table_v1& t) {
    switch (which) {
      case CriCall::kVersion: return t.version(socket.c_str(), millis(timeout));
      case CriCall::kListPods: return t.list_pods(socket.c_str(), millis(timeout));
      case CriCall::kListPodResources: break;
    }
    return t.list_pod_resources(socket.c_str(), millis(timeout));
  });
}

std::string format_cri_helper_reply(int code, std::string_view text) {
  std::string out(kReplyHeader);
  out += std::to_string(code);
  out += '\n';
  out += text;
  return out;
}

Result<std::string> parse_cri_helper_reply(std::string_view out) {
  auto garbled = [&out](std::string_view why) {
    return make_error(
        fmt::format("the CRI helper's reply is garbled ({}): \"{}\"", why, printable(out, 120)),
        GPUD_CRI_INTERNAL);
  };
  if (out.substr(0, kReplyHeader.size()) != kReplyHeader) return garbled("no reply header");
  const size_t eol = out.find('\n');
  if (eol == std::string_view::npos) return garbled("no end to the reply header");
  const std::string_view code_text = out.substr(kReplyHeader.size(), eol - kReplyHeader.size());
  int code = 0;
  const auto [end, ec] =
      std::from_chars(code_text.data(), code_text.data() + code_text.size(), code);
  // gRPC's codes are 0..16; kCriModuleMissing is the module's absence.
  if (ec != std::errc() || end != code_text.data() + code_text.size() || code < kCriModuleMissing ||
      code > 16)
    return garbled("not a status code");
  std::string_view text = out.substr(eol + 1);
  if (code == GPUD_CRI_OK) return std::string(text);
  return make_error(text.empty() ? fmt::format("gRPC status {}", code) : printable(text, 1024),
                    code);
}

Result<std::string> call_cri_helper(const CriHelper& helper, CriCall which,
                                    const std::string& socket, std::chrono::milliseconds timeout) {
  const auto limit = timeout + helper.start_allowance;
  auto r = host::run_command({helper.executable, "cri-helper", std::string(cri_call_name(which)),
                              "--socket", socket, "--timeout-ms", std::to_string(timeout.count())},
                             host::kDefaultSearchPath, limit, helper.max_output + 1);
  if (!r) {
    if (r.error().code == host::kCommandTimedOut)
      return make_error(fmt::format("CRI helper timed out after {} ({} for the call itself)",
                                    seconds_text(limit), seconds_text(timeout)),
                        GPUD_CRI_DEADLINE_EXCEEDED);
    return make_error("cannot run the CRI helper: " + r.error().message, GPUD_CRI_INTERNAL);
  }
  if (r->out.size() > helper.max_output)
    return make_error(
        fmt::format("the CRI helper's reply is longer than {} bytes", helper.max_output),
        GPUD_CRI_INTERNAL);
  if (r->exit_code != 0)
    return make_error(
        fmt::format("the CRI helper {} ({})",
                    r->exit_code < 0 ? std::string("was killed by a signal")
                                     : fmt::format("exited with status {}", r->exit_code),
                    r->err.empty() ? std::string("no message") : printable(r->err, 300)),
        GPUD_CRI_INTERNAL);
  return parse_cri_helper_reply(r->out);
}

Result<std::string> CriClient::call(CriCall which, const std::string& socket,
                                    std::chrono::milliseconds timeout) const {
  if (helper_.executable.empty()) return call_cri_module(which, socket, timeout);
  return call_cri_helper(helper_, which, socket, timeout);
}

Result<CriVersion> CriClient::version(const std::string& socket,
                                      std::chrono::milliseconds timeout) const {
  auto text = call(CriCall::kVersion, socket, timeout);
  if (!text) return text.error();
  return parse_cri_version(*text);
}

Result<CriPods> CriClient::list_pods(const std::string& socket,
                                     std::chrono::milliseconds timeout) const {
  auto text = call(CriCall::kListPods, socket, timeout);
  if (!text) return text.error();
  return parse_cri_pods(*text);
}

Result<std::vector<PodResources>> CriClient::list_pod_resources(
    const std::string& socket, std::chrono::milliseconds timeout) const {
  auto text = call(CriCall::kListPodResources, socket, timeout);
  if (!text) return text.error();
  return parse_pod_resources(*text);
}

Result<std::string> CriClient::run_pod_sandbox(const std::string& socket,
                                               const CriSandboxSpec& spec,
                                               std::chrono::milliseconds timeout) const {
  const std::string config = json{
      {"name", spec.name},
      {"namespace", spec.pod_namespace},
      {"uid", spec.uid},
      {"attempt", spec.attempt},
      {"host_network",
       spec.host_network}}.dump();
  auto text = call_module([&](const gpud_cri_table_v1& t) {
    return t.run_pod_sandbox(socket.c_str(), config.c_str(), millis(timeout));
  });
  if (!text) return text.error();
  auto j = parse_object(*text, "RunPodSandbox");
  if (!j) return j.error();
  std::string id, err;
  if (!get_string(*j, "id", id, err) || id.empty())
    return make_error("garbled RunPodSandbox answer: " + *text);
  return id;
}

Result<void> CriClient::stop_pod_sandbox(const std::string& socket, const std::string& id,
                                         std::chrono::milliseconds timeout) const {
  auto text = call_module([&](const gpud_cri_table_v1& t) {
    return t.stop_pod_sandbox(socket.c_str(), id.c_str(), millis(timeout));
  });
  if (!text) return text.error();
  return {};
}

Result<void> CriClient::remove_pod_sandbox(const std::string& socket, const std::string& id,
                                           std::chrono::milliseconds timeout) const {
  auto text = call_module([&](const gpud_cri_table_v1& t) {
    return t.remove_pod_sandbox(socket.c_str(), id.c_str(), millis(timeout));
  });
  if (!text) return text.error();
  return {};
}

}  // namespace gpud::runtimes
