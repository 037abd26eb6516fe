#include "runtimes/docker.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/parse_number.h"
#include "core/strings.h"
#include "runtimes/module_loader.h"

namespace gpud::runtimes {
namespace {

Error docker_error(DockerErrorKind kind, std::string message) {
  return make_error(std::move(message), static_cast<int>(kind));
}

std::string string_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string label(const nlohmann::json& labels, const char* key) {
  return labels.is_object() ? string_field(labels, key) : std::string();
}

bool parse_api_version(std::string_view v, uint64_t& major, uint64_t& minor) {
  auto dot = v.find('.');
  if (dot == std::string_view::npos) return false;
  auto a = parse_integer<uint64_t>(v.substr(0, dot));
  auto b = parse_integer<uint64_t>(v.substr(dot + 1));
  if (!a || !b) return false;
  major = *a;
  minor = *b;
  return true;
}

}  // namespace

DockerErrorKind docker_error_kind(const Error& e) {
  if (e.code < static_cast<int>(DockerErrorKind::kOther) ||
      e.code > static_cast<int>(DockerErrorKind::kModule))
    return DockerErrorKind::kOther;
  return static_cast<DockerErrorKind>(e.code);
}

bool is_docker_client_too_new(const Error& e) {
  // Docker's words since 1.13 ("client version 1.43 is too new. Maximum supported API version is
  // 1.41"); older daemons said "client is newer than server".
  const std::string& m = e.message;
  return (m.find("is too new") != std::string::npos &&
          m.find("Maximum supported API version") != std::string::npos) ||
         m.find("client is newer than server") != std::string::npos;
}

bool docker_api_version_less(std::string_view a, std::string_view b) {
  uint64_t a1 = 0, a2 = 0, b1 = 0, b2 = 0;
  if (!parse_api_version(a, a1, a2) || !parse_api_version(b, b1, b2)) return false;
  return a1 != b1 ? a1 < b1 : a2 < b2;
}

Result<std::vector<DockerContainer>> parse_docker_containers(std::string_view json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded())
    return docker_error(
        DockerErrorKind::kBadResponse,
        fmt::format("the container list is not JSON: {}", std::string(trim(json.substr(0, 120)))));
  if (!j.is_array())
    return docker_error(
        DockerErrorKind::kBadResponse,
        fmt::format("the container list is a JSON {}, not an array", j.type_name()));
  std::vector<DockerContainer> out;
  out.reserve(j.size());
  for (const auto& c : j) {
    if (!c.is_object())
      return docker_error(DockerErrorKind::kBadResponse,
                          fmt::format("a container in the list is a JSON {}", c.type_name()));
    DockerContainer d;
    d.id = string_field(c, "Id");
    if (d.id.empty())
      return docker_error(DockerErrorKind::kBadResponse, "a container in the list has no Id");
    if (auto names = c.find("Names");
        names != c.end() && names->is_array() && !names->empty() && names->front().is_string()) {
      d.name = names->front().get<std::string>();
      if (!d.name.empty() && d.name.front() == '/') d.name.erase(0, 1);
    }
    d.image = string_field(c, "Image");
    if (auto created = c.find("Created"); created != c.end() && created->is_number_integer())
      d.created_at = created->get<int64_t>();
    d.state = string_field(c, "State");
    if (auto labels = c.find("Labels"); labels != c.end()) {
      d.pod_name = label(*labels, "io.kubernetes.pod.name");
      d.pod_namespace = label(*labels, "io.kubernetes.pod.namespace");
      d.pod_uid = label(*labels, "io.kubernetes.pod.uid");
      d.pod_container_name = label(*labels, "io.kubernetes.container.name");
    }
    out.push_back(std::move(d));
  }
  return out;
}

Result<DockerVersion> parse_docker_version(std::string_view json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return docker_error(DockerErrorKind::kBadResponse,
                        fmt::format("the version document is not a JSON object: {}",
                                    std::string(trim(json.substr(0, 120)))));
  DockerVersion v;
  v.version = string_field(j, "Version");
  v.api_version = string_field(j, "ApiVersion");
  v.min_api_version = string_field(j, "MinAPIVersion");
  v.os = string_field(j, "Os");
  v.arch = string_field(j, "Arch");
  v.kernel_version = string_field(j, "KernelVersion");
  if (v.version.empty() && v.api_version.empty())
    return docker_error(DockerErrorKind::kBadResponse,
                        "the version document has neither Version nor ApiVersion");
  return v;
}

std::string docker_error_message(long http_status, std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (std::string m = string_field(j, "message"); !m.empty()) return m;
  }
  std::string text(trim(body));
  if (text.size() > 300) text = text.substr(0, 300) + "...";
  if (!text.empty()) return text;
  return fmt::format("HTTP status {}", http_status);
}

DockerClient::DockerClient(std::string socket_path, std::chrono::milliseconds timeout,
                           std::string api_version)
    : socket_path_(std::move(socket_path)),
      timeout_(timeout),
      pinned_version_(std::move(api_version)) {}

std::string DockerClient::api_version() const {
  if (!pinned_version_.empty()) return pinned_version_;
  if (!daemon_version_.empty() && docker_api_version_less(daemon_version_, kDockerApiVersion))
    return daemon_version_;
  return std::string(kDockerApiVersion);
}

Result<std::string> DockerClient::get(const std::string& path, std::string* api_version_header) {
  // Nothing to talk to: the module (and libcurl) stay unloaded.
  struct stat st {};
  if (stat(socket_path_.c_str(), &st) != 0)
    return docker_error(DockerErrorKind::kConnect,
                        fmt::format("cannot connect to the docker daemon at unix://{}: the socket "
                                    "does not exist",
                                    socket_path_));
  auto sym = load_module_symbol("docker", GPUD_DOCKER_CLIENT_SYMBOL);
  if (!sym) return docker_error(DockerErrorKind::kModule, sym.error().message);
  auto entry = reinterpret_cast<gpud_docker_client_v1_fn>(*sym);
  const gpud_docker_client_table_v1* table = entry();
  if (table == nullptr || table->abi_version != GPUD_DOCKER_CLIENT_ABI)
    return docker_error(
        DockerErrorKind::kModule,
        fmt::format("the docker module speaks ABI {}, gpud {}",
                    table == nullptr ? 0u : table->abi_version, GPUD_DOCKER_CLIENT_ABI));
  static std::once_flag logged;
  std::call_once(logged, [table] {
    logger("docker")->info("loaded the docker module ({})", table->library_version());
  });
  std::unique_ptr<gpud_docker_response, void (*)(gpud_docker_response*)> r(
      table->get(socket_path_.c_str(), path.c_str(), static_cast<long>(timeout_.count()),
                 kDockerMaxBodyBytes),
      table->free_response);
  const std::string where = fmt::format("unix://{} GET {}", socket_path_, path);
  switch (r->outcome) {
    case GPUD_DOCKER_ANSWERED: break;
    case GPUD_DOCKER_CONNECT_FAILED:
      return docker_error(DockerErrorKind::kConnect,
                          fmt::format("cannot connect to the docker daemon at unix://{}: {}",
                                      socket_path_, r->error));
    case GPUD_DOCKER_CONNECTION_LOST:
      return docker_error(
          DockerErrorKind::kConnect,
          fmt::format("the docker daemon closed the connection ({}): {}", where, r->error));
    case GPUD_DOCKER_TIMED_OUT:
      return docker_error(DockerErrorKind::kTimeout,
                          fmt::format("the docker daemon did not answer within {} ms ({}): {}",
                                      timeout_.count(), where, r->error));
    case GPUD_DOCKER_BAD_RESPONSE:
      return docker_error(
          DockerErrorKind::kBadResponse,
          fmt::format("the docker daemon's answer is not HTTP ({}): {}", where, r->error));
    case GPUD_DOCKER_TOO_LARGE:
      return docker_error(DockerErrorKind::kBadResponse,
                          fmt::format("the docker daemon's answer is larger than {} bytes ({})",
                                      kDockerMaxBodyBytes, where));
    default:
      return docker_error(DockerErrorKind::kOther,
                          fmt::format("the docker request failed ({}): {}", where, r->error));
  }
  if (api_version_header != nullptr) *api_version_header = r->api_version;
  std::string body(r->body, r->body_len);
  if (r->http_status < 200 || r->http_status >= 300)
    return docker_error(DockerErrorKind::kHttp,
                        fmt::format("Error response from daemon ({} {}): {}", r->http_status, path,
                                    docker_error_message(r->http_status, body)));
  return body;
}

Result<std::string> DockerClient::ping() {
  std::string header;
  auto body = get("/_ping", &header);
  if (!body) return body.error();
  if (trim(*body) != "OK")
    return docker_error(DockerErrorKind::kBadResponse,
                        fmt::format("the docker daemon answered /_ping with \"{}\", not \"OK\"",
                                    std::string(trim(body->substr(0, 120)))));
  daemon_version_ = header;
  return header;
}

Result<DockerVersion> DockerClient::version() {
  auto body = get(fmt::format("/v{}/version", api_version()));
  if (!body) return body.error();
  return parse_docker_version(*body);
}

Result<std::vector<DockerContainer>> DockerClient::list_containers() {
  auto body = get(fmt::format("/v{}/containers/json?all=1", api_version()));
  if (!body) return body.error();
  return parse_docker_containers(*body);
}

}  // namespace gpud::runtimes
