// Loads the fake libnvidia-ml.so.1 through the production dlopen path for every shipped scenario.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "nvml/device.h"
#include "nvml/gpm.h"
#include "nvml/loader.h"
#include "nvml/source.h"
#include "nvml/xid_watcher.h"

namespace gpud::nvml {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

std::string fixture(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/nvml/" + name;
}

std::unique_ptr<Nvml> open_fake(const std::string& scenario_path, bool legacy = false,
                                std::chrono::milliseconds deadline = 5s) {
  setenv("FAKE_NVML_SCENARIO", scenario_path.c_str(), 1);
  OpenOptions o;
  o.library_path = legacy ? GPUD_FAKE_NVML_LEGACY : GPUD_FAKE_NVML;
  o.deadline = deadline;
  return Nvml::open(o);
}

NvmlSnapshot collect_ok(const std::string& scenario, bool legacy = false) {
  auto nvml = open_fake(fixture(scenario), legacy);
  EXPECT_EQ(nvml->status(), NvmlStatus::kReady) << nvml->message();
  auto s = collect(*nvml, 5s);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return s.ok() ? std::move(s).value() : NvmlSnapshot{};
}

TEST(NvmlLoader, MissingLibraryIsNotFoundNotAnError) {
  OpenOptions o;
  o.library_path = "/nonexistent/libnvidia-ml.so.1";
  o.deadline = 1s;
  auto nvml = Nvml::open(o);
  EXPECT_EQ(nvml->status(), NvmlStatus::kNotFound);
  EXPECT_EQ(nvml->message().rfind("NVML not found", 0), 0U) << nvml->message();
  EXPECT_FALSE(collect(*nvml).ok());
}

TEST(NvmlLoader, LibraryPathFromEnvironment) {
  // The library reads no environment: app/ resolves $GPUD_NVML_LIBRARY_PATH into the path it
  // passes down.
  setenv("GPUD_NVML_LIBRARY_PATH", "/opt/x/libnvidia-ml.so.1", 1);
  EXPECT_EQ(resolve_library_path(""), kDefaultLibraryName);
  EXPECT_EQ(resolve_library_path("/explicit.so"), "/explicit.so");
  unsetenv("GPUD_NVML_LIBRARY_PATH");
}

TEST(NvmlLoader, LooksUnderTheDriverRootsWhenNoPathIsGiven) {
  auto root =
      std::filesystem::temp_directory_path() / ("gpud-driver-root-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  // A GPU Operator node: the driver container's root at /run/nvidia/driver, RHEL-style lib64.
  const auto driver = root / "run/nvidia/driver";
  std::filesystem::create_directories(driver / "usr/lib64");
  std::filesystem::create_symlink(GPUD_FAKE_NVML, driver / "usr/lib64/libnvidia-ml.so.1");
  const std::string expected = (driver / "usr/lib64/libnvidia-ml.so.1").string();
  EXPECT_EQ(resolve_library_path("", {"/nonexistent", driver.string()}), expected);
  EXPECT_EQ(resolve_library_path("/explicit.so", {driver.string()}), "/explicit.so");
  EXPECT_EQ(resolve_library_path("", {"/nonexistent"}), kDefaultLibraryName);

  setenv("FAKE_NVML_SCENARIO", fixture("h100x8-healthy.json").c_str(), 1);
  OpenOptions o;
  o.driver_roots = {(root / "absent").string(), driver.string()};
  auto nvml = Nvml::open(o);
  EXPECT_EQ(nvml->status(), NvmlStatus::kReady) << nvml->message();
  EXPECT_EQ(nvml->library_path(), expected);
  nvml.reset();
  std::filesystem::remove_all(root);
}

std::string write_temp(const std::string& name, const std::string& body) {
  auto dir = std::filesystem::temp_directory_path() / ("gpud-nvml-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto tmp = dir / (name + ".tmp");
  auto path = dir / name;
  {
    std::ofstream out(tmp);
    out << body;
  }
  std::filesystem::rename(tmp, path);  // atomic, so the fake never reads half a file
  return path.string();
}

TEST(NvmlLoader, DriverNotLoadedIsNotFound) {
  auto nvml = open_fake(
      write_temp("nodriver.json", R"({"count": 8, "errors": {"nvmlInit": "DRIVER_NOT_LOADED"}})"));
  EXPECT_EQ(nvml->status(), NvmlStatus::kNotFound) << nvml->message();
  EXPECT_EQ(nvml->init_return(), NVML_ERROR_DRIVER_NOT_LOADED);
}

TEST(NvmlLoader, AnInitThatDoesNotReturnIsNamed) {
  auto start = SteadyClock::now();
  auto nvml =
      open_fake(write_temp("inithang.json", R"({"count": 8, "delays_ms": {"nvmlInit": 1500}})"),
                false, 300ms);
  EXPECT_LT(SteadyClock::now() - start, 1s);
  EXPECT_EQ(nvml->status(), NvmlStatus::kErrored);
  EXPECT_EQ(nvml->message(),
            "NVML initialization error: NVML: nvmlInit_v2 did not return within 300 ms");
  // Let the sleeping init return before the next test changes the fake's scenario.
  for (int i = 0; i < 300 && nvml->worker().stuck(); ++i) std::this_thread::sleep_for(10ms);
}

TEST(NvmlLoader, EnumerationFailureIsErrored) {
  auto nvml = open_fake(
      write_temp("enum.json", R"({"count": 8, "errors": {"nvmlDeviceGetCount": "UNKNOWN"}})"));
  EXPECT_EQ(nvml->status(), NvmlStatus::kErrored);
  EXPECT_NE(nvml->message().find("NVML initialization error"), std::string::npos)
      << nvml->message();
}

TEST(NvmlLoader, ResolvesVersionedSymbolsFirst) {
  auto nvml = open_fake(fixture("h100x8-healthy.json"));
  ASSERT_TRUE(nvml->ready()) << nvml->message();
  const auto& r = nvml->library()->api.resolved;
  EXPECT_EQ(r.at("init"), "nvmlInit_v2");
  EXPECT_EQ(r.at("device_count"), "nvmlDeviceGetCount_v2");
  EXPECT_EQ(r.at("handle_by_index"), "nvmlDeviceGetHandleByIndex_v2");
  EXPECT_EQ(r.at("pci_info"), "nvmlDeviceGetPciInfo_v3");
  EXPECT_EQ(r.at("compute_processes"), "nvmlDeviceGetComputeRunningProcesses_v3");
  EXPECT_EQ(r.at("event_set_wait"), "nvmlEventSetWait_v2");
  EXPECT_EQ(r.at("clocks_event_reasons"), "nvmlDeviceGetCurrentClocksEventReasons");
  EXPECT_EQ(nvml->driver().driver_version, "550.54.15");
  EXPECT_EQ(nvml->driver().driver_major, 550);
  EXPECT_EQ(nvml->driver().cuda_version(), "12.4");
  EXPECT_EQ(nvml->devices().size(), 8U);
}

TEST(NvmlLoader, LegacyDriverUsesFallbackSymbols) {
  auto nvml = open_fake(fixture("h100x8-healthy.json"), /*legacy=*/true);
  ASSERT_TRUE(nvml->ready()) << nvml->message();
  const auto& api = nvml->library()->api;
  EXPECT_EQ(api.resolved.at("init"), "nvmlInit");
  EXPECT_EQ(api.resolved.at("pci_info"), "nvmlDeviceGetPciInfo");
  EXPECT_EQ(api.resolved.at("event_set_wait"), "nvmlEventSetWait");
  EXPECT_EQ(api.resolved.at("clocks_event_reasons"), "nvmlDeviceGetCurrentClocksThrottleReasons");
  EXPECT_EQ(api.compute_processes, nullptr);
  EXPECT_NE(api.compute_processes_v1, nullptr);
  EXPECT_EQ(api.gpm_query_device_support, nullptr);
  EXPECT_EQ(api.fabric_info_v, nullptr);

  auto s = collect(*nvml, 5s);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->gpus.size(), 8U);
  const GpuSnapshot& g = s->gpus[0];
  EXPECT_EQ(g.pci_bus_id.value, "0000:18:00.0");  // from the legacy 16-byte bus id
  EXPECT_EQ(g.temperature_c.value, 34);           // deprecated GetTemperature
  ASSERT_TRUE(g.memory.ok());                     // v1 memory info
  EXPECT_EQ(g.memory.value.total_bytes, 85520809984ULL);
  EXPECT_TRUE(g.processes.ok());
  EXPECT_EQ(g.gpm_supported.status, FieldStatus::kNotSupported);
  EXPECT_EQ(g.fabric.status, FieldStatus::kNotSupported);
  EXPECT_TRUE(g.clocks_event_reasons.ok());
}

void expect_common_h100(const NvmlSnapshot& s) {
  ASSERT_EQ(s.gpus.size(), 8U);
  const char* buses[] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                         "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};
  for (unsigned int i = 0; i < 8; ++i) {
    const GpuSnapshot& g = s.gpus[i];
    EXPECT_EQ(g.index, i);
    if (g.lost) continue;
    EXPECT_EQ(g.name.value, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(g.uuid.value.rfind("GPU-", 0), 0U);
    EXPECT_EQ(g.pci_bus_id.value, buses[i]);
    EXPECT_EQ(g.minor_number.value, i);
    EXPECT_EQ(g.architecture, "hopper");
  }
}

TEST(NvmlSnapshotH100, HealthyReadsEveryField) {
  auto s = collect_ok("h100x8-healthy.json");
  expect_common_h100(s);
  EXPECT_EQ(s.driver.driver_version, "550.54.15");
  const GpuSnapshot& g = s.gpus[0];
  EXPECT_EQ(g.uuid.value, "GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e00");
  EXPECT_TRUE(g.serial.ok());
  EXPECT_TRUE(g.board_id.ok());
  EXPECT_EQ(g.brand.value, NVML_BRAND_TESLA);
  EXPECT_EQ(g.temperature_c.value, 34);
  EXPECT_EQ(g.temperature_hbm_c.value, 32);
  EXPECT_EQ(g.margin_temperature_c.value, 55);
  EXPECT_EQ(g.threshold_shutdown_c.value, 92U);
  EXPECT_EQ(g.threshold_slowdown_c.value, 89U);
  EXPECT_EQ(g.threshold_mem_max_c.value, 95U);
  EXPECT_EQ(g.threshold_gpu_max_c.value, 87U);
  EXPECT_EQ(g.power_usage_mw.value, 71000U);
  EXPECT_EQ(g.power_enforced_limit_mw.value, 700000U);
  EXPECT_EQ(g.clock_memory_mhz.value, 2619U);
  EXPECT_TRUE(g.clock_sm_mhz.ok());
  EXPECT_EQ(g.clocks_event_reasons.value, nvmlClocksEventReasonGpuIdle);
  EXPECT_EQ(g.memory.value.reserved_bytes, 567279616ULL);
  EXPECT_EQ(g.memory.value.free_bytes, 85520809984ULL - 567279616ULL);
  EXPECT_TRUE(g.utilization.ok());
  EXPECT_TRUE(g.ecc_mode.value.current);
  EXPECT_TRUE(g.ecc_total.ok());
  EXPECT_TRUE(g.ecc_by_location[NVML_MEMORY_LOCATION_DRAM].ok());
  EXPECT_EQ(g.ecc_by_location[NVML_MEMORY_LOCATION_CBU].status, FieldStatus::kNotSupported);
  EXPECT_TRUE(g.remapped_rows.ok());
  EXPECT_FALSE(g.remapped_rows.value.pending);
  EXPECT_EQ(g.retired_pages.status, FieldStatus::kNotSupported);
  EXPECT_TRUE(g.persistence_mode.value);
  EXPECT_TRUE(g.processes.ok());
  ASSERT_TRUE(g.nvlinks.ok());
  EXPECT_EQ(g.nvlinks.value.size(), 18U);
  for (const auto& l : g.nvlinks.value) EXPECT_TRUE(l.active.value);
  EXPECT_EQ(g.pcie.gen_current.value, 5U);
  EXPECT_EQ(g.pcie.width_max.value, 16U);
  EXPECT_TRUE(g.pcie.replay_counter.ok());
  EXPECT_TRUE(g.gsp.enabled.value);
  EXPECT_EQ(g.gsp.version.value, "550.54.15");
  ASSERT_TRUE(g.fabric.ok());
  EXPECT_EQ(g.fabric.value.version, 3);
  EXPECT_EQ(g.fabric.value.state, NVML_GPU_FABRIC_STATE_COMPLETED);
  EXPECT_EQ(g.fabric.value.clique_id, 32766U);
  EXPECT_EQ(g.fabric.value.cluster_uuid, "7d2f9a31-0c4e-4b8a-9f61-2e5d8c1b3a70");
  EXPECT_EQ(g.fabric.value.health_summary, NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY);
  EXPECT_FALSE(g.fabric.value.health_degraded_bandwidth());
  EXPECT_TRUE(g.gpm_supported.value);
  EXPECT_FALSE(g.lost);
  EXPECT_FALSE(g.reset_required);
}

TEST(NvmlSnapshotA100, HealthyAmpereWithoutFabricState) {
  auto s = collect_ok("a100x8-healthy.json");
  ASSERT_EQ(s.gpus.size(), 8U);
  EXPECT_EQ(s.driver.cuda_version(), "12.2");
  for (const auto& g : s.gpus) {
    EXPECT_EQ(g.name.value, "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(g.architecture, "ampere");
    EXPECT_EQ(g.fabric.status, FieldStatus::kNotSupported);
    EXPECT_EQ(g.margin_temperature_c.status, FieldStatus::kNotSupported);
    EXPECT_EQ(g.nvlinks.value.size(), 12U);
    EXPECT_FALSE(g.gpm_supported.value);
  }
}

TEST(NvmlSnapshotH100, RowRemapPendingVisible) {
  auto s = collect_ok("h100x8-row-remap-pending.json");
  expect_common_h100(s);
  EXPECT_TRUE(s.gpus[2].remapped_rows.value.pending);
  EXPECT_FALSE(s.gpus[2].remapped_rows.value.failure);
  EXPECT_EQ(s.gpus[2].ecc_total.value.volatile_uncorrected, 1U);
  EXPECT_EQ(s.gpus[2].ecc_by_location[NVML_MEMORY_LOCATION_DRAM].value.volatile_uncorrected, 1U);
  EXPECT_FALSE(s.gpus[1].remapped_rows.value.pending);
}

TEST(NvmlSnapshotH100, RowRemapFailureVisible) {
  auto s = collect_ok("h100x8-row-remap-failed.json");
  expect_common_h100(s);
  EXPECT_TRUE(s.gpus[5].remapped_rows.value.failure);
  EXPECT_EQ(s.gpus[5].remapped_rows.value.uncorrected, 8U);
}

TEST(NvmlSnapshotH100, HwSlowdownBitsVisible) {
  auto s = collect_ok("h100x8-hw-slowdown.json");
  expect_common_h100(s);
  EXPECT_TRUE(s.gpus[1].clocks_event_reasons.value & nvmlClocksThrottleReasonHwSlowdown);
  EXPECT_EQ(hw_slowdown_reasons(s.gpus[1].clocks_event_reasons.value),
            std::vector<std::string>{"HW Slowdown"});
  EXPECT_EQ(hw_slowdown_reasons(s.gpus[6].clocks_event_reasons.value).size(), 2U);
  EXPECT_EQ(s.gpus[0].clocks_event_reasons.value & kClocksEventReasonsHwSlowdownMask, 0U);
}

TEST(NvmlSnapshotH100, GpuLostFlagged) {
  auto s = collect_ok("h100x8-gpu-lost.json");
  expect_common_h100(s);
  const GpuSnapshot& g = s.gpus[3];
  EXPECT_TRUE(g.lost);
  EXPECT_EQ(g.temperature_c.status, FieldStatus::kError);
  EXPECT_EQ(g.temperature_c.ret, NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(g.temperature_c.error, "GPU is lost");
  EXPECT_FALSE(s.gpus[2].lost);
}

TEST(NvmlSnapshotH100, HbmOverheatVisible) {
  auto s = collect_ok("h100x8-hbm-overheat.json");
  expect_common_h100(s);
  const GpuSnapshot& g = s.gpus[4];
  EXPECT_GT(static_cast<unsigned int>(g.temperature_hbm_c.value), g.threshold_mem_max_c.value);
  EXPECT_EQ(g.margin_temperature_c.value, 18);
}

TEST(NvmlSnapshotH100, NvLinkDownVisible) {
  auto s = collect_ok("h100x8-nvlink-down.json");
  expect_common_h100(s);
  const auto& links = s.gpus[0].nvlinks.value;
  ASSERT_EQ(links.size(), 18U);
  EXPECT_FALSE(links[3].active.value);
  EXPECT_FALSE(links[7].active.value);
  EXPECT_TRUE(links[4].active.value);
  EXPECT_EQ(links[3].replay_errors.value, 1200U);
  EXPECT_EQ(links[3].crc_flit_errors.value, 77U);
}

TEST(NvmlSnapshotH100, PersistenceOffVisible) {
  auto s = collect_ok("h100x8-persistence-off.json");
  expect_common_h100(s);
  for (const auto& g : s.gpus) {
    EXPECT_TRUE(g.persistence_mode.ok());
    EXPECT_FALSE(g.persistence_mode.value);
  }
}

TEST(NvmlSnapshotH100, FabricDegradedVisible) {
  auto s = collect_ok("h100x8-fabric-degraded.json");
  expect_common_h100(s);
  EXPECT_TRUE(s.gpus[7].fabric.value.health_degraded_bandwidth());
  EXPECT_EQ(s.gpus[7].fabric.value.health_summary, NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY);
  EXPECT_EQ(s.gpus[6].fabric.value.state, NVML_GPU_FABRIC_STATE_IN_PROGRESS);
  EXPECT_FALSE(s.gpus[0].fabric.value.health_degraded_bandwidth());
}

TEST(NvmlSnapshotRtx4090, ConsumerGpuFeaturesNotSupported) {
  auto s = collect_ok("rtx4090x1-no-ecc.json");
  ASSERT_EQ(s.gpus.size(), 1U);
  const GpuSnapshot& g = s.gpus[0];
  EXPECT_EQ(g.name.value, "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(g.pci_bus_id.value, "0000:01:00.0");
  EXPECT_EQ(g.architecture, "ada-lovelace");
  EXPECT_EQ(g.brand.value, NVML_BRAND_GEFORCE);
  for (FieldStatus st :
       {g.ecc_mode.status, g.ecc_total.status, g.remapped_rows.status, g.retired_pages.status,
        g.persistence_mode.status, g.nvlinks.status, g.fabric.status, g.gsp.enabled.status,
        g.temperature_hbm_c.status, g.margin_temperature_c.status, g.threshold_mem_max_c.status}) {
    EXPECT_EQ(st, FieldStatus::kNotSupported);
  }
  for (const auto& f : g.ecc_by_location) EXPECT_EQ(f.status, FieldStatus::kNotSupported);
  EXPECT_TRUE(g.temperature_c.ok());
  ASSERT_EQ(g.processes.value.size(), 1U);
  EXPECT_EQ(g.processes.value[0].pid, 4242U);
  EXPECT_EQ(g.processes.value[0].used_memory_bytes, 512000000U);
  EXPECT_FALSE(g.lost);
}

// The graphics list adds to the compute one: a process in both is one entry (C+G), a graphics-only
// one (Xorg) is added; a GPU without the graphics list keeps its compute list, and a graphics list
// that fails otherwise leaves the processes unread rather than partial.
TEST(NvmlSnapshotProcesses, ComputeAndGraphicsListsMerge) {
  auto nvml = open_fake(write_temp("graphics.json", R"({"count": 3,
    "defaults": {"processes": [{"pid": 4242, "used_memory_bytes": 1000}]},
    "gpus": {"0": {"graphics_processes": [{"pid": 4242, "used_memory_bytes": 1000},
                                          {"pid": 1201, "used_memory_bytes": 20}]},
             "2": {"graphics_processes": [],
                   "errors": {"nvmlDeviceGetGraphicsRunningProcesses": "UNKNOWN"}}}})"));
  ASSERT_TRUE(nvml->ready()) << nvml->message();
  EXPECT_EQ(nvml->library()->api.resolved.at("graphics_processes"),
            "nvmlDeviceGetGraphicsRunningProcesses_v3");
  auto s = collect(*nvml, 5s);
  ASSERT_TRUE(s.ok());
  const auto& p0 = s->gpus[0].processes;
  ASSERT_TRUE(p0.ok());
  ASSERT_EQ(p0.value.size(), 2U);
  EXPECT_EQ(p0.value[0].pid, 4242U);
  EXPECT_TRUE(p0.value[0].compute && p0.value[0].graphics);
  EXPECT_EQ(p0.value[1].pid, 1201U);
  EXPECT_TRUE(!p0.value[1].compute && p0.value[1].graphics);
  EXPECT_EQ(p0.value[1].used_memory_bytes, 20U);
  const auto& p1 = s->gpus[1].processes;  // no graphics list (NOT_SUPPORTED)
  ASSERT_TRUE(p1.ok());
  ASSERT_EQ(p1.value.size(), 1U);
  EXPECT_FALSE(p1.value[0].graphics);
  const auto& p2 = s->gpus[2].processes;
  EXPECT_EQ(p2.status, FieldStatus::kError);
  EXPECT_TRUE(p2.value.empty());
}

TEST(NvmlHungDriver, CallPastDeadlineIsNamedAndOthersFailFastWithTheSameReport) {
  // The shipped hung-driver scenario sleeps past the default deadline (15 s); this one 1.5 s, so
  // the test also sees the worker recover.
  auto nvml = open_fake(write_temp(
      "hung15.json",
      R"({"count": 8, "gpus": {"2": {"delays_ms": {"nvmlDeviceGetPowerUsage": 1500}}}})"));
  ASSERT_TRUE(nvml->ready()) << nvml->message();
  auto previous = collect(*nvml, 2s);  // GPU 2 answers in 1.5 s: a good snapshot
  ASSERT_TRUE(previous.ok()) << previous.error().message;

  auto start = SteadyClock::now();
  auto s = collect(*nvml, 300ms, &*previous);
  auto took = SteadyClock::now() - start;
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(is_timeout(s.error()));
  const std::string report =
      "GPU 2 (0000:3a:00.0): nvmlDeviceGetPowerUsage did not return within 300 ms";
  EXPECT_EQ(s.error().message, report);
  EXPECT_LT(took, 2 * 300ms + 500ms);  // two healthy GPUs, then GPU 2's deadline, + margin
  // The same, typed: which GPU (as the last good snapshot knew it) and which entry point.
  const HangReport hang = nvml->hang_report();
  EXPECT_EQ(hang.message, report);
  EXPECT_EQ(hang.call, "nvmlDeviceGetPowerUsage");
  EXPECT_EQ(hang.gpu_index, std::optional<unsigned int>(2));
  EXPECT_EQ(hang.gpu_bus_id, "0000:3a:00.0");
  ASSERT_TRUE(previous->gpus.at(2).uuid.ok());
  EXPECT_EQ(hang.gpu_uuid, previous->gpus.at(2).uuid.value);

  start = SteadyClock::now();
  auto fast = collect_gpu(*nvml, 0, 5s);
  EXPECT_FALSE(fast.ok());
  EXPECT_TRUE(is_timeout(fast.error()));
  EXPECT_EQ(fast.error().message, report);  // the call that hangs, not the one refused
  EXPECT_LT(SteadyClock::now() - start, 100ms);

  // The hung call returns after 1.5 s and the worker serves again.
  for (int i = 0; i < 300 && nvml->worker().stuck(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(nvml->worker().stuck());
  EXPECT_TRUE(collect_gpu(*nvml, 0, 2s).ok());
}

// The daemon's checks wait for a slow driver the answer wait only: they hear "NVML is not
// answering" (not a timeout: the deadline has not passed), the checks after the first hear it at
// once, and when the collection ends the source says so (on_answer) and serves its snapshot.
TEST(NvidiaSource, AChecksWaitEndsAtTheAnswerWaitAndTheAnswerIsAnnounced) {
  setenv(
      "FAKE_NVML_SCENARIO",
      write_temp("slow.json",
                 R"({"count": 8, "gpus": {"2": {"delays_ms": {"nvmlDeviceGetPowerUsage": 1500}}}})")
          .c_str(),
      1);
  NvidiaSource src(GPUD_FAKE_NVML, 5s);
  src.open();
  ASSERT_EQ(src.status(), NvmlStatus::kReady) << src.message();
  src.set_answer_wait(200ms);
  std::atomic<int> answered{0};
  src.set_on_answer([&] { ++answered; });
  auto start = SteadyClock::now();
  auto first = src.snapshot();
  EXPECT_LT(SteadyClock::now() - start, 1s);
  ASSERT_FALSE(first.ok());
  EXPECT_TRUE(is_not_answering(first.error())) << first.error().message;
  EXPECT_FALSE(is_timeout(first.error()));
  EXPECT_NE(first.error().message.find("NVML is not answering: no reply for"), std::string::npos)
      << first.error().message;
  start = SteadyClock::now();
  auto second = src.snapshot();
  EXPECT_LT(SteadyClock::now() - start, 100ms);  // the collection is past the wait already
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(is_not_answering(second.error()));
  EXPECT_EQ(src.last_good_snapshot(), nullptr);
  for (int i = 0; i < 500 && answered == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(answered, 1);
  auto after = src.snapshot();
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_EQ((*after)->gpus.size(), 8U);
  src.set_on_answer(nullptr);
}

// Past the deadline the collection is a hang (Unhealthy in the components); the next collection
// against the same driver does not make it "not answering" again: the hang's report stands until a
// collection succeeds. And a source destroyed while its collection is stuck returns promptly.
TEST(NvidiaSource, AHangStandsUntilACollectionSucceedsAndDoesNotHoldTheDestructor) {
  setenv(
      "FAKE_NVML_SCENARIO",
      write_temp("hung.json",
                 R"({"count": 8, "gpus": {"2": {"delays_ms": {"nvmlDeviceGetPowerUsage": 1200}}}})")
          .c_str(),
      1);
  {
    NvidiaSource src(GPUD_FAKE_NVML, 300ms, 0ms);
    src.open();
    ASSERT_EQ(src.status(), NvmlStatus::kReady) << src.message();
    src.set_answer_wait(1s);
    auto hung = src.snapshot();  // ends at the deadline, before the answer wait
    ASSERT_FALSE(hung.ok());
    EXPECT_TRUE(is_timeout(hung.error())) << hung.error().message;
    const std::string report = hung.error().message;
    EXPECT_NE(report.find("nvmlDeviceGetPowerUsage did not return within 300 ms"),
              std::string::npos)
        << report;
    // Once the stuck call returned (1.2 s), a new collection hangs again; meanwhile a check that
    // stops waiting (50 ms) hears the hang, not "not answering".
    std::this_thread::sleep_for(1500ms);
    src.set_answer_wait(50ms);
    auto again = src.snapshot();
    ASSERT_FALSE(again.ok());
    EXPECT_TRUE(is_timeout(again.error())) << again.error().message;
    EXPECT_EQ(again.error().message, report);
  }
  setenv(
      "FAKE_NVML_SCENARIO",
      write_temp("stuck.json",
                 R"({"count": 8, "gpus": {"2": {"delays_ms": {"nvmlDeviceGetPowerUsage": 8000}}}})")
          .c_str(),
      1);
  auto stuck = std::make_unique<NvidiaSource>(GPUD_FAKE_NVML, 10s);
  stuck->open();
  ASSERT_EQ(stuck->status(), NvmlStatus::kReady) << stuck->message();
  stuck->set_answer_wait(100ms);
  auto pending = stuck->snapshot();
  ASSERT_FALSE(pending.ok());
  EXPECT_TRUE(is_not_answering(pending.error())) << pending.error().message;
  const auto start = SteadyClock::now();
  stuck.reset();  // the collection waits for an 8 s call under a 10 s deadline
  EXPECT_LT(SteadyClock::now() - start, 2s);
}

TEST(NvmlFake, ScenarioRewrittenWhileLoadedIsPickedUp) {
  std::string path = write_temp("live.json", R"({"count": 2})");
  auto nvml = open_fake(path);
  ASSERT_TRUE(nvml->ready()) << nvml->message();
  auto a = collect(*nvml, 2s);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->gpus[1].temperature_c.value, 34);
  EXPECT_FALSE(a->gpus[1].remapped_rows.value.pending);

  write_temp("live.json", R"({"count": 2, "gpus": {"1": {"temperature_c": 77,
      "remapped_rows": {"pending": true}}}})");
  std::this_thread::sleep_for(150ms);  // the fake stats the file at most every 100 ms
  auto b = collect(*nvml, 2s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->gpus[1].temperature_c.value, 77);
  EXPECT_TRUE(b->gpus[1].remapped_rows.value.pending);
  EXPECT_EQ(b->gpus[0].temperature_c.value, 34);
}

TEST(NvmlXidWatcher, DeliversQueuedXidEvents) {
  auto nvml = open_fake(fixture("h100x8-nvlink-down.json"));
  ASSERT_TRUE(nvml->ready()) << nvml->message();
  std::mutex mu;
  std::vector<XidEvent> got;
  auto w = XidWatcher::start(
      *nvml,
      [&](const XidEvent& e) {
        std::lock_guard lock(mu);
        got.push_back(e);
      },
      50ms, 2s);
  ASSERT_TRUE(w.ok()) << w.error().message;
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard lock(mu);
      if (!got.empty()) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  (*w)->stop();
  std::lock_guard lock(mu);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].xid, 145U);
  EXPECT_EQ(got[0].gpu_index, 0U);
  EXPECT_EQ(got[0].uuid, "GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e00");
  EXPECT_EQ(got[0].pci_bus_id, "0000:18:00.0");
  EXPECT_GT(got[0].time.time_since_epoch().count(), 0);
}

TEST(NvmlXidWatcher, EventsAppendedToTheScenarioAreDelivered) {
  std::string path = write_temp("xid.json", R"({"count": 4})");
  auto nvml = open_fake(path);
  ASSERT_TRUE(nvml->ready());
  std::atomic<int> n{0};
  std::atomic<uint64_t> last{0};
  auto w = XidWatcher::start(
      *nvml,
      [&](const XidEvent& e) {
        last = e.xid;
        ++n;
      },
      50ms, 2s);
  ASSERT_TRUE(w.ok());
  write_temp("xid.json", R"({"count": 4, "xid_events": [{"gpu": 2, "xid": 48},
      {"gpu": 3, "xid": 94}]})");
  for (int i = 0; i < 300 && n < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(n.load(), 2);
  EXPECT_EQ(last.load(), 94U);
}

// The fake blocks in nvmlEventSetWait like a driver (no polling timer), yet a scenario written
// meanwhile wakes it: the event arrives long before the wait's timeout.
TEST(NvmlXidWatcher, ANewScenarioWakesAWaitBeforeItsTimeout) {
  std::string path = write_temp("xid-wake.json", R"({"count": 2})");
  auto nvml = open_fake(path);
  ASSERT_TRUE(nvml->ready());
  std::atomic<int> n{0};
  auto w = XidWatcher::start(
      *nvml, [&](const XidEvent&) { ++n; }, 3s, 2s);
  ASSERT_TRUE(w.ok());
  std::this_thread::sleep_for(200ms);  // the watcher is inside its 3 s wait
  const auto start = std::chrono::steady_clock::now();
  write_temp("xid-wake.json", R"({"count": 2, "xid_events": [{"gpu": 1, "xid": 79}]})");
  while (n == 0 && std::chrono::steady_clock::now() - start < 5s) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(n.load(), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
}

TEST(NvmlP2P, EveryPairIsProbedOverNvlink) {
  std::string path =
      write_temp("p2p.json", R"({"count": 4, "gpus": {"2": {"p2p_nvlink_status": 4}}})");
  auto nvml = open_fake(path);
  ASSERT_TRUE(nvml->ready());
  auto s = collect(*nvml, 2s);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->nvlink_p2p.size(), 6U);
  for (const auto& p : s->nvlink_p2p) {
    ASSERT_TRUE(p.status.ok());
    EXPECT_LT(p.a, p.b);
    EXPECT_EQ(p.status.value,
              (p.a == 2 || p.b == 2) ? NVML_P2P_STATUS_DISABLED_BY_REGKEY : NVML_P2P_STATUS_OK)
        << p.a << "-" << p.b;
  }
  auto one = open_fake(write_temp("p2p1.json", R"({"count": 1})"));
  auto s1 = collect(*one, 2s);
  ASSERT_TRUE(s1.ok());
  EXPECT_TRUE(s1->nvlink_p2p.empty());
}

TEST(NvmlGpm, FirstCallIsABaselineThenMetricsBetweenSamples) {
  std::string path = write_temp("gpm.json", R"({"count": 3, "gpus": {
      "1": {"gpm_metrics": {"sm_occupancy": 41.5, "fp16_util": 12.25, "fp64_util": null}},
      "2": {"gpm_supported": false}}})");
  auto nvml = open_fake(path);
  ASSERT_TRUE(nvml->ready()) << nvml->message();
  GpmSampler sampler;
  auto first = sampler.sample(*nvml, {0, 1, 2}, 2s);
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_EQ(first->size(), 3U);
  EXPECT_EQ((*first)[0].status, "baseline sample taken");
  EXPECT_TRUE((*first)[0].values.empty());
  EXPECT_EQ((*first)[2].status, "GPM not supported");
  EXPECT_FALSE((*first)[2].error);
  std::this_thread::sleep_for(20ms);
  auto second = sampler.sample(*nvml, {0, 1}, 2s);
  ASSERT_TRUE(second.ok()) << second.error().message;
  ASSERT_EQ(second->size(), 2U);
  const auto& g1 = (*second)[1];
  EXPECT_EQ(g1.status, "");
  EXPECT_DOUBLE_EQ(g1.values.at("sm_occupancy"), 41.5);
  EXPECT_DOUBLE_EQ(g1.values.at("fp16_util"), 12.25);
  EXPECT_EQ(g1.values.count("fp64_util"), 0U);          // NOT_SUPPORTED for that metric alone
  EXPECT_EQ(g1.values.size(), kGpmMetrics.size() - 1);  // every metric gpud asks for but fp64_util
  EXPECT_GE(g1.window, 20ms);
  EXPECT_DOUBLE_EQ((*second)[0].values.at("any_tensor_util"), 0.0);
}

TEST(NvmlGpm, SamplingErrorsAndOldDriversAreReported) {
  std::string path =
      write_temp("gpm-err.json", R"({"count": 1, "errors": {"nvmlGpmSampleGet": "IN_USE"}})");
  auto nvml = open_fake(path);
  ASSERT_TRUE(nvml->ready());
  GpmSampler sampler;
  auto r = sampler.sample(*nvml, {0}, 2s);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)[0].error);
  EXPECT_NE((*r)[0].status.find("nvmlGpmSampleGet"), std::string::npos) << (*r)[0].status;

  auto legacy = open_fake(fixture("h100x8-healthy.json"), true);
  ASSERT_TRUE(legacy->ready());
  GpmSampler old;
  auto o = old.sample(*legacy, {0}, 2s);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().message, "GPM sampling not supported by this driver");
}

TEST(NvmlDevice, MapsArchitecturesAndErrors) {
  EXPECT_EQ(architecture_from_compute_capability(7, 0), "volta");
  EXPECT_EQ(architecture_from_compute_capability(7, 5), "turing");
  EXPECT_EQ(architecture_from_compute_capability(8, 6), "ampere");
  EXPECT_EQ(architecture_from_compute_capability(8, 9), "ada-lovelace");
  EXPECT_EQ(architecture_from_compute_capability(9, 0), "hopper");
  EXPECT_EQ(architecture_from_compute_capability(10, 0), "blackwell");
  EXPECT_EQ(architecture_from_compute_capability(12, 0), "blackwell");
  EXPECT_EQ(architecture_from_compute_capability(4, 0), "");
  EXPECT_EQ(classify(NVML_ERROR_FUNCTION_NOT_FOUND), FieldStatus::kNotSupported);
  EXPECT_EQ(classify(NVML_ERROR_GPU_IS_LOST), FieldStatus::kError);
}

}  // namespace
}  // namespace gpud::nvml
