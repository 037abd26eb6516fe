// End-to-end: `gpud npd-check` keeps node-problem-detector's custom-plugin contract (exit 0/1/2,
// one line of at most 80 bytes, under a second) against a daemon on the fake NVML and with no
// daemon; the shipped monitor JSON has what NPD requires and its rules' commands run.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;

std::string nvml_fixture(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/nvml/" + name;
}

const std::string kMonitorJson =
    std::string(GPUD_SOURCE_DIR) + "/deploy/kubernetes/node-problem-detector/gpud-monitor.json";

// The NVIDIA components the faulty scenario judges, plus two host ones for the kernel preset.
const char* kComponents =
    "accelerator-nvidia-info,accelerator-nvidia-remapped-rows,accelerator-nvidia-temperature,"
    "cpu,fd";

struct Timed {
  CommandResult result;
  std::chrono::milliseconds took{};
};

Timed npd_check(const std::vector<std::string>& args) {
  std::vector<std::string> full{"npd-check"};
  full.insert(full.end(), args.begin(), args.end());
  const auto start = std::chrono::steady_clock::now();
  Timed t{run_gpud(full, 10), {}};
  t.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  return t;
}

// The one line NPD keeps: the output without its newline; fails when there is more than one.
std::string only_line(const CommandResult& r) {
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  std::string line = r.out;
  if (!line.empty() && line.back() == '\n') line.pop_back();
  EXPECT_LE(line.size(), 80u) << line;
  return line;
}

std::unique_ptr<DaemonProcess> fake_nvml_daemon(const std::string& data,
                                                const std::string& scenario) {
  return std::make_unique<DaemonProcess>(
      data,
      std::vector<std::string>{"--nvml-lib", GPUD_FAKE_NVML, "--nvidia-check-interval", "1s",
                               "--components", kComponents},
      true, std::vector<std::string>{"FAKE_NVML_SCENARIO=" + nvml_fixture(scenario)});
}

TEST(NpdCheckE2E, NoDaemonIsUnknownWithinASecond) {
  TempDirGuard guard{make_temp_dir()};
  for (const auto& where : std::vector<std::vector<std::string>>{
           {"--api-socket", guard.path + "/none.sock"},
           {"--server", "http://127.0.0.1:" + std::to_string(free_port())}}) {
    Timed t = npd_check(where);
    EXPECT_EQ(t.result.exit_code, 2) << t.result.out;
    EXPECT_LT(t.took, 1000ms);
    EXPECT_NE(only_line(t.result).find("not reachable"), std::string::npos) << t.result.out;
  }
}

TEST(NpdCheckE2E, HealthyFakeGpusAreOkAndAFaultyGpuIsNamedWithItsAction) {
  TempDirGuard guard{make_temp_dir()};
  {
    auto d = fake_nvml_daemon(guard.path + "/healthy", "h100x8-healthy.json");
    ASSERT_TRUE(d->ready()) << d->log();
    const std::vector<std::string> where{"--data-dir", guard.path + "/healthy"};
    auto with = [&](std::vector<std::string> more) {
      more.insert(more.end(), where.begin(), where.end());
      return more;
    };
    std::optional<Timed> last;
    ASSERT_TRUE(eventually(
        [&] {
          last = npd_check(with({"--components", "gpu"}));
          return last->result.exit_code == 0;
        },
        20s))
        << last->result.out << d->log();
    Timed t = npd_check(with({"--components", "gpu"}));
    EXPECT_EQ(t.result.exit_code, 0) << t.result.out;
    EXPECT_LT(t.took, 1000ms);
    const std::string ok = only_line(t.result);
    EXPECT_EQ(ok.rfind("gpud gpu: ", 0), 0u) << ok;
    EXPECT_NE(ok.find(" component(s) Healthy"), std::string::npos) << ok;
    // cpu reads Initializing until its second sample: Unknown (2) until then, never a problem.
    std::optional<Timed> kernel;
    EXPECT_TRUE(eventually(
        [&] {
          kernel = npd_check(with({"--components", "kernel"}));
          EXPECT_NE(kernel->result.exit_code, 1) << kernel->result.out;
          return kernel->result.exit_code == 0;
        },
        20s))
        << kernel->result.out;
    Timed bad = npd_check(with({"--components", "gpu,Not A Name"}));
    EXPECT_EQ(bad.result.exit_code, 2) << bad.result.out;

    // Each rule of the shipped monitor, run as NPD would run it, with this machine's loader and
    // libraries standing for the image's and the test daemon's socket for the node's.
    std::ifstream in(kMonitorJson);
    auto monitor = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(monitor.is_object());
    for (const auto& rule : monitor["rules"]) {
      std::string cmd = rule["path"].get<std::string>().substr(std::string("/opt/gpud").size());
      for (const auto& a : rule["args"]) {
        std::string arg = a.get<std::string>();
        if (arg == "/opt/gpud/usr/bin/gpud")
          arg = GPUD_BINARY;
        else if (arg.rfind("/opt/gpud", 0) == 0)
          arg = arg.substr(std::string("/opt/gpud").size());
        else if (arg == "/var/lib/gpud/run/gpud.sock")
          arg = guard.path + "/healthy/run/gpud.sock";
        cmd += " '" + arg + "'";
      }
      auto r = shell(cmd + "; echo \"exit=$?\"");
      EXPECT_NE(r.out.find("exit=0"), std::string::npos) << cmd << "\n" << r.out;
    }
  }

  auto d = fake_nvml_daemon(guard.path + "/faulty", "h100x8-row-remap-failed.json");
  ASSERT_TRUE(d->ready()) << d->log();
  const std::vector<std::string> args{"--components", "gpu", "--data-dir", guard.path + "/faulty"};
  std::optional<Timed> last;
  ASSERT_TRUE(eventually(
      [&] {
        last = npd_check(args);
        return last->result.exit_code == 1;
      },
      20s))
      << last->result.out << d->log();
  EXPECT_LT(last->took, 1000ms);
  const std::string line = only_line(last->result);
  // GPU 5 of the scenario, with the bus id /v1/gpus gives it.
  auto gpus = parse_json(d->get("/v1/gpus")->body);
  std::string bus;
  for (const auto& g : gpus)
    if (g.value("index", -1) == 5) bus = g.value("pci_bus_id", "");
  ASSERT_FALSE(bus.empty()) << gpus.dump();
  EXPECT_EQ(line.rfind("GPU 5 " + bus + " ", 0), 0u) << line;
  EXPECT_NE(line.find("HARDWARE_INSPECTION"), std::string::npos) << line;
  // The host's components are not in this condition (cpu is Unknown until its second sample,
  // which may come after the GPU's fault: never a problem).
  std::optional<Timed> host;
  EXPECT_TRUE(eventually(
      [&] {
        host = npd_check({"--components", "cpu", "--data-dir", guard.path + "/faulty"});
        EXPECT_NE(host->result.exit_code, 1) << host->result.out;
        return host->result.exit_code == 0;
      },
      20s))
      << host->result.out;
}

// Parses NPD's duration strings as the monitor uses them ("30s", "5s", "1m").
std::optional<std::chrono::seconds> npd_duration(const nlohmann::json& j) {
  if (!j.is_string()) return std::nullopt;
  const std::string s = j.get<std::string>();
  if (s.size() < 2) return std::nullopt;
  const long n = std::strtol(s.c_str(), nullptr, 10);
  if (s.back() == 's') return std::chrono::seconds(n);
  if (s.back() == 'm') return std::chrono::minutes(n);
  return std::nullopt;
}

TEST(NpdCheckE2E, MonitorJsonHasWhatNodeProblemDetectorRequires) {
  std::ifstream in(kMonitorJson);
  ASSERT_TRUE(in) << kMonitorJson;
  auto m = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(m.is_object()) << "not JSON";
  // pkg/custompluginmonitor/types/config.go: plugin "custom", a source, durations that parse, a
  // global timeout within the interval, output bounded by NPD's 80 bytes.
  EXPECT_EQ(m.value("plugin", ""), "custom");
  EXPECT_FALSE(m.value("source", "").empty());
  const auto& pc = m["pluginConfig"];
  ASSERT_TRUE(pc.is_object());
  auto interval = npd_duration(pc["invoke_interval"]);
  auto timeout = npd_duration(pc["timeout"]);
  ASSERT_TRUE(interval && timeout);
  EXPECT_LE(*timeout, *interval);
  EXPECT_EQ(pc.value("max_output_length", 0), 80);
  EXPECT_GT(pc.value("concurrency", 0), 0);
  std::set<std::string> conditions;
  ASSERT_TRUE(m["conditions"].is_array());
  for (const auto& c : m["conditions"]) {
    for (const char* k : {"type", "reason", "message"})
      EXPECT_TRUE(c.contains(k) && c[k].is_string() && !c[k].get<std::string>().empty()) << c;
    conditions.insert(c.value("type", ""));
  }
  EXPECT_EQ(conditions,
            (std::set<std::string>{"GpudGPUProblem", "GpudKernelProblem", "GpudRuntimeProblem"}));
  ASSERT_TRUE(m["rules"].is_array());
  std::set<std::string> covered;
  for (const auto& r : m["rules"]) {
    const std::string type = r.value("type", "");
    EXPECT_TRUE(type == "permanent" || type == "temporary") << r;
    EXPECT_FALSE(r.value("reason", "").empty()) << r;
    if (type == "permanent") {
      EXPECT_EQ(conditions.count(r.value("condition", "")), 1u) << r;
      covered.insert(r.value("condition", ""));
    }
    EXPECT_EQ(r.value("path", "").rfind('/', 0), 0u) << "absolute path: " << r;
    ASSERT_TRUE(r["args"].is_array()) << r;
    for (const auto& a : r["args"]) EXPECT_TRUE(a.is_string()) << r;
    EXPECT_NE(std::find(r["args"].begin(), r["args"].end(), "npd-check"), r["args"].end()) << r;
    if (r.contains("timeout")) {
      auto t = npd_duration(r["timeout"]);
      ASSERT_TRUE(t) << r;
      EXPECT_LE(*t, *interval) << r;
    }
  }
  EXPECT_EQ(covered, conditions) << "every condition has a rule that can clear it";
}

}  // namespace
}  // namespace gpud::e2e
