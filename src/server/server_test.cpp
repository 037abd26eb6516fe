#include "server/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/time_util.h"
#include "server/http_util.h"
#include "server/tls.h"
#include "testing/memory_event_log.h"
#include "testing/swagger_validator.h"

namespace gpud::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const json& spec() {
  static const json kSpec = [] {
    std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/docs/gpud-api-swagger.json");
    return json::parse(in);
  }();
  return kSpec;
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using FakeEventLog = testing_support::MemoryEventLog;

class FakeHistory : public MetricHistory {
 public:
  Result<void> insert(const std::vector<MetricSample>& samples) override {
    samples_.insert(samples_.end(), samples.begin(), samples.end());
    return {};
  }
  Result<std::vector<MetricSample>> query(std::string_view component,
                                          TimePoint since) const override {
    std::vector<MetricSample> out;
    for (const auto& s : samples_)
      if ((component.empty() || s.component == component) && s.unix_ms >= to_unix_ms(since))
        out.push_back(s);
    return out;
  }
  Result<int> purge(TimePoint) override { return 0; }

 private:
  std::vector<MetricSample> samples_;
};

struct FakeSpec {
  std::string name;
  Health health = Health::kHealthy;
  bool supported = true;
  bool settable = false;
};

class FakeComponent : public Component {
 public:
  FakeComponent(const ComponentContext& ctx, FakeSpec spec)
      : Component(ctx), spec_(std::move(spec)) {}
  std::string_view name() const override { return spec_.name; }
  bool supported() const override { return spec_.supported; }
  CheckResult check() override {
    ++checks;
    std::optional<SuggestedActions> actions;
    if (spec_.health != Health::kHealthy)
      actions = SuggestedActions{"look at it", {RepairAction::kHardwareInspection}};
    return single_state(spec_.name, spec_.health, spec_.name + " is fine", actions,
                        {{"data", "{\"x\":1}"}});
  }
  Result<std::vector<Event>> events(TimePoint since, TimePoint until) const override {
    if (throw_on_events) throw std::runtime_error("boom");
    return Component::events(since, until);
  }
  bool can_set_healthy() const override { return spec_.settable; }
  Result<void> set_healthy() override {
    ++set_healthy_calls;
    return Component::set_healthy();
  }

  std::atomic<int> checks{0};
  std::atomic<int> set_healthy_calls{0};
  std::atomic<bool> throw_on_events{false};

 private:
  FakeSpec spec_;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.no_tls = true;
    config_.listen_address = "127.0.0.1:0";
    ctx_ = ComponentContext{&config_, &events_, &metrics_, false};
    cpu_ = add({"cpu", Health::kHealthy, true, true});
    disk_ = add({"disk", Health::kDegraded, true, false});
    add({"memory", Health::kHealthy, true, false});
    add({"zz-unsupported", Health::kHealthy, false, true});
    for (Component* c : registry_.supported()) scheduler_.run_now(*c);

    now_ = Clock::now();
    Event recent{"cpu",       now_ - 10min,       "cpu-throttled", EventType::kWarning,
                 "throttled", json{{"core", "3"}}};
    Event old{"cpu", now_ - 2h, "cpu-old", EventType::kInfo, "long ago", json::object()};
    Event disk{"disk", now_ - 30s, "disk-full", EventType::kCritical, "full", json::object()};
    for (const auto& e : {recent, old, disk}) ASSERT_TRUE(events_.insert(e).ok());

    metrics_.set("cpu", "gpud_cpu_usage_percent", 12.5);
    int64_t now_ms = to_unix_ms(now_);
    ASSERT_TRUE(
        history_
            .insert(
                {{now_ms - 5 * 60'000, "cpu", "gpud_cpu_usage_percent", {}, 12.5},
                 {now_ms - 2 * 3'600'000, "cpu", "gpud_cpu_usage_percent", {}, 80},
                 {now_ms - 60'000, "disk", "gpud_disk_used_bytes", {{"mount_point", "/"}}, 1e9}})
            .ok());
    start_server();
  }

  void TearDown() override {
    if (server_) server_->stop();
  }

  FakeComponent* add(FakeSpec s) {
    auto c = std::make_unique<FakeComponent>(ctx_, std::move(s));
    FakeComponent* raw = c.get();
    EXPECT_TRUE(registry_.add(std::move(c)).ok());
    return raw;
  }

  ServerDeps deps() {
    ServerDeps d;
    d.config = &config_;
    d.registry = &registry_;
    d.scheduler = &scheduler_;
    d.events = &events_;
    d.history = &history_;
    d.metrics = &metrics_;
    d.machine_info = [] {
      return json{{"gpudVersion", "0.1.0"},
                  {"hostname", "node-1"},
                  {"kernelVersion", "6.1.0"},
                  {"cpuInfo",
                   {{"type", "x86_64"},
                    {"manufacturer", "GenuineIntel"},
                    {"architecture", "x86_64"},
                    {"logicalCores", 16}}},
                  {"memoryInfo", {{"totalBytes", 68719476736}}},
                  {"gpuDriverVersion", ""}};
    };
    return d;
  }

  void start_server() {
    server_ = std::make_unique<Server>(deps());
    auto r = server_->start();
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_GT(server_->port(), 0);
  }

  httplib::Client client() {
    httplib::Client cli("127.0.0.1", server_->port());
    cli.set_connection_timeout(5s);
    cli.set_read_timeout(5s);
    return cli;
  }

  // GETs path and checks a 200 whose body conforms to the spec's schema for spec_path.
  json get_valid(const std::string& path, const std::string& spec_path) {
    auto cli = client();
    auto res = cli.Get(path);
    EXPECT_TRUE(res) << path;
    if (!res) return nullptr;
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    json body = json::parse(res->body);
    json schema = swagger::response_schema(spec(), spec_path, "get", 200);
    EXPECT_FALSE(schema.is_null()) << spec_path;
    for (const auto& e : swagger::validate(spec(), schema, body)) ADD_FAILURE() << path << " " << e;
    return body;
  }

  void expect_error(const std::string& path, int status, const std::string& message) {
    auto cli = client();
    auto res = cli.Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, status) << path;
    json body = json::parse(res->body);
    EXPECT_EQ(body["code"], status) << path;
    EXPECT_EQ(body["message"], message) << path;
  }

  static std::vector<std::string> names_of(const json& arr, const char* key) {
    std::vector<std::string> out;
    for (const auto& x : arr) out.push_back(x[key].get<std::string>());
    return out;
  }

  Config config_;
  FakeEventLog events_;
  FakeHistory history_;
  MetricRegistry metrics_;
  ComponentContext ctx_;
  Registry registry_;
  Scheduler scheduler_{registry_};
  FakeComponent* cpu_ = nullptr;
  FakeComponent* disk_ = nullptr;
  TimePoint now_;
  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, HealthzAnswersOkV1) {
  json body = get_valid("/healthz", "/healthz");
  EXPECT_EQ(body, (json{{"status", "ok"}, {"version", "v1"}}));
}

TEST_F(ServerTest, ComponentsListsEveryRegisteredNameSorted) {
  json body = get_valid("/v1/components", "/v1/components");
  EXPECT_EQ(body, (json{"cpu", "disk", "memory", "zz-unsupported"}));
}

TEST_F(ServerTest, StatesServeTheCacheOfSupportedComponentsWithoutChecking) {
  int checks_before = cpu_->checks;
  json body = get_valid("/v1/states", "/v1/states");
  EXPECT_EQ(names_of(body, "component"), (std::vector<std::string>{"cpu", "disk", "memory"}));
  EXPECT_EQ(cpu_->checks, checks_before);
  const json& disk = body[1]["states"][0];
  EXPECT_EQ(disk["health"], "Degraded");
  EXPECT_EQ(disk["component"], "disk");
  EXPECT_TRUE(disk.contains("time"));
  EXPECT_EQ(disk["suggested_actions"]["repair_actions"], json{"HARDWARE_INSPECTION"});
  EXPECT_EQ(disk["extra_info"]["data"], "{\"x\":1}");
}

TEST_F(ServerTest, StatesFilterByComponentsParam) {
  json body = get_valid("/v1/states?components=memory,%20cpu", "/v1/states");
  EXPECT_EQ(names_of(body, "component"), (std::vector<std::string>{"memory", "cpu"}));
}

TEST_F(ServerTest, UnknownComponentIs404) {
  for (const char* path : {"/v1/states?components=cpu,nope", "/v1/events?components=nope",
                           "/v1/metrics?components=nope", "/v1/info?components=nope"})
    expect_error(path, 404, "component not found: nope");
}

TEST_F(ServerTest, StatesAreGzippedWhenAsked) {
  auto cli = client();
  cli.set_decompress(false);
  auto res = cli.Get("/v1/states", {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Encoding"), "gzip");
  ASSERT_GE(res->body.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(res->body[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(res->body[1]), 0x8b);

  auto plain = client();  // decompressing client: same document
  auto res2 = plain.Get("/v1/states", {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(res2);
  EXPECT_EQ(json::parse(res2->body).size(), 3u);
}

TEST_F(ServerTest, EventsDefaultToTheLastHour) {
  json body = get_valid("/v1/events", "/v1/events");
  ASSERT_EQ(names_of(body, "component"), (std::vector<std::string>{"cpu", "disk", "memory"}));
  const json& cpu = body[0];
  ASSERT_EQ(cpu["events"].size(), 1u);
  EXPECT_EQ(cpu["events"][0]["name"], "cpu-throttled");
  EXPECT_EQ(cpu["events"][0]["type"], "Warning");
  EXPECT_EQ(cpu["events"][0]["extra_info"]["core"], "3");
  auto start = parse_time(cpu["startTime"].get<std::string>());
  auto end = parse_time(cpu["endTime"].get<std::string>());
  ASSERT_TRUE(start && end);
  EXPECT_NEAR(std::chrono::duration<double>(*end - *start).count(), 3600, 2);
  EXPECT_TRUE(body[2]["events"].is_array());
  EXPECT_TRUE(body[2]["events"].empty());
}

TEST_F(ServerTest, EventsHonourStartAndEndTime) {
  // Unix seconds: a window around the old event only.
  auto s = std::to_string(to_unix_seconds(now_ - 3h));
  auto e = std::to_string(to_unix_seconds(now_ - 1h));
  json body = get_valid("/v1/events?components=cpu&startTime=" + s + "&endTime=" + e, "/v1/events");
  ASSERT_EQ(body.size(), 1u);
  ASSERT_EQ(body[0]["events"].size(), 1u);
  EXPECT_EQ(body[0]["events"][0]["name"], "cpu-old");
  EXPECT_EQ(body[0]["startTime"], format_rfc3339(now_ - 3h));
  EXPECT_EQ(body[0]["endTime"], format_rfc3339(now_ - 1h));

  // RFC 3339: everything in the last 3 h, newest first.
  body =
      get_valid("/v1/events?components=cpu&startTime=" + format_rfc3339(now_ - 3h), "/v1/events");
  EXPECT_EQ(names_of(body[0]["events"], "name"),
            (std::vector<std::string>{"cpu-throttled", "cpu-old"}));
}

TEST_F(ServerTest, EventsRejectBadTimes) {
  expect_error("/v1/events?startTime=yesterday", 400,
               "invalid startTime \"yesterday\": want Unix seconds or RFC 3339 from "
               "1970-01-01T00:00:00Z to 2262-04-11T23:47:16Z");
  expect_error("/v1/events?endTime=2024-13-01T00:00:00Z", 400,
               "invalid endTime \"2024-13-01T00:00:00Z\": want Unix seconds or RFC 3339 from "
               "1970-01-01T00:00:00Z to 2262-04-11T23:47:16Z");
  auto cli = client();
  auto res = cli.Get("/v1/events?startTime=2000&endTime=1000");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["code"], 400);
  expect_error("/v1/info?startTime=x", 400,
               "invalid startTime \"x\": want Unix seconds or RFC 3339 from "
               "1970-01-01T00:00:00Z to 2262-04-11T23:47:16Z");
}

// A time the clock type cannot hold was once wrapped (9000000000000 s was echoed as 1906 and
// returned everything): now it is refused with the accepted range.
TEST_F(ServerTest, TimesOutsideTheRangeAreRefusedWithTheRange) {
  for (const char* t :
       {"9000000000000", "9223372037", "2300-01-01T00:00:00Z", "-1", "1969-12-31T23:59:59Z"}) {
    expect_error(std::string("/v1/events?startTime=") + t, 400,
                 std::string("invalid startTime \"") + t +
                     "\": want Unix seconds or RFC 3339 from 1970-01-01T00:00:00Z to "
                     "2262-04-11T23:47:16Z");
    expect_error(std::string("/v1/info?endTime=") + t, 400,
                 std::string("invalid endTime \"") + t +
                     "\": want Unix seconds or RFC 3339 from 1970-01-01T00:00:00Z to "
                     "2262-04-11T23:47:16Z");
  }
  expect_error("/v1/metrics?since=8760000h", 400,
               "invalid since \"8760000h\": want a duration such as 30m, 1h30m or 90s, at most "
               "100 years (876000h)");
  // The edges are accepted.
  auto cli = client();
  auto res = cli.Get("/v1/events?startTime=0&endTime=9223372036");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)[0]["endTime"], "2262-04-11T23:47:16Z");
  res = cli.Get("/v1/metrics?since=876000h");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
}

TEST_F(ServerTest, MetricsDefaultToTheLast30Minutes) {
  json body = get_valid("/v1/metrics", "/v1/metrics");
  ASSERT_EQ(names_of(body, "component"), (std::vector<std::string>{"cpu", "disk", "memory"}));
  ASSERT_EQ(body[0]["metrics"].size(), 1u);
  const json& m = body[0]["metrics"][0];
  EXPECT_EQ(m["name"], "gpud_cpu_usage_percent");
  EXPECT_EQ(m["value"], 12.5);
  int64_t ms = to_unix_ms(now_) - 5 * 60'000;
  EXPECT_EQ(m["unix_milliseconds"], ms);
  EXPECT_EQ(m["unix_seconds"], ms / 1000);
  EXPECT_EQ(body[1]["metrics"][0]["labels"]["mount_point"], "/");
  EXPECT_TRUE(body[2]["metrics"].empty());
}

TEST_F(ServerTest, MetricsSinceWidensTheWindow) {
  json body = get_valid("/v1/metrics?components=cpu&since=3h", "/v1/metrics");
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0]["metrics"].size(), 2u);
}

TEST_F(ServerTest, MetricsRejectBadSince) {
  expect_error("/v1/metrics?since=soon", 400,
               "invalid since \"soon\": want a duration such as 30m, 1h30m or 90s, at most 100 "
               "years (876000h)");
  expect_error("/v1/info?since=5x", 400,
               "invalid since \"5x\": want a duration such as 30m, 1h30m or 90s, at most 100 "
               "years (876000h)");
}

TEST_F(ServerTest, InfoCombinesStatesEventsAndMetrics) {
  json body = get_valid("/v1/info?components=cpu&since=3h", "/v1/info");
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0]["component"], "cpu");
  const json& info = body[0]["info"];
  EXPECT_EQ(info["states"].size(), 1u);
  EXPECT_EQ(info["events"].size(), 1u);  // default window: the last hour
  EXPECT_EQ(info["metrics"].size(), 2u);
  EXPECT_TRUE(body[0].contains("startTime") && body[0].contains("endTime"));
}

TEST_F(ServerTest, MachineInfoServesTheProvidedDocument) {
  json body = get_valid("/machine-info", "/machine-info");
  EXPECT_EQ(body["hostname"], "node-1");
  EXPECT_EQ(body["cpuInfo"]["logicalCores"], 16);
}

TEST_F(ServerTest, MachineInfoFailuresAre500) {
  server_->stop();
  ServerDeps d = deps();
  d.machine_info = []() -> json { throw std::runtime_error("no dmi"); };
  server_ = std::make_unique<Server>(d);
  ASSERT_TRUE(server_->start().ok());
  expect_error("/machine-info", 500, "failed to get machine info: no dmi");

  server_->stop();
  d.machine_info = nullptr;
  server_ = std::make_unique<Server>(d);
  ASSERT_TRUE(server_->start().ok());
  expect_error("/machine-info", 500, "machine info is not available");
}

TEST_F(ServerTest, PrometheusEndpointServesTextFormat) {
  auto cli = client();
  auto res = cli.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(res->body.find("gpud_cpu_usage_percent{gpud_component=\"cpu\"} 12.5"),
            std::string::npos)
      << res->body;
}

json post_set_healthy(httplib::Client& cli, const std::string& query, int want_status) {
  auto res = cli.Post("/v1/health-states/set-healthy" + query);
  EXPECT_TRUE(res);
  if (!res) return nullptr;
  EXPECT_EQ(res->status, want_status) << res->body;
  json body = json::parse(res->body);
  json schema =
      swagger::response_schema(spec(), "/v1/health-states/set-healthy", "post", want_status);
  EXPECT_FALSE(schema.is_null());
  for (const auto& e : swagger::validate(spec(), schema, body)) ADD_FAILURE() << e;
  EXPECT_EQ(body["code"], want_status);
  return body;
}

TEST_F(ServerTest, SetHealthyCallsSupportingComponents) {
  auto cli = client();
  json body = post_set_healthy(cli, "?components=cpu", 200);
  EXPECT_EQ(body["message"], "set healthy states completed");
  EXPECT_EQ(body["successful"], json{"cpu"});
  EXPECT_TRUE(body["failed"].empty());
  EXPECT_EQ(cpu_->set_healthy_calls, 1);
  EXPECT_EQ(events_.count("cpu"), 0u);  // the default set_healthy purges the events
  EXPECT_EQ(events_.count("disk"), 1u);
}

TEST_F(ServerTest, SetHealthyReportsComponentsThatCannot) {
  auto cli = client();
  json mixed = post_set_healthy(cli, "?components=cpu,disk", 200);
  EXPECT_EQ(mixed["successful"], json{"cpu"});
  EXPECT_TRUE(mixed["failed"].contains("disk"));
  EXPECT_EQ(disk_->set_healthy_calls, 0);

  json all_failed = post_set_healthy(cli, "?components=disk", 400);
  EXPECT_TRUE(all_failed["successful"].empty());
  EXPECT_EQ(all_failed["failed"]["disk"], "component does not support set-healthy");

  json unknown = post_set_healthy(cli, "?components=nope", 404);
  EXPECT_EQ(unknown["message"], "component not found: nope");
}

TEST_F(ServerTest, SetHealthyWithoutComponentsTargetsAllThatSupportIt) {
  auto cli = client();
  json body = post_set_healthy(cli, "", 200);
  EXPECT_EQ(body["successful"], json{"cpu"});  // zz-unsupported is hidden, disk/memory cannot
  EXPECT_TRUE(body["failed"].empty());
}

TEST_F(ServerTest, JsonIndentHeaderPrettyPrints) {
  auto cli = client();
  auto compact = cli.Get("/healthz");
  auto pretty = cli.Get("/healthz", {{"json-indent", "true"}});
  ASSERT_TRUE(compact && pretty);
  EXPECT_EQ(compact->body, R"({"status":"ok","version":"v1"})");
  EXPECT_EQ(pretty->body, "{\n  \"status\": \"ok\",\n  \"version\": \"v1\"\n}");
}

TEST_F(ServerTest, ReadEndpointsNegotiateContentType) {
  auto cli = client();
  auto res = cli.Get("/v1/states", {{"Content-Type", "text/plain"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body), (json{{"code", 400}, {"message", "invalid content type"}}));

  res = cli.Get("/v1/events", {{"Content-Type", "application/yaml"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["message"], "yaml not supported");

  res = cli.Get("/v1/components", {{"Content-Type", "application/json; charset=utf-8"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(ServerTest, UnknownPathIs404Json) {
  expect_error("/v1/nothing-here", 404, "not found: /v1/nothing-here");
}

TEST_F(ServerTest, HandlerExceptionsBecome500Json) {
  cpu_->throw_on_events = true;
  expect_error("/v1/events?components=cpu", 500, "internal error: boom");
  cpu_->throw_on_events = false;
  get_valid("/v1/events?components=cpu", "/v1/events");  // still serving
}

TEST_F(ServerTest, SecondServerOnTheSamePortFails) {
  Config other = config_;
  other.listen_address = "127.0.0.1:" + std::to_string(server_->port());
  ServerDeps d = deps();
  d.config = &other;
  Server second(d);
  auto r = second.start();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(other.listen_address), std::string::npos) << r.error().message;
}

TEST_F(ServerTest, StopIsIdempotent) {
  server_->stop();
  server_->stop();
  auto cli = client();
  EXPECT_FALSE(cli.Get("/healthz"));
}

TEST(ServerStart, RejectsBadListenAddress) {
  Config config;
  config.no_tls = true;
  config.listen_address = "127.0.0.1";
  Registry registry;
  Scheduler scheduler(registry);
  Server s(ServerDeps{&config, &registry, &scheduler, nullptr, nullptr, nullptr, nullptr, {}});
  auto r = s.start();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("invalid listen address"), std::string::npos);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "gpud-server-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(ServerTls, GeneratesPersistsAndReusesTheCertificate) {
  TempDir dir;
  Config config;
  config.listen_address = "127.0.0.1:0";
  config.data_dir = dir.path().string();
  Registry registry;
  Scheduler scheduler(registry);
  ServerDeps deps{&config, &registry, &scheduler, nullptr, nullptr, nullptr, nullptr, {}};

  std::string first_cert;
  {
    Server s(deps);
    auto r = s.start();
    ASSERT_TRUE(r.ok()) << r.error().message;
    httplib::SSLClient cli("127.0.0.1", s.port());
    cli.enable_server_certificate_verification(false);
    auto res = cli.Get("/healthz");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    first_cert = read_all(dir.path() / kCertFileName);
    ASSERT_NE(first_cert.find("BEGIN CERTIFICATE"), std::string::npos);
    struct stat st {};
    ASSERT_EQ(::stat((dir.path() / kKeyFileName).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(::stat((dir.path() / kCertFileName).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644u);
  }
  Server s(deps);
  ASSERT_TRUE(s.start().ok());
  EXPECT_EQ(read_all(dir.path() / kCertFileName), first_cert);

  // A client pinning the persisted certificate verifies it, IP SAN included.
  httplib::SSLClient pinned("127.0.0.1", s.port());
  pinned.set_ca_cert_path((dir.path() / kCertFileName).c_str());
  pinned.enable_server_certificate_verification(true);
  auto res = pinned.Get("/healthz");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
}

TEST(ServerTls, UsesOperatorCertificateAndRejectsBadOnes) {
  TempDir dir;
  auto a = generate_self_signed();
  auto b = generate_self_signed();
  ASSERT_TRUE(a.ok() && b.ok());
  auto write = [&](const char* name, const std::string& data) {
    std::ofstream(dir.path() / name) << data;
    return (dir.path() / name).string();
  };
  Config config;
  config.listen_address = "127.0.0.1:0";
  config.tls_cert = write("a.crt", a->cert_pem);
  config.tls_key = write("a.key", a->key_pem);
  Registry registry;
  Scheduler scheduler(registry);
  ServerDeps deps{&config, &registry, &scheduler, nullptr, nullptr, nullptr, nullptr, {}};
  {
    Server s(deps);
    auto r = s.start();
    ASSERT_TRUE(r.ok()) << r.error().message;
  }

  config.tls_key = write("b.key", b->key_pem);
  Server mismatched(deps);
  auto r = mismatched.start();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does not match"), std::string::npos) << r.error().message;

  config.tls_cert = (dir.path() / "missing.crt").string();
  Server missing(deps);
  r = missing.start();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("missing.crt"), std::string::npos) << r.error().message;
}

TEST(HttpUtil, LoopbackAddresses) {
  for (const char* a : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "[::1]"})
    EXPECT_TRUE(is_loopback(a)) << a;
  for (const char* a :
       {"10.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "fe80::1", "", "localhost", "128.0.0.1"})
    EXPECT_FALSE(is_loopback(a)) << a;
}

TEST(HttpUtil, MutatingRequestsNeedLoopbackOrToken) {
  EXPECT_TRUE(authorized("127.0.0.1", "", ""));
  EXPECT_TRUE(authorized("::1", "Bearer wrong", "secret"));  // loopback is always allowed
  EXPECT_FALSE(authorized("10.0.0.5", "", ""));
  EXPECT_FALSE(authorized("10.0.0.5", "Bearer ", ""));  // no token configured: never remote
  EXPECT_TRUE(authorized("10.0.0.5", "Bearer secret", "secret"));
  EXPECT_TRUE(authorized("10.0.0.5", "bearer secret", "secret"));
  EXPECT_FALSE(authorized("10.0.0.5", "Bearer secret2", "secret"));
  EXPECT_FALSE(authorized("10.0.0.5", "Bearer secre", "secret"));
  EXPECT_FALSE(authorized("10.0.0.5", "secret", "secret"));
  EXPECT_FALSE(authorized("10.0.0.5", "", "secret"));
}

TEST(HttpUtil, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("", "a"));
}

TEST(HttpUtil, ParsesListenAddresses) {
  auto a = parse_listen_address("0.0.0.0:15132");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "0.0.0.0");
  EXPECT_EQ(a->port, 15132);
  a = parse_listen_address(":8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "0.0.0.0");
  EXPECT_EQ(a->port, 8080);
  a = parse_listen_address("[::1]:0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 0);
  a = parse_listen_address("localhost:1");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "localhost");
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "1.2.3.4:70000", "::1:80", "[::1]",
                          "[::1:80", "h:-1", "h:12x"})
    EXPECT_FALSE(parse_listen_address(bad).ok()) << bad;
}

TEST(HttpUtil, AcceptEncodingWithoutBrotli) {
  EXPECT_EQ(without_brotli("gzip, deflate, br, zstd"), "gzip, deflate, zstd");
  EXPECT_EQ(without_brotli("br;q=1.0, gzip;q=0.8"), "gzip;q=0.8");
  EXPECT_EQ(without_brotli("BR"), "");
  EXPECT_EQ(without_brotli("gzip"), "gzip");
  EXPECT_EQ(without_brotli("brotli-ish, br2"), "brotli-ish, br2");
}

TEST(HttpUtil, SplitsComponentLists) {
  EXPECT_EQ(split_list(" a, b,,c ,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_list("").empty());
}

TEST(HttpUtil, ContentTypes) {
  EXPECT_FALSE(content_type_error("").has_value());
  EXPECT_FALSE(content_type_error("application/json").has_value());
  EXPECT_FALSE(content_type_error("Application/JSON; charset=utf-8").has_value());
  EXPECT_EQ(content_type_error("application/yaml"), "yaml not supported");
  EXPECT_EQ(content_type_error("text/html"), "invalid content type");
}

TEST(SwaggerValidator, ChecksTypesRefsEnumsAndAdditionalProperties) {
  json state_schema = {{"$ref", "#/definitions/github_com_leptonai_gpud_api_v1.HealthState"}};
  EXPECT_TRUE(
      swagger::validate(spec(), state_schema, {{"health", "Healthy"}, {"name", "x"}, {"extra", 1}})
          .empty());
  EXPECT_FALSE(swagger::validate(spec(), state_schema, {{"health", "Fine"}}).empty());
  EXPECT_FALSE(swagger::validate(spec(), state_schema, {{"name", 3}}).empty());
  EXPECT_FALSE(swagger::validate(spec(), state_schema, {{"extra_info", {{"a", 1}}}}).empty());
  json metric = {{"$ref", "#/definitions/github_com_leptonai_gpud_api_v1.Metric"}};
  EXPECT_TRUE(swagger::validate(spec(), metric, {{"unix_seconds", 5.0}}).empty());
  EXPECT_FALSE(swagger::validate(spec(), metric, {{"unix_seconds", 5.5}}).empty());
  json closed = {{"type", "object"},
                 {"additionalProperties", false},
                 {"properties", {{"a", {{"type", "string"}}}}}};
  EXPECT_TRUE(swagger::validate(spec(), closed, {{"a", "x"}}).empty());
  EXPECT_FALSE(swagger::validate(spec(), closed, {{"b", "x"}}).empty());
  EXPECT_TRUE(swagger::response_schema(spec(), "/nope", "get", 200).is_null());
}

}  // namespace
}  // namespace gpud::server
