// ContainerdComponent ("containerd"): where containerd is installed, its socket must exist, its
// CRI must answer and its service be active (a containerd started less than 5 minutes ago gets a
// grace), and on NVIDIA nodes a running nvidia-container-toolkit pod means containerd's config must
// name the nvidia runtime (GPUd's rules, in GPUd's order). It lists the pod sandboxes and their
// containers, and publishes them for fault attribution (ctx().containers).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "components/component.h"
#include "components/containers/runtime_listings.h"
#include "core/cached_answer.h"
#include "host/host_fs.h"
#include "host/systemctl.h"
#include "runtimes/cri.h"

namespace gpud::components {

inline constexpr int kContainerdSocketMissingChecks = 5;  // Unhealthy at the 5th in a row
inline constexpr std::chrono::minutes kContainerdStartGrace{5};
inline constexpr std::chrono::minutes kNvidiaToolkitMinAge{10};
inline constexpr std::chrono::seconds kContainerdTimeout{10};
// The name of the NVIDIA GPU operator's toolkit DaemonSet pods contain.
inline constexpr std::string_view kNvidiaToolkitPod = "nvidia-container-toolkit-daemonset";

// Where a containerd keeps its socket and its config (host paths): containerd's own, k3s's and
// rke2's (whose containerd binds k3s's socket path), in the order they are looked for.
struct ContainerdLayout {
  std::string_view distribution;  // "containerd", "k3s", "rke2"
  std::string_view socket;
  std::string_view config;
};
inline constexpr ContainerdLayout kContainerdLayouts[] = {
    {"containerd", "/run/containerd/containerd.sock", "/etc/containerd/config.toml"},
    {"k3s", "/run/k3s/containerd/containerd.sock",
     "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"},
    {"rke2", "/run/k3s/containerd/containerd.sock",
     "/var/lib/rancher/rke2/agent/etc/containerd/config.toml"},
};
// The layout of the containerd under `fs`: the first whose socket and config both exist, else the
// first whose socket exists, else the first whose config exists, else containerd's own.
const ContainerdLayout& find_containerd_layout(const host::HostFs& fs);

// What containerd's configuration says about the nvidia runtime: the main file and its imports.
struct ContainerdNvidiaRuntime {
  bool configured = false;
  std::string found_in;             // the file and the form that configures it
  std::string cdi_spec;             // with native CDI: the nvidia spec found (a host path)
  std::string cdi_enabled_in;       // native CDI enabled: the file and the form ("" for none)
  bool cri_disabled = false;        // `disabled_plugins` names the CRI plugin: no Kubernetes here
  std::vector<std::string> read;    // the files read (host paths), main file first
  std::vector<std::string> errors;  // imports that could not be read
};

// Native CDI: containerd's CRI plugin with `enable_cdi = true` (table
// [plugins."io.containerd.grpc.v1.cri"], containerd 1.7; or
// [plugins."io.containerd.cri.v1.runtime"], 2.x) injects the devices an NVIDIA CDI spec describes,
// with no nvidia runtime configured. Returns the form found ("" for none).
std::string containerd_cdi_form(std::string_view toml);
// The CDI spec directories the config names (`cdi_spec_dirs = [...]`), else containerd's
// defaults /etc/cdi and /var/run/cdi.
std::vector<std::string> containerd_cdi_spec_dirs(std::string_view toml);
// True when a CDI spec (YAML or JSON) declares `kind: nvidia.com/gpu`.
bool nvidia_cdi_spec(std::string_view spec);

// One of the three forms GPUd accepts, outside comments: `default_runtime_name = "nvidia"`, or a
// table `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]` (containerd 1.x) or
// `[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]` (2.x), or one below them.
// Returns the form found ("" for none).
std::string containerd_nvidia_runtime_form(std::string_view toml);
// The top-level `imports = ["...", ...]` of a containerd config (may span lines).
std::vector<std::string> containerd_config_imports(std::string_view toml);
// True when the top-level `disabled_plugins` names the CRI plugin ("cri",
// "io.containerd.grpc.v1.cri"), as the config Docker's containerd.io package ships does.
bool containerd_cri_disabled(std::string_view toml);
// Reads `config_path` (a path in the host's terms) and its imports (globs; relative ones against
// the importing file's folder; recursively, each file once) under the host root. A missing main
// file is an error (containerd then runs its defaults: no nvidia runtime). Native CDI configures
// the nvidia devices when an nvidia.com/gpu spec is in one of its spec directories (*.yaml, *.yml,
// *.json); CDI enabled without one is named in `errors`.
Result<ContainerdNvidiaRuntime> read_containerd_nvidia_runtime(const host::HostFs& fs,
                                                               const std::string& config_path);

struct ContainerdSnapshot {
  TimePoint now = Clock::now();
  bool installed = true;
  std::string socket;  // the path checked
  bool socket_exists = true;
  int socket_missing_checks = 0;  // consecutive checks (this one included) without the socket
  bool crio_answers = false;      // socket missing: the CRI-O socket answered instead
  // How long the containerd serving the socket has run; nullopt when no process serves it.
  std::optional<std::chrono::seconds> uptime;
  // containerd.service as systemd reports it; nullopt when systemd does not run the host.
  std::optional<Result<host::UnitState>> service;
  // ListPodSandbox + ListContainers; nullopt when not asked (socket missing).
  std::optional<Result<runtimes::CriPods>> pods;
  bool nvidia_gpus = false;
  // Read only when a toolkit sandbox is old enough to matter.
  std::optional<Result<ContainerdNvidiaRuntime>> nvidia_runtime;
  std::string config_path;                  // for the reason
  std::string distribution = "containerd";  // whose layout: "containerd", "k3s", "rke2"
  std::chrono::seconds toolkit_min_age = kNvidiaToolkitMinAge;
};

// The toolkit sandbox the rule judges: the oldest READY one whose name contains kNvidiaToolkitPod.
const runtimes::CriSandbox* find_nvidia_toolkit_sandbox(const runtimes::CriPods& pods);

// The rule, in GPUd's order: not installed ⇒ Healthy; socket missing ⇒ Healthy when CRI-O answers,
// Healthy for 4 checks, Unhealthy at the 5th in a row; CRI not connectable ⇒ Unhealthy "containerd
// installed but not running"; service inactive ⇒ Unhealthy; any of these while the containerd
// behind the socket is younger than 5 minutes ⇒ Healthy "…; has not been running for long
// enough"; ListPodSandbox/ListContainers error ⇒ Unhealthy, unimplemented ⇒ Healthy "CRI is not
// enabled"; the cri module missing ⇒ Degraded; with NVIDIA GPUs a READY toolkit sandbox older than
// toolkit_min_age while the config lacks the nvidia runtime ⇒ Unhealthy (no toolkit pod: noted in
// the reason only). With NVIDIA GPUs and the config read, whatever the socket and the pods say, a
// Healthy reading turns Unhealthy when the config cannot give containers GPUs although it is meant
// to: CDI enabled without an nvidia.com/gpu spec and no nvidia runtime, or k3s/rke2's generated
// config without the nvidia runtime (they add it when they find the NVIDIA container toolkit).
// extra_info "data" lists the sandboxes with their containers, the config and its NVIDIA setup.
CheckResult evaluate_containerd(const ContainerdSnapshot& s);

class ContainerdComponent : public Component {
 public:
  explicit ContainerdComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "containerd"; }
  std::vector<std::string> tags() const override { return {"container", "containerd"}; }
  // containerd installed (found where commands are looked up, or in /usr/bin or /usr/local/bin
  // under a --host-root other than /), or one of kContainerdLayouts' sockets exists, or k3s's or
  // rke2's containerd config does; looked up again at most once a minute.
  bool supported() const override;
  CheckResult check() override;

  // Tests: how old a ready toolkit sandbox must be before the config is judged.
  void set_toolkit_min_age(std::chrono::seconds age) { toolkit_min_age_ = age; }

 private:
  std::string socket_path() const;
  std::string crio_socket_path() const;

  host::HostFs fs_;
  RuntimeListings listings_;  // the pods' listing, and the CRI client of the cri-o probe
  std::chrono::seconds toolkit_min_age_ = kNvidiaToolkitMinAge;
  int socket_missing_checks_ = 0;  // only check() touches it; the scheduler runs one at a time
  CachedAnswer installed_;
};

}  // namespace gpud::components
