// libgpud-docker.so: one HTTP GET to the docker Engine API over its unix socket, with libcurl
// (CURLOPT_UNIX_SOCKET_PATH), behind the C ABI of runtimes/docker.h. Only gpud_docker_client_v1
// leaves the library (hidden visibility for everything else).
#include <curl/curl.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <system_error>

#include "runtimes/docker.h"

namespace {

char* copy_string(const char* data, size_t len) {
  auto* out = static_cast<char*>(std::malloc(len + 1));
  if (out == nullptr) std::abort();
  if (len > 0) std::memcpy(out, data, len);
  out[len] = '\0';
  return out;
}

char* copy_string(const std::string& s) { return copy_string(s.data(), s.size()); }

struct Transfer {
  std::string body;
  size_t max_body = 0;
  bool too_large = false;
  std::string api_version;
};

size_t on_body(char* data, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nmemb;
  if (t->body.size() + n > t->max_body) {
    t->too_large = true;
    return 0;  // libcurl stops with CURLE_WRITE_ERROR
  }
  t->body.append(data, n);
  return n;
}

size_t on_header(char* data, size_t size, size_t nitems, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nitems;
  constexpr const char kName[] = "api-version:";
  constexpr size_t kNameLen = sizeof(kName) - 1;
  if (n > kNameLen && strncasecmp(data, kName, kNameLen) == 0) {
    std::string v(data + kNameLen, n - kNameLen);
    const auto first = v.find_first_not_of(" \t");
    const auto last = v.find_last_not_of(" \t\r\n");
    t->api_version = first == std::string::npos ? std::string() : v.substr(first, last - first + 1);
  }
  return n;
}

gpud_docker_outcome outcome_of(CURLcode code, const Transfer& t) {
  switch (code) {
    case CURLE_OK: return GPUD_DOCKER_ANSWERED;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST: return GPUD_DOCKER_CONNECT_FAILED;
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE: return GPUD_DOCKER_CONNECTION_LOST;
    case CURLE_OPERATION_TIMEDOUT: return GPUD_DOCKER_TIMED_OUT;
    case CURLE_WRITE_ERROR: return t.too_large ? GPUD_DOCKER_TOO_LARGE : GPUD_DOCKER_FAILED;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:  // "Received HTTP/0.9 when not allowed": not an HTTP answer
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_HTTP2: return GPUD_DOCKER_BAD_RESPONSE;
    default: return GPUD_DOCKER_FAILED;
  }
}

const char* library_version() { return curl_version(); }

gpud_docker_response* get(const char* socket_path, const char* path, long timeout_ms,
                          size_t max_body_bytes) {
  // libcurl's global state, once (thread-safe since 7.84, but Debian's older ones are not).
  static std::once_flag init;
  static CURLcode init_code = CURLE_OK;
  std::call_once(init, [] { init_code = curl_global_init(CURL_GLOBAL_DEFAULT); });

  auto* r = static_cast<gpud_docker_response*>(std::calloc(1, sizeof(gpud_docker_response)));
  if (r == nullptr) std::abort();
  Transfer t;
  t.max_body = max_body_bytes;
  std::string error;
  CURLcode code = init_code;
  long status = 0;
  if (code != CURLE_OK) {
    error = std::string("curl_global_init: ") + curl_easy_strerror(code);
  } else if (CURL* curl = curl_easy_init(); curl == nullptr) {
    code = CURLE_FAILED_INIT;
    error = "curl_easy_init failed";
  } else {
    char errbuf[CURL_ERROR_SIZE] = {};
    // The host part is what the daemon sees in Host:; the socket is what is connected to.
    const std::string url = std::string("http://docker") + path;
    curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, socket_path);
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM in a multi-threaded daemon
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "gpud");
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
    code = curl_easy_perform(curl);
    if (code == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    error = errbuf[0] != '\0' ? std::string(errbuf) : std::string(curl_easy_strerror(code));
    // libcurl words a refused unix socket as "Failed to connect to docker port 80": the system's
    // reason says what happened.
    long os_errno = 0;
    if (code == CURLE_COULDNT_CONNECT &&
        curl_easy_getinfo(curl, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK && os_errno != 0)
      error = std::system_category().message(static_cast<int>(os_errno));
    curl_easy_cleanup(curl);
  }
  r->outcome = outcome_of(code, t);
  if (r->outcome == GPUD_DOCKER_ANSWERED) {
    r->http_status = status;
    r->body = copy_string(t.body);
    r->body_len = t.body.size();
    r->error = copy_string("", 0);
  } else {
    r->body = copy_string("", 0);
    r->error = copy_string(error);
  }
  r->api_version = copy_string(t.api_version);
  return r;
}

void free_response(gpud_docker_response* r) {
  if (r == nullptr) return;
  std::free(r->body);
  std::free(r->api_version);
  std::free(r->error);
  std::free(r);
}

constexpr gpud_docker_client_table_v1 kTable = {
    GPUD_DOCKER_CLIENT_ABI,
    library_version,
    get,
    free_response,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const gpud_docker_client_table_v1*
gpud_docker_client_v1(void) {
  return &kTable;
}
