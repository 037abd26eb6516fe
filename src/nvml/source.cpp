#include "nvml/source.h"

#include "core/log.h"

namespace gpud::nvml {

NvidiaSource::NvidiaSource(std::string library_path, std::chrono::milliseconds deadline,
                           std::chrono::milliseconds max_age, std::vector<std::string> driver_roots)
    : library_path_(std::move(library_path)),
      driver_roots_(std::move(driver_roots)),
      deadline_(deadline),
      max_age_(max_age) {}

NvidiaSource::~NvidiaSource() {
  if (opener_.joinable()) opener_.join();
  gpm_.reset();
}

void NvidiaSource::open_async() {
  if (opening_.load()) return;
  if (opener_.joinable()) opener_.join();  // the previous attempt, finished
  opening_.store(true);
  opener_ = std::thread([this] {
    open();
    {
      std::lock_guard lock(opened_mu_);
      opening_.store(false);
    }
    opened_cv_.notify_all();
  });
}

bool NvidiaSource::opening() const {
  std::lock_guard lock(mu_);
  return opening_.load() && !nvml_;
}

bool NvidiaSource::wait_opened(std::chrono::milliseconds timeout) {
  std::unique_lock lock(opened_mu_);
  return opened_cv_.wait_for(lock, timeout, [this] { return !opening_.load(); });
}

nvmlReturn_t NvidiaSource::init_return() const {
  std::lock_guard lock(mu_);
  return nvml_ ? nvml_->init_return() : NVML_ERROR_UNINITIALIZED;
}

void NvidiaSource::open() {
  std::lock_guard collecting(collect_mu_);
  {
    std::lock_guard lock(mu_);
    if (nvml_ && nvml_->ready()) return;
  }
  // nvmlInit runs with a deadline; status() must not wait on it, so the new instance is built
  // unlocked.
  OpenOptions opts;
  opts.library_path = library_path_;
  opts.driver_roots = driver_roots_;
  opts.deadline = deadline_;
  std::unique_ptr<Nvml> fresh = Nvml::open(opts);
  if (fresh->ready())
    logger("nvml")->info("{}", fresh->message());
  else
    logger("nvml")->warn("{}", fresh->message());
  std::unique_ptr<Nvml> old;
  gpm_.reset();  // only ever set on a ready instance, which is never replaced; belt and braces
  std::lock_guard lock(mu_);
  old = std::move(nvml_);
  nvml_ = std::move(fresh);
  last_open_ = std::chrono::steady_clock::now();
  cached_.reset();
  cached_error_.reset();
}

void NvidiaSource::maybe_reload(std::chrono::seconds retry_every) {
  {
    std::lock_guard lock(mu_);
    if (opening_.load()) return;
    if (nvml_ && nvml_->ready()) return;
    if (nvml_ && nvml_->status() == NvmlStatus::kErrored && nvml_->worker().stuck()) return;
    if (nvml_ && std::chrono::steady_clock::now() - last_open_ < retry_every) return;
  }
  open_async();
}

NvmlStatus NvidiaSource::status() const {
  std::lock_guard lock(mu_);
  return nvml_ ? nvml_->status() : NvmlStatus::kNotFound;
}

std::string NvidiaSource::message() const {
  std::lock_guard lock(mu_);
  return nvml_ ? nvml_->message() : "NVML not loaded yet";
}

DriverInfo NvidiaSource::driver() const {
  std::lock_guard lock(mu_);
  return nvml_ ? nvml_->driver() : DriverInfo{};
}

size_t NvidiaSource::gpu_count() const {
  std::lock_guard lock(mu_);
  return nvml_ ? nvml_->devices().size() : 0;
}

namespace {

// A lost GPU answers nothing, not even its uuid: it keeps the identity it had when it last did.
void keep_identity_of_lost_gpus(NvmlSnapshot& snap, const NvmlSnapshot& previous) {
  for (auto& g : snap.gpus) {
    if (g.checkable() || g.uuid.ok()) continue;
    for (const auto& p : previous.gpus) {
      if (p.index != g.index || !p.uuid.ok()) continue;
      g.name = p.name;
      g.uuid = p.uuid;
      if (!g.pci_bus_id.ok()) g.pci_bus_id = p.pci_bus_id;
      g.serial = p.serial;
      g.identity_from_last_good = true;
    }
  }
}

}  // namespace

Result<std::shared_ptr<const NvmlSnapshot>> NvidiaSource::snapshot(
    std::chrono::milliseconds max_age) {
  // One collection at a time; status() and the other accessors only take mu_, so they never wait on
  // a driver call.
  std::lock_guard collecting(collect_mu_);
  Nvml* nvml = nullptr;
  std::shared_ptr<const NvmlSnapshot> previous;
  {
    std::lock_guard lock(mu_);
    if (!nvml_ || nvml_->status() == NvmlStatus::kNotFound)
      return make_error(nvml_ ? nvml_->message() : "NVML not loaded");
    if (nvml_->status() == NvmlStatus::kErrored) return make_error(nvml_->message());
    auto now = std::chrono::steady_clock::now();
    if (cached_ && now - cached_at_ <= max_age) return cached_;
    // A failed collection is remembered as long as a good one would be, so the components checked
    // right after it do not each start another one against a hung driver.
    if (cached_error_ && now - cached_at_ <= max_age) return *cached_error_;
    nvml = nvml_.get();  // open() does not replace a ready instance, and it takes collect_mu_ too
    previous = last_good_;
  }
  auto snap = collect(*nvml, deadline_, previous.get());
  if (snap && previous) keep_identity_of_lost_gpus(*snap, *previous);
  std::lock_guard lock(mu_);
  cached_at_ = std::chrono::steady_clock::now();
  if (!snap) {
    cached_.reset();
    cached_error_ = snap.error();
    return snap.error();
  }
  cached_error_.reset();
  cached_ = std::make_shared<const NvmlSnapshot>(std::move(*snap));
  last_good_ = cached_;
  return cached_;
}

std::shared_ptr<const NvmlSnapshot> NvidiaSource::last_good_snapshot() const {
  std::lock_guard lock(mu_);
  return last_good_;
}

Result<std::vector<GpmGpuResult>> NvidiaSource::gpm_sample(const std::vector<unsigned int>& gpus) {
  std::lock_guard collecting(collect_mu_);
  Nvml* nvml = ready_nvml();
  if (nvml == nullptr) return make_error(message());
  if (!gpm_) gpm_ = std::make_unique<GpmSampler>();
  return gpm_->sample(*nvml, gpus, deadline_);
}

void NvidiaSource::fill_machine_info(nlohmann::json& info) {
  if (status() != NvmlStatus::kReady) return;
  DriverInfo d = driver();
  info["gpuDriverVersion"] = d.driver_version;
  info["cudaVersion"] = d.cuda_version();
  auto snap = snapshot();
  if (!snap) return;
  nlohmann::json gpus = nlohmann::json::array();
  std::string product, arch, memory;
  for (const auto& g : (*snap)->gpus) {
    if (product.empty() && g.name.ok()) product = sanitize_product_name(g.name.value);
    if (arch.empty()) arch = g.architecture;
    if (memory.empty() && g.memory.ok())
      memory = std::to_string(g.memory.value.total_bytes / (1024 * 1024)) + " MiB";
    gpus.push_back({{"uuid", g.uuid.ok() ? g.uuid.value : ""},
                    {"busID", g.pci_bus_id.ok() ? g.pci_bus_id.value : ""},
                    {"sn", g.serial.ok() ? g.serial.value : ""},
                    {"minorID", g.minor_number.ok() ? std::to_string(g.minor_number.value) : ""},
                    {"boardID", g.board_id.ok() ? g.board_id.value : 0}});
  }
  // The NVLink fabric's identity (GPUd's clusterUUID and cliqueID, "Cluster UUID" and "Clique Id"
  // in nvidia-smi -q): every GPU of a node shares it, so the first GPU whose fabric state reads
  // gives it; absent off a fabric (no fabric state, or the all-zero UUID of a GPU in none).
  info.erase("clusterUUID");
  info.erase("cliqueID");
  // GPUd's chassisSerial: the tray's, from the first GPU that reports one (GB200/GB300).
  info.erase("chassisSerial");
  for (const auto& g : (*snap)->gpus) {
    if (!g.chassis_serial.ok() || g.chassis_serial.value.empty()) continue;
    info["chassisSerial"] = g.chassis_serial.value;
    break;
  }
  for (const auto& g : (*snap)->gpus) {
    if (!g.fabric.ok() || g.fabric.value.cluster_uuid.empty() ||
        g.fabric.value.cluster_uuid == "00000000-0000-0000-0000-000000000000")
      continue;
    info["clusterUUID"] = g.fabric.value.cluster_uuid;
    if (g.fabric.value.clique_id != 0) info["cliqueID"] = g.fabric.value.clique_id;
    break;
  }
  info["gpuInfo"] = {{"product", product},
                     {"manufacturer", "NVIDIA"},
                     {"architecture", arch},
                     {"memory", memory},
                     {"gpus", gpus}};
}

std::string sanitize_product_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.' || c == ' ';
    if (!keep) continue;
    out.push_back(c == ' ' ? '-' : c);
  }
  return out;
}

Nvml* NvidiaSource::ready_nvml() {
  std::lock_guard lock(mu_);
  return nvml_ && nvml_->ready() ? nvml_.get() : nullptr;
}

}  // namespace gpud::nvml
