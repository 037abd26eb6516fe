#include "components/nvidia/info.h"

#include "components/nvidia/gpu_issues.h"
#include "nvml/source.h"

namespace gpud::components {

namespace {

constexpr const char* kName = "accelerator-nvidia-info";
constexpr const char* kInfoMetric = "accelerator_nvidia_info";
// One series per GPU with NVML's own product name (not sanitized): what joins a GPU's uuid to its
// model, e.g. for dcgm-exporter's modelName label (deploy/prometheus/dcgm-compat-rules.yml).
constexpr const char* kGpuInfoMetric = "accelerator_nvidia_gpu_info";

std::string brand_name(int brand) {
  static const char* kBrands[] = {"Unknown",    "Quadro",     "Tesla",      "NVS",
                                  "GRID",       "GeForce",    "Titan",      "NVIDIA vApps",
                                  "NVIDIA VPC", "NVIDIA VCS", "NVIDIA VWS", "NVIDIA Cloud Gaming",
                                  "Quadro RTX", "NVIDIA RTX", "NVIDIA",     "GeForce RTX",
                                  "Titan RTX"};
  if (brand < 0 || brand >= static_cast<int>(std::size(kBrands))) return "Unknown";
  return kBrands[brand];
}

}  // namespace

CheckResult evaluate_info(const nvml::NvmlSnapshot& snapshot) {
  std::string product = product_of(snapshot);
  std::string brand, architecture;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "UUID", "BUS ID", "SERIAL", "MINOR", "BOARD ID"}};
  for (const auto& g : snapshot.gpus) {
    if (brand.empty() && g.brand.ok()) brand = brand_name(g.brand.value);
    if (architecture.empty()) architecture = g.architecture;
    nlohmann::json j = gpu_identity_json(g);
    j["name"] = field_json(g.name);
    j["serial"] = field_json(g.serial);
    j["minor_number"] = field_json(g.minor_number);
    j["board_id"] = field_json(g.board_id);
    gpus.push_back(std::move(j));
    rows.push_back({std::to_string(g.index), field_text(g.uuid), field_text(g.pci_bus_id),
                    field_text(g.serial), field_text(g.minor_number), field_text(g.board_id)});
  }
  nlohmann::json data = {{"product", product},
                         {"product_sanitized", nvml::sanitize_product_name(product)},
                         {"brand", brand},
                         {"architecture", architecture},
                         {"driver_version", snapshot.driver.driver_version},
                         {"cuda_version", snapshot.driver.cuda_version()},
                         {"gpu_count", snapshot.gpus.size()},
                         {"gpus", gpus}};
  std::string reason = snapshot.gpus.empty()
                           ? "NVIDIA NVML is loaded but GPU is not detected"
                           : std::to_string(snapshot.gpus.size()) + " x " + product + " (driver " +
                                 snapshot.driver.driver_version + ", CUDA " +
                                 snapshot.driver.cuda_version() + ")";
  std::string detail =
      "product: " + product + "\nbrand: " + brand + "\narchitecture: " + architecture +
      "\ndriver: " + snapshot.driver.driver_version + "\ncuda: " + snapshot.driver.cuda_version() +
      "\ngpus: " + std::to_string(snapshot.gpus.size()) + "\n" + format_table(rows);
  GpuIssues none;  // always Healthy when NVML works
  return none.result(kName, std::move(reason), data, std::move(detail));
}

InfoComponent::InfoComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics != nullptr)
    ctx.metrics->describe(kInfoMetric,
                          "NVIDIA driver and CUDA versions and the GPU product (always 1)");
  if (ctx.metrics != nullptr)
    ctx.metrics->describe(kGpuInfoMetric, "Each GPU's identity and NVML product name (always 1)");
}

CheckResult InfoComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  if (ctx().metrics != nullptr) {
    ctx().metrics->clear_series(kName, kInfoMetric);
    ctx().metrics->set(kName, kInfoMetric, 1,
                       {{"driver_version", snapshot.driver.driver_version},
                        {"cuda_version", snapshot.driver.cuda_version()},
                        {"product", nvml::sanitize_product_name(product_of(snapshot))}});
    ctx().metrics->clear_series(kName, kGpuInfoMetric);
    for (const auto& g : snapshot.gpus) {
      Labels l = gpu_labels(g);
      l["name"] = g.name.ok() ? g.name.value : "";
      ctx().metrics->set(kName, kGpuInfoMetric, 1, l);
    }
  }
  return evaluate_info(snapshot);
}

}  // namespace gpud::components
