// Any bytes as a saved log file, read the way `gpud scan --kernel-log` reads it (large reads, no
// copy per line, lines cut at the cap), with buffer and line caps small enough that lines straddle
// reads; the first two bytes choose them. Every delivered record's message must clean to valid
// UTF-8 within the message cap.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "kmsg/parser.h"
#include "kmsg/reader.h"

using namespace gpud;  // NOLINT(google-build-using-namespace)

namespace {

void check(const kmsg::KmsgRecordView& v) {
  const kmsg::KmsgRecord r = kmsg::to_record(v);
  if (r.message.size() > 3 * kmsg::kMaxMessageBytes) std::abort();
  if (kmsg::sanitize_utf8(r.message) != r.message) std::abort();  // not valid UTF-8
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  kmsg::ReadOptions opts;
  opts.buffer_bytes = 1 + data[0] % 64;
  opts.max_line_bytes = 1 + data[1] % 128;
  const std::string body(reinterpret_cast<const char*>(data) + 2, size - 2);
  // The stream reader.
  std::istringstream in(body);
  if (!kmsg::read_saved_log(in, check, opts)) std::abort();
  // The file-descriptor reader (`--kernel-log FILE`), from an in-memory file.
  static const int fd = ::memfd_create("saved-log", 0);
  if (fd < 0) return 0;
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, body.data(), body.size(), 0) < 0 ||
      ::lseek(fd, 0, SEEK_SET) != 0)
    return 0;
  opts.max_line_bytes = 1 << 20;
  if (!kmsg::read_saved_log(fd, check, opts)) std::abort();
  return 0;
}
