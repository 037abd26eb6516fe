// Test helper: damages a file in place, as a stray write or a failing disk would.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace gpud::testing {

// Overwrites the file with junk of the same size; does nothing to a missing or empty file.
inline void scribble(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const std::string junk(size, '\x5a');
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
}

}  // namespace gpud::testing
