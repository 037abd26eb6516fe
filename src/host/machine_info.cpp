#include "host/machine_info.h"

#include <sys/utsname.h>

#include <charconv>
#include <exception>

#include "core/log.h"
#include "core/time_util.h"
#include "core/version.h"
#include "host/block_devices.h"
#include "host/cpuinfo.h"
#include "host/network.h"
#include "host/os_info.h"

namespace gpud::host {
namespace {

// MemTotal of /proc/meminfo in bytes (the memory component owns the full parser).
int64_t meminfo_total_bytes(std::string_view text) {
  for (std::string_view line : split_lines(text)) {
    if (!line.starts_with("MemTotal:")) continue;
    auto f = split_fields(line);
    if (f.size() < 2) return 0;
    int64_t v = 0;
    auto [p, ec] = std::from_chars(f[1].data(), f[1].data() + f[1].size(), v);
    if (ec != std::errc()) return 0;
    bool kb = f.size() >= 3 && (f[2] == "kB" || f[2] == "KB");
    return kb ? v * 1024 : v;
  }
  return 0;
}

std::string machine_architecture() {
  // uname(2) does not fail; should it, the architecture gpud was built for (uname's names).
#if defined(__aarch64__)
  constexpr const char* kBuiltFor = "aarch64";
#elif defined(__x86_64__)
  constexpr const char* kBuiltFor = "x86_64";
#else
  constexpr const char* kBuiltFor = "";
#endif
  utsname u{};
  if (::uname(&u) == 0 && u.machine[0] != '\0') return u.machine;
  return kBuiltFor;
}

nlohmann::json disk_device_json(const BlockDevice& d) {
  return {
      {"name", d.name},
      {"type", d.type},
      {"size", d.size_bytes},
      {"used", d.used_bytes},
      {"rota", d.rotational},
      {"serial", d.serial},
      {"wwn", d.wwn},
      {"vendor", d.vendor},
      {"model", d.model},
      {"rev", d.rev},
      {"mountPoint", d.mount_point},
      {"fsType", d.fs_type},
      {"partUUID", d.part_uuid},
      {"parents", d.parents},
      {"children", d.children},
  };
}

void fill(nlohmann::json& out, const HostFs& fs) {
  OsInfo os = read_os_info(fs);
  out["kernelVersion"] = os.kernel_version;
  out["osImage"] = os.os_image;
  out["operatingSystem"] = os.operating_system;
  out["hostname"] = os.hostname;
  out["bootID"] = os.boot_id;
  out["machineID"] = os.machine_id;
  out["uptime"] = os.boot_time ? format_rfc3339(*os.boot_time) : std::string();
  if (auto uuid = fs.read_line("/sys/class/dmi/id/product_uuid"); uuid) out["systemUUID"] = *uuid;

  CpuInfoSummary cpu;
  if (auto text = fs.read("/proc/cpuinfo"); text) cpu = parse_cpuinfo_summary(*text);
  out["cpuInfo"] = {{"type", cpu.model_name},
                    {"manufacturer", cpu.vendor_id},
                    {"architecture", machine_architecture()},
                    {"logicalCores", cpu.logical_cores}};

  int64_t mem_total = 0;
  if (auto text = fs.read("/proc/meminfo"); text) mem_total = meminfo_total_bytes(*text);
  out["memoryInfo"] = {{"totalBytes", mem_total}};

  auto devices = read_block_devices(fs);
  nlohmann::json block = nlohmann::json::array();
  for (const BlockDevice& d : devices) block.push_back(disk_device_json(d));
  std::vector<BlockMount> mounts;
  if (auto mi = fs.read("/proc/self/mountinfo"); mi) mounts = parse_block_mounts(*mi);
  out["diskInfo"] = {
      {"blockDevices", std::move(block)},
      {"containerRootDisk", find_disk_for_path(devices, mounts, "/var/lib/kubelet")}};

  nlohmann::json nics = nlohmann::json::array();
  for (const NetworkInterface& n : read_private_ip_interfaces(fs))
    nics.push_back({{"interface", n.name}, {"mac", n.mac}, {"ip", n.ip}});
  out["nicInfo"] = {{"privateIPInterfaces", std::move(nics)}};
}

}  // namespace

nlohmann::json collect_machine_info(const HostFs& fs) {
  nlohmann::json out = {
      {"gpudVersion", kVersion},
      {"gpuDriverVersion", ""},
      {"cudaVersion", ""},
      {"containerRuntimeVersion", ""},
      {"tailscaleVersion", ""},
      {"kernelVersion", ""},
      {"osImage", ""},
      {"operatingSystem", "linux"},
      {"systemUUID", ""},
      {"machineID", ""},
      {"bootID", ""},
      {"hostname", ""},
      {"uptime", ""},
      {"cpuInfo", {{"type", ""}, {"manufacturer", ""}, {"architecture", ""}, {"logicalCores", 0}}},
      {"memoryInfo", {{"totalBytes", 0}}},
      {"gpuInfo",
       {{"product", ""},
        {"manufacturer", ""},
        {"architecture", ""},
        {"memory", ""},
        {"gpus", nlohmann::json::array()}}},
      {"diskInfo", {{"blockDevices", nlohmann::json::array()}, {"containerRootDisk", ""}}},
      {"nicInfo", {{"privateIPInterfaces", nlohmann::json::array()}}},
  };
  try {
    fill(out, fs);
  } catch (const std::exception& e) {
    // Only allocation failures can get here; what was filled so far is still worth returning.
    logger("machine-info")->warn("{}", e.what());
  }
  return out;
}

}  // namespace gpud::host
