// The docker Engine API as gpud reads it: the C ABI of the optional client module
// (libgpud-docker.so, which carries libcurl so gpud itself never links it), and the C++ client over
// it that the `docker` component uses (ping, version, the container list with the Kubernetes pod
// each container belongs to).
#pragma once

#include <stddef.h>
#include <stdint.h>

// ---- The module's C ABI -------------------------------------------------------------------------
// libgpud-docker.so exports exactly one symbol, gpud_docker_client_v1, returning a static table.
// The module is a transport: one HTTP GET over the daemon's unix socket with a deadline. What the
// paths mean and how the JSON is read is the C++ side's (below), so the module stays small and its
// ABI changes only with the transport.
extern "C" {

#define GPUD_DOCKER_CLIENT_ABI 1u

// How a request ended.
enum gpud_docker_outcome {
  GPUD_DOCKER_ANSWERED = 0,         // an HTTP answer (any status; http_status and body hold it)
  GPUD_DOCKER_CONNECT_FAILED = 1,   // the socket refused the connection or is not a socket
  GPUD_DOCKER_CONNECTION_LOST = 2,  // connected, but the connection closed before a full answer
  GPUD_DOCKER_TIMED_OUT = 3,        // no full answer before the deadline
  GPUD_DOCKER_BAD_RESPONSE = 4,     // the bytes that came back are not HTTP
  GPUD_DOCKER_TOO_LARGE = 5,        // the body exceeded max_body_bytes
  GPUD_DOCKER_FAILED = 6,           // anything else (out of memory, libcurl could not start)
};

struct gpud_docker_response {
  int outcome;        // a gpud_docker_outcome
  long http_status;   // the HTTP status when ANSWERED, else 0
  char* body;         // the body, NUL-terminated; "" when none; never NULL
  size_t body_len;    // its length (a body may hold NULs)
  char* api_version;  // the daemon's Api-Version header; "" when absent; never NULL
  char* error;        // why, when not ANSWERED (libcurl's words); "" otherwise; never NULL
};

struct gpud_docker_client_table_v1 {
  uint32_t abi_version;  // GPUD_DOCKER_CLIENT_ABI
  // The libcurl the module runs on, e.g. "libcurl/7.88.1 OpenSSL/3.0.17 ...", for logs.
  const char* (*library_version)(void);
  // GET `path` (with its query, e.g. "/v1.41/containers/json?all=1") from the Engine API listening
  // on the unix socket `socket_path`. The whole request (connect, send, answer) has `timeout_ms`;
  // a body longer than `max_body_bytes` is cut off (TOO_LARGE). Thread-safe; never NULL (out of
  // memory aborts). The caller frees the answer with free_response.
  struct gpud_docker_response* (*get)(const char* socket_path, const char* path, long timeout_ms,
                                      size_t max_body_bytes);
  void (*free_response)(struct gpud_docker_response* response);
};

// The module's one exported function: its table, valid for the life of the process.
typedef const struct gpud_docker_client_table_v1* (*gpud_docker_client_v1_fn)(void);
#define GPUD_DOCKER_CLIENT_SYMBOL "gpud_docker_client_v1"

}  // extern "C"

// ---- The C++ client (runtimes layer) ------------------------------------------------------------
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpud::runtimes {

// The newest Engine API version gpud asks for; an older daemon is asked in its own version (the
// Api-Version of its /_ping answer). 1.41 is Docker 20.10's.
inline constexpr std::string_view kDockerApiVersion = "1.41";
// The most an answer may hold (a host with thousands of containers lists a few MiB).
inline constexpr size_t kDockerMaxBodyBytes = size_t{32} << 20;

// What went wrong in a call, as the Error's code.
enum class DockerErrorKind : int {
  kOther = 1,
  kConnect = 2,      // nothing listens on the socket, or the socket does not exist
  kTimeout = 3,      // no full answer within the deadline
  kBadResponse = 4,  // not HTTP, a body that is not the JSON expected, or an answer too large
  kHttp = 5,         // the daemon answered with an error status (its message in the Error)
  kModule = 6,       // libgpud-docker.so could not be loaded
};

DockerErrorKind docker_error_kind(const Error& e);
// The daemon refused the API version asked for as too new for it ("client version 1.43 is too
// new. Maximum supported API version is 1.41"): GPUd's "client version newer than daemon".
bool is_docker_client_too_new(const Error& e);

struct DockerContainer {
  std::string id;    // the full id (64 hex digits)
  std::string name;  // the first of Names, without its leading '/'
  std::string image;
  int64_t created_at = 0;  // unix seconds
  std::string state;       // "running", "exited", "created", "paused", "restarting", "dead"
  // From the labels Kubernetes' docker integrations (dockershim, cri-dockerd) set; empty outside
  // Kubernetes.
  std::string pod_name;            // io.kubernetes.pod.name
  std::string pod_namespace;       // io.kubernetes.pod.namespace
  std::string pod_uid;             // io.kubernetes.pod.uid
  std::string pod_container_name;  // io.kubernetes.container.name
};

struct DockerVersion {
  std::string version;          // "20.10.24+dfsg1"
  std::string api_version;      // "1.41"
  std::string min_api_version;  // "1.12"
  std::string os;
  std::string arch;
  std::string kernel_version;
};

// The Engine API's documents, parsed. Garbled JSON or a wrong shape is an error of kind
// kBadResponse that says what was wrong; unknown fields are ignored.
Result<std::vector<DockerContainer>> parse_docker_containers(std::string_view json);
Result<DockerVersion> parse_docker_version(std::string_view json);
// The daemon's words for an error answer: the "message" of its JSON body, else the body itself
// (trimmed, at most 300 bytes), else the status.
std::string docker_error_message(long http_status, std::string_view body);
// "1.40" < "1.41" < "1.100"; false where either is not <major>.<minor>.
bool docker_api_version_less(std::string_view a, std::string_view b);

class DockerClient {
 public:
  // `api_version` "": the lower of kDockerApiVersion and the daemon's own (learned by ping());
  // else that version on every path (tests ask a real daemon for one it does not have).
  DockerClient(std::string socket_path, std::chrono::milliseconds timeout,
               std::string api_version = "");

  const std::string& socket_path() const { return socket_path_; }

  // GET /_ping: the daemon's Api-Version (may be ""). A socket that does not exist is a kConnect
  // error without the module being loaded.
  [[nodiscard]] Result<std::string> ping();
  // GET /v<api>/version
  [[nodiscard]] Result<DockerVersion> version();
  // GET /v<api>/containers/json?all=1: every container, running or not.
  [[nodiscard]] Result<std::vector<DockerContainer>> list_containers();

  // The version the paths carry now.
  std::string api_version() const;

 private:
  Result<std::string> get(const std::string& path, std::string* api_version_header = nullptr);

  std::string socket_path_;
  std::chrono::milliseconds timeout_;
  std::string pinned_version_;
  std::string daemon_version_;  // from the last ping
};

}  // namespace gpud::runtimes
