// The CRI and kubelet pod-resources clients: the C ABI of the optional module libgpud-cri.so
// (gRPC lives there, never in gpud), and CriClient, the C++ side that parses its JSON answers into
// plain structs. CriClient makes the daemon's calls in a short-lived child (`gpud cri-helper`,
// which loads the module) when given one, so the daemon never maps gRPC; otherwise it loads the
// module in its own process the first time it is called.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- The C ABI (src/runtimes/cri_module/cri_client.cpp implements it) ----

// Raised when a field is added to the table (size grows) or a call changes meaning (version).
#define GPUD_CRI_ABI_VERSION 1

// A reply's code: 0 when the call succeeded (text is its JSON answer); otherwise the gRPC status
// code (text is the error): GPUD_CRI_UNAVAILABLE also when no connection could be made within the
// timeout (nothing listens on the socket), GPUD_CRI_UNIMPLEMENTED when the daemon answers but has
// no such service (containerd with its CRI plugin disabled).
#define GPUD_CRI_OK 0
#define GPUD_CRI_INVALID_ARGUMENT 3
#define GPUD_CRI_DEADLINE_EXCEEDED 4
#define GPUD_CRI_UNIMPLEMENTED 12
#define GPUD_CRI_INTERNAL 13
#define GPUD_CRI_UNAVAILABLE 14

typedef struct gpud_cri_reply {
  int code;
  char* text;  // NUL-terminated, never null; owned by the module: release with free_reply
} gpud_cri_reply;

// Every call connects to the unix socket `socket_path` (a plain path), makes its gRPC calls and
// disconnects, all within `timeout_ms`. No call blocks longer, none throws, any thread may call.
typedef struct gpud_cri_table_v1 {
  uint32_t abi_version;  // GPUD_CRI_ABI_VERSION
  uint32_t size;         // sizeof(gpud_cri_table_v1) as the module was built
  // RuntimeService.Version: {"version","runtime_name","runtime_version","runtime_api_version"}.
  gpud_cri_reply (*version)(const char* socket_path, int64_t timeout_ms);
  // RuntimeService.ListPodSandbox then ListContainers:
  // {"sandboxes":[{"id","name","namespace","uid","attempt","state","created_at_ns",
  //   "runtime_handler"}], "containers":[{"id","sandbox_id","name","attempt","image","image_ref",
  //   "state","created_at_ns"}]}, states as the enum names ("SANDBOX_READY", "CONTAINER_RUNNING").
  // A ListPodSandbox failure is the reply's error ("ListPodSandbox: ..."), as is ListContainers'.
  gpud_cri_reply (*list_pods)(const char* socket_path, int64_t timeout_ms);
  // For tests. RunPodSandbox of {"name","namespace","uid","attempt","host_network",
  // "labels":{...},"runtime_handler"}: {"id"}.
  gpud_cri_reply (*run_pod_sandbox)(const char* socket_path, const char* config_json,
                                    int64_t timeout_ms);
  // For tests. StopPodSandbox / RemovePodSandbox of an id: {}.
  gpud_cri_reply (*stop_pod_sandbox)(const char* socket_path, const char* sandbox_id,
                                     int64_t timeout_ms);
  gpud_cri_reply (*remove_pod_sandbox)(const char* socket_path, const char* sandbox_id,
                                       int64_t timeout_ms);
  // The kubelet's PodResourcesLister.List (pod-resources v1):
  // {"pod_resources":[{"name","namespace","containers":[{"name","devices":[{"resource_name",
  //   "device_ids":[...]}],"cpu_ids":[...]}]}]}.
  gpud_cri_reply (*list_pod_resources)(const char* socket_path, int64_t timeout_ms);
  void (*free_reply)(gpud_cri_reply* reply);
} gpud_cri_table_v1;

// The module's one exported symbol.
#define GPUD_CRI_ENTRY "gpud_cri_client_v1"
typedef const gpud_cri_table_v1* (*gpud_cri_client_v1_fn)(void);

#ifdef __cplusplus
}  // extern "C"

// ---- The C++ side (runtimes layer; gpud never links gRPC) ----

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpud::runtimes {

// Error::code of a failed CriClient call: a GPUD_CRI_* code, or this one when the module could not
// be loaded (the error says where it was looked for).
inline constexpr int kCriModuleMissing = -1;

struct CriVersion {
  std::string runtime_name;         // "containerd"
  std::string runtime_version;      // "1.6.20~ds1"
  std::string runtime_api_version;  // "v1"
};

struct CriSandbox {
  std::string id;
  std::string name;           // the pod's name
  std::string pod_namespace;  // the pod's namespace
  std::string uid;            // the pod's uid
  uint32_t attempt = 0;
  std::string state;  // "SANDBOX_READY", "SANDBOX_NOTREADY"
  std::chrono::system_clock::time_point created;
  std::string runtime_handler;
  bool ready() const { return state == "SANDBOX_READY"; }
};

struct CriContainer {
  std::string id;
  std::string name;  // the container's name in the pod spec
  std::string sandbox_id;
  uint32_t attempt = 0;
  std::string state;  // "CONTAINER_CREATED", "CONTAINER_RUNNING", "CONTAINER_EXITED", ...
  std::chrono::system_clock::time_point created;
  std::string image;
};

struct CriPods {
  std::vector<CriSandbox> sandboxes;
  std::vector<CriContainer> containers;
};

struct PodDevices {
  std::string resource_name;  // "nvidia.com/gpu"
  std::vector<std::string> device_ids;
};
struct PodResourcesContainer {
  std::string name;
  std::vector<PodDevices> devices;
};
struct PodResources {
  std::string name;
  std::string pod_namespace;
  std::vector<PodResourcesContainer> containers;
};

// What RunPodSandbox is asked for (tests).
struct CriSandboxSpec {
  std::string name, pod_namespace, uid;
  uint32_t attempt = 0;
  bool host_network = true;  // the node's network namespace: no CNI needed
};

// The module's JSON answers, parsed; garbled JSON or a field of the wrong type is an error.
Result<CriVersion> parse_cri_version(std::string_view json);
Result<CriPods> parse_cri_pods(std::string_view json);
Result<std::vector<PodResources>> parse_pod_resources(std::string_view json);

// The calls the daemon makes (the others are for tests), named as `gpud cri-helper` takes them.
enum class CriCall { kVersion, kListPods, kListPodResources };
std::string_view cri_call_name(CriCall call);  // "version", "list-pods", "list-pod-resources"
std::optional<CriCall> parse_cri_call(std::string_view name);

// Makes one call through libgpud-cri.so in this process (loaded at the first call): the module's
// JSON answer, or its error with the GPUD_CRI_* code (kCriModuleMissing: no module).
Result<std::string> call_cri_module(CriCall call, const std::string& socket,
                                    std::chrono::milliseconds timeout);

// What `gpud cri-helper` prints on stdout: the line "gpud-cri-reply 1 <code>", then the answer
// (code 0) or the error's text.
std::string format_cri_helper_reply(int code, std::string_view text);
// The helper's stdout read back: the answer, or the error with its code. Anything else (no header,
// a code out of range) is an error with GPUD_CRI_INTERNAL that says the reply is garbled.
Result<std::string> parse_cri_helper_reply(std::string_view out);

// Where and how the daemon runs its CRI helper.
struct CriHelper {
  std::string executable;  // gpud's own binary (/proc/self/exe): run as `<it> cri-helper ...`
  // Allowed beyond the call's own timeout for the child to start and load gRPC.
  std::chrono::milliseconds start_allowance{3000};
  size_t max_output = size_t{8} << 20;  // a longer reply is an error, not truncated JSON
};

// Runs `<executable> cri-helper <call> --socket <socket> --timeout-ms <timeout>` in a process group
// of its own (host::run_command), killed at timeout + start_allowance. A child that times out,
// cannot start, exits without a reply, or prints more than max_output or a garbled reply is an
// error that says so ("CRI helper timed out after 13 s"); the module's own errors keep their code.
Result<std::string> call_cri_helper(const CriHelper& helper, CriCall call,
                                    const std::string& socket, std::chrono::milliseconds timeout);

// Stateless and thread-safe; each call has its own connection and deadline. version, list_pods and
// list_pod_resources go through the helper when there is one (its executable set); the calls for
// tests always load the module here.
class CriClient {
 public:
  CriClient() = default;  // the module in this process
  explicit CriClient(CriHelper helper) : helper_(std::move(helper)) {}

  Result<CriVersion> version(const std::string& socket, std::chrono::milliseconds timeout) const;
  Result<CriPods> list_pods(const std::string& socket, std::chrono::milliseconds timeout) const;
  Result<std::vector<PodResources>> list_pod_resources(const std::string& socket,
                                                       std::chrono::milliseconds timeout) const;
  // Tests: returns the sandbox id.
  Result<std::string> run_pod_sandbox(const std::string& socket, const CriSandboxSpec& spec,
                                      std::chrono::milliseconds timeout) const;
  Result<void> stop_pod_sandbox(const std::string& socket, const std::string& id,
                                std::chrono::milliseconds timeout) const;
  Result<void> remove_pod_sandbox(const std::string& socket, const std::string& id,
                                  std::chrono::milliseconds timeout) const;

 private:
  Result<std::string> call(CriCall call, const std::string& socket,
                           std::chrono::milliseconds timeout) const;

  CriHelper helper_;
};

}  // namespace gpud::runtimes

#endif  // __cplusplus
