#include "app/kubeconfig.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "core/base64.h"
#include "core/files.h"
#include "core/strings.h"

namespace gpud::app {
namespace {

// A Kubernetes object name (RFC 1123 subdomain): it goes into URL paths.
bool valid_node_name(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  return name.front() != '-' && name.front() != '.' && name.back() != '-' && name.back() != '.';
}

// The entry named `name` in the kubeconfig's list `list` ("clusters", "users", "contexts"): its
// inner map (under "cluster", "user", "context").
Result<YAML::Node> named_entry(const YAML::Node& root, const char* list, const char* inner,
                               const std::string& name) {
  const YAML::Node entries = root[list];
  if (entries && entries.IsSequence())
    for (const YAML::Node& e : entries)
      if (e.IsMap() && e["name"] && e["name"].IsScalar() && e["name"].Scalar() == name) {
        if (!e[inner] || !e[inner].IsMap())
          return make_error(std::string(list) + " entry \"" + name + "\" has no " + inner);
        return e[inner];
      }
  return make_error(std::string("no ") + inner + " named \"" + name + "\" in " + list);
}

std::string text(const YAML::Node& map, const char* key) {
  const YAML::Node v = map[key];
  return v && v.IsScalar() ? v.Scalar() : std::string();
}

// `inline_key` (base64) when set, else the file `path_key` names (relative to `dir`); "" when
// neither is set.
Result<std::string> pem_of(const YAML::Node& map, const char* inline_key, const char* path_key,
                           const std::filesystem::path& dir) {
  if (std::string data = text(map, inline_key); !data.empty()) {
    bool ok = false;
    std::string pem = decode_base64(data, ok);
    if (!ok) return make_error(std::string(inline_key) + " is not base64");
    return pem;
  }
  std::string path = text(map, path_key);
  if (path.empty()) return std::string();
  std::filesystem::path p(path);
  if (p.is_relative()) p = dir / p;
  auto pem = read_file(p.string());
  if (!pem) return make_error(std::string(path_key) + ": " + pem.error().message);
  return *pem;
}

}  // namespace

Result<void> resolve_kubernetes_settings(KubernetesSettings& k, const char* node_name_env,
                                         const char* kubeconfig_env) {
  if (k.node_name.empty() && node_name_env != nullptr)
    k.node_name = std::string(trim(node_name_env));
  if (k.kubeconfig.empty() && kubeconfig_env != nullptr) {
    // $KUBECONFIG may list several files; gpud reads the first.
    std::string_view list = kubeconfig_env;
    k.kubeconfig = std::string(trim(list.substr(0, list.find(':'))));
  }
  if (!k.node_conditions) return {};
  if (k.node_name.empty())
    return make_error(
        "--kubernetes-node-conditions needs this node's Kubernetes name: set NODE_NAME (the "
        "DaemonSet sets it from spec.nodeName) or --kubernetes-node-name");
  if (!valid_node_name(k.node_name))
    return make_error("invalid Kubernetes node name \"" + k.node_name +
                      "\": want lower-case letters, digits, '-' and '.'");
  if (!valid_node_name(k.event_namespace))
    return make_error("invalid --kubernetes-event-namespace \"" + k.event_namespace + "\"");
  return {};
}

Result<sinks::KubernetesConnection> connection_from_kubeconfig(const std::string& path) {
  auto content = read_file(path);
  if (!content) return content.error();
  const std::string where = "kubeconfig " + path;
  auto fail = [&where](const std::string& what) { return make_error(where + ": " + what); };
  YAML::Node root;
  try {
    root = YAML::Load(*content);
  } catch (const YAML::Exception& e) {
    return fail(std::string("not YAML: ") + e.what());
  }
  if (!root.IsMap()) return fail("not a kubeconfig (no top-level map)");
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  sinks::KubernetesConnection conn;
  conn.where = where;
  try {
    std::string context_name = text(root, "current-context");
    if (context_name.empty()) return fail("no current-context");
    auto context = named_entry(root, "contexts", "context", context_name);
    if (!context) return fail(context.error().message);
    auto cluster = named_entry(root, "clusters", "cluster", text(*context, "cluster"));
    if (!cluster) return fail(cluster.error().message);
    auto user = named_entry(root, "users", "user", text(*context, "user"));
    if (!user) return fail(user.error().message);

    conn.server = text(*cluster, "server");
    if (conn.server.empty()) return fail("the cluster has no server");
    conn.insecure_skip_tls_verify = text(*cluster, "insecure-skip-tls-verify") == "true";
    auto ca = pem_of(*cluster, "certificate-authority-data", "certificate-authority", dir);
    if (!ca) return fail(ca.error().message);
    conn.ca_pem = std::move(*ca);

    if ((*user)["exec"] || (*user)["auth-provider"])
      return fail(
          "the user's credentials come from an exec plugin or auth provider, which gpud "
          "does not run; give it a token, tokenFile or client certificate");
    conn.token = text(*user, "token");
    if (std::string token_file = text(*user, "tokenFile"); !token_file.empty()) {
      std::filesystem::path p(token_file);
      conn.token_file = (p.is_relative() ? dir / p : p).string();
    }
    auto cert = pem_of(*user, "client-certificate-data", "client-certificate", dir);
    if (!cert) return fail(cert.error().message);
    auto key = pem_of(*user, "client-key-data", "client-key", dir);
    if (!key) return fail(key.error().message);
    conn.client_cert_pem = std::move(*cert);
    conn.client_key_pem = std::move(*key);
    if (conn.client_cert_pem.empty() != conn.client_key_pem.empty())
      return fail("the user has a client certificate without its key, or a key without one");
  } catch (const YAML::Exception& e) {
    return fail(e.what());
  }
  return conn;
}

Result<sinks::KubernetesConnection> connection_in_cluster(const char* service_host,
                                                          const char* service_port,
                                                          const std::string& service_account_dir) {
  if (service_host == nullptr || *service_host == '\0')
    return make_error(
        "not in a pod (KUBERNETES_SERVICE_HOST is not set) and no kubeconfig: pass --kubeconfig "
        "FILE or set KUBECONFIG");
  sinks::KubernetesConnection conn;
  conn.where = "service account " + service_account_dir;
  std::string host = service_host;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6
  conn.server = "https://" + host + ":" +
                (service_port != nullptr && *service_port != '\0' ? service_port : "443");
  conn.token_file = service_account_dir + "/token";
  if (auto token = read_file(conn.token_file); !token)
    return make_error("the service account's token: " + token.error().message);
  auto ca = read_file(service_account_dir + "/ca.crt");
  if (!ca) return make_error("the service account's CA: " + ca.error().message);
  conn.ca_pem = std::move(*ca);
  return conn;
}

Result<sinks::KubernetesConnection> kubernetes_connection(const KubernetesSettings& k) {
  if (!k.kubeconfig.empty()) return connection_from_kubeconfig(k.kubeconfig);
  return connection_in_cluster(std::getenv("KUBERNETES_SERVICE_HOST"),
                               std::getenv("KUBERNETES_SERVICE_PORT"), k.service_account_dir);
}

}  // namespace gpud::app
