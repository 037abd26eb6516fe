#include "runtimes/container_source.h"

#include <map>

namespace gpud::runtimes {

std::vector<ContainerInfo> cri_container_infos(const CriPods& pods, std::string_view source) {
  std::map<std::string, const CriSandbox*, std::less<>> sandboxes;
  for (const auto& p : pods.sandboxes) sandboxes[p.id] = &p;
  std::vector<ContainerInfo> list;
  list.reserve(pods.sandboxes.size() + pods.containers.size());
  for (const auto& p : pods.sandboxes)
    list.push_back({p.id, "", p.name, p.pod_namespace, p.uid, std::string(source)});
  for (const auto& c : pods.containers) {
    auto it = sandboxes.find(c.sandbox_id);
    const CriSandbox* p = it != sandboxes.end() ? it->second : nullptr;
    list.push_back({c.id, c.name, p ? p->name : "", p ? p->pod_namespace : "", p ? p->uid : "",
                    std::string(source)});
  }
  return list;
}

std::vector<ContainerInfo> docker_container_infos(const std::vector<DockerContainer>& containers) {
  std::vector<ContainerInfo> out;
  out.reserve(containers.size());
  for (const DockerContainer& c : containers) {
    ContainerInfo info;
    info.id = c.id;
    info.name = c.pod_container_name.empty() ? c.name : c.pod_container_name;
    info.pod_name = c.pod_name;
    info.pod_namespace = c.pod_namespace;
    info.pod_uid = c.pod_uid;
    info.source = std::string(kDockerSource);
    out.push_back(std::move(info));
  }
  return out;
}

ContainerSource::ContainerSource(ContainerDirectory& directory, CriHelper helper)
    : directory_(directory), cri_(std::move(helper)) {}

Result<CriPods> ContainerSource::containerd_pods(const std::string& socket,
                                                 std::chrono::milliseconds timeout) {
  auto pods = cri_.list_pods(socket, timeout);
  if (pods)
    directory_.publish(kContainerdSource, cri_container_infos(*pods, kContainerdSource));
  else if (pods.error().code == GPUD_CRI_UNAVAILABLE || pods.error().code == GPUD_CRI_UNIMPLEMENTED)
    directory_.clear(kContainerdSource);  // containerd (or its CRI) is gone: its list is stale
  return pods;
}

Result<std::vector<DockerContainer>> ContainerSource::docker_containers(DockerClient& client) {
  auto containers = client.list_containers();
  if (containers) directory_.publish(kDockerSource, docker_container_infos(*containers));
  return containers;
}

Result<std::vector<KubeletPod>> ContainerSource::kubelet_pods(const KubeletEndpoint& endpoint,
                                                              std::chrono::milliseconds timeout) {
  auto pods = list_kubelet_pods(endpoint, timeout);
  if (pods) directory_.publish(kKubeletSource, kubelet_containers(*pods));
  return pods;
}

Result<std::vector<PodResources>> ContainerSource::pod_resources(
    const std::string& socket, std::chrono::milliseconds timeout) {
  auto pods = cri_.list_pod_resources(socket, timeout);
  if (pods)
    directory_.publish_devices(kPodResourcesSource, nvidia_device_holders(*pods));
  else
    directory_.clear_devices(kPodResourcesSource);
  return pods;
}

void ContainerSource::gone(std::string_view source) {
  if (source == kPodResourcesSource)
    directory_.clear_devices(source);
  else
    directory_.clear(source);
}

}  // namespace gpud::runtimes
