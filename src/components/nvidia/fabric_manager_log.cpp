#include "components/nvidia/fabric_manager_log.h"

#include <charconv>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "host/command.h"
#include "kmsg/parser.h"

namespace gpud::components {
namespace {

// The longest message an event keeps (a log line can be anything up to LogTail's 16 KiB).
constexpr size_t kMaxMessage = 512;

// The number after `marker` in `line`, when one follows it.
std::optional<int> number_after(std::string_view line, std::string_view marker) {
  size_t at = line.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + marker.size());
  int v = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc() || p == rest.data()) return std::nullopt;
  return v;
}

// Whether a decimal number follows `marker` in `line`. The GPU handle is a 64-bit id (19-20
// digits): it is only checked for, never read into a number.
bool digits_after(std::string_view line, std::string_view marker) {
  size_t at = line.find(marker);
  if (at == std::string_view::npos) return false;
  at += marker.size();
  return at < line.size() && line[at] >= '0' && line[at] <= '9';
}

// The line without the fabric manager's "[date] [LEVEL] [tid N] " prefix: every leading "[...]"
// group goes.
std::string_view strip_prefix(std::string_view line) {
  for (int groups = 0; groups < 3; ++groups) {
    std::string_view t = trim(line);
    if (t.empty() || t.front() != '[') break;
    size_t close = t.find(']');
    if (close == std::string_view::npos) break;
    line = t.substr(close + 1);
  }
  return trim(line);
}

}  // namespace

std::optional<TimePoint> parse_fabric_manager_time(std::string_view line) {
  // "[Jul 21 2023 10:17:34]": exactly this shape, nothing else.
  if (line.size() < 22 || line[0] != '[' || line[21] != ']') return std::nullopt;
  std::string s(line.substr(1, 20));
  std::tm tm{};
  const char* end = ::strptime(s.c_str(), "%b %d %Y %H:%M:%S", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  tm.tm_isdst = -1;  // the host's zone decides, as it did when the line was written
  std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return Clock::from_time_t(t);
}

std::optional<FabricManagerLogMatch> match_fabric_manager_line(std::string_view line) {
  // The reference's matchers: "detected NVSwitch fatal error (\d+)", "detected NVSwitch
  // non-fatal error (\d+)", "failed to find the GPU handle \d+ in the multicast team .*",
  // "detected number of NVSwitches don't match with any supported system topology" and
  // "NV_WARN_NOTHING_TO_DO"; the first two need a number, the third text after "team ". GPUd's
  // patterns also want some text before the first three ("[date] [LEVEL] [tid N] " in the file);
  // a journal message may start with them, so they match at the start too.
  FabricManagerLogMatch m;
  std::string_view msg = strip_prefix(line);
  if (auto n = number_after(line, "detected NVSwitch fatal error ")) {
    m.name = kFmFatalError;
    m.nvswitch_error = n;
  } else if (auto k = number_after(line, "detected NVSwitch non-fatal error ")) {
    m.name = kFmNonFatalError;
    m.nvswitch_error = k;
  } else if (size_t at = line.find("failed to find the GPU handle ");
             at != std::string_view::npos && digits_after(line, "failed to find the GPU handle ") &&
             line.find(" in the multicast team ", at) != std::string_view::npos) {
    m.name = kFmNvlinkFailure;
  } else if (line.find("detected number of NVSwitches don't match with any supported system "
                       "topology") != std::string_view::npos) {
    m.name = kFmTopologyMismatch;
  } else if (line.find("NV_WARN_NOTHING_TO_DO") != std::string_view::npos) {
    m.name = kFmNothingToDo;
  } else {
    return std::nullopt;
  }
  m.message = kmsg::sanitize_utf8(msg.substr(0, kMaxMessage));
  m.logged = parse_fabric_manager_time(line);
  return m;
}

std::optional<JournalEntry> parse_journal_json_line(std::string_view line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  JournalEntry e;
  auto msg = j.find("MESSAGE");
  if (msg == j.end()) return std::nullopt;
  if (msg->is_string()) {
    e.message = msg->get<std::string>();
  } else if (msg->is_array()) {
    // journald's JSON form of a message that is not valid UTF-8: its bytes.
    for (const auto& b : *msg) {
      if (!b.is_number_unsigned() || b.get<unsigned>() > 255) return std::nullopt;
      e.message.push_back(static_cast<char>(b.get<unsigned>()));
    }
  } else {
    return std::nullopt;
  }
  if (auto ts = j.find("__REALTIME_TIMESTAMP"); ts != j.end() && ts->is_string()) {
    const std::string& s = ts->get_ref<const std::string&>();
    int64_t us = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), us);
    if (ec == std::errc() && p == s.data() + s.size() && us > 0)
      e.time =
          TimePoint(std::chrono::duration_cast<TimePoint::duration>(std::chrono::microseconds(us)));
  }
  if (auto c = j.find("__CURSOR"); c != j.end() && c->is_string()) e.cursor = *c;
  return e;
}

FabricManagerLogReader::FabricManagerLogReader(std::string log_file) : tail_(std::move(log_file)) {}

FabricManagerLogReader::Read FabricManagerLogReader::read(std::string_view component,
                                                          const std::optional<Journal>& journal,
                                                          TimePoint now) {
  Read out;
  auto add = [&](std::string_view line, std::optional<TimePoint> fallback) {
    auto m = match_fabric_manager_line(line);
    if (!m) return;
    std::optional<TimePoint> t = m->logged ? m->logged : fallback;
    if (!t) return;
    Event e;
    e.component = std::string(component);
    e.time = *t;
    e.name = std::string(m->name);
    e.type = EventType::kWarning;
    e.message = std::move(m->message);
    if (m->nvswitch_error) e.extra_info["nvswitch_error"] = *m->nvswitch_error;
    out.events.push_back(std::move(e));
  };

  auto lines = tail_.read();
  if (!lines) {
    out.errors.push_back(lines.error().message);
  } else {
    out.file_missing = lines->missing;
    for (const auto& l : lines->lines)
      add(l, lines->backlog ? std::nullopt : std::optional<TimePoint>(now));
  }

  if (journal) {
    std::vector<std::string> argv = {
        journal->journalctl, "--unit",   "nvidia-fabricmanager.service",
        "--no-pager",        "--output", "json",
        "--output-fields",   "MESSAGE"};
    if (!journal->root.empty()) argv.push_back("--root=" + journal->root);
    // The first read looks back as far as the store's "nothing to do" window; later ones go on
    // from the last entry read.
    if (cursor_.empty())
      argv.push_back("--since=-10min");
    else
      argv.push_back("--after-cursor=" + cursor_);
    auto r = host::run_command(argv, journal->search_path, journal->timeout);
    if (!r) {
      out.errors.push_back(r.error().message);
    } else if (r->exit_code != 0) {
      std::string err(trim(r->err));
      out.errors.push_back("journalctl exited with " + std::to_string(r->exit_code) +
                           (err.empty() ? "" : ": " + err.substr(0, 200)));
    } else {
      size_t start = 0;
      const std::string& text = r->out;
      while (start < text.size()) {
        size_t nl = text.find('\n', start);
        if (nl == std::string::npos) nl = text.size();
        if (auto e = parse_journal_json_line(std::string_view(text).substr(start, nl - start))) {
          if (!e->cursor.empty()) cursor_ = e->cursor;
          add(e->message, e->time ? e->time : std::optional<TimePoint>(now));
        }
        start = nl + 1;
      }
    }
  }
  return out;
}

}  // namespace gpud::components
