#include "nvml/device.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>

namespace gpud::nvml {

std::string_view to_string(FieldStatus s) {
  switch (s) {
    case FieldStatus::kOk: return "ok";
    case FieldStatus::kNotSupported: return "not_supported";
    case FieldStatus::kError: return "error";
  }
  return "unknown";
}

FieldStatus classify(nvmlReturn_t ret) {
  switch (ret) {
    case NVML_SUCCESS: return FieldStatus::kOk;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_DEPRECATED: return FieldStatus::kNotSupported;
    default: return FieldStatus::kError;
  }
}

bool FabricInfo::health_degraded_bandwidth() const {
  return ((health_mask >> kFabricHealthShiftDegradedBw) & kFabricHealthMask2Bits) ==
         kFabricHealthTrue;
}
bool FabricInfo::health_route_recovery_in_progress() const {
  return ((health_mask >> kFabricHealthShiftRouteRecovery) & kFabricHealthMask2Bits) ==
         kFabricHealthTrue;
}
bool FabricInfo::health_route_unhealthy() const {
  return ((health_mask >> kFabricHealthShiftRouteUnhealthy) & kFabricHealthMask2Bits) ==
         kFabricHealthTrue;
}
bool FabricInfo::health_access_timeout_recovery() const {
  return ((health_mask >> kFabricHealthShiftAccessTimeoutRecovery) & kFabricHealthMask2Bits) ==
         kFabricHealthTrue;
}

std::string FabricInfo::health_incorrect_configuration() const {
  const unsigned int code =
      (health_mask >> kFabricHealthShiftIncorrectConfiguration) & kFabricHealthMask4Bits;
  switch (code) {
    case 0:
    case kFabricConfigNone: return "";
    case kFabricConfigIncorrectSysguid: return "incorrect configuration: system GUID";
    case kFabricConfigIncorrectChassisSn: return "incorrect configuration: chassis serial number";
    case kFabricConfigNoPartition: return "incorrect configuration: no partition";
    case kFabricConfigInsufficientNvlinks: return "incorrect configuration: insufficient NVLinks";
    default: return "incorrect configuration (code " + std::to_string(code) + ")";
  }
}

std::string architecture_from_compute_capability(int major, int minor) {
  switch (major) {
    case 1: return "tesla";
    case 2: return "fermi";
    case 3: return "kepler";
    case 5: return "maxwell";
    case 6: return "pascal";
    case 7: return minor < 5 ? "volta" : "turing";
    case 8: return minor < 9 ? "ampere" : "ada-lovelace";
    case 9: return "hopper";
    case 10:
    case 12: return "blackwell";
    default: return "";
  }
}

std::vector<std::string> hw_slowdown_reasons(uint64_t reasons) {
  std::vector<std::string> out;
  if (reasons & nvmlClocksThrottleReasonHwSlowdown) out.emplace_back("HW Slowdown");
  if (reasons & nvmlClocksThrottleReasonHwThermalSlowdown) out.emplace_back("HW Thermal Slowdown");
  if (reasons & nvmlClocksThrottleReasonHwPowerBrakeSlowdown) {
    out.emplace_back("HW Power Brake Slowdown");
  }
  return out;
}

namespace {

std::string format_uuid(const unsigned char* b) {
  char buf[40];
  std::snprintf(buf, sizeof(buf),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return buf;
}

// Fills fields and records lost / reset-required on the snapshot.
class Reader {
 public:
  Reader(const Api& api, nvmlDevice_t dev, GpuSnapshot& g, CallTracker* tracker)
      : a_(api), d_(dev), g_(g), tracker_(tracker) {}

  // Calls one NVML entry point, noting it as the call in progress (for a hang's report) and as
  // the last call made (for a lost GPU's).
  template <typename Pfn, typename... Args>
  nvmlReturn_t call(Pfn fn, Args... args) {
    last_ = reinterpret_cast<const void*>(fn);
    if (tracker_ != nullptr) tracker_->current.store(last_);
    return fn(args...);
  }

  template <typename T>
  bool mark(Field<T>& f, nvmlReturn_t r) {
    f.ret = r;
    f.status = classify(r);
    if (f.status == FieldStatus::kError) f.error = error_text(a_, r);
    if (r == NVML_ERROR_GPU_IS_LOST) g_.lost = true;
    if (r == NVML_ERROR_RESET_REQUIRED) g_.reset_required = true;
    if ((r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_RESET_REQUIRED) && g_.fault_call.empty()) {
      g_.fault_call = entry_point_name(last_);
      g_.fault_error = error_text(a_, r);
    }
    return r == NVML_SUCCESS;
  }
  // Leaves f "not supported" (FUNCTION_NOT_FOUND) when the driver lacks the entry point.
  template <typename T, typename Fn>
  bool read(Field<T>& f, bool present, Fn fn) {
    if (!present) return mark(f, NVML_ERROR_FUNCTION_NOT_FOUND);
    return mark(f, fn());
  }
  template <typename T, typename Pfn>
  void u32(Field<T>& f, Pfn fn) {
    unsigned int v = 0;
    if (read(f, fn != nullptr, [&] { return call(fn, d_, &v); })) f.value = static_cast<T>(v);
  }
  void str(Field<std::string>& f, PfnDevString fn, unsigned int size) {
    std::vector<char> buf(size, '\0');
    if (read(f, fn != nullptr, [&] { return call(fn, d_, buf.data(), size); })) {
      buf.back() = '\0';
      f.value = buf.data();
    }
  }
  void enabled(Field<bool>& f, PfnDevEnumOut fn) {
    int v = 0;
    if (read(f, fn != nullptr, [&] { return call(fn, d_, &v); })) {
      f.value = v == NVML_FEATURE_ENABLED;
    }
  }

  const Api& a_;
  nvmlDevice_t d_;
  GpuSnapshot& g_;
  CallTracker* tracker_;
  const void* last_ = nullptr;
};

void read_identity(Reader& r) {
  const Api& a = r.a_;
  GpuSnapshot& g = r.g_;
  r.str(g.name, a.name, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
  r.str(g.uuid, a.uuid, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
  r.str(g.serial, a.serial, NVML_DEVICE_SERIAL_BUFFER_SIZE);
  r.str(g.vbios_version, a.vbios_version, NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE);
  r.u32(g.minor_number, a.minor_number);
  r.u32(g.board_id, a.board_id);
  nvmlPlatformInfo_t platform{};
  platform.version = nvmlPlatformInfo_v2;
  if (r.read(g.chassis_serial, a.platform_info != nullptr,
             [&] { return r.call(a.platform_info, r.d_, &platform); })) {
    std::string serial;
    for (unsigned char c : platform.chassisSerialNumber) {
      if (c == '\0') break;
      if (c >= 0x20 && c < 0x7f) serial.push_back(static_cast<char>(c));
    }
    g.chassis_serial.value = std::move(serial);
  }
  nvmlPciInfo_t pci{};
  Field<nvmlPciInfo_t> pf;
  if (r.read(pf, a.pci_info != nullptr, [&] { return r.call(a.pci_info, r.d_, &pci); })) {
    // The unversioned (v1) call only fills the legacy 16-byte bus id.
    pci.busId[sizeof(pci.busId) - 1] = '\0';
    pci.busIdLegacy[sizeof(pci.busIdLegacy) - 1] = '\0';
    std::string id = pci.busId[0] != '\0' ? pci.busId : pci.busIdLegacy;
    g.pci_bus_id.value = normalize_pci_bus_id(id);
    g.pci_device_id.value = pci.pciDeviceId;
  }
  r.mark(g.pci_bus_id, pf.ret);
  r.mark(g.pci_device_id, pf.ret);
  int major = 0, minor = 0;
  if (r.read(g.cuda_compute_capability, a.cuda_compute_capability != nullptr,
             [&] { return r.call(a.cuda_compute_capability, r.d_, &major, &minor); })) {
    g.cuda_compute_capability.value = {major, minor};
    g.architecture = architecture_from_compute_capability(major, minor);
  }
  int brand = 0;
  if (r.read(g.brand, a.brand != nullptr, [&] { return r.call(a.brand, r.d_, &brand); })) {
    g.brand.value = brand;
  }
}

void read_thermal_power_clocks(Reader& r) {
  const Api& a = r.a_;
  GpuSnapshot& g = r.g_;
  auto temp = [&](Field<int>& f, nvmlTemperatureSensors_t sensor) {
    if (a.temperature_v != nullptr) {
      nvmlTemperature_t t{};
      t.version = nvmlTemperature_v1;
      t.sensorType = sensor;
      nvmlReturn_t ret = r.call(a.temperature_v, r.d_, &t);
      // An older driver may not know the versioned struct: fall back to the deprecated call.
      if (ret != NVML_ERROR_ARGUMENT_VERSION_MISMATCH || a.temperature == nullptr) {
        if (r.mark(f, ret)) f.value = t.temperature;
        return;
      }
    }
    unsigned int v = 0;
    if (r.read(f, a.temperature != nullptr,
               [&] { return r.call(a.temperature, r.d_, sensor, &v); })) {
      f.value = static_cast<int>(v);
    }
  };
  temp(g.temperature_c, NVML_TEMPERATURE_GPU);
  temp(g.temperature_hbm_c, kTemperatureSensorHbm);
  // GPUd treats an invalid-argument answer for the HBM sensor as "not supported".
  if (g.temperature_hbm_c.ret == NVML_ERROR_INVALID_ARGUMENT) {
    g.temperature_hbm_c.status = FieldStatus::kNotSupported;
    g.temperature_hbm_c.error.clear();
  }
  nvmlMarginTemperature_t m{};
  m.version = nvmlMarginTemperature_v1;
  if (r.read(g.margin_temperature_c, a.margin_temperature != nullptr,
             [&] { return r.call(a.margin_temperature, r.d_, &m); })) {
    g.margin_temperature_c.value = m.marginTemperature;
  }
  auto threshold = [&](Field<uint32_t>& f, nvmlTemperatureThresholds_t t) {
    unsigned int v = 0;
    if (r.read(f, a.temperature_threshold != nullptr,
               [&] { return r.call(a.temperature_threshold, r.d_, t, &v); })) {
      f.value = v;
    }
  };
  threshold(g.threshold_shutdown_c, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN);
  threshold(g.threshold_slowdown_c, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN);
  threshold(g.threshold_mem_max_c, NVML_TEMPERATURE_THRESHOLD_MEM_MAX);
  threshold(g.threshold_gpu_max_c, NVML_TEMPERATURE_THRESHOLD_GPU_MAX);

  r.u32(g.power_usage_mw, a.power_usage);
  r.u32(g.power_enforced_limit_mw, a.enforced_power_limit);
  r.u32(g.power_management_limit_mw, a.power_management_limit);
  unsigned long long energy_mj = 0;
  if (r.read(g.total_energy_mj, a.total_energy_consumption != nullptr,
             [&] { return r.call(a.total_energy_consumption, r.d_, &energy_mj); }))
    g.total_energy_mj.value = energy_mj;
  auto clock = [&](Field<uint32_t>& f, nvmlClockType_t t) {
    unsigned int v = 0;
    if (r.read(f, a.clock_info != nullptr, [&] { return r.call(a.clock_info, r.d_, t, &v); }))
      f.value = v;
  };
  clock(g.clock_graphics_mhz, NVML_CLOCK_GRAPHICS);
  clock(g.clock_memory_mhz, NVML_CLOCK_MEM);
  clock(g.clock_sm_mhz, NVML_CLOCK_SM);
  unsigned long long reasons = 0;
  if (r.read(g.clocks_event_reasons, a.clocks_event_reasons != nullptr,
             [&] { return r.call(a.clocks_event_reasons, r.d_, &reasons); })) {
    g.clocks_event_reasons.value = reasons;
  }
}

void read_memory_ecc(Reader& r) {
  const Api& a = r.a_;
  GpuSnapshot& g = r.g_;
  bool done = false;
  if (a.memory_info_v2 != nullptr) {
    nvmlMemory_v2_t m{};
    m.version = nvmlMemory_v2;
    nvmlReturn_t ret = r.call(a.memory_info_v2, r.d_, &m);
    if (ret != NVML_ERROR_ARGUMENT_VERSION_MISMATCH || a.memory_info == nullptr) {
      if (r.mark(g.memory, ret)) g.memory.value = {m.total, m.reserved, m.used, m.free};
      done = true;
    }
  }
  if (!done) {
    nvmlMemory_t m{};
    if (r.read(g.memory, a.memory_info != nullptr,
               [&] { return r.call(a.memory_info, r.d_, &m); })) {
      g.memory.value = {m.total, 0, m.used, m.free};
    }
  }
  nvmlUtilization_t u{};
  if (r.read(g.utilization, a.utilization != nullptr,
             [&] { return r.call(a.utilization, r.d_, &u); })) {
    g.utilization.value = {u.gpu, u.memory};
  }
  int cur = 0, pend = 0;
  if (r.read(g.ecc_mode, a.ecc_mode != nullptr,
             [&] { return r.call(a.ecc_mode, r.d_, &cur, &pend); })) {
    g.ecc_mode.value = {cur == NVML_FEATURE_ENABLED, pend == NVML_FEATURE_ENABLED};
  }
  // Four counters into one field: the first failure decides its status.
  auto counts = [&](Field<EccCounts>& f, auto&& get) {
    struct Q {
      nvmlMemoryErrorType_t type;
      nvmlEccCounterType_t counter;
      uint64_t EccCounts::*member;
    };
    static constexpr Q kQueries[] = {
        {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &EccCounts::volatile_corrected},
        {NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &EccCounts::volatile_uncorrected},
        {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &EccCounts::aggregate_corrected},
        {NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &EccCounts::aggregate_uncorrected},
    };
    for (const Q& q : kQueries) {
      unsigned long long v = 0;
      nvmlReturn_t ret = get(q.type, q.counter, &v);
      if (!r.mark(f, ret)) return;
      f.value.*q.member = v;
    }
  };
  if (a.total_ecc_errors == nullptr) {
    r.mark(g.ecc_total, NVML_ERROR_FUNCTION_NOT_FOUND);
  } else {
    counts(g.ecc_total, [&](int t, int c, unsigned long long* v) {
      return r.call(a.total_ecc_errors, r.d_, t, c, v);
    });
  }
  if (g.ecc_mode.ok() && g.ecc_mode.value.current) {
    for (int loc = 0; loc < kMemoryLocationCount; ++loc) {
      auto& f = g.ecc_by_location[static_cast<size_t>(loc)];
      if (a.memory_error_counter == nullptr) {
        r.mark(f, NVML_ERROR_FUNCTION_NOT_FOUND);
        continue;
      }
      counts(f, [&](int t, int c, unsigned long long* v) {
        return r.call(a.memory_error_counter, r.d_, t, c, loc, v);
      });
    }
  }
  unsigned int corr = 0, unc = 0, pending = 0, failure = 0;
  if (r.read(g.remapped_rows, a.remapped_rows != nullptr,
             [&] { return r.call(a.remapped_rows, r.d_, &corr, &unc, &pending, &failure); })) {
    g.remapped_rows.value = {corr, unc, pending != 0, failure != 0};
  }
  if (a.retired_pages == nullptr) {
    r.mark(g.retired_pages, NVML_ERROR_FUNCTION_NOT_FOUND);
  } else {
    // With a zero-sized buffer the driver reports the count (some drivers with INSUFFICIENT_SIZE).
    auto count = [&](nvmlPageRetirementCause_t cause, uint32_t& out) {
      unsigned int n = 0;
      nvmlReturn_t ret = r.call(a.retired_pages, r.d_, cause, &n, nullptr);
      if (ret == NVML_ERROR_INSUFFICIENT_SIZE) ret = NVML_SUCCESS;
      if (r.mark(g.retired_pages, ret)) out = n;
      return ret == NVML_SUCCESS;
    };
    if (count(NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
              g.retired_pages.value.single_bit)) {
      count(NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, g.retired_pages.value.double_bit);
    }
  }
  r.enabled(g.retired_pages_pending, a.retired_pages_pending);
}

void read_modes_processes(Reader& r) {
  const Api& a = r.a_;
  GpuSnapshot& g = r.g_;
  r.enabled(g.persistence_mode, a.persistence_mode);
  int mode = 0;
  if (r.read(g.compute_mode, a.compute_mode != nullptr,
             [&] { return r.call(a.compute_mode, r.d_, &mode); })) {
    g.compute_mode.value = mode;
  }
  // Ask for the count first, then read with slack: processes come and go between the two calls.
  auto list = [&](auto fn, auto entry, std::vector<Process>& out) {
    using E = decltype(entry);
    unsigned int n = 0;
    nvmlReturn_t ret = r.call(fn, r.d_, &n, nullptr);
    for (int attempt = 0; attempt < 3 && ret == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
      std::vector<E> buf(n + 8);
      n = static_cast<unsigned int>(buf.size());
      ret = r.call(fn, r.d_, &n, buf.data());
      if (ret == NVML_SUCCESS)
        for (unsigned int i = 0; i < n && i < buf.size(); ++i)
          out.push_back({buf[i].pid, buf[i].usedGpuMemory});
    }
    return ret;
  };
  std::vector<Process> compute, graphics;
  nvmlReturn_t ret = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (a.compute_processes != nullptr)
    ret = list(a.compute_processes, nvmlProcessInfo_t{}, compute);
  else if (a.compute_processes_v1 != nullptr)
    ret = list(a.compute_processes_v1, nvmlProcessInfo_v1_t{}, compute);
  if (ret == NVML_SUCCESS) {
    // The graphics list adds to the compute one; a driver or GPU without it leaves the compute
    // list alone, any other error of it leaves the processes unread (the list would be partial).
    nvmlReturn_t gret = NVML_ERROR_FUNCTION_NOT_FOUND;
    if (a.graphics_processes != nullptr)
      gret = list(a.graphics_processes, nvmlProcessInfo_t{}, graphics);
    else if (a.graphics_processes_v1 != nullptr)
      gret = list(a.graphics_processes_v1, nvmlProcessInfo_v1_t{}, graphics);
    if (gret != NVML_SUCCESS && gret != NVML_ERROR_FUNCTION_NOT_FOUND &&
        gret != NVML_ERROR_NOT_SUPPORTED)
      ret = gret;
  }
  g.processes.value.clear();
  if (!r.mark(g.processes, ret)) return;
  g.processes.value = std::move(compute);
  for (Process& p : graphics) {
    auto same = std::find_if(g.processes.value.begin(), g.processes.value.end(),
                             [&](const Process& c) { return c.pid == p.pid; });
    if (same != g.processes.value.end()) {
      same->graphics = true;  // one process with both contexts: its memory is counted once
      continue;
    }
    p.compute = false;
    p.graphics = true;
    g.processes.value.push_back(p);
  }
}

void read_interconnects(Reader& r) {
  const Api& a = r.a_;
  GpuSnapshot& g = r.g_;
  if (a.nvlink_state == nullptr) {
    r.mark(g.nvlinks, NVML_ERROR_FUNCTION_NOT_FOUND);
  } else {
    for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      int state = 0;
      nvmlReturn_t ret = r.call(a.nvlink_state, r.d_, link, &state);
      // Past the last link the driver answers INVALID_ARGUMENT (or NOT_SUPPORTED).
      if (ret == NVML_ERROR_INVALID_ARGUMENT || ret == NVML_ERROR_NOT_SUPPORTED) {
        if (link == 0) r.mark(g.nvlinks, NVML_ERROR_NOT_SUPPORTED);
        break;
      }
      NvLink l;
      l.link = link;
      if (r.mark(l.active, ret)) l.active.value = state == NVML_FEATURE_ENABLED;
      auto counter = [&](Field<uint64_t>& f, nvmlNvLinkErrorCounter_t c) {
        unsigned long long v = 0;
        if (r.read(f, a.nvlink_error_counter != nullptr,
                   [&] { return r.call(a.nvlink_error_counter, r.d_, link, c, &v); })) {
          f.value = v;
        }
      };
      counter(l.replay_errors, NVML_NVLINK_ERROR_DL_REPLAY);
      counter(l.recovery_errors, NVML_NVLINK_ERROR_DL_RECOVERY);
      counter(l.crc_flit_errors, NVML_NVLINK_ERROR_DL_CRC_FLIT);
      g.nvlinks.value.push_back(std::move(l));
      r.mark(g.nvlinks, NVML_SUCCESS);
      if (ret == NVML_ERROR_GPU_IS_LOST || ret == NVML_ERROR_RESET_REQUIRED) {
        r.mark(g.nvlinks, ret);
        break;
      }
    }
  }
  r.u32(g.pcie.gen_current, a.curr_pcie_link_generation);
  r.u32(g.pcie.gen_max, a.max_pcie_link_generation);
  r.u32(g.pcie.width_current, a.curr_pcie_link_width);
  r.u32(g.pcie.width_max, a.max_pcie_link_width);
  r.u32(g.pcie.replay_counter, a.pcie_replay_counter);

  // Fabric: the versioned call with v3, then v2, then the deprecated one.
  bool done = false;
  if (a.fabric_info_v != nullptr) {
    for (unsigned int version : {nvmlGpuFabricInfo_v3, nvmlGpuFabricInfo_v2}) {
      nvmlGpuFabricInfoV_t f{};
      f.version = version;
      nvmlReturn_t ret = r.call(a.fabric_info_v, r.d_, &f);
      if (ret == NVML_ERROR_ARGUMENT_VERSION_MISMATCH) continue;
      if (r.mark(g.fabric, ret)) {
        FabricInfo& fi = g.fabric.value;
        fi.state = f.state;
        fi.status = f.status;
        fi.clique_id = f.cliqueId;
        fi.cluster_uuid = format_uuid(f.clusterUuid);
        fi.health_mask = f.healthMask;
        fi.health_summary = version == nvmlGpuFabricInfo_v3 ? f.healthSummary : 0;
        fi.version = version == nvmlGpuFabricInfo_v3 ? 3 : 2;
      }
      done = true;
      break;
    }
  }
  if (!done) {
    nvmlGpuFabricInfo_t f{};
    if (r.read(g.fabric, a.fabric_info != nullptr,
               [&] { return r.call(a.fabric_info, r.d_, &f); })) {
      FabricInfo& fi = g.fabric.value;
      fi.state = f.state;
      fi.status = f.status;
      fi.clique_id = f.cliqueId;
      fi.cluster_uuid = format_uuid(f.clusterUuid);
      fi.version = 1;
    }
  }
}

void read_firmware(Reader& r) {
  const Api& a = r.a_;
  GpuSnapshot& g = r.g_;
  unsigned int enabled = 0, def = 0;
  nvmlReturn_t ret = a.gsp_firmware_mode != nullptr
                         ? r.call(a.gsp_firmware_mode, r.d_, &enabled, &def)
                         : NVML_ERROR_FUNCTION_NOT_FOUND;
  if (r.mark(g.gsp.enabled, ret)) g.gsp.enabled.value = enabled != 0;
  if (r.mark(g.gsp.default_enabled, ret)) g.gsp.default_enabled.value = def != 0;
  char ver[NVML_GSP_FIRMWARE_VERSION_BUF_SIZE] = {};
  if (r.read(g.gsp.version, a.gsp_firmware_version != nullptr,
             [&] { return r.call(a.gsp_firmware_version, r.d_, ver); })) {
    ver[sizeof(ver) - 1] = '\0';
    g.gsp.version.value = ver;
  }
  nvmlGpmSupport_t s{};
  s.version = NVML_GPM_SUPPORT_VERSION;
  if (r.read(g.gpm_supported, a.gpm_query_device_support != nullptr,
             [&] { return r.call(a.gpm_query_device_support, r.d_, &s); })) {
    g.gpm_supported.value = s.isSupportedDevice != 0;
  }
}

}  // namespace

GpuSnapshot read_gpu(const Library& lib, nvmlDevice_t device, unsigned int index,
                     CallTracker* tracker) {
  GpuSnapshot g;
  g.index = index;
  Reader r(lib.api, device, g, tracker);
  read_identity(r);
  read_thermal_power_clocks(r);
  read_memory_ecc(r);
  read_modes_processes(r);
  read_interconnects(r);
  read_firmware(r);
  return g;
}

std::string gpu_label_of(unsigned int index, const NvmlSnapshot* previous) {
  std::string s = "GPU " + std::to_string(index);
  if (previous != nullptr)
    for (const auto& g : previous->gpus)
      if (g.index == index && g.pci_bus_id.ok()) s += " (" + g.pci_bus_id.value + ")";
  return s;
}

namespace {

// The error of a call that ran past its deadline, remembered (with the GPU `report` names, if
// any) for the collections that follow.
Error hang_error(Nvml& nvml, HangReport report, std::string_view who, const CallTracker& tracker,
                 std::chrono::milliseconds deadline) {
  const void* call = tracker.current.load();
  report.message = hang_message(who, call, deadline);
  report.call = entry_point_name(call);
  Error e = make_error(report.message, kTimeoutErrorCode);
  nvml.set_hang_report(std::move(report));
  return e;
}

// While a call is still stuck, the report of that call; nullopt when the worker answers.
std::optional<Error> still_hung(Nvml& nvml) {
  if (!nvml.worker().stuck()) return std::nullopt;
  std::string report = nvml.hang_report().message;
  return make_error(report.empty() ? kTimeoutMessage : report, kTimeoutErrorCode);
}

}  // namespace

Result<GpuSnapshot> collect_gpu(Nvml& nvml, unsigned int index, std::chrono::milliseconds deadline,
                                const NvmlSnapshot* previous) {
  if (!nvml.ready()) return make_error(nvml.message());
  if (index >= nvml.devices().size()) return make_error("no GPU " + std::to_string(index));
  if (auto hung = still_hung(nvml)) return *hung;
  std::shared_ptr<const Library> lib = nvml.library();
  nvmlDevice_t dev = nvml.devices()[index];
  auto tracker = std::make_shared<CallTracker>();
  auto g = nvml.worker().call(
      [lib, dev, index, tracker] { return read_gpu(*lib, dev, index, tracker.get()); }, deadline);
  if (!g.ok() && is_timeout(g.error())) {
    HangReport about;
    about.gpu_index = index;
    if (previous != nullptr)
      for (const auto& p : previous->gpus)
        if (p.index == index) {
          if (p.uuid.ok()) about.gpu_uuid = p.uuid.value;
          if (p.pci_bus_id.ok()) about.gpu_bus_id = p.pci_bus_id.value;
        }
    return hang_error(nvml, std::move(about), gpu_label_of(index, previous), *tracker, deadline);
  }
  return g;
}

Result<NvmlSnapshot> collect(Nvml& nvml, std::chrono::milliseconds deadline,
                             const NvmlSnapshot* previous) {
  if (!nvml.ready()) return make_error(nvml.message());
  NvmlSnapshot s;
  s.driver = nvml.driver();
  s.time = std::chrono::system_clock::now();
  for (unsigned int i = 0; i < nvml.devices().size(); ++i) {
    auto g = collect_gpu(nvml, i, deadline, previous);
    if (!g.ok()) return g.error();
    s.gpus.push_back(std::move(g).value());
  }
  std::shared_ptr<const Library> lib = nvml.library();
  std::vector<nvmlDevice_t> devices = nvml.devices();
  if (devices.size() > 1 && lib->api.p2p_status != nullptr) {
    if (auto hung = still_hung(nvml)) return *hung;
    auto pairs = nvml.worker().call(
        [lib, devices] {
          std::vector<P2PPair> out;
          for (unsigned int a = 0; a < devices.size(); ++a)
            for (unsigned int b = a + 1; b < devices.size(); ++b) {
              P2PPair p;
              p.a = a;
              p.b = b;
              nvmlGpuP2PStatus_t st = NVML_P2P_STATUS_UNKNOWN;
              nvmlReturn_t ret =
                  lib->api.p2p_status(devices[a], devices[b], NVML_P2P_CAPS_INDEX_NVLINK, &st);
              p.status.ret = ret;
              p.status.status = classify(ret);
              if (ret == NVML_SUCCESS)
                p.status.value = st;
              else if (p.status.status == FieldStatus::kError)
                p.status.error = error_text(lib->api, ret);
              out.push_back(std::move(p));
            }
          return out;
        },
        deadline);
    if (!pairs.ok() && is_timeout(pairs.error())) {
      CallTracker p2p;
      p2p.current.store(reinterpret_cast<const void*>(lib->api.p2p_status));
      return hang_error(nvml, {}, "NVLink P2P status", p2p, deadline);
    }
    if (!pairs.ok()) return pairs.error();
    s.nvlink_p2p = std::move(pairs).value();
  }
  return s;
}

}  // namespace gpud::nvml
