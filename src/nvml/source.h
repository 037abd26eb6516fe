// NvidiaSource: the daemon's one NVML instance, a short-lived snapshot cache the NVIDIA components
// share (so a minute's checks cost one collection), and the retry of a missing library every 5
// minutes. Collections run on a thread of their own, so a check can stop waiting for a driver that
// does not answer (set_answer_wait) while the collection goes on to its deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "core/result.h"
#include "nvml/device.h"
#include "nvml/gpm.h"
#include "nvml/loader.h"

namespace gpud::nvml {

class NvidiaSource {
 public:
  // `max_age`: how long a collection serves the checks that follow it (tests shorten it).
  // `driver_roots`: where a driver may be installed (see OpenOptions), looked at on each open.
  explicit NvidiaSource(std::string library_path,
                        std::chrono::milliseconds deadline = kDefaultCallDeadline,
                        std::chrono::milliseconds max_age = std::chrono::seconds(5),
                        std::vector<std::string> driver_roots = {});
  ~NvidiaSource();

  // Loads NVML (first attempt, or again when `retry_every` passed since a failed attempt). Cheap
  // otherwise.
  void open();
  // open() on a thread of its own, so that a daemon on a hung driver serves its API meanwhile.
  // Joined by the destructor (an init runs for the call deadline at most).
  void open_async();
  // True until the first attempt to open NVML has finished (later attempts keep the previous
  // state visible meanwhile).
  bool opening() const;
  // Waits at most `timeout` for open_async to finish; true when it has.
  bool wait_opened(std::chrono::milliseconds timeout);
  // open_async() again when NVML is missing, or failed to initialise for a reason other than a
  // hang (a stuck worker is never replaced: each retry would strand another thread), once
  // `retry_every` passed since the last attempt. Cheap otherwise; never waits for the attempt.
  void maybe_reload(std::chrono::seconds retry_every = std::chrono::minutes(5));

  NvmlStatus status() const;
  // The nvmlReturn_t behind a kNotFound / kErrored status (NVML_SUCCESS when ready).
  nvmlReturn_t init_return() const;
  std::string message()
      const;  // "NVML not found: …" / "NVML initialization error: …" / "NVML ready …"
  DriverInfo driver() const;
  size_t gpu_count() const;

  // The latest snapshot, collected when older than max_age. A hung driver returns a timeout error
  // naming the GPU and the call within the deadline, and the same error fast after that. A GPU
  // that is lost keeps the identity (name, uuid, bus id, serial) of the last good snapshot.
  // Waits for a collection in progress at most the answer wait after it began (see
  // set_answer_wait), then returns a not-answering error (is_not_answering) while the collection
  // goes on; once a collection has timed out, the hang's own error instead until one succeeds.
  Result<std::shared_ptr<const NvmlSnapshot>> snapshot(std::chrono::milliseconds max_age);
  Result<std::shared_ptr<const NvmlSnapshot>> snapshot() { return snapshot(max_age_); }
  // Whether NVML answered the last collection a caller asked for: true when NVML is ready and the
  // last snapshot() (or snapshot_within()) returned a snapshot; false when NVML is missing, failed,
  // or the collection failed or did not answer within the wait (a hung driver), and before anyone
  // asked. Never waits. The one meaning of "NVML up": accelerator_nvidia_nvml_up and gpud_nvml_up
  // both publish it.
  bool answered_last_collection() const;
  // snapshot() waiting at most `wait` from now (the daemon's start-up budget).
  Result<std::shared_ptr<const NvmlSnapshot>> snapshot_within(std::chrono::milliseconds wait);

  // How long snapshot() waits for a collection before answering "not answering": the daemon's
  // checks must not hold the scheduler's workers for a driver call's whole deadline. nullopt (the
  // default, what `gpud scan` uses): until the collection ends, at its deadline at most.
  void set_answer_wait(std::optional<std::chrono::milliseconds> wait);
  // Called (on the collection's thread) when a collection ends after a caller was told that NVML
  // is not answering: the callers' states are worth re-checking now. Cleared with nullptr, which
  // waits for a call in progress, so that what it captured may go after that.
  void set_on_answer(std::function<void()> on_answer);

  // The call that hung the last collection (which GPU, which entry point), until a collection
  // succeeds; nullopt when the last one did not time out. Never waits.
  std::optional<HangReport> hang() const;

  // The last snapshot that was collected well, whatever its age; nullptr before the first. Never
  // collects nor waits for a collection: the kernel-log thread names the GPU of a bus id with it
  // while a collection may be stuck on a hung driver (GPUs do not move between bus ids).
  std::shared_ptr<const NvmlSnapshot> last_good_snapshot() const;

  // The GPU part of /machine-info (gpuDriverVersion, cudaVersion, gpuInfo{product, manufacturer,
  // architecture, memory, gpus[{uuid, busID, sn, minorID, boardID}]}) merged into `info`, from a
  // fresh snapshot (`gpud scan`) or, with `collect` false, the last good one without waiting (the
  // daemon). True when gpuInfo was filled.
  bool fill_machine_info(nlohmann::json& info, bool collect = true);

  // GPM metrics of the given GPUs since the previous call (see GpmSampler). Serialised with
  // collections; the first call per GPU only takes a baseline sample.
  Result<std::vector<GpmGpuResult>> gpm_sample(const std::vector<unsigned int>& gpus);

  // The loaded library when ready (for the Xid watcher), else null. Valid while this source lives:
  // a ready instance is never reloaded.
  Nvml* ready_nvml();

 private:
  std::string library_path_;
  std::vector<std::string> driver_roots_;
  std::chrono::milliseconds deadline_;
  std::chrono::milliseconds max_age_;
  mutable std::mutex mu_;  // guards everything below; never held across an NVML call
  std::unique_ptr<Nvml> nvml_;
  std::unique_ptr<GpmSampler> gpm_;  // of nvml_; reset before nvml_ goes
  std::chrono::steady_clock::time_point last_open_{};
  std::shared_ptr<const NvmlSnapshot> cached_;
  std::shared_ptr<const NvmlSnapshot> last_good_;  // kept across failed collections
  std::optional<Error> cached_error_;
  std::mutex collect_mu_;  // held across a collection (bounded by the deadline); taken before mu_
  std::chrono::steady_clock::time_point cached_at_{};
  // The collection thread, started by the first snapshot(); these are guarded by mu_.
  void collect_loop();
  Result<std::shared_ptr<const NvmlSnapshot>> wait_for_collection(
      std::unique_lock<std::mutex>& lock, std::chrono::milliseconds max_age,
      std::optional<std::chrono::steady_clock::time_point> give_up);
  std::thread collector_;
  std::condition_variable collect_cv_;    // wakes collect_loop (a request, or stopping_)
  std::condition_variable collected_cv_;  // wakes the callers when a collection ends
  bool collect_requested_ = false;
  bool collecting_ = false;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point collecting_since_{};
  uint64_t collections_ = 0;         // collections ended
  bool told_not_answering_ = false;  // a caller was told so during the current collection
  std::optional<Error> last_hang_;   // the last collection's timeout, until one succeeds
  std::optional<HangReport> hang_;   // what hung it, as the NVML instance reported it
  bool answered_last_ = false;       // the last snapshot() returned a snapshot
  std::optional<std::chrono::milliseconds> answer_wait_;
  std::mutex on_answer_mu_;  // held while on_answer_ runs
  std::function<void()> on_answer_;
  std::thread opener_;  // open_async's; joined by the destructor
  std::atomic<bool> opening_{false};
  std::mutex opened_mu_;
  std::condition_variable opened_cv_;
};

// Error::code of snapshot()'s "NVML is not answering": a collection is running past the answer
// wait but not yet past its deadline, so the driver is slow or hung, not known to be either.
inline constexpr int kNotAnsweringErrorCode = 503;
bool is_not_answering(const Error& e);

// "NVIDIA H100 80GB HBM3" -> "NVIDIA-H100-80GB-HBM3" (GPUd's product-name sanitising).
std::string sanitize_product_name(std::string_view name);

}  // namespace gpud::nvml
