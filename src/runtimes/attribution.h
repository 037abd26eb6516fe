// Fault attribution: the container and Kubernetes pod a process runs in, from its cgroup (the
// container id and pod uid) and what the container-runtime components last listed (names).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "host/host_fs.h"
#include "runtimes/cgroup.h"
#include "runtimes/container_directory.h"

namespace gpud::runtimes {

struct Attribution {
  std::string container_id;   // from the cgroup path; empty when the process is in a pod's
                              // cgroup but no container's
  std::string container;      // the container's name, where a runtime listed it
  std::string pod;            // pod name, where a runtime listed it
  std::string pod_namespace;  // pod namespace, where a runtime listed it
  std::string pod_uid;        // from the cgroup path, else from the listing
  // Where the names came from: the listing's source ("containerd", "docker", "kubelet"), or
  // "cgroup" when no runtime listed the container (then only the id and pod uid are known).
  std::string source;
  bool operator==(const Attribution&) const = default;
};

// The cgroup identity completed from the directory: the container by id, else (a process of a
// pod no runtime listed the container of) a container of the same pod for the pod's name and
// namespace. `directory` may be null: then only the cgroup's ids.
Attribution attribute(const CgroupIdentity& id, const ContainerDirectory* directory);

// The process's container and pod; nullopt when it is in no container (or gone).
std::optional<Attribution> attribute_pid(const host::HostFs& fs,
                                         const ContainerDirectory* directory, uint32_t pid);

// Adds the known fields to a JSON object: "container_id", "container", "pod", "namespace",
// "pod_uid" (each only when known) and "attribution_source".
void add_attribution(const Attribution& a, nlohmann::json& object);

// When the process started, in seconds since boot (/proc/<pid>/stat, field 22); nullopt when
// gone or unreadable. Tells a pid a kernel line named from a later process that reused it.
std::optional<double> process_start_seconds(const host::HostFs& fs, uint32_t pid);

}  // namespace gpud::runtimes
