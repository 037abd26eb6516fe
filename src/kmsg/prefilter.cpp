#include "kmsg/prefilter.h"

#include <algorithm>
#include <cstring>

namespace gpud::kmsg {

namespace {

uint32_t load(const char* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

uint16_t hash(uint32_t w) { return static_cast<uint16_t>((w * 2654435761u) >> 16); }

}  // namespace

Prefilter::Prefilter(const std::vector<Literal>& literals) {
  std::vector<size_t> anchors;
  for (const Literal& l : literals) {
    if (std::find(keywords_.begin(), keywords_.end(), l.text) != keywords_.end()) continue;
    keywords_.emplace_back(l.text);
    anchors.push_back(l.anchor.empty() ? 0 : l.text.find(l.anchor));
  }
  min_len_ = SIZE_MAX;
  for (const std::string& k : keywords_) min_len_ = std::min(min_len_, k.size());
  // No keywords: nothing can match. A keyword under 4 bytes has no window: every text may match.
  if (keywords_.empty()) return;
  if (min_len_ < 4) {
    pass_all_ = true;
    return;
  }
  std::vector<std::pair<uint16_t, Candidate>> by_hash;
  for (size_t ki = 0; ki < keywords_.size(); ++ki) {
    const std::string& k = keywords_[ki];
    size_t anchor = anchors[ki] == std::string::npos ? 0 : anchors[ki];
    // An anchor too near the end keeps its window inside the keyword.
    anchor = std::min(anchor, k.size() - min_len_);
    Candidate c{static_cast<uint32_t>(ki), 0, 0, 0};
    const size_t head_len = std::min<size_t>(k.size(), 8);
    std::memcpy(&c.head, k.data(), head_len);
    c.head_mask = head_len == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * head_len)) - 1;
    for (size_t off = anchor; off + 4 <= anchor + min_len_; ++off) {
      const uint16_t h = hash(load(k.data() + off));
      bloom_.set(h);
      c.offset = static_cast<uint32_t>(off);
      by_hash.emplace_back(h, c);
    }
  }
  std::stable_sort(by_hash.begin(), by_hash.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t distinct = 0;
  for (size_t i = 0; i < by_hash.size(); ++i)
    if (i == 0 || by_hash[i].first != by_hash[i - 1].first) ++distinct;
  // A quarter full at most: a probe ends at the first empty slot, soon.
  size_t table = 16;
  while (table < distinct * 4) table *= 2;
  if (by_hash.size() > UINT16_MAX || table > 65536) {  // far beyond any rule set: no sampling
    pass_all_ = true;
    return;
  }
  slots_.assign(table, Slot{0, 0, 0});
  for (size_t i = 0; i < by_hash.size();) {
    size_t j = i;
    while (j < by_hash.size() && by_hash[j].first == by_hash[i].first) ++j;
    size_t at = by_hash[i].first & (table - 1);
    while (slots_[at].count != 0) at = (at + 1) & (table - 1);
    slots_[at] = {by_hash[i].first, static_cast<uint16_t>(candidates_.size()),
                  static_cast<uint16_t>(j - i)};
    for (size_t x = i; x < j; ++x) candidates_.push_back(by_hash[x].second);
    i = j;
  }
  step_ = min_len_ - 3;
}

// A window hit at i: compares, in place, only the keywords that have this window at that offset,
// their first 8 bytes first. Ordinary lines share many a 4-byte window with some keyword ("PCIe",
// "file", " of "): this runs for a good part of the lines.
size_t Prefilter::verify(const char* p, size_t n, size_t i, uint16_t h) const {
  const size_t mask = slots_.size() - 1;
  size_t at = h & mask;
  while (slots_[at].count != 0 && slots_[at].hash != h) at = (at + 1) & mask;
  const Slot& slot = slots_[at];
  for (size_t x = slot.first; x < size_t{slot.first} + slot.count; ++x) {
    const Candidate& c = candidates_[x];
    if (i < c.offset) continue;
    const size_t start = i - c.offset;
    const std::string& k = keywords_[c.keyword];
    if (n - start < k.size()) continue;
    uint64_t head = 0;
    if (k.size() >= 8) {
      std::memcpy(&head, p + start, 8);
    } else {
      std::memcpy(&head, p + start, k.size());
    }
    if ((head & c.head_mask) != c.head) continue;
    if (k.size() <= 8 || std::memcmp(p + start + 8, k.data() + 8, k.size() - 8) == 0) return start;
  }
  return std::string_view::npos;
}

// Any occurrence of a keyword covers its anchor's min_len_ bytes, so one of the 4-byte windows
// sampled every step_ bytes lies inside them, at a known offset in the keyword; that window lies in
// the occurrence's line, and windows are tried in order, so the first verified hit is in the first
// line that holds a keyword.
size_t Prefilter::find(std::string_view text, size_t from, size_t to) const {
  if (pass_all_) return from <= text.size() && from < to ? from : std::string_view::npos;
  const size_t n = text.size();
  if (keywords_.empty() || n < min_len_ || from + 4 > n) return std::string_view::npos;
  const char* p = text.data();
  const size_t step = step_;
  // Windows at [from, stop): the last one starts at n - 4 at most.
  const size_t stop = std::min(to, n - 3);
  size_t i = from;
  // Four windows a round: the bloom tests are independent loads, which overlap.
  while (i + 3 * step < stop) {
    const uint16_t h0 = hash(load(p + i));
    const uint16_t h1 = hash(load(p + i + step));
    const uint16_t h2 = hash(load(p + i + 2 * step));
    const uint16_t h3 = hash(load(p + i + 3 * step));
    if (bloom_.test(h0) | bloom_.test(h1) | bloom_.test(h2) | bloom_.test(h3)) {
      for (size_t k = 0; k < 4; ++k, i += step) {
        const uint16_t h = hash(load(p + i));
        if (!bloom_.test(h)) continue;
        if (size_t s = verify(p, n, i, h); s != std::string_view::npos) return s;
      }
      continue;
    }
    i += 4 * step;
  }
  for (; i < stop; i += step) {
    const uint16_t h = hash(load(p + i));
    if (!bloom_.test(h)) continue;
    if (size_t s = verify(p, n, i, h); s != std::string_view::npos) return s;
  }
  return std::string_view::npos;
}

}  // namespace gpud::kmsg
