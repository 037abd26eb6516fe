// `gpud tls-material` (hidden, internal): the daemon's TLS certificate and key, read and checked,
// or generated and persisted, as server::resolve_tls_material does, printed on stdout for the
// daemon (server::resolve_tls_material_in_helper). OpenSSL's decoders and algorithms are then
// fetched in a process that lives for the call; the daemon maps them only when a TLS connection
// comes.
#include <cstdio>
#include <memory>
#include <string>

#include "app/verbs.h"
#include "server/tls.h"

namespace gpud::app {

void add_tls_material(CLI::App& app, int* exit_code) {
  auto config = std::make_shared<Config>();
  auto* cmd = app.add_subcommand("tls-material", "Internal: the daemon's TLS certificate and key");
  cmd->group("");  // hidden: the daemon's own helper, not a user's verb
  cmd->add_option("--data-dir", config->data_dir, "Where gpud.crt and gpud.key are kept");
  cmd->add_option("--tls-cert", config->tls_cert, "PEM certificate");
  cmd->add_option("--tls-key", config->tls_key, "PEM private key");
  cmd->add_option("--tls-san", config->tls_sans, "Another name the certificate covers");
  cmd->callback([config, exit_code] {
    // A material that cannot be resolved is a reply too (its words): the exit status says only
    // that the helper itself worked.
    const std::string out = server::format_tls_helper_reply(server::resolve_tls_material(*config));
    const bool written =
        std::fwrite(out.data(), 1, out.size(), stdout) == out.size() && std::fflush(stdout) == 0;
    *exit_code = written ? kExitOk : kExitUsage;
  });
}

}  // namespace gpud::app
