#include "kmsg/rules.h"

#include <re2/re2.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "kmsg/parser.h"

namespace gpud::kmsg {

namespace {

bool has_any(std::string_view s, const std::vector<Literal>& literals) {
  return std::any_of(literals.begin(), literals.end(),
                     [&](const Literal& l) { return contains(s, l.text); });
}

std::vector<Literal> all_literals(const std::vector<ComponentRules>& rules) {
  std::vector<Literal> out;
  for (const ComponentRules& c : rules) {
    for (const LineRule& r : c.lines) out.insert(out.end(), r.literals.begin(), r.literals.end());
    for (const SequenceRule& r : c.sequences)
      out.insert(out.end(), r.literals.begin(), r.literals.end());
  }
  return out;
}

}  // namespace

std::string log_line_excerpt(std::string_view line) { return sanitize_utf8(line.substr(0, 1024)); }

namespace {

// A pattern compiled on its first use: most rules never see a line past the prefilter, and a
// compiled RE2 costs the idle daemon resident memory.
class LazyPattern {
 public:
  explicit LazyPattern(std::string_view pattern) : pattern_(pattern) {}
  const RE2& get() const {
    std::call_once(once_, [this] { re_ = std::make_unique<RE2>(pattern_); });
    return *re_;
  }

 private:
  std::string pattern_;
  mutable std::once_flag once_;
  mutable std::unique_ptr<RE2> re_;
};

}  // namespace

LineRule pattern_rule(std::vector<Literal> literals, std::string name, std::string_view pattern,
                      std::string message, std::string group_key) {
  auto lazy = std::make_shared<const LazyPattern>(pattern);
  LineRule rule;
  rule.literals = std::move(literals);
  rule.match = [lazy, name = std::move(name), message = std::move(message),
                group_key = std::move(group_key)](std::string_view line) -> std::optional<Match> {
    const RE2& re = lazy->get();
    const re2::StringPiece in(line.data(), line.size());
    std::string g;
    const bool ok = re.NumberOfCapturingGroups() > 0 ? RE2::PartialMatch(in, re, &g)
                                                     : RE2::PartialMatch(in, re);
    if (!ok) return std::nullopt;
    Match m;
    m.name = name;
    m.message = message;
    if (auto p = m.message.find("{}"); p != std::string::npos) m.message.replace(p, 2, g);
    m.message = sanitize_utf8(m.message);
    m.extra_info = {{"log_line", log_line_excerpt(line)}};
    if (!group_key.empty() && !g.empty()) m.extra_info[group_key] = sanitize_utf8(g);
    return m;
  };
  return rule;
}

RuleMatcher::RuleMatcher(std::vector<ComponentRules> rules)
    : rules_(std::move(rules)),
      literals_(all_literals(rules_)),
      prefilter_(std::make_unique<Prefilter>(literals_)) {
  reset();
}

RuleMatcher::~RuleMatcher() = default;
RuleMatcher::RuleMatcher(RuleMatcher&&) noexcept = default;
RuleMatcher& RuleMatcher::operator=(RuleMatcher&&) noexcept = default;

void RuleMatcher::reset() {
  sequences_.clear();
  for (size_t i = 0; i < rules_.size(); ++i)
    for (const SequenceRule& r : rules_[i].sequences)
      sequences_.push_back({i, r.literals, r.make()});
}

bool RuleMatcher::pending() const {
  return std::any_of(sequences_.begin(), sequences_.end(),
                     [](const Open& o) { return o.state->pending(); });
}

bool RuleMatcher::may_match(std::string_view text) const { return prefilter_->may_match(text); }

std::vector<std::string> RuleMatcher::keywords() const { return prefilter_->keywords(); }

std::vector<Match> RuleMatcher::feed(std::string_view s) {
  std::vector<Match> out;
  const bool injected = s.ends_with(kInjectedMarker);
  if (injected) s.remove_suffix(kInjectedMarker.size());
  const bool open = pending();
  const bool hit = prefilter_->may_match(s);
  if (!open && !hit) return out;
  auto take = [&](std::optional<Match> m, size_t owner) {
    if (!m) return;
    m->component = rules_[owner].component;
    if (injected) {
      m->extra_info["injected"] = true;
      m->message += " (injected)";
    }
    out.push_back(std::move(*m));
  };
  for (Open& o : sequences_)
    if (o.state->pending() || (hit && has_any(s, o.literals))) take(o.state->feed(s), o.owner);
  if (!hit) return out;
  for (size_t i = 0; i < rules_.size(); ++i)
    for (const LineRule& r : rules_[i].lines)
      if (has_any(s, r.literals)) take(r.match(s), i);
  return out;
}

}  // namespace gpud::kmsg
