#include "app/config_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "app/deploy_files.h"
#include "app/options.h"

#ifndef GPUD_SOURCE_DIR
#define GPUD_SOURCE_DIR "."
#endif

namespace gpud::app {
namespace {

namespace fs = std::filesystem;

// `gpud run`'s options and --config, parsed from argv as the verb does.
struct RunCommand {
  CLI::App app{"gpud run", "run"};
  RunFlags flags;
  std::string sample = "1m";
  std::string config;
  RunCommand() {
    add_run_options(app, flags, sample);
    add_config_option(app, config);
  }
  void parse(std::vector<std::string> argv) {
    std::reverse(argv.begin(), argv.end());  // CLI11 parses from the back
    app.parse(argv);
  }
};

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char tmpl[] = "/tmp/gpud-config-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    EXPECT_GE(fd, 0);
    ::close(fd);
    path = tmpl;
    std::ofstream(path) << text;
  }
  ~TempFile() { fs::remove(path); }
};

TEST(ConfigYaml, ScalarsListsAndMapsBecomeFlagTexts) {
  auto e = parse_config_yaml(R"(# comment
gpu_count: 8
components: [cpu, disk]
tls-san:
  - a.example
  - 10.0.0.1
xid-thresholds:
  overrides:
    "94": {rebootThreshold: 1000}
no-tls: true
log-file:
)",
                             "gpud.yaml");
  ASSERT_TRUE(e) << e.error().message;
  ASSERT_EQ(e->size(), 5u) << "a key without a value sets nothing";
  EXPECT_EQ((*e)[0].flag, "gpu-count") << "underscores read as dashes";
  EXPECT_EQ((*e)[0].values, std::vector<std::string>{"8"});
  EXPECT_EQ((*e)[0].line, 2);
  EXPECT_EQ((*e)[1].values, (std::vector<std::string>{"cpu", "disk"}));
  EXPECT_EQ((*e)[2].values, (std::vector<std::string>{"a.example", "10.0.0.1"}));
  ASSERT_EQ((*e)[3].values.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse((*e)[3].values[0]),
            nlohmann::json::parse(R"({"overrides":{"94":{"rebootThreshold":1000}}})"));
  EXPECT_EQ((*e)[4].values, std::vector<std::string>{"true"});
}

TEST(ConfigYaml, QuotedScalarsStayStringsInStructuredValues) {
  auto e = parse_config_yaml("x: {a: \"8\", b: 8, c: 1.5, d: yes, e: null, f: false}\n", "f");
  ASSERT_TRUE(e);
  EXPECT_EQ(nlohmann::json::parse((*e)[0].values[0]),
            nlohmann::json::parse(R"({"a":"8","b":8,"c":1.5,"d":"yes","e":null,"f":false})"));
}

TEST(ConfigYaml, BrokenFilesAreErrorsThatSayWhere) {
  EXPECT_TRUE(parse_config_yaml("", "f")->empty());
  EXPECT_TRUE(parse_config_yaml("# only comments\n", "f")->empty());
  auto bad = parse_config_yaml("gpu-count: 8\nlog-level: [info\n", "/etc/gpud/gpud.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/etc/gpud/gpud.yaml:"), std::string::npos)
      << bad.error().message;
  EXPECT_NE(bad.error().message.find("not valid YAML"), std::string::npos) << bad.error().message;
  auto list = parse_config_yaml("- gpu-count\n", "f");
  ASSERT_FALSE(list);
  EXPECT_NE(list.error().message.find("map of `gpud run` flag names"), std::string::npos);
  auto dashed = parse_config_yaml("--gpu-count: 8\n", "f");
  ASSERT_FALSE(dashed);
  EXPECT_NE(dashed.error().message.find("without dashes (\"gpu-count\")"), std::string::npos)
      << dashed.error().message;
}

// Found by fuzz/config_file_fuzz: a map value with bytes that are not UTF-8 became JSON that
// nlohmann refuses to print (std::terminate); a key of dashes only ran substr past its end.
TEST(ConfigYaml, NonUtf8TextAndKeysOfDashesAreErrorsNotCrashes) {
  auto bytes = parse_config_yaml("gpu-count: 8\nxid-thresholds: {\"79\": \"\xff\xfe\"}\n", "f");
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().message, "f:2: not valid UTF-8 text");
  auto nul = parse_config_yaml(std::string("log-level: in\0fo\n", 17), "f");
  ASSERT_FALSE(nul);
  EXPECT_EQ(nul.error().message, "f:1: not valid UTF-8 text");
  for (const char* text : {"\"--\": 8\n", "\"-\": 8\n", "\"---\": x\n"}) {
    auto dashes = parse_config_yaml(text, "f");
    ASSERT_FALSE(dashes) << text;
    EXPECT_NE(dashes.error().message.find("a key must be a flag name"), std::string::npos)
        << dashes.error().message;
  }
  EXPECT_TRUE(
      parse_config_yaml("log-level: \"d\xc3\xa9"
                        "bug\"\n",
                        "f"))
      << "UTF-8 itself is fine";
}

TEST(ConfigFile, SetsWhatTheCommandLineDidNotAndTheCommandLineWins) {
  TempFile f(R"(gpu-count: 8
log-level: debug
components: [cpu, disk]
no-tls: true
tls-san: [a.example, 10.0.0.1]
xid-thresholds:
  overrides:
    "94": {rebootThreshold: 5}
events-retention-period: 24h
)");
  RunCommand run;
  run.parse({"--config", f.path, "--gpu-count", "4"});
  ASSERT_TRUE(apply_config_file(run.app, run.config));
  ASSERT_TRUE(validate_run_flags(run.flags, run.sample));
  const Config& c = run.flags.config;
  EXPECT_EQ(c.gpu_count, 4) << "the flag overrides the file";
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_TRUE(c.no_tls);
  EXPECT_EQ(c.tls_sans, (std::vector<std::string>{"a.example", "10.0.0.1"}));
  EXPECT_EQ(nlohmann::json::parse(run.flags.xid_thresholds),
            nlohmann::json::parse(R"({"overrides":{"94":{"rebootThreshold":5}}})"));
  EXPECT_EQ(c.xid_thresholds.threshold(94), 5) << "parsed once, into the Config";
  EXPECT_EQ(c.events_retention, std::chrono::hours(24));
  EXPECT_EQ(run.flags.components, "cpu,disk");
}

// Command lines of GPU processes are served only when asked for, by flag or by config key.
TEST(ConfigFile, ServeProcessCmdlinesIsOffUnlessAskedFor) {
  RunCommand by_default;
  by_default.parse({});
  EXPECT_FALSE(by_default.flags.config.serve_process_cmdlines);
  RunCommand by_flag;
  by_flag.parse({"--serve-process-cmdlines"});
  EXPECT_TRUE(by_flag.flags.config.serve_process_cmdlines);
  TempFile f("serve-process-cmdlines: true\n");
  RunCommand by_file;
  by_file.parse({"--config", f.path});
  ASSERT_TRUE(apply_config_file(by_file.app, by_file.config));
  EXPECT_TRUE(by_file.flags.config.serve_process_cmdlines);
}

// The error `gpud run --config FILE` stops with when FILE holds `text` ("" when it applies).
std::string config_error(const std::string& text, const std::string& expect_in_message) {
  TempFile f(text);
  RunCommand run;
  run.parse({"--config", f.path});
  auto r = apply_config_file(run.app, run.config);
  if (r) return "";
  const std::string msg = r.error().message;
  std::string want = expect_in_message;
  if (auto at = want.find("FILE"); at != std::string::npos) want.replace(at, 4, f.path);
  EXPECT_NE(msg.find(want), std::string::npos) << msg;
  return msg;
}

// Reads from other hosts need the token only when asked for, by flag or by config key (either
// spelling of it).
TEST(ConfigFile, RemoteReadsNeedTheTokenOnlyWhenAskedFor) {
  RunCommand by_default;
  by_default.parse({});
  EXPECT_FALSE(by_default.flags.config.api_remote_reads_need_token);
  RunCommand by_flag;
  by_flag.parse({"--api-remote-reads-need-token"});
  EXPECT_TRUE(by_flag.flags.config.api_remote_reads_need_token);
  for (const char* text :
       {"api-remote-reads-need-token: true\n", "api_remote_reads_need_token: true\n"}) {
    TempFile f(text);
    RunCommand by_file;
    by_file.parse({"--config", f.path});
    ASSERT_TRUE(apply_config_file(by_file.app, by_file.config)) << text;
    EXPECT_TRUE(by_file.flags.config.api_remote_reads_need_token) << text;
  }
  TempFile off("api-remote-reads-need-token: false\n");
  RunCommand by_file;
  by_file.parse({"--config", off.path});
  ASSERT_TRUE(apply_config_file(by_file.app, by_file.config));
  EXPECT_FALSE(by_file.flags.config.api_remote_reads_need_token);
  EXPECT_NE(config_error("api-remote-reads-need-token: maybe\n", "FILE:1"), "");
}

TEST(ConfigFile, UnknownKeysAndBadValuesNameTheKeyAndLine) {
  EXPECT_NE(config_error("log-level: info\ngpu-cout: 8\n", "FILE:2: unknown key \"gpu-cout\""), "");
  EXPECT_NE(config_error("gpu-count: many\n", "FILE:1: gpu-count"), "");
  // The admin token is refused in the file as on the command line.
  EXPECT_NE(config_error("admin-token: 0123456789abcdef0123\n", "--admin-token-file"), "");
  EXPECT_EQ(config_error("gpu-count: 8\n", ""), "");
}

// GPUd's flags are scalars and small maps: an alias (*name) is refused wherever it is, so that
// nested ones (an "alias bomb" of a few hundred bytes standing for 387 million strings) are a
// clear error instead of an allocation that aborts the daemon.
TEST(ConfigYaml, AliasesAreRefusedWithTheLine) {
  auto small = parse_config_yaml("log-level: &level info\nprofile-level: *level\n", "f");
  ASSERT_FALSE(small) << "an alias was read";
  EXPECT_EQ(small.error().message,
            "f:2: YAML aliases (*name) are not allowed here; write the value out");
  std::string bomb =
      "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    const std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 9; ++i) bomb += (i ? ",*" : "*") + prev;
    bomb += "]\n";
  }
  bomb += "xid-thresholds: {\"79\": *i}\n";
  EXPECT_LT(bomb.size(), 1000u);
  auto r = parse_config_yaml(bomb, "f");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "f:2: YAML aliases (*name) are not allowed here; write the value out");
}

// One document per file: YAML::Load reads the first, so a second one with values is an error
// naming its line rather than settings dropped unread. Garbage that yaml-cpp 0.7 reads as an
// endless run of empty documents at one position (",-", found by plugin_specs_fuzz) is an error
// naming its line instead of a hang at the daemon's start.
TEST(ConfigYaml, ASecondDocumentIsRefusedAndGarbageDoesNotHang) {
  auto two = parse_config_yaml("log-level: info\n---\ngpu-count: 8\n", "f");
  ASSERT_FALSE(two) << "the second document was dropped silently";
  EXPECT_EQ(two.error().message,
            "f:3: a second YAML document (after ---); gpud reads one document per file");
  // Document markers around one document, and an empty trailing one, are fine.
  EXPECT_TRUE(parse_config_yaml("---\nlog-level: info\n...\n", "f"));
  EXPECT_TRUE(parse_config_yaml("log-level: info\n---\n", "f"));
  const auto start = std::chrono::steady_clock::now();
  auto garbage = parse_config_yaml("log-level: info\n---\n,-", "f");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_FALSE(garbage) << "garbage read as an empty document";
  EXPECT_EQ(garbage.error().message, "f:3: not valid YAML: the parser reads nothing from here on");
}

// An unknown key is refused before its value is read, and before later keys are.
TEST(ConfigYaml, TheKeyIsCheckedBeforeItsValue) {
  auto known = [](const std::string& flag) { return flag == "gpu-count"; };
  auto r = parse_config_yaml("gpu-count: 8\nnope: {a: [1, 2]}\n--gpu-count: 8\n", "f", known);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "f:2: unknown key \"nope\" (not a `gpud run` flag; `gpud run --help` lists them)");
  EXPECT_EQ(config_error("nope: 1\n--gpu-count: 8\n", "FILE:1: unknown key \"nope\"").empty(),
            false);
}

TEST(ConfigFile, ALargeOrEndlessFileIsRefusedAfterTheCap) {
  TempFile big(std::string(kMaxConfigBytes, '#') + "\n");
  RunCommand run;
  run.parse({"--config", big.path});
  auto r = apply_config_file(run.app, run.config);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, big.path + " is larger than 1048576 bytes");

  const std::string zero = big.path + ".zero";
  ASSERT_EQ(::symlink("/dev/zero", zero.c_str()), 0);
  RunCommand endless;
  endless.parse({"--config", zero});
  const auto start = std::chrono::steady_clock::now();
  r = apply_config_file(endless.app, endless.config);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  fs::remove(zero);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, zero + " is larger than 1048576 bytes");
}

TEST(ConfigFile, MissingDefaultReadsNothingMissingNamedFileIsAnError) {
  RunCommand run;
  run.parse({});
  run.config = "/nonexistent/gpud.yaml";  // as the default would be
  EXPECT_TRUE(apply_config_file(run.app, run.config));
  RunCommand named;
  named.parse({"--config", "/nonexistent/gpud.yaml"});
  auto r = apply_config_file(named.app, named.config);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/nonexistent/gpud.yaml"), std::string::npos);
  RunCommand none;
  none.parse({"--config", ""});
  EXPECT_TRUE(apply_config_file(none.app, none.config));
}

// What `gpud up` writes reads back as the same flags, the JSON-valued ones as YAML structure.
TEST(ConfigFile, UpRenderingReadsBackAsTheSameFlags) {
  const std::vector<std::string> flags = {"--gpu-count",
                                          "8",
                                          "--xid-thresholds",
                                          R"({"overrides":{"94":{"rebootThreshold":7}}})",
                                          "--tls-san",
                                          "a.example",
                                          "--tls-san",
                                          "10.0.0.1",
                                          "--no-tls",
                                          "--files",
                                          "/x y,/z",
                                          "--api-socket",
                                          ""};
  auto text = render_config_yaml(flags);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_TRUE(text->starts_with(kDefaultConfigTemplate)) << "the commented default comes first";
  EXPECT_NE(text->find("rebootThreshold: 7"), std::string::npos) << "structured:\n" << *text;
  TempFile f(*text);
  RunCommand run;
  run.parse({"--config", f.path});
  ASSERT_TRUE(apply_config_file(run.app, run.config));
  ASSERT_TRUE(validate_run_flags(run.flags, run.sample));
  const Config& c = run.flags.config;
  EXPECT_EQ(c.gpu_count, 8);
  EXPECT_EQ(nlohmann::json::parse(run.flags.xid_thresholds),
            nlohmann::json::parse(R"({"overrides":{"94":{"rebootThreshold":7}}})"));
  EXPECT_EQ(c.xid_thresholds.threshold(94), 7);
  EXPECT_EQ(c.tls_sans, (std::vector<std::string>{"a.example", "10.0.0.1"}));
  EXPECT_TRUE(c.no_tls);
  EXPECT_EQ(run.flags.files, "/x y,/z");
  EXPECT_TRUE(run.flags.api_socket_given);
  EXPECT_EQ(c.api_socket, "");

  EXPECT_EQ(*render_config_yaml({}), kDefaultConfigTemplate);
  auto unknown = render_config_yaml({"--no-such-flag"});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("--no-such-flag"), std::string::npos);
}

// The shipped default names every `gpud run` flag, and each of its keys is one.
TEST(ConfigFile, ShippedDefaultListsEveryRunFlag) {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/deploy/config/gpud.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  EXPECT_EQ(text, kDefaultConfigTemplate) << "the binary embeds the shipped file";
  std::set<std::string> keys;
  static const std::regex kKey(R"(^# ([a-z][a-z0-9-]*):)");
  std::istringstream lines(text);
  std::string uncommented;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kKey)) keys.insert(m[1]);
  }
  RunCommand run;
  std::set<std::string> flags;
  for (const CLI::Option* o : run.app.get_options()) {
    if (o->get_lnames().empty() || o->get_group().empty()) continue;  // hidden
    // GPUd's flags that gpud does not use are accepted as keys but not offered.
    if (o->get_group() == kGpudAcceptedGroup || o->get_group() == kGpudRefusedGroup) continue;
    const std::string n = o->get_lnames().front();
    if (n != "help" && n != "help-all" && n != "config") flags.insert(n);
  }
  EXPECT_EQ(keys, flags);
}

}  // namespace
}  // namespace gpud::app
