#include "components/host/disk.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "testing/hung_mount.h"
#include "testing/temp_dir.h"

namespace gpud::components {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;
constexpr uint64_t kGiB = 1ULL << 30;

std::string fixture_root(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/" + name;
}

TrackedMount mounted(const std::string& mp, uint64_t total, uint64_t available) {
  TrackedMount m;
  m.mount_point = mp;
  m.mounted = true;
  m.device = "/dev/nvme0n1p1";
  m.fs_type = "ext4";
  m.major_minor = "259:1";
  host::FsUsage u;
  u.total_bytes = total;
  u.available_bytes = available;
  u.free_bytes = available;
  u.used_bytes = total - available;
  m.usage = u;
  return m;
}

TEST(DiskRule, PlentyOfSpaceIsHealthy) {
  DiskSnapshot s;
  s.mounts = {mounted("/", 100 * kGiB, 60 * kGiB), mounted("/data", 10 * kGiB, 9 * kGiB)};
  CheckResult r = evaluate_disk(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason,
            "disk usage / 40.0% used, 60.0 GiB free; /data 10.0% used, 9.0 GiB free");
  auto data = r.states[0].data;
  EXPECT_EQ(data["mounts"].size(), 2u);
  EXPECT_EQ(data["mounts"][0]["fs_type"], "ext4");
  EXPECT_EQ(data["mounts"][1]["available_bytes"].get<uint64_t>(), 9 * kGiB);
  EXPECT_NE(r.detail.find("/data: ext4 on /dev/nvme0n1p1"), std::string::npos) << r.detail;
}

TEST(DiskRule, RootBelow500MiBFreeIsDegraded) {
  DiskSnapshot s;
  s.mounts = {mounted("/", 100 * kGiB, 312 * kMiB)};
  CheckResult r = evaluate_disk(s);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "only 312.0 MiB free on / (less than 500.0 MiB)");
}

TEST(DiskRule, RootAtExactly500MiBIsHealthy) {
  DiskSnapshot s;
  s.mounts = {mounted("/", 100 * kGiB, 500 * kMiB)};
  EXPECT_EQ(evaluate_disk(s).health(), Health::kHealthy);
}

TEST(DiskRule, OtherMountBelow500MiBIsHealthy) {
  DiskSnapshot s;
  s.mounts = {mounted("/", 100 * kGiB, 50 * kGiB), mounted("/data", 1 * kGiB, 10 * kMiB)};
  EXPECT_EQ(evaluate_disk(s).health(), Health::kHealthy);
}

TEST(DiskRule, UnmountedMountPointIsDegraded) {
  DiskSnapshot s;
  TrackedMount gone;
  gone.mount_point = "/var/lib/kubelet";
  s.mounts = {mounted("/", 100 * kGiB, 50 * kGiB), gone};
  CheckResult r = evaluate_disk(s);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "mount point /var/lib/kubelet is not mounted");
  EXPECT_NE(r.detail.find("/var/lib/kubelet: not mounted"), std::string::npos);
}

TEST(DiskRule, StatvfsFailureIsDegradedWithError) {
  DiskSnapshot s;
  TrackedMount bad;
  bad.mount_point = "/data";
  bad.mounted = true;
  bad.error = "statvfs /data: Permission denied";
  s.mounts = {mounted("/", 100 * kGiB, 50 * kGiB), bad};
  CheckResult r = evaluate_disk(s);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "cannot stat /data: statvfs /data: Permission denied");
  EXPECT_EQ(r.states[0].error, "statvfs /data: Permission denied");
}

TEST(DiskRule, UnreadableMountTableDoesNotFlagUnmounted) {
  DiskSnapshot s;
  s.mount_table_read = false;
  s.mount_table_error = "open /proc/self/mountinfo: No such file or directory";
  TrackedMount root = mounted("/", 100 * kGiB, 50 * kGiB);
  root.mounted = false;
  s.mounts = {root};
  CheckResult r = evaluate_disk(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.detail.find("mount table unreadable"), std::string::npos);
}

TEST(DiskRule, SeveralProblemsAreAllNamed) {
  DiskSnapshot s;
  TrackedMount gone;
  gone.mount_point = "/data";
  s.mounts = {mounted("/", 100 * kGiB, 100 * kMiB), gone};
  CheckResult r = evaluate_disk(s);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.states[0].reason.find("free on /"), std::string::npos);
  EXPECT_NE(r.states[0].reason.find("; mount point /data is not mounted"), std::string::npos);
}

TEST(DiskTracking, RootFirstThenConfiguredWithoutDuplicates) {
  EXPECT_EQ(tracked_mount_points({}), std::vector<std::string>{"/"});
  EXPECT_EQ(tracked_mount_points({"/var/lib/kubelet/", "/", "/data", "/data", "relative", ""}),
            (std::vector<std::string>{"/", "/var/lib/kubelet", "/data"}));
}

TEST(DiskComponent, ConfiguredMountMissingFromFixtureIsDegradedAndRootHasMetrics) {
  Config cfg;
  cfg.host_root = fixture_root("debian12");
  cfg.mount_points = {"/data"};
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  DiskComponent c(ctx);
  EXPECT_EQ(c.name(), "disk");
  EXPECT_TRUE(c.can_set_healthy());
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.states[0].reason.find("mount point /data is not mounted"), std::string::npos)
      << r.states[0].reason;
  auto data = r.states[0].data;
  EXPECT_EQ(data["mounts"][0]["mount_point"], "/");
  EXPECT_EQ(data["mounts"][0]["device"], "/dev/vda");
  EXPECT_EQ(data["mounts"][0]["fs_type"], "ext4");
  EXPECT_GT(data["mounts"][0]["total_bytes"].get<uint64_t>(), 0u);
  std::string text = metrics.prometheus_text();
  for (const char* name :
       {"disk_total_bytes", "disk_free_bytes", "disk_used_bytes", "disk_used_percent"}) {
    EXPECT_NE(text.find(std::string(name) + "{gpud_component=\"disk\",mount_point=\"/\"}"),
              std::string::npos)
        << name << "\n"
        << text;
  }
  EXPECT_EQ(text.find("mount_point=\"/data\""), std::string::npos);
}

TEST(DiskComponent, MountedConfiguredPointGetsItsOwnSeries) {
  Config cfg;
  cfg.host_root = fixture_root("escaped-mounts");
  cfg.mount_points = {"/data"};
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  DiskComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.states[0].reason.find("not mounted"), std::string::npos) << r.states[0].reason;
  EXPECT_EQ(r.states[0].reason.find("cannot stat"), std::string::npos) << r.states[0].reason;
  auto data = r.states[0].data;
  EXPECT_EQ(data["mounts"][1]["fs_type"], "tmpfs");  // the mount stacked last on /data
  EXPECT_NE(metrics.prometheus_text().find(
                "disk_total_bytes{gpud_component=\"disk\",mount_point=\"/data\"}"),
            std::string::npos);
}

// A mount point statted once and then not (gone from the mount table, or statvfs failing) loses
// its series; "/" keeps its own.
TEST(DiskComponent, AMountPointNoLongerStattedLosesItsSeries) {
  testing_support::TempDir root;
  ASSERT_FALSE(root.path().empty());
  std::filesystem::create_directories(root.path() + "/data");
  const std::string root_line = "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n";
  const std::string data_line =
      "24 22 259:3 / /data rw,relatime shared:30 - ext4 /dev/nvme1n1 rw\n";
  root.write("proc/self/mountinfo", root_line + data_line);
  Config cfg;
  cfg.host_root = root.path();
  cfg.mount_points = {"/data"};
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  DiskComponent c(ctx);
  (void)c.check();
  std::string text = metrics.prometheus_text();
  ASSERT_NE(text.find("disk_total_bytes{gpud_component=\"disk\",mount_point=\"/data\"}"),
            std::string::npos)
      << text;

  std::filesystem::remove(root.path() + "/data");  // still in the table: statvfs fails
  EXPECT_EQ(c.check().health(), Health::kDegraded);
  text = metrics.prometheus_text();
  EXPECT_EQ(text.find("mount_point=\"/data\""), std::string::npos) << text;
  EXPECT_NE(text.find("disk_total_bytes{gpud_component=\"disk\",mount_point=\"/\"}"),
            std::string::npos)
      << text;
}

TEST(DiskComponent, MountedPointThatCannotBeStattedIsDegraded) {
  Config cfg;
  cfg.host_root = fixture_root("escaped-mounts");
  cfg.mount_points = {"/mnt/my data"};  // in the mount table, but no such directory in the fixture
  ComponentContext ctx{&cfg, nullptr, nullptr, false};
  DiskComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.states[0].reason.find("cannot stat /mnt/my data"), std::string::npos)
      << r.states[0].reason;
  EXPECT_FALSE(r.states[0].error.empty());
}

TEST(DiskComponent, MissingMountTableStillStatsRoot) {
  Config cfg;
  cfg.host_root = fixture_root("old-kernel");  // no proc/self/mountinfo
  cfg.mount_points = {"/data"};
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  DiskComponent c(ctx);
  CheckResult r = c.check();
  auto data = r.states[0].data;
  EXPECT_EQ(data["mount_table_read"], false);
  EXPECT_GT(data["mounts"][0]["total_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(r.states[0].reason.find("not mounted"), std::string::npos);
}

Config::NfsChecker a_checker() {
  Config::NfsChecker c;
  c.volume_path = "/mnt/nfs";
  c.dir_name = ".gpud-nfs";
  c.file_contents = "ok";
  return c;
}

// GPUd's disk component lists the NFS-like partitions (pkg/disk DefaultNFSFsTypeFunc: nfs*, lustre,
// wekafs, virtiofs) once NFS checks are configured, and stats each with a timeout.
TEST(DiskComponent, WithNfsChecksConfiguredNetworkMountsAreListedWithTheirUsage) {
  Config cfg;
  cfg.host_root = fixture_root("network-mounts");
  cfg.nfs_checkers = {a_checker()};
  DiskComponent c(ComponentContext{&cfg, nullptr, nullptr, false});
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = r.states[0].data;
  ASSERT_TRUE(data.contains("network_mounts")) << data.dump();
  const auto& n = data["network_mounts"];
  ASSERT_EQ(n.size(), 4u) << n.dump();
  EXPECT_EQ(n[0]["mount_point"], "/lustre/fs1");
  EXPECT_EQ(n[0]["fs_type"], "lustre");
  EXPECT_EQ(n[0]["source"], "172.16.0.100@tcp:/lustrefs");
  EXPECT_GT(n[0]["total_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(n[1]["fs_type"], "wekafs");
  EXPECT_EQ(n[2]["fs_type"], "virtiofs");
  EXPECT_EQ(n[3]["mount_point"], "/mnt/nfs");
  EXPECT_FALSE(n[3].contains("total_bytes")) << "a value that could not be read is absent";
  EXPECT_NE(n[3]["error"].get<std::string>().find("statvfs"), std::string::npos) << n[3];
  EXPECT_NE(r.detail.find("/lustre/fs1: lustre on 172.16.0.100@tcp:/lustrefs total"),
            std::string::npos)
      << r.detail;

  // Without NFS checks (GPUd's default) network file systems are not statted at all.
  cfg.nfs_checkers.clear();
  DiskComponent quiet(ComponentContext{&cfg, nullptr, nullptr, false});
  data = quiet.check().states[0].data;
  EXPECT_FALSE(data.contains("network_mounts")) << data.dump();
}

NetworkMount timed_out(int in_a_row) {
  NetworkMount m;
  m.mount_point = "/lustre/fs1";
  m.fs_type = "lustre";
  m.error = "mount /lustre/fs1 did not answer within 5 s";
  m.timed_out = true;
  m.timeouts_in_a_row = in_a_row;
  return m;
}

TEST(DiskRule, ANetworkMountTimingOutFiveChecksInARowIsDegraded) {
  DiskSnapshot s;
  s.mounts = {mounted("/", 100 * kGiB, 50 * kGiB)};
  s.network_mounts = {timed_out(kNetworkMountTimeoutChecks - 1)};
  EXPECT_EQ(evaluate_disk(s).health(), Health::kHealthy);
  s.network_mounts = {timed_out(kNetworkMountTimeoutChecks)};
  auto r = evaluate_disk(s);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason,
            "/lustre/fs1 stat timed out (possible connection issue) has failed continuously "
            "for 5 checks");
  // Another stat error, or a full network file system, is shown but not judged (as GPUd).
  NetworkMount full;
  full.mount_point = "/mnt/nfs";
  full.usage = host::FsUsage{};
  full.usage->total_bytes = 100 * kGiB;
  NetworkMount gone = timed_out(0);
  gone.timed_out = false;
  gone.error = "statvfs /mnt/nfs: Stale file handle";
  s.network_mounts = {full, gone};
  EXPECT_EQ(evaluate_disk(s).health(), Health::kHealthy);
}

// The count across checks, on a mount whose statfs does not answer: the host root's mount table
// says Lustre is on /lustre/fs1, which leads to a FUSE mount that never answers.
TEST(DiskComponent, ANetworkMountThatDoesNotAnswerCountsChecksInARowUntilItAnswers) {
  gpud::testing::HungMount hung(120);
  if (!hung.why_not().empty()) GTEST_SKIP() << hung.why_not();
  testing_support::TempDir tmp("gpud-disk-network");
  ASSERT_FALSE(tmp.path().empty());
  const std::filesystem::path root = tmp.path();
  std::filesystem::create_directories(root / "proc/self");
  std::filesystem::create_directories(root / "lustre");
  std::ofstream(root / "proc/self/mountinfo")
      << "22 1 259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw\n"
         "40 22 0:60 / /lustre/fs1 rw,relatime - lustre 172.16.0.100@tcp:/lustrefs rw\n";
  std::filesystem::create_directory_symlink(hung.path(), root / "lustre/fs1");
  Config cfg;
  cfg.host_root = root.string();
  cfg.nfs_checkers = {a_checker()};
  DiskComponent c(ComponentContext{&cfg, nullptr, nullptr, false});
  // The first check waits out the deadline; the later ones answer at once while it is blocked.
  for (int n = 1; n < kNetworkMountTimeoutChecks; ++n) {
    auto r = c.check();
    EXPECT_EQ(r.health(), Health::kHealthy) << n << ": " << r.summary();
    EXPECT_NE(r.detail.find(std::to_string(n) + " check(s) in a row"), std::string::npos)
        << r.detail;
  }
  auto r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason,
            "/lustre/fs1 stat timed out (possible connection issue) has failed continuously "
            "for 5 checks");
  // The file system goes away (its daemon killed): the blocked call returns, and a stat that
  // fails without a timeout ends the count.
  hung.release();
  for (int i = 0; i < 100 && r.health() != Health::kHealthy; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r = c.check();
  }
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
}

}  // namespace
}  // namespace gpud::components
