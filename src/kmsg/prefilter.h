// The kernel-log prefilter: says, cheaply and with no false negatives, where a text may hold one of
// a set of keywords (the rules' literals), so that the lines none of them can be in are never
// parsed or matched. It runs on one line (the follower) or on many at once (a saved log).
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpud::kmsg {

// A text that every line a rule matches contains (at least 4 bytes). `anchor`, optional, is the
// part of it that ordinary log lines rarely contain ("panic" of "Kernel panic", which every "NVIDIA
// Kernel Mode Setting" line shares the start of): the prefilter samples the literal there.
struct Literal {
  std::string_view text;
  std::string_view anchor = {};
};

// Every keyword is sampled through min_len bytes of it (min_len = the shortest keyword), starting
// at its anchor when it has one: a window hit on a common word costs a compare. The longer the
// shortest keyword, the fewer 4-byte windows are sampled (one every min_len - 3 bytes), so a rule's
// literal should be the longest text its pattern requires. Immutable once built: one prefilter may
// serve several threads.
class Prefilter {
 public:
  explicit Prefilter(const std::vector<Literal>& literals);

  // The start of a keyword's occurrence in `text` found by sampling its 4-byte windows every
  // step from `from` while before `to` (the occurrence may begin before `from` and end after `to`,
  // within `text`); npos when none is found. No false negatives, and in order: an occurrence is
  // found when a sample lands in it, so a caller that walks a text in ranges, each `from` the last
  // `to` (or, after a hit, the start of the next line), misses none, and the first hit lies in the
  // first line that holds a keyword. A prefilter with a keyword under 4 bytes cannot sample: it
  // answers `from` (while before `to`, in the text).
  size_t find(std::string_view text, size_t from = 0, size_t to = std::string_view::npos) const;
  bool may_match(std::string_view text) const { return find(text) != std::string_view::npos; }

  const std::vector<std::string>& keywords() const { return keywords_; }

 private:
  // A keyword that has a sampled window at `offset`, with its first 8 bytes (fewer: masked) for a
  // compare in place before memcmp.
  struct Candidate {
    uint32_t keyword;
    uint32_t offset;
    uint64_t head;
    uint64_t head_mask;
  };
  // The candidates of one window hash: candidates_[first, first + count).
  struct Slot {
    uint16_t hash;
    uint16_t first;
    uint16_t count;
  };
  size_t verify(const char* p, size_t n, size_t i, uint16_t h) const;

  std::vector<std::string> keywords_;
  std::bitset<65536> bloom_;           // 8 KiB
  std::vector<Candidate> candidates_;  // grouped by window hash
  std::vector<Slot> slots_;            // open addressing by hash (a table per hash was 1.5 MiB)
  size_t min_len_ = 0;
  size_t step_ = 1;
  bool pass_all_ = false;
};

}  // namespace gpud::kmsg
