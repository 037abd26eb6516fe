// Test helper: a directory under /tmp removed with everything in it when the object goes, used as
// a host root whose files a test writes and rewrites between checks.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gpud::testing_support {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/gpud-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty when mkdtemp failed.
  const std::string& path() const { return path_; }
  // Writes (or replaces) <dir>/<relative>, creating its parent directories.
  void write(const std::string& relative, const std::string& content) const {
    const std::filesystem::path p = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
  }

 private:
  std::string path_;
};

}  // namespace gpud::testing_support
