#include "app/slurm_health_check.h"

#include <gtest/gtest.h>

namespace gpud::app {
namespace {

// `scontrol show node gpunode1` of Debian 12's slurm-client 22.05.8, drained by hand.
constexpr const char* kDrainedNode = R"(NodeName=gpunode1 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=1.85
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=gpu:8
   NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8
   OS=Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC @0 
   RealMemory=1000 AllocMem=0 FreeMem=15682 Sockets=2 Boards=1
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=gpu 
   BootTime=2026-12-06T04:31:40 SlurmdStartTime=2026-12-06T22:47:26
   LastBusyTime=2026-12-06T22:47:31
   CfgTRES=cpu=2,mem=1000M,billing=2
   AllocTRES=
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=disk replacement [Reason=x] [admin@2026-12-06T22:48:01]

)";

SlurmNode node(std::string state, std::string reason = "") {
  return SlurmNode{"gpunode1", std::move(state), std::move(reason)};
}

const NpdAnswer kXid79{kNpdProblem, "GPU 3 0000:5d:00.0 REBOOT_SYSTEM: Xid 79 on 0000:5d:00.0"};
const NpdAnswer kHealthy{kNpdOk, "gpud all: 41 component(s) Healthy"};
const NpdAnswer kNoDaemon{kNpdUnknown, "gpud not reachable: connection refused"};

TEST(SlurmHealthCheck, ParsesTheStateAndTheReasonWithoutSlurmsStamp) {
  auto n = parse_scontrol_node(kDrainedNode);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(n->name, "gpunode1");
  EXPECT_EQ(n->state, "IDLE+DRAIN");
  EXPECT_EQ(n->reason, "disk replacement [Reason=x]");
  EXPECT_TRUE(n->drained());
  EXPECT_FALSE(n->drained_by_gpud());
  // A node with no reason line, and a state whose flags only contain "DRAIN" as part of a word.
  auto idle = parse_scontrol_node("NodeName=n1 Arch=x86_64\n   State=IDLE ThreadsPerCore=1\n");
  ASSERT_TRUE(idle);
  EXPECT_EQ(idle->reason, "");
  EXPECT_FALSE(idle->drained());
  EXPECT_FALSE(node("DOWN+NOT_RESPONDING").drained());
  EXPECT_TRUE(node("MIXED+DRAIN").drained());
  EXPECT_TRUE(node("DOWN+DRAIN+NOT_RESPONDING", "gpud: GPU 1").drained_by_gpud());
}

TEST(SlurmHealthCheck, AnAnswerWithoutTheNodesStateIsAnError) {
  auto none = parse_scontrol_node("Node gpunode9 not found\n");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().message,
            "scontrol answered without the node's State=: \"Node gpunode9 not found\"");
  EXPECT_FALSE(parse_scontrol_node(""));
}

TEST(SlurmHealthCheck, AFaultDrainsWithAReasonNamingTheGpu) {
  auto d = slurm_decision(kXid79, node("IDLE"));
  EXPECT_EQ(d.action, SlurmAction::kDrain);
  EXPECT_EQ(d.reason, "gpud: GPU 3 0000:5d:00.0 REBOOT_SYSTEM: Xid 79 on 0000:5d:00.0");
  EXPECT_EQ(d.exit_code, 1);
  // Already drained by gpud for this fault: nothing to do; for another of gpud's: the new reason.
  auto same = slurm_decision(kXid79, node("IDLE+DRAIN", d.reason));
  EXPECT_EQ(same.action, SlurmAction::kNone);
  EXPECT_EQ(same.exit_code, 1);
  auto other = slurm_decision(kXid79, node("IDLE+DRAIN", "gpud: disk Unhealthy: / is full"));
  EXPECT_EQ(other.action, SlurmAction::kDrain);
  // A down node is drained too, so that it does not come back into service by itself.
  EXPECT_EQ(slurm_decision(kXid79, node("DOWN+NOT_RESPONDING")).action, SlurmAction::kDrain);
}

TEST(SlurmHealthCheck, AnotherDrainIsNeverTouched) {
  const SlurmNode admin = node("IDLE+DRAIN", "disk replacement");
  auto fault = slurm_decision(kXid79, admin);
  EXPECT_EQ(fault.action, SlurmAction::kNone);
  EXPECT_NE(fault.message.find("\"disk replacement\", which is not gpud's"), std::string::npos)
      << fault.message;
  auto healthy = slurm_decision(kHealthy, admin);
  EXPECT_EQ(healthy.action, SlurmAction::kNone);
  EXPECT_EQ(healthy.exit_code, 0);
  // A reason that merely mentions gpud is not gpud's.
  EXPECT_EQ(slurm_decision(kHealthy, node("IDLE+DRAIN", "waiting for gpud: upgrade")).action,
            SlurmAction::kNone);
}

TEST(SlurmHealthCheck, HealthyAgainResumesOnlyWhatGpudDrained) {
  auto d = slurm_decision(kHealthy, node("IDLE+DRAIN", "gpud: GPU 3 0000:5d:00.0 REBOOT_SYSTEM"));
  EXPECT_EQ(d.action, SlurmAction::kResume);
  EXPECT_EQ(d.exit_code, 0);
  EXPECT_EQ(slurm_decision(kHealthy, node("IDLE")).action, SlurmAction::kNone);
  // A Degraded daemon answers OK: it does not drain.
  EXPECT_EQ(slurm_decision(NpdAnswer{kNpdOk, "disk Degraded: / is 96% full"}, node("ALLOCATED"))
                .action,
            SlurmAction::kNone);
}

TEST(SlurmHealthCheck, NoAnswerLeavesTheNodeAsItIsAndSaysSo) {
  for (const SlurmNode& n : {node("IDLE"), node("IDLE+DRAIN", "gpud: GPU 3"),
                             node("IDLE+DRAIN", "disk replacement")}) {
    auto d = slurm_decision(kNoDaemon, n);
    EXPECT_EQ(d.action, SlurmAction::kNone);
    EXPECT_EQ(d.exit_code, 2);
    EXPECT_NE(d.message.find("left as it is"), std::string::npos) << d.message;
    EXPECT_NE(d.message.find("gpud not reachable"), std::string::npos) << d.message;
  }
}

}  // namespace
}  // namespace gpud::app
