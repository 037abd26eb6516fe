#include "host/loadavg.h"

#include <charconv>
#include <cmath>
#include <string>

#include "host/host_fs.h"

namespace gpud::host {
namespace {

bool parse_double(std::string_view s, double& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out) && out >= 0;
}

}  // namespace

Result<LoadAvg> parse_loadavg(std::string_view text) {
  auto f = split_fields(trim(text));
  if (f.size() < 3) return make_error("/proc/loadavg: expected at least 3 fields");
  LoadAvg out;
  double* dst[] = {&out.one, &out.five, &out.fifteen};
  for (size_t i = 0; i < 3; ++i) {
    if (!parse_double(f[i], *dst[i]))
      return make_error("/proc/loadavg: bad load average \"" + std::string(f[i]) + "\"");
  }
  if (f.size() >= 4) {
    std::string_view rt = f[3];
    auto slash = rt.find('/');
    if (slash != std::string_view::npos) {
      int64_t r = 0, t = 0;
      auto a = std::from_chars(rt.data(), rt.data() + slash, r);
      auto b = std::from_chars(rt.data() + slash + 1, rt.data() + rt.size(), t);
      if (a.ec == std::errc() && b.ec == std::errc()) {
        out.runnable = r;
        out.tasks = t;
      }
    }
  }
  return out;
}

}  // namespace gpud::host
