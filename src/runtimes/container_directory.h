// ContainerDirectory: what the container runtimes (containerd, docker, the kubelet) last listed,
// so that a GPU process or an Xid's pid can be traced to its container and pod. ContainerSource
// keeps it: each runtime's listing replaces that runtime's part; a listing that failed publishes
// nothing new and the old list stays until the runtime lists again or is gone (a list is kept for
// at most `max_age`).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpud::runtimes {

struct ContainerInfo {
  std::string id;        // the runtime's full container id (64 hex digits for containerd/docker)
  std::string name;      // container name (Kubernetes: the pod spec's container name)
  std::string pod_name;  // empty outside Kubernetes
  std::string pod_namespace;  // empty outside Kubernetes
  std::string pod_uid;        // empty where unknown
  std::string source;         // who listed it: "containerd", "docker", "kubelet"
};

// A device the kubelet allocated to a container (pod-resources `List`): for NVIDIA GPUs the id is
// the GPU's UUID (or a MIG device's), so a GPU maps to its pod even when no process runs on it.
struct DeviceHolder {
  std::string device_id;
  std::string resource_name;  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", ...
  std::string pod_name;
  std::string pod_namespace;
  std::string container;
  std::string source;  // "pod-resources"
};

class ContainerDirectory {
 public:
  explicit ContainerDirectory(std::chrono::seconds max_age = std::chrono::minutes(10))
      : max_age_(max_age) {}

  // Replaces everything `source` listed before.
  void publish(std::string_view source, std::vector<ContainerInfo> containers);
  // Forgets what `source` listed (its daemon went away).
  void clear(std::string_view source);
  // The container with this id (a full id, or a unique prefix of at least 12 characters), the
  // entry with pod details preferred where several sources list it; nullopt when none does.
  std::optional<ContainerInfo> find(std::string_view container_id) const;
  // Every listed container, for the API and tests.
  std::vector<ContainerInfo> all() const;

  // Replaces the device allocations `source` published before (kept for at most `max_age` too).
  void publish_devices(std::string_view source, std::vector<DeviceHolder> devices);
  void clear_devices(std::string_view source);
  // The container holding this device id (exact, case-insensitive: NVML and the device plugin
  // agree on UUIDs but not always on case); nullopt when none is listed.
  std::optional<DeviceHolder> find_device(std::string_view device_id) const;

 private:
  struct Listing {
    std::chrono::steady_clock::time_point at;
    std::vector<ContainerInfo> containers;
  };
  std::chrono::seconds max_age_;
  mutable std::mutex mu_;
  std::map<std::string, Listing, std::less<>> by_source_;
  struct DeviceListing {
    std::chrono::steady_clock::time_point at;
    std::vector<DeviceHolder> devices;
  };
  std::map<std::string, DeviceListing, std::less<>> devices_by_source_;
};

}  // namespace gpud::runtimes
