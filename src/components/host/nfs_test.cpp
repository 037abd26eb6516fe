#include "components/host/nfs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "testing/temp_dir.h"

namespace gpud::components {
namespace {

// The probe runs on the network file systems GPUd's nfs component accepts (pkg/disk
// DefaultNFSFsTypeFunc: nfs*, lustre, wekafs, virtiofs), and skips a volume on any other.
TEST(NfsProbe, AVolumeOnLustreIsProbedAndOneOnXfsIsSkipped) {
  testing_support::TempDir tmp("gpud-nfs-lustre");
  ASSERT_FALSE(tmp.path().empty());
  const std::filesystem::path root = tmp.path();
  std::filesystem::create_directories(root / "proc/self");
  std::filesystem::create_directories(root / "etc");
  std::filesystem::create_directories(root / "lustre/fs1");
  std::filesystem::create_directories(root / "data");
  std::ofstream(root / "proc/self/mountinfo")
      << "22 1 259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw\n"
         "28 22 259:4 / /data rw,noatime - xfs /dev/md0 rw\n"
         "40 22 0:60 / /lustre/fs1 rw,relatime - lustre 172.16.0.100@tcp:/lustrefs rw,flock\n";
  std::ofstream(root / "etc/machine-id") << "4c4c4544004e3510804cb4c04f4e3333\n";
  Config::NfsChecker on_lustre{"/lustre/fs1/shared", ".gpud-nfs", "ok"};
  Config::NfsChecker on_xfs{"/data", ".gpud-nfs", "ok"};
  std::filesystem::create_directories(root / "lustre/fs1/shared");
  host::HostFs fs(root.string());
  NfsProbeVerdict v = probe_nfs_volumes(fs, {on_lustre, on_xfs});
  ASSERT_EQ(v.passed.size(), 1u) << (v.problems.empty() ? "" : v.problems[0]);
  EXPECT_NE(v.passed[0].find("/lustre/fs1/shared"), std::string::npos) << v.passed[0];
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0],
            "NFS check of /data skipped: it is on xfs /data, not NFS (or Lustre, WekaFS, "
            "virtiofs)");
  // The probe removed its own file and left the directory it made.
  EXPECT_TRUE(std::filesystem::is_directory(root / "lustre/fs1/shared/.gpud-nfs"));
  EXPECT_FALSE(std::filesystem::exists(
      root / "lustre/fs1/shared/.gpud-nfs/4c4c4544004e3510804cb4c04f4e3333"));
}

}  // namespace
}  // namespace gpud::components
