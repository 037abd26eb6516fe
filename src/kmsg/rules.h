// Kernel-log rules: what a component declares to learn from the kernel log, and the matcher that
// runs every declared rule over one stream of messages. The kernel log names no component: each
// component that learns from it declares its rules where it lives (src/components/...), the
// registry collects them, and the prefilter's keywords are the rules' literals.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/health.h"
#include "core/metrics.h"
#include "kmsg/prefilter.h"

namespace gpud::kmsg {

// What a rule makes of a line: an event without its time.
struct Match {
  std::string component;  // the rule's owner; filled in by the matcher
  std::string name;       // GPUd event name, e.g. "error_xid"
  EventType type = EventType::kWarning;
  std::string message;  // human-readable, valid UTF-8
  nlohmann::json extra_info = nlohmann::json::object();
  // The line is the companion of another that reports the same fault (a lost GPU's "fallen off
  // the bus" next to its Xid 79 line): a post-mortem counts the two as one occurrence.
  bool companion = false;
};

// A single-line rule: `match` sees only lines that contain one of `literals`.
struct LineRule {
  std::vector<Literal> literals;
  std::function<std::optional<Match>(std::string_view line)> match;
};

// The state of a multi-line rule over one stream (an OOM report, a panic and its CPU line).
class LineSequence {
 public:
  virtual ~LineSequence() = default;
  // Every line while pending(); otherwise only lines with one of the rule's literals.
  virtual std::optional<Match> feed(std::string_view line) = 0;
  virtual bool pending() const = 0;
};

struct SequenceRule {
  std::vector<Literal> literals;  // what the line that opens a sequence contains
  std::function<std::unique_ptr<LineSequence>()> make;
};

// What the node knows of a PCI bus id named by a kernel-log line.
struct BusIdentity {
  bool known = false;  // one of this node's NVIDIA devices (NVML or sysfs lists it)
  std::string uuid;    // the GPU's UUID, when NVML has it
};

// The label a bus id gets on per-GPU counters: only the node's own devices get their own series,
// so crafted lines naming random bus ids cannot grow /metrics without bound.
inline constexpr std::string_view kUnknownBusLabel = "unknown";

// One event the event pipeline stored, as its owner's counters see it.
struct StoredMatch {
  const Match& match;
  std::string_view uuid;       // "" when unknown
  std::string_view bus_label;  // the bus id, or kUnknownBusLabel
};

// When the line that made a match was logged, as far as it says, and when it was read.
struct MatchTime {
  std::optional<TimePoint> wall;
  std::optional<int64_t> boot_offset_us;  // since this boot, for /dev/kmsg records
  TimePoint now;
};

// Everything one component learns from the kernel log.
struct ComponentRules {
  std::string component;
  std::vector<LineRule> lines;
  std::vector<SequenceRule> sequences;
  // Optional: describes the metrics the component keeps for its kernel-log events (once, when
  // the pipeline is built) and counts one stored event into them.
  std::function<void(MetricRegistry&)> describe_metrics;
  std::function<void(MetricRegistry&, const StoredMatch&)> count;
  // Optional: adds what the node knows while the line is read (the container of an Xid's pid) to
  // a match about to be stored (not to repeats). It and count run after the pipeline unlocks.
  std::function<void(Match&, const MatchTime&)> annotate;
};

// The usual single-line rule: a line with one of `literals` that matches the RE2 `pattern` is an
// event `name` (type warning). Group 1 of the pattern, when it has one, replaces "{}" in
// `message` and is kept in extra_info[group_key]; extra_info["log_line"] is the line.
LineRule pattern_rule(std::vector<Literal> literals, std::string name, std::string_view pattern,
                      std::string message, std::string group_key = "");

// What `gpud inject-fault` and POST /inject-fault put at the end of every line they write, so an
// injected fault is never taken for a real one. The matcher runs the rules on the line without it
// and marks each event the line makes: extra_info["injected"] = true and " (injected)" after the
// message (which every component's reason shows). No kernel or driver prints it.
inline constexpr std::string_view kInjectedMarker = " [gpud inject-fault]";
// Whether the matcher marked `extra_info` (a Match's, or the Event's made from it) injected.
inline bool marked_injected(const nlohmann::json& extra_info) {
  auto it = extra_info.find("injected");
  return it != extra_info.end() && it->is_boolean() && it->get<bool>();
}

// The start of a message, for a rule about a line its driver prints: "^" and what may come
// before the driver's own text, which is only the caller id ("[  T1234] ", "[    C3] ") that a
// kernel built with CONFIG_PRINTK_CALLER puts there in dmesg's text (a /dev/kmsg record keeps it
// in its header). A rule that starts its pattern with this matches only a message the driver
// began, never its text quoted inside another one (the kernel's "process '<path>' started with
// executable stack" prints a path any user chooses).
inline constexpr std::string_view kMessageStart = R"(^(?:\[ *[TC]\d+\] )?)";

// "s contains needle".
inline bool contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

// The first 1 KiB of a line, valid UTF-8: what events keep of the line they came from.
std::string log_line_excerpt(std::string_view line);

// Runs a set of components' rules over one stream of messages, in order. Not thread-safe: one per
// stream.
class RuleMatcher {
 public:
  explicit RuleMatcher(std::vector<ComponentRules> rules);
  ~RuleMatcher();
  RuleMatcher(RuleMatcher&&) noexcept;
  RuleMatcher& operator=(RuleMatcher&&) noexcept;

  // The events this message makes (most make none).
  std::vector<Match> feed(std::string_view message);
  // A multi-line sequence is open: the next messages must be fed whatever they contain.
  bool pending() const;
  // False when no rule can use this text (a message or a raw line holding one): no false
  // negatives. Cheap: a sampled 4-byte window lookup, then compares on hits only.
  bool may_match(std::string_view text) const;
  // The prefilter's keywords: every rule's literals.
  std::vector<std::string> keywords() const;
  // Every rule's literals, anchors and all: what a reader builds its own prefilter from.
  const std::vector<Literal>& literals() const { return literals_; }
  const std::vector<ComponentRules>& rules() const { return rules_; }
  // Starts every sequence afresh.
  void reset();

 private:
  std::vector<ComponentRules> rules_;
  std::vector<Literal> literals_;
  std::unique_ptr<Prefilter> prefilter_;
  struct Open {
    size_t owner;  // index into rules_
    std::vector<Literal> literals;
    std::unique_ptr<LineSequence> state;
  };
  std::vector<Open> sequences_;
};

}  // namespace gpud::kmsg
