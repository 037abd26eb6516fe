#include "components/containers/kubelet.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "host/command.h"

namespace gpud::components {
namespace {

std::string string_at(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const nlohmann::json& object_at(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}

KubeletContainer parse_container_status(const nlohmann::json& c, bool init) {
  KubeletContainer k;
  k.init = init;
  k.name = string_at(c, "name");
  const std::string id = string_at(c, "containerID");
  if (auto at = id.find("://"); at != std::string::npos) {
    k.runtime = id.substr(0, at);
    k.id = id.substr(at + 3);
  } else {
    k.id = id;
  }
  auto ready = c.find("ready");
  k.ready = ready != c.end() && ready->is_boolean() && ready->get<bool>();
  auto restarts = c.find("restartCount");
  if (restarts != c.end() && restarts->is_number_integer())
    k.restart_count = std::max<int64_t>(0, restarts->get<int64_t>());
  const nlohmann::json& state = object_at(c, "state");
  for (const char* s : {"running", "waiting", "terminated"}) {
    if (!state.contains(s)) continue;
    k.state = s;
    k.reason = string_at(object_at(state, s), "reason");
    break;
  }
  return k;
}

nlohmann::json pod_json(const KubeletPod& p) {
  nlohmann::json containers = nlohmann::json::array();
  for (const KubeletContainer& c : p.containers) {
    nlohmann::json jc = {{"name", c.name},
                         {"id", c.id},
                         {"ready", c.ready},
                         {"restart_count", c.restart_count},
                         {"state", c.state}};
    if (!c.reason.empty()) jc["reason"] = c.reason;
    if (c.init) jc["init"] = true;
    containers.push_back(std::move(jc));
  }
  return {{"name", p.name},
          {"namespace", p.pod_namespace},
          {"uid", p.uid},
          {"phase", p.phase},
          {"containers", std::move(containers)}};
}

// The token for the authenticated port, or why there is none.
std::string read_token(const std::string& flag, const host::HostFs& fs, std::string& note) {
  if (!flag.empty()) {
    auto t = host::HostFs("/").read(flag, 64 << 10);
    if (!t) {
      note = "cannot read --kubelet-token-file " + flag + ": " + t.error().message;
      return {};
    }
    return std::string(trim(*t));
  }
  auto t = host::HostFs("/").read(kServiceAccountTokenFile, 64 << 10);
  if (!t && fs.root() != "/") t = fs.read(kServiceAccountTokenFile, 64 << 10);
  if (!t) {
    note = fmt::format("no service-account token at {}", kServiceAccountTokenFile);
    return {};
  }
  return std::string(trim(*t));
}

}  // namespace

Result<std::vector<KubeletPod>> list_kubelet_pods(const KubeletEndpoint& endpoint,
                                                  std::chrono::milliseconds timeout) {
  auto body = fetch_kubelet_pods(endpoint, timeout);
  if (!body) return body.error();
  auto pods = parse_pod_list(*body);
  if (!pods) return make_error(endpoint.describe() + ": " + pods.error().message);
  return pods;
}

Result<std::vector<KubeletPod>> parse_pod_list(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return make_error("the kubelet's /pods is not JSON");
  if (!j.is_object()) return make_error("the kubelet's /pods is not a PodList (not an object)");
  auto items = j.find("items");
  // An empty PodList may omit its items ("items": null).
  if (items == j.end() || items->is_null()) {
    if (string_at(j, "kind") == "PodList") return std::vector<KubeletPod>{};
    return make_error("the kubelet's /pods is not a PodList (no items)");
  }
  if (!items->is_array()) return make_error("the kubelet's /pods is not a PodList (items)");
  std::vector<KubeletPod> pods;
  pods.reserve(items->size());
  for (const nlohmann::json& item : *items) {
    if (!item.is_object()) return make_error("the kubelet's /pods holds an item that is no pod");
    const nlohmann::json& meta = object_at(item, "metadata");
    KubeletPod p;
    p.name = string_at(meta, "name");
    if (p.name.empty()) return make_error("the kubelet's /pods holds a pod without a name");
    p.pod_namespace = string_at(meta, "namespace");
    p.uid = string_at(meta, "uid");
    const nlohmann::json& status = object_at(item, "status");
    p.phase = string_at(status, "phase");
    for (const auto& [key, init] :
         {std::pair{"initContainerStatuses", true}, std::pair{"containerStatuses", false},
          std::pair{"ephemeralContainerStatuses", false}}) {
      auto list = status.find(key);
      if (list == status.end() || !list->is_array()) continue;
      for (const nlohmann::json& c : *list)
        if (c.is_object()) p.containers.push_back(parse_container_status(c, init));
    }
    pods.push_back(std::move(p));
  }
  return pods;
}

std::string KubeletEndpoint::describe() const {
  return fmt::format("{}://{}:{}", https ? "https" : "http", host, port);
}

Result<std::string> fetch_kubelet_pods(const KubeletEndpoint& endpoint,
                                       std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string body;
  bool too_large = false, too_slow = false;
  auto receive = [&](const char* data, size_t n) {
    too_large = body.size() + n > kKubeletMaxBodyBytes;
    too_slow = std::chrono::steady_clock::now() > deadline;
    if (too_large || too_slow) return false;  // cancels the request
    body.append(data, n);
    return true;
  };
  httplib::Headers headers = {{"Accept", "application/json"}};
  httplib::Result res{nullptr, httplib::Error::Unknown};
  // Each connect and each read waits at most the whole deadline; the body's reads are cut when
  // the deadline passes.
  auto configure = [&](auto& cli) {
    cli.set_connection_timeout(timeout);
    cli.set_read_timeout(timeout);
    cli.set_write_timeout(timeout);
    cli.set_keep_alive(false);
  };
  try {
    if (endpoint.https) {
      httplib::SSLClient cli(endpoint.host, endpoint.port);
      configure(cli);
      cli.enable_server_certificate_verification(false);
      if (!endpoint.token.empty()) cli.set_bearer_token_auth(endpoint.token);
      res = cli.Get("/pods", headers, receive);
    } else {
      httplib::Client cli(endpoint.host, endpoint.port);
      configure(cli);
      res = cli.Get("/pods", headers, receive);
    }
  } catch (const std::exception& e) {
    return make_error(fmt::format("{}: {}", endpoint.describe(), e.what()));
  }
  const std::string where = endpoint.describe();
  if (too_large)
    return make_error(
        fmt::format("{}: /pods is larger than {} MiB", where, kKubeletMaxBodyBytes >> 20));
  if (too_slow || (!res && (res.error() == httplib::Error::Read ||
                            res.error() == httplib::Error::ConnectionTimeout)))
    return make_error(fmt::format("{}: no answer within {} ms", where, timeout.count()));
  if (!res) {
    if (res.error() == httplib::Error::Connection)
      return make_error(fmt::format("{}: not listening (connection refused)", where));
    return make_error(fmt::format("{}: {}", where, httplib::to_string(res.error())));
  }
  if (res->status != 200)
    return make_error(fmt::format("{}: /pods answered HTTP {}{}", where, res->status,
                                  res->status == 401 || res->status == 403
                                      ? " (the token is not allowed to read the node's pods)"
                                      : ""));
  return body;
}

std::vector<runtimes::ContainerInfo> kubelet_containers(const std::vector<KubeletPod>& pods) {
  std::vector<runtimes::ContainerInfo> out;
  for (const KubeletPod& p : pods)
    for (const KubeletContainer& c : p.containers)
      if (!c.id.empty())
        out.push_back({c.id, c.name, p.name, p.pod_namespace, p.uid, std::string(kKubeletName)});
  return out;
}

std::vector<runtimes::DeviceHolder> nvidia_device_holders(
    const std::vector<runtimes::PodResources>& pods) {
  std::vector<runtimes::DeviceHolder> out;
  for (const auto& p : pods)
    for (const auto& c : p.containers)
      for (const auto& d : c.devices) {
        if (d.resource_name.rfind("nvidia.com/", 0) != 0) continue;
        for (const auto& id : d.device_ids)
          out.push_back({id, d.resource_name, p.name, p.pod_namespace, c.name, "pod-resources"});
      }
  return out;
}

CheckResult evaluate_kubelet(const KubeletSnapshot& s) {
  nlohmann::json data = nlohmann::json::object();
  std::vector<std::string> errors;
  const KubeletAttempt* answered = nullptr;
  for (const KubeletAttempt& a : s.attempts) {
    if (a.pods) {
      answered = &a;
      break;
    }
    errors.push_back(a.pods.error().message);
  }
  if (!s.token_note.empty() && answered == nullptr) errors.push_back(s.token_note);
  Health health = Health::kHealthy;
  std::string reason;
  std::string detail;
  if (s.attempts.empty()) {
    reason =
        "no kubelet port to ask (--kubelet-read-only-port and --kubelet-port are 0; not "
        "applicable)";
  } else if (answered == nullptr) {
    health = Health::kDegraded;
    reason = fmt::format("kubelet does not answer: {}", fmt::join(errors, "; "));
  } else {
    const auto& pods = *answered->pods;
    size_t running = 0;
    int64_t restarts = 0;
    nlohmann::json list = nlohmann::json::array();
    for (const KubeletPod& p : pods) {
      if (p.phase == "Running") ++running;
      int64_t pod_restarts = 0;
      for (const KubeletContainer& c : p.containers) pod_restarts += c.restart_count;
      restarts += pod_restarts;
      list.push_back(pod_json(p));
      detail += fmt::format("  {}/{} {} ({} containers, {} restarts)\n", p.pod_namespace, p.name,
                            p.phase.empty() ? "-" : p.phase, p.containers.size(), pod_restarts);
    }
    data["endpoint"] = answered->endpoint;
    data["pods"] = std::move(list);
    reason = fmt::format("{} pods ({} running, {} container restarts) from {}", pods.size(),
                         running, restarts, answered->endpoint);
  }
  if (s.pod_resources) {
    if (!*s.pod_resources) {
      const std::string e = "kubelet pod-resources: " + s.pod_resources->error().message;
      errors.push_back(e);
      if (health == Health::kHealthy) {
        health = Health::kDegraded;
        reason = e;
      }
    } else {
      nlohmann::json alloc = nlohmann::json::array();
      for (const auto& p : **s.pod_resources)
        for (const auto& c : p.containers)
          for (const auto& d : c.devices)
            if (d.resource_name.rfind("nvidia.com/", 0) == 0)
              alloc.push_back({{"pod", p.name},
                               {"namespace", p.pod_namespace},
                               {"container", c.name},
                               {"resource_name", d.resource_name},
                               {"device_ids", d.device_ids}});
      data["gpu_allocations"] = std::move(alloc);
    }
  }
  if (!errors.empty()) data["errors"] = errors;
  CheckResult r = single_state(kKubeletName, health, reason, std::nullopt, {{"data", data.dump()}});
  if (health != Health::kHealthy) r.states[0].error = fmt::format("{}", fmt::join(errors, "; "));
  r.detail = reason + "\n" + detail;
  return r;
}

KubeletComponent::KubeletComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {}

bool KubeletComponent::supported() const {
  return installed_.get([this] {
    return !config().kubelet_token_file.empty() ||
           host::find_executable("kubelet", config().executable_search_path).has_value() ||
           fs_.exists("/var/lib/kubelet");
  });
}

CheckResult KubeletComponent::check() {
  KubeletSnapshot s;
  if (config().kubelet_read_only_port > 0) {
    KubeletEndpoint ro;
    ro.port = config().kubelet_read_only_port;
    s.attempts.push_back({ro.describe(), list_kubelet_pods(ro)});
  }
  const bool listed = !s.attempts.empty() && s.attempts.back().pods.ok();
  if (!listed && config().kubelet_port > 0) {
    KubeletEndpoint auth;
    auth.port = config().kubelet_port;
    auth.https = true;
    auth.token = read_token(config().kubelet_token_file, fs_, s.token_note);
    s.attempts.push_back({auth.describe(), list_kubelet_pods(auth)});
  }
  if (ctx().containers != nullptr && !s.attempts.empty() && s.attempts.back().pods)
    ctx().containers->publish(kKubeletName, kubelet_containers(*s.attempts.back().pods));
  // The GPU allocations: what the socket lists now, or none (never the last good list).
  if (fs_.exists(kPodResourcesSocket))
    s.pod_resources =
        pod_resources_client_.list_pod_resources(fs_.path(kPodResourcesSocket), kKubeletTimeout);
  if (ctx().containers != nullptr) {
    if (s.pod_resources && *s.pod_resources)
      ctx().containers->publish_devices("pod-resources", nvidia_device_holders(**s.pod_resources));
    else
      ctx().containers->clear_devices("pod-resources");
  }
  return evaluate_kubelet(s);
}

}  // namespace gpud::components
