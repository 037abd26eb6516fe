#include "runtimes/container_directory.h"

#include <strings.h>

namespace gpud::runtimes {

void ContainerDirectory::publish(std::string_view source, std::vector<ContainerInfo> containers) {
  std::lock_guard lock(mu_);
  by_source_[std::string(source)] =
      Listing{std::chrono::steady_clock::now(), std::move(containers)};
}

void ContainerDirectory::clear(std::string_view source) {
  std::lock_guard lock(mu_);
  if (auto it = by_source_.find(source); it != by_source_.end()) by_source_.erase(it);
}

std::optional<ContainerInfo> ContainerDirectory::find(std::string_view container_id) const {
  if (container_id.size() < 12) return std::nullopt;
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  std::optional<ContainerInfo> best;
  for (const auto& [source, listing] : by_source_) {
    if (now - listing.at > max_age_) continue;
    for (const ContainerInfo& c : listing.containers) {
      if (c.id.size() < container_id.size() ||
          c.id.compare(0, container_id.size(), container_id) != 0)
        continue;
      if (!best || (best->pod_name.empty() && !c.pod_name.empty())) best = c;
    }
  }
  return best;
}

std::vector<ContainerInfo> ContainerDirectory::all() const {
  std::lock_guard lock(mu_);
  std::vector<ContainerInfo> out;
  for (const auto& [source, listing] : by_source_)
    out.insert(out.end(), listing.containers.begin(), listing.containers.end());
  return out;
}

void ContainerDirectory::publish_devices(std::string_view source,
                                         std::vector<DeviceHolder> devices) {
  std::lock_guard lock(mu_);
  devices_by_source_[std::string(source)] =
      DeviceListing{std::chrono::steady_clock::now(), std::move(devices)};
}

void ContainerDirectory::clear_devices(std::string_view source) {
  std::lock_guard lock(mu_);
  if (auto it = devices_by_source_.find(source); it != devices_by_source_.end())
    devices_by_source_.erase(it);
}

std::optional<DeviceHolder> ContainerDirectory::find_device(std::string_view device_id) const {
  if (device_id.empty()) return std::nullopt;
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [source, listing] : devices_by_source_) {
    if (now - listing.at > max_age_) continue;
    for (const DeviceHolder& d : listing.devices)
      if (d.device_id.size() == device_id.size() &&
          ::strncasecmp(d.device_id.data(), device_id.data(), device_id.size()) == 0)
        return d;
  }
  return std::nullopt;
}

}  // namespace gpud::runtimes
