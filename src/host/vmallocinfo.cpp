#include "host/vmallocinfo.h"

#include <charconv>
#include <optional>
#include <string>

namespace gpud::host {

namespace {
constexpr std::string_view kBpfJitCallers[] = {"bpf_jit_alloc_exec", "bpf_prog_pack_alloc"};
}  // namespace

Result<uint64_t> bpf_jit_bytes_of_line(std::string_view line) {
  bool jit = false;
  for (std::string_view caller : kBpfJitCallers) jit = jit || line.find(caller) != line.npos;
  if (!jit) return uint64_t{0};
  auto f = split_fields(line);
  uint64_t size = 0;
  const bool parsed = f.size() >= 2 && [&] {
    auto [end, ec] = std::from_chars(f[1].data(), f[1].data() + f[1].size(), size);
    return ec == std::errc() && end == f[1].data() + f[1].size();
  }();
  if (!parsed)
    return make_error("/proc/vmallocinfo: no size in \"" + std::string(line.substr(0, 160)) + "\"");
  return size;
}

Result<uint64_t> read_bpf_jit_bytes(const HostFs& fs) {
  uint64_t total = 0;
  std::optional<Error> bad_line;
  auto read = fs.for_each_line("/proc/vmallocinfo", [&](std::string_view line) {
    if (bad_line) return;
    auto bytes = bpf_jit_bytes_of_line(line);
    if (bytes)
      total += *bytes;
    else
      bad_line = bytes.error();
  });
  if (!read) return read.error();
  if (bad_line) return *bad_line;
  return total;
}

}  // namespace gpud::host
