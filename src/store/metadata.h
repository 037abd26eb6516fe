// Metadata: a key/value table (machine id, schema version, ...).
#pragma once

#include <optional>
#include <string>

#include "store/database.h"

namespace gpud::store {

inline constexpr const char* kKeyMachineId = "machine_id";
inline constexpr const char* kKeySchemaVersion = "schema_version";

class Metadata {
 public:
  explicit Metadata(Database& db) : db_(db) {}
  Result<std::optional<std::string>> get(const std::string& key) const;
  Result<void> set(const std::string& key, const std::string& value);

 private:
  Database& db_;
};

}  // namespace gpud::store
