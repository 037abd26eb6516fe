#include "app/kubeconfig.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace gpud::app {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpud-kubeconfig-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

// "-----BEGIN CERTIFICATE-----\nCA\n" in base64.
constexpr const char* kCaData = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCg==";

TEST_F(KubeconfigTest, CurrentContextsClusterAndUserWithInlineData) {
  std::string path = write("config", std::string(R"(apiVersion: v1
kind: Config
current-context: prod
contexts:
- name: other
  context: {cluster: nowhere, user: nobody}
- name: prod
  context: {cluster: c1, user: u1}
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: )") + kCaData +
                                         R"(
users:
- name: u1
  user:
    token: abc.def
)");
  auto c = connection_from_kubeconfig(path);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, "-----BEGIN CERTIFICATE-----\nCA\n");
  EXPECT_EQ(c->token, "abc.def");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->where, "kubeconfig " + path);
}

TEST_F(KubeconfigTest, RelativeFilesAreBesideTheKubeconfig) {
  write("ca.crt", "CA PEM");
  write("client.crt", "CERT PEM");
  write("client.key", "KEY PEM");
  std::string path = write("config", R"(current-context: k
contexts: [{name: k, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://api:443", certificate-authority: ca.crt}}]
users: [{name: u, user: {client-certificate: client.crt, client-key: client.key, tokenFile: t}}]
)");
  auto c = connection_from_kubeconfig(path);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->ca_pem, "CA PEM");
  EXPECT_EQ(c->client_cert_pem, "CERT PEM");
  EXPECT_EQ(c->client_key_pem, "KEY PEM");
  EXPECT_EQ(c->token_file, dir_ + "/t");
}

TEST_F(KubeconfigTest, WhatGpudCannotUseIsAnErrorThatSaysWhy) {
  auto exec = connection_from_kubeconfig(write("exec", R"(current-context: k
contexts: [{name: k, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://api"}}]
users: [{name: u, user: {exec: {command: aws}}}]
)"));
  ASSERT_FALSE(exec);
  EXPECT_THAT(exec.error().message, HasSubstr("exec plugin"));
  auto missing = connection_from_kubeconfig(write("missing", R"(current-context: k
contexts: [{name: k, context: {cluster: c, user: u}}]
clusters: []
users: []
)"));
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message, HasSubstr("no cluster named \"c\""));
  EXPECT_FALSE(connection_from_kubeconfig(write("garbage", "[: not yaml")));
  EXPECT_FALSE(connection_from_kubeconfig(dir_ + "/absent"));
  auto key_alone = connection_from_kubeconfig(write("keyalone", R"(current-context: k
contexts: [{name: k, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://api"}}]
users: [{name: u, user: {client-key-data: S0VZ}}]
)"));
  ASSERT_FALSE(key_alone);
  EXPECT_THAT(key_alone.error().message, HasSubstr("without"));
}

TEST_F(KubeconfigTest, InClusterUsesTheServiceAccountAndTheServiceAddress) {
  write("token", "tok\n");
  write("ca.crt", "SA CA");
  auto c = connection_in_cluster("10.96.0.1", "443", dir_);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token_file, dir_ + "/token");
  EXPECT_EQ(c->ca_pem, "SA CA");
  auto v6 = connection_in_cluster("fd00::1", nullptr, dir_);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->server, "https://[fd00::1]:443");
  auto outside = connection_in_cluster(nullptr, nullptr, dir_);
  ASSERT_FALSE(outside);
  EXPECT_THAT(outside.error().message, HasSubstr("--kubeconfig"));
  EXPECT_FALSE(connection_in_cluster("10.96.0.1", "443", dir_ + "/absent"));
}

TEST(KubernetesSettings, NodeNameAndKubeconfigComeFromTheEnvironmentWhenNotGiven) {
  KubernetesSettings c;
  c.node_conditions = true;
  EXPECT_THAT(resolve_kubernetes_settings(c, nullptr, nullptr).error().message,
              HasSubstr("NODE_NAME"));
  ASSERT_TRUE(resolve_kubernetes_settings(c, "gpu-node-7", "/a/config:/b/config"));
  EXPECT_EQ(c.node_name, "gpu-node-7");
  EXPECT_EQ(c.kubeconfig, "/a/config");
  KubernetesSettings flagged;
  flagged.node_conditions = true;
  flagged.node_name = "from-flag";
  ASSERT_TRUE(resolve_kubernetes_settings(flagged, "from-env", nullptr));
  EXPECT_EQ(flagged.node_name, "from-flag");
  KubernetesSettings bad;
  bad.node_conditions = true;
  bad.node_name = "../nodes/x";
  EXPECT_FALSE(resolve_kubernetes_settings(bad, nullptr, nullptr));
  KubernetesSettings off;  // off: nothing is required
  EXPECT_TRUE(resolve_kubernetes_settings(off, nullptr, nullptr));
}

}  // namespace
}  // namespace gpud::app
