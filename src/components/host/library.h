// LibraryComponent ("library"): on hosts with an NVIDIA GPU, the driver's user-space libraries
// (libnvidia-ml, libcuda) must be installed: in the host's library directories, or under a driver
// root ($GPUD_NVIDIA_DRIVER_ROOT, the GPU Operator's /run/nvidia/driver;
// host/nvidia_driver_root.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "components/component.h"
#include "host/host_fs.h"

namespace gpud::components {

// A required library: the name reported when missing, and the file names that satisfy it.
struct LibrarySpec {
  std::string name;                       // "libcuda.so.1"
  std::vector<std::string> alternatives;  // {"libcuda.so.1", "libcuda.so"}
};

struct LibraryLookup {
  std::string name;
  std::string path;  // where it was found ("" when missing)
};

const std::vector<LibrarySpec>& default_library_specs();
const std::vector<std::string>& default_library_dirs();
// Looks each library up in dirs (host-root prefixed), first hit wins; then, for each still
// missing, in the same dirs under each of `driver_roots` (paths as gpud sees them; a hit is
// reported with the root in front).
std::vector<LibraryLookup> find_libraries(const host::HostFs& fs,
                                          const std::vector<LibrarySpec>& specs,
                                          const std::vector<std::string>& dirs,
                                          const std::vector<std::string>& driver_roots = {});
// The rule: any library not found ⇒ Unhealthy `library "<name>" does not exist`.
struct LibraryEvaluation {
  Health health = Health::kHealthy;
  std::string reason;
  std::optional<SuggestedActions> actions;
};
LibraryEvaluation evaluate_libraries(const std::vector<LibraryLookup>& found);

class LibraryComponent : public Component {
 public:
  explicit LibraryComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "library"; }
  bool supported() const override { return nvidia_gpu_present_; }
  CheckResult check() override;

 private:
  host::HostFs fs_;
  std::vector<std::string> driver_roots_;
  bool nvidia_gpu_present_ = false;
};

}  // namespace gpud::components
