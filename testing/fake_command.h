// FakeCommands: a temporary directory of shell scripts standing in for the commands a component
// runs (systemctl, tailscale, tailscaled), each printing recorded output; removed at scope exit.
// Point Config::*_command at path(name), or put dir() first on the daemon's PATH.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gpud::testing_support {

class FakeCommands {
 public:
  FakeCommands() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpud-bin-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  }
  ~FakeCommands() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  FakeCommands(const FakeCommands&) = delete;
  FakeCommands& operator=(const FakeCommands&) = delete;

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // `name` runs the POSIX shell `body` (its arguments in "$@").
  std::string script(const std::string& name, const std::string& body) const {
    const std::string p = path(name);
    std::ofstream(p, std::ios::trunc) << "#!/bin/sh\n" << body << "\n";
    ::chmod(p.c_str(), 0755);
    return p;
  }
  // `name` prints the file `output` and exits with `exit_code`.
  std::string printing(const std::string& name, const std::string& output,
                       int exit_code = 0) const {
    return script(name, "cat '" + output + "'\nexit " + std::to_string(exit_code));
  }

 private:
  std::string dir_;
};

}  // namespace gpud::testing_support
