// `gpud run`: the daemon in the foreground until SIGINT/SIGTERM.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

#include "app/daemon.h"
#include "app/options.h"
#include "app/verbs.h"
#include "core/time_util.h"

namespace gpud::app {

void add_run(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand("run", "Run the gpud daemon in the foreground");
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
  cmd->add_option("--admin-token", c.admin_token,
                  "Bearer token that allows mutating API calls from non-loopback clients");
  auto web_enable = std::make_shared<bool>(true);
  cmd->add_option("--web-enable", *web_enable,
                  "Serve the local web UI at / on the API listener (--web-enable=false: off)")
      ->default_str("true");
  cmd->add_option("--events-retention-period", flags->events_retention,
                  "How long events are kept (Go duration)")
      ->capture_default_str();
  cmd->add_option("--metrics-retention-period", flags->metrics_retention,
                  "How long metric history is kept (Go duration)")
      ->capture_default_str();
  cmd->add_option("--log-level,-l", c.log_level, "debug, info, warn or error")
      ->capture_default_str();
  cmd->add_option("--log-file", c.log_file, "Log to this file (rotated) instead of stderr");
  auto sample = std::make_shared<std::string>("1m");
  cmd->add_option("--metrics-sample-interval", *sample,
                  "How often metrics are sampled into history")
      ->group("");  // hidden: tests shorten it
  cmd->callback([flags, sample, web_enable, exit_code] {
    if (auto r = setup_logging(flags->config.log_level, flags->config.log_file); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    if (auto r = finalize(*flags); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    auto si = parse_duration(*sample);
    if (!si || si->count() < 1000) {
      std::cerr << "✘ invalid --metrics-sample-interval \"" << *sample << "\"\n";
      *exit_code = kExitUsage;
      return;
    }
    flags->config.metrics_sample_interval = std::chrono::duration_cast<std::chrono::seconds>(*si);

    // Block the stop signals before any thread starts so only sigwait below sees them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    ::signal(SIGPIPE, SIG_IGN);

    Daemon daemon(flags->config);
    daemon.set_web_enable(*web_enable);
    if (auto r = daemon.start(); !r) {
      spdlog::error("[daemon] cannot start: {}", r.error().message);
      std::cerr << "✘ cannot start gpud: " << r.error().message << "\n";
      *exit_code = kExitUnhealthy;
      return;
    }
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("[daemon] received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    daemon.stop();
    spdlog::info("[daemon] stopped");
    *exit_code = kExitOk;
  });
}

}  // namespace gpud::app
