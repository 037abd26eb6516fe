#include "host/mountinfo.h"

#include <algorithm>
#include <charconv>

namespace gpud::host {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

// Next whitespace-separated token of line starting at pos; empty at the end.
std::string_view next_token(std::string_view line, size_t& pos) {
  while (pos < line.size() && is_space(line[pos])) ++pos;
  size_t start = pos;
  while (pos < line.size() && !is_space(line[pos])) ++pos;
  return line.substr(start, pos - start);
}

template <typename T>
bool parse_num(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_line(std::string_view line, MountInfo& m) {
  size_t pos = 0;
  if (!parse_num(next_token(line, pos), m.mount_id)) return false;
  if (!parse_num(next_token(line, pos), m.parent_id)) return false;
  std::string_view dev = next_token(line, pos);
  auto colon = dev.find(':');
  if (colon == std::string_view::npos || !parse_num(dev.substr(0, colon), m.major) ||
      !parse_num(dev.substr(colon + 1), m.minor))
    return false;
  std::string_view root = next_token(line, pos);
  std::string_view mp = next_token(line, pos);
  std::string_view opts = next_token(line, pos);
  if (root.empty() || mp.empty() || opts.empty() || opts == "-") return false;
  m.root = unescape_mount_field(root);
  m.mount_point = unescape_mount_field(mp);
  m.options = std::string(opts);
  for (;;) {
    std::string_view t = next_token(line, pos);
    if (t.empty()) return false;  // no "-" separator
    if (t == "-") break;
    m.optional_fields.emplace_back(t);
  }
  std::string_view type = next_token(line, pos);
  std::string_view source = next_token(line, pos);
  if (type.empty() || source.empty()) return false;
  m.fs_type = std::string(type);
  m.source = unescape_mount_field(source);
  m.super_options = std::string(next_token(line, pos));
  return true;
}

}  // namespace

std::string unescape_mount_field(std::string_view s) {
  if (s.find('\\') == std::string_view::npos) return std::string(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

MountTable parse_mountinfo(std::string_view text) {
  MountTable table;
  table.mounts.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    start = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    MountInfo m;
    if (parse_line(line, m))
      table.mounts.push_back(std::move(m));
    else
      ++table.malformed_lines;
  }
  return table;
}

const MountInfo* find_mount(const MountTable& table, std::string_view mount_point) {
  for (auto it = table.mounts.rbegin(); it != table.mounts.rend(); ++it)
    if (it->mount_point == mount_point) return &*it;
  return nullptr;
}

}  // namespace gpud::host
