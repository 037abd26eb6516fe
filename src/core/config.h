// Config: every setting of the daemon and of `gpud scan`, filled by the CLI and read by components.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gpud {

struct Config {
  // Paths
  std::string data_dir;  // resolved by the CLI (default /var/lib/gpud as root, ~/.gpud otherwise)
  bool db_in_memory = false;
  std::string host_root = "/";  // prefix for every /proc, /sys and /etc read
  // The kernel log to follow, scan and inject into: /dev/kmsg, or $GPUD_KMSG_PATH (tests), as
  // app/ resolved it.
  std::string kmsg_path = "/dev/kmsg";

  // API
  std::string listen_address = "0.0.0.0:15132";
  bool no_tls = false;
  std::string tls_cert;  // empty: self-signed, generated into the data dir
  std::string tls_key;
  std::vector<std::string> tls_sans;   // --tls-san: more names the generated certificate covers
  std::string metrics_listen_address;  // --metrics-listen-address: plain-HTTP /metrics; "" = off
  // Lets any client make mutating requests (Authorization: Bearer). From --admin-token-file or
  // $GPUD_ADMIN_TOKEN, never argv (every user can read /proc/<pid>/cmdline). Empty: none.
  std::string admin_token;
  // The Unix socket local clients (root's CLI) use; "" for none. The CLI resolves the default,
  // <data-dir>/run/gpud.sock.
  std::string api_socket;
  bool enable_fault_injection = false;  // POST /inject-fault answers 403 unless set

  // Retention
  std::chrono::seconds events_retention{std::chrono::hours(24 * 14)};
  std::chrono::seconds metrics_retention{std::chrono::hours(3)};
  std::chrono::seconds metrics_sample_interval{std::chrono::minutes(1)};

  // Components
  std::vector<std::string> components;  // allow-list; "-name" excludes; empty/"*"/"all": everything
  std::vector<std::string> mount_points;    // disk: extra mount points to track besides "/"
  std::vector<std::string> kernel_modules;  // kernel-module: modules that must be loaded
  std::vector<std::string> files;           // file: files that must exist
  std::string
      nvml_lib;  // libnvidia-ml.so.1 to load; empty: $GPUD_NVML_LIBRARY_PATH, else the system's
  // NVIDIA expectations
  int gpu_count = 0;  // accelerator-nvidia-gpu-counts: expected NVML GPU count (0: not checked)
  int threshold_celsius_slowdown_margin = 0;  // temperature: Degraded at this margin (0: off)
  // --nvlink-expected-link-states {"at_least_gpus_with_all_links_feature_enabled": N}; 0: unset.
  int nvlink_expected_gpus_all_links = 0;
  // Hidden: the NVIDIA components' check interval (tests use 1s) and the per-NVML-call deadline.
  std::chrono::seconds nvidia_check_interval{60};
  std::chrono::milliseconds nvml_call_timeout{10'000};

  // kernel log
  int xid_reboot_threshold = 2;          // reboots after which a repeated Xid/SXid needs inspection
  std::string xid_thresholds;            // JSON {"overrides":{"94":{"rebootThreshold":1000}}}
  std::string sxid_thresholds;           // same shape, for SXid codes
  std::chrono::seconds xid_lookback{0};  // 0: the events retention
  std::chrono::seconds sxid_lookback{0};  // 0: the events retention
  std::vector<std::string> kernel_logs;   // scan --kernel-log FILE ("-": stdin)

  // Custom plugins (--plugin-specs-file): the YAML specs, "" for none. The default path may be
  // missing (no plugins); a path given explicitly (flag or --config file) must exist.
  std::string plugin_specs_file = "/etc/default/gpud.plugins.yaml";
  bool plugin_specs_file_given = false;

  // Logging
  std::string log_level = "info";
  std::string log_file;           // empty: stderr
  int log_file_max_size_mb = 64;  // --log-file rotates at this size
  int log_file_max_files = 5;     // rotated files kept besides the current one
  bool web_enable = true;         // the local web UI at / on the API listener
};

}  // namespace gpud
