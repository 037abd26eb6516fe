// The local web UI's files (web/src bundled by web/build.mjs), compiled into the binary so the page
// works with no internet: the daemon serves every byte itself.
#pragma once

#include <span>
#include <string_view>

namespace gpud::server {

struct WebAsset {
  std::string_view path;          // URL path: "/" for the page, "/assets/<name>-<hash>.<ext>"
  std::string_view content_type;  // e.g. "text/javascript; charset=utf-8"
  bool immutable = false;         // content-hashed name: cacheable forever; the page itself is not
  std::string_view body;
};

// Defined in the generated web_assets.cpp (build folder). The page is first.
std::span<const WebAsset> web_assets();

}  // namespace gpud::server
