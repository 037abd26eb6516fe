#include "components/containers/docker.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtimes/container_directory.h"
#include "runtimes/container_source.h"
#include "testing/fake_command.h"

namespace gpud::components {
namespace {

std::string fixture_path(const std::string& rel) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/" + rel;
}

std::string fixture(const std::string& name) {
  std::ifstream in(fixture_path("docker/" + name));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

host::UnitState unit(const std::string& name) {
  auto units = host::parse_systemctl_show(fixture(name), {"docker.service"});
  return units.front();
}

// A daemon that answered everything, as recorded from Debian's docker 20.10.
DockerSnapshot answering() {
  DockerSnapshot s;
  s.installed = true;
  s.socket_path = "/var/run/docker.sock";
  s.ping = std::string("1.41");
  s.version = runtimes::parse_docker_version(fixture("version-20.10.json"));
  s.containers = runtimes::parse_docker_containers(fixture("containers-20.10.json"));
  return s;
}

Error http_error(long status, const std::string& body_fixture) {
  return make_error("Error response from daemon (" + std::to_string(status) +
                        " /v1.41/containers/json?all=1): " +
                        runtimes::docker_error_message(status, fixture(body_fixture)),
                    static_cast<int>(runtimes::DockerErrorKind::kHttp));
}

nlohmann::json data_of(const CheckResult& r) { return r.states[0].data; }

TEST(DockerRule, NotInstalledIsHealthyNotApplicable) {
  DockerSnapshot s;
  CheckResult r = evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "docker not installed (not applicable)");
}

TEST(DockerRule, ListsContainersWithTheirPods) {
  CheckResult r = evaluate_docker(answering());
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "docker is running, 2 containers (1 running)");
  EXPECT_EQ(r.states[0].error, "");
  auto data = data_of(r);
  EXPECT_EQ(data["version"], "20.10.24+dfsg1");
  EXPECT_EQ(data["api_version"], "1.41");
  ASSERT_EQ(data["containers"].size(), 2u);
  const auto& pod = data["containers"][1];
  EXPECT_EQ(pod["id"], "f37b57d424da007eb7f232cc153eb817a98600b9dc1b94d7d41b0d7cbc3c9874");
  EXPECT_EQ(pod["name"], "k8s_trainer_job-7f9c_ml-team_0b5c_0");
  EXPECT_EQ(pod["image"], "gpud-test/busybox:1");
  EXPECT_EQ(pod["created_at"], 1796278681);
  EXPECT_EQ(pod["state"], "running");
  EXPECT_EQ(pod["pod_name"], "job-7f9c");
  EXPECT_EQ(pod["pod_namespace"], "ml-team");
  EXPECT_FALSE(data["containers"][0].contains("pod_name"));
  EXPECT_NE(r.detail.find("f37b57d424da k8s_trainer_job-7f9c_ml-team_0b5c_0 running pod "
                          "ml-team/job-7f9c"),
            std::string::npos)
      << r.detail;
}

TEST(DockerRule, PingFailingIsUnhealthyWithWhy) {
  DockerSnapshot s = answering();
  s.ping = Result<std::string>(make_error(
      "cannot connect to the docker daemon at unix:///var/run/docker.sock: the socket does not "
      "exist",
      static_cast<int>(runtimes::DockerErrorKind::kConnect)));
  CheckResult r = evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "docker installed but the docker daemon is not running");
  EXPECT_EQ(r.states[0].error,
            "cannot connect to the docker daemon at unix:///var/run/docker.sock: the socket does "
            "not exist");
}

TEST(DockerRule, MissingModuleIsDegradedNotADeadDaemon) {
  DockerSnapshot s = answering();
  s.ping = Result<std::string>(make_error("the docker module (libgpud-docker.so) is not in /x",
                                          static_cast<int>(runtimes::DockerErrorKind::kModule)));
  CheckResult r = evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "cannot check the docker daemon: gpud's docker module is missing");
  EXPECT_EQ(r.states[0].error, "the docker module (libgpud-docker.so) is not in /x");
}

TEST(DockerRule, ServiceNotActiveIsUnhealthy) {
  DockerSnapshot s = answering();
  s.service = Result<host::UnitState>(unit("systemctl-show-docker-failed.txt"));
  CheckResult r = evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "docker service is failed (failed)");
  s.service = Result<host::UnitState>(unit("systemctl-show-docker-active.txt"));
  r = evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["service_active_state"], "active");
  // A daemon answering without a docker.service (started by hand) is judged by its answers.
  s.service = Result<host::UnitState>(unit("systemctl-show-docker-not-found.txt"));
  EXPECT_EQ(evaluate_docker(s).health(), Health::kHealthy);
  s.service = Result<host::UnitState>(make_error("`systemctl show` timed out after 10000 ms"));
  r = evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "cannot read the docker service");
  EXPECT_EQ(r.states[0].error, "`systemctl show` timed out after 10000 ms");
}

TEST(DockerRule, ListErrorIsUnhealthy) {
  DockerSnapshot s = answering();
  s.containers =
      Result<std::vector<runtimes::DockerContainer>>(http_error(500, "error-bad-filter.json"));
  CheckResult r = evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "error listing docker containers");
  EXPECT_EQ(r.states[0].error,
            "Error response from daemon (500 /v1.41/containers/json?all=1): invalid character 'g' "
            "looking for beginning of value");
  s.containers = runtimes::parse_docker_containers("[{\"Id\": 4");
  r = evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.states[0].error.find("the container list is not JSON"), std::string::npos);
}

TEST(DockerRule, ClientNewerThanDaemonIsHealthyNotSupported) {
  DockerSnapshot s = answering();
  s.containers =
      Result<std::vector<runtimes::DockerContainer>>(http_error(400, "error-client-too-new.json"));
  CheckResult r = evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "not supported; needs upgrading docker daemon");
  EXPECT_NE(r.states[0].error.find("client version 1.99 is too new"), std::string::npos);
}

TEST(DockerRule, ConnectionLostWhileListingIsIgnored) {
  DockerSnapshot s = answering();
  s.containers = Result<std::vector<runtimes::DockerContainer>>(
      make_error("the docker daemon closed the connection (unix:///var/run/docker.sock GET "
                 "/v1.41/containers/json?all=1): Empty reply from server",
                 static_cast<int>(runtimes::DockerErrorKind::kConnect)));
  CheckResult r = evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.states[0].reason.find("went away while listing"), std::string::npos);
  // A timeout is not a connection error: a hung daemon is Unhealthy.
  s.containers = Result<std::vector<runtimes::DockerContainer>>(
      make_error("the docker daemon did not answer within 10000 ms",
                 static_cast<int>(runtimes::DockerErrorKind::kTimeout)));
  EXPECT_EQ(evaluate_docker(s).health(), Health::kUnhealthy);
}

// The component on this machine's code paths, with docker's programs and systemctl as scripts.
struct Harness {
  explicit Harness(bool installed) {
    if (installed) bin.script("dockerd", "exit 0");
    config.executable_search_path = bin.dir();
    config.docker_socket = bin.dir() + "/no-docker.sock";
    config.host_root = fixture_path("host/debian12");
    ctx.config = &config;
    ctx.containers = &directory;
    ctx.container_source = &source;
  }
  testing_support::FakeCommands bin;
  Config config;
  runtimes::ContainerDirectory directory;
  runtimes::ContainerSource source{directory};
  ComponentContext ctx;
};

TEST(DockerComponent, NotInstalledIsHealthyAndClearsTheDirectory) {
  Harness h(false);
  h.directory.publish("docker", {{"0123456789abcdef", "x", "", "", "", "docker"}});
  DockerComponent c(h.ctx);
  EXPECT_EQ(c.name(), "docker");
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "docker not installed (not applicable)");
  EXPECT_TRUE(h.directory.all().empty());
}

TEST(DockerComponent, InstalledWithoutItsSocketIsUnhealthy) {
  Harness h(true);
  h.directory.publish("docker", {{"0123456789abcdef", "x", "", "", "", "docker"}});
  DockerComponent c(h.ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "docker installed but the docker daemon is not running");
  EXPECT_EQ(r.states[0].error, "cannot connect to the docker daemon at unix://" + h.bin.dir() +
                                   "/no-docker.sock: the socket does not exist");
  EXPECT_TRUE(h.directory.all().empty());
}

}  // namespace
}  // namespace gpud::components
