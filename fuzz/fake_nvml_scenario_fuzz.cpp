// Any bytes as a fake NVML scenario (testing/fake_nvml): loaded by the fake's own loader, then
// every GPU it describes read through gpud's NVML path, the resolve_api and read_gpu the daemon
// uses, with the fake's entry points resolved from this executable. Whatever a driver answers,
// gpud reads it without a crash. Delays are a test knob that would only make the fuzzer wait: they
// are cleared after loading.

// The fake's loader and exported entry points, in this executable.

#include <algorithm>
#include <cstdlib>

#include "fuzz/input_file.h"
#include "nvml/device.h"
#include "nvml/loader.h"
#include "testing/fake_nvml/fake_nvml.cpp"  // NOLINT(bugprone-suspicious-include)

namespace {

gpud::nvml::Library load_self(const std::string& scenario) {
  ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
  gpud::nvml::Library lib;
  auto dl = gpud::nvml::DynamicLibrary::open("");  // "": this executable
  if (!dl) std::abort();
  lib.api = gpud::nvml::resolve_api(**dl);
  lib.dl = std::move(*dl);
  return lib;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gpud::fuzz::InputFile file("gpud-fake-nvml-fuzz", ".json");
  static const gpud::nvml::Library lib = load_self(file.path());
  file.write(data, size);
  {
    std::lock_guard lock(g_mu);
    g_have_scenario = false;  // load this input now, whatever the file's time stamp
    maybe_reload_locked();
    // The loaded scenario is shared and immutable: replace it with a copy without delays.
    Scenario s = *g_sc;
    s.delays = json::object();
    for (json& g : s.gpus)
      if (g.is_object()) g.erase("delays_ms");
    g_sc = std::make_shared<const Scenario>(std::move(s));
  }
  if (lib.api.init == nullptr || lib.api.init() != NVML_SUCCESS) return 0;
  unsigned int count = 0;
  if (lib.api.device_count != nullptr && lib.api.device_count(&count) == NVML_SUCCESS) {
    // Eight GPUs cover every read path (each GPU is read alike); more only make one input slow
    // enough for libFuzzer's 10 s timeout: a sanitizer build reads about 0.1 s of calls per GPU.
    for (unsigned int i = 0; i < std::min(count, 8U); ++i) {
      nvmlDevice_t device{};
      if (lib.api.handle_by_index(i, &device) == NVML_SUCCESS)
        (void)gpud::nvml::read_gpu(lib, device, i);
    }
  }
  if (lib.api.shutdown != nullptr) lib.api.shutdown();
  return 0;
}
