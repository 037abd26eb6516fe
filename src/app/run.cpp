// `gpud run`: the daemon in the foreground until SIGINT/SIGTERM.
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "app/config_file.h"
#include "app/daemon.h"
#include "app/options.h"
#include "app/sd_notify.h"
#include "app/verbs.h"
#include "core/log.h"
#include "core/time_util.h"
#include "server/http_util.h"
#include "server/tls.h"

namespace gpud::app {

void add_run_options(CLI::App& command, RunFlags& run_flags, std::string& sample_interval) {
  auto* cmd = &command;
  auto* flags = &run_flags;
  auto* sample = &sample_interval;
  Config& c = flags->config;
  add_store_flags(*cmd, *flags);
  add_component_flags(*cmd, *flags);
  cmd->add_flag("--db-in-memory", c.db_in_memory, "Keep the state database in memory only");
  cmd->add_option("--listen-address", c.listen_address, "Address the API listens on")
      ->capture_default_str();
  cmd->add_flag("--no-tls", c.no_tls, "Serve plain HTTP instead of HTTPS");
  cmd->add_option("--tls-cert", c.tls_cert,
                  "PEM certificate (default: self-signed, in the data dir)");
  cmd->add_option("--tls-key", c.tls_key, "PEM private key for --tls-cert");
  cmd->add_option("--tls-san", c.tls_sans,
                  "Another DNS name or IP address the generated certificate covers (repeatable; "
                  "the host name and its addresses are always covered)");
  // The certificate is read, checked or generated in a child, gpud's own binary (`gpud
  // tls-material`), so that the daemon parses none until a TLS connection comes. Hidden: "" does
  // it in the daemon (the bench measures both).
  c.tls_helper = "/proc/self/exe";
  cmd->add_option("--tls-helper", c.tls_helper,
                  "The program run as `<it> tls-material` for the TLS certificate (\"\": in this "
                  "process)")
      ->group("");
  cmd->add_option(
      "--metrics-listen-address", c.metrics_listen_address,
      "Also serve GET /metrics alone over plain HTTP here (e.g. :9400); off by default");
  // Still parsed, so that the refusal can say where the token goes instead.
  cmd->add_option_function<std::string>(
         "--admin-token",
         [](const std::string&) {
           throw CLI::ValidationError("--admin-token", kAdminTokenArgvRefusal);
         },
         "Refused: use --admin-token-file or GPUD_ADMIN_TOKEN")
      ->group("");
  cmd->add_option("--admin-token-file", flags->admin_token_file,
                  "File with the bearer token that lets any client make mutating API calls "
                  "(or set GPUD_ADMIN_TOKEN); not readable by other users");
  cmd->add_option_function<std::string>(
      "--api-socket",
      [flags](const std::string& path) {
        flags->config.api_socket = path;
        flags->api_socket_given = true;
      },
      "Unix socket for local clients; only root and the daemon's user can connect, and they may "
      "make mutating calls (default <data-dir>/run/gpud.sock; \"\": none)");
  cmd->add_flag("--api-remote-reads-need-token", c.api_remote_reads_need_token,
                "Every request to the API from another host needs the admin token, reads included "
                "(/healthz excepted); GPUd's clients read without one");
  cmd->add_option_function<std::string>(
         "--plugin-specs-file",
         [flags](const std::string& path) {
           flags->config.plugin_specs_file = path;
           flags->config.plugin_specs_file_given = true;
         },
         "Custom plugin specs (YAML, docs/PLUGINS.md); a missing default file means no plugins, "
         "\"\" none")
      ->default_str(c.plugin_specs_file);
  cmd->add_flag("--enable-fault-injection", c.enable_fault_injection,
                "Serve POST /inject-fault (writes kernel-log lines; for testing)");
  cmd->add_flag("--serve-process-cmdlines", c.serve_process_cmdlines,
                "Serve the command lines of GPU processes in accelerator-nvidia-processes, with "
                "the values of secret-looking flags and variables redacted (off: name and pid "
                "only)");
  cmd->add_option("--web-enable", c.web_enable,
                  "Serve the local web UI at / on the API listener (--web-enable=false: off)")
      ->default_str("true");
  cmd->add_option("--events-retention-period", flags->events_retention,
                  "How long events are kept (Go duration)")
      ->capture_default_str();
  cmd->add_option("--metrics-retention-period,--retention-period", flags->metrics_retention,
                  "How long metric history is kept (Go duration; --retention-period is GPUd's "
                  "older name)")
      ->capture_default_str();
  cmd->add_option("--nfs-host-root", c.nfs_host_root,
                  "The root the NFS probe's volume paths are under (default: --host-root), e.g. "
                  "/proc/1/root in a privileged hostPID container");
  cmd->add_option_function<std::string>(
         "--infiniband-flap-auto-clear-window",
         [flags](const std::string& s) {
           auto d = parse_duration(s);
           if (!d || d->count() < 0)
             throw CLI::ValidationError("--infiniband-flap-auto-clear-window",
                                        "invalid duration \"" + s + "\"");
           flags->config.infiniband_flap_auto_clear_window =
               std::chrono::duration_cast<std::chrono::seconds>(*d);
         },
         "An InfiniBand port flap clears by itself once the port has been up this long (Go "
         "duration); 0: it stays until `gpud set-healthy`")
      ->default_str("0s");
  add_gpud_flags(*cmd, kGpudRun, flags->gpud_flags_given);
  cmd->add_option("--log-level,-l", c.log_level, "debug, info, warn or error")
      ->capture_default_str();
  cmd->add_option("--log-file", c.log_file, "Log to this file (size-rotated) instead of stderr");
  cmd->add_option("--log-file-max-size-mb", c.log_file_max_size_mb,
                  "Rotate --log-file when it reaches this many MiB")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--log-file-max-files", c.log_file_max_files,
                  "Rotated --log-file files kept besides the current one")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--metrics-sample-interval", *sample,
                  "How often metrics are sampled into history")
      ->group("");  // hidden: tests shorten it
  // Kubernetes node conditions (README "Run on Kubernetes").
  KubernetesSettings& k = flags->kubernetes;
  cmd->add_flag("--kubernetes-node-conditions", k.node_conditions,
                "Keep gpud's conditions (GpudGPUProblem, GpudKernelProblem, GpudRuntimeProblem) "
                "on this node's Kubernetes Node and record each change as an Event");
  cmd->add_option("--kubeconfig", k.kubeconfig,
                  "kubeconfig for --kubernetes-node-conditions outside a pod (default $KUBECONFIG; "
                  "in a pod: its service account)");
  cmd->add_option("--kubernetes-node-name", k.node_name,
                  "This node's Kubernetes name (default $NODE_NAME, which the DaemonSet sets)");
  cmd->add_option("--kubernetes-event-namespace", k.event_namespace,
                  "Namespace of the Events gpud writes about its Node")
      ->capture_default_str();
  cmd->add_option("--kubernetes-service-account-dir", k.service_account_dir)
      ->group("");  // hidden: tests
  for (auto [name, out] : {std::pair{"--kubernetes-poll-interval", &k.poll_interval},
                           std::pair{"--kubernetes-min-write-interval", &k.min_write_interval},
                           std::pair{"--kubernetes-resync-interval", &k.resync_interval},
                           std::pair{"--kubernetes-api-timeout", &k.api_timeout},
                           std::pair{"--kubernetes-max-backoff", &k.max_backoff}})
    cmd->add_option_function<std::string>(
           name,
           [name = std::string(name), out = out](const std::string& s) {
             auto d = parse_duration(s);
             if (!d || d->count() < 10)
               throw CLI::ValidationError(name, "invalid duration \"" + s + "\"");
             *out = *d;
           })
        ->group("");  // hidden: tests shorten them
}

RunCommandLine::RunCommandLine() { add_run_options(app, flags, sample); }

Result<void> RunCommandLine::parse(const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return make_error(std::string("not a valid `gpud run` flag list: ") + e.what());
  }
  return {};
}

Result<void> validate_run_flags(RunFlags& flags, const std::string& sample) {
  if (auto r = finalize(flags); !r) return r;
  auto si = parse_duration(sample);
  if (!si || si->count() < 1000)
    return make_error("invalid --metrics-sample-interval \"" + sample + "\"");
  flags.config.metrics_sample_interval = std::chrono::duration_cast<std::chrono::seconds>(*si);
  if (auto sans = server::subject_alt_names(flags.config.tls_sans); !sans)
    return make_error("invalid --tls-san " + sans.error().message);
  if (auto r = resolve_kubernetes_settings(flags.kubernetes, std::getenv(kNodeNameEnv),
                                           std::getenv(kKubeconfigEnv));
      !r)
    return r;
  if (!flags.config.metrics_listen_address.empty())
    if (auto a = server::parse_listen_address(flags.config.metrics_listen_address); !a)
      return make_error("invalid --metrics-listen-address: " + a.error().message);
  return {};
}

LogOptions log_options(const Config& c) {
  LogOptions o;
  o.level = c.log_level;
  o.file = c.log_file;
  o.max_size_bytes = static_cast<size_t>(c.log_file_max_size_mb) << 20;
  o.max_files = static_cast<size_t>(c.log_file_max_files);
  return o;
}

namespace {

// Starts the daemon and serves until SIGINT or SIGTERM.
void serve_until_stopped(const Config& config, const KubernetesSettings& kubernetes,
                         int* exit_code) {
  // Block the stop signals before any thread starts so only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  Daemon daemon(config, kubernetes);
  if (auto r = daemon.start(); !r) {
    logger("daemon")->error("cannot start: {}", r.error().message);
    // Tells a Type=notify unit why it failed instead of letting it wait for READY=1.
    (void)sd_notify("STATUS=cannot start: " + r.error().message);
    std::cerr << "✘ cannot start gpud: " << r.error().message << "\n";
    *exit_code = kExitUnhealthy;
    return;
  }
  // The API listens now: a Type=notify unit becomes active.
  if (auto n = sd_notify("READY=1\nSTATUS=serving\nMAINPID=" + std::to_string(::getpid())); !n)
    logger("daemon")->warn("{}", n.error().message);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  (void)sd_notify("STOPPING=1\nSTATUS=shutting down");
  logger("daemon")->info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  daemon.stop();
  logger("daemon")->info("stopped");
  *exit_code = kExitOk;
}

}  // namespace

void add_run(CLI::App& app, int* exit_code, std::function<void()>* serve) {
  auto flags = std::make_shared<RunFlags>();
  auto sample = std::make_shared<std::string>("1m");
  auto config_file = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("run", "Run the gpud daemon in the foreground");
  add_run_options(*cmd, *flags, *sample);
  add_config_option(*cmd, *config_file);
  cmd->callback([cmd, flags, sample, config_file, exit_code, serve] {
    if (auto r = apply_config_file(*cmd, *config_file); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    if (auto r = setup_logging(log_options(flags->config)); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    if (auto r = validate_run_flags(*flags, *sample); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    for (const auto& line : gpud_flag_warnings(flags->gpud_flags_given))
      logger("gpud")->warn("{}", line);
    auto token = resolve_admin_token(flags->admin_token_file, std::getenv(kAdminTokenEnv));
    // Commands the daemon runs (nvidia-smi, systemctl) need not see the token. No other thread
    // runs yet, so changing the environment is safe here.
    ::unsetenv(kAdminTokenEnv);
    if (!token) {
      std::cerr << "✘ " << token.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    flags->config.admin_token = *token;
    *serve = [config = flags->config, kubernetes = flags->kubernetes, exit_code] {
      serve_until_stopped(config, kubernetes, exit_code);
    };
  });
}

}  // namespace gpud::app
