// ContainerSource: the node's container listings, as a source like the NVIDIA one. The runtime
// components (containerd, docker, kubelet) list through it: it makes the call (the CRI, docker's
// Engine API, the kubelet's /pods and pod-resources), and from what each runtime answered it keeps
// the directory that fault attribution reads. A listing replaces its runtime's part; a runtime
// that is gone (no socket, nothing serving there) has its part dropped; a listing that failed for
// another reason leaves the last one, which ages out (ContainerDirectory's max age). The
// components say where a runtime answers (the socket or endpoint they found) and judge the typed
// answer; none of them writes the directory.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "runtimes/container_directory.h"
#include "runtimes/cri.h"
#include "runtimes/docker.h"
#include "runtimes/kubelet_pods.h"

namespace gpud::runtimes {

// The directory's source names of the runtimes listed through the CRI and the Engine API.
inline constexpr std::string_view kContainerdSource = "containerd";
inline constexpr std::string_view kDockerSource = "docker";

// The directory's entries for a CRI listing: every container, and each sandbox's own (pause)
// container, with its pod's name, namespace and uid.
std::vector<ContainerInfo> cri_container_infos(const CriPods& pods, std::string_view source);
// The directory's entries for docker's listing (source "docker"): a Kubernetes container is named
// by its pod spec's container name.
std::vector<ContainerInfo> docker_container_infos(const std::vector<DockerContainer>& containers);

class ContainerSource {
 public:
  // Lists into `directory` (which must outlive the source); CRI calls go through `helper` (an
  // empty executable: the cri module in this process).
  explicit ContainerSource(ContainerDirectory& directory, CriHelper helper = {});

  // containerd's pod sandboxes and containers at `socket`. Nothing serving the CRI there
  // (UNAVAILABLE, UNIMPLEMENTED) drops containerd's part.
  Result<CriPods> containerd_pods(const std::string& socket, std::chrono::milliseconds timeout);
  // docker's containers, through `client` (whose ping answered).
  Result<std::vector<DockerContainer>> docker_containers(DockerClient& client);
  // The kubelet's pods at `endpoint`.
  Result<std::vector<KubeletPod>> kubelet_pods(const KubeletEndpoint& endpoint,
                                               std::chrono::milliseconds timeout = kKubeletTimeout);
  // The devices the kubelet allocated, from its pod-resources socket. A failed listing drops them:
  // an allocation is never kept past the list that stopped showing it.
  Result<std::vector<PodResources>> pod_resources(const std::string& socket,
                                                  std::chrono::milliseconds timeout);
  // A runtime the caller found gone (its socket missing, its daemon not answering): what
  // `source` listed is dropped (kContainerdSource, kDockerSource, kKubeletSource,
  // kPodResourcesSource).
  void gone(std::string_view source);

  // The CRI client the listings use (a component's other CRI calls, such as a version probe).
  const CriClient& cri() const { return cri_; }
  const ContainerDirectory& directory() const { return directory_; }

 private:
  ContainerDirectory& directory_;
  CriClient cri_;
};

}  // namespace gpud::runtimes
