// Redacts the values that look like secrets from a process's command line, for the one surface
// that serves command lines when asked to (accelerator-nvidia-processes with
// --serve-process-cmdlines): what a job passes as `--hf-token X` or `DB_PASSWORD=Y` stays on the
// node.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpud::host {

// What a redacted value becomes.
inline constexpr std::string_view kRedacted = "<redacted>";

// Whether a flag or variable name looks like it names a secret: one of its words (split at '-',
// '_', '.' and case changes are not split; the name is compared lowercased) is token, secret,
// password, passwd, pwd, passphrase, key, apikey, credential(s), auth or authorization, or ends in
// token, secret, password, passwd, apikey or credential(s) ("hftoken", "dbpassword").
// "max-new-tokens" and "keyboard" are not.
bool secret_name(std::string_view name);

// The command line with every value that follows a secret-looking name replaced by kRedacted:
// - "--name=value", "-name=value": the value;
// - "--name value", "-name value": the next argument, unless it starts with "--" (another flag);
// - "NAME=value" (an environment assignment, as `env`, `sudo` and `sh -c` take them): the value;
// - "scheme://user:password@host": the password, whatever the argument;
// - "Name: value..." (a header, as `curl -H` takes it): everything after the colon.
// An argument holding spaces (the script of `sh -c`) is redacted word by word by the same rules.
// Pure: no I/O.
std::vector<std::string> redact_command_line(const std::vector<std::string>& args);

}  // namespace gpud::host
