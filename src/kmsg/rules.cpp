#include "kmsg/rules.h"

#include <re2/re2.h>

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "kmsg/parser.h"

namespace gpud::kmsg {

// Every keyword (a rule's literal) is sampled through min_len bytes of it (min_len = the shortest
// keyword), starting at its anchor when the rule named one: a window hit on a common word costs a
// compare per line. The longer the shortest keyword, the fewer 4-byte windows are sampled (one
// every min_len - 3 bytes), so a rule's literal should be the longest text its pattern requires.
class RuleMatcher::Prefilter {
 public:
  explicit Prefilter(const std::vector<Literal>& literals) {
    for (const Literal& l : literals) {
      if (std::find(keywords_.begin(), keywords_.end(), l.text) != keywords_.end()) continue;
      keywords_.emplace_back(l.text);
      anchors_.push_back(l.anchor.empty() ? 0 : l.text.find(l.anchor));
    }
    min_len_ = SIZE_MAX;
    for (const std::string& k : keywords_) min_len_ = std::min(min_len_, k.size());
    // No rules: nothing can match. A literal under 4 bytes has no window: every text may match.
    if (keywords_.empty()) return;
    if (min_len_ < 4) {
      pass_all_ = true;
      return;
    }
    for (size_t ki = 0; ki < keywords_.size(); ++ki) {
      const std::string& k = keywords_[ki];
      size_t anchor = anchors_[ki] == std::string::npos ? 0 : anchors_[ki];
      // An anchor too near the end keeps its window inside the keyword.
      anchor = std::min(anchor, k.size() - min_len_);
      for (size_t off = anchor; off + 4 <= anchor + min_len_; ++off) {
        const uint16_t h = hash(load(k.data() + off));
        bloom_.set(h);
        candidates_.push_back({h, static_cast<uint32_t>(ki), static_cast<uint32_t>(off)});
      }
    }
    std::sort(candidates_.begin(), candidates_.end(),
              [](const Candidate& a, const Candidate& b) { return a.hash < b.hash; });
    step_ = min_len_ - 3;
  }

  // Any occurrence of a keyword covers its anchor's min_len_ bytes, so one of the 4-byte windows
  // sampled every step_ bytes lies inside them, at a known offset in the keyword: a window hit is
  // verified by comparing only the keywords that have that window, in place (no search).
  bool may_match(std::string_view s) const {
    if (pass_all_) return true;
    if (keywords_.empty() || s.size() < min_len_) return false;
    const char* p = s.data();
    const size_t n = s.size();
    for (size_t i = 0; i + 4 <= n; i += step_) {
      const uint16_t h = hash(load(p + i));
      if (!bloom_.test(h)) continue;
      // Bloom hits are rare (a few hundred bits set of 65536): a binary search is enough.
      auto it = std::lower_bound(candidates_.begin(), candidates_.end(), h,
                                 [](const Candidate& c, uint16_t v) { return c.hash < v; });
      for (; it != candidates_.end() && it->hash == h; ++it) {
        if (i < it->offset) continue;
        const std::string& k = keywords_[it->keyword];
        const size_t start = i - it->offset;
        if (n - start >= k.size() && std::memcmp(p + start, k.data(), k.size()) == 0) return true;
      }
    }
    return false;
  }

  const std::vector<std::string>& keywords() const { return keywords_; }

 private:
  struct Candidate {
    uint16_t hash;
    uint32_t keyword;
    uint32_t offset;
  };
  static uint32_t load(const char* p) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    return w;
  }
  static uint16_t hash(uint32_t w) { return static_cast<uint16_t>((w * 2654435761u) >> 16); }

  std::vector<std::string> keywords_;
  std::vector<size_t> anchors_;
  std::bitset<65536> bloom_;           // 8 KiB
  std::vector<Candidate> candidates_;  // sorted by window hash (a table per hash value was 1.5 MiB)
  size_t min_len_ = 0;
  size_t step_ = 1;
  bool pass_all_ = false;
};

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
    : rules_(std::move(rules)), prefilter_(std::make_unique<Prefilter>(all_literals(rules_))) {
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
