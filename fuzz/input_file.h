// A fuzz target's input as a file of its own, for code that reads a path: one per process, under
// the temp directory, removed when the process exits normally (libFuzzer's time limit, the
// regression test). scripts/fuzz.sh removes what a crashed run leaves.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace gpud::fuzz {

class InputFile {
 public:
  // "<temp>/<stem>-<pid><extension>".
  InputFile(const std::string& stem, const std::string& extension)
      : path_((std::filesystem::temp_directory_path() /
               (stem + "-" + std::to_string(::getpid()) + extension))
                  .string()) {}
  ~InputFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  // Replaces the file's content with these bytes.
  void write(const uint8_t* data, size_t size) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }

 private:
  std::string path_;
};

}  // namespace gpud::fuzz
