#include <gtest/gtest.h>
#include <httplib.h>

#include <string>

#include "core/registry.h"
#include "core/scheduler.h"
#include "server/server.h"
#include "server/web_assets.h"

namespace gpud::server {
namespace {

using namespace std::chrono_literals;

// A build with -DGPUD_WEB=OFF has no UI to test: the tests that need its files say so and skip.
#define SKIP_WITHOUT_WEB_UI() \
  if (web_assets().empty()) GTEST_SKIP() << "built with -DGPUD_WEB=OFF: no web UI files"

class WebRoutes : public ::testing::Test {
 protected:
  void start(bool web_enable) {
    config_.no_tls = true;
    config_.listen_address = "127.0.0.1:0";
    ServerDeps deps;
    deps.config = &config_;
    deps.registry = &registry_;
    deps.scheduler = &scheduler_;
    deps.web_enable = web_enable;
    server_ = std::make_unique<Server>(deps);
    auto r = server_->start();
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  httplib::Result get(const std::string& path) {
    httplib::Client cli("127.0.0.1", server_->port());
    cli.set_connection_timeout(5s);
    cli.set_read_timeout(5s);
    return cli.Get(path);
  }

  Config config_;
  Registry registry_;
  Scheduler scheduler_{registry_};
  std::unique_ptr<Server> server_;
};

TEST(WebAssets, PageFirstThenItsBundledScriptAndStyle) {
  SKIP_WITHOUT_WEB_UI();
  auto assets = web_assets();
  ASSERT_EQ(assets.size(), 3u);
  EXPECT_EQ(assets[0].path, "/");
  EXPECT_FALSE(assets[0].immutable);
  std::string_view page = assets[0].body;
  for (size_t i = 1; i < assets.size(); ++i) {
    EXPECT_TRUE(assets[i].path.starts_with("/assets/main-")) << assets[i].path;
    EXPECT_TRUE(assets[i].immutable);
    EXPECT_GT(assets[i].body.size(), 1000u);
    // The page references each asset by its content-hashed name, relative to /.
    EXPECT_NE(page.find(assets[i].path.substr(1)), std::string_view::npos) << assets[i].path;
  }
  // Nothing comes from another origin.
  EXPECT_EQ(page.find("http://"), std::string_view::npos);
  EXPECT_EQ(page.find("https://"), std::string_view::npos);
}

TEST_F(WebRoutes, ServesThePageAndAssetsWithTypesAndCaching) {
  SKIP_WITHOUT_WEB_UI();
  start(true);
  auto page = get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->get_header_value("Cache-Control"), "no-cache");
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'none'"),
            std::string::npos);
  EXPECT_NE(page->body.find("<title>gpud</title>"), std::string::npos);

  for (const WebAsset& a : web_assets()) {
    if (a.path == "/") continue;
    auto res = get(std::string(a.path));
    ASSERT_TRUE(res) << a.path;
    EXPECT_EQ(res->status, 200) << a.path;
    EXPECT_EQ(res->body, a.body) << a.path;
    EXPECT_EQ(res->get_header_value("Content-Type"), a.content_type);
    EXPECT_EQ(res->get_header_value("Cache-Control"), "public, max-age=31536000, immutable");
    EXPECT_EQ(res->get_header_value("X-Content-Type-Options"), "nosniff");
  }
  auto missing = get("/assets/nope.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // The dot in an asset name is literal, not "any character".
  std::string js;
  for (const WebAsset& a : web_assets())
    if (a.path.ends_with(".js")) js = a.path;
  ASSERT_FALSE(js.empty());
  js[js.size() - 3] = 'x';
  auto almost = get(js);
  ASSERT_TRUE(almost);
  EXPECT_EQ(almost->status, 404);
}

// Browsers offer brotli, which Debian's httplib compresses far too slowly: the server answers gzip.
TEST_F(WebRoutes, BrowserAcceptEncodingGetsGzip) {
  SKIP_WITHOUT_WEB_UI();
  start(true);
  httplib::Client cli("127.0.0.1", server_->port());
  cli.set_read_timeout(5s);
  auto res = cli.Get("/", {{"Accept-Encoding", "gzip, deflate, br, zstd"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Encoding"), "gzip");
  EXPECT_EQ(res->body, web_assets()[0].body);  // the client inflated it
}

TEST_F(WebRoutes, DisabledAnswers404) {
  start(false);
  for (const WebAsset& a : web_assets()) {
    auto res = get(std::string(a.path));
    ASSERT_TRUE(res) << a.path;
    EXPECT_EQ(res->status, 404) << a.path;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  }
  auto health = get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace gpud::server
