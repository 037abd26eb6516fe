#include "app/options.h"

#include <fcntl.h>
#include <re2/re2.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>
#include <type_traits>

#include "components/registry.h"
#include "core/reboot_rules.h"
#include "core/time_util.h"
#include "host/nfs_probe.h"
#include "host/tcp_connect.h"

namespace gpud::app {

std::string default_data_dir() {
  if (::geteuid() == 0 && std::filesystem::is_directory("/var/lib")) return "/var/lib/gpud";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : "/tmp") + "/.gpud";
}

std::string default_api_socket(const std::string& data_dir) { return data_dir + "/run/gpud.sock"; }

std::string kmsg_path_from_environment() {
  const char* p = std::getenv("GPUD_KMSG_PATH");
  return p != nullptr && *p != '\0' ? p : "/dev/kmsg";
}

std::string nvml_library_from_environment(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* p = std::getenv("GPUD_NVML_LIBRARY_PATH");
  return p != nullptr ? p : "";
}

Result<void> check_admin_token(std::string_view token) {
  constexpr size_t kMinLength = 16;
  if (token.size() < kMinLength)
    return make_error("the admin token must have at least " + std::to_string(kMinLength) +
                      " characters (e.g. `openssl rand -hex 32`)");
  for (char ch : token) {
    auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\'' || c == '\\' || c == '$' || c == '`')
      return make_error(
          "the admin token may only hold printable ASCII without spaces, quotes, '\\', '$' or "
          "'`'");
  }
  return {};
}

Result<std::string> read_admin_token_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return make_error("cannot read --admin-token-file " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("--admin-token-file " + path + " is not a regular file");
  }
  if ((st.st_mode & 0007) != 0) {
    ::close(fd);
    return make_error("--admin-token-file " + path +
                      " is open to other users; chmod 600 it (or 640 with a trusted group)");
  }
  std::string text;
  char buf[4096];
  ssize_t n;
  while (text.size() < 64 * 1024 && (n = ::read(fd, buf, sizeof buf)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return make_error("cannot read --admin-token-file " + path + ": " + std::strerror(err));
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  text.erase(0, start);
  if (auto r = check_admin_token(text); !r)
    return make_error("--admin-token-file " + path + ": " + r.error().message);
  return text;
}

Result<std::string> resolve_admin_token(const std::string& token_file, const char* env_value) {
  bool from_env = env_value != nullptr && *env_value != '\0';
  if (from_env && !token_file.empty())
    return make_error(std::string("both --admin-token-file and ") + kAdminTokenEnv +
                      " are set; give the admin token one way");
  if (!token_file.empty()) return read_admin_token_file(token_file);
  if (!from_env) return std::string();
  if (auto r = check_admin_token(env_value); !r)
    return make_error(std::string(kAdminTokenEnv) + ": " + r.error().message);
  return std::string(env_value);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

void add_component_flags(CLI::App& cmd, RunFlags& f) {
  cmd.add_option("--components", f.components,
                 "Comma-separated components to enable (default all); '-name' excludes one");
  cmd.add_option("--host-root", f.config.host_root,
                 "Prefix for every /proc, /sys and /etc read (e.g. /host in a container)")
      ->capture_default_str();
  cmd.add_option("--mount-points", f.mount_points,
                 "Comma-separated mount points the disk component tracks besides /");
  cmd.add_option("--nfs-checker-configs", f.nfs_checker_configs,
                 "NFS volumes to probe, JSON '[{\"volume_path\":\"/mnt/nfs\",\"dir_name\":"
                 "\".gpud-nfs\",\"file_contents\":\"ok\"}]': each member writes, reads back and "
                 "removes <volume_path>/<dir_name>/<machine-id> and reads the others' files");
  cmd.add_option("--kernel-modules", f.kernel_modules,
                 "Comma-separated kernel modules that must be loaded (kernel-module component)");
  cmd.add_option("--files", f.files, "Comma-separated files that must exist (file component)");
  cmd.add_option("--docker-socket", f.config.docker_socket,
                 "The docker Engine API socket the docker component reads (not under --host-root)")
      ->capture_default_str();
  cmd.add_option("--systemd-units", f.systemd_units,
                 "Comma-separated systemd units the systemd component watches (default: gpud "
                 "and, where installed, containerd, docker, kubelet, nvidia-persistenced, "
                 "nvidia-fabricmanager, nvidia-dcgm)");
  cmd.add_option("--network-latency-targets", f.network_latency_targets,
                 "Comma-separated host:port targets whose TCP connect latency the "
                 "network-latency component measures (default none: not applicable)");
  cmd.add_option("--network-latency-threshold", f.network_latency_threshold,
                 "TCP connect latency above which network-latency is Degraded (Go duration)")
      ->capture_default_str();
  cmd.add_option("--containerd-socket", f.config.containerd_socket,
                 "containerd's CRI socket (default <host-root>/run/containerd/containerd.sock; a "
                 "path given is used as it is)");
  // The CRI calls run in a child, gpud's own binary (`gpud cri-helper`), so that the daemon never
  // maps gRPC. Hidden: "" loads the cri module in the daemon (the bench measures both).
  f.config.cri_helper = "/proc/self/exe";
  cmd.add_option("--cri-helper", f.config.cri_helper,
                 "The program run as `<it> cri-helper` for CRI calls (\"\": in this process)")
      ->group("");
  cmd.add_option("--kubelet-read-only-port", f.config.kubelet_read_only_port,
                 "The kubelet's read-only HTTP port on 127.0.0.1, asked first for the node's "
                 "pods where given (0: not asked; current clusters turn it off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd.add_option("--kubelet-port", f.config.kubelet_port,
                 "The kubelet's authenticated HTTPS port on 127.0.0.1, asked when the read-only "
                 "port gives no pods (0: not asked)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd.add_option("--kubelet-token-file", f.config.kubelet_token_file,
                 "Bearer token for the kubelet's authenticated port (default: the service-account "
                 "token /var/run/secrets/kubernetes.io/serviceaccount/token, as is or under "
                 "--host-root)");
  cmd.add_option("--kubelet-ca-file", f.config.kubelet_ca_file,
                 "PEM CA bundle the kubelet's serving certificate must verify against before the "
                 "token is sent (default: each of the service-account ca.crt, "
                 "/var/lib/kubelet/pki/kubelet.crt and /etc/kubernetes/pki/ca.crt under "
                 "--host-root that exists)");
  cmd.add_option("--nvml-lib", f.config.nvml_lib,
                 "libnvidia-ml.so.1 to load (default: $GPUD_NVML_LIBRARY_PATH, else the system's)");
  // NVIDIA: NVLink expectation, check interval and NVML call deadline
  cmd.add_option_function<std::string>(
      "--nvlink-expected-link-states",
      [&f](const std::string& s) {
        auto j = nlohmann::json::parse(s, nullptr, false);
        const char* key = "at_least_gpus_with_all_links_feature_enabled";
        if (!j.is_object() || (j.contains(key) && !j[key].is_number_integer()) ||
            j.value(key, 0) < 0)
          throw CLI::ValidationError("--nvlink-expected-link-states",
                                     "want JSON like {\"" + std::string(key) + "\":8}");
        f.config.nvlink_expected_gpus_all_links = j.value(key, 0);
      },
      "Expected NVLink states, e.g. '{\"at_least_gpus_with_all_links_feature_enabled\":8}'");
  auto duration_flag = [&cmd](const char* name, auto* out, std::chrono::milliseconds min) {
    cmd.add_option_function<std::string>(
           name,
           [name, out, min](const std::string& s) {
             auto d = parse_duration(s);
             if (!d || *d < min) throw CLI::ValidationError(name, "invalid duration \"" + s + "\"");
             *out = std::chrono::duration_cast<std::remove_pointer_t<decltype(out)>>(*d);
           })
        ->group("");  // hidden: for tests
  };
  duration_flag("--nvidia-check-interval", &f.config.nvidia_check_interval,
                std::chrono::seconds(1));
  duration_flag("--nvml-call-timeout", &f.config.nvml_call_timeout, std::chrono::milliseconds(10));
  // InfiniBand: expected ports, where to read them, which adapters to leave alone
  cmd.add_option_function<std::string>(
      "--infiniband-expected-port-states",
      [&f](const std::string& s) {
        auto j = nlohmann::json::parse(s, nullptr, false);
        auto field = [&j](const char* key) -> std::optional<int> {
          if (!j.contains(key)) return 0;
          if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0 ||
              j[key].get<int64_t>() > 1'000'000)
            return std::nullopt;
          return j[key].get<int>();
        };
        std::optional<int> ports, rate;
        if (j.is_object()) ports = field("at_least_ports"), rate = field("at_least_rate");
        if (!ports || !rate)
          throw CLI::ValidationError(
              "--infiniband-expected-port-states",
              "want JSON like {\"at_least_ports\":8,\"at_least_rate\":400} (non-negative "
              "integers, the rate in Gb/s)");
        f.config.infiniband_expected_ports = *ports;
        f.config.infiniband_expected_rate_gbps = *rate;
      },
      "Expected InfiniBand ports, e.g. '{\"at_least_ports\":8,\"at_least_rate\":400}': at "
      "least 8 ports physically up at >= 400 Gb/s (unset: the port count is not judged)");
  cmd.add_option("--infiniband-exclude-devices", f.infiniband_exclude_devices,
                 "Comma-separated InfiniBand devices not to read (e.g. mlx5_0 on a restricted PF)");
  cmd.add_option("--infiniband-class-root-dir", f.config.infiniband_class_root_dir,
                 "Where the InfiniBand devices are (default <host-root>/sys/class/infiniband)");
  cmd.add_option("--fabric-manager-log-file", f.config.fabric_manager_log_file,
                 "The fabric manager's log (default <host-root>/var/log/fabricmanager.log)");
  cmd.add_option_function<std::string>(
      "--fabric-manager-training-grace",
      [&f](const std::string& s) {
        auto d = parse_duration(s);
        if (!d || *d < std::chrono::seconds(0))
          throw CLI::ValidationError("--fabric-manager-training-grace",
                                     "invalid duration \"" + s + "\"");
        f.config.fabric_manager_training_grace =
            std::chrono::duration_cast<std::chrono::seconds>(*d);
      },
      "How long after boot or a fabric manager start a fabric still training is Initializing, "
      "not Unhealthy (Go duration, default 5m; 0: Unhealthy at once, as GPUd)");
  duration_flag("--infiniband-check-interval", &f.config.infiniband_check_interval,
                std::chrono::seconds(1));
  duration_flag("--infiniband-drop-window", &f.config.infiniband_drop_window,
                std::chrono::seconds(1));
  // NVIDIA expectations: GPU count and temperature margin
  cmd.add_option("--gpu-count", f.config.gpu_count,
                 "Expected number of NVIDIA GPUs; a different NVML count is Unhealthy (0: off)")
      ->check(CLI::NonNegativeNumber);
  auto& margin = f.config.threshold_celsius_slowdown_margin;
  cmd.add_option("--threshold-celsius-slowdown-margin", margin,
                 "Degraded when a GPU is this close (°C) to its slowdown temperature (0: off)")
      ->check(CLI::NonNegativeNumber);
  // kernel log
  cmd.add_option("--xid-reboot-threshold", f.xid_reboot_threshold,
                 "Reboots after which a repeated Xid/SXid escalates to HARDWARE_INSPECTION")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--xid-thresholds", f.xid_thresholds,
                 "Per-Xid reboot thresholds, JSON "
                 "'{\"overrides\":{\"94\":{\"rebootThreshold\":1000}}}' (94 -> 1000 by default)");
  cmd.add_option("--sxid-thresholds", f.sxid_thresholds,
                 "Per-SXid reboot thresholds, same JSON shape as --xid-thresholds");
  cmd.add_option("--os-blocked-process-persistence-threshold",
                 f.config.os_blocked_process_persistence,
                 "Consecutive checks a process must stay in D state before the os component flags "
                 "it (default 5; 1 in scan)")
      ->check(CLI::PositiveNumber);
  cmd.add_option_function<std::string>(
      "--os-blocked-process-name-regexes",
      [&f](const std::string& s) {
        std::vector<std::string> patterns = split_list(s);
        for (const auto& p : patterns)
          if (RE2 re(p, RE2::Quiet); !re.ok())
            throw CLI::ValidationError("--os-blocked-process-name-regexes",
                                       "invalid pattern \"" + p + "\": " + re.error());
        f.config.os_blocked_process_name_regexes = std::move(patterns);
      },
      "Comma-separated RE2 patterns: a process in D state that long whose name matches one "
      "makes os Unhealthy with REBOOT_SYSTEM (default ^nvidia; \"\": none escalates)");
  cmd.add_option("--xid-lookback-period", f.xid_lookback,
                 "How far back Xid events count (Go duration; default: the events retention)");
  cmd.add_option("--sxid-lookback-period", f.sxid_lookback,
                 "How far back SXid events count (Go duration; default: the events retention)");
}

void add_store_flags(CLI::App& cmd, RunFlags& f) {
  cmd.add_option("--data-dir", f.config.data_dir,
                 "State directory (default /var/lib/gpud as root, ~/.gpud otherwise)");
}

Result<void> finalize(RunFlags& f) {
  Config& c = f.config;
  if (c.data_dir.empty()) c.data_dir = default_data_dir();
  if (!f.api_socket_given) c.api_socket = default_api_socket(c.data_dir);
  // The environment is read here, in app/, and handed down; no library below reads it.
  c.kmsg_path = kmsg_path_from_environment();
  c.nvml_lib = nvml_library_from_environment(c.nvml_lib);
  if (const char* root = std::getenv("GPUD_NVIDIA_DRIVER_ROOT"); root != nullptr)
    c.nvidia_driver_root = root;
  auto ev = parse_duration(f.events_retention);
  if (!ev || ev->count() < 60'000)
    return make_error("invalid --events-retention-period \"" + f.events_retention +
                      "\": want a duration from 1m to " + std::string(kMaxDurationText) +
                      " such as 336h");
  c.events_retention = std::chrono::duration_cast<std::chrono::seconds>(*ev);
  auto mr = parse_duration(f.metrics_retention);
  if (!mr || mr->count() < 60'000)
    return make_error("invalid --metrics-retention-period \"" + f.metrics_retention +
                      "\": want a duration from 1m to " + std::string(kMaxDurationText) +
                      " such as 3h");
  c.metrics_retention = std::chrono::duration_cast<std::chrono::seconds>(*mr);

  c.components = split_list(f.components);
  auto known = components::known_names();
  for (const auto& raw : c.components) {
    std::string n = raw.front() == '-' ? raw.substr(1) : raw;
    if (n == "*" || n == "all" || n == "none") continue;  // GPUd's "none": no components
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return make_error("unknown component \"" + n + "\" in --components; known: " + list);
    }
  }
  // kernel log
  for (auto [text, out, flag] :
       {std::tuple{&f.xid_lookback, &c.xid_lookback, "--xid-lookback-period"},
        std::tuple{&f.sxid_lookback, &c.sxid_lookback, "--sxid-lookback-period"}}) {
    if (text->empty()) continue;
    auto d = parse_duration(*text);
    if (!d || d->count() < 1000)
      return make_error(std::string("invalid ") + flag + " \"" + *text +
                        "\": want a duration from 1s to " + std::string(kMaxDurationText) +
                        " such as 72h");
    *out = std::chrono::duration_cast<std::chrono::seconds>(*d);
  }
  if (f.xid_reboot_threshold < 1) return make_error("--xid-reboot-threshold must be at least 1");
  // Parsed here once, over Config's defaults; the components read the typed thresholds.
  for (auto [json, out, defaults, flag] :
       {std::tuple{&f.xid_thresholds, &c.xid_thresholds, Config{}.xid_thresholds,
                   "--xid-thresholds"},
        std::tuple{&f.sxid_thresholds, &c.sxid_thresholds, Config{}.sxid_thresholds,
                   "--sxid-thresholds"}}) {
    defaults.default_threshold = f.xid_reboot_threshold;
    auto t = parse_reboot_thresholds(*json, defaults);
    if (!t) return make_error(std::string(flag) + ": " + t.error().message);
    *out = std::move(*t);
  }
  c.infiniband_excluded_devices = split_list(f.infiniband_exclude_devices);
  c.mount_points = split_list(f.mount_points);
  if (!f.nfs_checker_configs.empty()) {
    auto nfs = host::parse_nfs_checker_configs(f.nfs_checker_configs);
    if (!nfs) return make_error("--nfs-checker-configs: " + nfs.error().message);
    c.nfs_checkers = std::move(*nfs);
  }
  c.kernel_modules = split_list(f.kernel_modules);
  c.files = split_list(f.files);
  c.systemd_units = split_list(f.systemd_units);
  for (const auto& u : c.systemd_units)
    if (u.find_first_of(" \t/") != std::string::npos || u.front() == '-')
      return make_error("invalid unit \"" + u + "\" in --systemd-units");
  c.network_latency_targets = split_list(f.network_latency_targets);
  for (const auto& t : c.network_latency_targets)
    if (auto parsed = host::parse_tcp_target(t); !parsed)
      return make_error("invalid --network-latency-targets: " + parsed.error().message);
  auto threshold = parse_duration(f.network_latency_threshold);
  if (!threshold || threshold->count() < 1 || *threshold > std::chrono::minutes(1))
    return make_error("invalid --network-latency-threshold \"" + f.network_latency_threshold +
                      "\": want a duration from 1ms to 1m such as 500ms");
  c.network_latency_threshold = *threshold;
  // Commands (systemctl, tailscale) are looked up where the shell that started gpud would.
  if (const char* path = std::getenv("PATH"); path != nullptr && *path != '\0')
    c.executable_search_path = path;
  if (c.host_root.empty()) c.host_root = "/";
  if (!std::filesystem::is_directory(c.host_root))
    return make_error("--host-root \"" + c.host_root + "\" is not a directory");
  return {};
}

Result<void> setup_logging(const std::string& level, const std::string& file) {
  LogOptions opts;
  opts.level = level;
  opts.file = file;
  return setup_logging(opts);
}

Result<void> setup_logging(const LogOptions& opts) {
  // GPUd's (zap's) levels above error are spdlog's critical.
  const bool zap_fatal = opts.level == "fatal" || opts.level == "panic" || opts.level == "dpanic";
  auto lvl = spdlog::level::from_str(zap_fatal ? "critical" : opts.level);
  if (lvl == spdlog::level::off && opts.level != "off")
    return make_error("invalid --log-level \"" + opts.level +
                      "\": want debug, info, warn or error");
  if (opts.max_size_bytes == 0) return make_error("--log-file-max-size-mb must be at least 1");
  if (opts.max_files == 0) return make_error("--log-file-max-files must be at least 1");
  std::shared_ptr<spdlog::logger> logger;
  try {
    if (opts.file.empty()) {
      // journald captures stderr under systemd; colors only when stderr is a terminal.
      logger = std::make_shared<spdlog::logger>(
          kDefaultLoggerName, std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    } else {
      // Size-based rotation: gpud.log -> gpud.1.log -> ... -> gpud.<max_files>.log, then dropped.
      logger = std::make_shared<spdlog::logger>(
          kDefaultLoggerName, std::make_shared<spdlog::sinks::rotating_file_sink_mt>(
                                  opts.file, opts.max_size_bytes, opts.max_files));
    }
  } catch (const spdlog::spdlog_ex& e) {
    return make_error("cannot open log file \"" + opts.file + "\": " + e.what());
  }
  logger->set_level(lvl);
  // %n: the logger's name, i.e. the component or subsystem that wrote the line (core/log.h).
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ [%n] %v");
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  // Named loggers made before this call hold the old sinks; drop them so gpud::logger() re-creates
  // them from the new default.
  std::vector<std::string> stale;
  spdlog::apply_all([&stale](const std::shared_ptr<spdlog::logger>& l) {
    if (l->name() != kDefaultLoggerName) stale.push_back(l->name());
  });
  for (const auto& name : stale) spdlog::drop(name);
  return {};
}

}  // namespace gpud::app
