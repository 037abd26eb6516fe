// Rules of accelerator-nvidia-processes over hand-built snapshots (no NVML).
#include "components/nvidia/processes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Processes, BadEnvVarIsDegradedNamingPidAndVariable) {
  auto s = identity_only_snapshot(1);
  s.gpus[0].processes = ok(std::vector<nvml::Process>{{42, 1 << 20}, {43, 0}});
  std::map<uint32_t, std::optional<ProcInfo>> procs;
  procs[42] = ProcInfo{"python", std::nullopt, {"CUDA_PROFILE"}, std::nullopt};  // 43 vanished
  auto v = evaluate_processes(s, procs, 0);
  EXPECT_EQ(v.health(), Health::kDegraded);
  EXPECT_EQ(v.action(), RepairAction::kCheckUserAppAndGpu);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 0U);
  EXPECT_EQ(v.data["running_total"], 2);
  ASSERT_EQ(v.gpus.size(), 2U);  // the process's table row, then the GPU's data
  EXPECT_EQ(v.gpus[0].cells,
            (std::vector<std::string>{"42", "C", "1 MiB", "CUDA_PROFILE", "-", "python"}));
  EXPECT_EQ(v.gpus[1].data["processes"].size(), 1U);
  EXPECT_EQ(v.gpus[1].data["processes"][0]["bad_env_vars_for_cuda"][0], "CUDA_PROFILE");
}

TEST(Processes, ProcessesNameTheirContainerAndPod) {
  auto s = identity_only_snapshot(2);
  s.gpus[1].processes = ok(std::vector<nvml::Process>{{42, 1 << 20}, {43, 2 << 20}});
  std::map<uint32_t, std::optional<ProcInfo>> procs;
  const std::string id(64, 'c');
  procs[42] = ProcInfo{"python",
                       std::nullopt,
                       {},
                       runtimes::Attribution{id, "trainer", "llm-0", "ml", "", "kubelet"}};
  procs[43] =
      ProcInfo{"sleep", std::nullopt, {}, runtimes::Attribution{id, "", "", "", "", "cgroup"}};
  auto v = evaluate_processes(s, procs, 0);
  EXPECT_EQ(v.health(), Health::kHealthy);
  ASSERT_EQ(v.gpus.size(), 4U);  // GPU 0's data, the two processes' rows, GPU 1's data
  EXPECT_EQ(v.gpus[1].cells[4], "ml/llm-0/trainer");
  EXPECT_EQ(v.gpus[2].cells[4], "cccccccccccc");
  const auto& list = v.gpus[3].data["processes"];
  ASSERT_EQ(list.size(), 2U);
  EXPECT_EQ(list[0]["pod"], "llm-0");
  EXPECT_EQ(list[0]["namespace"], "ml");
  EXPECT_EQ(list[0]["container"], "trainer");
  EXPECT_EQ(list[0]["container_id"], id);
  EXPECT_EQ(list[0]["attribution_source"], "kubelet");
  EXPECT_FALSE(list[1].contains("pod"));
  EXPECT_EQ(list[1]["container_id"], id);
  EXPECT_EQ(container_cell(std::nullopt), "-");
  // The healthy reason names where they run.
  EXPECT_EQ(v.healthy_reason,
            "2 GPU compute process(es) running in cccccccccccc, ml/llm-0/trainer");
}

// NVML's graphics list adds its processes with their type; the gauge counts compute ones (GPUd's).
TEST(Processes, GraphicsProcessesAreListedWithTheirType) {
  auto s = identity_only_snapshot(1);
  nvml::Process both{42, 1 << 20, true, true}, xorg{7, 4 << 20, false, true};
  s.gpus[0].processes = ok(std::vector<nvml::Process>{both, xorg});
  std::map<uint32_t, std::optional<ProcInfo>> procs;
  procs[42] = ProcInfo{"python", std::nullopt, {}, std::nullopt};
  procs[7] = ProcInfo{"Xorg", std::nullopt, {}, std::nullopt};
  auto v = evaluate_processes(s, procs, 0);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.healthy_reason, "1 GPU compute process(es) and 1 graphics process(es) running");
  EXPECT_EQ(v.data["running_total"], 2);
  ASSERT_EQ(v.gpus.size(), 3U);
  EXPECT_EQ(v.gpus[0].cells[1], "C+G");
  EXPECT_EQ(v.gpus[1].cells[1], "G");
  EXPECT_EQ(v.gpus[2].data["processes"][1]["type"], "G");
}

// A process's name and pid are served; its command line only when it was read (the opt-in), and
// then as read_proc_info redacted it.
TEST(Processes, CommandLinesAreServedOnlyWhenRead) {
  auto s = identity_only_snapshot(1);
  s.gpus[0].processes = ok(std::vector<nvml::Process>{{42, 1 << 20}, {43, 1 << 20}});
  std::map<uint32_t, std::optional<ProcInfo>> procs;
  procs[42] = ProcInfo{"python", std::nullopt, {}, std::nullopt};
  procs[43] = ProcInfo{"torchrun",
                       std::vector<std::string>{"torchrun", "--hf-token", "<redacted>"},
                       {},
                       std::nullopt};
  auto v = evaluate_processes(s, procs, 0);
  const auto& list = v.gpus.back().data["processes"];
  ASSERT_EQ(list.size(), 2U);
  EXPECT_EQ(list[0]["pid"], 42);
  EXPECT_EQ(list[0]["name"], "python");
  EXPECT_FALSE(list[0].contains("cmd_args")) << list[0].dump();
  EXPECT_EQ(list[1]["cmd_args"], (nlohmann::json{"torchrun", "--hf-token", "<redacted>"}));
  EXPECT_EQ(v.gpus[1].cells.back(), "torchrun");  // the table's COMMAND is the name
}

TEST(Processes, GenericErrorsUnhealthyAfterFiveChecks) {
  auto s = identity_only_snapshot(1);
  s.gpus[0].processes = errored<std::vector<nvml::Process>>();
  EXPECT_TRUE(processes_have_error(s));
  auto v4 = evaluate_processes(s, {}, 4);
  EXPECT_EQ(v4.health(), Health::kHealthy);
  ASSERT_EQ(v4.findings.size(), 1U);
  EXPECT_TRUE(v4.findings[0].nvml_error);
  EXPECT_EQ(v4.reason_suffix, " (detected 4/5 consecutive checks)");
  EXPECT_EQ(evaluate_processes(s, {}, 5).health(), Health::kUnhealthy);
}

TEST(Processes, EnvironBlockParsing) {
  std::string block("A=1\0CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1\0CUDA_PROFILEX=1\0", 54);
  EXPECT_EQ(bad_env_vars_in_environ(block),
            std::vector<std::string>{"CUDA_ENABLE_COREDUMP_ON_EXCEPTION"});
}

TEST(Processes, ReadsProcThroughHostRoot) {
  auto root = std::filesystem::temp_directory_path() / ("gpud-procs-" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "proc/77");
  std::ofstream(root / "proc/77/cmdline")
      << std::string("python\0x.py\0--db-password=hunter2\0--hf-token\0hf_abc\0", 52);
  std::ofstream(root / "proc/77/environ") << std::string("COMPUTE_PROFILE=1\0", 18);
  std::ofstream(root / "proc/77/comm") << "python\n";
  host::HostFs fs(root.string());
  auto info = read_proc_info(fs, 77);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->name, "python");
  EXPECT_FALSE(info->cmdline) << "the command line is read only when it is served";
  EXPECT_EQ(info->bad_env_vars, std::vector<std::string>{"COMPUTE_PROFILE"});
  info = read_proc_info(fs, 77, /*with_cmdline=*/true);
  ASSERT_TRUE(info && info->cmdline);
  EXPECT_EQ(*info->cmdline, (std::vector<std::string>{"python", "x.py", "--db-password=<redacted>",
                                                      "--hf-token", "<redacted>"}));
  EXPECT_FALSE(read_proc_info(fs, 78));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpud::components
