#include "host/infiniband.h"

#include <gtest/gtest.h>

#include "host/pci.h"

namespace gpud::host {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/infiniband/" + std::string(sub);
}

const InfinibandPort* find_port(const InfinibandSnapshot& s, std::string_view device) {
  for (const auto& p : s.ports)
    if (p.device == device) return &p;
  return nullptr;
}

TEST(InfinibandSysfs, ParsesStatesAndRatesAsTheKernelPrintsThem) {
  EXPECT_EQ(parse_port_state("4: ACTIVE"), "ACTIVE");
  EXPECT_EQ(parse_port_state("5: LinkUp\n"), "LinkUp");
  EXPECT_EQ(parse_port_state("2: Polling"), "Polling");
  EXPECT_EQ(parse_port_state("ACTIVE"), "ACTIVE");
  EXPECT_FALSE(parse_port_state(""));
  EXPECT_FALSE(parse_port_state("x: ACTIVE"));
  EXPECT_FALSE(parse_port_state("4: "));
  EXPECT_FALSE(parse_port_state("4: \x01\x02"));
  EXPECT_EQ(parse_port_rate("400 Gb/sec (4X NDR)"), 400);
  EXPECT_EQ(parse_port_rate("2.5 Gb/sec (1X SDR)"), 2.5);
  EXPECT_EQ(parse_port_rate("200 Gb/sec"), 200);
  EXPECT_FALSE(parse_port_rate("fast"));
  EXPECT_FALSE(parse_port_rate("400"));
  EXPECT_FALSE(parse_port_rate("-1 Gb/sec"));
  EXPECT_FALSE(parse_port_rate("400 Mb/sec"));
  EXPECT_FALSE(parse_port_rate("1e300 Gb/sec"));
}

TEST(InfinibandSysfs, ReadsTheHealthyNdrNode) {
  auto s = read_infiniband(fixture("h100-ndr-healthy/sys/class/infiniband"), {});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->class_dir_present);
  ASSERT_EQ(s->devices.size(), 9U);
  ASSERT_EQ(s->ports.size(), 9U);
  const InfinibandPort& p = s->ports[0];
  EXPECT_EQ(p.device, "mlx5_0");
  EXPECT_EQ(p.port, 1);
  EXPECT_EQ(p.device_port(), "mlx5_0_1");
  EXPECT_EQ(p.state, "ACTIVE");
  EXPECT_EQ(p.phys_state, "LinkUp");
  EXPECT_EQ(p.rate_gbps, 400);
  EXPECT_TRUE(p.infiniband());
  EXPECT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(p.counter("link_downed"), 0U);
  EXPECT_EQ(p.counter("port_rcv_data"), 1823742389120U);
  EXPECT_EQ(p.hw_counters.at("lifespan"), 10U);
  EXPECT_FALSE(s->ports[8].infiniband());
  EXPECT_EQ(s->ports[8].link_layer, "Ethernet");
  EXPECT_EQ(s->devices[0].pci_bus_id, "0000:19:00.0");
  EXPECT_EQ(s->devices[0].pci_path, (std::vector<std::string>{"0000:15:01.0", "0000:16:00.0",
                                                              "0000:17:01.0", "0000:19:00.0"}));
}

TEST(InfinibandSysfs, ExcludedDevicesAreNotRead) {
  auto s = read_infiniband(fixture("h100-ndr-healthy/sys/class/infiniband"), {"mlx5_0", "mlx5_8"});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ports.size(), 7U);
  EXPECT_EQ(find_port(*s, "mlx5_0"), nullptr);
}

TEST(InfinibandSysfs, MissingClassDirIsNoDevicesNotAnError) {
  auto s = read_infiniband(fixture("does-not-exist"), {});
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->class_dir_present);
  EXPECT_TRUE(s->ports.empty());
}

TEST(InfinibandSysfs, GarbledValuesAreAbsentWithAReason) {
  auto s = read_infiniband(fixture("h100-ndr-garbled/sys/class/infiniband"), {});
  ASSERT_TRUE(s) << s.error().message;
  const InfinibandPort* rate = find_port(*s, "mlx5_1");
  ASSERT_NE(rate, nullptr);
  EXPECT_FALSE(rate->rate_gbps);
  ASSERT_EQ(rate->errors.size(), 1U);
  EXPECT_EQ(rate->errors[0], "rate: cannot parse \"fast\"");
  const InfinibandPort* counters = find_port(*s, "mlx5_4");
  EXPECT_FALSE(counters->counter("symbol_error"));
  EXPECT_FALSE(counters->counter("link_downed"));
  EXPECT_EQ(counters->errors.size(), 2U);
  const InfinibandPort* state = find_port(*s, "mlx5_6");
  EXPECT_FALSE(state->state);
  EXPECT_EQ(state->phys_state, "LinkUp");
  ASSERT_EQ(state->errors.size(), 1U);
  EXPECT_TRUE(state->errors[0].starts_with("state: open ")) << state->errors[0];
}

TEST(InfinibandSysfs, AdaptersAndGpusShareTheirPcieSwitch) {
  const HostFs fs(fixture("h100-ndr-healthy"));
  auto gpus = find_nvidia_gpus(fs);
  ASSERT_EQ(gpus.size(), 8U);
  auto gpu0 = pci_path_of_device(fs, gpus[0]);
  EXPECT_EQ(gpu0, (std::vector<std::string>{"0000:15:01.0", "0000:16:00.0", "0000:17:00.0",
                                            "0000:18:00.0"}));
  auto s = read_infiniband(fixture("h100-ndr-healthy/sys/class/infiniband"), {});
  ASSERT_TRUE(s);
  EXPECT_EQ(shared_bridges(s->devices[0].pci_path, gpu0), 2U);
  EXPECT_EQ(shared_bridges(s->devices[1].pci_path, gpu0), 0U);
  EXPECT_EQ(shared_bridges(s->devices[8].pci_path, gpu0), 0U);
  EXPECT_EQ(pci_path_of("/sys/devices/pci0000:00/0000:00:1c.0/0000:01:00.0/net/eth0"),
            (std::vector<std::string>{"0000:00:1c.0", "0000:01:00.0"}));
  EXPECT_TRUE(pci_path_of_device(fs, "0000:ff:00.0").empty());
}

}  // namespace
}  // namespace gpud::host
