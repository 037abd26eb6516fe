#include "components/containers/docker.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "host/command.h"
#include "host/systemd_bus.h"
#include "runtimes/container_source.h"

namespace gpud::components {
namespace {

std::string service_problem(const host::UnitState& u) {
  return fmt::format("docker service is {} ({})", u.active_state, u.sub_state);
}

}  // namespace

CheckResult evaluate_docker(const DockerSnapshot& s) {
  nlohmann::json data = nlohmann::json::object();
  data["socket"] = s.socket_path;
  auto finish = [&data](Health health, std::string reason, std::string error = "") {
    CheckResult r = single_state("docker", health, reason, std::nullopt, data);
    if (!error.empty()) r.states[0].error = error;
    r.detail = reason + "\n" + (error.empty() ? "" : error + "\n");
    return r;
  };
  if (!s.installed) return finish(Health::kHealthy, "docker not installed (not applicable)");
  if (!s.ping && runtimes::docker_error_kind(s.ping.error()) == runtimes::DockerErrorKind::kModule)
    return finish(Health::kDegraded,
                  "cannot check the docker daemon: gpud's docker module is "
                  "missing",
                  s.ping.error().message);
  if (!s.ping)
    return finish(Health::kUnhealthy, "docker installed but the docker daemon is not running",
                  s.ping.error().message);
  if (!s.ping->empty()) data["api_version"] = *s.ping;
  if (s.version && *s.version) {
    data["version"] = (*s.version)->version;
    if (!(*s.version)->api_version.empty()) data["api_version"] = (*s.version)->api_version;
  }
  if (s.service) {
    const auto& svc = *s.service;
    if (!svc)
      return finish(Health::kUnhealthy, "cannot read the docker service", svc.error().message);
    if (!svc->error.empty())
      return finish(Health::kUnhealthy, "cannot read the docker service", svc->error);
    // A daemon that answers without a docker.service (started by hand, another unit name) is
    // judged by its answers alone.
    if (svc->load_state != "not-found") {
      data["service_active_state"] = svc->active_state;
      if (svc->active_state != "active") return finish(Health::kUnhealthy, service_problem(*svc));
    }
  }
  if (!s.containers) return finish(Health::kHealthy, "docker is running");
  const auto& listed = *s.containers;
  if (!listed) {
    const Error& e = listed.error();
    if (runtimes::is_docker_client_too_new(e))
      return finish(Health::kHealthy, "not supported; needs upgrading docker daemon", e.message);
    if (runtimes::docker_error_kind(e) == runtimes::DockerErrorKind::kConnect)
      return finish(Health::kHealthy,
                    "the docker daemon went away while listing containers (connection errors are "
                    "judged by the next check's ping)",
                    e.message);
    return finish(Health::kUnhealthy, "error listing docker containers", e.message);
  }
  nlohmann::json rows = nlohmann::json::array();
  size_t running = 0;
  std::vector<std::string> lines;
  for (const runtimes::DockerContainer& c : *listed) {
    nlohmann::json row = {{"id", c.id},
                          {"name", c.name},
                          {"image", c.image},
                          {"created_at", c.created_at},
                          {"state", c.state}};
    if (!c.pod_name.empty()) row["pod_name"] = c.pod_name;
    if (!c.pod_namespace.empty()) row["pod_namespace"] = c.pod_namespace;
    rows.push_back(std::move(row));
    if (c.state == "running") ++running;
    lines.push_back(fmt::format("  {} {} {}{}", c.id.substr(0, 12), c.name, c.state,
                                c.pod_name.empty()
                                    ? std::string()
                                    : fmt::format(" pod {}/{}", c.pod_namespace, c.pod_name)));
  }
  data["containers"] = std::move(rows);
  std::string reason = fmt::format("docker is running, {} container{} ({} running)", listed->size(),
                                   listed->size() == 1 ? "" : "s", running);
  CheckResult r = finish(Health::kHealthy, reason);
  if (!lines.empty()) r.detail += fmt::format("{}\n", fmt::join(lines, "\n"));
  return r;
}

DockerSnapshot read_docker(const DockerReadOptions& o, runtimes::ContainerSource& listings) {
  DockerSnapshot s;
  s.socket_path = o.socket_path;
  s.installed = host::find_executable(o.docker_command, o.search_path).has_value() ||
                host::find_executable(o.dockerd_command, o.search_path).has_value() ||
                access(o.socket_path.c_str(), F_OK) == 0;
  runtimes::DockerClient client(o.socket_path, o.timeout, o.api_version);
  if (s.installed) s.ping = client.ping();
  if (!s.installed || !s.ping) {
    listings.gone(runtimes::kDockerSource);  // docker is gone: nothing it listed runs any more
    return s;
  }
  s.service = host::host_unit_state(host::HostFs(o.host_root), o.systemctl_command, o.search_path,
                                    "docker.service", o.timeout);
  s.version = client.version();
  s.containers = listings.docker_containers(client);
  return s;
}

DockerComponent::DockerComponent(const ComponentContext& ctx) : Component(ctx), listings_(ctx) {}

CheckResult DockerComponent::check() {
  DockerReadOptions o;
  o.socket_path = config().docker_socket;
  o.docker_command = config().docker_command;
  o.dockerd_command = config().dockerd_command;
  o.search_path = config().executable_search_path;
  o.systemctl_command = config().systemctl_command;
  o.host_root = config().host_root;
  DockerSnapshot s = read_docker(o, listings_.source());
  return evaluate_docker(s);
}

}  // namespace gpud::components
