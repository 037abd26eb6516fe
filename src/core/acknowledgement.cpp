#include "core/acknowledgement.h"

#include "core/time_util.h"

namespace gpud {

bool covers(const KernelLogWatermark& w, const KernelLogPosition& record) {
  const bool boots_known = !w.boot_id.empty() && !record.boot_id.empty();
  if (boots_known && w.boot_id != record.boot_id) return false;
  if (boots_known && w.boot_offset_us && record.boot_offset_us)
    return *record.boot_offset_us <= *w.boot_offset_us;
  return record.time && *record.time <= w.acknowledgement.time;
}

nlohmann::json to_json(const KernelLogWatermark& w) {
  nlohmann::json j = {{"boot_id", w.boot_id},
                      {"time", to_unix_seconds(w.acknowledgement.time)},
                      {"by", w.acknowledgement.by}};
  if (w.boot_offset_us) j["boot_offset_us"] = *w.boot_offset_us;
  return j;
}

Result<KernelLogWatermark> parse_kernel_log_watermark(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return make_error("kernel-log watermark is not a JSON object");
  auto field = [&](const char* key) { return j.find(key); };
  KernelLogWatermark w;
  if (auto it = field("boot_id"); it == j.end() || !it->is_string())
    return make_error("kernel-log watermark has no string boot_id");
  else
    w.boot_id = it->get<std::string>();
  if (auto it = field("time"); it == j.end() || !it->is_number_integer())
    return make_error("kernel-log watermark has no integer time");
  else
    w.acknowledgement.time = TimePoint(std::chrono::seconds(it->get<int64_t>()));
  if (auto it = field("by"); it == j.end() || !it->is_string())
    return make_error("kernel-log watermark has no string by");
  else
    w.acknowledgement.by = it->get<std::string>();
  if (auto it = field("boot_offset_us"); it != j.end()) {
    if (!it->is_number_integer())
      return make_error("kernel-log watermark's boot_offset_us is not an integer");
    w.boot_offset_us = it->get<int64_t>();
  }
  return w;
}

}  // namespace gpud
