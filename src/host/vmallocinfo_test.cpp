// GPUd's facts (leptonai/gpud 4a8de33a3f02e207f39e9023d67125592d599731, components/memory/bpf.go
// and its testdata/vmallocinfo.bpf_jit_alloc_exec): the BPF JIT buffer is the sum of the second
// field of /proc/vmallocinfo's bpf_jit_alloc_exec lines, in bytes, and such a line without a
// decimal size is an error.
#include "host/vmallocinfo.h"

#include <gtest/gtest.h>

#include <string>

#include "host/host_fs.h"
#include "testing/temp_dir.h"

namespace gpud::host {
namespace {

HostFs fixture(const std::string& dir) {
  return HostFs(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/" + dir);
}

TEST(BpfJitBytes, SumsTheJitCallersAndNoOtherBpfAllocation) {
  // Three bpf_jit_alloc_exec areas (8 + 8 + 16 KiB) and one 2 MiB program pack; the programs'
  // own structures (bpf_prog_alloc_no_stats, bpf_prog_realloc) are not the JIT's.
  auto r = read_bpf_jit_bytes(fixture("host/bpf-jit"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, 8192u + 8192u + 16384u + 2101248u);
}

TEST(BpfJitBytes, RecordedSixEighteenKernelHoldsItsJitInOnePack) {
  // Recorded on 6.18: no bpf_jit_alloc_exec line at all, where GPUd reads 0.
  auto r = read_bpf_jit_bytes(fixture("host-os/real"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, 2101248u);
}

TEST(BpfJitBytes, LineOfAnotherCallerCountsNothing) {
  auto r = bpf_jit_bytes_of_line(
      "0xffffffffc1032000-0xffffffffc1036000   16384 other_function+0xe/0x20 pages=3 vmalloc N0=3");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0u);
}

TEST(BpfJitBytes, JitLineWithoutSizeIsAnError) {
  EXPECT_FALSE(bpf_jit_bytes_of_line(
                   "0xffffffffc1032000-0xffffffffc1036000 bpf_jit_alloc_exec+0xe/0x20 pages=3")
                   .ok());
  EXPECT_FALSE(bpf_jit_bytes_of_line("0xffffffffc1032000-0xffffffffc1036000   16k "
                                     "bpf_jit_alloc_exec+0xe/0x20 pages=3 vmalloc N0=3")
                   .ok());
  EXPECT_FALSE(bpf_jit_bytes_of_line("bpf_jit_alloc_exec").ok());
}

TEST(BpfJitBytes, GarbledJitLineFailsTheWholeSum) {
  testing_support::TempDir root;
  ASSERT_FALSE(root.path().empty());
  root.write("proc/vmallocinfo",
             "0xffffffffc0107000-0xffffffffc0109000    8192 bpf_jit_alloc_exec+0xe/0x20 pages=1 "
             "vmalloc N1=1\n"
             "0xffffffffc0127000-0xffffffffc0129000 bpf_jit_alloc_exec+0xe/0x20 pages=1\n");
  auto r = read_bpf_jit_bytes(HostFs(root.path()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no size"), std::string::npos) << r.error().message;
}

TEST(BpfJitBytes, MissingFileIsAnError) {
  EXPECT_FALSE(read_bpf_jit_bytes(fixture("host/debian12")).ok());
}

}  // namespace
}  // namespace gpud::host
