// For tests: runs components' kernel-log rules over lines as the event pipeline does.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string_view>
#include <vector>

#include "kmsg/rules.h"

namespace gpud::components {

// Every match the lines make, in order, through one matcher (multi-line rules see them all).
inline std::vector<kmsg::Match> match_lines(kmsg::ComponentRules rules,
                                            std::initializer_list<std::string_view> lines) {
  std::vector<kmsg::ComponentRules> all;
  all.push_back(std::move(rules));
  kmsg::RuleMatcher m(std::move(all));
  std::vector<kmsg::Match> out;
  for (std::string_view l : lines) {
    auto v = m.feed(l);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// The one match a line makes; a test failure (and an empty match) when it makes none or several.
inline kmsg::Match match_one(kmsg::ComponentRules rules, std::string_view line) {
  auto v = match_lines(std::move(rules), {line});
  EXPECT_EQ(v.size(), 1u) << line;
  return v.size() == 1 ? v.front() : kmsg::Match{};
}

}  // namespace gpud::components
