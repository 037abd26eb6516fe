// The example plugins shipped in deploy/plugins/, each run as the daemon would run it: the NVIDIA
// ones against stand-in dcgmi and nvidia-smi scripts on PATH.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "plugins/plugin_component.h"

namespace gpud::plugins {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gpud-examples-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::string example_text(const std::string& file) {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/deploy/plugins/" + file);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A stand-in command: `name` in `dir`, running `body`.
void stand_in(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/bash\n" << body;
  ::chmod(path.c_str(), 0755);
}

HealthState run_example(const std::string& yaml, const std::string& component,
                        const std::string& path, const std::string& host_root = "/") {
  auto specs = parse_specs(yaml, "example.yaml");
  EXPECT_TRUE(specs) << specs.error().message;
  if (!specs) return {};
  for (const Spec& s : *specs) {
    if (s.component_name != component) continue;
    ScriptOptions opts;
    opts.path = path;
    opts.host_root = host_root;
    PluginComponent c(ComponentContext{}, s, opts);
    CheckResult r = c.check();
    EXPECT_EQ(r.states.size(), 1u);
    return r.states.empty() ? HealthState{} : r.states[0];
  }
  ADD_FAILURE() << "no component " << component;
  return {};
}

TEST(PluginExamples, MountCheckReadsTheHostsMountTableUnderTheHostRoot) {
  // As in the container image: the host's / under --host-root, its init's mount table there.
  TempDir host;
  std::filesystem::create_directories(host.path + "/proc/1");
  std::ofstream(host.path + "/proc/1/mounts") << "/dev/nvme0n1p1 / ext4 rw,relatime 0 0\n"
                                                 "/dev/md0 /mnt/scratch xfs rw,noatime 0 0\n";
  std::string yaml = example_text("mount-check.yaml");
  yaml.replace(yaml.find("\"mount-root:/\""), 14, "\"mount-scratch:/mnt/scratch\"");
  HealthState scratch = run_example(yaml, "mount-scratch", "/usr/bin:/bin", host.path);
  EXPECT_EQ(scratch.health, Health::kHealthy) << scratch.reason << scratch.raw_output;
  EXPECT_EQ(scratch.extra_info["fstype"], "xfs");
  // A host root whose mount table cannot be read is no reading of gpud's own.
  TempDir empty;
  HealthState unread = run_example(yaml, "mount-scratch", "/usr/bin:/bin", empty.path);
  EXPECT_EQ(unread.health, Health::kUnhealthy);
  EXPECT_NE(unread.raw_output.find("cannot read " + empty.path + "/proc/1/mounts"),
            std::string::npos)
      << unread.raw_output;
}

TEST(PluginExamples, MountCheckFindsRootAndMissesAnUnmountedPath) {
  const std::string yaml = example_text("mount-check.yaml");
  HealthState root = run_example(yaml, "mount-root", "/usr/bin:/bin");
  EXPECT_EQ(root.health, Health::kHealthy) << root.reason << root.raw_output;
  EXPECT_EQ(root.extra_info["mounted"], "true");
  EXPECT_EQ(root.extra_info["mount_point"], "/");
  EXPECT_FALSE(root.extra_info["fstype"].empty());

  std::string missing = yaml;
  missing.replace(missing.find("\"mount-root:/\""), 14, "\"mount-nowhere:/nonexistent/mnt\"");
  HealthState none = run_example(missing, "mount-nowhere", "/usr/bin:/bin");
  EXPECT_EQ(none.health, Health::kUnhealthy);
  EXPECT_EQ(none.extra_info["mounted"], "false");
  EXPECT_NE(none.reason.find("mounted=\"false\" does not match"), std::string::npos) << none.reason;
}

TEST(PluginExamples, DcgmDiagSkipsWithoutDcgmiAndJudgesItsResult) {
  TempDir bin;
  const std::string yaml = example_text("dcgm-diag.yaml");
  HealthState skipped = run_example(yaml, "dcgm-diag", bin.path + ":/usr/bin:/bin");
  EXPECT_EQ(skipped.health, Health::kHealthy) << skipped.reason << skipped.raw_output;
  EXPECT_EQ(skipped.extra_info["skipped"], "true");
  EXPECT_EQ(skipped.run_mode, "manual");

  stand_in(bin.path, "dcgmi",
           "echo \"$@\" > " + bin.path +
               "/args\n"
               "echo '| Deployment            | Pass  |'\n"
               "echo '| Memory                | Pass  |'\n");
  HealthState passed = run_example(yaml, "dcgm-diag", bin.path + ":/usr/bin:/bin");
  EXPECT_EQ(passed.health, Health::kHealthy) << passed.reason << passed.raw_output;
  EXPECT_EQ(passed.extra_info["passed"], "true");
  EXPECT_EQ(passed.extra_info["skipped"], "false");
  std::ifstream args(bin.path + "/args");
  std::string line;
  std::getline(args, line);
  EXPECT_EQ(line, "diag -r 1");

  stand_in(bin.path, "dcgmi",
           "echo '| Deployment            | Pass  |'\n"
           "echo '| Memory                | Fail  - GPU 3: uncorrectable error |'\n"
           "exit 226\n");
  HealthState failed = run_example(yaml, "dcgm-diag", bin.path + ":/usr/bin:/bin");
  EXPECT_EQ(failed.health, Health::kUnhealthy);
  EXPECT_EQ(failed.extra_info["failed_tests"], "1");
  EXPECT_EQ(failed.extra_info["dcgmi_exit_code"], "226");
  ASSERT_TRUE(failed.suggested_actions);
  EXPECT_EQ(failed.suggested_actions->repair_actions,
            std::vector<RepairAction>{RepairAction::kHardwareInspection});
  EXPECT_NE(failed.raw_output.find("GPU 3: uncorrectable error"), std::string::npos);
}

TEST(PluginExamples, NvidiaSmiQueryJudgesTemperatureAndEcc) {
  TempDir bin;
  const std::string yaml = example_text("nvidia-smi-query.yaml");
  HealthState skipped = run_example(yaml, "nvidia-smi-query", bin.path + ":/usr/bin:/bin");
  EXPECT_EQ(skipped.health, Health::kHealthy) << skipped.reason << skipped.raw_output;
  EXPECT_EQ(skipped.extra_info["skipped"], "true");

  stand_in(bin.path, "nvidia-smi", "echo '0, 41, 0'\necho '1, 45, [N/A]'\n");
  HealthState ok = run_example(yaml, "nvidia-smi-query", bin.path + ":/usr/bin:/bin");
  EXPECT_EQ(ok.health, Health::kHealthy) << ok.reason << ok.raw_output;
  EXPECT_EQ(ok.extra_info["gpus"], "2");
  EXPECT_EQ(ok.extra_info["max_temp_c"], "45");
  EXPECT_EQ(ok.extra_info["uncorrected_ecc"], "0");

  stand_in(bin.path, "nvidia-smi", "echo '0, 90, 3'\n");
  HealthState bad = run_example(yaml, "nvidia-smi-query", bin.path + ":/usr/bin:/bin");
  EXPECT_EQ(bad.health, Health::kUnhealthy);
  EXPECT_EQ(bad.extra_info["uncorrected_ecc"], "3");
  ASSERT_TRUE(bad.suggested_actions);
  EXPECT_EQ(bad.suggested_actions->repair_actions,
            std::vector<RepairAction>{RepairAction::kRebootSystem});

  stand_in(bin.path, "nvidia-smi", "echo 'NVIDIA-SMI has failed' >&2\nexit 9\n");
  HealthState broken = run_example(yaml, "nvidia-smi-query", bin.path + ":/usr/bin:/bin");
  EXPECT_EQ(broken.health, Health::kUnhealthy);
  EXPECT_NE(broken.raw_output.find("NVIDIA-SMI has failed"), std::string::npos)
      << broken.raw_output;
}

}  // namespace
}  // namespace gpud::plugins
