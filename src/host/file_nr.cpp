#include "host/file_nr.h"

#include <charconv>
#include <string>

#include "host/host_fs.h"

namespace gpud::host {
namespace {

bool parse_u64(std::string_view s, uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Result<FileNr> parse_file_nr(std::string_view text) {
  auto f = split_fields(trim(text));
  if (f.size() != 3)
    return make_error("file-nr: expected 3 fields, got " + std::to_string(f.size()));
  FileNr out;
  uint64_t* dst[] = {&out.allocated, &out.unused, &out.max};
  for (size_t i = 0; i < 3; ++i) {
    if (!parse_u64(f[i], *dst[i]))
      return make_error("file-nr: bad number \"" + std::string(f[i]) + "\"");
  }
  return out;
}

Result<uint64_t> parse_file_max(std::string_view text) {
  std::string_view t = trim(text);
  uint64_t v = 0;
  if (!parse_u64(t, v)) return make_error("file-max: not a number: \"" + std::string(t) + "\"");
  return v;
}

}  // namespace gpud::host
