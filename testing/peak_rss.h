// Test helper: a process's memory from /proc/<pid>/status, and the growth of this process's peak
// resident memory over a stretch of code.
#pragma once

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace gpud::testing_support {

// A "<key>: <n> kB" line of /proc/<pid>/status in KiB ("VmHWM", "VmRSS"); -1 when absent.
inline int64_t status_kib(const std::string& key, const std::string& pid = "self") {
  std::ifstream in("/proc/" + pid + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1);
  return -1;
}

// From construction on: the free heap is given back and the peak reset (clear_refs 5), so that
// growth_kib() is what the code since took at its peak beyond what was resident before.
class PeakRssGrowth {
 public:
  PeakRssGrowth() {
    malloc_trim(0);
    std::ofstream("/proc/self/clear_refs") << "5";
    before_kib_ = status_kib("VmRSS");
  }
  bool measured() const { return before_kib_ > 0; }
  int64_t growth_kib() const { return status_kib("VmHWM") - before_kib_; }

 private:
  int64_t before_kib_ = -1;
};

}  // namespace gpud::testing_support
