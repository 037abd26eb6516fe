// KubeletComponent ("kubelet"): the pods the node's kubelet runs, from its API (`GET /pods`): the
// authenticated HTTPS port with a bearer token, or the read-only HTTP port where it is enabled;
// each pod's phase and its containers' restarts. It lists through runtimes::ContainerSource (the
// client is runtimes/kubelet_pods), which keeps the containers for fault attribution (source
// "kubelet"). GPUd had it until 2026 (reading the read-only port only).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "components/component.h"
#include "components/containers/runtime_listings.h"
#include "core/cached_answer.h"
#include "host/host_fs.h"
#include "runtimes/container_directory.h"
#include "runtimes/cri.h"
#include "runtimes/kubelet_pods.h"

namespace gpud::components {

inline constexpr std::string_view kKubeletName = runtimes::kKubeletSource;
using runtimes::kKubeletTimeout;
using runtimes::kPodResourcesSocket;
using runtimes::KubeletContainer;
using runtimes::KubeletEndpoint;
using runtimes::KubeletPod;

// One endpoint tried: the pods, or why it gave none.
struct KubeletAttempt {
  std::string endpoint;  // KubeletEndpoint::describe()
  Result<std::vector<KubeletPod>> pods = std::vector<KubeletPod>{};
};

struct KubeletSnapshot {
  std::vector<KubeletAttempt> attempts;  // in the order tried; the last is the one that answered
  std::string token_note;                // why no token was sent to the authenticated port
  // List of the pod-resources socket; nullopt where the socket does not exist.
  std::optional<Result<std::vector<runtimes::PodResources>>> pod_resources;
};

// The rule: the first attempt that listed pods ⇒ Healthy "N pods (R running, C container
// restarts) from <endpoint>"; no attempt (both ports off) ⇒ Healthy, not applicable; else Degraded
// "no pods from the kubelet: ..." naming each endpoint's error (an untrusted peer's says "not
// trusted"). A pod-resources socket that exists but whose List fails ⇒ Degraded too ("kubelet
// pod-resources: ..."). extra_info.data holds the endpoint and a summary of the pods (counts by
// phase, containers, restarts, waiting and terminated reasons; not the pods themselves), and
// "gpu_allocations" (pod, namespace, container, resource_name, device_ids) from pod-resources.
CheckResult evaluate_kubelet(const KubeletSnapshot& s);

class KubeletComponent : public Component {
 public:
  explicit KubeletComponent(const ComponentContext& ctx);

  std::string_view name() const override { return kKubeletName; }
  std::vector<std::string> tags() const override { return {"container", "kubelet"}; }
  // A kubelet is installed: the `kubelet` executable where commands are looked up, or
  // /var/lib/kubelet under the host root (a containerised kubelet), or a token file was given.
  // Looked up again at most once a minute.
  bool supported() const override;
  CheckResult check() override;

 private:
  host::HostFs fs_;
  RuntimeListings listings_;  // the pods' and the allocations' listings go through it
  CachedAnswer installed_;
};

}  // namespace gpud::components
