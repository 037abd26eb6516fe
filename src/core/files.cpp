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

}  // namespace gpud
