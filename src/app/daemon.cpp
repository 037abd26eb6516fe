#include "app/daemon.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "app/bus_identities.h"
#include "app/gpud_state_migration.h"
#include "components/nvidia/gpu_health.h"
#include "components/nvidia/xid.h"
#include "components/registry.h"
#include "core/log.h"
#include "core/time_util.h"
#include "host/host_fs.h"
#include "host/machine_info.h"
#include "host/os_info.h"
#include "host/pci.h"
#include "kmsg/fault.h"
#include "kmsg/writer.h"
#include "plugins/plugin_component.h"
#include "plugins/spec.h"

namespace gpud::app {

Result<int> lock_data_dir(const std::string& data_dir) {
  std::string path = data_dir + "/gpud.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return make_error("open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (err == EWOULDBLOCK)
      return make_error("another gpud (pid " + holder + ") is using data dir " + data_dir);
    return make_error("lock " + path + ": " + std::strerror(err));
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
  return fd;
}

Result<void> ensure_data_dir(const std::string& data_dir) {
  namespace fs = std::filesystem;
  fs::path dir(data_dir);
  if (!dir.empty() && dir.filename().empty()) dir = dir.parent_path();  // "a/b/" is "a/b"
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return {};
  if (dir.has_parent_path()) {
    fs::create_directories(dir.parent_path(), ec);
    if (ec) return make_error("create data dir " + data_dir + ": " + ec.message());
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && !(errno == EEXIST && fs::is_directory(dir, ec)))
    return make_error("create data dir " + data_dir + ": " + std::strerror(errno));
  return {};
}

Daemon::Daemon(Config config, KubernetesSettings kubernetes)
    : config_(std::move(config)), kubernetes_(std::move(kubernetes)) {}

Daemon::~Daemon() { stop(); }

Result<void> Daemon::start() {
  if (!config_.db_in_memory || config_.tls_cert.empty()) {
    if (auto r = ensure_data_dir(config_.data_dir); !r) return r;
  }
  auto lock = lock_data_dir(config_.data_dir);
  if (!lock) return lock.error();
  lock_fd_ = *lock;

  DaemonHooks hooks;
  hooks.on_kernel_log_event = [this](std::string_view component) {
    if (scheduler_) scheduler_->trigger(component);
  };
  hooks.kernel_log_counters = [this] { return kernel_log_counters(); };
  if (auto r = make_node_conditions(); !r) return r;
  hooks.sinks = [this] {
    std::vector<components::SinkStatus> out;
    if (node_conditions_) out.push_back(node_conditions_->status());
    return out;
  };
  // Before the store opens: a node that ran GPUd has GPUd's file where gpud's store goes.
  auto gpud_state = find_gpud_state(config_.data_dir, !config_.db_in_memory);
  if (!gpud_state) return gpud_state.error();
  auto runtime = build_runtime(config_, RuntimeMode::kDaemon, std::move(hooks));
  if (!runtime) return runtime.error();
  runtime_ = std::move(*runtime);
  store::Database& db = *runtime_->db;
  db.set_on_failure([this] {
    {
      std::lock_guard lock(mu_);
      ++store_failures_;
    }
    cv_.notify_all();
  });
  MetricRegistry& metrics = runtime_->metrics;
  history_ = std::make_unique<store::MetricStore>(db);

  store::Metadata meta(db);
  // Before the components start: the os component then sees GPUd's reboots as recorded, and
  // GPUd's machine id comes before /etc/machine-id.
  if (*gpud_state)
    import_gpud_state_once(**gpud_state, *runtime_->events, meta, config_.events_retention);
  host::HostFs fs(config_.host_root);
  if (auto id = meta.get(store::kKeyMachineId); id && !id->has_value()) {
    auto mid = fs.read_line("/etc/machine-id");
    if (mid && !mid->empty()) (void)meta.set(store::kKeyMachineId, *mid);
  }

  // What set-healthy acknowledged before this start: the kernel ring, re-read when the log is
  // followed below, is judged against it, so an acknowledged fault is not a fault again.
  if (auto boot = fs.read_line("/proc/sys/kernel/random/boot_id"); boot && !boot->empty())
    runtime_->pipeline->set_boot_id(*boot);
  else
    logger("kmsg")->warn(
        "cannot read the boot id; acknowledgements are matched by wall-clock time only");
  if (auto marks = meta.kernel_log_watermarks(); marks) {
    for (auto& [component, w] : *marks) runtime_->pipeline->set_watermark(component, w);
  } else {
    logger("kmsg")->warn(
        "cannot read what set-healthy acknowledged ({}); acknowledged kernel-log "
        "faults may be reported again",
        marks.error().message);
  }

  if (auto r = register_custom_plugins(); !r) return r;
  for (Component* c : runtime_->registry.supported()) c->start();

  machine_info_ = host::collect_machine_info(fs);
  // Takes the first NVML snapshot when NVML answers in time, before the kernel log is followed:
  // the ring re-read then names each bus id's GPU (the pipeline's table is built from that
  // snapshot, never from a call to NVML), so a record re-read after a restart becomes the
  // identical row and is not stored twice. NVML opens and collects on threads of its own: a
  // driver whose init or calls hang delays this by kNvmlStartWait at most; the NVIDIA components
  // show Initializing ("not checked: NVML is not answering") until it answers, and the loop fills
  // machine info then (watch_nvidia).
  nvidia_expected_ = runtime_->nvidia_pci_present || config_.gpu_count > 0;
  nvml::NvidiaSource& nvidia = *runtime_->nvidia;
  nvidia.set_answer_wait(kNvmlAnswerWait);
  nvidia.set_on_answer([this] {
    {
      std::lock_guard lock(mu_);
      nvidia_answered_ = true;
    }
    cv_.notify_all();
  });
  const auto nvml_until = std::chrono::steady_clock::now() + kNvmlStartWait;
  nvidia.wait_opened(kNvmlStartWait);
  if (nvidia.status() == nvml::NvmlStatus::kReady) {
    nvml_seen_ready_ = true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        nvml_until - std::chrono::steady_clock::now());
    if (left.count() > 0) (void)nvidia.snapshot_within(left);
  }
  nvidia_ready_ = nvidia.fill_machine_info(machine_info_, /*collect=*/false);
  machine_info_at_ = Clock::now();
  refresh_bus_identities(Clock::now());

  metrics.describe("gpud_sqlite_db_size_bytes", "Size of the state database (gpud.state) in bytes");
  metrics.describe(components::kGpuHealthMetric,
                   "Health of each NVIDIA GPU, the worst any component gives it: 1 for its current "
                   "health value (Healthy, Degraded, Unhealthy, Initializing), 0 for the others");
  metrics.describe(components::kGpuHealthCauseMetric,
                   "Why an NVIDIA GPU is not Healthy: 1 per cause, with the component, its health, "
                   "suggested action and reason; none for a Healthy GPU");
  scheduler_ = std::make_unique<Scheduler>(runtime_->registry, 2, &metrics);
  if (auto r = run_init_plugins(); !r) return r;
  // The container runtimes are listed first, and the kernel log is followed once they are (or
  // kFirstChecksWait passed): a GPU process, and the Xid line of a process the ring still holds,
  // are then traced to their pod from the start, not one check later.
  scheduler_->start(components::checked_first(), kFirstChecksWait);
  scheduler_->wait_first_checks(kFirstChecksWait);
  start_kernel_log();
  // Its set-up calls queue behind a stuck call on the NVML worker for the whole deadline: it
  // starts once NVML has answered a collection (here, or later from the loop).
  if (nvidia_ready_) maybe_start_xid_watcher();

  server::ServerDeps deps;
  deps.config = &config_;
  deps.registry = &runtime_->registry;
  deps.scheduler = scheduler_.get();
  deps.events = runtime_->events.get();
  deps.history = history_.get();
  deps.metrics = &metrics;
  deps.machine_info = [this] { return machine_info(); };
  deps.gpus = [this] { return components::to_json(gpu_health(components::GpuValues::kWith)); };
  deps.before_metrics = [this] {
    components::publish_gpu_health(runtime_->metrics, gpu_health(components::GpuValues::kWithout));
  };
  deps.web_enable = config_.web_enable;
  deps.plugins = [this] { return plugins::registered_specs(runtime_->registry); };
  deps.acknowledge_kernel_log = [this](std::string_view component,
                                       const Acknowledgement& ack) -> Result<void> {
    KernelLogWatermark w = runtime_->pipeline->watermark_now(ack);
    runtime_->pipeline->set_watermark(std::string(component), w);
    store::Metadata meta(*runtime_->db);
    if (auto r = meta.set_kernel_log_watermark(std::string(component), w); !r)
      return make_error("acknowledged, but not kept across a restart: " + r.error().message);
    return {};
  };
  deps.inject_fault = [path =
                           config_.kmsg_path](const nlohmann::json& body) -> Result<std::string> {
    auto fault = kmsg::parse_fault_request(body);
    if (!fault) return make_error(fault.error().message, 400);
    return kmsg::inject_fault(*fault, path);
  };
  server_ = std::make_unique<server::Server>(deps);
  if (auto r = server_->start(); !r) {
    scheduler_->stop();
    return r.error();
  }
  if (!config_.metrics_listen_address.empty()) {
    metrics_listener_ = std::make_unique<server::MetricsListener>(metrics, deps.before_metrics);
    if (auto r = metrics_listener_->start(config_.metrics_listen_address); !r) {
      server_->stop();
      scheduler_->stop();
      return r.error();
    }
  }

  loop_thread_ = std::thread([this] { loop(); });
  if (node_conditions_) node_conditions_->start();
  logger("daemon")->info("gpud serving {} components on {} ({})",
                         runtime_->registry.supported().size(), config_.listen_address,
                         config_.no_tls ? "http" : "https");
  return {};
}

Result<void> Daemon::register_custom_plugins() {
  const std::string& path = config_.plugin_specs_file;
  if (path.empty()) return {};
  auto specs = plugins::load_specs_file(path, !config_.plugin_specs_file_given);
  if (!specs) return make_error("custom plugins: " + specs.error().message);
  if (specs->empty()) return {};
  ComponentContext ctx;
  ctx.config = &config_;
  ctx.events = runtime_->events.get();
  ctx.metrics = &runtime_->metrics;
  plugins::ScriptOptions script;
  // The scripts get the daemon's PATH (systemd's default under the service) and nothing else of
  // its environment.
  if (const char* p = std::getenv("PATH"); p != nullptr) script.path = p;
  script.host_root = config_.host_root;
  if (auto r = plugins::register_plugins(runtime_->registry, ctx, *specs, script); !r)
    return make_error("custom plugins: " + r.error().message);
  init_plugins_.clear();
  for (const plugins::Spec& s : *specs)
    if (s.type == plugins::PluginType::kInit) init_plugins_.push_back(s.component_name);
  logger("plugins")->info("{} custom plugins from {}", specs->size(), path);
  return {};
}

Result<void> Daemon::run_init_plugins() {
  // In the order the file lists them, before the API serves: the daemon becomes ready only when
  // every init plugin is Healthy (GPUd does the same).
  for (const std::string& name : init_plugins_) {
    Component* c = runtime_->registry.find(name);
    if (c == nullptr) continue;
    CheckResult r = scheduler_->run_now(*c);
    if (r.health() != Health::kHealthy)
      return make_error("init plugin " + name + " is " + std::string(to_string(r.health())) + ": " +
                        r.summary());
    logger("plugins")->info("init plugin {} ran: {}", name, r.summary());
  }
  return {};
}

void Daemon::refresh_bus_identities(TimePoint now) {
  // Reads NVML's last good snapshot, never NVML: this runs on the daemon's loop, which a hung
  // driver must not hold.
  auto snapshot = runtime_->nvidia->last_good_snapshot();
  const bool rescan = now - sysfs_nvidia_devices_at_ >= kSysfsDevicesRescan;
  if (!rescan && snapshot == bus_identities_snapshot_) return;
  if (rescan) {
    sysfs_nvidia_devices_ = host::find_nvidia_devices(host::HostFs(config_.host_root));
    sysfs_nvidia_devices_at_ = now;
  }
  bus_identities_snapshot_ = snapshot;
  kmsg::BusIdentityTable table = bus_identity_table(snapshot.get(), sysfs_nvidia_devices_);
  if (table == bus_identities_) return;
  bus_identities_ = table;
  runtime_->pipeline->set_bus_identities(std::move(table));
}

void Daemon::start_kernel_log() {
  std::lock_guard lock(kernel_log_mu_);
  kmsg::KmsgFollower::Options opts;
  opts.path = config_.kmsg_path;
  // /proc/stat's btime is stable across restarts (the monotonic estimate jitters), so a record
  // re-read after a restart gets the same second and the store ignores it.
  if (auto boot = host::read_boot_time(host::HostFs(config_.host_root)); boot)
    opts.parse.boot_time = *boot;
  else
    opts.parse.boot_time = kmsg::estimate_boot_time();
  follower_ = std::make_unique<kmsg::KmsgFollower>(opts, [this](const kmsg::KmsgRecord& r) {
    // /dev/kmsg stamps every record; a followed file's line without a stamp (the "<3>msg" a
    // test writes) happened when it arrived, which is then a time the daemon knows.
    const TimePoint now = Clock::now();
    runtime_->pipeline->feed_message(r.message, r.time.value_or(now), now, r.boot_offset_us);
  });
  if (auto r = follower_->start(); !r) {
    logger("kmsg")->warn("kernel log not followed ({}); kernel-log components see no new events",
                         r.error().message);
    kernel_log_error_ = opts.path + ": " + r.error().message;
    follower_.reset();
    return;
  }
  // "inotify" or "poll": a new record is read when it arrives; "timer": every idle_poll.
  logger("kmsg")->info("following {} (woken by {})", opts.path, follower_->wake_source());
}

components::KernelLogCounters Daemon::kernel_log_counters() {
  std::lock_guard lock(kernel_log_mu_);
  components::KernelLogCounters c;
  if (!follower_) {
    c.error = kernel_log_error_.empty() ? "not started" : kernel_log_error_;
    return c;
  }
  c.followed = true;
  c.records = follower_->records();
  c.overruns = follower_->overruns();
  c.read_errors = follower_->errors();
  c.foreign_records = follower_->foreign_records();
  c.record_errors = follower_->record_errors();
  c.parse_errors = runtime_->pipeline->parse_errors();
  return c;
}

void Daemon::maybe_start_xid_watcher() {
  if (xid_watcher_ || !runtime_) return;
  nvml::Nvml* nvml = runtime_->nvidia->ready_nvml();
  if (nvml == nullptr) return;
  auto w = nvml::XidWatcher::start(*nvml, [this](const nvml::XidEvent& e) {
    runtime_->pipeline->dispatch(
        components::nvml_xid_match(static_cast<int>(e.xid), e.pci_bus_id, e.uuid),
        e.time == TimePoint{} ? Clock::now() : e.time);
  });
  if (!w) {
    logger("nvml")->warn("Xid event watcher not started: {}", w.error().message);
    return;
  }
  xid_watcher_ = std::move(*w);
  logger("nvml")->info("watching Xid events");
}

nlohmann::json Daemon::machine_info() {
  std::lock_guard lock(mu_);
  return machine_info_;
}

std::vector<HealthState> Daemon::latest_states() const {
  std::vector<HealthState> states;
  if (!scheduler_) return states;
  for (Component* c : runtime_->registry.supported()) {
    auto s = scheduler_->last_states(*c);
    states.insert(states.end(), std::make_move_iterator(s.begin()),
                  std::make_move_iterator(s.end()));
  }
  return states;
}

std::vector<components::GpuHealth> Daemon::gpu_health(components::GpuValues values) const {
  auto identity = runtime_->nvidia->last_good_snapshot();
  if (!identity || !scheduler_) return {};
  std::vector<components::GpuHealth> gpus;
  scheduler_->read_last_states(runtime_->registry.supported(),
                               [&](const std::vector<const HealthState*>& states) {
                                 gpus = components::gpu_health(*identity, states, values);
                               });
  return gpus;
}

Result<void> Daemon::make_node_conditions() {
  const KubernetesSettings& k = kubernetes_;
  if (!k.node_conditions) return {};
  auto conn = kubernetes_connection(k);
  if (!conn) return make_error("--kubernetes-node-conditions: " + conn.error().message);
  const std::string where = conn->where, server = conn->server;
  auto api = sinks::KubernetesApi::create(std::move(*conn), k.api_timeout);
  if (!api)
    return make_error("--kubernetes-node-conditions: " + where + ": " + api.error().message);
  sinks::NodeConditionsOptions o;
  o.node_name = k.node_name;
  o.event_namespace = k.event_namespace;
  o.poll_interval = k.poll_interval;
  o.min_write_interval = k.min_write_interval;
  o.resync_interval = k.resync_interval;
  o.max_backoff = std::max(k.max_backoff, o.initial_backoff);
  // Reads caches only: the findings /v1/gpus serves and the components' last states.
  node_conditions_ = std::make_unique<sinks::KubernetesNodeConditions>(std::move(*api), o, [this] {
    sinks::NodeHealthInputs in;
    in.states = latest_states();
    if (auto identity = runtime_->nvidia->last_good_snapshot())
      in.gpus = components::gpu_health(*identity, in.states, components::GpuValues::kWithout);
    return in;
  });
  logger("kubernetes")
      ->info("keeping node {}'s conditions through {} ({})", o.node_name, server, where);
  return {};
}

void Daemon::watch_nvidia() {
  nvml::NvidiaSource& nvidia = *runtime_->nvidia;
  bool answered = false;
  {
    std::lock_guard lock(mu_);
    answered = std::exchange(nvidia_answered_, false);
  }
  // The NVIDIA checks told "not answering" (and the Xid check, which names the GPU's product) judge
  // again now that a collection ended, well or with the hang's error.
  if (answered)
    for (Component* c : runtime_->registry.supported()) {
      const auto tags = c->tags();
      if (std::find(tags.begin(), tags.end(), "nvidia") != tags.end())
        scheduler_->trigger(c->name());
    }
  if (nvidia.opening()) return;
  // A driver missing or failing at start is tried again, often where GPUs are expected; a node
  // whose driver loads later recovers on its own.
  if (nvidia.status() != nvml::NvmlStatus::kReady)
    nvidia.maybe_reload(nvidia_expected_ ? kNvmlRetryExpected : kNvmlRetry);
  if (nvidia.status() != nvml::NvmlStatus::kReady) return;
  if (!nvml_seen_ready_) {  // initialised after start: every component is checked again
    nvml_seen_ready_ = true;
    for (Component* c : runtime_->registry.supported()) scheduler_->trigger(c->name());
  }
  if (nvidia_ready_) return;
  // Machine info and the Xid watcher wait for NVML's first answer; machine info is read from the
  // last good snapshot (never a collection on this thread).
  auto info = host::collect_machine_info(host::HostFs(config_.host_root));
  if (!nvidia.fill_machine_info(info, /*collect=*/false)) return;
  nvidia_ready_ = true;
  {
    std::lock_guard lock(mu_);
    machine_info_ = std::move(info);
  }
  maybe_start_xid_watcher();
}

void Daemon::housekeeping(TimePoint now) {
  int64_t now_ms = to_unix_ms(now);
  MetricRegistry& metrics = runtime_->metrics;
  metrics.set("", "gpud_sqlite_db_size_bytes",
              static_cast<double>(runtime_->db->size_bytes().value_or(0)));
  // A few families at a time (MetricRegistry::snapshot_in_chunks): one failure is logged, and the
  // other chunks are still tried (the store says itself when it is unusable).
  std::optional<std::string> insert_failed;
  metrics.snapshot_in_chunks(now_ms, kHistoryChunkSamples,
                             [&](const std::vector<MetricSample>& chunk) {
                               if (auto r = history_->insert(chunk); !r && !insert_failed)
                                 insert_failed = r.error().message;
                             });
  if (insert_failed) logger("daemon")->warn("metric history insert failed: {}", *insert_failed);
  if (auto r = history_->purge(saturating_sub(now, config_.metrics_retention)); !r)
    logger("daemon")->warn("metric history purge failed: {}", r.error().message);
  // Event retention is enforced for every component, at most every retention/5 and at least every
  // minute.
  auto period =
      std::max<std::chrono::seconds>(std::chrono::seconds(60), config_.events_retention / 5);
  if (now - last_retention_ >= period) {
    last_retention_ = now;
    auto r = runtime_->events->enforce_retention(config_.events_retention, now);
    if (!r)
      logger("daemon")->warn("event retention failed: {}", r.error().message);
    else if (*r > 0)
      logger("daemon")->info("purged {} events older than {}", *r,
                             format_duration(config_.events_retention));
  }
}

void Daemon::loop() {
  std::unique_lock lock(mu_);
  // The first sample comes soon after start so the history is not empty for a whole interval.
  auto next = std::chrono::steady_clock::now() +
              std::min<std::chrono::steady_clock::duration>(config_.metrics_sample_interval,
                                                            std::chrono::seconds(10));
  bool store_usable = runtime_->db->health().usable;
  bool poll = true;  // something to look at every kStoreRetryInterval (see below)
  // The failures the loop has seen the effect of: a failure of its own retry does not wake it
  // again.
  uint64_t failures_seen = store_failures_;
  while (!stopping_) {
    // Events waiting for the store are retried every few seconds, so that they are stored soon
    // after space comes back, not at the next sample only; so is NVML looked at while it opens, is
    // missing (maybe_reload) or has not answered a first collection. Otherwise nothing here needs
    // a timer: a failed store operation (events start to wait) and NVML answering wake the loop.
    auto wake =
        poll ? std::min(next, std::chrono::steady_clock::now() + kStoreRetryInterval) : next;
    cv_.wait_until(lock, wake, [&] {
      return stopping_ || nvidia_answered_ || store_failures_ != failures_seen;
    });
    if (stopping_) break;
    lock.unlock();
    const bool usable_before_retry = runtime_->db->health().usable;
    runtime_->events->retry();
    // A store usable again: the components that could not read their history judge again now,
    // not at their next interval.
    const bool usable = runtime_->db->health().usable;
    if (usable && !(store_usable && usable_before_retry) && scheduler_)
      for (Component* c : runtime_->registry.supported()) scheduler_->trigger(c->name());
    store_usable = usable;
    watch_nvidia();
    refresh_bus_identities(Clock::now());
    if (std::chrono::steady_clock::now() >= next) {
      next = std::chrono::steady_clock::now() + config_.metrics_sample_interval;
      // The GPUs' health gauges are refreshed for every scrape (before_metrics) and here for the
      // history sample.
      components::publish_gpu_health(runtime_->metrics,
                                     gpu_health(components::GpuValues::kWithout));
      housekeeping(Clock::now());
    }
    // Read after noting the failures so far: one after this note wakes the loop; one before it (its
    // own retry's included) left the backlog or the store's health that `poll` reads.
    lock.lock();
    failures_seen = store_failures_;
    lock.unlock();
    nvml::NvidiaSource& nvidia = *runtime_->nvidia;
    poll = runtime_->events->backlog_size() > 0 || !runtime_->db->health().usable ||
           nvidia.opening() || nvidia.status() != nvml::NvmlStatus::kReady || !nvidia_ready_;
    lock.lock();
  }
}

void Daemon::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  // NVML's collection thread calls it: not after this.
  if (runtime_) runtime_->nvidia->set_on_answer(nullptr);
  if (loop_thread_.joinable()) loop_thread_.join();
  if (node_conditions_) node_conditions_->stop();
  // A plugin's script may run for minutes (its timeout); the API's workers and the scheduler's
  // wait for the checks they run, so those are cut short first.
  if (runtime_)
    for (Component* c : runtime_->registry.all())
      if (auto* p = dynamic_cast<plugins::PluginComponent*>(c); p != nullptr) p->cancel_runs();
  if (metrics_listener_) metrics_listener_->stop();
  if (server_) server_->stop();
  if (xid_watcher_) xid_watcher_->stop();
  if (follower_) follower_->stop();
  if (scheduler_) scheduler_->stop();
  if (runtime_) {
    // A last try: what still waits for the store is lost with this process.
    if (size_t left = runtime_->events->retry(); left > 0)
      logger("store")->error("{} events could not be stored and are lost: {}", left,
                             runtime_->db->health().last_error);
    runtime_->db->set_on_failure(nullptr);  // it wakes a loop that has ended
  }
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
}

int Daemon::port() const { return server_ ? server_->port() : 0; }

}  // namespace gpud::app
