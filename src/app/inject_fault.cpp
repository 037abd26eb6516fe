// `gpud inject-fault`: writes the kernel's own line for a fault (Xid, SXid, any message) into
// /dev/kmsg, so the daemon's kernel-log pipeline sees it end to end.
#include <iostream>
#include <memory>

#include "app/options.h"
#include "app/verbs.h"
#include "kmsg/fault.h"
#include "kmsg/reader.h"

namespace gpud::app {

void add_inject_fault(CLI::App& app, int* exit_code) {
  struct Flags {
    int xid = 0;
    int sxid = 0;
    std::string pci = "0000:00:00.0";
    std::string message;
    std::string level = "KERN_ERR";
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "inject-fault", "Write a fault's kernel-log line into /dev/kmsg (needs root; for testing)");
  cmd->add_option("--xid", f->xid, "Xid code to inject, e.g. 79")->check(CLI::PositiveNumber);
  cmd->add_option("--sxid", f->sxid, "SXid code to inject, e.g. 20034")->check(CLI::PositiveNumber);
  cmd->add_option("--pci", f->pci, "PCI bus id of the GPU or NVSwitch")->capture_default_str();
  cmd->add_option("--kernel-message", f->message, "Any kernel-log line to write");
  cmd->add_option("--kernel-log-level", f->level,
                  "KERN_EMERG..KERN_DEBUG (also err, kern.err, 0-7)")
      ->capture_default_str();
  cmd->callback([f, exit_code] {
    kmsg::FaultRequest req;
    req.pci = f->pci;
    auto level = kmsg::parse_kernel_log_level(f->level);
    if (!level) {
      std::cerr << "✘ invalid --kernel-log-level \"" << f->level
                << "\": want KERN_EMERG..KERN_DEBUG\n";
      *exit_code = kExitUsage;
      return;
    }
    req.level = *level;
    const int given = (f->xid > 0) + (f->sxid > 0) + !f->message.empty();
    if (given != 1) {
      std::cerr << "✘ give exactly one of --xid, --sxid or --kernel-message\n";
      *exit_code = kExitUsage;
      return;
    }
    if (f->xid > 0) req.xid = f->xid;
    if (f->sxid > 0) req.sxid = f->sxid;
    req.kernel_message = f->message;
    const std::string path = kmsg_path_from_environment();
    auto r = kmsg::inject_fault(req, path);
    if (!r) {
      std::cerr << "✘ cannot inject the fault: " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    std::cout << "✔ fault injected into " << path << ": " << *r << "\n";
    *exit_code = kExitOk;
  });
}

}  // namespace gpud::app
