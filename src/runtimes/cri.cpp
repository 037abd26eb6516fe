#include "runtimes/cri.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

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
Result<std::string> call(Call&& c) {
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

Result<CriVersion> CriClient::version(const std::string& socket,
                                      std::chrono::milliseconds timeout) const {
  auto text =
      call([&](const gpud_cri_table_v1& t) { return t.version(socket.c_str(), millis(timeout)); });
  if (!text) return text.error();
  return parse_cri_version(*text);
}

Result<CriPods> CriClient::list_pods(const std::string& socket,
                                     std::chrono::milliseconds timeout) const {
  auto text = call(
      [&](const gpud_cri_table_v1& t) { return t.list_pods(socket.c_str(), millis(timeout)); });
  if (!text) return text.error();
  return parse_cri_pods(*text);
}

Result<std::vector<PodResources>> CriClient::list_pod_resources(
    const std::string& socket, std::chrono::milliseconds timeout) const {
  auto text = call([&](const gpud_cri_table_v1& t) {
    return t.list_pod_resources(socket.c_str(), millis(timeout));
  });
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
  auto text = call([&](const gpud_cri_table_v1& t) {
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
  auto text = call([&](const gpud_cri_table_v1& t) {
    return t.stop_pod_sandbox(socket.c_str(), id.c_str(), millis(timeout));
  });
  if (!text) return text.error();
  return {};
}

Result<void> CriClient::remove_pod_sandbox(const std::string& socket, const std::string& id,
                                           std::chrono::milliseconds timeout) const {
  auto text = call([&](const gpud_cri_table_v1& t) {
    return t.remove_pod_sandbox(socket.c_str(), id.c_str(), millis(timeout));
  });
  if (!text) return text.error();
  return {};
}

}  // namespace gpud::runtimes
