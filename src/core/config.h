// Config: every setting of the daemon and of `gpud scan`, filled by the CLI and read by components.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/reboot_rules.h"

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
  std::vector<std::string> tls_sans;  // --tls-san: more names the generated certificate covers
  // The program that reads, checks or generates the TLS certificate in a child process, as
  // `<it> tls-material ...`: gpud's own binary, so the daemon parses no certificate until a TLS
  // connection comes (server/tls.h). "": in this process.
  std::string tls_helper;
  std::string metrics_listen_address;  // --metrics-listen-address: plain-HTTP /metrics; "" = off
  // Lets any client make mutating requests (Authorization: Bearer). From --admin-token-file or
  // $GPUD_ADMIN_TOKEN, never argv (every user can read /proc/<pid>/cmdline). Empty: none.
  std::string admin_token;
  // The Unix socket local clients (root's CLI) use; "" for none. The CLI resolves the default,
  // <data-dir>/run/gpud.sock.
  std::string api_socket;
  // Requests to the TCP API from a peer that is not loopback must carry the admin token, reads
  // included (/healthz excepted); off by default, as GPUd's clients read without one.
  bool api_remote_reads_need_token = false;
  bool enable_fault_injection = false;  // POST /inject-fault answers 403 unless set
  // accelerator-nvidia-processes serves each GPU process's command line (redacted) besides its
  // name and pid. Off by default: command lines carry the jobs' secrets.
  bool serve_process_cmdlines = false;

  // Retention
  std::chrono::seconds events_retention{std::chrono::hours(24 * 14)};
  std::chrono::seconds metrics_retention{std::chrono::hours(3)};
  std::chrono::seconds metrics_sample_interval{std::chrono::minutes(1)};

  // Components
  std::vector<std::string> components;  // allow-list; "-name" excludes; empty/"*"/"all": everything
  std::vector<std::string> mount_points;  // disk: extra mount points to track besides "/"
  // nfs: --nfs-checker-configs, the volumes the NFS probe writes to and reads back (GPUd's groups).
  struct NfsChecker {
    std::string volume_path;    // an NFS mount (or a directory on one), under the host root
    std::string dir_name;       // the probe's directory in it, shared by the group's members
    std::string file_contents;  // what each member writes and expects in the others' files
  };
  std::vector<NfsChecker> nfs_checkers;
  // --nfs-host-root: the root the NFS probe's volume paths are under ("": host_root), e.g.
  // /proc/1/root in a privileged hostPID container (GPUd's flag).
  std::string nfs_host_root;
  // os: consecutive checks a process must stay in D state to be flagged (0: 5, and 1 in scan).
  int os_blocked_process_persistence = 0;
  // os: RE2 patterns of D-state process names that mean a hung driver (unset: ^nvidia).
  std::optional<std::vector<std::string>> os_blocked_process_name_regexes;
  std::vector<std::string> kernel_modules;  // kernel-module: modules that must be loaded
  std::vector<std::string> files;           // file: files that must exist
  // systemd: units to watch; empty: gpud's own and, where installed, the default set.
  std::vector<std::string> systemd_units;
  // network-latency: host:port targets (none: not applicable) and the Degraded threshold.
  std::vector<std::string> network_latency_targets;
  std::chrono::milliseconds network_latency_threshold{7000};
  // Where commands are looked up (the daemon's $PATH, as app/ read it), and the commands the
  // systemd and tailscale components run: names (looked up there) or paths; tests point them at
  // scripts that print recorded output.
  std::string executable_search_path =
      "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::string systemctl_command = "systemctl";
  std::string tailscale_command = "tailscale";
  std::string tailscaled_command = "tailscaled";
  // docker: the Engine API socket (--docker-socket), and the programs whose presence on the search
  // path means docker is installed.
  std::string docker_socket = "/var/run/docker.sock";
  std::string docker_command = "docker";
  std::string dockerd_command = "dockerd";
  // containerd: the binary whose presence makes the component apply, and its CRI socket ("":
  // <host root>/run/containerd/containerd.sock; a path given is used as it is).
  std::string containerd_command = "containerd";
  std::string containerd_socket;
  // The program that makes the CRI calls (containerd, the kubelet's pod-resources) in a child
  // process, as `<it> cri-helper ...`: gpud's own binary, so the daemon never maps gRPC (about
  // 10 MiB resident). "": the cri module is loaded in this process.
  std::string cri_helper;
  std::string
      nvml_lib;  // libnvidia-ml.so.1 to load; empty: $GPUD_NVML_LIBRARY_PATH, else the system's
  // $GPUD_NVIDIA_DRIVER_ROOT as app/ read it: a root the driver is installed under (a path as gpud
  // sees it), where NVML and the library component look besides the host's own directories and
  // the GPU Operator's <host root>/run/nvidia/driver. "": not set.
  std::string nvidia_driver_root;
  // NVIDIA expectations
  int gpu_count = 0;  // accelerator-nvidia-gpu-counts: expected NVML GPU count (0: not checked)
  int threshold_celsius_slowdown_margin = 0;  // temperature: Degraded at this margin (0: off)
  // --nvlink-expected-link-states {"at_least_gpus_with_all_links_feature_enabled": N}; 0: unset.
  int nvlink_expected_gpus_all_links = 0;
  // accelerator-nvidia-infiniband. --infiniband-expected-port-states {"at_least_ports": N,
  // "at_least_rate": R}: at least N InfiniBand ports physically up at >= R Gb/s (0/0: unset).
  int infiniband_expected_ports = 0;
  int infiniband_expected_rate_gbps = 0;
  // accelerator-nvidia-fabric-manager. --fabric-manager-log-file ("": <host root>/var/log/
  // fabricmanager.log); --fabric-manager-training-grace: how long after boot, or after the fabric
  // manager started, a fabric still training ("In Progress") is Initializing, not Unhealthy.
  std::string fabric_manager_log_file;
  std::chrono::seconds fabric_manager_training_grace{std::chrono::minutes(5)};
  std::string infiniband_class_root_dir;                 // "": <host root>/sys/class/infiniband
  std::vector<std::string> infiniband_excluded_devices;  // "mlx5_0": not read at all
  // Hidden (tests): the check interval and how long a port stays down before it is a drop.
  std::chrono::seconds infiniband_check_interval{30};
  std::chrono::seconds infiniband_drop_window{std::chrono::minutes(4)};
  // --infiniband-flap-auto-clear-window (GPUd's): 0, flaps stay until set-healthy; above 0, a flap
  // clears once its port has been up this long.
  std::chrono::seconds infiniband_flap_auto_clear_window{0};
  // kubelet: its read-only HTTP port (off by default, as on current clusters) and its
  // authenticated HTTPS port on 127.0.0.1 (0: not asked), the bearer token's file for the latter
  // ("": the service-account token) and the CA its certificate must verify against ("": the
  // service-account CA, the kubelet's self-signed certificate, kubeadm's cluster CA).
  int kubelet_read_only_port = 0;
  int kubelet_port = 10250;
  std::string kubelet_token_file;
  std::string kubelet_ca_file;
  // Hidden: the NVIDIA components' check interval (tests use 1s) and the per-NVML-call deadline.
  std::chrono::seconds nvidia_check_interval{60};
  std::chrono::milliseconds nvml_call_timeout{10'000};

  // kernel log
  // Reboots after which a repeated Xid / SXid needs inspection: --xid-reboot-threshold as the
  // default of both, with per-code overrides from --xid-thresholds / --sxid-thresholds, parsed once
  // by app/ (finalize) over these defaults. Xid 94 (a contained ECC error) recurs by design: 1000.
  RebootThresholds xid_thresholds{kDefaultRebootThreshold, {{94, 1000}}};
  RebootThresholds sxid_thresholds{kDefaultRebootThreshold, {}};
  std::chrono::seconds xid_lookback{0};   // 0: the events retention
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
