#include "components/containers/kubelet.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "host/command.h"

namespace gpud::components {

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
    reason = fmt::format("no pods from the kubelet: {}", fmt::join(errors, "; "));
  } else {
    // A summary: the pods themselves (names, namespaces, containers) stay on the node.
    const auto& pods = *answered->pods;
    size_t running = 0, containers = 0, not_ready = 0;
    int64_t restarts = 0;
    std::map<std::string, size_t> phases, waiting, terminated;
    for (const KubeletPod& p : pods) {
      if (p.phase == "Running") ++running;
      ++phases[p.phase.empty() ? "Unknown" : p.phase];
      int64_t pod_restarts = 0;
      for (const KubeletContainer& c : p.containers) {
        pod_restarts += c.restart_count;
        ++containers;
        if (!c.ready && !c.init) ++not_ready;
        if (c.state == "waiting" && !c.reason.empty()) ++waiting[c.reason];
        if (c.state == "terminated" && !c.reason.empty() && !c.init) ++terminated[c.reason];
      }
      restarts += pod_restarts;
      detail += fmt::format("  {}/{} {} ({} containers, {} restarts)\n", p.pod_namespace, p.name,
                            p.phase.empty() ? "-" : p.phase, p.containers.size(), pod_restarts);
    }
    data["endpoint"] = answered->endpoint;
    data["pods"] = pods.size();
    data["pods_by_phase"] = phases;
    data["containers"] = containers;
    data["containers_not_ready"] = not_ready;
    data["container_restarts"] = restarts;
    data["containers_waiting_by_reason"] = waiting;
    data["containers_terminated_by_reason"] = terminated;
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
  CheckResult r = single_state(kKubeletName, health, reason, std::nullopt, data);
  if (health != Health::kHealthy) r.states[0].error = fmt::format("{}", fmt::join(errors, "; "));
  r.detail = reason + "\n" + detail;
  return r;
}

KubeletComponent::KubeletComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root), listings_(ctx) {}

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
    s.attempts.push_back({ro.describe(), listings_.source().kubelet_pods(ro)});
  }
  const bool listed = !s.attempts.empty() && s.attempts.back().pods.ok();
  if (!listed && config().kubelet_port > 0) {
    KubeletEndpoint auth;
    auth.port = config().kubelet_port;
    auth.https = true;
    auth.token = runtimes::read_kubelet_token(config().kubelet_token_file, fs_, s.token_note);
    auth.ca_files = runtimes::kubelet_ca_files(config().kubelet_ca_file, fs_);
    s.attempts.push_back({auth.describe(), listings_.source().kubelet_pods(auth)});
  }
  // The GPU allocations: what the socket lists now, or none (never the last good list).
  if (fs_.exists(kPodResourcesSocket))
    s.pod_resources =
        listings_.source().pod_resources(fs_.path(kPodResourcesSocket), kKubeletTimeout);
  else
    listings_.source().gone(runtimes::kPodResourcesSource);
  return evaluate_kubelet(s);
}

}  // namespace gpud::components
