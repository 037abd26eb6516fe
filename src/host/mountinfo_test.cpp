#include "host/mountinfo.h"

#include <gtest/gtest.h>

#include <chrono>

#include "host/host_fs.h"

namespace gpud::host {
namespace {

std::string fixture(const std::string& name) {
  HostFs fs(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/" + name);
  auto r = fs.read("/proc/self/mountinfo");
  EXPECT_TRUE(r.ok());
  return r.value_or("");
}

TEST(MountInfo, ParsesAllFieldsOfALine) {
  auto t = parse_mountinfo(
      "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:4 - ext3 /dev/root rw,errors=continue\n");
  ASSERT_EQ(t.mounts.size(), 1u);
  EXPECT_EQ(t.malformed_lines, 0u);
  const MountInfo& m = t.mounts[0];
  EXPECT_EQ(m.mount_id, 36);
  EXPECT_EQ(m.parent_id, 35);
  EXPECT_EQ(m.major, 98u);
  EXPECT_EQ(m.minor, 0u);
  EXPECT_EQ(m.root, "/mnt1");
  EXPECT_EQ(m.mount_point, "/mnt2");
  EXPECT_EQ(m.options, "rw,noatime");
  EXPECT_EQ(m.optional_fields, (std::vector<std::string>{"master:1", "shared:4"}));
  EXPECT_EQ(m.fs_type, "ext3");
  EXPECT_EQ(m.source, "/dev/root");
  EXPECT_EQ(m.super_options, "rw,errors=continue");
}

TEST(MountInfo, ParsesRecordedDebianTable) {
  auto t = parse_mountinfo(fixture("debian12"));
  EXPECT_EQ(t.malformed_lines, 0u);
  EXPECT_EQ(t.mounts.size(), 20u);
  const MountInfo* root = find_mount(t, "/");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->fs_type, "ext4");
  EXPECT_EQ(root->source, "/dev/vda");
  EXPECT_EQ(root->major, 254u);
}

TEST(MountInfo, UnescapesSpacesTabsNewlinesAndBackslashes) {
  auto t = parse_mountinfo(fixture("escaped-mounts"));
  ASSERT_NE(find_mount(t, "/mnt/my data"), nullptr);
  const MountInfo* nfs = find_mount(t, "/mnt/team\ttab\\back");
  ASSERT_NE(nfs, nullptr);
  EXPECT_EQ(nfs->root, "/exports/team a");
  EXPECT_EQ(nfs->source, "10.0.0.5:/exports/team a");
  EXPECT_EQ(nfs->fs_type, "nfs4");
  EXPECT_EQ(nfs->optional_fields, (std::vector<std::string>{"shared:31", "master:7"}));
  EXPECT_NE(find_mount(t, "/mnt/line\nbreak"), nullptr);
}

TEST(MountInfo, MalformedLinesAreSkippedAndCounted) {
  auto t = parse_mountinfo(fixture("escaped-mounts"));
  // free text, a line without the "-" separator, a non-numeric mount id; the blank line is not
  // counted
  EXPECT_EQ(t.malformed_lines, 3u);
  EXPECT_EQ(t.mounts.size(), 7u);
  EXPECT_EQ(find_mount(t, "/mnt/nodash"), nullptr);
  EXPECT_EQ(find_mount(t, "/mnt/badid"), nullptr);
}

TEST(MountInfo, LaterMountOnSamePointHidesEarlierOne) {
  auto t = parse_mountinfo(fixture("escaped-mounts"));
  const MountInfo* data = find_mount(t, "/data");
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->fs_type, "tmpfs");
  EXPECT_EQ(data->mount_id, 29);
}

TEST(MountInfo, TruncatedLinesAreMalformed) {
  auto t =
      parse_mountinfo("1 2 3:4 / /a rw -\n1 2 3:4 / /b rw - ext4\n1 2 3 / /c rw - ext4 x rw\n");
  EXPECT_EQ(t.mounts.size(), 0u);
  EXPECT_EQ(t.malformed_lines, 3u);
}

TEST(MountInfo, MissingSuperOptionsAreTolerated) {
  auto t = parse_mountinfo("1 2 3:4 / /a rw - ext4 /dev/sda1\r\n");
  ASSERT_EQ(t.mounts.size(), 1u);
  EXPECT_EQ(t.mounts[0].source, "/dev/sda1");
  EXPECT_EQ(t.mounts[0].super_options, "");
}

TEST(MountInfo, UnescapeLeavesNonOctalBackslashesAlone) {
  EXPECT_EQ(unescape_mount_field("a\\040b"), "a b");
  EXPECT_EQ(unescape_mount_field("a\\134b"), "a\\b");
  EXPECT_EQ(unescape_mount_field("a\\xyz"), "a\\xyz");
  EXPECT_EQ(unescape_mount_field("trailing\\04"), "trailing\\04");
  EXPECT_EQ(unescape_mount_field("plain"), "plain");
}

TEST(MountInfo, ParsesLongKubernetesTable) {
  auto t = parse_mountinfo(fixture("long-mountinfo"));
  EXPECT_EQ(t.malformed_lines, 0u);
  EXPECT_EQ(t.mounts.size(), 1603u);
  const MountInfo* kubelet = find_mount(t, "/var/lib/kubelet");
  ASSERT_NE(kubelet, nullptr);
  EXPECT_EQ(kubelet->source, "/dev/nvme1n1");
  EXPECT_NE(t.mounts.back().mount_point.find("/etc hosts"), std::string::npos);
}

TEST(MountInfo, HundredThousandLinesParseQuickly) {
  std::string text;
  text.reserve(100000 * 160);
  for (int i = 0; i < 100000; ++i) {
    text +=
        std::to_string(100 + i) + " 24 0:99 / /var/lib/kubelet/pods/0000-" + std::to_string(i) +
        "/volumes/kubernetes.io~projected/kube\\040api rw,relatime shared:" + std::to_string(i) +
        " - tmpfs tmpfs rw,size=4096k\n";
  }
  auto start = std::chrono::steady_clock::now();
  auto t = parse_mountinfo(text);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(t.mounts.size(), 100000u);
  EXPECT_EQ(t.malformed_lines, 0u);
  // ~16 MB of text: about 0.3 s in the plain build. The bound still catches quadratic behaviour
  // (hours); the sanitizer build (ASan, UBSan and the fuzzer's coverage at -O0) runs ~15x slower.
#if defined(GPUD_SANITIZED)
  EXPECT_LT(elapsed, std::chrono::seconds(30));
#else
  EXPECT_LT(elapsed, std::chrono::seconds(5));
#endif
}

TEST(MountInfo, SmokeThisMachineHasARootMount) {
  HostFs fs("/");
  auto text = fs.read("/proc/self/mountinfo");
  if (!text) GTEST_SKIP() << "no /proc/self/mountinfo here";
  auto t = parse_mountinfo(*text);
  EXPECT_FALSE(t.mounts.empty());
  EXPECT_NE(find_mount(t, "/"), nullptr);
}

}  // namespace
}  // namespace gpud::host
