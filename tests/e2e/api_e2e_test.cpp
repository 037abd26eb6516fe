// End-to-end: starts build/gpud and checks every endpoint's status code and JSON shape against
// GPUd's OpenAPI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "testing/swagger_validator.h"
#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

nlohmann::json load_spec() {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/docs/gpud-api-swagger.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

class ApiE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    spec_ = new nlohmann::json(load_spec());
    dir_ = new std::string(make_temp_dir());
    daemon_ = new DaemonProcess(*dir_);
  }
  static void TearDownTestSuite() {
    delete daemon_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete spec_;
  }

  // GETs path, expects status, validates the body against the spec's schema for (spec_path,
  // status).
  nlohmann::json get_valid(const std::string& path, const std::string& spec_path,
                           int status = 200) {
    auto r = daemon_->get(path);
    EXPECT_TRUE(r) << path;
    if (!r) return nullptr;
    EXPECT_EQ(r->status, status) << path << ": " << r->body;
    auto body = parse_json(r->body);
    EXPECT_FALSE(body.is_discarded()) << path << ": " << r->body;
    auto schema = swagger::response_schema(*spec_, spec_path, "get", status);
    auto errors = swagger::validate(*spec_, schema, body);
    EXPECT_TRUE(errors.empty()) << path << ": " << (errors.empty() ? "" : errors.front());
    return body;
  }

  static nlohmann::json* spec_;
  static std::string* dir_;
  static DaemonProcess* daemon_;
};

nlohmann::json* ApiE2E::spec_ = nullptr;
std::string* ApiE2E::dir_ = nullptr;
DaemonProcess* ApiE2E::daemon_ = nullptr;

TEST_F(ApiE2E, DaemonBecomesReady) {
  ASSERT_TRUE(daemon_->ready()) << daemon_->log();
  EXPECT_TRUE(std::filesystem::exists(*dir_ + "/gpud.state"));
}

TEST_F(ApiE2E, HealthzAnswersOk) {
  ASSERT_TRUE(daemon_->ready());
  auto body = get_valid("/healthz", "/healthz");
  EXPECT_EQ(body["status"], "ok");
  EXPECT_EQ(body["version"], "v1");
}

TEST_F(ApiE2E, ComponentsListsEveryHostComponent) {
  ASSERT_TRUE(daemon_->ready());
  auto body = get_valid("/v1/components", "/v1/components");
  for (const char* name : {"cpu", "memory", "disk", "os", "fd", "kernel-module", "file"})
    EXPECT_NE(std::find(body.begin(), body.end(), name), body.end()) << name;
}

TEST_F(ApiE2E, StatesHaveEveryComponentWithTimeAndHealth) {
  ASSERT_TRUE(daemon_->ready());
  auto body = get_valid("/v1/states", "/v1/states");
  ASSERT_TRUE(body.is_array());
  EXPECT_GE(body.size(), 7u);
  for (const auto& c : body) {
    ASSERT_TRUE(c["states"].is_array());
    ASSERT_FALSE(c["states"].empty()) << c.dump();
    for (const auto& s : c["states"]) {
      EXPECT_TRUE(s["time"].is_string());
      EXPECT_EQ(s["component"], c["component"]);
      EXPECT_TRUE(s["health"] == "Healthy" || s["health"] == "Degraded" ||
                  s["health"] == "Unhealthy" || s["health"] == "Initializing");
    }
  }
  auto one = get_valid("/v1/states?components=cpu,memory", "/v1/states");
  EXPECT_EQ(one.size(), 2u);
}

TEST_F(ApiE2E, UnknownComponentIs404WithCodeAndMessage) {
  ASSERT_TRUE(daemon_->ready());
  for (const char* path : {"/v1/states?components=nope", "/v1/events?components=nope",
                           "/v1/metrics?components=nope", "/v1/info?components=nope"}) {
    auto r = daemon_->get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << path;
    auto body = parse_json(r->body);
    EXPECT_EQ(body["code"], 404) << path;
    EXPECT_TRUE(body["message"].is_string()) << path;
  }
}

TEST_F(ApiE2E, MalformedParametersAre400) {
  ASSERT_TRUE(daemon_->ready());
  for (const char* path :
       {"/v1/events?startTime=yesterday", "/v1/events?endTime=2024-13-45", "/v1/metrics?since=abc",
        "/v1/info?since=-", "/v1/events?startTime=2000&endTime=1000"}) {
    auto r = daemon_->get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << path << ": " << r->body;
    auto body = parse_json(r->body);
    EXPECT_EQ(body["code"], 400) << path;
    EXPECT_TRUE(body["message"].is_string()) << path;
  }
}

TEST_F(ApiE2E, RebootEventIsRecordedAndWindowHonoured) {
  ASSERT_TRUE(daemon_->ready());
  auto all = get_valid("/v1/events?components=os&startTime=0", "/v1/events");
  ASSERT_EQ(all.size(), 1u);
  bool found = false;
  for (const auto& e : all[0]["events"]) found |= e["name"] == "reboot";
  EXPECT_TRUE(found) << all.dump();
  // The boot is in the past; a window ending at the epoch's first second holds nothing.
  auto none = get_valid("/v1/events?components=os&startTime=0&endTime=1", "/v1/events");
  EXPECT_TRUE(none[0]["events"].empty());
  auto rfc = get_valid("/v1/events?components=os&startTime=1970-01-01T00:00:00Z", "/v1/events");
  EXPECT_EQ(rfc[0]["events"].size(), all[0]["events"].size());
}

TEST_F(ApiE2E, MetricsAndInfoValidate) {
  ASSERT_TRUE(daemon_->ready());
  auto m = get_valid("/v1/metrics?since=1h", "/v1/metrics");
  EXPECT_TRUE(m.is_array());
  auto info = get_valid("/v1/info", "/v1/info");
  EXPECT_TRUE(info.is_array());
}

TEST_F(ApiE2E, MachineInfoHasHostFields) {
  ASSERT_TRUE(daemon_->ready());
  auto mi = get_valid("/machine-info", "/machine-info");
  EXPECT_FALSE(mi.value("hostname", "").empty());
  EXPECT_FALSE(mi.value("kernelVersion", "").empty());
  EXPECT_GT(mi["cpuInfo"].value("logicalCores", 0), 0);
  EXPECT_GT(mi["memoryInfo"].value("totalBytes", int64_t{0}), 0);
}

TEST_F(ApiE2E, PrometheusTextPassesPromtool) {
  ASSERT_TRUE(daemon_->ready());
  // The first checks run right after start; wait until the cpu check (two samples) has published.
  auto r = daemon_->get("/metrics");
  for (int i = 0; i < 100 && r && r->body.find("cpu_used_percent{") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r = daemon_->get("/metrics");
  }
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("cpu_used_percent{gpud_component=\"cpu\"}"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("memory_used_bytes{gpud_component=\"memory\"}"), std::string::npos);
  EXPECT_NE(r->body.find("disk_free_bytes{gpud_component=\"disk\",mount_point=\"/\"}"),
            std::string::npos);
  if (!std::filesystem::exists("/usr/bin/promtool"))
    GTEST_SKIP() << "promtool not installed (scripts/install-deps.sh installs prometheus)";
  std::string file = *dir_ + "/metrics.txt";
  std::ofstream(file) << r->body;
  int rc = std::system(
      ("/usr/bin/promtool check metrics < " + file + " > " + file + ".out 2>&1").c_str());
  std::ifstream out(file + ".out");
  std::stringstream ss;
  ss << out.rdbuf();
  EXPECT_EQ(rc, 0) << ss.str();
}

TEST_F(ApiE2E, SetHealthyFromLoopbackSucceeds) {
  ASSERT_TRUE(daemon_->ready());
  auto r = daemon_->post("/v1/health-states/set-healthy?components=memory");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  auto body = parse_json(r->body);
  auto schema = swagger::response_schema(*spec_, "/v1/health-states/set-healthy", "post", 200);
  EXPECT_TRUE(swagger::validate(*spec_, schema, body).empty()) << body.dump();
  EXPECT_EQ(body["successful"], nlohmann::json::array({"memory"}));
  auto bad = daemon_->post("/v1/health-states/set-healthy?components=nope");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 404);
}

TEST_F(ApiE2E, StatusVerbTalksToDaemon) {
  ASSERT_TRUE(daemon_->ready());
  // The CLI verifies the daemon's certificate from its data dir.
  auto r = run_gpud({"status", "--server", daemon_->url(), "--data-dir", *dir_});
  EXPECT_NE(r.out.find("gpud is running"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu"), std::string::npos) << r.out;
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out;
}

TEST_F(ApiE2E, TriggerCheckVerbRunsAComponentsCheckNow) {
  ASSERT_TRUE(daemon_->ready());
  auto r = run_gpud({"trigger-check", "fd", "--server", daemon_->url(), "--data-dir", *dir_});
  EXPECT_NE(r.out.find("fd"), std::string::npos) << r.out;
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out;  // the machine's fd use decides
  r = run_gpud({"trigger-check", "nope", "--server", daemon_->url(), "--data-dir", *dir_});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("component not found: nope"), std::string::npos) << r.out;
  r = run_gpud({"trigger-check", "--server", daemon_->url(), "--data-dir", *dir_});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("name one component, or a --tag"), std::string::npos) << r.out;
}

TEST_F(ApiE2E, CompactRefusesWhileDaemonRuns) {
  ASSERT_TRUE(daemon_->ready());
  auto r = run_gpud({"compact", "--data-dir", *dir_});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("daemon"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpud::e2e
