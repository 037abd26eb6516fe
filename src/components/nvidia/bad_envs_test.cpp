// Rules of accelerator-nvidia-bad-envs over hand-built snapshots (no NVML).
#include "components/nvidia/bad_envs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(BadEnvs, EnvironmentFileAndSystemdDefaults) {
  auto a = bad_envs_in_environment_file(
      "# comment\nPATH=/usr/bin\nexport CUDA_PROFILE=1\nCUDA_AUTO_BOOST=\"0\"\n",
      "/etc/environment");
  ASSERT_EQ(a.size(), 2U);
  EXPECT_EQ(a[0], (BadEnvFinding{"CUDA_PROFILE", "1", "/etc/environment"}));
  EXPECT_EQ(a[1].value, "0");
  auto b = bad_envs_in_systemd_conf(
      "[Manager]\nDefaultEnvironment=A=1 \"OPENCL_PROFILE=on x\" NSIGHT_CUDA_DEBUGGER=1\n",
      "s.conf");
  ASSERT_EQ(b.size(), 2U);
  EXPECT_EQ(b[0], (BadEnvFinding{"OPENCL_PROFILE", "on x", "s.conf"}));
  EXPECT_EQ(b[1].variable, "NSIGHT_CUDA_DEBUGGER");
}

TEST(BadEnvs, FindingIsDegradedNamingVariableAndPlace) {
  auto v = evaluate_bad_envs({{"CUDA_PROFILE", "1", "gpud environment"}});
  EXPECT_EQ(v.health(), Health::kDegraded);
  EXPECT_EQ(v.action(), RepairAction::kCheckUserAppAndGpu);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.data["bad_env_vars"][0]["variable"], "CUDA_PROFILE");
  EXPECT_EQ(v.data["bad_env_vars"][0]["where"], "gpud environment");
  EXPECT_EQ(evaluate_bad_envs({}).health(), Health::kHealthy);
}

TEST(BadEnvs, CollectsThroughHostRoot) {
  auto root = std::filesystem::temp_directory_path() / ("gpud-badenv-" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "etc/systemd/system.conf.d");
  std::ofstream(root / "etc/environment") << "CUDA_COREDUMP_FILE=/tmp/x\n";
  std::ofstream(root / "etc/systemd/system.conf.d/10-cuda.conf")
      << "[Manager]\nDefaultEnvironment=CUDA_DEVICE_WAITS_ON_EXCEPTION=1\n";
  char e1[] = "CUDA_INJECTION64_PATH=/x.so";
  char* env[] = {e1, nullptr};
  auto f = collect_bad_envs(host::HostFs(root.string()), env);
  ASSERT_EQ(f.size(), 3U);
  EXPECT_EQ(f[0].where, "/etc/environment");
  EXPECT_EQ(f[1].where, "/etc/systemd/system.conf.d/10-cuda.conf");
  EXPECT_EQ(f[2].where, "gpud environment");
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpud::components
