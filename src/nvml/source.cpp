#include "nvml/source.h"

#include <fmt/format.h>

#include <utility>

#include "core/log.h"

namespace gpud::nvml {

NvidiaSource::NvidiaSource(std::string library_path, std::chrono::milliseconds deadline,
                           std::chrono::milliseconds max_age, std::vector<std::string> driver_roots)
    : library_path_(std::move(library_path)),
      driver_roots_(std::move(driver_roots)),
      deadline_(deadline),
      max_age_(max_age) {}

NvidiaSource::~NvidiaSource() {
  set_on_answer(nullptr);
  {
    std::unique_lock lock(mu_);
    stopping_ = true;
    collect_cv_.notify_all();
    collected_cv_.notify_all();
    // A collection stuck in the driver would hold the collection thread (and this) for the rest
    // of its deadline: past a short grace, the NVML worker is stopped, which ends the collection's
    // wait for it (the stuck driver thread is detached).
    if (collecting_ &&
        !collected_cv_.wait_for(lock, std::chrono::milliseconds(500),
                                [&] { return !collecting_; }) &&
        nvml_)
      (void)nvml_->worker().stop(std::chrono::milliseconds(0));
  }
  if (collector_.joinable()) collector_.join();
  if (opener_.joinable()) opener_.join();
  gpm_.reset();
}

bool is_not_answering(const Error& e) { return e.code == kNotAnsweringErrorCode; }

void NvidiaSource::set_answer_wait(std::optional<std::chrono::milliseconds> wait) {
  std::lock_guard lock(mu_);
  answer_wait_ = wait;
}

void NvidiaSource::set_on_answer(std::function<void()> on_answer) {
  std::lock_guard lock(on_answer_mu_);
  on_answer_ = std::move(on_answer);
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
  last_hang_.reset();
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
      g.vbios_version = p.vbios_version;
      g.identity_from_last_good = true;
    }
  }
}

}  // namespace

Result<std::shared_ptr<const NvmlSnapshot>> NvidiaSource::snapshot(
    std::chrono::milliseconds max_age) {
  std::unique_lock lock(mu_);
  std::optional<std::chrono::steady_clock::time_point> give_up;
  // Measured from when the collection began: a caller that comes late does not wait again.
  if (answer_wait_)
    give_up = (collecting_ ? collecting_since_ : std::chrono::steady_clock::now()) + *answer_wait_;
  auto r = wait_for_collection(lock, max_age, give_up);
  answered_last_ = r.ok();
  return r;
}

Result<std::shared_ptr<const NvmlSnapshot>> NvidiaSource::snapshot_within(
    std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  auto r = wait_for_collection(lock, max_age_, std::chrono::steady_clock::now() + wait);
  answered_last_ = r.ok();
  return r;
}

bool NvidiaSource::answered_last_collection() const {
  std::lock_guard lock(mu_);
  return nvml_ && nvml_->status() == NvmlStatus::kReady && answered_last_;
}

Result<std::shared_ptr<const NvmlSnapshot>> NvidiaSource::wait_for_collection(
    std::unique_lock<std::mutex>& lock, std::chrono::milliseconds max_age,
    std::optional<std::chrono::steady_clock::time_point> give_up) {
  // status() and the other accessors only take mu_, which no driver call holds: they never wait.
  if (!nvml_ || nvml_->status() == NvmlStatus::kNotFound)
    return make_error(nvml_ ? nvml_->message() : "NVML not loaded");
  if (nvml_->status() == NvmlStatus::kErrored) return make_error(nvml_->message());
  const auto now = std::chrono::steady_clock::now();
  if (cached_ && now - cached_at_ <= max_age) return cached_;
  // A failed collection is remembered as long as a good one would be, so the components checked
  // right after it do not each start another one against a hung driver.
  if (cached_error_ && now - cached_at_ <= max_age) return *cached_error_;
  if (stopping_) return make_error("NVML source stopping");
  if (!collecting_) {
    if (!collector_.joinable()) collector_ = std::thread([this] { collect_loop(); });
    collecting_ = true;
    collect_requested_ = true;
    collecting_since_ = now;
    collect_cv_.notify_one();
  }
  const uint64_t seen = collections_;
  auto ended = [&] { return collections_ != seen || stopping_; };
  if (give_up)
    collected_cv_.wait_until(lock, *give_up, ended);
  else
    collected_cv_.wait(lock, ended);
  if (collections_ != seen) {
    if (cached_) return cached_;
    if (cached_error_) return *cached_error_;
  }
  if (stopping_) return make_error("NVML source stopping");
  told_not_answering_ = true;
  // A driver that hung at the last collection and has not answered well since is still hung.
  if (last_hang_) return *last_hang_;
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - collecting_since_).count();
  return make_error(fmt::format("NVML is not answering: no reply for {:.1f} s (a call is declared "
                                "hung after {})",
                                waited_s, deadline_text(deadline_)),
                    kNotAnsweringErrorCode);
}

void NvidiaSource::collect_loop() {
  std::unique_lock lock(mu_);
  while (true) {
    collect_cv_.wait(lock, [&] { return stopping_ || collect_requested_; });
    if (stopping_) break;
    collect_requested_ = false;
    // open() does not replace a ready instance (a collection is requested only of one), and it
    // takes collect_mu_ too.
    Nvml* nvml = nvml_.get();
    std::shared_ptr<const NvmlSnapshot> previous = last_good_;
    lock.unlock();
    Result<NvmlSnapshot> snap = make_error("NVML not loaded");
    {
      std::lock_guard collecting(collect_mu_);
      if (nvml != nullptr) snap = collect(*nvml, deadline_, previous.get());
    }
    if (snap && previous) keep_identity_of_lost_gpus(*snap, *previous);
    lock.lock();
    cached_at_ = std::chrono::steady_clock::now();
    if (!snap) {
      cached_.reset();
      cached_error_ = snap.error();
      if (is_timeout(snap.error()) && nvml != nullptr) {
        last_hang_ = snap.error();
        hang_ = nvml->hang_report();
      }
    } else {
      cached_error_.reset();
      cached_ = std::make_shared<const NvmlSnapshot>(std::move(*snap));
      last_good_ = cached_;
      last_hang_.reset();
      hang_.reset();
    }
    collecting_ = false;
    ++collections_;
    const bool tell = std::exchange(told_not_answering_, false);
    collected_cv_.notify_all();
    if (tell) {
      lock.unlock();
      {
        std::lock_guard answering(on_answer_mu_);
        if (on_answer_) on_answer_();
      }
      lock.lock();
    }
  }
}

std::optional<HangReport> NvidiaSource::hang() const {
  std::lock_guard lock(mu_);
  return hang_;
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

bool NvidiaSource::fill_machine_info(nlohmann::json& info, bool collect) {
  if (status() != NvmlStatus::kReady) return false;
  DriverInfo d = driver();
  info["gpuDriverVersion"] = d.driver_version;
  info["cudaVersion"] = d.cuda_version();
  Result<std::shared_ptr<const NvmlSnapshot>> snap = make_error("no snapshot yet");
  if (collect)
    snap = snapshot();
  else if (auto last = last_good_snapshot())
    snap = last;
  if (!snap) return false;
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
  return true;
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
