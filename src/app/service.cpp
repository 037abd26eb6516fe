// `gpud up` and `gpud down` (see service.h), and the service state for `gpud status`.
#include "app/service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "app/config_file.h"
#include "app/daemon.h"
#include "app/deploy_files.h"
#include "app/options.h"
#include "app/verbs.h"
#include "core/files.h"
#include "core/strings.h"
#include "host/command.h"
#include "store/database.h"

namespace fs = std::filesystem;

namespace gpud::app {

namespace {

// The path `abs` (absolute) under `root`; root "" or "/" is the real filesystem.
std::string under(const std::string& root, const std::string& abs) {
  if (root.empty() || root == "/") return abs;
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return r + abs;
}

struct CommandOutput {
  int exit_code = -1;
  std::string out;  // stdout, then stderr, trailing blanks dropped
};

// systemctl (from $PATH) with a deadline.
Result<CommandOutput> systemctl(std::vector<std::string> args,
                                std::chrono::seconds timeout = std::chrono::seconds(150)) {
  args.insert(args.begin(), "systemctl");
  const char* path = std::getenv("PATH");
  auto r = host::run_command(
      args, path != nullptr && *path != '\0' ? path : host::kDefaultSearchPath, timeout);
  if (!r) return r.error();
  CommandOutput result{r->exit_code, r->out + r->err};
  while (!result.out.empty() && (result.out.back() == '\n' || result.out.back() == ' '))
    result.out.pop_back();
  return result;
}

// systemctl that must succeed.
Result<void> systemctl_ok(std::vector<std::string> args) {
  auto r = systemctl(args);
  if (!r) return r.error();
  if (r->exit_code != 0)
    return make_error("systemctl " + join(args, " ") + " failed (exit " +
                      std::to_string(r->exit_code) + "): " + r->out);
  return {};
}

// Writes `content` to `path` through a temporary file and rename, so a running binary or a reader
// never sees half a file. Returns false when the file already had exactly this content and mode.
Result<bool> write_atomically(const std::string& path, const std::string& content, mode_t mode) {
  std::error_code ec;
  if (fs::exists(path, ec)) {
    struct stat st {};
    auto old = read_file(path);
    if (old && *old == content && ::stat(path.c_str(), &st) == 0 && (st.st_mode & 07777) == mode)
      return false;
  }
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec)
    return make_error("create " + fs::path(path).parent_path().string() + ": " + ec.message());
  std::string tmp = path + ".gpud-tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return make_error("cannot write " + tmp);
    }
  }
  if (::chmod(tmp.c_str(), mode) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    fs::remove(tmp, ec);
    return make_error("cannot install " + path + ": " + std::strerror(err));
  }
  return true;
}

Result<std::string> self_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return make_error("cannot find the running binary (/proc/self/exe): " + ec.message());
  std::string s = p.string();
  if (s.size() > 10 && s.ends_with(" (deleted)"))
    return make_error("the running binary " + s + " was deleted; run the new one");
  return s;
}

}  // namespace

std::string render_unit(std::string_view binary) {
  std::string unit = kServiceUnitTemplate;
  const std::string from = std::string("ExecStart=") + kInstalledBinary + " ";
  const std::string to = "ExecStart=" + std::string(binary) + " ";
  if (auto at = unit.find(from); at != std::string::npos) unit.replace(at, from.size(), to);
  return unit;
}

Result<std::string> render_env_file(const std::string& admin_token) {
  std::string text = kDefaultEnvTemplate;
  const std::string line = "\nFLAGS=\"\"\n";
  auto at = text.find(line);
  if (at == std::string::npos)
    return make_error("deploy/systemd/gpud.default has no FLAGS=\"\" line");
  if (admin_token.empty()) return text;
  if (auto r = check_admin_token(admin_token); !r) return r.error();
  text.insert(at + line.size(), std::string(kAdminTokenEnv) + "=\"" + admin_token + "\"\n");
  return text;
}

std::string admin_token_in_env_file(const std::string& text) {
  const std::string key = std::string(kAdminTokenEnv) + "=";
  std::istringstream in(text);
  std::string line, token;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    token = line.substr(key.size());
    while (!token.empty() && (token.back() == ' ' || token.back() == '\r')) token.pop_back();
    if (token.size() >= 2 && (token.front() == '"' || token.front() == '\'') &&
        token.back() == token.front())
      token = token.substr(1, token.size() - 2);
  }
  return token;  // the last assignment wins, as in systemd's EnvironmentFile
}

Result<void> validate_daemon_flags(const std::vector<std::string>& flags) {
  RunCommandLine probe;
  if (auto r = probe.parse(flags); !r) return r;
  if (auto r = validate_run_flags(probe.flags, probe.sample); !r)
    return make_error("not a valid `gpud run` flag list: " + r.error().message);
  return {};
}

bool systemd_running(const std::string& root) {
  std::error_code ec;
  return fs::is_directory(under(root, "/run/systemd/system"), ec);
}

std::string describe_service(bool systemd, const std::string& unit, const std::string& active,
                             const std::string& enabled) {
  if (!systemd) return "systemd not running";
  if (unit.empty()) return "not installed";
  return (active.empty() ? "unknown" : active) + " (" + (enabled.empty() ? "unknown" : enabled) +
         ")";
}

ServiceState service_state() {
  ServiceState s;
  bool systemd = systemd_running();
  for (const char* p :
       {kUnitPath, "/lib/systemd/system/gpud.service", "/usr/lib/systemd/system/gpud.service"}) {
    std::error_code ec;
    if (fs::exists(p, ec)) {
      s.unit = p;
      break;
    }
  }
  if (systemd && !s.unit.empty()) {
    // is-active/is-enabled exit non-zero for "inactive"/"disabled"; their output is the answer.
    if (auto r = systemctl({"is-active", kServiceName}, std::chrono::seconds(10)); r)
      s.active = std::string(trim(r->out));
    if (auto r = systemctl({"is-enabled", kServiceName}, std::chrono::seconds(10)); r)
      s.enabled = std::string(trim(r->out));
  }
  s.summary = describe_service(systemd, s.unit, s.active, s.enabled);
  return s;
}

Result<bool> install_service_files(const std::string& root, const std::string& self_exe,
                                   const std::vector<std::string>& flags,
                                   const std::string& admin_token, std::vector<std::string>* log) {
  bool changed = false;
  // The binary: skipped when gpud already runs from its installed path.
  std::string bin = under(root, kInstalledBinary);
  std::error_code ec;
  if (!(fs::exists(bin, ec) && fs::equivalent(bin, self_exe, ec))) {
    auto content = read_file(self_exe);
    if (!content) return content.error();
    auto w = write_atomically(bin, *content, 0755);
    if (!w) return w.error();
    changed |= *w;
    log->push_back((*w ? "installed " : "unchanged ") + bin);
  } else {
    log->push_back("unchanged " + bin + " (running from it)");
  }
  // The configuration file holds up's flags (as YAML, so no flag is too odd for it); without flags
  // an existing file is kept, and a missing one is written as the shipped commented default.
  std::string config = under(root, kConfigPath);
  if (!flags.empty() || !fs::exists(config, ec)) {
    auto text = render_config_yaml(flags);
    if (!text) return text.error();
    auto w = write_atomically(config, *text, 0644);
    if (!w) return w.error();
    changed |= *w;
    log->push_back((*w ? "wrote " : "unchanged ") + config +
                   (flags.empty() ? " (the commented default)" : " (" + join(flags, " ") + ")"));
  } else {
    log->push_back("kept " + config + " (no flags given)");
  }
  // The environment file: new flags empty FLAGS (whose flags would override the configuration
  // file); without flags (or token) an existing file is kept. A token the file holds survives new
  // flags, or `up --gpu-count 8` would drop it.
  std::string env = under(root, kEnvFilePath);
  if (!flags.empty() || !admin_token.empty() || !fs::exists(env, ec)) {
    std::string token = admin_token;
    if (token.empty())
      if (auto old = read_file(env); old) token = admin_token_in_env_file(*old);
    auto text = render_env_file(token);
    if (!text) return text.error();
    // 0640, root's: it may hold GPUD_ADMIN_TOKEN.
    auto w = write_atomically(env, *text, 0640);
    if (!w) return w.error();
    changed |= *w;
    log->push_back((*w ? "wrote " : "unchanged ") + env + " (FLAGS=\"\"" +
                   (token.empty()         ? ""
                    : admin_token.empty() ? ", admin token kept"
                                          : ", admin token set") +
                   ")");
  } else {
    log->push_back("kept " + env + " (no flags given)");
  }
  std::string unit = under(root, kUnitPath);
  auto w = write_atomically(unit, render_unit(kInstalledBinary), 0644);
  if (!w) return w.error();
  changed |= *w;
  log->push_back((*w ? "wrote " : "unchanged ") + unit);
  return changed;
}

Result<void> remove_service_files(const std::string& root, std::vector<std::string>* log) {
  for (const char* p : {kUnitPath, kEnvFilePath}) {
    std::string path = under(root, p);
    std::error_code ec;
    bool removed = fs::remove(path, ec);
    if (ec) return make_error("cannot remove " + path + ": " + ec.message());
    log->push_back((removed ? "removed " : "absent ") + path);
  }
  std::error_code ec;
  if (const std::string config = under(root, kConfigPath); fs::exists(config, ec))
    log->push_back("kept " + config + " (the configuration; remove it by hand)");
  return {};
}

namespace {

// Refuses (returns an error) unless this can manage the real system's service.
Result<void> check_can_manage(const char* verb) {
  if (::geteuid() != 0)
    return make_error(std::string("gpud ") + verb +
                      " must run as root (it writes /usr/local/bin and /etc and runs systemctl); "
                      "use sudo, or --root DIR to stage the files into DIR");
  if (!systemd_running())
    return make_error(std::string("gpud ") + verb +
                      " needs systemd as PID 1 (/run/systemd/system is missing); run `gpud run` "
                      "under your init system instead, or use --root DIR to stage the files");
  return {};
}

}  // namespace

void add_up(CLI::App& app, int* exit_code) {
  auto root = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "up",
      "Install gpud as a systemd service and start it (root): /usr/local/bin/gpud, "
      "/etc/gpud/gpud.yaml, /etc/default/gpud, /etc/systemd/system/gpud.service. Other flags are "
      "`gpud run` flags, kept in /etc/gpud/gpud.yaml (without flags, an existing one is kept)");
  cmd->add_option("--root", *root,
                  "Stage the files under this directory instead of / and run no systemctl");
  // GPUd's login flags (--token, --endpoint, ...) are up's own, so they never reach the service.
  auto gpud_given = std::make_shared<GpudFlagsGiven>();
  add_gpud_flags(*cmd, kGpudUp, *gpud_given);
  cmd->allow_extras();
  cmd->footer(
      "Example: sudo gpud up --gpu-count 8 --log-level info (run flags follow directly, no `--`)");
  cmd->callback([cmd, root, gpud_given, exit_code] {
    for (const auto& line : gpud_flag_warnings(*gpud_given)) std::cerr << "! " << line << "\n";
    auto fail = [exit_code](const std::string& msg) {
      std::cerr << "✘ " << msg << "\n";
      *exit_code = kExitUsage;
    };
    std::vector<std::string> flags = cmd->remaining();
    bool staged = !root->empty() && *root != "/";
    if (staged) {
      std::error_code ec;
      if (!fs::is_directory(*root, ec)) return fail("--root \"" + *root + "\" is not a directory");
    } else if (auto r = check_can_manage("up"); !r) {
      return fail(r.error().message);
    }
    if (auto r = validate_daemon_flags(flags); !r) return fail(r.error().message);
    // The token travels in up's environment, never its argv (`--admin-token` is refused above).
    const char* env_token = std::getenv(kAdminTokenEnv);
    std::string admin_token = env_token != nullptr ? env_token : "";
    if (!admin_token.empty())
      if (auto r = check_admin_token(admin_token); !r)
        return fail(std::string(kAdminTokenEnv) + ": " + r.error().message);
    auto self = self_executable();
    if (!self) return fail(self.error().message);

    // Whether the service ran before, so changed files can be applied with a restart.
    bool was_active = false;
    if (!staged) {
      auto a = systemctl({"is-active", "--quiet", kServiceName}, std::chrono::seconds(10));
      was_active = a && a->exit_code == 0;
    }
    std::vector<std::string> log;
    auto changed = install_service_files(staged ? *root : "/", *self, flags, admin_token, &log);
    for (const auto& line : log) std::cout << "  " << line << "\n";
    if (!changed) return fail(changed.error().message);
    if (staged) {
      std::cout << "✔ gpud service files staged under " << *root << " (no systemctl run)\n";
      *exit_code = kExitOk;
      return;
    }
    for (auto args : {std::vector<std::string>{"daemon-reload"},
                      std::vector<std::string>{"enable", "--now", kServiceName}}) {
      if (auto r = systemctl_ok(args); !r) return fail(r.error().message);
    }
    if (was_active && *changed) {
      if (auto r = systemctl_ok({"restart", kServiceName}); !r) return fail(r.error().message);
      std::cout << "  restarted " << kServiceName << " to apply the changes\n";
    }
    std::cout << "✔ gpud is running as " << kServiceName
              << " (systemctl status gpud; journalctl -u gpud)\n";
    *exit_code = kExitOk;
  });
}

Result<std::vector<std::string>> reset_state(const std::string& data_dir) {
  std::error_code dir_ec;
  if (!fs::is_directory(data_dir, dir_ec)) return std::vector<std::string>{};
  auto lock = lock_data_dir(data_dir);
  if (!lock)
    return make_error("refusing to reset the state while a daemon uses " + data_dir + ": " +
                      lock.error().message);
  std::vector<std::string> removed;
  const std::string state = data_dir + "/" + store::kStateFileName;
  for (const std::string& path : {state, state + "-wal", state + "-shm"}) {
    std::error_code ec;
    if (fs::remove(path, ec)) removed.push_back(path);
    if (ec) {
      ::close(*lock);
      return make_error("cannot remove " + path + ": " + ec.message());
    }
  }
  ::close(*lock);
  return removed;
}

void add_down(CLI::App& app, int* exit_code) {
  auto root = std::make_shared<std::string>();
  auto purge = std::make_shared<bool>(false);
  auto reset = std::make_shared<bool>(false);
  auto data_dir = std::make_shared<std::string>();
  auto log_level = std::make_shared<std::string>("info");
  auto* cmd = app.add_subcommand("down", "Stop and disable the gpud systemd service (root)");
  cmd->add_option("--root", *root,
                  "Act on files staged under this directory (with --purge) and run no systemctl");
  cmd->add_flag("--purge", *purge,
                "Also remove /etc/systemd/system/gpud.service and /etc/default/gpud (the binary "
                "and the data dir stay)");
  cmd->add_flag("--reset-state", *reset,
                "After stopping, remove the state database (gpud.state and its -wal/-shm) from "
                "the data dir: events, reboot history, metric history and metadata");
  cmd->add_option("--data-dir", *data_dir,
                  "State directory that --reset-state empties (default /var/lib/gpud as root, "
                  "~/.gpud otherwise; under --root DIR: DIR/var/lib/gpud)");
  cmd->add_option("--log-level,-l", *log_level, "debug, info, warn or error (GPUd's flag)")
      ->capture_default_str();
  cmd->callback([root, purge, reset, data_dir, log_level, exit_code] {
    auto fail = [exit_code](const std::string& msg) {
      std::cerr << "✘ " << msg << "\n";
      *exit_code = kExitUsage;
    };
    if (auto r = setup_logging(*log_level, ""); !r) return fail(r.error().message);
    bool staged = !root->empty() && *root != "/";
    if (staged) {
      std::error_code ec;
      if (!fs::is_directory(*root, ec)) return fail("--root \"" + *root + "\" is not a directory");
    } else {
      if (auto r = check_can_manage("down"); !r) return fail(r.error().message);
      std::error_code ec;
      if (fs::exists(kUnitPath, ec)) {
        if (auto r = systemctl_ok({"disable", "--now", kServiceName}); !r)
          return fail(r.error().message);
        std::cout << "  stopped and disabled " << kServiceName << "\n";
      } else {
        std::cout << "  " << kUnitPath << " is not installed; nothing to stop\n";
      }
    }
    if (*purge) {
      std::vector<std::string> log;
      auto r = remove_service_files(staged ? *root : "/", &log);
      for (const auto& line : log) std::cout << "  " << line << "\n";
      if (!r) return fail(r.error().message);
      if (!staged)
        if (auto d = systemctl_ok({"daemon-reload"}); !d) return fail(d.error().message);
    } else if (staged) {
      std::cout << "  nothing to stop in a staged root; --purge removes the staged files\n";
    }
    if (*reset) {
      std::string dir = *data_dir;
      if (dir.empty()) dir = staged ? under(*root, "/var/lib/gpud") : default_data_dir();
      auto removed = reset_state(dir);
      if (!removed) return fail(removed.error().message);
      for (const auto& path : *removed) std::cout << "  removed " << path << "\n";
      if (removed->empty()) std::cout << "  no state database in " << dir << "; nothing to reset\n";
    }
    std::cout << "✔ gpud service " << (*purge ? "removed" : "stopped")
              << (*reset ? " and its state reset" : "") << "\n";
    *exit_code = kExitOk;
  });
}

}  // namespace gpud::app
