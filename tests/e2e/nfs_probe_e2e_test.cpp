// End-to-end: the NFS probe in `gpud run` (--nfs-checker-configs) on a host root whose mount table
// says the volume is NFS: a good probe, another member's stale file, and a volume whose lookups
// hang (a FUSE mount behind the path), which is Degraded at the 5 s deadline while the API answers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "testing/hung_mount.h"
#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Runs the check now and waits for a state whose reason has `part`.
nlohmann::json check_until(const DaemonProcess& d, const std::string& part,
                           std::chrono::seconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  nlohmann::json s;
  while (std::chrono::steady_clock::now() < end) {
    (void)d.get("/v1/components/trigger-check?componentName=nfs");
    s = component_state(d, "nfs");
    if (s.value("reason", "").find(part) != std::string::npos) return s;
    std::this_thread::sleep_for(200ms);
  }
  return s;
}

TEST(NfsProbeE2E, GoodStaleAndHungVolumes) {
  testing::HungMount hung(30);
  TempDirGuard dir{make_temp_dir()};
  const std::string root = dir.path + "/root";
  fs::create_directories(root + "/proc/self");
  fs::create_directories(root + "/etc");
  fs::create_directories(root + "/mnt/nfs");
  std::ofstream(root + "/proc/self/mountinfo")
      << "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
      << "40 22 0:50 / /mnt/nfs rw,relatime - nfs4 filer:/export rw,vers=4.2\n";
  std::ofstream(root + "/etc/machine-id") << "aaaa1111\n";
  DaemonProcess d(dir.path + "/data",
                  {"--host-root", root, "--components", "nfs", "--nfs-checker-configs",
                   R"([{"volume_path":"/mnt/nfs","dir_name":".gpud-nfs","file_contents":"ok"}])"},
                  false);
  ASSERT_TRUE(d.ready()) << d.log();
  auto s = check_until(d, "NFS check ok on /mnt/nfs (1 member file(s) read)", 20s);
  EXPECT_EQ(s.value("health", ""), "Healthy") << s.dump() << d.log();

  std::ofstream(root + "/mnt/nfs/.gpud-nfs/bbbb2222") << "stale";
  s = check_until(d, "NFS check of /mnt/nfs failed: member bbbb2222's file", 20s);
  EXPECT_EQ(s.value("health", ""), "Degraded") << s.dump();

  if (!hung.why_not().empty()) GTEST_SKIP() << hung.why_not();
  fs::remove_all(root + "/mnt/nfs");
  fs::create_directory_symlink(hung.path(), root + "/mnt/nfs");
  const auto t0 = std::chrono::steady_clock::now();
  std::thread trigger([&] { (void)d.get("/v1/components/trigger-check?componentName=nfs"); });
  // The API answers while the probe waits on the mount.
  std::this_thread::sleep_for(500ms);
  const auto h0 = std::chrono::steady_clock::now();
  auto health = d.get("/healthz");
  EXPECT_TRUE(health && health->status == 200);
  EXPECT_LT(std::chrono::steady_clock::now() - h0, 1s);
  trigger.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  s = check_until(d, "NFS check timed out for /mnt/nfs - server may be unresponsive", 20s);
  EXPECT_EQ(s.value("health", ""), "Degraded") << s.dump();
  // The probe's thread stays blocked in the kernel until the mount answers or goes.
  hung.release();
  EXPECT_EQ(d.stop(), 0) << d.log();
}

// GPUd's --nfs-host-root: the probe's volume paths are under it (e.g. /proc/1/root in a hostPID
// container), while the mount table still comes from --host-root.
TEST(NfsProbeE2E, NfsHostRootIsWhereTheVolumesAre) {
  TempDirGuard dir{make_temp_dir()};
  const std::string root = dir.path + "/root", nfs_root = dir.path + "/nfs-root";
  for (const std::string& r : {root, nfs_root}) {
    fs::create_directories(r + "/proc/self");
    fs::create_directories(r + "/etc");
    fs::create_directories(r + "/mnt/nfs");
    std::ofstream(r + "/etc/machine-id") << "aaaa1111\n";
  }
  std::ofstream(root + "/proc/self/mountinfo")
      << "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
      << "40 22 0:50 / /mnt/nfs rw,relatime - nfs4 filer:/export rw,vers=4.2\n";
  DaemonProcess d(dir.path + "/data",
                  {"--host-root", root, "--nfs-host-root", nfs_root, "--components", "nfs",
                   "--nfs-checker-configs",
                   R"([{"volume_path":"/mnt/nfs","dir_name":".gpud-nfs","file_contents":"ok"}])"},
                  false);
  ASSERT_TRUE(d.ready()) << d.log();
  auto s = check_until(d, "NFS check ok on /mnt/nfs", 20s);
  EXPECT_EQ(s.value("health", ""), "Healthy") << s.dump() << d.log();
  // The probe's file is written, read back and removed under --nfs-host-root only.
  EXPECT_TRUE(fs::exists(nfs_root + "/mnt/nfs/.gpud-nfs")) << s.dump();
  EXPECT_FALSE(fs::exists(root + "/mnt/nfs/.gpud-nfs")) << s.dump();
  EXPECT_EQ(d.stop(), 0) << d.log();
}

}  // namespace
}  // namespace gpud::e2e
