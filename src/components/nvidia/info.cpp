#include "components/nvidia/info.h"

#include <algorithm>

#include "core/pci_address.h"
#include "nvml/source.h"

namespace gpud::components {

namespace {

constexpr const char* kName = "accelerator-nvidia-info";
constexpr const char* kInfoMetric = "accelerator_nvidia_info";
// One series per GPU with NVML's own product name (not sanitized), the driver version and the bus
// id as NVML writes it: what joins a GPU's uuid to dcgm-exporter's modelName,
// DCGM_FI_DRIVER_VERSION and pci_bus_id labels (deploy/prometheus/dcgm-compat-rules.yml). A lost
// GPU keeps its series with the identity it last answered with: its Xid counter, read from the
// kernel log, still needs them.
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

Labels gpu_info_labels(const nvml::GpuSnapshot& gpu, const nvml::DriverInfo& driver) {
  Labels l = gpu_labels(gpu);
  l["name"] = gpu.name.ok() ? gpu.name.value : "";
  l["driver_version"] = driver.driver_version;
  l["nvml_pci_bus_id"] = gpu.pci_bus_id.ok() ? nvml_pci_bus_id(gpu.pci_bus_id.value) : "";
  return l;
}

NvidiaVerdict evaluate_info(const nvml::NvmlSnapshot& snapshot) {
  std::string product = product_of(snapshot);
  std::string brand, architecture;
  NvidiaVerdict v;
  v.columns = {"UUID", "BUS ID", "SERIAL", "VBIOS", "MINOR", "BOARD ID", "STATE"};
  for (const auto& g : snapshot.gpus) {
    if (brand.empty() && g.brand.ok()) brand = brand_name(g.brand.value);
    if (architecture.empty()) architecture = g.architecture;
    GpuRow& row = v.gpus.emplace_back(g);
    row.cells = {field_text(g.uuid), field_text(g.pci_bus_id)};
    row.field("serial", g.serial)
        .field("vbios_version", g.vbios_version)
        .field("minor_number", g.minor_number)
        .field("board_id", g.board_id);
    row.data["name"] = field_json(g.name);
    const char* state = g.lost ? "lost" : g.reset_required ? "reset_required" : "ok";
    row.data["state"] = state;
    row.cells.push_back(state);
    if (g.checkable()) continue;
    row.data["fault"] = {{"call", g.fault_call}, {"error", g.fault_error}};
    row.data["identity_from_last_good"] = g.identity_from_last_good;
    std::string who = "GPU " + std::to_string(g.index) + " (";
    who += g.pci_bus_id.ok() ? g.pci_bus_id.value : "bus id unknown";
    if (g.uuid.ok()) who += ", " + g.uuid.value;
    if (g.serial.ok()) who += ", serial " + g.serial.value;
    who += ")";
    v.add(g, Health::kUnhealthy,
          who + (g.lost ? " is lost" : " requires a reset") + ": " + g.fault_call + " answered '" +
              g.fault_error + "'",
          RepairAction::kRebootSystem);
  }
  v.action_description =
      "reboot the system to recover the GPU; a GPU lost again after the reboot needs hardware "
      "inspection";
  v.data = {{"product", product},
            {"product_sanitized", nvml::sanitize_product_name(product)},
            {"brand", brand},
            {"architecture", architecture},
            {"driver_version", snapshot.driver.driver_version},
            {"cuda_version", snapshot.driver.cuda_version()},
            {"gpu_count", snapshot.gpus.size()}};
  const size_t answering = static_cast<size_t>(std::count_if(
      snapshot.gpus.begin(), snapshot.gpus.end(), [](const auto& g) { return g.checkable(); }));
  v.data["gpus_answering"] = answering;
  v.healthy_reason = snapshot.gpus.empty()
                         ? "NVIDIA NVML is loaded but GPU is not detected"
                         : std::to_string(snapshot.gpus.size()) + " x " + product + " (driver " +
                               snapshot.driver.driver_version + ", CUDA " +
                               snapshot.driver.cuda_version() + ")";
  v.detail_preface =
      "product: " + product + "\nbrand: " + brand + "\narchitecture: " + architecture +
      "\ndriver: " + snapshot.driver.driver_version + "\ncuda: " + snapshot.driver.cuda_version() +
      "\ngpus: " + std::to_string(snapshot.gpus.size()) + "\n";
  return v;
}

InfoComponent::InfoComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics != nullptr)
    ctx.metrics->describe(kNvmlUpMetric,
                          "1 when NVML answered the last collection, 0 when it is missing, failed "
                          "or did not answer within the deadline");
  if (ctx.metrics != nullptr)
    ctx.metrics->describe(kInfoMetric,
                          "NVIDIA driver and CUDA versions and the GPU product (always 1)");
  if (ctx.metrics != nullptr)
    ctx.metrics->describe(
        kGpuInfoMetric,
        "Each GPU's identity, NVML product name, driver version and NVML-form bus "
        "id (always 1); a lost GPU keeps the identity it last answered with");
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
      // A GPU that does not answer and never did since gpud started has no identity to serve.
      if (!g.checkable() && !g.identity_from_last_good) continue;
      ctx().metrics->set(kName, kGpuInfoMetric, 1, gpu_info_labels(g, snapshot.driver));
    }
  }
  record_gpu_changes(snapshot);
  return render_verdict(name(), evaluate_info(snapshot));
}

void InfoComponent::seed_locked() {
  if (seeded_) return;
  seeded_ = true;
  if (ctx().events == nullptr) return;
  const TimePoint now = Clock::now();
  auto events =
      ctx().events->query(name(), now - config().events_retention, now + std::chrono::minutes(1));
  if (!events) return;  // nothing known: changes are recorded from here on
  bool nvml_seen = false;
  std::map<std::string, bool> gpu_seen;
  for (const Event& e : *events) {  // newest first
    if (e.name == kNvmlNotAnsweringEvent || e.name == kNvmlUnusableEvent ||
        e.name == kNvmlRecoveredEvent) {
      if (nvml_seen) continue;
      nvml_seen = true;
      if (e.name != kNvmlRecoveredEvent) nvml_fault_ = e.name;
    } else if (e.name == kGpuLostEvent || e.name == kGpuRequiresResetEvent ||
               e.name == kGpuRecoveredEvent) {
      const std::string bus = e.extra_info.value("device_bus_id", "");
      if (bus.empty() || gpu_seen[bus]) continue;
      gpu_seen[bus] = true;
      if (e.name != kGpuRecoveredEvent) gpu_condition_[bus] = e.name;
    }
  }
}

void InfoComponent::record_gpu_changes(const nvml::NvmlSnapshot& snapshot) {
  std::lock_guard lock(changes_mu_);
  seed_locked();
  const TimePoint now = snapshot.time == TimePoint{} ? Clock::now() : snapshot.time;
  if (nvml_fault_) {
    Event e;
    e.time = now;
    e.name = kNvmlRecoveredEvent;
    e.type = EventType::kInfo;
    e.message = "NVML answers again (" + std::to_string(snapshot.gpus.size()) + " GPU(s))";
    record(std::move(e));
    nvml_fault_.reset();
  }
  for (const auto& g : snapshot.gpus) {
    // A GPU that never answered since gpud started has no bus id to follow it by.
    const std::string bus = g.pci_bus_id.value;
    if (bus.empty()) continue;
    const std::string condition = g.lost             ? kGpuLostEvent
                                  : g.reset_required ? kGpuRequiresResetEvent
                                                     : "";
    auto it = gpu_condition_.find(bus);
    const std::string before = it == gpu_condition_.end() ? "" : it->second;
    if (condition == before) continue;
    Event e;
    e.time = now;
    e.name = condition.empty() ? kGpuRecoveredEvent : condition;
    e.type = condition.empty() ? EventType::kInfo : EventType::kCritical;
    e.message = gpu_label(g) + " " + g.uuid.value +
                (g.lost             ? " lost: NVML cannot reach it"
                 : g.reset_required ? " requires a reset"
                                    : " answers again");
    e.extra_info = {{"gpu_index", g.index}, {"device_bus_id", bus}, {"device_uuid", g.uuid.value}};
    record(std::move(e));
    if (condition.empty())
      gpu_condition_.erase(bus);
    else
      gpu_condition_[bus] = condition;
  }
}

void InfoComponent::judge_without_snapshot(CheckResult& r) {
  if (r.health() != Health::kUnhealthy) return;  // NVML missing where no GPU is expected
  // NVML loaded and initialised, but the collection did not answer: a hung call.
  const bool hung = ctx().nvidia != nullptr && source().status() == nvml::NvmlStatus::kReady;
  const std::string name = hung ? kNvmlNotAnsweringEvent : kNvmlUnusableEvent;
  std::lock_guard lock(changes_mu_);
  seed_locked();
  if (nvml_fault_ == name) return;
  Event e;
  e.time = Clock::now();
  e.name = name;
  e.type = EventType::kCritical;
  e.message = r.states.empty() ? name : r.states.front().reason;
  record(std::move(e));
  nvml_fault_ = name;
}

}  // namespace gpud::components
