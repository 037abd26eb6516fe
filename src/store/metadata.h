// Metadata: a key/value table (machine id, schema version, ...).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/acknowledgement.h"
#include "store/database.h"

namespace gpud::store {

inline constexpr const char* kKeyMachineId = "machine_id";
inline constexpr const char* kKeySchemaVersion = "schema_version";
// Followed by a component's name: what its last set-healthy acknowledged (a KernelLogWatermark).
inline constexpr const char* kKeyKernelLogWatermarkPrefix = "kernel_log_watermark/";

class Metadata {
 public:
  explicit Metadata(Database& db) : db_(db) {}
  Result<std::optional<std::string>> get(const std::string& key) const;
  Result<void> set(const std::string& key, const std::string& value);
  // Every key and its value, in key order (`gpud metadata`).
  Result<std::map<std::string, std::string>> all() const;

  // Every component's watermark, by component; a value that does not parse is an error naming
  // the component (never skipped: a lost acknowledgement would page again).
  Result<std::map<std::string, KernelLogWatermark>> kernel_log_watermarks() const;
  Result<void> set_kernel_log_watermark(const std::string& component, const KernelLogWatermark& w);

 private:
  Database& db_;
};

}  // namespace gpud::store
