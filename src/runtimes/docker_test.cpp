#include "runtimes/docker.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace gpud::runtimes {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/docker/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool module_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libgpud-docker.so") != std::string::npos) return true;
  return false;
}

TEST(DockerParse, RecordedContainerListWithKubernetesLabels) {
  auto list = parse_docker_containers(fixture("containers-20.10.json"));
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  const DockerContainer& plain = (*list)[0];
  EXPECT_EQ(plain.id, "bc2949ee3529a821ec03a153463e4116c166093e9371325cd56382fe18eae7d7");
  EXPECT_EQ(plain.name, "plain-exited");
  EXPECT_EQ(plain.image, "gpud-test/busybox:1");
  EXPECT_EQ(plain.created_at, 1796278684);
  EXPECT_EQ(plain.state, "exited");
  EXPECT_EQ(plain.pod_name, "");
  EXPECT_EQ(plain.pod_namespace, "");
  const DockerContainer& pod = (*list)[1];
  EXPECT_EQ(pod.name, "k8s_trainer_job-7f9c_ml-team_0b5c_0");
  EXPECT_EQ(pod.state, "running");
  EXPECT_EQ(pod.pod_name, "job-7f9c");
  EXPECT_EQ(pod.pod_namespace, "ml-team");
  EXPECT_EQ(pod.pod_uid, "0b5c2d4e-1111-2222-3333-444455556666");
  EXPECT_EQ(pod.pod_container_name, "trainer");
}

TEST(DockerParse, GarbledOrMisshapenListSaysWhat) {
  for (const char* bad : {"{\"Id\": ", "", "<html>502</html>"}) {
    auto r = parse_docker_containers(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(docker_error_kind(r.error()), DockerErrorKind::kBadResponse);
    EXPECT_NE(r.error().message.find("not JSON"), std::string::npos) << r.error().message;
  }
  auto object = parse_docker_containers(R"({"message":"x"})");
  ASSERT_FALSE(object);
  EXPECT_EQ(object.error().message, "the container list is a JSON object, not an array");
  auto no_id = parse_docker_containers(R"([{"Names":["/a"]}])");
  ASSERT_FALSE(no_id);
  EXPECT_EQ(no_id.error().message, "a container in the list has no Id");
  // Fields of the wrong type are left empty rather than thrown on.
  auto odd = parse_docker_containers(R"([{"Id":"abc","Names":[7],"Created":"x","Labels":null}])");
  ASSERT_TRUE(odd) << odd.error().message;
  EXPECT_EQ((*odd)[0].name, "");
  EXPECT_EQ((*odd)[0].created_at, 0);
  EXPECT_TRUE(parse_docker_containers("[]")->empty());
}

TEST(DockerParse, RecordedVersion) {
  auto v = parse_docker_version(fixture("version-20.10.json"));
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->version, "20.10.24+dfsg1");
  EXPECT_EQ(v->api_version, "1.41");
  EXPECT_EQ(v->min_api_version, "1.12");
  EXPECT_EQ(v->os, "linux");
  EXPECT_FALSE(parse_docker_version("[1]"));
  EXPECT_FALSE(parse_docker_version("{}"));
}

TEST(DockerParse, ErrorBodiesAndTooNew) {
  const std::string too_new = docker_error_message(400, fixture("error-client-too-new.json"));
  EXPECT_EQ(too_new, "client version 1.99 is too new. Maximum supported API version is 1.41");
  EXPECT_TRUE(is_docker_client_too_new(make_error("Error response from daemon: " + too_new)));
  EXPECT_TRUE(is_docker_client_too_new(
      make_error("Error response from daemon: client is newer than server (client API version: "
                 "1.24, server API version: 1.23)")));
  const std::string filter = docker_error_message(500, fixture("error-bad-filter.json"));
  EXPECT_EQ(filter, "invalid character 'g' looking for beginning of value");
  EXPECT_FALSE(is_docker_client_too_new(make_error(filter)));
  EXPECT_EQ(docker_error_message(502, "  Bad Gateway\n"), "Bad Gateway");
  EXPECT_EQ(docker_error_message(503, ""), "HTTP status 503");
  EXPECT_EQ(docker_error_message(500, std::string(1000, 'x')).size(), 303u);
}

TEST(DockerParse, ApiVersionOrder) {
  EXPECT_TRUE(docker_api_version_less("1.40", "1.41"));
  EXPECT_TRUE(docker_api_version_less("1.41", "1.100"));
  EXPECT_FALSE(docker_api_version_less("1.41", "1.41"));
  EXPECT_FALSE(docker_api_version_less("2.0", "1.41"));
  EXPECT_FALSE(docker_api_version_less("", "1.41"));
  EXPECT_FALSE(docker_api_version_less("1.x", "1.41"));
}

TEST(DockerClient, MissingSocketIsAConnectionErrorWithoutLoadingTheModule) {
  DockerClient c("/nonexistent/docker.sock", std::chrono::milliseconds(500));
  auto p = c.ping();
  ASSERT_FALSE(p);
  EXPECT_EQ(docker_error_kind(p.error()), DockerErrorKind::kConnect);
  EXPECT_EQ(p.error().message,
            "cannot connect to the docker daemon at unix:///nonexistent/docker.sock: the socket "
            "does not exist");
  EXPECT_FALSE(c.list_containers());
  EXPECT_FALSE(module_mapped()) << "libcurl's module was loaded for a socket that is not there";
  EXPECT_EQ(c.api_version(), "1.41");
  DockerClient pinned("/nonexistent/docker.sock", std::chrono::milliseconds(500), "1.99");
  EXPECT_EQ(pinned.api_version(), "1.99");
}

}  // namespace
}  // namespace gpud::runtimes
