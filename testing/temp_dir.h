// Test helper: a fresh directory under the system's temporary directory, removed with everything in
// it when the object goes; used as a data dir, or as a host root whose files a test writes and
// rewrites between checks.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace gpud::testing_support {

class TempDir {
 public:
  // `prefix` names the test in the directory's name ("<prefix>-XXXXXX").
  explicit TempDir(const std::string& prefix = "gpud-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty when mkdtemp failed.
  const std::string& path() const { return path_; }
  // <dir>/<name>
  std::string file(const std::string& name) const {
    return (std::filesystem::path(path_) / name).string();
  }
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
