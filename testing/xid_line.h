// An Xid line's match as the event pipeline hands it to the Xid component, logged now by
// process `pid`: for tests that trace a real process's Xid to its container.
#pragma once

#include <cstdint>
#include <fstream>

#include "core/health.h"
#include "kmsg/rules.h"

namespace gpud::testing {

struct XidLine {
  kmsg::Match match;
  kmsg::MatchTime time;
};

inline XidLine xid_line_now(int xid, int64_t pid) {
  double uptime_s = 0;
  std::ifstream("/proc/uptime") >> uptime_s;
  XidLine line;
  line.match.extra_info = {{"xid", xid}, {"pid", pid}, {"process_name", "python3"}};
  line.time.wall = Clock::now();
  line.time.boot_offset_us = static_cast<int64_t>(uptime_s * 1e6);
  line.time.now = Clock::now();
  return line;
}

}  // namespace gpud::testing
