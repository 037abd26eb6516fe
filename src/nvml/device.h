// Per-GPU snapshots: every value gpud's NVIDIA components read, each with its own
// ok / not-supported / error status, gathered on the NVML worker under a deadline.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/pci_address.h"
#include "core/result.h"
#include "nvml/abi.h"
#include "nvml/loader.h"

namespace gpud::nvml {

enum class FieldStatus { kOk, kNotSupported, kError };
std::string_view to_string(FieldStatus s);

// A value read from NVML. NOT_SUPPORTED, FUNCTION_NOT_FOUND (the symbol is missing) and DEPRECATED
// mean "not applicable"; anything else but SUCCESS is an error carrying the code and its text.
template <typename T>
struct Field {
  T value{};
  FieldStatus status = FieldStatus::kNotSupported;
  nvmlReturn_t ret = NVML_ERROR_FUNCTION_NOT_FOUND;
  std::string error;  // NVML's text for ret when status is kError

  bool ok() const { return status == FieldStatus::kOk; }
  bool supported() const { return status != FieldStatus::kNotSupported; }
};

// Classification of one return code.
FieldStatus classify(nvmlReturn_t ret);

struct EccCounts {
  uint64_t volatile_corrected = 0;
  uint64_t volatile_uncorrected = 0;
  uint64_t aggregate_corrected = 0;
  uint64_t aggregate_uncorrected = 0;
};

struct RemappedRows {
  uint32_t corrected = 0;    // rows remapped for correctable errors
  uint32_t uncorrected = 0;  // rows remapped for uncorrectable errors
  bool pending = false;      // a remap waits for a GPU reset
  bool failure = false;      // a remap failed: RMA
};

struct RetiredPages {
  uint32_t single_bit = 0;  // pages retired for multiple single-bit errors
  uint32_t double_bit = 0;  // pages retired for double-bit errors
};

// A process with a context on the GPU: NVML's compute list, graphics list, or both (one entry).
struct Process {
  uint32_t pid = 0;
  uint64_t used_memory_bytes = 0;  // NVML_VALUE_NOT_AVAILABLE_ULL when unknown
  bool compute = true;
  bool graphics = false;
};

struct NvLink {
  unsigned int link = 0;
  Field<bool> active;  // state == FEATURE_ENABLED
  Field<uint64_t> replay_errors;
  Field<uint64_t> recovery_errors;
  Field<uint64_t> crc_flit_errors;
};

struct Memory {
  uint64_t total_bytes = 0;
  uint64_t reserved_bytes = 0;  // 0 when only the v1 call exists
  uint64_t used_bytes = 0;
  uint64_t free_bytes = 0;
};

struct Utilization {
  uint32_t gpu_percent = 0;
  uint32_t memory_percent = 0;
};

struct EccMode {
  bool current = false;
  bool pending = false;
};

struct PcieLink {
  Field<uint32_t> gen_current;
  Field<uint32_t> gen_max;
  Field<uint32_t> width_current;
  Field<uint32_t> width_max;
  Field<uint32_t> replay_counter;
};

struct GspFirmware {
  Field<bool> enabled;
  Field<bool> default_enabled;
  Field<std::string> version;
};

struct FabricInfo {
  uint8_t state = 0;        // NVML_GPU_FABRIC_STATE_*
  nvmlReturn_t status = 0;  // meaningful when state == COMPLETED
  uint32_t clique_id = 0;
  std::string cluster_uuid;    // 8-4-4-4-12 hex of the 16 bytes
  uint32_t health_mask = 0;    // kFabricHealthShift* sub-fields
  uint8_t health_summary = 0;  // NVML_GPU_FABRIC_HEALTH_SUMMARY_*; 0 with the v1/v2 calls
  int version = 0;             // 3, 2 (GetGpuFabricInfoV) or 1 (deprecated GetGpuFabricInfo)
  bool health_degraded_bandwidth() const;
  bool health_route_recovery_in_progress() const;
  bool health_route_unhealthy() const;
  bool health_access_timeout_recovery() const;
  // "" when the configuration is fine or the field is not reported; else what is wrong.
  std::string health_incorrect_configuration() const;
};

struct GpuSnapshot {
  unsigned int index = 0;
  Field<std::string> name;        // "NVIDIA H100 80GB HBM3"
  Field<std::string> uuid;        // "GPU-..."
  Field<std::string> pci_bus_id;  // normalised "0000:3b:00.0"
  Field<std::string> serial;
  Field<std::string> vbios_version;  // "96.00.89.00.01"
  // nvmlDeviceGetPlatformInfo's chassisSerialNumber (GB200/GB300 trays, R570+; NOT_SUPPORTED or
  // absent elsewhere), printable ASCII only.
  Field<std::string> chassis_serial;
  Field<uint32_t> minor_number;  // /dev/nvidia<minor>
  Field<uint32_t> board_id;
  Field<std::pair<int, int>> cuda_compute_capability;
  std::string architecture;       // from the compute capability ("hopper"), "" when unknown
  Field<int> brand;               // NVML_BRAND_*
  Field<uint32_t> pci_device_id;  // device id << 16 | vendor id

  // Thermal.
  Field<int> temperature_c;      // TEMPERATURE_GPU
  Field<int> temperature_hbm_c;  // sensor 1
  Field<int> margin_temperature_c;
  Field<uint32_t> threshold_shutdown_c;
  Field<uint32_t> threshold_slowdown_c;
  Field<uint32_t> threshold_mem_max_c;
  Field<uint32_t> threshold_gpu_max_c;

  // Power and clocks.
  Field<uint32_t> power_usage_mw;
  Field<uint32_t> power_enforced_limit_mw;
  Field<uint32_t> power_management_limit_mw;
  Field<uint64_t> total_energy_mj;  // energy since the driver was last loaded, in millijoules
  Field<uint32_t> clock_graphics_mhz;
  Field<uint32_t> clock_memory_mhz;
  Field<uint32_t> clock_sm_mhz;
  Field<uint64_t> clocks_event_reasons;  // nvmlClocks*Reason* bits

  // Memory, utilisation, ECC, remapping and retirement.
  Field<Memory> memory;
  Field<Utilization> utilization;
  Field<EccMode> ecc_mode;
  Field<EccCounts> ecc_total;  // from GetTotalEccErrors
  // Per nvmlMemoryLocation_t (index = location), read only when ECC is currently enabled.
  std::array<Field<EccCounts>, kMemoryLocationCount> ecc_by_location;
  Field<RemappedRows> remapped_rows;
  Field<RetiredPages> retired_pages;
  Field<bool> retired_pages_pending;

  // Modes and processes.
  Field<bool> persistence_mode;  // enabled
  Field<int> compute_mode;       // NVML_COMPUTEMODE_*
  Field<std::vector<Process>> processes;

  // Interconnects.
  Field<std::vector<NvLink>> nvlinks;  // not supported when link 0 is
  PcieLink pcie;
  Field<FabricInfo> fabric;

  // Firmware and GPM.
  GspFirmware gsp;
  Field<bool> gpm_supported;

  // Set when any call on this GPU answered GPU_IS_LOST / RESET_REQUIRED.
  bool lost = false;
  bool reset_required = false;
  // The first call that answered so, and NVML's text for it ("nvmlDeviceGetName", "GPU is lost").
  std::string fault_call;
  std::string fault_error;
  // True when name, uuid, bus id and serial were taken from the last snapshot in which they could
  // be read (a lost GPU answers none of them; GPUs do not move between bus ids).
  bool identity_from_last_good = false;

  // Whether the GPU can be judged: it answered, neither lost nor waiting for a reset.
  bool checkable() const { return !lost && !reset_required; }
};

// NVLink P2P status of one unordered GPU pair (nvmlDeviceGetP2PStatus with the NVLink caps index).
struct P2PPair {
  unsigned int a = 0, b = 0;  // GPU indices, a < b
  Field<int> status;          // NVML_P2P_STATUS_*
};

struct NvmlSnapshot {
  DriverInfo driver;
  std::vector<GpuSnapshot> gpus;
  // Every unordered pair when there are at least two GPUs and the driver has the call.
  std::vector<P2PPair> nvlink_p2p;
  std::chrono::system_clock::time_point time{};
};

// GPUd's mapping from CUDA compute capability: 1 tesla, 2 fermi, 3 kepler, 5 maxwell, 6 pascal,
// 7.0-7.4 volta, 7.5+ turing, 8.0-8.8 ampere, 8.9 ada-lovelace, 9 hopper, 10/12 blackwell.
std::string architecture_from_compute_capability(int major, int minor);
// The text GPUd gives the HW slowdown reason bits set in `reasons` ("HW Slowdown", ...).
std::vector<std::string> hw_slowdown_reasons(uint64_t reasons);

// Reads one GPU. Runs on the calling thread: call it from a worker job. Each entry point is noted
// in `tracker` (when given) before it is called.
GpuSnapshot read_gpu(const Library& lib, nvmlDevice_t device, unsigned int index,
                     CallTracker* tracker = nullptr);

// Gathers every GPU, one worker job per GPU, each under `deadline`. A timed-out job (hung driver)
// makes the whole collection fail with a timeout error (is_timeout) that names the GPU and the
// call: "GPU 2 (0000:3a:00.0): nvmlDeviceGetPowerUsage did not return within 10 s", the bus id
// from `previous` (the last good snapshot) when given. While the call stays stuck, collections
// fail at once with that same message.
Result<NvmlSnapshot> collect(Nvml& nvml, std::chrono::milliseconds deadline = kDefaultCallDeadline,
                             const NvmlSnapshot* previous = nullptr);
// One GPU by index into nvml.devices().
Result<GpuSnapshot> collect_gpu(Nvml& nvml, unsigned int index,
                                std::chrono::milliseconds deadline = kDefaultCallDeadline,
                                const NvmlSnapshot* previous = nullptr);
// "GPU 2 (0000:3a:00.0)", the bus id from `previous` when it has GPU `index`.
std::string gpu_label_of(unsigned int index, const NvmlSnapshot* previous);

}  // namespace gpud::nvml
