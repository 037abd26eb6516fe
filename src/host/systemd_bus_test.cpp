#include "host/systemd_bus.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>

#include "testing/fake_systemd_bus.h"

namespace gpud::host {
namespace {

using testing_support::FakeSystemdBus;
using testing_support::FakeUnit;
using namespace std::chrono_literals;

// A host root without run/systemd/system unless a test adds it: reading units over D-Bus does not
// look at it.
struct HostRoot : testing_support::SystemdHostRoot {
  HostRoot() : SystemdHostRoot(false) {}
};

std::map<std::string, FakeUnit> host_units() {
  FakeUnit failed;
  failed.active_state = "failed";
  failed.sub_state = "failed";
  failed.n_restarts = 5;
  failed.state_change_usec = 1'700'000'000'000'000ULL;
  return {{"containerd.service", FakeUnit{}}, {"kubelet.service", failed}};
}

TEST(SystemdBus, ReadsTheHostsUnitsThroughSystemdsPrivateSocket) {
  HostRoot root;
  FakeSystemdBus systemd(root.dir + "/run/systemd/private", host_units());
  ASSERT_TRUE(systemd.ok());
  SystemdAnswer a = host_systemd_show(
      HostFs(root.dir), {"containerd.service", "kubelet.service", "docker.service"}, 5000ms);
  ASSERT_TRUE(a.reached);
  EXPECT_EQ(a.via, root.dir + "/run/systemd/private");
  ASSERT_TRUE(a.units) << a.units.error().message;
  ASSERT_EQ(a.units->size(), 3u);
  const UnitState& containerd = (*a.units)[0];
  EXPECT_EQ(containerd.id, "containerd.service");
  EXPECT_EQ(containerd.load_state, "loaded");
  EXPECT_EQ(containerd.active_state, "active");
  EXPECT_EQ(containerd.sub_state, "running");
  EXPECT_EQ(containerd.n_restarts, std::optional<uint64_t>(0));
  EXPECT_EQ(containerd.state_changed, "");
  EXPECT_EQ(containerd.error, "");
  const UnitState& kubelet = (*a.units)[1];
  EXPECT_EQ(kubelet.active_state, "failed");
  EXPECT_EQ(kubelet.n_restarts, std::optional<uint64_t>(5));
  EXPECT_EQ(kubelet.state_changed, "2023-11-14T22:13:20Z");
  EXPECT_EQ((*a.units)[2].load_state, "not-found");
}

TEST(SystemdBus, FallsBackToTheSystemBusWhenSystemdsSocketIsAbsent) {
  HostRoot root;
  FakeSystemdBus bus(root.dir + "/run/dbus/system_bus_socket", host_units(),
                     FakeSystemdBus::Mode::kMessageBus);
  ASSERT_TRUE(bus.ok());
  SystemdAnswer a = host_systemd_show(HostFs(root.dir), {"kubelet.service"}, 5000ms);
  ASSERT_TRUE(a.reached);
  EXPECT_EQ(a.via, root.dir + "/run/dbus/system_bus_socket");
  ASSERT_TRUE(a.units) << a.units.error().message;
  EXPECT_EQ((*a.units)[0].active_state, "failed");
}

TEST(SystemdBus, NoSocketMeansSystemdWasNotReachedAndSaysWhere) {
  HostRoot root;
  SystemdAnswer a = host_systemd_show(HostFs(root.dir), {"kubelet.service"}, 1000ms);
  EXPECT_FALSE(a.reached);
  ASSERT_FALSE(a.units);
  EXPECT_NE(a.units.error().message.find(root.dir + "/run/systemd/private does not exist"),
            std::string::npos);
  EXPECT_NE(a.units.error().message.find(root.dir + "/run/dbus/system_bus_socket does not exist"),
            std::string::npos);
}

TEST(SystemdBus, StaleSocketIsNotReached) {
  HostRoot root;
  const std::string path = root.dir + "/run/systemd/private";
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);  // the file stays; nobody listens
  SystemdAnswer a = host_systemd_show(HostFs(root.dir), {"kubelet.service"}, 1000ms);
  EXPECT_FALSE(a.reached);
  ASSERT_FALSE(a.units);
  EXPECT_NE(a.units.error().message.find(path + ": cannot connect"), std::string::npos)
      << a.units.error().message;
}

TEST(SystemdBus, SystemdThatDoesNotAnswerIsAnErrorWithinTheDeadline) {
  HostRoot root;
  FakeSystemdBus hung(root.dir + "/run/systemd/private", {}, FakeSystemdBus::Mode::kHang);
  ASSERT_TRUE(hung.ok());
  auto start = std::chrono::steady_clock::now();
  SystemdAnswer a = host_systemd_show(HostFs(root.dir), {"kubelet.service"}, 300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_TRUE(a.reached);
  ASSERT_FALSE(a.units);
  // Within what was left of the 300 ms when this socket was tried.
  EXPECT_NE(a.units.error().message.find("systemd did not answer within "), std::string::npos)
      << a.units.error().message;
}

TEST(SystemdBus, UnitStateIsLeftUnjudgedWhereSystemdCannotBeAsked) {
  HostRoot root;
  // systemd does not run the host: nothing asked.
  EXPECT_FALSE(host_unit_state(HostFs(root.dir), "systemctl-absent", "", "containerd", 1000ms));
  std::filesystem::create_directories(root.dir + "/run/systemd/system");
  // It does, but no socket answers and there is no systemctl: not judged either.
  EXPECT_FALSE(host_unit_state(HostFs(root.dir), "systemctl-absent", "", "containerd", 1000ms));
  FakeSystemdBus systemd(root.dir + "/run/systemd/private", host_units());
  auto state = host_unit_state(HostFs(root.dir), "systemctl-absent", "", "containerd", 1000ms);
  ASSERT_TRUE(state);
  ASSERT_TRUE(*state) << state->error().message;
  EXPECT_EQ((*state)->id, "containerd.service");
  EXPECT_EQ((*state)->active_state, "active");
}

TEST(SystemdBus, EscapesTheSocketPathInTheBusAddress) {
  EXPECT_EQ(unix_bus_address("/host/run/dbus/system_bus_socket"),
            "unix:path=/host/run/dbus/system_bus_socket");
  EXPECT_EQ(unix_bus_address("/a b,c=d;"), "unix:path=/a%20b%2cc%3dd%3b");
}

}  // namespace
}  // namespace gpud::host
