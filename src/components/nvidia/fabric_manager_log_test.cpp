// The fabric manager's log: the reference's matchers on the fixture log, line times, journald's
// JSON entries, and the reader over a growing file and a stand-in journalctl.
#include "components/nvidia/fabric_manager_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/time_util.h"

namespace gpud::components {
namespace {

namespace fs = std::filesystem;

const std::string kFixture =
    std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/fabric-manager/fabricmanager.log";

std::vector<std::string> fixture_lines() {
  std::ifstream in(kFixture);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TimePoint local(int year, int mon, int day, int h, int m, int s) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = s;
  tm.tm_isdst = -1;
  return Clock::from_time_t(std::mktime(&tm));
}

TEST(FabricManagerLog, EachMatcherNamesItsLineAndOthersNameNothing) {
  auto lines = fixture_lines();
  ASSERT_EQ(lines.size(), 12U);
  std::vector<std::string> names;
  for (const auto& l : lines) {
    auto m = match_fabric_manager_line(l);
    names.push_back(m ? std::string(m->name) : "-");
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"-", "-", "-", "-", std::string(kFmNonFatalError),
                                      std::string(kFmFatalError), std::string(kFmNvlinkFailure),
                                      std::string(kFmTopologyMismatch), std::string(kFmNothingToDo),
                                      "-", "-", std::string(kFmNonFatalError)}));
  auto fatal = match_fabric_manager_line(lines[5]);
  ASSERT_TRUE(fatal);
  EXPECT_EQ(fatal->nvswitch_error, 12028);
  EXPECT_EQ(fatal->message,
            "detected NVSwitch fatal error 12028 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 "
            "physical id 3 port 27");
  ASSERT_TRUE(fatal->logged);
  EXPECT_EQ(*fatal->logged, local(2026, 11, 30, 9, 13, 2));
  EXPECT_EQ(match_fabric_manager_line(lines[4])->nvswitch_error, 20034);
  EXPECT_FALSE(match_fabric_manager_line(lines[11])->logged) << "a garbled date is no time";
}

// The handle is a 64-bit id (19 or 20 digits in real logs, e.g. GPUd's sample "failed to find
// the GPU handle 5410063385269835209 in the multicast team request setup 6130806283959999566."):
// a number too wide for an int is still the fault.
TEST(FabricManagerLog, GpuHandleOfSixtyFourBitsMatches) {
  for (std::string handle : {"5410063385269835209", "18446744073709551615", "0"}) {
    auto m = match_fabric_manager_line(
        "[Nov 30 2026 09:13:02] [ERROR] [tid 2191] failed to find "
        "the GPU handle " +
        handle +
        " in the multicast team request setup "
        "6130806283959999566.");
    ASSERT_TRUE(m) << handle;
    EXPECT_EQ(m->name, kFmNvlinkFailure) << handle;
  }
  EXPECT_FALSE(match_fabric_manager_line(
      "failed to find the GPU handle x in the multicast team request setup 1."))
      << "a handle is a number";
}

TEST(FabricManagerLog, LineTimeNeedsTheExactPrefix) {
  EXPECT_EQ(parse_fabric_manager_time("[Jan 02 2006 15:04:05] [INFO] x"),
            local(2006, 1, 2, 15, 4, 5));
  EXPECT_FALSE(parse_fabric_manager_time("Jan 02 2006 15:04:05 no brackets"));
  EXPECT_FALSE(parse_fabric_manager_time("[Jan 02 2006 15:04:05"));
  EXPECT_FALSE(parse_fabric_manager_time("[Foo 02 2006 15:04:05] x"));
  EXPECT_FALSE(parse_fabric_manager_time(""));
}

TEST(FabricManagerLog, HostileLinesAreBoundedValidUtf8) {
  std::string line = "[Jan 02 2006 15:04:05] [ERROR] [tid 1] NV_WARN_NOTHING_TO_DO \xff\xfe ";
  line += std::string(10000, 'x');
  auto m = match_fabric_manager_line(line);
  ASSERT_TRUE(m);
  EXPECT_LE(m->message.size(), 2048U);
  EXPECT_NO_THROW((void)nlohmann::json(m->message).dump());
}

TEST(FabricManagerLog, JournalEntriesAsJournaldWritesThem) {
  auto e = parse_journal_json_line(
      R"({"__CURSOR":"s=abc;i=1f","__REALTIME_TIMESTAMP":"1764493982000000","MESSAGE":"hello"})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "hello");
  EXPECT_EQ(e->cursor, "s=abc;i=1f");
  ASSERT_TRUE(e->time);
  EXPECT_EQ(Clock::to_time_t(*e->time), 1764493982);
  // A message that is not UTF-8 comes as its bytes.
  auto bytes = parse_journal_json_line(R"({"MESSAGE":[78,86,255]})");
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->message, "NV\xff");
  EXPECT_FALSE(bytes->time);
  EXPECT_FALSE(parse_journal_json_line("not json"));
  EXPECT_FALSE(parse_journal_json_line(R"({"MESSAGE":[300]})"));
  EXPECT_FALSE(parse_journal_json_line(R"({"no":"message"})"));
  EXPECT_FALSE(parse_journal_json_line("[1,2]"));
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/gpud-fmlog-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

std::vector<std::string> names_of(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.name);
  return out;
}

TEST(FabricManagerLog, ReaderTakesTheBacklogWithItsTimesThenLiveLines) {
  TempDir d;
  const std::string log = d.path + "/fabricmanager.log";
  fs::copy_file(kFixture, log);
  FabricManagerLogReader reader(log);
  const TimePoint now = Clock::now();
  auto r = reader.read("accelerator-nvidia-fabric-manager", std::nullopt, now);
  EXPECT_TRUE(r.errors.empty());
  // The garbled-date line is in the backlog without a time of its own: skipped.
  EXPECT_EQ(names_of(r.events), (std::vector<std::string>{
                                    std::string(kFmNonFatalError), std::string(kFmFatalError),
                                    std::string(kFmNvlinkFailure), std::string(kFmTopologyMismatch),
                                    std::string(kFmNothingToDo)}));
  for (const auto& e : r.events) {
    EXPECT_EQ(e.type, EventType::kWarning);
    EXPECT_EQ(e.component, "accelerator-nvidia-fabric-manager");
  }
  EXPECT_EQ(r.events[1].extra_info["nvswitch_error"], 12028);
  EXPECT_EQ(r.events[1].time, local(2026, 11, 30, 9, 13, 2));

  EXPECT_TRUE(reader.read("c", std::nullopt, now).events.empty()) << "nothing new";
  std::ofstream(log, std::ios::app) << "late line with NV_WARN_NOTHING_TO_DO and no date\n";
  auto live = reader.read("c", std::nullopt, now);
  ASSERT_EQ(live.events.size(), 1U);
  EXPECT_EQ(live.events[0].time, now) << "a live line without a time is stamped when read";
}

TEST(FabricManagerLog, AMissingLogIsNoErrorAndAnUnreadableOneIsNamed) {
  TempDir d;
  FabricManagerLogReader missing(d.path + "/none.log");
  auto r = missing.read("c", std::nullopt, Clock::now());
  EXPECT_TRUE(r.file_missing);
  EXPECT_TRUE(r.errors.empty());
  FabricManagerLogReader dir(d.path);
  auto r2 = dir.read("c", std::nullopt, Clock::now());
  ASSERT_EQ(r2.errors.size(), 1U);
  EXPECT_NE(r2.errors[0].find(d.path), std::string::npos) << r2.errors[0];
}

// A stand-in journalctl that records its arguments and prints two entries, the second after the
// cursor of the first; the reader asks for the unit, JSON, and then goes on from the last cursor.
TEST(FabricManagerLog, JournalIsReadFromTheLastCursor) {
  TempDir d;
  const std::string args = d.path + "/args";
  const std::string script = d.path + "/journalctl";
  {
    std::ofstream s(script);
    s << "#!/bin/sh\n"
      << "echo \"$@\" >> " << args << "\n"
      << "case \"$*\" in *after-cursor=c2*) exit 0;; esac\n"
      << "echo '{\"__CURSOR\":\"c1\",\"__REALTIME_TIMESTAMP\":\"1764493982000000\","
         "\"MESSAGE\":\"detected NVSwitch fatal error 12028 on fid 0\"}'\n"
      << "echo 'garbage'\n"
      << "echo '{\"__CURSOR\":\"c2\",\"__REALTIME_TIMESTAMP\":\"1764493983000000\","
         "\"MESSAGE\":\"Connected to 1 node.\"}'\n";
  }
  ::chmod(script.c_str(), 0755);
  FabricManagerLogReader reader(d.path + "/no-file.log");
  FabricManagerLogReader::Journal j{script, d.path, "/host"};
  auto r = reader.read("c", j, Clock::now());
  EXPECT_TRUE(r.errors.empty()) << r.errors[0];
  ASSERT_EQ(r.events.size(), 1U);
  EXPECT_EQ(r.events[0].name, kFmFatalError);
  EXPECT_EQ(Clock::to_time_t(r.events[0].time), 1764493982);
  auto r2 = reader.read("c", j, Clock::now());
  EXPECT_TRUE(r2.events.empty());
  std::ifstream in(args);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(),
            "--unit nvidia-fabricmanager.service --no-pager --output json --output-fields MESSAGE "
            "--root=/host --since=-10min\n"
            "--unit nvidia-fabricmanager.service --no-pager --output json --output-fields MESSAGE "
            "--root=/host --after-cursor=c2\n");
}

TEST(FabricManagerLog, AJournalctlThatFailsIsAnErrorWithItsWords) {
  TempDir d;
  const std::string script = d.path + "/journalctl";
  std::ofstream(script) << "#!/bin/sh\necho 'No journal files were found.' >&2\nexit 1\n";
  ::chmod(script.c_str(), 0755);
  FabricManagerLogReader reader(d.path + "/no-file.log");
  auto r = reader.read("c", FabricManagerLogReader::Journal{script, d.path, ""}, Clock::now());
  ASSERT_EQ(r.errors.size(), 1U);
  EXPECT_EQ(r.errors[0], "journalctl exited with 1: No journal files were found.");
}

}  // namespace
}  // namespace gpud::components
