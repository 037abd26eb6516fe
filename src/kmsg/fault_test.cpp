#include "kmsg/fault.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "kmsg/rules.h"
#include "kmsg/writer.h"

namespace gpud::kmsg {
namespace {

TEST(Fault, LevelNamesInEveryStyle) {
  EXPECT_EQ(parse_kernel_log_level("KERN_EMERG"), 0);
  EXPECT_EQ(parse_kernel_log_level("KERN_ERR"), 3);
  EXPECT_EQ(parse_kernel_log_level("err"), 3);
  EXPECT_EQ(parse_kernel_log_level("kern.err"), 3);
  EXPECT_EQ(parse_kernel_log_level("warning"), 4);
  EXPECT_EQ(parse_kernel_log_level("KERN_DEBUG"), 7);
  EXPECT_EQ(parse_kernel_log_level("6"), 6);
  EXPECT_FALSE(parse_kernel_log_level("loud"));
  EXPECT_FALSE(parse_kernel_log_level("8"));
}

TEST(Fault, GpudRequestShapes) {
  auto x = parse_fault_request(nlohmann::json::parse(R"({"xid":{"id":79,"pci":"0000:3b:00.0"}})"));
  ASSERT_TRUE(x);
  EXPECT_EQ(x->xid, 79);
  EXPECT_EQ(x->pci, "0000:3b:00.0");
  auto k = parse_fault_request(
      nlohmann::json::parse(R"({"kernel_message":{"priority":"KERN_WARNING","message":"hi"}})"));
  ASSERT_TRUE(k);
  EXPECT_EQ(k->level, 4);
  EXPECT_EQ(k->kernel_message, "hi");
  EXPECT_TRUE(parse_fault_request(nlohmann::json::parse(R"({"xid_to_inject":{"id":48}})")));
  EXPECT_TRUE(parse_fault_request(nlohmann::json::parse(R"({"sxid":{"id":20034}})")));
}

TEST(Fault, BadRequestsAre400) {
  for (const char* body : {R"([])", R"({})", R"({"xid":{}})", R"({"xid":{"id":"79"}})",
                           R"({"xid":{"id":-1}})", R"({"kernel_message":{"message":""}})",
                           R"({"kernel_message":{"message":"x","priority":"LOUD"}})"}) {
    auto r = parse_fault_request(nlohmann::json::parse(body));
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().code, 400) << body;
  }
}

TEST(Fault, InjectWritesTheKernelLineToThePath) {
  char path[] = "/tmp/gpud-fault-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  FaultRequest req;
  req.xid = 79;
  req.pci = "0000:3b:00.0";
  auto line = inject_fault(req, path);
  ASSERT_TRUE(line) << line.error().message;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "<43>" + *line + "\n");
  EXPECT_NE(line->find("NVRM: Xid (PCI:0000:3b:00): 79"), std::string::npos) << *line;
  EXPECT_TRUE(line->ends_with(kInjectedMarker)) << *line;
  std::remove(path);
}

TEST(Fault, ALongMessageIsCutBeforeTheMarker) {
  const std::string w = format_kmsg_write(std::string(2000, 'y'), 6, 0, kInjectedMarker);
  EXPECT_EQ(w.size(), std::string("<6>\n").size() + kMaxWriteBytes);
  EXPECT_TRUE(w.ends_with("..." + std::string(kInjectedMarker) + "\n")) << w;
}

TEST(Fault, UnwritablePathIsAClearError) {
  FaultRequest req;
  req.kernel_message = "x";
  auto r = inject_fault(req, "/nonexistent/dir/kmsg");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace gpud::kmsg
