// gpud's entry point: hands argv to the CLI.
#include <malloc.h>
#include <openssl/crypto.h>

#include <cstring>

#include "app/cli.h"

namespace {

// Runs before any shared library's initializer (an executable's .preinit_array comes first).
// libcpp-httplib's initializer calls OPENSSL_init_ssl, which by default builds tables of the text
// of every library's error reasons and adds every legacy cipher and digest to the by-name tables
// (EVP_get_cipherbyname), touching a function of each across libcrypto. Initializing first without
// them makes those later requests no-ops (OpenSSL initializes each part once):
//  - the error strings: 0.15 MiB of resident memory in every gpud process, 0.6 MiB with --no-tls
//    (measured), for text that only decorates error messages. gpud's TLS errors say what failed
//    in their own words (server/tls.cpp) and carry OpenSSL's numeric code, which `openssl errstr`
//    decodes.
//  - the legacy tables: 0.3 MiB (measured, eight fake GPUs, no TLS connection yet). OpenSSL 3's
//    TLS, certificate and key code fetches its algorithms from the providers by name instead;
//    nothing in gpud looks a cipher or digest up in those tables.
// No cryptography runs here, so it does not matter that libcrypto's own initializer (CPU feature
// detection) has not run yet.
// Under LD_PRELOAD it does nothing: a preloaded allocator or profiler (heaptrack) is initialized by
// its own initializer, after this hook, and heaptrack records nothing if malloc runs here first.
void skip_openssl_error_strings(int, char**, char** envp) {
  for (char** e = envp; e != nullptr && *e != nullptr; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) == 0) return;
  OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS | OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
                          OPENSSL_INIT_NO_ADD_ALL_DIGESTS,
                      nullptr);
}
[[gnu::section(".preinit_array"), gnu::used]] void (*preinit)(int, char**,
                                                              char**) = skip_openssl_error_strings;

}  // namespace

int main(int argc, char** argv) {
  // glibc gives each thread that allocates an arena of its own (up to 8 per core). The daemon has
  // a dozen mostly idle threads (scheduler, NVML worker, Xid watcher, kernel-log follower, HTTP
  // pool) whose allocations are small, short-lived and rare, so contention is not a concern; one
  // arena keeps their pages in one heap. Measured: two arenas instead of one cost 0.3 MiB of
  // resident memory with eight fake GPUs, a dozen cost about 1.3 MiB.
  mallopt(M_ARENA_MAX, 1);
  return gpud::app::run_cli(argc, argv);
}
