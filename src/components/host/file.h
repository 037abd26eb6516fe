// FileComponent ("file"): files the operator requires (--files, e.g. a driver's device node or a
// config file) must exist on the host.
#pragma once

#include <string>
#include <vector>

#include "components/component.h"
#include "host/host_fs.h"

namespace gpud::components {

// The required files that do not exist under the host root, in required order.
std::vector<std::string> missing_files(const host::HostFs& fs,
                                       const std::vector<std::string>& required);

class FileComponent : public Component {
 public:
  explicit FileComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "file"; }
  CheckResult check() override;

 private:
  host::HostFs fs_;
};

}  // namespace gpud::components
