// The NVML loader: dlopens libnvidia-ml.so.1 (or a fake of it), resolves every entry point by name
// (newest versioned symbol first, older names as fallback) and initialises NVML on the NVML worker.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "nvml/abi.h"
#include "nvml/worker.h"

namespace gpud::nvml {

inline constexpr const char* kDefaultLibraryName = "libnvidia-ml.so.1";

// Owns one dlopen handle.
class DynamicLibrary {
 public:
  static Result<std::unique_ptr<DynamicLibrary>> open(const std::string& path);
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  void* symbol(const char* name) const;  // nullptr when absent

 private:
  explicit DynamicLibrary(void* handle) : handle_(handle) {}
  void* handle_;
};

// The resolved entry points. A null pointer means the driver lacks the function ("not supported").
struct Api {
  PfnVoid init = nullptr;  // nvmlInit_v2 | nvmlInit
  PfnVoid shutdown = nullptr;
  PfnErrorString error_string = nullptr;
  PfnString system_driver_version = nullptr;
  PfnString system_nvml_version = nullptr;
  PfnIntOut system_cuda_driver_version = nullptr;  // _v2 | unversioned
  PfnUintOut device_count = nullptr;               // _v2 | unversioned
  PfnHandleByIndex handle_by_index = nullptr;      // _v2 | unversioned

  PfnDevString name = nullptr;
  PfnDevString uuid = nullptr;
  PfnDevString serial = nullptr;
  PfnDevString vbios_version = nullptr;
  PfnDevUint minor_number = nullptr;
  PfnDevUint board_id = nullptr;
  PfnDevUint index = nullptr;
  PfnDevPci pci_info = nullptr;  // _v3 | _v2 | unversioned (busIdLegacy only)
  PfnDevIntInt cuda_compute_capability = nullptr;
  PfnDevEnumOut brand = nullptr;
  PfnDevEnumOut persistence_mode = nullptr;
  PfnDevEnumOut compute_mode = nullptr;

  PfnDevTemperatureV temperature_v = nullptr;
  PfnDevTemperature temperature = nullptr;  // deprecated, fallback
  PfnDevThreshold temperature_threshold = nullptr;
  PfnDevMargin margin_temperature = nullptr;
  PfnDevUint power_usage = nullptr;
  PfnDevUint enforced_power_limit = nullptr;
  PfnDevUint power_management_limit = nullptr;
  PfnDevUll total_energy_consumption = nullptr;
  PfnDevClock clock_info = nullptr;
  PfnDevClock max_clock_info = nullptr;
  PfnDevUll clocks_event_reasons = nullptr;  // CurrentClocksEventReasons | ...ThrottleReasons

  PfnDevMemoryV2 memory_info_v2 = nullptr;
  PfnDevMemory memory_info = nullptr;
  PfnDevUtilization utilization = nullptr;
  PfnDevEnumEnumOut ecc_mode = nullptr;
  PfnDevTotalEcc total_ecc_errors = nullptr;
  PfnDevMemoryErrorCounter memory_error_counter = nullptr;
  PfnDevRemappedRows remapped_rows = nullptr;
  PfnDevRetiredPages retired_pages = nullptr;
  PfnDevEnumOut retired_pages_pending = nullptr;

  PfnDevProcesses compute_processes = nullptr;       // _v3 | _v2 (nvmlProcessInfo_t layout)
  PfnDevProcessesV1 compute_processes_v1 = nullptr;  // unversioned (16-byte entries)
  PfnDevProcesses graphics_processes = nullptr;      // the same, for graphics contexts
  PfnDevProcessesV1 graphics_processes_v1 = nullptr;

  PfnDevNvLinkState nvlink_state = nullptr;
  PfnDevNvLinkErrorCounter nvlink_error_counter = nullptr;
  PfnDevUint pcie_replay_counter = nullptr;
  PfnDevUint curr_pcie_link_generation = nullptr;
  PfnDevUint curr_pcie_link_width = nullptr;
  PfnDevUint max_pcie_link_generation = nullptr;
  PfnDevUint max_pcie_link_width = nullptr;

  PfnDevUintUint gsp_firmware_mode = nullptr;
  PfnDevStringNoLen gsp_firmware_version = nullptr;
  PfnDevFabricInfoV fabric_info_v = nullptr;
  PfnDevFabricInfo fabric_info = nullptr;
  PfnDevPlatformInfo platform_info = nullptr;
  PfnDevGpmSupport gpm_query_device_support = nullptr;
  PfnP2PStatus p2p_status = nullptr;

  PfnGpmSampleAlloc gpm_sample_alloc = nullptr;
  PfnGpmSampleFree gpm_sample_free = nullptr;
  PfnGpmSampleGet gpm_sample_get = nullptr;
  PfnGpmMetricsGet gpm_metrics_get = nullptr;
  PfnEventSetCreate event_set_create = nullptr;
  PfnEventSetFree event_set_free = nullptr;
  PfnRegisterEvents register_events = nullptr;
  PfnEventSetWait event_set_wait = nullptr;  // _v2 | unversioned

  // Api field name -> the symbol it was resolved from (e.g. "init" -> "nvmlInit_v2").
  std::map<std::string, std::string> resolved;
};

// Resolves every entry point of `lib` into an Api (missing optional ones stay null).
Api resolve_api(const DynamicLibrary& lib);

// The NVML entry point a worker job is in, shared with whoever waits for the job, so that a call
// that does not return can be named.
struct CallTracker {
  std::atomic<const void*> current{nullptr};
};
// The exported name of a resolved entry point ("nvmlDeviceGetPowerUsage"), from the library's
// dynamic symbol table; "an NVML call" when it cannot be named.
std::string entry_point_name(const void* fn);
// "<who>: nvmlDeviceGetPowerUsage did not return within 10 s".
std::string hang_message(std::string_view who, const void* call,
                         std::chrono::milliseconds deadline);
// The call that made the worker stuck, as the collections that fail while it is still stuck report
// it: the message, the entry point, and the GPU it was reading (none for a call about no single
// GPU, such as the NVLink P2P status of every pair), its UUID and bus id as the last good snapshot
// had them ("" when it had not).
struct HangReport {
  std::string message;  // hang_message: "GPU 2 (0000:3a:00.0): nvmlDeviceGetPowerUsage did not …"
  std::string call;     // "nvmlDeviceGetPowerUsage"
  std::optional<unsigned int> gpu_index;
  std::string gpu_uuid;
  std::string gpu_bus_id;
};
// "10 s" for whole seconds, else "300 ms".
std::string deadline_text(std::chrono::milliseconds deadline);

// "nvmlErrorString" text when available, else "NVML error <n>".
std::string error_text(const Api& api, nvmlReturn_t ret);

// The library and its entry points, kept alive together by whoever may still call into them
// (including a job stuck on the worker).
struct Library {
  std::unique_ptr<DynamicLibrary> dl;
  Api api;
  std::string path;
};

struct DriverInfo {
  std::string driver_version;        // "550.54.15"
  int driver_major = 0;              // 550
  std::string nvml_version;          // "12.550.54.15"
  int cuda_version_raw = 0;          // 12040
  int cuda_major = 0;                // 12
  int cuda_minor = 0;                // 4
  std::string cuda_version() const;  // "12.4" or "" when unknown
};

enum class NvmlStatus {
  kNotFound,  // no library, or the driver is not loaded: not a GPU node, not an error
  kErrored,   // NVML present but init / device enumeration failed: Unhealthy + REBOOT_SYSTEM
  kReady,
};
std::string_view to_string(NvmlStatus s);

struct OpenOptions {
  std::string library_path;  // empty: the driver roots', else the system search path's
  std::chrono::milliseconds deadline = kDefaultCallDeadline;
  // Roots a driver may be installed under ($GPUD_NVIDIA_DRIVER_ROOT, the GPU Operator's
  // /run/nvidia/driver under the host root), looked at on each open.
  std::vector<std::string> driver_roots;
};

// One loaded, initialised NVML: the worker, the library, the device handles and the driver info.
class Nvml {
 public:
  // Never fails: inspect status(). Every NVML call (init included) runs on the worker.
  static std::unique_ptr<Nvml> open(const OpenOptions& options = {});
  ~Nvml();  // nvmlShutdown on the worker unless it is stuck; the worker is stopped (or detached)
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  NvmlStatus status() const { return status_; }
  bool ready() const { return status_ == NvmlStatus::kReady; }
  // "NVML not found: ...", "NVML initialization error: ...", or "NVML ready (8 GPUs)".
  const std::string& message() const { return message_; }
  // The nvmlReturn_t behind a kNotFound / kErrored status (NVML_SUCCESS when ready).
  nvmlReturn_t init_return() const { return init_return_; }

  Worker& worker() { return worker_; }
  // What the call that made the worker stuck was, for the collections that fail fast while it
  // still is; an empty message before any hang.
  HangReport hang_report() const;
  void set_hang_report(HangReport report);
  // Null when the library could not be loaded.
  const std::shared_ptr<const Library>& library() const { return lib_; }
  const std::vector<nvmlDevice_t>& devices() const { return devices_; }
  const DriverInfo& driver() const { return driver_; }
  const std::string& library_path() const { return path_; }

 private:
  Nvml() = default;

  Worker worker_;
  mutable std::mutex hang_mu_;
  HangReport hang_report_;  // guarded by hang_mu_
  std::shared_ptr<const Library> lib_;
  std::string path_;
  NvmlStatus status_ = NvmlStatus::kNotFound;
  std::string message_;
  nvmlReturn_t init_return_ = NVML_SUCCESS;
  bool initialized_ = false;
  std::vector<nvmlDevice_t> devices_;
  DriverInfo driver_;
};

// Resolution order of the library path: explicit (--nvml-lib, $GPUD_NVML_LIBRARY_PATH, as app/
// read them) > the first driver root holding usr/lib/<arch triplet>/, usr/lib64/ or usr/lib/
// libnvidia-ml.so.1 (GPUd's order) > "libnvidia-ml.so.1" from the system search path.
std::string resolve_library_path(const std::string& explicit_path,
                                 const std::vector<std::string>& driver_roots = {});

}  // namespace gpud::nvml
