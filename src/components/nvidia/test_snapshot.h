// Hand-built NVML snapshots for the NVIDIA components' rule tests (header-only, tests only).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "core/health.h"
#include "nvml/device.h"

namespace gpud::components::testing {

template <typename T>
nvml::Field<T> ok(T v) {
  nvml::Field<T> f;
  f.value = std::move(v);
  f.status = nvml::FieldStatus::kOk;
  f.ret = nvml::NVML_SUCCESS;
  return f;
}

template <typename T>
nvml::Field<T> not_supported() {
  nvml::Field<T> f;
  f.status = nvml::FieldStatus::kNotSupported;
  f.ret = nvml::NVML_ERROR_NOT_SUPPORTED;
  return f;
}

template <typename T>
nvml::Field<T> errored(std::string text = "Unknown Error") {
  nvml::Field<T> f;
  f.status = nvml::FieldStatus::kError;
  f.ret = nvml::NVML_ERROR_UNKNOWN;
  f.error = std::move(text);
  return f;
}

// A healthy H100 like the fake's built-in GPU.
inline nvml::GpuSnapshot h100(unsigned int index) {
  nvml::GpuSnapshot g;
  g.index = index;
  g.name = ok<std::string>("NVIDIA H100 80GB HBM3");
  g.uuid = ok<std::string>("GPU-0000000" + std::to_string(index));
  g.pci_bus_id = ok<std::string>("0000:1" + std::to_string(index) + ":00.0");
  g.serial = ok<std::string>("16523230010" + std::to_string(index));
  g.minor_number = ok<uint32_t>(index);
  g.board_id = ok<uint32_t>(0x4300 + 0x100 * index);
  g.cuda_compute_capability = ok(std::pair<int, int>(9, 0));
  g.architecture = "hopper";
  g.brand = ok(2);
  g.temperature_c = ok(34);
  g.temperature_hbm_c = ok(32);
  g.margin_temperature_c = ok(55);
  g.threshold_shutdown_c = ok<uint32_t>(92);
  g.threshold_slowdown_c = ok<uint32_t>(89);
  g.threshold_mem_max_c = ok<uint32_t>(95);
  g.threshold_gpu_max_c = ok<uint32_t>(87);
  g.power_usage_mw = ok<uint32_t>(71000);
  g.power_enforced_limit_mw = ok<uint32_t>(700000);
  g.power_management_limit_mw = ok<uint32_t>(700000);
  g.clock_graphics_mhz = ok<uint32_t>(345);
  g.clock_memory_mhz = ok<uint32_t>(2619);
  g.clock_sm_mhz = ok<uint32_t>(345);
  g.clocks_event_reasons = ok<uint64_t>(1);
  g.memory = ok(nvml::Memory{85520809984ULL, 567279616ULL, 0, 85520809984ULL - 567279616ULL});
  g.utilization = ok(nvml::Utilization{0, 0});
  g.ecc_mode = ok(nvml::EccMode{true, true});
  g.ecc_total = ok(nvml::EccCounts{});
  for (auto& l : g.ecc_by_location) l = not_supported<nvml::EccCounts>();
  g.ecc_by_location[nvml::NVML_MEMORY_LOCATION_DRAM] = ok(nvml::EccCounts{});
  g.remapped_rows = ok(nvml::RemappedRows{});
  g.retired_pages = not_supported<nvml::RetiredPages>();
  g.retired_pages_pending = not_supported<bool>();
  return g;
}

// A V100 (Volta) that retires pages instead of remapping rows.
inline nvml::GpuSnapshot v100(unsigned int index) {
  nvml::GpuSnapshot g = h100(index);
  g.name = ok<std::string>("Tesla V100-SXM2-32GB");
  g.cuda_compute_capability = ok(std::pair<int, int>(7, 0));
  g.architecture = "volta";
  g.remapped_rows = not_supported<nvml::RemappedRows>();
  g.retired_pages = ok(nvml::RetiredPages{});
  g.retired_pages_pending = ok(false);
  return g;
}

inline nvml::NvmlSnapshot snapshot_of(std::vector<nvml::GpuSnapshot> gpus) {
  nvml::NvmlSnapshot s;
  s.driver.driver_version = "550.54.15";
  s.driver.driver_major = 550;
  s.driver.cuda_version_raw = 12040;
  s.driver.cuda_major = 12;
  s.driver.cuda_minor = 4;
  s.gpus = std::move(gpus);
  return s;
}

inline nvml::NvmlSnapshot h100x(unsigned int n) {
  std::vector<nvml::GpuSnapshot> gpus;
  for (unsigned int i = 0; i < n; ++i) gpus.push_back(h100(i));
  return snapshot_of(std::move(gpus));
}

// `n` GPUs with only index, name, uuid ("GPU-<i>") and bus id ("0000:0<i>:00.0") set; every other
// field is left unset, which reads as not supported.
inline nvml::NvmlSnapshot identity_only_snapshot(
    int n, const std::string& name = "NVIDIA H100 80GB HBM3") {
  nvml::NvmlSnapshot s;
  s.time = Clock::now();
  for (int i = 0; i < n; ++i) {
    nvml::GpuSnapshot g;
    g.index = static_cast<unsigned>(i);
    g.name = ok(name);
    g.uuid = ok("GPU-" + std::to_string(i));
    g.pci_bus_id = ok("0000:0" + std::to_string(i) + ":00.0");
    s.gpus.push_back(g);
  }
  return s;
}

// `n` NVLinks, all active except those in `down`, with zero error counters.
inline std::vector<nvml::NvLink> nvlinks(int n, std::vector<unsigned> down = {}) {
  std::vector<nvml::NvLink> out;
  for (int i = 0; i < n; ++i) {
    nvml::NvLink l;
    l.link = static_cast<unsigned>(i);
    l.active = ok(std::find(down.begin(), down.end(), i) == down.end());
    l.replay_errors = ok<uint64_t>(0);
    l.recovery_errors = ok<uint64_t>(0);
    l.crc_flit_errors = ok<uint64_t>(0);
    out.push_back(l);
  }
  return out;
}

}  // namespace gpud::components::testing
