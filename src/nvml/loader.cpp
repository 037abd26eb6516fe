#include "nvml/loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <initializer_list>

#include "core/log.h"

namespace gpud::nvml {

Result<std::unique_ptr<DynamicLibrary>> DynamicLibrary::open(const std::string& path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return make_error(e != nullptr ? e : "dlopen failed: " + path);
  }
  return std::unique_ptr<DynamicLibrary>(new DynamicLibrary(h));
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* DynamicLibrary::symbol(const char* name) const { return dlsym(handle_, name); }

namespace {

template <typename Fn>
void resolve(const DynamicLibrary& lib, Api& api, const char* field, Fn& out,
             std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (void* p = lib.symbol(n)) {
      out = reinterpret_cast<Fn>(p);
      api.resolved[field] = n;
      return;
    }
  }
}

int parse_major(const std::string& version) {
  return static_cast<int>(std::strtol(version.c_str(), nullptr, 10));
}

}  // namespace

Api resolve_api(const DynamicLibrary& lib) {
  Api a;
#define GPUD_RESOLVE(field, ...) resolve(lib, a, #field, a.field, {__VA_ARGS__})
  GPUD_RESOLVE(init, "nvmlInit_v2", "nvmlInit");
  GPUD_RESOLVE(shutdown, "nvmlShutdown");
  GPUD_RESOLVE(error_string, "nvmlErrorString");
  GPUD_RESOLVE(system_driver_version, "nvmlSystemGetDriverVersion");
  GPUD_RESOLVE(system_nvml_version, "nvmlSystemGetNVMLVersion");
  GPUD_RESOLVE(system_cuda_driver_version, "nvmlSystemGetCudaDriverVersion_v2",
               "nvmlSystemGetCudaDriverVersion");
  GPUD_RESOLVE(device_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  GPUD_RESOLVE(handle_by_index, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
  GPUD_RESOLVE(name, "nvmlDeviceGetName");
  GPUD_RESOLVE(uuid, "nvmlDeviceGetUUID");
  GPUD_RESOLVE(serial, "nvmlDeviceGetSerial");
  GPUD_RESOLVE(vbios_version, "nvmlDeviceGetVbiosVersion");
  GPUD_RESOLVE(minor_number, "nvmlDeviceGetMinorNumber");
  GPUD_RESOLVE(board_id, "nvmlDeviceGetBoardId");
  GPUD_RESOLVE(index, "nvmlDeviceGetIndex");
  GPUD_RESOLVE(pci_info, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2",
               "nvmlDeviceGetPciInfo");
  GPUD_RESOLVE(cuda_compute_capability, "nvmlDeviceGetCudaComputeCapability");
  GPUD_RESOLVE(brand, "nvmlDeviceGetBrand");
  GPUD_RESOLVE(persistence_mode, "nvmlDeviceGetPersistenceMode");
  GPUD_RESOLVE(compute_mode, "nvmlDeviceGetComputeMode");
  GPUD_RESOLVE(temperature_v, "nvmlDeviceGetTemperatureV");
  GPUD_RESOLVE(temperature, "nvmlDeviceGetTemperature");
  GPUD_RESOLVE(temperature_threshold, "nvmlDeviceGetTemperatureThreshold");
  GPUD_RESOLVE(margin_temperature, "nvmlDeviceGetMarginTemperature");
  GPUD_RESOLVE(power_usage, "nvmlDeviceGetPowerUsage");
  GPUD_RESOLVE(enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  GPUD_RESOLVE(power_management_limit, "nvmlDeviceGetPowerManagementLimit");
  GPUD_RESOLVE(total_energy_consumption, "nvmlDeviceGetTotalEnergyConsumption");
  GPUD_RESOLVE(clock_info, "nvmlDeviceGetClockInfo");
  GPUD_RESOLVE(max_clock_info, "nvmlDeviceGetMaxClockInfo");
  GPUD_RESOLVE(clocks_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons",
               "nvmlDeviceGetCurrentClocksThrottleReasons");
  GPUD_RESOLVE(memory_info_v2, "nvmlDeviceGetMemoryInfo_v2");
  GPUD_RESOLVE(memory_info, "nvmlDeviceGetMemoryInfo");
  GPUD_RESOLVE(utilization, "nvmlDeviceGetUtilizationRates");
  GPUD_RESOLVE(ecc_mode, "nvmlDeviceGetEccMode");
  GPUD_RESOLVE(total_ecc_errors, "nvmlDeviceGetTotalEccErrors");
  GPUD_RESOLVE(memory_error_counter, "nvmlDeviceGetMemoryErrorCounter");
  GPUD_RESOLVE(remapped_rows, "nvmlDeviceGetRemappedRows");
  GPUD_RESOLVE(retired_pages, "nvmlDeviceGetRetiredPages");
  GPUD_RESOLVE(retired_pages_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
  GPUD_RESOLVE(compute_processes, "nvmlDeviceGetComputeRunningProcesses_v3",
               "nvmlDeviceGetComputeRunningProcesses_v2");
  GPUD_RESOLVE(compute_processes_v1, "nvmlDeviceGetComputeRunningProcesses");
  GPUD_RESOLVE(graphics_processes, "nvmlDeviceGetGraphicsRunningProcesses_v3",
               "nvmlDeviceGetGraphicsRunningProcesses_v2");
  GPUD_RESOLVE(graphics_processes_v1, "nvmlDeviceGetGraphicsRunningProcesses");
  GPUD_RESOLVE(nvlink_state, "nvmlDeviceGetNvLinkState");
  GPUD_RESOLVE(nvlink_error_counter, "nvmlDeviceGetNvLinkErrorCounter");
  GPUD_RESOLVE(pcie_replay_counter, "nvmlDeviceGetPcieReplayCounter");
  GPUD_RESOLVE(curr_pcie_link_generation, "nvmlDeviceGetCurrPcieLinkGeneration");
  GPUD_RESOLVE(curr_pcie_link_width, "nvmlDeviceGetCurrPcieLinkWidth");
  GPUD_RESOLVE(max_pcie_link_generation, "nvmlDeviceGetMaxPcieLinkGeneration");
  GPUD_RESOLVE(max_pcie_link_width, "nvmlDeviceGetMaxPcieLinkWidth");
  GPUD_RESOLVE(gsp_firmware_mode, "nvmlDeviceGetGspFirmwareMode");
  GPUD_RESOLVE(gsp_firmware_version, "nvmlDeviceGetGspFirmwareVersion");
  GPUD_RESOLVE(fabric_info_v, "nvmlDeviceGetGpuFabricInfoV");
  GPUD_RESOLVE(fabric_info, "nvmlDeviceGetGpuFabricInfo");
  GPUD_RESOLVE(platform_info, "nvmlDeviceGetPlatformInfo");
  GPUD_RESOLVE(gpm_query_device_support, "nvmlGpmQueryDeviceSupport");
  GPUD_RESOLVE(p2p_status, "nvmlDeviceGetP2PStatus");
  GPUD_RESOLVE(gpm_sample_alloc, "nvmlGpmSampleAlloc");
  GPUD_RESOLVE(gpm_sample_free, "nvmlGpmSampleFree");
  GPUD_RESOLVE(gpm_sample_get, "nvmlGpmSampleGet");
  GPUD_RESOLVE(gpm_metrics_get, "nvmlGpmMetricsGet");
  GPUD_RESOLVE(event_set_create, "nvmlEventSetCreate");
  GPUD_RESOLVE(event_set_free, "nvmlEventSetFree");
  GPUD_RESOLVE(register_events, "nvmlDeviceRegisterEvents");
  GPUD_RESOLVE(event_set_wait, "nvmlEventSetWait_v2", "nvmlEventSetWait");
#undef GPUD_RESOLVE
  return a;
}

std::string error_text(const Api& api, nvmlReturn_t ret) {
  if (api.error_string != nullptr) {
    if (const char* s = api.error_string(ret)) return s;
  }
  return "NVML error " + std::to_string(ret);
}

std::string DriverInfo::cuda_version() const {
  if (cuda_version_raw <= 0) return "";
  return std::to_string(cuda_major) + "." + std::to_string(cuda_minor);
}

std::string_view to_string(NvmlStatus s) {
  switch (s) {
    case NvmlStatus::kNotFound: return "not_found";
    case NvmlStatus::kErrored: return "errored";
    case NvmlStatus::kReady: return "ready";
  }
  return "unknown";
}

std::string entry_point_name(const void* fn) {
  Dl_info info{};
  if (fn == nullptr || dladdr(fn, &info) == 0 || info.dli_sname == nullptr) return "an NVML call";
  return info.dli_sname;
}

std::string deadline_text(std::chrono::milliseconds deadline) {
  if (deadline.count() % 1000 == 0) return std::to_string(deadline.count() / 1000) + " s";
  return std::to_string(deadline.count()) + " ms";
}

std::string hang_message(std::string_view who, const void* call,
                         std::chrono::milliseconds deadline) {
  return std::string(who) + ": " + entry_point_name(call) + " did not return within " +
         deadline_text(deadline);
}

HangReport Nvml::hang_report() const {
  std::lock_guard lock(hang_mu_);
  return hang_report_;
}

void Nvml::set_hang_report(HangReport report) {
  std::lock_guard lock(hang_mu_);
  hang_report_ = std::move(report);
}

std::string resolve_library_path(const std::string& explicit_path,
                                 const std::vector<std::string>& driver_roots) {
  if (!explicit_path.empty()) return explicit_path;
#if defined(__aarch64__)
  static constexpr const char* kDirs[] = {"/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"};
#else
  static constexpr const char* kDirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"};
#endif
  for (const std::string& root : driver_roots) {
    if (root.empty()) continue;
    const std::string base = root.back() == '/' ? root.substr(0, root.size() - 1) : root;
    for (const char* dir : kDirs) {
      std::string candidate = base + dir + "/" + kDefaultLibraryName;
      if (::access(candidate.c_str(), F_OK) == 0) return candidate;
    }
  }
  return std::string(kDefaultLibraryName);
}

namespace {

struct InitOutcome {
  nvmlReturn_t init = NVML_SUCCESS;
  nvmlReturn_t count_ret = NVML_SUCCESS;
  std::string step;  // which call failed
  std::vector<nvmlDevice_t> devices;
  DriverInfo driver;
};

InitOutcome init_on_worker(const Library& lib, CallTracker& tracker) {
  const Api& a = lib.api;
  InitOutcome o;
  auto track = [&](auto fn) { tracker.current.store(reinterpret_cast<const void*>(fn)); };
  track(a.init);
  o.init = a.init();
  if (o.init != NVML_SUCCESS) return o;

  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  track(a.system_driver_version);
  if (a.system_driver_version != nullptr &&
      a.system_driver_version(buf, sizeof(buf)) == NVML_SUCCESS) {
    o.driver.driver_version = buf;
    o.driver.driver_major = parse_major(o.driver.driver_version);
  }
  char nbuf[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = {};
  track(a.system_nvml_version);
  if (a.system_nvml_version != nullptr &&
      a.system_nvml_version(nbuf, sizeof(nbuf)) == NVML_SUCCESS) {
    o.driver.nvml_version = nbuf;
  }
  int cuda = 0;
  track(a.system_cuda_driver_version);
  if (a.system_cuda_driver_version != nullptr &&
      a.system_cuda_driver_version(&cuda) == NVML_SUCCESS) {
    o.driver.cuda_version_raw = cuda;
    o.driver.cuda_major = cuda / 1000;
    o.driver.cuda_minor = (cuda % 1000) / 10;
  }

  if (a.device_count == nullptr || a.handle_by_index == nullptr) {
    o.count_ret = NVML_ERROR_FUNCTION_NOT_FOUND;
    o.step = "nvmlDeviceGetCount";
    return o;
  }
  unsigned int count = 0;
  track(a.device_count);
  o.count_ret = a.device_count(&count);
  if (o.count_ret != NVML_SUCCESS) {
    o.step = "nvmlDeviceGetCount";
    return o;
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t d{};
    track(a.handle_by_index);
    nvmlReturn_t r = a.handle_by_index(i, &d);
    // A lost GPU may still hand out its handle; one that does not is left out and the count
    // mismatch is what the gpu-counts component sees.
    if (r == NVML_SUCCESS) {
      o.devices.push_back(d);
    } else if (r != NVML_ERROR_GPU_IS_LOST && r != NVML_ERROR_RESET_REQUIRED) {
      o.count_ret = r;
      o.step = "nvmlDeviceGetHandleByIndex(" + std::to_string(i) + ")";
      return o;
    }
  }
  return o;
}

}  // namespace

std::unique_ptr<Nvml> Nvml::open(const OpenOptions& options) {
  std::unique_ptr<Nvml> n(new Nvml());
  n->path_ = resolve_library_path(options.library_path, options.driver_roots);
  auto dl = DynamicLibrary::open(n->path_);
  if (!dl.ok()) {
    n->status_ = NvmlStatus::kNotFound;
    n->init_return_ = NVML_ERROR_LIBRARY_NOT_FOUND;
    n->message_ = "NVML not found: " + dl.error().message;
    return n;
  }
  auto lib = std::make_shared<Library>();
  lib->dl = std::move(dl).value();
  lib->api = resolve_api(*lib->dl);
  lib->path = n->path_;
  if (lib->api.init == nullptr) {
    n->status_ = NvmlStatus::kNotFound;
    n->init_return_ = NVML_ERROR_LIBRARY_NOT_FOUND;
    n->message_ = "NVML not found: " + n->path_ + " has no nvmlInit";
    return n;
  }
  n->lib_ = lib;

  std::shared_ptr<const Library> keep = lib;
  auto tracker = std::make_shared<CallTracker>();
  auto out = n->worker_.call([keep, tracker] { return init_on_worker(*keep, *tracker); },
                             options.deadline);
  if (!out.ok()) {
    n->status_ = NvmlStatus::kErrored;
    n->init_return_ = NVML_ERROR_TIMEOUT;
    n->message_ =
        "NVML initialization error: " +
        (is_timeout(out.error()) ? hang_message("NVML", tracker->current.load(), options.deadline)
                                 : out.error().message);
    HangReport hang;
    hang.message = n->message_;
    hang.call = entry_point_name(tracker->current.load());
    n->set_hang_report(std::move(hang));
    return n;
  }
  const InitOutcome& o = out.value();
  n->init_return_ = o.init;
  if (o.init == NVML_ERROR_DRIVER_NOT_LOADED || o.init == NVML_ERROR_LIBRARY_NOT_FOUND) {
    n->status_ = NvmlStatus::kNotFound;
    n->message_ = "NVML not found: nvmlInit: " + error_text(lib->api, o.init);
    return n;
  }
  if (o.init != NVML_SUCCESS) {
    n->status_ = NvmlStatus::kErrored;
    n->message_ = "NVML initialization error: nvmlInit: " + error_text(lib->api, o.init);
    return n;
  }
  n->initialized_ = true;
  n->driver_ = o.driver;
  if (o.count_ret != NVML_SUCCESS) {
    n->status_ = NvmlStatus::kErrored;
    n->init_return_ = o.count_ret;
    n->message_ = "NVML initialization error: " + o.step + ": " + error_text(lib->api, o.count_ret);
    return n;
  }
  n->devices_ = o.devices;
  n->status_ = NvmlStatus::kReady;
  n->message_ = "NVML ready (" + std::to_string(n->devices_.size()) + " GPUs, driver " +
                n->driver_.driver_version + ")";
  return n;
}

Nvml::~Nvml() {
  if (initialized_ && lib_ && lib_->api.shutdown != nullptr && !worker_.stuck()) {
    std::shared_ptr<const Library> keep = lib_;
    auto r = worker_.run([keep] { (void)keep->api.shutdown(); }, std::chrono::seconds(2));
    if (!r.ok()) logger("nvml")->warn("nvmlShutdown: {}", r.error().message);
  }
  if (!worker_.stop()) {
    logger("nvml")->warn("NVML worker still stuck in a driver call at shutdown; detached it");
  }
}

}  // namespace gpud::nvml
