#include "host/block_devices.h"

#include <gtest/gtest.h>

namespace gpud::host {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

const BlockDevice* find(const std::vector<BlockDevice>& ds, std::string_view name) {
  for (const auto& d : ds)
    if (d.name == name) return &d;
  return nullptr;
}

TEST(BlockMounts, ParsesMajorMinorMountPointAndFsType) {
  auto m = parse_block_mounts(
      "26 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
      "28 26 8:0 / /data\\040disk rw,relatime - xfs /dev/sda rw\n"
      "short line\n");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].major_minor, "259:2");
  EXPECT_EQ(m[0].mount_point, "/");
  EXPECT_EQ(m[0].fs_type, "ext4");
  EXPECT_EQ(m[1].mount_point, "/data disk");  // \040 decoded
  EXPECT_EQ(m[1].fs_type, "xfs");
}

TEST(BlockDevices, NvmeDiskWithPartitionsAndMounts) {
  auto ds = read_block_devices(HostFs(fixture("block")));
  const BlockDevice* nvme = find(ds, "nvme0n1");
  ASSERT_NE(nvme, nullptr);
  EXPECT_EQ(nvme->type, "disk");
  EXPECT_EQ(nvme->size_bytes, int64_t{1875385008} * 512);
  EXPECT_FALSE(nvme->rotational);
  EXPECT_EQ(nvme->model, "SAMSUNG MZ1L21T9HCLS-00A07");
  EXPECT_EQ(nvme->serial, "S64PNE0R123456");
  EXPECT_EQ(nvme->rev, "GDC7302Q");
  EXPECT_EQ(nvme->wwn, "eui.36344730526012340025384500000001");
  EXPECT_EQ(nvme->children, (std::vector<std::string>{"nvme0n1p1", "nvme0n1p2"}));
  EXPECT_TRUE(nvme->mount_point.empty());

  const BlockDevice* p2 = find(ds, "nvme0n1p2");
  ASSERT_NE(p2, nullptr);
  EXPECT_EQ(p2->type, "part");
  EXPECT_EQ(p2->parents, (std::vector<std::string>{"nvme0n1"}));
  EXPECT_EQ(p2->mount_point, "/");  // first mount of 259:2, not the /var/lib/docker bind
  EXPECT_EQ(p2->fs_type, "ext4");
  EXPECT_GE(p2->used_bytes, 0);
  EXPECT_EQ(find(ds, "nvme0n1p1")->mount_point, "/boot/efi");
  EXPECT_EQ(find(ds, "nvme0n1p1")->fs_type, "vfat");
}

TEST(BlockDevices, RotationalScsiDiskWithVendor) {
  auto ds = read_block_devices(HostFs(fixture("block")));
  const BlockDevice* sda = find(ds, "sda");
  ASSERT_NE(sda, nullptr);
  EXPECT_TRUE(sda->rotational);
  EXPECT_EQ(sda->vendor, "ATA");
  EXPECT_EQ(sda->rev, "SN03");
  EXPECT_EQ(sda->mount_point, "/data disk");
  EXPECT_EQ(sda->used_bytes, 0);  // mount point absent under the fixture root
  EXPECT_TRUE(sda->children.empty());
}

TEST(BlockDevices, SkipsEmptyLoopAndZramKeepsUsedLoop) {
  auto ds = read_block_devices(HostFs(fixture("block")));
  EXPECT_EQ(find(ds, "loop0"), nullptr);
  EXPECT_EQ(find(ds, "zram0"), nullptr);
  const BlockDevice* loop1 = find(ds, "loop1");
  ASSERT_NE(loop1, nullptr);
  EXPECT_EQ(loop1->type, "loop");
  EXPECT_EQ(loop1->fs_type, "squashfs");
}

TEST(BlockDevices, DisksAreFollowedByTheirPartitions) {
  auto ds = read_block_devices(HostFs(fixture("block")));
  std::vector<std::string> names;
  for (const auto& d : ds) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"loop1", "nvme0n1", "nvme0n1p1", "nvme0n1p2", "sda"}));
}

TEST(BlockDevices, ContainerRootDiskIsTheLongestCoveringMount) {
  HostFs fs(fixture("block"));
  auto ds = read_block_devices(fs);
  auto mounts = parse_block_mounts(*fs.read("/proc/self/mountinfo"));
  EXPECT_EQ(find_disk_for_path(ds, mounts, "/var/lib/kubelet"), "nvme0n1p2");
  EXPECT_EQ(find_disk_for_path(ds, mounts, "/data disk/x"), "sda");
  EXPECT_EQ(find_disk_for_path(ds, mounts, "/boot/efix"), "nvme0n1p2");
  EXPECT_EQ(find_disk_for_path({}, mounts, "/"), "");
}

TEST(BlockDevices, RecordedTreeHasVdaAndNoEmptyLoop) {
  auto ds = read_block_devices(HostFs(fixture("real")));
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].name, "vda");
  EXPECT_EQ(ds[0].mount_point, "/");
  EXPECT_EQ(ds[0].fs_type, "ext4");
}

}  // namespace
}  // namespace gpud::host
