#include "components/host/pstore.h"

#include <sys/stat.h>

#include <string_view>

#include "components/host/os.h"
#include "kmsg/parser.h"
#include "kmsg/rules.h"

namespace gpud::components {
namespace {

struct Walk {
  const host::HostFs& fs;
  TimePoint now;
  const PstoreLimits& limits;
  size_t files = 0;
  std::vector<Event> events;

  void dir(const std::string& path, int depth) {
    auto names = fs.list(path);
    if (!names) return;
    for (const std::string& name : *names) {
      if (files >= limits.max_files) return;
      const std::string child = path + "/" + name;
      struct stat st {};
      if (::lstat(fs.path(child).c_str(), &st) != 0) continue;  // links are not followed
      if (S_ISDIR(st.st_mode)) {
        if (depth < limits.max_depth) dir(child, depth + 1);
      } else if (S_ISREG(st.st_mode)) {
        ++files;
        const TimePoint mtime = std::chrono::time_point_cast<std::chrono::seconds>(
            Clock::from_time_t(st.st_mtim.tv_sec));
        if (now - mtime > limits.lookback || st.st_size > static_cast<off_t>(limits.max_file_bytes))
          continue;
        file(child, mtime);
      }
    }
  }

  void file(const std::string& path, TimePoint mtime) {
    auto text = fs.read(path, limits.max_file_bytes);
    if (!text) return;
    // The os component's own rules read the record, so a panic reads the same here as in the log.
    kmsg::RuleMatcher matcher({os_kernel_log_rules()});
    std::string first_line;
    for (std::string_view line : host::split_lines(*text)) {
      auto record = kmsg::parse_line_view(line);
      if (!record) continue;
      const std::string_view message = record->message;
      if (first_line.empty() &&
          (kmsg::contains(message, "Kernel panic") || kmsg::contains(message, "Kernel Panic")))
        first_line = kmsg::log_line_excerpt(message);
      for (kmsg::Match& m : matcher.feed(message)) {
        if (m.name != "kernel_panic") continue;
        Event e;
        e.component = "os";  // OsComponent's events
        e.time = mtime;
        e.name = m.name;
        e.type = EventType::kWarning;
        e.message = m.message + " (pstore)";
        e.extra_info = m.extra_info;
        e.extra_info["pstore_file"] = kmsg::sanitize_utf8(path);
        if (!first_line.empty()) e.extra_info["log_line"] = first_line;
        events.push_back(std::move(e));
        first_line.clear();
      }
    }
  }
};

}  // namespace

std::vector<Event> pstore_panic_events(const host::HostFs& fs, TimePoint now,
                                       const PstoreLimits& limits) {
  Walk walk{fs, now, limits, 0, {}};
  for (const char* root : {kSystemdPstoreDir, kSysfsPstoreDir}) walk.dir(root, 0);
  return std::move(walk.events);
}

}  // namespace gpud::components
