#include "components/nvidia/infiniband.h"

#include <re2/re2.h>

#include "core/pci_address.h"

namespace gpud::components {
namespace {

std::optional<kmsg::Match> match_access_reg(std::string_view s) {
  static const RE2 kRe(R"(mlx5_cmd_out_err.*ACCESS_REG.*failed)");
  static const RE2 kPci(R"(([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]))");
  const re2::StringPiece in(s.data(), s.size());
  if (!RE2::PartialMatch(in, kRe)) return std::nullopt;
  kmsg::Match m;
  m.name = "access_reg_failed";
  m.message = "MLX5 ACCESS_REG command failed - device may have restricted PF access";
  m.extra_info = {{"log_line", kmsg::log_line_excerpt(s)}};
  std::string pci;
  if (RE2::PartialMatch(in, kPci, &pci)) {
    pci = normalize_pci_bus_id(pci);
    m.extra_info["pci_bus_id"] = pci;
    m.message += " (PCI device " + pci + ")";
  }
  return m;
}

}  // namespace

kmsg::ComponentRules infiniband_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = "accelerator-nvidia-infiniband";
  r.lines = {
      kmsg::pattern_rule({{"insufficient power"}}, "pci_power_insufficient",
                         R"(Detected insufficient power on the PCIe slot \(([0-9]+W)\))",
                         "Insufficient power on MLX5 PCIe slot", "power"),
      kmsg::pattern_rule({{"High Temperature", "Temper"}}, "port_module_high_temperature",
                         R"(Port module event.*High Temperature)", "Overheated MLX5 adapter"),
      {{{"ACCESS_REG"}}, match_access_reg},
  };
  return r;
}

}  // namespace gpud::components
