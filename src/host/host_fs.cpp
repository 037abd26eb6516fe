#include "host/host_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace gpud::host {

HostFs::HostFs(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  if (root_.empty()) root_ = "/";
}

std::string HostFs::path(std::string_view absolute) const {
  if (root_ == "/") return std::string(absolute);
  std::string out = root_;
  if (absolute.empty() || absolute.front() != '/') out += '/';
  out += absolute;
  return out;
}

namespace {

// Reads path in 64 KiB chunks, each passed to on_chunk, until the end or until on_chunk returns
// false.
Result<void> read_chunks(const std::string& path,
                         const std::function<bool(std::string_view)>& on_chunk) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("open " + path + ": " + std::strerror(errno));
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return make_error("read " + path + ": " + std::strerror(err));
    }
    if (n == 0 || !on_chunk(std::string_view(buf, static_cast<size_t>(n)))) break;
  }
  ::close(fd);
  return {};
}

}  // namespace

Result<std::string> HostFs::read(std::string_view absolute, size_t max_bytes) const {
  std::string out;
  auto r = read_chunks(path(absolute), [&](std::string_view chunk) {
    out.append(chunk.substr(0, max_bytes - out.size()));
    return out.size() < max_bytes;
  });
  if (!r) return r.error();
  return out;
}

Result<std::string> HostFs::read_line(std::string_view absolute) const {
  auto r = read(absolute, 64 << 10);
  if (!r) return r.error();
  std::string_view v = *r;
  auto nl = v.find('\n');
  if (nl != std::string_view::npos) v = v.substr(0, nl);
  return std::string(trim(v));
}

Result<int64_t> HostFs::read_int(std::string_view absolute) const {
  auto r = read_line(absolute);
  if (!r) return r.error();
  int64_t v = 0;
  auto [p, ec] = std::from_chars(r->data(), r->data() + r->size(), v);
  if (ec != std::errc() || p != r->data() + r->size())
    return make_error("parse " + path(absolute) + ": not an integer: \"" + *r + "\"");
  return v;
}

Result<void> HostFs::for_each_line(std::string_view absolute,
                                   const std::function<void(std::string_view)>& on_line,
                                   size_t max_bytes, size_t max_line) const {
  const std::string p = path(absolute);
  std::string line;  // the line being assembled across chunks, at most max_line bytes
  size_t total = 0;
  auto r = read_chunks(p, [&](std::string_view chunk) {
    total += chunk.size();
    if (total > max_bytes) return false;
    while (!chunk.empty()) {
      size_t nl = chunk.find('\n');
      line.append(chunk.substr(0, nl).substr(0, max_line - line.size()));
      if (nl == std::string_view::npos) break;
      on_line(line);
      line.clear();
      chunk.remove_prefix(nl + 1);
    }
    return true;
  });
  if (!r) return r.error();
  if (total > max_bytes)
    return make_error(p + ": longer than " + std::to_string(max_bytes) + " bytes");
  if (!line.empty()) on_line(line);
  return {};
}

bool HostFs::exists(std::string_view absolute) const {
  struct stat st;
  return ::stat(path(absolute).c_str(), &st) == 0;
}

Result<std::vector<std::string>> HostFs::list(std::string_view absolute) const {
  std::string p = path(absolute);
  DIR* d = ::opendir(p.c_str());
  if (d == nullptr) return make_error("opendir " + p + ": " + std::strerror(errno));
  std::vector<std::string> out;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    out.emplace_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

}  // namespace gpud::host
