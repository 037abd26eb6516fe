#include "host/nvidia_driver_root.h"

namespace gpud::host {

std::vector<std::string> nvidia_driver_roots(const HostFs& fs, const std::string& configured) {
  std::vector<std::string> roots;
  if (!configured.empty()) roots.push_back(configured);
  std::string operator_root = fs.path(kGpuOperatorDriverRoot);
  if (operator_root != configured) roots.push_back(std::move(operator_root));
  return roots;
}

}  // namespace gpud::host
