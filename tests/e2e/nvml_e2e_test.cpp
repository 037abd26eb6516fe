// End-to-end: the daemon on the fake libnvidia-ml: eight GPUs in the API, a GPU lost mid-run and
// recovered after a restart, and a hung driver that stops neither /healthz nor the host components.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "testing/swagger_validator.h"
#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;

std::string fixture(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/nvml/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Atomically replaces `path` with `body`, so the fake never reads half a file.
void write_atomic(const std::string& path, const std::string& body) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << body;
  }
  std::filesystem::rename(tmp, path);
}

const std::vector<std::string> kNvidiaB = {"accelerator-nvidia-fabric-manager",
                                           "accelerator-nvidia-gpm",
                                           "accelerator-nvidia-gsp-firmware-mode",
                                           "accelerator-nvidia-nvlink",
                                           "accelerator-nvidia-pcie",
                                           "accelerator-nvidia-persistence-mode",
                                           "accelerator-nvidia-processes"};

// component -> its first state, from /v1/states.
std::map<std::string, nlohmann::json> states(const DaemonProcess& d) {
  std::map<std::string, nlohmann::json> out;
  auto r = d.get("/v1/states");
  if (!r || r->status != 200) return out;
  auto body = parse_json(r->body);
  if (!body.is_array()) return out;
  for (const auto& c : body)
    if (c.contains("states") && !c["states"].empty()) out[c["component"]] = c["states"][0];
  return out;
}

// Polls until pred(states) holds or timeout.
template <typename Pred>
bool wait_states(const DaemonProcess& d, Pred pred, std::chrono::seconds timeout,
                 std::map<std::string, nlohmann::json>* last = nullptr) {
  auto end = std::chrono::steady_clock::now() + timeout;
  std::map<std::string, nlohmann::json> s;
  while (std::chrono::steady_clock::now() < end) {
    s = states(d);
    if (pred(s)) break;
    std::this_thread::sleep_for(250ms);
  }
  if (last != nullptr) *last = s;
  return pred(s);
}

bool all_nvidia(const std::map<std::string, nlohmann::json>& s, const std::string& health,
                const std::string& action = "") {
  for (const auto& n : kNvidiaB) {
    auto it = s.find(n);
    if (it == s.end() || it->second.value("health", "") != health) return false;
    if (!action.empty()) {
      const auto& sa = it->second.value("suggested_actions", nlohmann::json());
      if (!sa.is_object() || sa["repair_actions"] != nlohmann::json::array({action})) return false;
    }
  }
  return true;
}

std::vector<std::string> fake_args(const std::string& extra_interval = "1s") {
  return {"--nvml-lib", GPUD_FAKE_NVML, "--nvidia-check-interval", extra_interval};
}

// /machine-info once it lists the fake's eight GPUs (within 10 s), else the last document read.
nlohmann::json machine_info_with_eight_gpus(DaemonProcess& d) {
  nlohmann::json mi;
  EXPECT_TRUE(eventually(
      [&] {
        auto r = d.get("/machine-info");
        if (!r) return false;
        mi = parse_json(r->body);
        return mi.contains("gpuInfo") && mi["gpuInfo"]["gpus"].size() == 8U;
      },
      10s))
      << mi.dump();
  return mi;
}

TEST(NvmlE2E, EightFakeGpusInTheApi) {
  std::string dir = make_temp_dir();
  DaemonProcess d(dir, fake_args(), true, {"FAKE_NVML_SCENARIO=" + fixture("h100x8-healthy.json")});
  ASSERT_TRUE(d.ready()) << d.log();
  auto comps = parse_json(d.get("/v1/components")->body);
  for (const auto& n : kNvidiaB)
    EXPECT_NE(std::find(comps.begin(), comps.end(), n), comps.end()) << n;
  EXPECT_NE(std::find(comps.begin(), comps.end(), "accelerator-nvidia-bad-envs"), comps.end());
  // Machine info has the GPUs once NVML answered its first collection (usually before /healthz;
  // on a loaded machine the start may not wait that long).
  nlohmann::json mi = machine_info_with_eight_gpus(d);
  // The NVLink fabric's identity, as GPUd names it (the fake's default GPU is in a fabric).
  EXPECT_EQ(mi.value("clusterUUID", ""), "7d2f9a31-0c4e-4b8a-9f61-2e5d8c1b3a70") << mi.dump();
  EXPECT_EQ(mi.value("cliqueID", 0), 32766) << mi.dump();
  std::map<std::string, nlohmann::json> last;
  EXPECT_TRUE(wait_states(
      d, [](const auto& s) { return all_nvidia(s, "Healthy"); }, 20s, &last))
      << nlohmann::json(last).dump();
  auto metrics = d.get("/metrics")->body;
  EXPECT_NE(metrics.find("accelerator_nvidia_nvlink_feature_enabled{gpu=\"7\""), std::string::npos);
  EXPECT_NE(metrics.find("uuid=\"GPU-"), std::string::npos);
  EXPECT_NE(metrics.find("accelerator_nvidia_pcie_link_width{"), std::string::npos);
  // GPM values need two checks of accelerator-nvidia-gpm (a baseline sample, then the window).
  auto end = std::chrono::steady_clock::now() + 20s;
  while (metrics.find("accelerator_nvidia_gpm_gpu_sm_occupancy_percent{") == std::string::npos &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(250ms);
    metrics = d.get("/metrics")->body;
  }
  EXPECT_NE(metrics.find("accelerator_nvidia_gpm_gpu_sm_occupancy_percent{gpu=\"7\""),
            std::string::npos);
  EXPECT_NE(states(d)["accelerator-nvidia-gpm"].value("reason", "").find("metrics sampled on 8"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(NvmlE2E, GpuLostMidRunThenRecoveredAfterRestart) {
  std::string dir = make_temp_dir();
  std::string scenario = dir + "-scenario.json";
  write_atomic(scenario, slurp(fixture("h100x8-healthy.json")));
  std::vector<std::string> env{"FAKE_NVML_SCENARIO=" + scenario};
  std::map<std::string, nlohmann::json> last;
  {
    DaemonProcess d(dir, fake_args(), true, env);
    ASSERT_TRUE(d.ready()) << d.log();
    ASSERT_TRUE(wait_states(
        d, [](const auto& s) { return all_nvidia(s, "Healthy"); }, 20s, &last))
        << nlohmann::json(last).dump();
    write_atomic(scenario, slurp(fixture("h100x8-gpu-lost.json")));
    // One finding, by accelerator-nvidia-info, naming the GPU as it was last seen; every other
    // component judges the seven GPUs that answer and says GPU 3 was not checked.
    auto one_finding = [](const auto& s) {
      auto info = s.find("accelerator-nvidia-info");
      if (info == s.end() || info->second.value("health", "") != "Unhealthy") return false;
      for (const auto& n : kNvidiaB) {
        auto it = s.find(n);
        if (it == s.end() || it->second.value("health", "") != "Healthy" ||
            it->second.value("reason", "").find("not checked: GPU 3 (0000:5d:00.0) lost") ==
                std::string::npos)
          return false;
      }
      return true;
    };
    EXPECT_TRUE(wait_states(d, one_finding, 30s, &last)) << nlohmann::json(last).dump();
    EXPECT_NE(last["accelerator-nvidia-info"]
                  .value("reason", "")
                  .find("GPU 3 (0000:5d:00.0, GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e03, serial "
                        "1652323001003) is lost"),
              std::string::npos)
        << last["accelerator-nvidia-info"].dump();
    EXPECT_EQ(last["accelerator-nvidia-info"]["suggested_actions"]["repair_actions"],
              nlohmann::json::array({"REBOOT_SYSTEM"}));
    int unhealthy = 0;
    for (const auto& [name, st] : last) unhealthy += st.value("health", "") == "Unhealthy";
    EXPECT_EQ(unhealthy, 1) << nlohmann::json(last).dump();
    EXPECT_EQ(last["cpu"].value("health", ""), "Healthy");
    // GPU 3's values are gone (only its health and identity are served), the others' stay, and
    // NVML answers.
    auto values_of_gpu_3 = [](const std::string& text) {
      std::istringstream lines(text);
      int n = 0;
      for (std::string line; std::getline(lines, line);)
        // The per-GPU health and its causes name the lost GPU, and its identity series stays (the
        // Xid counter of the kernel log joins to it); no value of it is left.
        n += line.find("gpu=\"3\"") != std::string::npos &&
             line.rfind("accelerator_nvidia_gpu_health", 0) != 0 &&
             line.rfind("accelerator_nvidia_gpu_info", 0) != 0;
      return n;
    };
    std::string metrics = d.get("/metrics")->body;
    auto end = std::chrono::steady_clock::now() + 10s;
    while (values_of_gpu_3(metrics) != 0 && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(250ms);
      metrics = d.get("/metrics")->body;
    }
    EXPECT_EQ(values_of_gpu_3(metrics), 0) << metrics;
    EXPECT_NE(metrics.find("nvml_pci_bus_id=\"00000000:5D:00.0\",pci_bus_id=\"0000:5d:00.0\",uuid="
                           "\"GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e03\"} 1\n"),
              std::string::npos)
        << metrics;
    EXPECT_NE(metrics.find("accelerator_nvidia_temperature_current_celsius{gpu=\"2\""),
              std::string::npos);
    EXPECT_NE(
        metrics.find("accelerator_nvidia_nvml_up{gpud_component=\"accelerator-nvidia-info\"} 1\n"),
        std::string::npos);
    EXPECT_NE(metrics.find("accelerator_nvidia_gpu_health_cause{component=\"accelerator-nvidia-"
                           "info\",gpu=\"3\",health=\"Unhealthy\""),
              std::string::npos)
        << metrics;
    // Per GPU: GPU 3 alone is Unhealthy, for the info component's finding; the others Healthy.
    auto gpus = parse_json(d.get("/v1/gpus")->body);
    std::ifstream spec_in(std::string(GPUD_SOURCE_DIR) + "/docs/gpud-api-swagger.json");
    auto spec = nlohmann::json::parse(spec_in);
    for (const auto& e :
         swagger::validate(spec, swagger::response_schema(spec, "/v1/gpus", "get", 200), gpus))
      ADD_FAILURE() << e;
    ASSERT_EQ(gpus.size(), 8U) << gpus.dump();
    for (const auto& g : gpus) {
      if (g["index"] != 3) {
        EXPECT_EQ(g["health"], "Healthy") << g.dump();
        continue;
      }
      EXPECT_EQ(g["health"], "Unhealthy") << g.dump();
      EXPECT_EQ(g["uuid"], "GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e03");
      EXPECT_EQ(g["reasons"][0]["component"], "accelerator-nvidia-info") << g.dump();
    }
    end = std::chrono::steady_clock::now() + 10s;
    const std::string lost_series =
        "accelerator_nvidia_gpu_health{gpu=\"3\",health=\"Unhealthy\",pci_bus_id=\"0000:5d:00."
        "0\",uuid=\"GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e03\"} 1\n";
    while (metrics.find(lost_series) == std::string::npos &&
           std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(250ms);
      metrics = d.get("/metrics")->body;
    }
    EXPECT_NE(metrics.find(lost_series), std::string::npos) << metrics;
    d.stop();
  }
  write_atomic(scenario, slurp(fixture("h100x8-healthy.json")));
  DaemonProcess d(dir, fake_args(), true, env);
  ASSERT_TRUE(d.ready()) << d.log();
  EXPECT_TRUE(wait_states(
      d, [](const auto& s) { return all_nvidia(s, "Healthy"); }, 20s, &last))
      << nlohmann::json(last).dump();
  d.stop();
  std::filesystem::remove(scenario);
  std::filesystem::remove_all(dir);
}

TEST(NvmlE2E, HungDriverStopsNeitherHealthzNorHostComponents) {
  std::string dir = make_temp_dir();
  auto args = fake_args();
  args.insert(args.end(), {"--nvml-call-timeout", "200ms"});
  DaemonProcess d(dir, args, true, {"FAKE_NVML_SCENARIO=" + fixture("h100x8-hung-driver.json")});
  ASSERT_TRUE(d.ready()) << d.log();
  std::map<std::string, nlohmann::json> last;
  const std::string report = "nvmlDeviceGetPowerUsage did not return within 200 ms";
  auto one_finding = [&](const auto& s) {
    auto info = s.find("accelerator-nvidia-info");
    if (info == s.end() || info->second.value("health", "") != "Unhealthy" ||
        info->second.value("reason", "").find("GPU 2") == std::string::npos ||
        info->second.value("reason", "").find(report) == std::string::npos)
      return false;
    for (const auto& n : kNvidiaB) {
      auto it = s.find(n);
      if (it == s.end() || it->second.value("health", "") != "Healthy" ||
          it->second.value("reason", "").find("not checked: GPU 2") == std::string::npos)
        return false;
    }
    return true;
  };
  EXPECT_TRUE(wait_states(d, one_finding, 30s, &last)) << nlohmann::json(last).dump();
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto r = d.get("/healthz");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
    std::this_thread::sleep_for(300ms);
  }
  auto s = states(d);
  EXPECT_EQ(s["cpu"].value("health", ""), "Healthy") << s["cpu"].dump();
  EXPECT_EQ(s["memory"].value("health", ""), "Healthy") << s["memory"].dump();
  // Nothing frozen: NVML down, no per-GPU value, and no NVIDIA check ever succeeded.
  std::string metrics = d.get("/metrics")->body;
  EXPECT_NE(
      metrics.find("accelerator_nvidia_nvml_up{gpud_component=\"accelerator-nvidia-info\"} 0\n"),
      std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find("gpu=\""), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gpud_component_last_success_timestamp_seconds{component=\"cpu\"}"),
            std::string::npos);
  EXPECT_EQ(metrics.find("gpud_component_last_success_timestamp_seconds{component=\"accelerator-"
                         "nvidia-info\"}"),
            std::string::npos);
  d.stop();
  std::filesystem::remove_all(dir);
}

// `gpud machine-info` lists the GPUs as /machine-info serves them, from the NVML it is given.
TEST(NvmlE2E, MachineInfoVerbListsTheGpus) {
  setenv("FAKE_NVML_SCENARIO", fixture("h100x8-healthy.json").c_str(), 1);
  auto json = run_gpud({"machine-info", "--json", "--nvml-lib", GPUD_FAKE_NVML});
  auto plain = run_gpud({"machine-info", "--nvml-lib", GPUD_FAKE_NVML});
  unsetenv("FAKE_NVML_SCENARIO");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  auto doc = parse_json(json.out);
  ASSERT_TRUE(doc.is_object()) << json.out;
  ASSERT_EQ(doc["gpuInfo"]["gpus"].size(), 8u) << json.out;
  EXPECT_EQ(doc["gpuInfo"]["product"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_FALSE(doc["gpuInfo"]["gpus"][0]["uuid"].get<std::string>().empty());
  EXPECT_FALSE(doc["gpuDriverVersion"].get<std::string>().empty());
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  const std::string bus = doc["gpuInfo"]["gpus"][7]["busID"].get<std::string>();
  EXPECT_NE(plain.out.find("gpuInfo.gpus[7].busID: " + bus), std::string::npos) << plain.out;

  // No NVML: no GPUs in the document, and the plain listing says why.
  auto none = run_gpud({"machine-info", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1"});
  ASSERT_EQ(none.exit_code, 0) << none.out;
  EXPECT_NE(none.out.find("gpuInfo: none listed (NVML not found"), std::string::npos) << none.out;
}

// A daemon started on a driver whose call hangs serves at once: /healthz within a bound far
// below the call deadline (10 s here, the default), every NVIDIA component Initializing with "not
// checked: NVML is not answering", no GPU in /machine-info. When the driver answers (the stuck
// call returns, and the scenario is healthy by then) the components give their verdicts and
// /machine-info lists the GPUs, without a restart. `make bench` measures the start-up itself.
TEST(NvmlE2E, StartsServingOnAHungDriverAndJudgesOnceItAnswers) {
  std::string dir = make_temp_dir();
  std::string scenario = dir + "-hung.json";
  // GPU 2's power reading takes 6 s: past the checks' answer wait, within the 10 s deadline.
  write_atomic(scenario,
               R"({"count": 8, "gpus": {"2": {"delays_ms": {"nvmlDeviceGetPowerUsage": 6000}}}})");
  DaemonProcess d(dir, {"--nvml-lib", GPUD_FAKE_NVML}, true, {"FAKE_NVML_SCENARIO=" + scenario});
  ASSERT_TRUE(d.ready()) << d.log();
  // The goal is 1 s (bench/run-bench.sh); 3 s leaves room for a loaded 2-core machine, and stays
  // far below the 10 s the first collection used to hold the start for.
  EXPECT_LT(d.ready_ms(), 3000) << d.log();
  std::map<std::string, nlohmann::json> last;
  auto not_answering = [](const auto& s) {
    for (const auto& n : kNvidiaB) {
      auto it = s.find(n);
      if (it == s.end() || it->second.value("health", "") != "Initializing" ||
          it->second.value("reason", "").find("not checked: NVML is not answering") ==
              std::string::npos)
        return false;
    }
    auto info = s.find("accelerator-nvidia-info");
    return info != s.end() && info->second.value("health", "") == "Initializing" &&
           info->second.value("reason", "").find("not checked: NVML is not answering") !=
               std::string::npos;
  };
  ASSERT_TRUE(wait_states(d, not_answering, 5s, &last)) << nlohmann::json(last).dump();
  // The host components are checked meanwhile (the NVIDIA checks hold the scheduler's workers
  // for the answer wait only, not for the call).
  EXPECT_TRUE(eventually(
      [&] { return component_state(d, "cpu").value("health", "Initializing") != "Initializing"; },
      4s))
      << component_state(d, "cpu").dump();
  auto mi = parse_json(d.get("/machine-info")->body);
  EXPECT_TRUE(
      mi.value("gpuInfo", nlohmann::json::object()).value("gpus", nlohmann::json::array()).empty())
      << mi.dump();
  // Nothing read, nothing served: no per-GPU value, NVML down.
  std::string metrics = d.get("/metrics")->body;
  EXPECT_EQ(metrics.find("accelerator_nvidia_temperature_current_celsius{"), std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find("accelerator_nvidia_nvml_up{gpud_component=\"accelerator-nvidia-info\"} 0\n"),
      std::string::npos)
      << metrics;

  // The driver recovers: the stuck call returns at 6 s, and every later call answers at once.
  write_atomic(scenario, slurp(fixture("h100x8-healthy.json")));
  EXPECT_TRUE(wait_states(
      d,
      [](const auto& s) {
        auto info = s.find("accelerator-nvidia-info");
        return all_nvidia(s, "Healthy") && info != s.end() &&
               info->second.value("health", "") == "Healthy";
      },
      30s, &last))
      << nlohmann::json(last).dump();
  for (const auto& n : kNvidiaB)
    EXPECT_EQ(last[n].value("reason", "").find("not checked"), std::string::npos) << last[n].dump();
  EXPECT_TRUE(eventually(
      [&] {
        mi = parse_json(d.get("/machine-info")->body);
        return mi.contains("gpuInfo") && mi["gpuInfo"]["gpus"].size() == 8U;
      },
      10s))
      << mi.dump();
  EXPECT_TRUE(eventually(
      [&] {
        metrics = d.get("/metrics")->body;
        return metrics.find("accelerator_nvidia_temperature_current_celsius{gpu=\"2\"") !=
               std::string::npos;
      },
      10s))
      << metrics;
  EXPECT_EQ(d.stop(), 0) << d.log();
  std::filesystem::remove(scenario);
  std::filesystem::remove_all(dir);
}

// With the default 10 s deadline the hung driver's 15 s call is cut at the deadline: the scan
// ends within deadline + 2 s, exits 1, and prints the root cause first. The warning logged at
// shutdown (the call is still stuck) follows the whole report, even with stdout and stderr in one
// file.
TEST(NvmlE2E, ScanOnAHungDriverEndsWithinTheDefaultDeadline) {
  setenv("FAKE_NVML_SCENARIO", fixture("h100x8-hung-driver.json").c_str(), 1);
  auto start = std::chrono::steady_clock::now();
  auto r = run_gpud({"scan", "--nvml-lib", GPUD_FAKE_NVML}, 30);
  auto took = std::chrono::steady_clock::now() - start;
  unsetenv("FAKE_NVML_SCENARIO");
  // Deadline + 2 s; a sanitizer build starts and runs several times slower, so it gets 5 s.
#if defined(GPUD_SANITIZED)
  EXPECT_LT(took, 15s);
#else
  EXPECT_LT(took, 12s);
#endif
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const std::string root =
      "Root cause: accelerator-nvidia-info: GPU 2: nvmlDeviceGetPowerUsage did not return within "
      "10 s";
  EXPECT_NE(r.out.find(root), std::string::npos) << r.out;
  EXPECT_LT(r.out.find(root), r.out.find("accelerator-nvidia-temperature")) << r.out;
  const size_t stuck = r.out.find("NVML worker still stuck in a driver call at shutdown");
  ASSERT_NE(stuck, std::string::npos) << r.out;
  size_t last_row = 0;
  for (const char* mark : {"\n✔ ", "\n✘ ", "\n⊘ "})
    if (size_t at = r.out.rfind(mark); at != std::string::npos) last_row = std::max(last_row, at);
  EXPECT_GT(stuck, last_row) << r.out;
}

// NVIDIA expected (--gpu-count 8) but no NVML library: the scan names it as the root cause,
// exits 1.
TEST(NvmlE2E, ScanWithGpusExpectedButNoNvmlExitsOne) {
  auto r = run_gpud({"scan", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "--gpu-count", "8",
                     "--log-level", "error"},
                    30);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("Root cause: accelerator-nvidia-info: NVIDIA GPUs expected (--gpu-count 8) "
                       "but NVML is not usable: NVML not found: "),
            std::string::npos)
      << r.out;
  // Without the expectation (and no NVIDIA device here) the same node is not a GPU node.
  auto plain = run_gpud({"scan", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "--log-level",
                         "error", "--components", "accelerator-nvidia-info,cpu"},
                        30);
  EXPECT_EQ(plain.out.find("accelerator-nvidia-info"), std::string::npos) << plain.out;
}

// The driver not loaded at start on a node that expects GPUs: Unhealthy, and the daemon recovers on
// its own once the driver loads (NVML is tried again every 30 s there).
TEST(NvmlE2E, ADriverLoadedLaterIsPickedUpWithoutARestart) {
  std::string dir = make_temp_dir();
  std::string scenario = dir + "-nodriver.json";
  write_atomic(scenario, R"({"count": 8, "errors": {"nvmlInit": "DRIVER_NOT_LOADED"}})");
  auto args = fake_args();
  args.insert(args.end(), {"--gpu-count", "8"});
  DaemonProcess d(dir, args, true, {"FAKE_NVML_SCENARIO=" + scenario});
  ASSERT_TRUE(d.ready()) << d.log();
  std::map<std::string, nlohmann::json> last;
  EXPECT_TRUE(wait_states(
      d,
      [](const auto& s) {
        auto it = s.find("accelerator-nvidia-info");
        return it != s.end() && it->second.value("health", "") == "Unhealthy" &&
               it->second.value("reason", "").find("Driver Not Loaded") != std::string::npos;
      },
      15s, &last))
      << nlohmann::json(last).dump();
  write_atomic(scenario, slurp(fixture("h100x8-healthy.json")));
  EXPECT_TRUE(wait_states(
      d,
      [](const auto& s) {
        auto it = s.find("accelerator-nvidia-info");
        return it != s.end() && it->second.value("health", "") == "Healthy" &&
               all_nvidia(s, "Healthy");
      },
      50s, &last))
      << nlohmann::json(last).dump();
  // Machine info has the GPUs once NVML answered its first collection (usually before /healthz;
  // on a loaded machine the start may not wait that long).
  nlohmann::json mi = machine_info_with_eight_gpus(d);
  d.stop();
  std::filesystem::remove(scenario);
  std::filesystem::remove_all(dir);
}

// A driver whose init does not return: the daemon serves /healthz and the API meanwhile, the NVIDIA
// components read Initializing, then the init's own finding names the call.
TEST(NvmlE2E, TheApiAnswersWhileNvmlInitIsPending) {
  std::string dir = make_temp_dir();
  std::string scenario = dir + "-inithang.json";
  write_atomic(scenario, R"({"count": 8, "delays_ms": {"nvmlInit": 15000}})");
  auto args = fake_args();
  args.insert(args.end(), {"--nvml-call-timeout", "8s"});
  auto start = std::chrono::steady_clock::now();
  DaemonProcess d(dir, args, true, {"FAKE_NVML_SCENARIO=" + scenario});
  ASSERT_TRUE(d.ready()) << d.log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 7s);
  std::map<std::string, nlohmann::json> last;
  EXPECT_TRUE(wait_states(
      d,
      [](const auto& s) {
        auto it = s.find("accelerator-nvidia-info");
        return it != s.end() && it->second.value("health", "") == "Initializing" &&
               s.count("cpu") == 1;
      },
      5s, &last))
      << nlohmann::json(last).dump();
  EXPECT_TRUE(wait_states(
      d,
      [](const auto& s) {
        auto it = s.find("accelerator-nvidia-info");
        return it != s.end() && it->second.value("health", "") == "Unhealthy" &&
               it->second.value("reason", "").find("did not return within 8 s") !=
                   std::string::npos;
      },
      20s, &last))
      << nlohmann::json(last).dump();
  d.stop();
  std::filesystem::remove(scenario);
  std::filesystem::remove_all(dir);
}

// The NVML event path end to end: an Xid the fake driver queues for GPU 5 is delivered by
// nvmlEventSetWait to the daemon's watcher and recorded as an accelerator-nvidia-error-xid event
// with the code, the GPU's UUID and bus id, and source "nvml" (kernel-log Xids carry no source).
TEST(NvmlE2E, XidFromNvmlEventsBecomesAnXidEvent) {
  std::string dir = make_temp_dir();
  std::string scenario = dir + "-scenario.json";
  auto doc = parse_json(slurp(fixture("h100x8-healthy.json")));
  // GPU 5's identity as the fake generates it (testing/fake_nvml/README.md).
  const std::string uuid = "GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e05";
  doc["xid_events"] = nlohmann::json::array({{{"gpu", 5}, {"xid", 94}}});
  write_atomic(scenario, doc.dump());
  DaemonProcess d(dir, fake_args(), true, {"FAKE_NVML_SCENARIO=" + scenario});
  ASSERT_TRUE(d.ready()) << d.log();
  nlohmann::json found;
  auto end = std::chrono::steady_clock::now() + 20s;
  while (found.is_null() && std::chrono::steady_clock::now() < end) {
    auto r = d.get("/v1/events?components=accelerator-nvidia-error-xid");
    if (r && r->status == 200) {
      for (const auto& c : parse_json(r->body))
        for (const auto& e : c.value("events", nlohmann::json::array())) {
          const auto& x = e.value("extra_info", nlohmann::json::object());
          if (x.value("source", "") == "nvml" && x.value("gpu_uuid", "") == uuid) found = e;
        }
    }
    if (found.is_null()) std::this_thread::sleep_for(250ms);
  }
  ASSERT_FALSE(found.is_null()) << d.log();
  const auto& x = found["extra_info"];
  EXPECT_EQ(x.value("xid", nlohmann::json()), 94) << found.dump();
  EXPECT_EQ(x.value("pci_bus_id", ""), "0000:ab:00.0") << found.dump();
  EXPECT_NE(d.get("/metrics")->body.find("accelerator_nvidia_xid_errors_total{"),
            std::string::npos);
  d.stop();
  std::filesystem::remove(scenario);
  std::filesystem::remove_all(dir);
}

// scripts/device-check.sh's comparison logic, with a fake nvidia-smi: a saved scan (every field),
// then the real `gpud scan --json` on the fake NVML (fields other components own may be missing).
int run_shell(const std::string& cmd, std::string* out) {
  std::string path = make_temp_dir() + "/out";
  int rc = std::system((cmd + " >" + path + " 2>&1").c_str());
  *out = slurp(path);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(DeviceCheckScript, ComparesSavedScanWithNvidiaSmi) {
  std::string src = GPUD_SOURCE_DIR;
  std::string base = "SCAN_JSON=" + src +
                     "/testing/fixtures/device-check/scan.json NVIDIA_SMI=" + src +
                     "/testing/fixtures/device-check/nvidia-smi ";
  std::string out;
  EXPECT_EQ(run_shell(base + "bash " + src + "/scripts/device-check.sh", &out), 0) << out;
  EXPECT_NE(out.find("2 GPU(s), 0 difference(s)"), std::string::npos) << out;
  EXPECT_EQ(
      run_shell("FAKE_SMI_TEMP_OFFSET=10 " + base + "bash " + src + "/scripts/device-check.sh",
                &out),
      1)
      << out;
  EXPECT_NE(out.find("temp_c        45"), std::string::npos) << out;
  EXPECT_NE(out.find("DIFF"), std::string::npos) << out;
}

TEST(DeviceCheckScript, RunsGpudScanOnTheFakeDriver) {
  std::string dir = make_temp_dir();
  std::string smi = dir + "/nvidia-smi";
  {
    std::ofstream out(smi);
    out << "#!/bin/sh\n";
    const char* bus[] = {"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"};
    for (int i = 0; i < 8; ++i)
      out << "echo '" << i << ", NVIDIA H100 80GB HBM3, GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e0"
          << i << ", 00000000:" << bus[i]
          << ":00.0, 34, 71.00, 81559, Enabled, Enabled, 345, 2619'\n";
  }
  std::filesystem::permissions(smi, std::filesystem::perms::owner_all);
  std::string src = GPUD_SOURCE_DIR;
  std::string out;
  int rc = run_shell(
      "cd " + src +
          " && GPUD_KMSG_PATH=/dev/null DEVICE_CHECK_ALLOW_MISSING=1 GPUD=" GPUD_BINARY
          " GPUD_NVML_LIBRARY_PATH=" GPUD_FAKE_NVML " FAKE_NVML_SCENARIO=" +
          fixture("h100x8-healthy.json") + " NVIDIA_SMI=" + smi + " bash scripts/device-check.sh",
      &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("8 GPU(s), 0 difference(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("persistence   Enabled"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpud::e2e
