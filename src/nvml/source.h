// NvidiaSource: the daemon's one NVML instance, a short-lived snapshot cache the NVIDIA components
// share (so a minute's checks cost one collection), and the retry of a missing library every 5
// minutes.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/result.h"
#include "nvml/device.h"
#include "nvml/gpm.h"
#include "nvml/loader.h"

namespace gpud::nvml {

class NvidiaSource {
 public:
  explicit NvidiaSource(std::string library_path,
                        std::chrono::milliseconds deadline = kDefaultCallDeadline);
  ~NvidiaSource();

  // Loads NVML (first attempt, or again when `retry_every` passed since a failed attempt). Cheap
  // otherwise.
  void open();
  void maybe_reload(std::chrono::seconds retry_every = std::chrono::minutes(5));

  NvmlStatus status() const;
  std::string message()
      const;  // "NVML not found: …" / "NVML initialization error: …" / "NVML ready …"
  DriverInfo driver() const;
  size_t gpu_count() const;

  // The latest snapshot, collected when older than max_age. A hung driver returns the worker's
  // timeout error ("NVML call timed out, driver may be hung") within the deadline, and fast after
  // that.
  Result<std::shared_ptr<const NvmlSnapshot>> snapshot(
      std::chrono::milliseconds max_age = std::chrono::seconds(5));

  // The last snapshot that was collected well, whatever its age; nullptr before the first. Never
  // collects nor waits for a collection: the kernel-log thread names the GPU of a bus id with it
  // while a collection may be stuck on a hung driver (GPUs do not move between bus ids).
  std::shared_ptr<const NvmlSnapshot> last_good_snapshot() const;

  // The GPU part of /machine-info (gpuDriverVersion, cudaVersion, gpuInfo{product, manufacturer,
  // architecture, memory, gpus[{uuid, busID, sn, minorID, boardID}]}) merged into `info`.
  void fill_machine_info(nlohmann::json& info);

  // GPM metrics of the given GPUs since the previous call (see GpmSampler). Serialised with
  // collections; the first call per GPU only takes a baseline sample.
  Result<std::vector<GpmGpuResult>> gpm_sample(const std::vector<unsigned int>& gpus);

  // The loaded library when ready (for the Xid watcher), else null. Valid while this source lives:
  // a ready instance is never reloaded.
  Nvml* ready_nvml();

 private:
  std::string library_path_;
  std::chrono::milliseconds deadline_;
  mutable std::mutex mu_;  // guards everything below; never held across an NVML call
  std::unique_ptr<Nvml> nvml_;
  std::unique_ptr<GpmSampler> gpm_;  // of nvml_; reset before nvml_ goes
  std::chrono::steady_clock::time_point last_open_{};
  std::shared_ptr<const NvmlSnapshot> cached_;
  std::shared_ptr<const NvmlSnapshot> last_good_;  // kept across failed collections
  std::optional<Error> cached_error_;
  std::mutex collect_mu_;  // held across a collection (bounded by the deadline); taken before mu_
  std::chrono::steady_clock::time_point cached_at_{};
};

// "NVIDIA H100 80GB HBM3" -> "NVIDIA-H100-80GB-HBM3" (GPUd's product-name sanitising).
std::string sanitize_product_name(std::string_view name);

}  // namespace gpud::nvml
