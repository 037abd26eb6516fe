// The kubelet's pod list (`GET /pods`) and pod-resources allocations: where a pod's containers come
// from when the kubelet, not a runtime, is asked. Whatever listens on the kubelet's ports is
// believed only when it is the kubelet: its socket belongs to root, its certificate verifies, it
// answers within one deadline and its list is small. The kubelet component judges these listings;
// runtimes::ContainerSource keeps them for fault attribution.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "host/host_fs.h"
#include "runtimes/container_directory.h"
#include "runtimes/cri.h"

namespace gpud::runtimes {

// The directory's sources for what the kubelet lists: its pods' containers, and the devices
// pod-resources allocates.
inline constexpr std::string_view kKubeletSource = "kubelet";
inline constexpr std::string_view kPodResourcesSource = "pod-resources";
// The whole of one request: connect, the socket's owner, the TLS handshake, the answer's head and
// its body; a peer that trickles its answer is cut when it passes.
inline constexpr std::chrono::milliseconds kKubeletTimeout{5000};
// A /pods document larger than this is refused unread (110 pods of a busy node are well under
// 2 MiB), and so are more pods or containers than a node runs: the list's memory stays bounded.
inline constexpr size_t kKubeletMaxBodyBytes = 8 << 20;
inline constexpr size_t kKubeletMaxPods = 1000;
inline constexpr size_t kKubeletMaxContainers = 10000;
// The answer's status line and headers.
inline constexpr size_t kKubeletMaxHeadBytes = 64 << 10;
// The service account token a pod gets; read as is, then under --host-root.
inline constexpr std::string_view kServiceAccountTokenFile =
    "/var/run/secrets/kubernetes.io/serviceaccount/token";
// Where the kubelet's serving certificate is verified from when --kubelet-ca-file is not given,
// each where it exists: the service account's CA (as is, then under --host-root; the cluster CA
// that signs bootstrapped serving certificates), then under --host-root the kubelet's own
// self-signed certificate with its CA, and kubeadm's cluster CA.
inline constexpr std::string_view kServiceAccountCaFile =
    "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
inline constexpr std::string_view kKubeletSelfSignedCertFile = "/var/lib/kubelet/pki/kubelet.crt";
inline constexpr std::string_view kClusterCaFile = "/etc/kubernetes/pki/ca.crt";

struct KubeletContainer {
  std::string name;
  std::string id;       // containerID without its "<runtime>://" scheme; empty before it starts
  std::string runtime;  // the scheme: "containerd", "docker", "cri-o"
  bool ready = false;
  int64_t restart_count = 0;
  std::string state;   // "running", "waiting", "terminated" ("" when the kubelet says none)
  std::string reason;  // the waiting or terminated state's reason (CrashLoopBackOff, OOMKilled)
  bool init = false;   // an init container
};

struct KubeletPod {
  std::string name;
  std::string pod_namespace;
  std::string uid;
  std::string phase;  // Pending, Running, Succeeded, Failed, Unknown
  std::vector<KubeletContainer> containers;
};

// A Kubernetes PodList ({"kind":"PodList","items":[...]}) to its pods, read as a stream for the
// fields above only (no document tree is built); an error naming what is wrong when the document
// is not one (not JSON, no items array, an item without metadata.name, nested deeper than any
// pod, more than kKubeletMaxPods pods or kKubeletMaxContainers containers).
Result<std::vector<KubeletPod>> parse_pod_list(std::string_view body);

// Where to ask: http://host:port/pods, or https with the bearer token. Before anything is sent the
// socket that accepted the connection must belong to root (the kubelet runs as root; an
// unprivileged user or a hostNetwork pod can listen on a free kubelet port), and over https the
// serving certificate must verify against ca_files: the token never reaches another peer.
struct KubeletEndpoint {
  std::string host = "127.0.0.1";  // an IP address on this node
  int port = 0;
  bool https = false;
  std::string token;  // sent as "Authorization: Bearer" (https only, after the verification)
  // PEM files of the CAs (or the certificate itself) the serving certificate must verify against;
  // https with none is refused without connecting. The name in the certificate is not checked
  // (kubelet certificates name the node, rarely 127.0.0.1): the socket's owner pins the peer.
  std::vector<std::string> ca_files;
  std::string describe() const;  // "http://127.0.0.1:10255"
};

// GET /pods: the body, or why not (not listening, not trusted, no answer within `timeout`, a
// status other than 200, larger than kKubeletMaxBodyBytes). `timeout` bounds the whole exchange.
Result<std::string> fetch_kubelet_pods(const KubeletEndpoint& endpoint,
                                       std::chrono::milliseconds timeout = kKubeletTimeout);

// fetch_kubelet_pods, then parse_pod_list (its error names the endpoint).
Result<std::vector<KubeletPod>> list_kubelet_pods(
    const KubeletEndpoint& endpoint, std::chrono::milliseconds timeout = kKubeletTimeout);

// The token for the authenticated port: --kubelet-token-file as given, else the service account's
// (as is, then under the host root); "" with `note` saying why when there is none.
std::string read_kubelet_token(const std::string& flag, const host::HostFs& fs, std::string& note);
// The CA files the serving certificate is verified against: --kubelet-ca-file as given, else each
// default that exists.
std::vector<std::string> kubelet_ca_files(const std::string& flag, const host::HostFs& fs);

// The kubelet's pod-resources socket (PodResourcesLister.List, v1), under --host-root: which
// devices (GPU UUIDs for nvidia.com/gpu) each container holds.
inline constexpr std::string_view kPodResourcesSocket =
    "/var/lib/kubelet/pod-resources/kubelet.sock";

// The containers of the listed pods as the directory keeps them (those with an id).
std::vector<ContainerInfo> kubelet_containers(const std::vector<KubeletPod>& pods);

// The NVIDIA devices (resource names "nvidia.com/...") the pod-resources listing allocates, one
// entry per device id, as the directory keeps them (source "pod-resources").
std::vector<DeviceHolder> nvidia_device_holders(const std::vector<PodResources>& pods);

}  // namespace gpud::runtimes
