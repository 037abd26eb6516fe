#include "kmsg/rules.h"

#include <gtest/gtest.h>

namespace gpud::kmsg {
namespace {

// "open <n>" opens a sequence that closes on the next line holding "close", making one event.
class OpenClose : public LineSequence {
 public:
  std::optional<Match> feed(std::string_view line) override {
    if (contains(line, "open ")) {
      open_ = true;
      return std::nullopt;
    }
    if (!open_ || !contains(line, "close")) return std::nullopt;
    open_ = false;
    Match m;
    m.name = "closed";
    return m;
  }
  bool pending() const override { return open_; }

 private:
  bool open_ = false;
};

std::vector<ComponentRules> rules() {
  ComponentRules a;
  a.component = "alpha";
  a.lines.push_back(pattern_rule({{"Kernel panic", "panic"}}, "panic", R"(Kernel panic - (\w+))",
                                 "panic: {}", "why"));
  a.lines.push_back(pattern_rule({{"reset controller"}}, "reset", R"(reset controller)", "reset"));
  ComponentRules b;
  b.component = "beta";
  b.sequences.push_back({{{"open sequence"}}, [] { return std::make_unique<OpenClose>(); }});
  return {a, b};
}

TEST(PatternRule, GroupGoesIntoTheMessageAndExtraInfo) {
  RuleMatcher m(rules());
  auto v = m.feed("Kernel panic - fatal exception");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].component, "alpha");
  EXPECT_EQ(v[0].name, "panic");
  EXPECT_EQ(v[0].type, EventType::kWarning);
  EXPECT_EQ(v[0].message, "panic: fatal");
  EXPECT_EQ(v[0].extra_info["why"], "fatal");
  EXPECT_EQ(v[0].extra_info["log_line"], "Kernel panic - fatal exception");
  // The literal alone is not the rule: the pattern decides.
  EXPECT_TRUE(m.feed("Kernel panic").empty());
}

TEST(PatternRule, InvalidUtf8AndLongLinesAreKeptValidAndShort) {
  RuleMatcher m(rules());
  std::string line = "Kernel panic - x\xff\xfe ";
  line += std::string(5000, 'y');
  auto v = m.feed(line);
  ASSERT_EQ(v.size(), 1u);
  const std::string kept = v[0].extra_info["log_line"];
  EXPECT_LE(kept.size(), 1024u * 3);
  EXPECT_NO_THROW((void)v[0].extra_info.dump());
}

TEST(RuleMatcher, SequenceSeesEveryLineWhileOpen) {
  RuleMatcher m(rules());
  EXPECT_FALSE(m.pending());
  EXPECT_TRUE(m.feed("open sequence 1").empty());
  EXPECT_TRUE(m.pending());
  // No rule literal in this line: the prefilter alone would drop it, the open sequence gets it.
  EXPECT_FALSE(m.may_match("now close it"));
  auto v = m.feed("now close it");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].component, "beta");
  EXPECT_EQ(v[0].name, "closed");
  EXPECT_FALSE(m.pending());
  // Closed: a lone "close" makes nothing.
  EXPECT_TRUE(m.feed("close").empty());
  m.feed("open sequence 2");
  m.reset();
  EXPECT_FALSE(m.pending());
}

TEST(RuleMatcher, InjectedLineMatchesAndItsEventIsMarked) {
  RuleMatcher m(rules());
  auto v = m.feed(std::string("Kernel panic - oops") + std::string(kInjectedMarker));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].name, "panic");
  EXPECT_EQ(v[0].message, "panic: oops (injected)");
  EXPECT_EQ(v[0].extra_info["injected"], true);
  EXPECT_EQ(v[0].extra_info["why"], "oops") << "the marker is not part of the line the rule sees";
  v = m.feed("Kernel panic - oops");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].message, "panic: oops");
  EXPECT_FALSE(v[0].extra_info.contains("injected"));
  // Only a marker at the end counts.
  v = m.feed(std::string("Kernel panic - oops") + std::string(kInjectedMarker) + " later");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_FALSE(v[0].extra_info.contains("injected"));
}

TEST(RuleMatcher, KeywordsAreTheRulesLiterals) {
  RuleMatcher m(rules());
  auto k = m.keywords();
  std::sort(k.begin(), k.end());
  EXPECT_EQ(k, (std::vector<std::string>{"Kernel panic", "open sequence", "reset controller"}));
}

TEST(Prefilter, FindsEveryLiteralAtEveryAlignmentAndRejectsTheRest) {
  RuleMatcher m(rules());
  for (const std::string& k : m.keywords())
    for (size_t pad = 0; pad < 16; ++pad) {
      EXPECT_TRUE(m.may_match(std::string(pad, 'x') + k)) << k << " " << pad;
      EXPECT_TRUE(m.may_match(std::string(pad, 'x') + k + " tail")) << k << " " << pad;
    }
  EXPECT_FALSE(m.may_match(""));
  EXPECT_FALSE(m.may_match("usb 1-1: new high-speed USB device number 2 using xhci_hcd"));
  // Sharing a word with a literal is not enough, whichever part the anchor samples.
  EXPECT_FALSE(m.may_match("nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver"));
  EXPECT_FALSE(m.may_match("a panic of sorts, reset of the controller"));
}

TEST(Prefilter, NoRulesMatchNothingAndShortLiteralsPassEverything) {
  RuleMatcher none({});
  EXPECT_FALSE(none.may_match("Kernel panic"));
  EXPECT_TRUE(none.feed("Kernel panic - x").empty());
  ComponentRules tiny;
  tiny.component = "tiny";
  tiny.lines.push_back(pattern_rule({{"ab"}}, "ab", "ab", "ab"));
  RuleMatcher short_literal({tiny});
  EXPECT_TRUE(short_literal.may_match("xyz"));
  EXPECT_EQ(short_literal.feed("xxabxx").size(), 1u);
}

}  // namespace
}  // namespace gpud::kmsg
