// Where --kubernetes-node-conditions finds the API server and its credentials: a kubeconfig file
// (--kubeconfig or $KUBECONFIG) outside a pod, the pod's service account inside one; and the
// node's name ($NODE_NAME or --kubernetes-node-name).
#pragma once

#include <chrono>
#include <string>

#include "core/result.h"
#include "sinks/kubernetes_api.h"

namespace gpud::app {

// `gpud run`'s Kubernetes settings (--kubernetes-node-conditions and the flags beside it).
struct KubernetesSettings {
  bool node_conditions = false;  // off by default
  std::string kubeconfig;        // --kubeconfig, else $KUBECONFIG; "": the pod's service account
  std::string node_name;         // --kubernetes-node-name, else $NODE_NAME
  std::string event_namespace = "default";
  // The pod's service-account files (token, ca.crt); tests point it at their own.
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  // Hidden (tests): how often the findings are read, the least time between two status writes,
  // the rewrite of unchanged conditions, each call's deadline and the longest backoff.
  std::chrono::milliseconds poll_interval{5000};
  std::chrono::milliseconds min_write_interval{10'000};
  std::chrono::milliseconds resync_interval{std::chrono::minutes(10)};
  std::chrono::milliseconds api_timeout{10'000};
  std::chrono::milliseconds max_backoff{std::chrono::minutes(5)};
};

inline constexpr const char* kNodeNameEnv = "NODE_NAME";
inline constexpr const char* kKubeconfigEnv = "KUBECONFIG";

// Fills the node name from $NODE_NAME (`node_name_env`, nullptr: unset) and the kubeconfig from
// $KUBECONFIG (its first path) where the flags left them empty; with --kubernetes-node-conditions,
// an error when no node name is known or it is not a valid name.
[[nodiscard]] Result<void> resolve_kubernetes_settings(KubernetesSettings& settings,
                                                       const char* node_name_env,
                                                       const char* kubeconfig_env);

// The current context's cluster and user of a kubeconfig: server, certificate-authority(-data),
// insecure-skip-tls-verify, token, tokenFile, client-certificate(-data), client-key(-data).
// Relative paths are relative to the file's folder. Credentials gpud cannot use (exec plugins,
// auth providers) are an error that says so.
[[nodiscard]] Result<sinks::KubernetesConnection> connection_from_kubeconfig(
    const std::string& path);

// Inside a pod: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT with the service
// account's token (re-read before each call) and CA from `service_account_dir`.
[[nodiscard]] Result<sinks::KubernetesConnection> connection_in_cluster(
    const char* service_host, const char* service_port, const std::string& service_account_dir);

// The connection: the kubeconfig when one is set, else the pod's service account (from the
// environment).
[[nodiscard]] Result<sinks::KubernetesConnection> kubernetes_connection(
    const KubernetesSettings& settings);

}  // namespace gpud::app
