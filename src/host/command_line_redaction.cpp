#include "host/command_line_redaction.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace gpud::host {
namespace {

constexpr std::array<std::string_view, 12> kSecretWords = {
    "token", "secret", "password",   "passwd",      "pwd",  "passphrase",
    "key",   "apikey", "credential", "credentials", "auth", "authorization"};
// Words glued to another ("hftoken", "dbpassword"); not "key", which ends "monkey" and "hotkey".
constexpr std::array<std::string_view, 8> kSecretSuffixes = {
    "token", "secret", "password", "passwd", "passphrase", "apikey", "credential", "credentials"};

std::string lowercase(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool secret_word(std::string_view w) {
  if (w.empty()) return false;
  return std::find(kSecretWords.begin(), kSecretWords.end(), w) != kSecretWords.end() ||
         std::any_of(kSecretSuffixes.begin(), kSecretSuffixes.end(),
                     [&](std::string_view s) { return w.ends_with(s); });
}

// A variable or key name as `env`, shells and config overrides ("model.api_key=") write them.
bool assignment_name(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '_' || c == '.' || c == '-';
  });
}

// "scheme://user:password@host..." -> "scheme://user:<redacted>@host...", for each URL in `s`.
std::string redact_url_passwords(std::string s) {
  size_t pos = 0;
  while ((pos = s.find("://", pos)) != std::string::npos) {
    const size_t userinfo = pos + 3;
    const size_t end = std::min(s.find_first_of(" \t\n", userinfo), s.size());
    // The host holds no '@': the last one before the URL's end closes the user information, even
    // when the password holds '@' or '/'.
    const size_t at = s.rfind('@', end - 1);
    if (at == std::string::npos || at < userinfo || end == userinfo) {
      pos = userinfo;
      continue;
    }
    const size_t colon = s.find(':', userinfo);
    if (colon < at) {
      s.replace(colon + 1, at - colon - 1, kRedacted);
      pos = colon + 1 + kRedacted.size() + 1;
    } else {
      pos = at + 1;
    }
  }
  return s;
}

// Redacts a list of words in place: argv, or the words of one argument. Within one argument a
// header's name ("Authorization:") takes the rest of the argument as its value.
void redact_words(std::vector<std::string>& words, bool one_argument);

// An argument holding whitespace, redacted word by word; the whitespace is kept as it was.
std::string redact_spaced(std::string_view arg) {
  std::vector<std::string> words, gaps;
  size_t i = 0;
  while (i < arg.size()) {
    const size_t start = arg.find_first_not_of(" \t\n", i);
    gaps.emplace_back(arg.substr(i, std::min(start, arg.size()) - i));
    if (start == std::string_view::npos) break;
    const size_t end = std::min(arg.find_first_of(" \t\n", start), arg.size());
    words.emplace_back(arg.substr(start, end - start));
    i = end;
  }
  redact_words(words, true);
  std::string out;
  for (size_t k = 0; k < gaps.size() || k < words.size(); ++k) {
    if (k < gaps.size()) out += gaps[k];
    if (k < words.size()) out += words[k];
  }
  return out;
}

void redact_words(std::vector<std::string>& words, bool one_argument) {
  bool redact_next = false;
  bool redact_rest = false;
  for (std::string& w : words) {
    if (redact_rest) {
      w = kRedacted;
      continue;
    }
    if (redact_next) {
      redact_next = false;
      if (!w.starts_with("--")) {
        w = kRedacted;
        continue;
      }
    }
    if (w.find_first_of(" \t\n") != std::string::npos) {
      w = redact_spaced(w);
      continue;
    }
    w = redact_url_passwords(std::move(w));
    const std::string_view v(w);
    const size_t dashes = std::min(v.find_first_not_of('-'), v.size());
    const size_t eq = v.find('=');
    if (dashes == v.size()) continue;  // "-", "--"
    if (dashes > 0) {                  // a flag: "--name", "--name=value"
      if (!secret_name(v.substr(dashes, eq == std::string_view::npos ? eq : eq - dashes))) continue;
      if (eq == std::string_view::npos)
        redact_next = true;
      else if (eq + 1 < v.size())
        w = std::string(v.substr(0, eq + 1)) + std::string(kRedacted);
      continue;
    }
    if (eq != std::string_view::npos && assignment_name(v.substr(0, eq))) {  // "NAME=value"
      if (secret_name(v.substr(0, eq)) && eq + 1 < v.size())
        w = std::string(v.substr(0, eq + 1)) + std::string(kRedacted);
      continue;
    }
    const size_t colon = v.find(':');  // "Authorization: Bearer x", "X-Api-Key:x"
    if (colon != std::string_view::npos && colon > 0 && !v.substr(colon).starts_with("://") &&
        assignment_name(v.substr(0, colon)) && secret_name(v.substr(0, colon))) {
      if (colon + 1 < v.size())
        w = std::string(v.substr(0, colon + 1)) + std::string(kRedacted);
      else if (one_argument)
        redact_rest = true;
      else
        redact_next = true;
    }
  }
}

}  // namespace

bool secret_name(std::string_view name) {
  const std::string n = lowercase(name);
  size_t start = 0;
  while (start <= n.size()) {
    const size_t end = std::min(n.find_first_of("-_.", start), n.size());
    if (secret_word(std::string_view(n).substr(start, end - start))) return true;
    start = end + 1;
  }
  return false;
}

std::vector<std::string> redact_command_line(const std::vector<std::string>& args) {
  std::vector<std::string> out = args;
  redact_words(out, false);
  return out;
}

}  // namespace gpud::host
