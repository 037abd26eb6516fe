#include "core/yaml_text.h"

#include <yaml-cpp/eventhandler.h>

#include <optional>
#include <sstream>

namespace gpud {
namespace {

std::string where(const std::string& source, const YAML::Mark& mark) {
  return mark.is_null() ? source : source + ":" + std::to_string(mark.line + 1);
}

// Reads a YAML text's events only (no node is built): where its documents start, the first alias,
// and the first value of a document after the first.
class EventScan : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    ++documents;
    document_start = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    if (!alias) alias = mark;
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    value(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    value(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    value(mark);
  }
  void OnMapEnd() override {}

  int documents = 0;
  YAML::Mark document_start = YAML::Mark::null_mark();
  std::optional<YAML::Mark> alias;
  std::optional<YAML::Mark> later_document_value;

 private:
  void value(const YAML::Mark& mark) {
    if (documents > 1 && !later_document_value) later_document_value = mark;
  }
};

}  // namespace

int first_non_text_line(std::string_view s) {
  int line = 1;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') ++line;
    if (c == 0) return line;
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size() || (n == 2 && c < 0xc2)) return line;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return line;
    if (n == 3) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0))
        return line;  // overlong, surrogate
    }
    if (n == 4) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xf0 && c1 < 0x90) || c > 0xf4 || (c == 0xf4 && c1 >= 0x90)) return line;
    }
    i += n;
  }
  return 0;
}

Result<YAML::Node> parse_yaml_text(std::string_view text, const std::string& source) {
  if (int line = first_non_text_line(text); line > 0)
    return make_error(source + ":" + std::to_string(line) + ": not valid UTF-8 text");
  try {
    // The parser's events first. Aliases: a loaded alias bomb is a small graph, but every walk
    // over it (and the JSON a value becomes) visits each of its billions of paths. Documents:
    // YAML::Load reads the first, so a second one with values would be dropped unread. yaml-cpp
    // 0.7 reports an endless run of empty documents at one position for some garbage (",-") and
    // YAML::Load reads it as an empty file: a document that starts where the last one did is
    // text the parser cannot read.
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    EventScan scan;
    int last_start = -1;
    while (!scan.alias && !scan.later_document_value && parser.HandleNextDocument(scan)) {
      if (scan.document_start.pos <= last_start)
        return make_error(where(source, scan.document_start) +
                          ": not valid YAML: the parser reads nothing from here on");
      last_start = scan.document_start.pos;
    }
    if (scan.alias)
      return make_error(where(source, *scan.alias) +
                        ": YAML aliases (*name) are not allowed here; write the value out");
    if (scan.later_document_value)
      return make_error(where(source, *scan.later_document_value) +
                        ": a second YAML document (after ---); gpud reads one document per file");
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return make_error(where(source, e.mark) + ": not valid YAML: " + e.msg);
  }
}

}  // namespace gpud
