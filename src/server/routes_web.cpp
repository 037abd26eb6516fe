// The local web UI: GET / (the page) and GET /assets/<name> (its bundled script and style sheet),
// all compiled into the binary (web_assets.h). The page only reads the API.
#include <httplib.h>

#include <string>

#include "server/routes.h"
#include "server/web_assets.h"

namespace gpud::server {
namespace {

// Everything the page loads comes from this origin; it makes no other connection.
constexpr const char* kPagePolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void serve(const WebAsset& asset, httplib::Response& res) {
  res.status = 200;
  res.set_header("Cache-Control",
                 asset.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  if (!asset.immutable) {
    res.set_header("Content-Security-Policy", kPagePolicy);
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("X-Frame-Options", "DENY");
  }
  res.set_content(std::string(asset.body), std::string(asset.content_type));
}

}  // namespace

void register_web_routes(httplib::Server& http) {
  for (const WebAsset& asset : web_assets()) {
    const WebAsset* a = &asset;
    // The asset paths are [A-Za-z0-9/_.-]; escape the dots for httplib's regex matching.
    std::string pattern;
    for (char ch : asset.path) {
      if (ch == '.') pattern += '\\';
      pattern += ch;
    }
    http.Get(pattern, [a](const httplib::Request&, httplib::Response& res) { serve(*a, res); });
  }
}

}  // namespace gpud::server
