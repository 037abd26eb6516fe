// Rules of accelerator-nvidia-info over hand-built snapshots (no NVML).
#include "components/nvidia/info.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(NvidiaInfo, ReportsProductDriverAndEveryGpu) {
  auto v = evaluate_info(h100x(8));
  EXPECT_EQ(v.health(), Health::kHealthy);
  const auto& d = v.data;
  EXPECT_EQ(d["product"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d["brand"], "Tesla");
  EXPECT_EQ(d["architecture"], "hopper");
  EXPECT_EQ(d["driver_version"], "550.54.15");
  EXPECT_EQ(d["cuda_version"], "12.4");
  EXPECT_EQ(d["gpu_count"], 8);
  EXPECT_EQ(v.gpus[3].data["uuid"], "GPU-00000003");
  EXPECT_EQ(v.gpus[3].data["minor_number"], 3);
  EXPECT_EQ(v.gpus[7].cells[0], "GPU-00000007");
}

TEST(NvidiaInfo, ErroredFieldStaysHealthy) {
  auto s = h100x(1);
  s.gpus[0].serial = errored<std::string>();
  auto v = evaluate_info(s);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].data["serial"], nullptr);
  EXPECT_EQ(v.gpus[0].cells[2], "error");
}

// What dcgm-exporter's labels are made from: NVML's name, the driver version and the bus id in
// NVML's form; a GPU that does not answer its bus id has an empty one rather than a guess.
TEST(NvidiaInfo, GpuInfoLabelsCarryDriverVersionAndNvmlBusId) {
  auto s = h100x(2);
  s.gpus[0].pci_bus_id = ok<std::string>("0000:5d:00.0");
  Labels l = gpu_info_labels(s.gpus[0], s.driver);
  EXPECT_EQ(l.at("nvml_pci_bus_id"), "00000000:5D:00.0");
  EXPECT_EQ(l.at("pci_bus_id"), "0000:5d:00.0");
  EXPECT_EQ(l.at("driver_version"), "550.54.15");
  EXPECT_EQ(l.at("name"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(l.at("gpu"), "0");
  s.gpus[1].pci_bus_id = errored<std::string>();
  EXPECT_EQ(gpu_info_labels(s.gpus[1], s.driver).at("nvml_pci_bus_id"), "");
}

}  // namespace
}  // namespace gpud::components
