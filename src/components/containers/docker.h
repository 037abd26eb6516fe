// DockerComponent ("docker"): where docker is installed, its daemon must answer on its socket, its
// systemd service must be active and its containers must list (GPUd's rules). The containers it
// lists (through runtimes::ContainerSource), with the Kubernetes pod each belongs to, are what a
// GPU process or an Xid's pid is traced to.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "components/component.h"
#include "components/containers/runtime_listings.h"
#include "host/host_fs.h"
#include "host/systemctl.h"
#include "runtimes/container_source.h"
#include "runtimes/docker.h"

namespace gpud::components {

// The deadline of each Engine API call and of `systemctl show`.
inline constexpr std::chrono::seconds kDockerTimeout{10};

struct DockerSnapshot {
  // `docker` or `dockerd` on the search path, or the socket exists (gpud in a container, the
  // host's socket mounted in).
  bool installed = false;
  std::string socket_path;
  // GET /_ping: the daemon's API version, or why it did not answer.
  Result<std::string> ping = std::string();
  // docker.service as systemd reports it; nullopt when systemd does not run the host or the ping
  // failed (the daemon's state is known then).
  std::optional<Result<host::UnitState>> service;
  // GET /version and /containers/json?all=1; nullopt when not asked (the ping failed).
  std::optional<Result<runtimes::DockerVersion>> version;
  std::optional<Result<std::vector<runtimes::DockerContainer>>> containers;
};

// The rule, in GPUd's order: not installed ⇒ Healthy "docker not installed (not applicable)"; the
// ping failing ⇒ Unhealthy "docker installed but the docker daemon is not running" (Degraded where
// gpud's docker module cannot be loaded: the daemon is not judged then); docker.service
// loaded and not active ⇒ Unhealthy; listing the containers failing ⇒ Unhealthy "error listing
// docker containers", except a daemon older than the API version asked for ⇒ Healthy "not
// supported; needs upgrading docker daemon" and a connection lost after the ping answered ⇒
// Healthy (GPUd ignores connection errors there: the next check's ping judges the daemon); else
// Healthy "docker is running, N containers (M running)". Data: the containers (id, name, image,
// created_at, state, pod_name, pod_namespace), the daemon's version and API version.
CheckResult evaluate_docker(const DockerSnapshot& s);

// What check() reads, with everything it depends on given, for tests against a real daemon.
struct DockerReadOptions {
  std::string socket_path;
  std::string docker_command = "docker";
  std::string dockerd_command = "dockerd";
  std::string search_path;
  std::string systemctl_command = "systemctl";
  std::string host_root = "/";
  std::chrono::milliseconds timeout = kDockerTimeout;
  std::string api_version;  // "": negotiated (runtimes::DockerClient)
};
DockerSnapshot read_docker(const DockerReadOptions& o, runtimes::ContainerSource& listings);

class DockerComponent : public Component {
 public:
  explicit DockerComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "docker"; }
  std::vector<std::string> tags() const override { return {"container", "docker"}; }
  std::chrono::seconds interval() const override { return std::chrono::seconds(60); }
  CheckResult check() override;

 private:
  RuntimeListings listings_;  // docker's listing goes through it
};

}  // namespace gpud::components
