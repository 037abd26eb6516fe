// End-to-end: Debian's Prometheus scrapes gpud (fake NVML, eight H100s, GPU 1 busy) with the
// shipped dcgm-exporter compatibility rules (deploy/prometheus/dcgm-compat-rules.yml). The
// DCGM_FI_PROF_* and energy series come from the fake library's GPM and energy entry points through
// gpud; then GPU 3 falls off the bus (NVML answers GPU_IS_LOST, an Xid 79 in the kernel log) and
// DCGM_FI_DEV_XID_ERRORS stays for it, with its identity labels, while its readings go.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/e2e/daemon_process.h"
#include "tests/e2e/prometheus_stack.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr const char* kPrometheus = "/usr/bin/prometheus";

// Replaces the scenario file the fake library follows, atomically.
void use_scenario(const std::string& source_dir, const char* fixture, const std::string& path) {
  std::filesystem::copy_file(source_dir + "/testing/fixtures/nvml/" + fixture, path + ".tmp",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(path + ".tmp", path);
}

TEST(PrometheusE2E, DcgmSeriesFromGpmAndEnergyAndXidErrorsOfALostGpu) {
  if (!std::filesystem::exists(kPrometheus))
    GTEST_SKIP() << kPrometheus
                 << " not installed (scripts/install-deps.sh installs Debian's prometheus)";
  const std::string source_dir = GPUD_SOURCE_DIR;
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  TempDirGuard remove_dir{dir};  // declared first: runs after the processes are gone
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream(kmsg).flush(); }
  const std::string scenario = dir + "/scenario.json";
  use_scenario(source_dir, "h100x8-busy.json", scenario);
  DaemonProcess gpud(dir + "/data", {"--nvml-lib", GPUD_FAKE_NVML, "--nvidia-check-interval", "1s"},
                     true, {"FAKE_NVML_SCENARIO=" + scenario, "GPUD_KMSG_PATH=" + kmsg});
  ASSERT_TRUE(gpud.ready()) << gpud.log();

  const int prom_port = free_port();
  std::ofstream(dir + "/prometheus.yml")
      << one_gpud_prometheus_config({source_dir + "/deploy/prometheus/dcgm-compat-rules.yml"},
                                    dir + "/data", gpud.port(), "node-1");
  ChildProcess prometheus(prometheus_command(kPrometheus, dir, prom_port), dir + "/prometheus.log");
  PrometheusApi api(prom_port);
  auto logs = [&] { return gpud.log() + "\nprometheus:\n" + read_file(dir + "/prometheus.log"); };

  // GPU 1's GPM values (from the second GPM check on) and its energy, as DCGM writes them.
  const std::string gpu1 = "{gpu=\"1\",node=\"node-1\"}";
  ASSERT_TRUE(wait_until(std::chrono::steady_clock::now() + 90s, [&] {
    return !prometheus.running() ||
           (api.query("DCGM_FI_PROF_PCIE_TX_BYTES" + gpu1).size() == 1 &&
            api.query("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" + gpu1).size() == 1);
  })) << logs();
  ASSERT_TRUE(prometheus.running()) << logs();
  auto one = [&](const std::string& promql) {
    Json r = api.query(promql);
    EXPECT_EQ(r.size(), 1u) << promql << ": " << r.dump();
    return r.size() == 1 ? r[0] : Json::object();
  };
  const Json tx = one("DCGM_FI_PROF_PCIE_TX_BYTES" + gpu1);
  EXPECT_EQ(value_of(tx), 1536.0 * 1048576);  // the fake's 1536 MiB/s
  const Json& labels = tx["metric"];
  EXPECT_EQ(labels.value("pci_bus_id", ""), "00000000:2A:00.0");
  EXPECT_EQ(labels.value("UUID", ""), "GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e01");
  EXPECT_EQ(labels.value("modelName", ""), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(labels.value("device", ""), "nvidia1");
  EXPECT_EQ(labels.value("Hostname", ""), "node-1");
  EXPECT_EQ(labels.value("hostname", ""), "node-1");
  EXPECT_EQ(labels.value("DCGM_FI_DRIVER_VERSION", ""), "550.54.15");
  EXPECT_EQ(value_of(one("DCGM_FI_PROF_PCIE_RX_BYTES" + gpu1)), 24.5 * 1048576);
  EXPECT_DOUBLE_EQ(value_of(one("DCGM_FI_PROF_GR_ENGINE_ACTIVE" + gpu1)), 0.97);
  EXPECT_DOUBLE_EQ(value_of(one("DCGM_FI_PROF_SM_ACTIVE" + gpu1)), 0.88);
  EXPECT_DOUBLE_EQ(value_of(one("DCGM_FI_PROF_SM_OCCUPANCY" + gpu1)), 0.485);
  EXPECT_DOUBLE_EQ(value_of(one("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" + gpu1)), 0.6125);
  EXPECT_DOUBLE_EQ(value_of(one("DCGM_FI_PROF_DRAM_ACTIVE" + gpu1)), 0.425);
  EXPECT_EQ(value_of(one("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" + gpu1)), 93500000123.0);
  EXPECT_EQ(value_of(one("DCGM_FI_DEV_POWER_USAGE" + gpu1)), 612);

  // GPU 3 falls off the bus: NVML answers GPU_IS_LOST for it and the kernel logs Xid 79.
  const std::string gpu3 = "{gpu=\"3\",node=\"node-1\"}";
  ASSERT_EQ(api.query("DCGM_FI_DEV_GPU_TEMP" + gpu3).size(), 1u);
  use_scenario(source_dir, "h100x8-gpu-lost.json", scenario);
  std::ofstream(kmsg, std::ios::app) << xid_kmsg_record(1, "0000:5d:00.0", 79);
  // None of the lost GPU's readings stays at its last value: each is gone once the component that
  // publishes it has checked again. Each component checks on its own 1 s schedule, so one scrape
  // may still hold some of them: what is waited for is every one gone, with the Xid.
  const std::vector<std::string> readings = {
      "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
      "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED"};
  auto still_read = [&] {
    std::string out;
    for (const auto& field : readings)
      if (!api.query(field + gpu3).empty()) out += field + " ";
    return out;
  };
  ASSERT_TRUE(wait_until(std::chrono::steady_clock::now() + 60s,
                         [&] {
                           return api.query("DCGM_FI_DEV_XID_ERRORS" + gpu3 + " == 79").size() ==
                                      1 &&
                                  still_read().empty();
                         }))
      << "still read of GPU 3: " << still_read() << "\n"
      << api.query("DCGM_FI_DEV_XID_ERRORS").dump() << "\n"
      << logs();
  const Json xid = one("DCGM_FI_DEV_XID_ERRORS" + gpu3);
  EXPECT_EQ(xid["metric"].value("UUID", ""), "GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e03");
  EXPECT_EQ(xid["metric"].value("pci_bus_id", ""), "00000000:5D:00.0");
  EXPECT_EQ(xid["metric"].value("modelName", ""), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(xid["metric"].value("Hostname", ""), "node-1");
  EXPECT_EQ(xid["metric"].value("DCGM_FI_DRIVER_VERSION", ""), "550.54.15");
  // The other GPUs' readings go on.
  EXPECT_EQ(api.query("DCGM_FI_DEV_XID_ERRORS{node=\"node-1\"}").size(), 8u);
  EXPECT_EQ(api.query("DCGM_FI_DEV_GPU_TEMP{node=\"node-1\"}").size(), 7u);

  prometheus.stop();
  EXPECT_EQ(gpud.stop(), 0) << gpud.log();
}

}  // namespace
}  // namespace gpud::e2e
