// End-to-end: Debian's munged, slurmctld and slurmd with a private configuration (one node, the fake
// NVML's GPUs as its GRES, a 2 s HealthCheckInterval) run the shipped wrapper
// (deploy/slurm/gpud-slurm-health-check) as their HealthCheckProgram. An Xid 79 on GPU 3 drains the
// node with a reason naming the GPU; set-healthy brings it back to idle; an administrator's drain is
// never changed, fault or not; with no daemon answering the node is left as it is.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/e2e/daemon_process.h"
#include "tests/e2e/prometheus_stack.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kNode = "gpunode1";

std::string found(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    const std::string p = std::string(dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

std::string short_hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string h(host);
  return h.substr(0, h.find('.'));
}

struct SlurmNodeView {
  std::string state;   // sinfo's %T: idle, drained, draining, ...
  std::string reason;  // sinfo's %E
};

class SlurmCluster {
 public:
  explicit SlurmCluster(std::string dir) : dir_(std::move(dir)) {}

  // The configuration, the munge key and the GRES device files; "" or what failed.
  std::string configure(int gpus, const std::string& health_check_program) {
    for (const char* d : {"munge", "state", "spool", "dev", "log"})
      fs::create_directories(dir_ + "/" + d);
    fs::permissions(dir_ + "/munge", fs::perms::owner_all, fs::perm_options::replace);
    {
      std::ofstream key(dir_ + "/munge/munge.key", std::ios::binary);
      std::ifstream random("/dev/urandom", std::ios::binary);
      std::string bytes(1024, '\0');
      random.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      key << bytes;
    }
    fs::permissions(dir_ + "/munge/munge.key", fs::perms::owner_read | fs::perms::owner_write,
                    fs::perm_options::replace);
    // slurmd counts a GPU only where gres.conf names a device file, and wants a character device:
    // copies of /dev/null (1,3) stand for /dev/nvidia0..N-1. Where mknod is not allowed (a
    // container without CAP_MKNOD), plain files: slurmd logs "not a valid character or block
    // device" and still counts them.
    for (int i = 0; i < gpus; ++i) {
      const std::string dev = dir_ + "/dev/nvidia" + std::to_string(i);
      if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
        std::ofstream plain(dev);
        if (!plain) return "cannot create " + dev + ": " + std::strerror(errno);
      }
    }
    std::ofstream(dir_ + "/gres.conf")
        << "Name=gpu File=" << dir_ << "/dev/nvidia[0-" << gpus - 1 << "]\n";
    const int ctld_port = free_port(), slurmd_port = free_port();
    std::ofstream(dir_ + "/slurm.conf")
        << "ClusterName=gpudtest\n"
        << "SlurmctldHost=" << short_hostname() << "(127.0.0.1)\n"
        << "SlurmctldPort=" << ctld_port << "\nSlurmdPort=" << slurmd_port << "\n"
        << "AuthType=auth/munge\nCredType=cred/munge\n"
        << "AuthInfo=socket=" << munge_socket() << "\n"
        << "SlurmUser=root\nSlurmdUser=root\n"
        << "StateSaveLocation=" << dir_ << "/state\nSlurmdSpoolDir=" << dir_ << "/spool\n"
        << "SlurmctldPidFile=" << dir_ << "/slurmctld.pid\nSlurmdPidFile=" << dir_
        << "/slurmd.pid\n"
        << "SlurmctldLogFile=" << dir_ << "/log/slurmctld.log\nSlurmdLogFile=" << dir_
        << "/log/slurmd.log\n"
        << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
        << "JobAcctGatherType=jobacct_gather/none\nSelectType=select/cons_tres\nMpiDefault=none\n"
        << "ReturnToService=2\n"
        << "HealthCheckProgram=" << health_check_program << "\n"
        << "HealthCheckInterval=2\nHealthCheckNodeState=ANY\n"
        << "GresTypes=gpu\n"
        << "NodeName=" << kNode << " NodeHostname=" << short_hostname()
        << " NodeAddr=127.0.0.1 CPUs=1 RealMemory=100 Gres=gpu:" << gpus << " State=UNKNOWN\n"
        << "PartitionName=gpu Nodes=" << kNode << " Default=YES State=UP\n";
    return "";
  }

  void start() {
    munged_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{found("munged"), "-F", "--force", "--socket=" + munge_socket(),
                                 "--key-file=" + dir_ + "/munge/munge.key",
                                 "--pid-file=" + dir_ + "/munge/munged.pid",
                                 "--seed-file=" + dir_ + "/munge/seed",
                                 "--log-file=" + dir_ + "/log/munged.log"},
        dir_ + "/log/munged.out");
    eventually([&] { return fs::exists(munge_socket()); }, 10s);
    slurmctld_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{found("slurmctld"), "-D", "-i", "-f", conf()},
        dir_ + "/log/slurmctld.out");
    slurmd_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{found("slurmd"), "-D", "-N", kNode, "-f", conf()},
        dir_ + "/log/slurmd.out");
  }

  CommandResult scontrol(const std::string& args) const {
    return shell("SLURM_CONF=" + conf() + " scontrol " + args);
  }

  SlurmNodeView node() const {
    auto r = shell("SLURM_CONF=" + conf() + " sinfo -h -N -n " + kNode + " -o '%T|%E'");
    std::string line = r.out.substr(0, r.out.find('\n'));
    const size_t bar = line.find('|');
    if (r.exit_code != 0 || bar == std::string::npos) return {};
    return {line.substr(0, bar), line.substr(bar + 1)};
  }

  std::string logs() const {
    std::string all;
    for (const char* f : {"slurmd.log", "slurmctld.log", "munged.log", "slurmd.out",
                          "slurmctld.out"}) {
      std::string text = read_file(dir_ + "/log/" + f);
      if (text.size() > 3000) text = text.substr(text.size() - 3000);
      all += std::string("--- ") + f + "\n" + text;
    }
    return all;
  }

  std::string conf() const { return dir_ + "/slurm.conf"; }

 private:
  std::string munge_socket() const { return dir_ + "/munge/munge.sock"; }

  std::string dir_;
  std::unique_ptr<ChildProcess> munged_, slurmctld_, slurmd_;
};

TEST(SlurmE2E, AGpuFaultDrainsTheNodeAndRecoveryResumesItButNeverAnAdministratorsDrain) {
  for (const char* program : {"munged", "slurmctld", "slurmd", "scontrol", "sinfo"})
    if (found(program).empty())
      GTEST_SKIP() << program << " is not installed (scripts/install-deps.sh test installs it)";
  if (::geteuid() != 0) GTEST_SKIP() << "slurmd runs its HealthCheckProgram as root: run as root";

  TempDirGuard guard{make_temp_dir()};
  const std::string dir = guard.path;
  const std::string data = dir + "/data";
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream touch(kmsg); }
  auto daemon = std::make_unique<DaemonProcess>(
      data,
      std::vector<std::string>{"--nvml-lib", GPUD_FAKE_NVML, "--nvidia-check-interval", "1s",
                               "--components",
                               "accelerator-nvidia-info,accelerator-nvidia-error-xid,cpu"},
      true,
      std::vector<std::string>{"FAKE_NVML_SCENARIO=" + std::string(GPUD_SOURCE_DIR) +
                                   "/testing/fixtures/nvml/h100x8-healthy.json",
                               "GPUD_KMSG_PATH=" + kmsg});
  ASSERT_TRUE(daemon->ready()) << daemon->log();
  nlohmann::json gpus;
  ASSERT_TRUE(eventually(
      [&] {
        auto r = daemon->get("/v1/gpus");
        if (r && r->status == 200) gpus = parse_json(r->body);
        return gpus.is_array() && gpus.size() == 8;
      },
      20s))
      << gpus.dump();
  std::string bus3, bus5;
  for (const auto& g : gpus) {
    if (g.value("index", -1) == 3) bus3 = g.value("pci_bus_id", "");
    if (g.value("index", -1) == 5) bus5 = g.value("pci_bus_id", "");
  }
  ASSERT_FALSE(bus3.empty() || bus5.empty()) << gpus.dump();

  // slurmd runs its HealthCheckProgram without arguments or environment (SLURMD_NODENAME aside):
  // this one gives the shipped wrapper the test's gpud, data dir and Slurm configuration.
  SlurmCluster slurm(dir + "/slurm");
  const std::string program = dir + "/health-check";
  {
    std::ofstream(program) << "#!/bin/sh\nexport SLURM_CONF=" << dir
                           << "/slurm/slurm.conf\nexport GPUD=" << GPUD_BINARY
                           << "\nexport GPUD_SLURM_HEALTH_CHECK_FLAGS='--data-dir " << data
                           << "'\nexec " << GPUD_SOURCE_DIR
                           << "/deploy/slurm/gpud-slurm-health-check >>" << dir
                           << "/health-check.log 2>&1\n";
    fs::permissions(program, fs::perms::owner_all, fs::perm_options::replace);
  }
  const std::string configured = slurm.configure(static_cast<int>(gpus.size()), program);
  ASSERT_EQ(configured, "");
  slurm.start();
  auto history = [&] { return read_file(dir + "/health-check.log") + slurm.logs(); };
  // What the health check logged after `from` bytes of its log.
  auto logged_since = [&](size_t from, const std::string& what) {
    const std::string log = read_file(dir + "/health-check.log");
    return log.size() > from && log.find(what, from) != std::string::npos;
  };

  ASSERT_TRUE(eventually([&] { return slurm.node().state == "idle"; }, 60s))
      << slurm.node().state << " " << slurm.node().reason << "\n" << history();
  EXPECT_NE(slurm.scontrol(std::string("show node ") + kNode).out.find("Gres=gpu:8"),
            std::string::npos);
  // The health check has run and found the node healthy (it says so in its log).
  ASSERT_TRUE(eventually(
      [&] { return read_file(dir + "/health-check.log").find("Healthy") != std::string::npos; },
      20s))
      << history();

  // An Xid 79 on GPU 3 drains the node, with the GPU's index and bus id in the reason.
  { std::ofstream(kmsg, std::ios::app) << xid_kmsg_record(1, bus3, 79); }
  const std::string want_reason = "gpud: GPU 3 " + bus3 + " REBOOT_SYSTEM";
  ASSERT_TRUE(eventually(
      [&] {
        auto n = slurm.node();
        return (n.state == "drained" || n.state == "draining") &&
               n.reason.rfind(want_reason, 0) == 0;
      },
      30s))
      << slurm.node().state << " " << slurm.node().reason << "\n" << history();
  const SlurmNodeView drained = slurm.node();
  EXPECT_NE(drained.reason.find("79"), std::string::npos) << drained.reason;

  // set-healthy: the next health check resumes the node.
  auto ack = run_gpud({"set-healthy", "accelerator-nvidia-error-xid", "--data-dir", data}, 20);
  ASSERT_EQ(ack.exit_code, 0) << ack.out;
  ASSERT_TRUE(eventually([&] { return slurm.node().state == "idle"; }, 30s))
      << slurm.node().state << " " << slurm.node().reason << "\n" << history();

  // An administrator's drain stays as it is, healthy or not: a new fault (Xid 79 on GPU 5) is
  // seen and the drain left alone.
  ASSERT_EQ(slurm.scontrol(std::string("update NodeName=") + kNode +
                           " State=DRAIN Reason='disk replacement'")
                .exit_code,
            0);
  const size_t before_admin = read_file(dir + "/health-check.log").size();
  { std::ofstream(kmsg, std::ios::app) << xid_kmsg_record(2, bus5, 79); }
  ASSERT_TRUE(eventually(
      [&] {
        return logged_since(before_admin, "GPU 5 " + bus5) &&
               logged_since(before_admin, "is already drained for \"disk replacement\"");
      },
      30s))
      << history();
  std::this_thread::sleep_for(5s);  // two more health checks
  EXPECT_EQ(slurm.node().reason, "disk replacement") << history();
  EXPECT_EQ(slurm.node().state, "drained") << history();

  // With no daemon answering, the node is left as it is (here: idle after the administrator's
  // resume), and the health check says so.
  daemon->stop();
  daemon.reset();
  ASSERT_EQ(slurm.scontrol(std::string("update NodeName=") + kNode + " State=RESUME").exit_code, 0);
  const size_t before_stop = read_file(dir + "/health-check.log").size();
  ASSERT_TRUE(eventually([&] { return logged_since(before_stop, "not reachable"); }, 30s))
      << history();
  EXPECT_TRUE(logged_since(before_stop, "left as it is")) << history();
  std::this_thread::sleep_for(5s);
  EXPECT_EQ(slurm.node().state, "idle") << slurm.node().reason << "\n" << history();
}

}  // namespace
}  // namespace gpud::e2e
