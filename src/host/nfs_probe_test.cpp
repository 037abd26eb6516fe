// The NFS probe: its flag's JSON, which mount holds a volume, the write / read back / read others /
// clean up protocol on a directory, and a volume whose lookups hang (a FUSE mount).
#include "host/nfs_probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "testing/hung_mount.h"

namespace gpud::host {
namespace {

namespace fs = std::filesystem;

TEST(NfsCheckerConfigs, ParsesGroupsAndNamesTheBadField) {
  auto ok = parse_nfs_checker_configs(
      R"([{"volume_path":"/mnt/nfs","dir_name":".gpud-nfs","file_contents":"ok"}])");
  ASSERT_TRUE(ok) << ok.error().message;
  ASSERT_EQ(ok->size(), 1U);
  EXPECT_EQ((*ok)[0].volume_path, "/mnt/nfs");
  EXPECT_EQ((*ok)[0].dir_name, ".gpud-nfs");
  EXPECT_EQ((*ok)[0].file_contents, "ok");
  EXPECT_TRUE(parse_nfs_checker_configs("[]"));
  auto error_of = [](std::string_view json) {
    auto r = parse_nfs_checker_configs(json);
    return r ? std::string("parsed") : r.error().message;
  };
  EXPECT_NE(error_of("{}").find("want a JSON array"), std::string::npos);
  EXPECT_EQ(error_of(R"([{"volume_path":"/m","dir_name":"d"}])"),
            "entry 0: \"file_contents\" must be a non-empty string");
  EXPECT_EQ(error_of(R"([{"volume_path":"m","dir_name":"d","file_contents":"x"}])"),
            "entry 0: \"volume_path\" must be an absolute path");
  EXPECT_EQ(error_of(R"([{"volume_path":"/m","dir_name":"../etc","file_contents":"x"}])"),
            "entry 0: \"dir_name\" must be one directory name");
  EXPECT_EQ(
      error_of(R"([{"volume_path":"/m","dir_name":"d","file_contents":"x"},{"volume_path":"/m",)"
               R"("dir_name":"d","file_contents":"x","extra":1}])"),
      "entry 1: unknown field \"extra\"");
  EXPECT_EQ(error_of("[1]"), "entry 0 is not an object");
}

TEST(NfsCheckerConfigs, TheMountHoldingAPathIsTheLongestParent) {
  MountTable t = parse_mountinfo(
      "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
      "40 22 0:50 / /mnt/nfs rw - nfs4 filer:/export rw\n"
      "41 22 0:51 / /mnt/nfs2 rw - ext4 /dev/sdb1 rw\n");
  ASSERT_NE(containing_mount(t, "/mnt/nfs/jobs"), nullptr);
  EXPECT_EQ(containing_mount(t, "/mnt/nfs/jobs")->fs_type, "nfs4");
  EXPECT_EQ(containing_mount(t, "/mnt/nfs")->fs_type, "nfs4");
  EXPECT_EQ(containing_mount(t, "/mnt/nfs2/x")->fs_type, "ext4") << "not a path prefix of /mnt/nfs";
  EXPECT_EQ(containing_mount(t, "/home")->mount_point, "/");
  EXPECT_TRUE(network_fs_type("nfs"));
  EXPECT_TRUE(network_fs_type("nfs4"));
  for (const char* t : {"lustre", "wekafs", "virtiofs"}) EXPECT_TRUE(network_fs_type(t)) << t;
  for (const char* t : {"ext4", "xfs", "tmpfs", "fuse.sshfs", "lustre_fake", ""})
    EXPECT_FALSE(network_fs_type(t)) << t;
}

struct Volume {
  Volume() {
    char tmpl[] = "/tmp/gpud-nfs-probe-XXXXXX";
    root = ::mkdtemp(tmpl);
    fs::create_directories(root + "/mnt/nfs");
  }
  ~Volume() { fs::remove_all(root); }
  std::string root;
  Config::NfsChecker checker{"/mnt/nfs", ".gpud-nfs", "gpud nfs check"};
};

TEST(NfsProbe, WritesReadsBackReadsTheOthersAndRemovesItsOwnFile) {
  Volume v;
  HostFs hfs(v.root);
  auto r = run_nfs_probe(hfs, v.checker, "aaaa1111");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->members, std::vector<std::string>{"aaaa1111"});
  const std::string dir = v.root + "/mnt/nfs/.gpud-nfs";
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_empty(dir)) << "its own file is removed";
  // Another member's file, as that member left it.
  std::ofstream(dir + "/bbbb2222") << "gpud nfs check";
  r = run_nfs_probe(hfs, v.checker, "aaaa1111");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->members, (std::vector<std::string>{"aaaa1111", "bbbb2222"}));
  std::ofstream(dir + "/cccc3333") << "stale";
  r = run_nfs_probe(hfs, v.checker, "aaaa1111");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "member cccc3333's file " + dir + "/cccc3333 has other contents than file_contents");
  EXPECT_FALSE(fs::exists(dir + "/aaaa1111")) << "removed after a failure too";
}

TEST(NfsProbe, AMissingVolumeOrMachineIdIsNamed) {
  Volume v;
  HostFs hfs(v.root);
  Config::NfsChecker gone{"/mnt/gone", ".gpud-nfs", "x"};
  auto r = run_nfs_probe(hfs, gone, "aaaa1111");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "stat " + v.root + "/mnt/gone: No such file or directory");
  r = run_nfs_probe(hfs, v.checker, "");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("machine id"), std::string::npos);
}

// A volume whose lookups hang: the probe answers at its deadline with ETIMEDOUT, and while the
// first probe is still blocked the next answers at once.
TEST(NfsProbe, AHungVolumeAnswersAtTheDeadline) {
  using namespace std::chrono;
  testing::HungMount hung(30);
  if (!hung.why_not().empty()) GTEST_SKIP() << hung.why_not();
  Config::NfsChecker c{hung.path(), ".gpud-nfs", "x"};
  auto t0 = steady_clock::now();
  auto r = run_nfs_probe(HostFs("/"), c, "aaaa1111", milliseconds(300));
  EXPECT_LT(steady_clock::now() - t0, seconds(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ETIMEDOUT);
  EXPECT_EQ(r.error().message, "mount " + hung.path() + " did not answer within 0.3 s");
  t0 = steady_clock::now();
  r = run_nfs_probe(HostFs("/"), c, "aaaa1111", milliseconds(300));
  EXPECT_LT(steady_clock::now() - t0, milliseconds(100));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("(still)"), std::string::npos);
}

}  // namespace
}  // namespace gpud::host
