// End-to-end: `gpud run --host-root` against host roots laid out as real GPU nodes are (a systemd
// host, a GPU Operator node, a plain host without systemd), each read Healthy by the systemd,
// library and GPU-count components with a healthy fake NVML, and each with a faulty twin that is
// detected: a watched unit that failed, a library missing from the driver root, a GPU missing from
// NVML. The host's systemd is a fake answering D-Bus on the root's socket, as a node's does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "testing/fake_systemd_bus.h"
#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

namespace fs = std::filesystem;
using testing_support::FakeSystemdBus;
using testing_support::FakeUnit;

std::string fixture(const std::string& rel) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/" + rel;
}

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p.string()) << "";
}

// A node's root: 8 GPUs and 4 NVSwitches on the PCI bus, systemd as PID 1 or not, the driver's
// libraries where `lib_dir` says (under the root), libcuda.so.1 left out when `without_libcuda`.
struct NodeRoot {
  NodeRoot(bool systemd, const std::string& lib_dir, bool without_libcuda = false)
      : guard{make_temp_dir()} {
    root = guard.path + "/root";
    fs::create_directories(root);
    fs::copy(fixture("host-os/pci-8gpu/sys"), root + "/sys", fs::copy_options::recursive);
    if (systemd) fs::create_directories(root + "/run/systemd/system");
    fs::create_directories(root + "/run/dbus");
    touch(root + lib_dir + "/libnvidia-ml.so.1");
    if (!without_libcuda) touch(root + lib_dir + "/libcuda.so.1");
  }
  TempDirGuard guard;
  std::string root;
};

// A scenario of `count` H100s (the fake's default bus ids), in `dir`.
std::string h100_scenario(const std::string& dir, int count) {
  const std::string path = dir + "/h100x" + std::to_string(count) + ".json";
  std::ofstream(path) << R"({"driver": {"version": "550.54.15", "nvml_version": "12.550.54.15",
    "cuda_version": 12040}, "count": )"
                      << count << R"(, "defaults": {"name": "NVIDIA H100 80GB HBM3",
    "cuda_compute_capability": [9, 0]}})";
  return path;
}

struct Reported {
  nlohmann::json systemd, library, gpu_counts;
};

// The daemon on `node`, its first reading of the three components (null: not reported, i.e. not
// applicable on this node).
Reported run_on(const NodeRoot& node, int gpus_in_nvml, bool nvml_lib_flag) {
  TempDirGuard data{make_temp_dir()};
  std::vector<std::string> args = {"--host-root",
                                   node.root,
                                   "--components",
                                   "systemd,library,accelerator-nvidia-gpu-counts",
                                   "--nvidia-check-interval",
                                   "1s"};
  if (nvml_lib_flag) {
    args.push_back("--nvml-lib");
    args.push_back(GPUD_FAKE_NVML);
  }
  DaemonProcess d(data.path + "/data", args, false,
                  {"FAKE_NVML_SCENARIO=" + h100_scenario(data.path, gpus_in_nvml)});
  EXPECT_TRUE(d.ready()) << d.log();
  auto first = [&](const std::string& component) -> nlohmann::json {
    nlohmann::json state;
    eventually(
        [&] {
          state = component_state(d, component);
          return !state.empty() && state.value("health", "") != "Initializing";
        },
        std::chrono::seconds(20));
    return state.empty() ? nlohmann::json(nullptr) : state;
  };
  Reported r{first("systemd"), first("library"), first("accelerator-nvidia-gpu-counts")};
  // What each layout reported, for the record (ctest --output-on-failure, or -V).
  for (const auto& [name, s] : {std::pair{"systemd", r.systemd},
                                {"library", r.library},
                                {"accelerator-nvidia-gpu-counts", r.gpu_counts}})
    std::cout << "  " << name << ": "
              << (s.is_null() ? std::string("not applicable")
                              : s.value("health", "") + " \"" + s.value("reason", "") + "\"")
              << "\n";
  d.stop();
  return r;
}

std::map<std::string, FakeUnit> node_units(bool kubelet_failed) {
  FakeUnit kubelet;
  if (kubelet_failed) {
    kubelet.active_state = "failed";
    kubelet.sub_state = "failed";
  }
  return {{"containerd.service", FakeUnit{}},
          {"kubelet.service", kubelet},
          {"nvidia-persistenced.service", FakeUnit{}}};
}

TEST(NodeLayouts, SystemdHostIsHealthyAndAFailedWatchedUnitIsFound) {
  NodeRoot node(true, "/usr/lib/x86_64-linux-gnu");
  {
    FakeSystemdBus systemd(node.root + "/run/systemd/private", node_units(false));
    ASSERT_TRUE(systemd.ok());
    Reported r = run_on(node, 8, true);
    EXPECT_EQ(r.systemd["health"], "Healthy") << r.systemd;
    EXPECT_EQ(r.systemd["reason"],
              "containerd.service active, kubelet.service active, nvidia-persistenced.service "
              "active");
    EXPECT_EQ(r.library["health"], "Healthy") << r.library;
    EXPECT_EQ(r.gpu_counts["health"], "Healthy") << r.gpu_counts;
    EXPECT_GT(systemd.connections(), 0);
  }
  FakeSystemdBus systemd(node.root + "/run/systemd/private", node_units(true));
  Reported r = run_on(node, 8, true);
  EXPECT_EQ(r.systemd["health"], "Unhealthy") << r.systemd;
  EXPECT_EQ(r.systemd["reason"], "unit kubelet.service failed (failed)");
}

TEST(NodeLayouts, SystemdHostWhoseSystemdCannotBeAskedIsNotCheckedNotUnhealthy) {
  NodeRoot node(true, "/usr/lib/x86_64-linux-gnu");  // no socket: /run not shared with gpud
  Reported r = run_on(node, 8, true);
  EXPECT_EQ(r.systemd["health"], "Healthy") << r.systemd;
  EXPECT_EQ(r.systemd["reason"].get<std::string>().rfind("not checked: cannot ask the host's", 0),
            0u)
      << r.systemd;
  EXPECT_FALSE(r.systemd.value("error", "").empty());
}

TEST(NodeLayouts, GpuOperatorNodeFindsItsDriverRootAndAMissingLibraryIsFound) {
  // The driver container's root at /run/nvidia/driver, RHEL-style lib64, and NVML loaded from it:
  // no --nvml-lib, no GPUD_NVML_LIBRARY_PATH.
  NodeRoot node(true, "/run/nvidia/driver/usr/lib64");
  const std::string nvml = node.root + "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1";
  fs::remove(nvml);
  fs::create_symlink(GPUD_FAKE_NVML, nvml);
  FakeSystemdBus bus(node.root + "/run/dbus/system_bus_socket", node_units(false),
                     FakeSystemdBus::Mode::kMessageBus);
  Reported r = run_on(node, 8, false);
  EXPECT_EQ(r.systemd["health"], "Healthy") << r.systemd;
  EXPECT_EQ(r.library["health"], "Healthy") << r.library;
  EXPECT_EQ(r.gpu_counts["health"], "Healthy") << r.gpu_counts;
  EXPECT_EQ(r.gpu_counts["reason"], "nvidia gpu count 8 matches the 8 GPUs on the PCI bus")
      << "NVML was not loaded from the driver root";

  NodeRoot broken(true, "/run/nvidia/driver/usr/lib64", /*without_libcuda=*/true);
  Reported b = run_on(broken, 8, true);
  EXPECT_EQ(b.library["health"], "Unhealthy") << b.library;
  EXPECT_EQ(b.library["reason"], "library \"libcuda.so.1\" does not exist");
}

TEST(NodeLayouts, PlainHostWithoutSystemdAndAGpuMissingFromNvmlIsFound) {
  NodeRoot node(false, "/usr/lib64");
  Reported r = run_on(node, 8, true);
  EXPECT_TRUE(r.systemd.is_null()) << "systemd is not PID 1: not applicable, " << r.systemd;
  EXPECT_EQ(r.library["health"], "Healthy") << r.library;
  EXPECT_EQ(r.gpu_counts["health"], "Healthy") << r.gpu_counts;

  Reported seven = run_on(node, 7, true);
  EXPECT_EQ(seven.gpu_counts["health"], "Unhealthy") << seven.gpu_counts;
  EXPECT_NE(seven.gpu_counts["reason"].get<std::string>().find(
                "found 7, expected 8 on the PCI bus); not seen by NVML: 0000:db:00.0"),
            std::string::npos)
      << seven.gpu_counts;
}

}  // namespace
}  // namespace gpud::e2e
