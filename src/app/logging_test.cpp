#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/options.h"
#include "core/log.h"

namespace fs = std::filesystem;

namespace gpud::app {
namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpud-log-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    // Back to stderr so no later test writes into the removed directory.
    (void)setup_logging("info", "");
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(LoggingTest, LogFileRotatesBySizeAndKeepsMaxFiles) {
  LogOptions opts;
  opts.file = (dir_ / "gpud.log").string();
  opts.max_size_bytes = 4096;
  opts.max_files = 2;
  ASSERT_TRUE(setup_logging(opts));
  for (int i = 0; i < 400; ++i) logger("store")->info("line {} of the rotation test", i);
  spdlog::default_logger()->flush();
  logger("store")->flush();
  // gpud.log plus at most max_files rotated ones: gpud.1.log, gpud.2.log.
  EXPECT_TRUE(fs::exists(dir_ / "gpud.log"));
  EXPECT_TRUE(fs::exists(dir_ / "gpud.1.log"));
  EXPECT_TRUE(fs::exists(dir_ / "gpud.2.log"));
  EXPECT_FALSE(fs::exists(dir_ / "gpud.3.log"));
  for (const char* f : {"gpud.1.log", "gpud.2.log"}) EXPECT_LE(fs::file_size(dir_ / f), 4096u);
  // The newest line is in the current file, older ones were dropped.
  EXPECT_NE(slurp(dir_ / "gpud.log").find("line 399 "), std::string::npos);
  EXPECT_EQ(slurp(dir_ / "gpud.2.log").find("line 0 "), std::string::npos);
}

TEST_F(LoggingTest, EveryLineNamesItsComponent) {
  LogOptions opts;
  opts.file = (dir_ / "gpud.log").string();
  ASSERT_TRUE(setup_logging(opts));
  logger("accelerator-nvidia-ecc")->warn("ecc says hello");
  logger("server")->info("server says hello");
  spdlog::info("default logger says hello");
  logger("server")->debug("below the level");  // info is the default level
  for (const char* n : {"accelerator-nvidia-ecc", "server"}) logger(n)->flush();
  spdlog::default_logger()->flush();
  std::string text = slurp(dir_ / "gpud.log");
  std::stringstream lines(text);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    EXPECT_TRUE(line.find(" [accelerator-nvidia-ecc] ecc says hello") != std::string::npos ||
                line.find(" [server] server says hello") != std::string::npos ||
                line.find(" [gpud] default logger says hello") != std::string::npos)
        << line;
  }
  EXPECT_EQ(count, 3) << text;
  EXPECT_NE(text.find(" warning [accelerator-nvidia-ecc] "), std::string::npos) << text;
}

TEST_F(LoggingTest, ReconfiguringMovesExistingComponentLoggersToTheNewSink) {
  ASSERT_TRUE(setup_logging("info", (dir_ / "first.log").string()));
  logger("kmsg")->info("to the first file");
  logger("kmsg")->flush();
  ASSERT_TRUE(setup_logging("info", (dir_ / "second.log").string()));
  logger("kmsg")->info("to the second file");
  logger("kmsg")->flush();
  EXPECT_EQ(slurp(dir_ / "first.log").find("second"), std::string::npos);
  EXPECT_NE(slurp(dir_ / "second.log").find("[kmsg] to the second file"), std::string::npos);
}

TEST_F(LoggingTest, BadLevelOrUnwritableFileIsAClearError) {
  auto level = setup_logging("loud", "");
  ASSERT_FALSE(level);
  EXPECT_NE(level.error().message.find("--log-level"), std::string::npos);
  std::ofstream(dir_ / "a-file") << "x";  // a file where the log's directory should be
  auto file = setup_logging("info", (dir_ / "a-file" / "x.log").string());
  ASSERT_FALSE(file);
  EXPECT_NE(file.error().message.find("cannot open log file"), std::string::npos);
  LogOptions zero;
  zero.file = (dir_ / "z.log").string();
  zero.max_files = 0;
  EXPECT_FALSE(setup_logging(zero));
}

}  // namespace
}  // namespace gpud::app
