// GPM (GPU Performance Monitoring) sampling: SM occupancy, tensor and FP pipe utilisation, computed
// by the driver between two samples of a GPU's counters.
//
// GPUd takes two samples 5 s apart inside every check and holds a check for that long. The sampler
// instead keeps each GPU's previous sample buffer and measures from the previous call to this
// one, so a check never waits and the values cover the whole interval between two checks (the
// first call after start only takes the baseline sample).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "nvml/gpm_metrics.h"
#include "nvml/loader.h"

namespace gpud::nvml {

struct GpmGpuResult {
  unsigned int index = 0;
  // "" when sampled; else why not ("GPM not supported", "baseline sample taken", an NVML error).
  std::string status;
  bool error = false;  // status is an NVML error (not "not supported" or the first sample)
  // GpmMetricSpec::name -> NVML's value in the spec's unit, for the metrics that succeeded.
  std::map<std::string, double> values;
  std::chrono::milliseconds window{0};  // the time between the two samples
};

class GpmSampler {
 public:
  GpmSampler() = default;
  ~GpmSampler();  // frees the sample buffers on the NVML worker unless it is stuck
  GpmSampler(const GpmSampler&) = delete;
  GpmSampler& operator=(const GpmSampler&) = delete;

  // Samples every GPU whose index is in `gpus` (the GPM-capable ones) and computes the metrics
  // against that GPU's previous sample. Runs on `nvml`'s worker under `deadline`; a timeout fails
  // the whole call. A different Nvml instance than last time (a reload) starts over.
  Result<std::vector<GpmGpuResult>> sample(
      Nvml& nvml, const std::vector<unsigned int>& gpus,
      std::chrono::milliseconds deadline = kDefaultCallDeadline);

  struct State;

 private:
  void release();
  Nvml* nvml_ = nullptr;
  std::shared_ptr<State> state_;
};

}  // namespace gpud::nvml
