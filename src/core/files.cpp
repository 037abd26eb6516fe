#include "core/files.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gpud {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error("cannot read " + path);
  return ss.str();
}

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read " + path + ": " + std::strerror(errno));
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return make_error("cannot read " + path);
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max_bytes)
    return make_error(path + " is larger than " + std::to_string(max_bytes) + " bytes");
  return text;
}

}  // namespace gpud
