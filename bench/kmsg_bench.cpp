// Throughput of the saved-log path: read_saved_log + every component's kernel-log rules over a
// generated dmesg buffer with one matching line in 10,000.
#include <benchmark/benchmark.h>

#include <sstream>
#include <string>

#include "components/registry.h"
#include "kmsg/reader.h"
#include "kmsg/rules.h"

namespace {

std::string make_log(size_t lines) {
  static const char* kNoise[] = {
      "usb 1-1: new high-speed USB device number 2 using xhci_hcd",
      "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Opts: (null)",
      "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
      "audit: type=1400 audit(1700000000.123:45): apparmor=\"STATUSKIND\" "
      "operation=\"profile_load\"",
  };
  std::string s;
  s.reserve(lines * 90);
  for (size_t i = 0; i < lines; ++i) {
    s += "[" + std::to_string(100000 + i) + ".123456] ";
    s += i % 10000 == 5000
             ? "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has "
               "fallen off the bus."
             : kNoise[i % 4];
    s += '\n';
  }
  return s;
}

void BM_SavedLogMatch(benchmark::State& state) {
  const std::string log = make_log(200000);
  size_t matches = 0;
  for (auto _ : state) {
    std::istringstream in(log);
    gpud::kmsg::RuleMatcher m(gpud::components::all_kernel_log_rules());
    auto r = gpud::kmsg::read_saved_log(
        in, [&](const gpud::kmsg::KmsgRecordView& v) { matches += m.feed(v.message).size(); });
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * log.size()));
  state.counters["matches"] = static_cast<double>(matches);
}
BENCHMARK(BM_SavedLogMatch)->Unit(benchmark::kMillisecond);

}  // namespace
