// Any bytes as a stream of kernel-log lines: each parsed in every format gpud reads, through every
// component's kernel-log rule (multi-line ones see the sequence), into the event pipeline with its
// deduper and per-GPU occurrences. Every event must serialise (valid UTF-8 JSON), as the store
// requires. Its seeds (scripts/fuzz.sh) are every file of testing/fixtures/kmsg/, formats.txt among
// them: each rule's own lines, so a new rule is fuzzed from its lines by construction (the MLX5
// health, command, probe, TX-timeout and port-module lines, ext4 errors, unregister_netdevice and
// NETDEV WATCHDOG among them), and prefix-forms.log: one line in each syslog and journal form
// (RFC 3164 and 5424, host-less, dmesg -H, journalctl json, other locales' months, Talos).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "components/registry.h"
#include "core/metrics.h"
#include "kmsg/event_pipeline.h"
#include "kmsg/parser.h"
#include "testing/memory_event_log.h"

using namespace gpud;  // NOLINT(google-build-using-namespace)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto rules = components::all_kernel_log_rules();
  testing_support::MemoryEventLog events;
  MetricRegistry metrics;
  kmsg::EventPipeline pipeline(rules, events, metrics, {});
  pipeline.keep_occurrences();
  kmsg::ParseOptions opts;
  opts.boot_time = from_unix_seconds(1'790'000'000);
  opts.now = from_unix_seconds(1'795'000'000);
  const TimePoint now = *opts.now;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  while (!input.empty()) {
    const size_t nl = input.find('\n');
    const std::string_view line = input.substr(0, nl);
    input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
    if (auto v = kmsg::parse_line_view(line, opts)) pipeline.feed(kmsg::to_record(*v), now);
  }
  (void)pipeline.occurrences();
  auto stored = events.query("", TimePoint::min(), TimePoint::max());
  if (stored)
    for (const Event& e : *stored) (void)e.extra_info.dump();
  return 0;
}
