// /proc/<pid>/cgroup to the container (and Kubernetes pod) a process runs in: the id that
// containerd, docker and CRI-O put in the cgroup path, under cgroup v1 and v2, with the systemd
// and the cgroupfs cgroup drivers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "host/host_fs.h"

namespace gpud::runtimes {

struct CgroupIdentity {
  std::string container_id;  // 64 lowercase hex digits; empty when the path names no container
  std::string pod_uid;       // "8-4-4-4-12" with dashes; empty outside a Kubernetes pod
  // Who made the cgroup, where its name says so: "containerd" (cri-containerd-), "docker"
  // (docker-, /docker/), "crio" (crio-); empty for a bare id under a pod (cgroupfs driver).
  std::string runtime;
  bool operator==(const CgroupIdentity&) const = default;
};

// One cgroup path ("/kubepods.slice/.../cri-containerd-<id>.scope", "/docker/<id>"): the innermost
// container id and the pod uid; nullopt when it names neither.
std::optional<CgroupIdentity> parse_cgroup_path(std::string_view path);

// The text of /proc/<pid>/cgroup ("hierarchy:controllers:path" lines; v2 is the one "0::" line).
// The first line whose path names a container wins (every v1 hierarchy names the same one);
// otherwise the first that names a pod. Lines that are not of that form are skipped.
std::optional<CgroupIdentity> parse_proc_cgroup(std::string_view text);

// Reads /proc/<pid>/cgroup under the host root: an error when it cannot be read (the process is
// gone), nullopt when the process is in no container.
Result<std::optional<CgroupIdentity>> read_process_cgroup(const host::HostFs& fs, uint32_t pid);

}  // namespace gpud::runtimes
