#include "nvml/gpm.h"

#include "core/log.h"

namespace gpud::nvml {

// Touched only by jobs on the NVML worker (one at a time), and by the destructor's free job.
struct GpmSampler::State {
  std::shared_ptr<const Library> lib;
  struct Gpu {
    nvmlGpmSample_t previous{};
    std::chrono::steady_clock::time_point taken{};
  };
  std::map<unsigned int, Gpu> gpus;

  void free_all() {
    const Api& a = lib->api;
    for (auto& [i, g] : gpus)
      if (g.previous.handle != nullptr && a.gpm_sample_free != nullptr)
        (void)a.gpm_sample_free(g.previous);
    gpus.clear();
  }
};

namespace {

GpmGpuResult sample_one(GpmSampler::State& st, nvmlDevice_t dev, unsigned int index) {
  const Api& a = st.lib->api;
  GpmGpuResult r;
  r.index = index;
  nvmlGpmSample_t now{};
  nvmlReturn_t ret = a.gpm_sample_alloc(&now);
  if (ret != NVML_SUCCESS) {
    r.status = "nvmlGpmSampleAlloc: " + error_text(a, ret);
    r.error = true;
    return r;
  }
  ret = a.gpm_sample_get(dev, now);
  auto taken = std::chrono::steady_clock::now();
  if (ret != NVML_SUCCESS) {
    (void)a.gpm_sample_free(now);
    r.status = "nvmlGpmSampleGet: " + error_text(a, ret);
    r.error = ret != NVML_ERROR_NOT_SUPPORTED;
    if (!r.error) r.status = "GPM not supported";
    return r;
  }
  auto& g = st.gpus[index];
  if (g.previous.handle == nullptr) {
    g.previous = now;
    g.taken = taken;
    r.status = "baseline sample taken";
    return r;
  }
  // On the heap: the struct is about 13 KiB.
  auto req = std::make_unique<nvmlGpmMetricsGet_t>();
  *req = nvmlGpmMetricsGet_t{};
  req->version = NVML_GPM_METRICS_GET_VERSION;
  req->sample1 = g.previous;
  req->sample2 = now;
  const auto& specs = kGpmMetrics;
  req->numMetrics = static_cast<unsigned int>(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) req->metrics[i].metricId = specs[i].id;
  ret = a.gpm_metrics_get(req.get());
  r.window = std::chrono::duration_cast<std::chrono::milliseconds>(taken - g.taken);
  (void)a.gpm_sample_free(g.previous);
  g.previous = now;
  g.taken = taken;
  if (ret != NVML_SUCCESS) {
    r.status = "nvmlGpmMetricsGet: " + error_text(a, ret);
    r.error = true;
    return r;
  }
  for (size_t i = 0; i < specs.size(); ++i)
    if (req->metrics[i].nvmlReturn == NVML_SUCCESS) r.values[specs[i].name] = req->metrics[i].value;
  return r;
}

}  // namespace

Result<std::vector<GpmGpuResult>> GpmSampler::sample(Nvml& nvml,
                                                     const std::vector<unsigned int>& gpus,
                                                     std::chrono::milliseconds deadline) {
  if (!nvml.ready()) return make_error(nvml.message());
  std::shared_ptr<const Library> lib = nvml.library();
  const Api& a = lib->api;
  if (a.gpm_sample_alloc == nullptr || a.gpm_sample_free == nullptr ||
      a.gpm_sample_get == nullptr || a.gpm_metrics_get == nullptr)
    return make_error("GPM sampling not supported by this driver");
  if (nvml_ != &nvml || !state_ || state_->lib != lib) {
    release();
    nvml_ = &nvml;
    state_ = std::make_shared<State>();
    state_->lib = lib;
  }
  std::vector<nvmlDevice_t> devices = nvml.devices();
  std::shared_ptr<State> st = state_;
  return nvml.worker().call(
      [st, devices, gpus] {
        std::vector<GpmGpuResult> out;
        for (unsigned int i : gpus) {
          if (i >= devices.size()) continue;
          out.push_back(sample_one(*st, devices[i], i));
        }
        return out;
      },
      deadline);
}

void GpmSampler::release() {
  if (!state_ || nvml_ == nullptr) return;
  std::shared_ptr<State> st = std::move(state_);
  if (nvml_->worker().stuck()) return;  // leak the buffers rather than wait on a hung driver
  auto r = nvml_->worker().run([st] { st->free_all(); }, std::chrono::seconds(2));
  if (!r.ok()) logger("nvml")->warn("freeing GPM samples: {}", r.error().message);
}

GpmSampler::~GpmSampler() { release(); }

}  // namespace gpud::nvml
