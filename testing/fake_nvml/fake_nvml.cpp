// A fake libnvidia-ml.so.1 for tests and demos without a GPU: it exports the NVML entry points gpud
// uses and answers from a JSON scenario file named by $FAKE_NVML_SCENARIO (see README.md). Built
// twice: the full library, and with FAKE_NVML_LEGACY an "old driver" lacking the newest symbols.
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nvml/abi.h"
#include "nvml/gpm_metrics.h"

using nlohmann::json;
using namespace gpud::nvml;  // NOLINT(google-build-using-namespace)

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr uintptr_t kHandleBase = 0xA0A0;

// The GPU every scenario starts from: a healthy H100 SXM. Scenario "defaults" and each GPU's own
// object are merge-patched on top (a null removes a value: the call answers NOT_SUPPORTED).
const char* kBuiltinGpu = R"({
  "name": "NVIDIA H100 80GB HBM3",
  "brand": 2,
  "cuda_compute_capability": [9, 0],
  "pci_device_id": 590418142,
  "temperature_c": 34,
  "temperature_hbm_c": 32,
  "margin_temperature_c": 55,
  "thresholds_c": {"shutdown": 92, "slowdown": 89, "mem_max": 95, "gpu_max": 87},
  "power_usage_mw": 71000,
  "power_enforced_limit_mw": 700000,
  "power_management_limit_mw": 700000,
  "total_energy_mj": 8123456789,
  "clocks_mhz": {"graphics": 345, "sm": 345, "memory": 2619},
  "clocks_event_reasons": 1,
  "memory": {"total": 85520809984, "reserved": 567279616, "used": 0},
  "utilization": {"gpu": 0, "memory": 0},
  "ecc_mode": {"current": true, "pending": true},
  "ecc": {"volatile_corrected": 0, "volatile_uncorrected": 0,
          "aggregate_corrected": 0, "aggregate_uncorrected": 0,
          "locations": {"l1": {}, "l2": {}, "dram": {}, "register_file": {}, "sram": {}}},
  "remapped_rows": {"corrected": 0, "uncorrected": 0, "pending": false, "failure": false},
  "retired_pages": null,
  "persistence_mode": true,
  "compute_mode": 0,
  "processes": [],
  "nvlink": {"links": 18, "down": [], "counters": {}, "link_counters": {}},
  "pcie": {"gen": 5, "width": 16, "max_gen": 5, "max_width": 16, "replay_counter": 0},
  "gsp_firmware": {"enabled": true, "default": true, "version": "550.54.15"},
  "fabric": {"state": 3, "status": 0, "clique_id": 32766,
             "cluster_uuid": "7d2f9a31-0c4e-4b8a-9f61-2e5d8c1b3a70",
             "health_mask": 170, "health_summary": 1},
  "gpm_supported": true,
  "p2p_nvlink_status": 0,
  "gpm_metrics": {"sm_occupancy": 0, "int_util": 0, "any_tensor_util": 0, "dfma_tensor_util": 0,
                  "hmma_tensor_util": 0, "imma_tensor_util": 0, "fp64_util": 0, "fp32_util": 0,
                  "fp16_util": 0, "graphics_util": 0, "sm_util": 0, "dram_bw_util": 0,
                  "pcie_tx": 0, "pcie_rx": 0},
  "errors": {},
  "delays_ms": {}
})";

const char* kDefaultBusIds[] = {"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"};

struct XidQueued {
  unsigned int gpu;
  unsigned long long xid;
};

struct Scenario {
  json driver = json::object();
  std::vector<json> gpus;
  json errors = json::object();  // top level: any function, system ones included
  json delays = json::object();
  std::deque<XidQueued> xids;
};

struct Loaded {
  std::string path;
  struct timespec mtime {};
  off_t size = -1;
  ino_t inode = 0;
};

std::mutex g_mu;
// The scenario as last read: immutable and shared, so a call borrows it instead of copying its GPU
// (a copy per call made the fake, not the daemon, the largest CPU cost of an 8-GPU bench). A
// reload swaps the pointer; calls still holding the old one finish on it.
std::shared_ptr<const Scenario> g_sc = std::make_shared<const Scenario>();
std::deque<XidQueued> g_xids;  // the scenario's Xid events not delivered yet (event waits pop them)
Loaded g_loaded;
bool g_have_scenario = false;
SteadyClock::time_point g_last_stat{};
int g_init_count = 0;
uintptr_t g_next_set = 1;
std::map<uintptr_t, std::set<unsigned int>> g_sets;  // event set -> registered GPUs
#ifndef FAKE_NVML_LEGACY
uintptr_t g_next_sample = 1;
std::map<uintptr_t, int> g_samples;  // GPM sample buffer -> GPU it was taken on (-1: empty)
#endif

nvmlReturn_t parse_return(const json& v) {
  if (v.is_number_integer()) return v.get<int>();
  if (!v.is_string()) return NVML_ERROR_UNKNOWN;
  std::string s = v.get<std::string>();
  if (s.rfind("NVML_ERROR_", 0) == 0) s = s.substr(11);
  if (s.rfind("NVML_", 0) == 0) s = s.substr(5);
  static const std::map<std::string, nvmlReturn_t> kNames = {
      {"SUCCESS", NVML_SUCCESS},
      {"UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
      {"INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT},
      {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
      {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
      {"NOT_FOUND", NVML_ERROR_NOT_FOUND},
      {"INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE},
      {"INSUFFICIENT_POWER", NVML_ERROR_INSUFFICIENT_POWER},
      {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
      {"TIMEOUT", NVML_ERROR_TIMEOUT},
      {"IRQ_ISSUE", NVML_ERROR_IRQ_ISSUE},
      {"LIBRARY_NOT_FOUND", NVML_ERROR_LIBRARY_NOT_FOUND},
      {"FUNCTION_NOT_FOUND", NVML_ERROR_FUNCTION_NOT_FOUND},
      {"CORRUPTED_INFOROM", NVML_ERROR_CORRUPTED_INFOROM},
      {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
      {"RESET_REQUIRED", NVML_ERROR_RESET_REQUIRED},
      {"OPERATING_SYSTEM", NVML_ERROR_OPERATING_SYSTEM},
      {"LIB_RM_VERSION_MISMATCH", NVML_ERROR_LIB_RM_VERSION_MISMATCH},
      {"IN_USE", NVML_ERROR_IN_USE},
      {"MEMORY", NVML_ERROR_MEMORY},
      {"NO_DATA", NVML_ERROR_NO_DATA},
      {"ARGUMENT_VERSION_MISMATCH", NVML_ERROR_ARGUMENT_VERSION_MISMATCH},
      {"DEPRECATED", NVML_ERROR_DEPRECATED},
      {"NOT_READY", NVML_ERROR_NOT_READY},
      {"GPU_NOT_FOUND", NVML_ERROR_GPU_NOT_FOUND},
      {"INVALID_STATE", NVML_ERROR_INVALID_STATE},
      {"UNKNOWN", NVML_ERROR_UNKNOWN},
  };
  auto it = kNames.find(s);
  return it == kNames.end() ? NVML_ERROR_UNKNOWN : it->second;
}

std::string hex2(unsigned int i) {
  char b[8];
  std::snprintf(b, sizeof(b), "%02x", i & 0xffU);
  return b;
}

Scenario build(const json& doc);

// Caller holds g_mu: makes `s` the scenario, its Xid events the ones left to deliver.
void install_locked(Scenario s) {
  g_xids = std::move(s.xids);
  s.xids.clear();
  g_sc = std::make_shared<const Scenario>(std::move(s));
}

Scenario build(const json& doc) {
  Scenario s;
  s.driver = {{"version", "550.54.15"}, {"nvml_version", "12.550.54.15"}, {"cuda_version", 12040}};
  if (doc.contains("driver")) s.driver.merge_patch(doc["driver"]);
  if (doc.contains("errors")) s.errors = doc["errors"];
  if (doc.contains("delays_ms")) s.delays = doc["delays_ms"];

  json base = json::parse(kBuiltinGpu);
  if (doc.contains("defaults")) base.merge_patch(doc["defaults"]);
  std::map<unsigned int, json> per_gpu;
  unsigned int count = doc.value("count", 0U);
  if (doc.contains("gpus")) {
    const json& g = doc["gpus"];
    if (g.is_array()) {
      for (unsigned int i = 0; i < g.size(); ++i) per_gpu[i] = g[i];
      count = std::max(count, static_cast<unsigned int>(g.size()));
    } else if (g.is_object()) {
      for (auto it = g.begin(); it != g.end(); ++it) {
        per_gpu[static_cast<unsigned int>(std::stoul(it.key()))] = it.value();
      }
    }
  }
  // More GPUs than any machine holds is a typo (or a fuzzer's "count": 4294967295), not a scenario.
  constexpr unsigned int kMaxGpus = 256;
  if (count > kMaxGpus) {
    std::fprintf(stderr, "fake_nvml: %u GPUs asked for, %u made\n", count, kMaxGpus);
    count = kMaxGpus;
  }
  std::string uuid_prefix = doc.value("uuid_prefix", "GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e");
  for (unsigned int i = 0; i < count; ++i) {
    json g = base;
    g["uuid"] = uuid_prefix + hex2(i);
    std::string bus = i < 8 ? kDefaultBusIds[i] : hex2(0x10 + i * 0x10);
    for (auto& c : bus) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    g["pci_bus_id"] = "00000000:" + bus + ":00.0";
    char serial[32];
    std::snprintf(serial, sizeof(serial), "165232300%04u", 1000 + i);
    g["serial"] = serial;
    g["vbios_version"] = "96.00.89.00.01";
    g["minor"] = i;
    g["board_id"] = 0x4300 + i * 0x100;
    if (auto it = per_gpu.find(i); it != per_gpu.end()) g.merge_patch(it->second);
    s.gpus.push_back(std::move(g));
  }
  if (doc.contains("xid_events")) {
    for (const json& e : doc["xid_events"]) {
      s.xids.push_back({e.value("gpu", 0U), e.value("xid", 0ULL)});
    }
  }
  return s;
}

// Caller holds g_mu. Re-reads the scenario when $FAKE_NVML_SCENARIO or the file changed; stats the
// file at most every 100 ms.
void maybe_reload_locked() {
  const char* env = std::getenv("FAKE_NVML_SCENARIO");
  std::string path = env != nullptr ? env : "";
  auto now = SteadyClock::now();
  bool path_changed = !g_have_scenario || path != g_loaded.path;
  if (!path_changed && now - g_last_stat < std::chrono::milliseconds(100)) return;
  g_last_stat = now;
  if (path.empty()) {
    if (path_changed) {
      install_locked(build(json{{"count", 1}}));
      g_loaded = Loaded{};
      g_have_scenario = true;
    }
    return;
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (path_changed) {
      std::fprintf(stderr, "fake_nvml: cannot stat scenario %s\n", path.c_str());
      install_locked(Scenario{});
      g_loaded = Loaded{path, {}, -1, 0};
      g_have_scenario = true;
    }
    return;
  }
  if (!path_changed && st.st_mtim.tv_sec == g_loaded.mtime.tv_sec &&
      st.st_mtim.tv_nsec == g_loaded.mtime.tv_nsec && st.st_size == g_loaded.size &&
      st.st_ino == g_loaded.inode) {
    return;
  }
  try {
    std::ifstream in(path);
    json doc = json::parse(in);
    install_locked(build(doc));
    g_loaded = Loaded{path, st.st_mtim, st.st_size, st.st_ino};
    g_have_scenario = true;
  } catch (const std::exception& e) {
    // A half-written file: keep what we had and try again on a later call.
    std::fprintf(stderr, "fake_nvml: bad scenario %s: %s\n", path.c_str(), e.what());
    if (path_changed && !g_have_scenario) {
      install_locked(Scenario{});
      g_have_scenario = true;
    }
  }
}

// "nvmlDeviceGetPciInfo_v3" -> "nvmlDeviceGetPciInfo"; "nvmlDeviceGetTemperatureV" -> "...ature".
std::string base_name(const std::string& fn) {
  std::string b = fn;
  auto us = b.rfind("_v");
  if (us != std::string::npos && us + 2 < b.size() &&
      std::all_of(b.begin() + static_cast<long>(us) + 2, b.end(), ::isdigit)) {
    b.erase(us);
  }
  if (b.size() > 1 && b.back() == 'V' &&
      std::islower(static_cast<unsigned char>(b[b.size() - 2]))) {
    b.pop_back();
  }
  return b;
}

const json* lookup(const json& table, const std::string& fn, const std::string& base,
                   bool wildcard) {
  if (!table.is_object()) return nullptr;
  if (auto it = table.find(fn); it != table.end()) return &*it;
  if (auto it = table.find(base); it != table.end()) return &*it;
  if (wildcard) {
    if (auto it = table.find("*"); it != table.end()) return &*it;
  }
  return nullptr;
}

const json kNoGpu = json::object();

// What one call sees: the forced return (if any) and its GPU and driver, borrowed from the
// scenario it holds.
struct Call {
  nvmlReturn_t ret = NVML_SUCCESS;
  std::shared_ptr<const Scenario> sc;
  const json* gpu = &kNoGpu;
  const json* driver = &kNoGpu;
  unsigned int index = 0;
  unsigned int count = 0;
};

// dev: nullptr for system calls. index_call: nvmlDeviceGetHandleByIndex(index).
Call enter(const char* fn, const nvmlDevice_t* dev, const unsigned int* index_call = nullptr) {
  Call c;
  long delay_ms = 0;
  {
    std::lock_guard lock(g_mu);
    maybe_reload_locked();
    c.sc = g_sc;
    const Scenario& sc = *c.sc;
    c.count = static_cast<unsigned int>(sc.gpus.size());
    c.driver = &sc.driver;
    std::string name = fn;
    std::string base = base_name(name);
    bool is_init = base == "nvmlInit";
    if (!is_init && g_init_count == 0) {
      c.ret = NVML_ERROR_UNINITIALIZED;
      return c;
    }
    const json* gpu = nullptr;
    if (dev != nullptr || index_call != nullptr) {
      uintptr_t h = reinterpret_cast<uintptr_t>(dev != nullptr ? dev->handle : nullptr);
      unsigned int i =
          index_call != nullptr ? *index_call : static_cast<unsigned int>(h - kHandleBase);
      if ((dev != nullptr && h < kHandleBase) || i >= sc.gpus.size()) {
        c.ret = NVML_ERROR_INVALID_ARGUMENT;
        return c;
      }
      c.index = i;
      gpu = &sc.gpus[i];
      c.gpu = gpu;
    }
    const json* err = nullptr;
    const json* delay = nullptr;
    if (gpu != nullptr) {
      // "*" covers the per-device queries, not handle lookup: a lost GPU still has a handle.
      bool wildcard = index_call == nullptr;
      if (gpu->contains("errors")) err = lookup((*gpu)["errors"], name, base, wildcard);
      if (gpu->contains("delays_ms")) delay = lookup((*gpu)["delays_ms"], name, base, wildcard);
    }
    if (err == nullptr) err = lookup(sc.errors, name, base, false);
    if (delay == nullptr) delay = lookup(sc.delays, name, base, false);
    if (err != nullptr && !err->is_null()) c.ret = parse_return(*err);
    if (delay != nullptr && delay->is_number()) delay_ms = delay->get<long>();
  }
  // Sleep outside the lock: a "hung" call must not block calls from other threads.
  if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  return c;
}

const json* get(const json& g, const char* ptr) {
  try {
    json::json_pointer p(ptr);
    if (!g.contains(p)) return nullptr;
    const json& v = g.at(p);
    return v.is_null() ? nullptr : &v;
  } catch (...) {
    return nullptr;
  }
}

unsigned long long num(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_unsigned()) return v.get<unsigned long long>();
  if (v.is_number_integer()) return static_cast<unsigned long long>(v.get<long long>());
  if (v.is_number()) return static_cast<unsigned long long>(v.get<double>());
  return 0;
}

// Reads one value: NOT_SUPPORTED when absent or null.
template <typename T>
nvmlReturn_t value(const Call& c, const char* ptr, T* out) {
  if (c.ret != NVML_SUCCESS) return c.ret;
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const json* v = get(*c.gpu, ptr);
  if (v == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *out = static_cast<T>(num(*v));
  return NVML_SUCCESS;
}

nvmlReturn_t copy_string(const std::string& s, char* buf, unsigned int len) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t string_value(const Call& c, const char* ptr, char* buf, unsigned int len) {
  if (c.ret != NVML_SUCCESS) return c.ret;
  const json* v = get(*c.gpu, ptr);
  if (v == nullptr || !v->is_string()) return NVML_ERROR_NOT_SUPPORTED;
  return copy_string(v->get<std::string>(), buf, len);
}

template <typename F>
nvmlReturn_t guard(F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_nvml: %s\n", e.what());
    return NVML_ERROR_UNKNOWN;
  }
}

nvmlReturn_t do_init(const char* fn) {
  return guard([&] {
    Call c = enter(fn, nullptr);
    if (c.ret != NVML_SUCCESS) return c.ret;
    std::lock_guard lock(g_mu);
    ++g_init_count;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t do_count(const char* fn, unsigned int* count) {
  return guard([&] {
    Call c = enter(fn, nullptr);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = c.count;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t do_handle(const char* fn, unsigned int index, nvmlDevice_t* dev) {
  return guard([&] {
    Call c = enter(fn, nullptr, &index);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    dev->handle = reinterpret_cast<nvmlDevice_st*>(kHandleBase + index);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t do_pci(const char* fn, nvmlDevice_t d, nvmlPciInfo_t* pci, bool legacy) {
  return guard([&] {
    Call c = enter(fn, &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const json* id = get(*c.gpu, "/pci_bus_id");
    if (id == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    std::string s = id->get<std::string>();
    *pci = nvmlPciInfo_t{};
    unsigned int domain = 0, bus = 0, device = 0, function = 0;
    std::sscanf(s.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = device;
    pci->pciDeviceId = static_cast<unsigned int>(num(c.gpu->value("pci_device_id", json(0))));
    pci->pciSubSystemId = static_cast<unsigned int>(num(c.gpu->value("pci_subsystem_id", json(0))));
    char legacy_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    std::snprintf(legacy_id, sizeof(legacy_id), "%04x:%02x:%02x.%x", domain & 0xffffU, bus, device,
                  function);
    std::memcpy(pci->busIdLegacy, legacy_id, sizeof(legacy_id));
    if (!legacy) std::snprintf(pci->busId, sizeof(pci->busId), "%s", s.c_str());
    return NVML_SUCCESS;
  });
}

template <typename Info>
nvmlReturn_t do_processes(const char* fn, nvmlDevice_t d, unsigned int* count, Info* infos,
                          const char* key = "/processes") {
  return guard([&] {
    Call c = enter(fn, &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const json* list = get(*c.gpu, key);
    if (list == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    unsigned int n = static_cast<unsigned int>(list->size());
    if (*count < n || (n > 0 && infos == nullptr)) {
      *count = n;
      return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = n;
    for (unsigned int i = 0; i < n; ++i) {
      const json& p = (*list)[i];
      Info info{};
      info.pid = p.value("pid", 0U);
      info.usedGpuMemory = p.value("used_memory_bytes", 0ULL);
      if constexpr (sizeof(Info) == sizeof(nvmlProcessInfo_t)) {
        info.gpuInstanceId = 0xFFFFFFFFU;
        info.computeInstanceId = 0xFFFFFFFFU;
      }
      infos[i] = info;
    }
    return NVML_SUCCESS;
  });
}

nvmlReturn_t do_memory_v1(const char* fn, nvmlDevice_t d, nvmlMemory_t* m) {
  return guard([&] {
    Call c = enter(fn, &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const json* mem = get(*c.gpu, "/memory");
    if (mem == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    unsigned long long total = mem->value("total", 0ULL), used = mem->value("used", 0ULL);
    unsigned long long reserved = mem->value("reserved", 0ULL);
    m->total = total;
    m->used = used + reserved;  // v1 "used" counts the reservation
    m->free = mem->contains("free") ? num((*mem)["free"]) : total - used - reserved;
    return NVML_SUCCESS;
  });
}

// An inotify watch on the scenario file's folder for an event set's waits: readable when anything
// in it changes (a test writing or renaming a new scenario in). Closed with the set; fd -1 when
// inotify is unavailable (the wait then polls every 100 ms).
struct ScenarioWatch {
  int fd = -1;
  ScenarioWatch() {
    const char* env = std::getenv("FAKE_NVML_SCENARIO");
    if (env == nullptr || *env == '\0') return;
    std::string dir = env;
    const size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
    fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd >= 0 && inotify_add_watch(fd, dir.c_str(),
                                     IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_TO | IN_CREATE |
                                         IN_DELETE | IN_ATTRIB) < 0) {
      close(fd);
      fd = -1;
    }
  }
  ~ScenarioWatch() {
    if (fd >= 0) close(fd);
  }
  ScenarioWatch(const ScenarioWatch&) = delete;
  ScenarioWatch& operator=(const ScenarioWatch&) = delete;
  // Sleeps until the folder changes or `d` has passed; true when it changed.
  bool wait(SteadyClock::duration d) const {
    const int ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(d).count());
    if (fd < 0) {
      std::this_thread::sleep_for(
          std::min<SteadyClock::duration>(std::chrono::milliseconds(100), d));
      return true;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return false;
    char buf[4096];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    return true;
  }
};

// Each event set's watch, made at its first wait and kept until nvmlEventSetFree. A watch per wait
// (inotify_init1, inotify_add_watch and close, twice a second with the daemon's 500 ms waits) cost
// the 8-GPU bench more kernel time than the daemon's own idle work; a driver's wait is one ioctl.
// A change while no wait runs stays queued on the kept watch, so the next wait sees it at once.
std::map<uintptr_t, std::shared_ptr<ScenarioWatch>> g_set_watches;

nvmlReturn_t do_event_wait(const char* fn, nvmlEventSet_t set, nvmlEventData_t* data,
                           unsigned int timeout_ms) {
  return guard([&] {
    Call c = enter(fn, nullptr);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    auto until = SteadyClock::now() + std::chrono::milliseconds(timeout_ms);
    auto key = reinterpret_cast<uintptr_t>(set.handle);
    // A real driver blocks in the kernel until an event or the timeout. So does this wait: it
    // wakes when the scenario's folder changes (new Xid events to deliver), not on a timer, so
    // the fake charges no idle CPU to the daemon that waits.
    std::shared_ptr<ScenarioWatch> watch;
    bool changed = false;
    while (true) {
      {
        std::lock_guard lock(g_mu);
        auto s = g_sets.find(key);
        if (s == g_sets.end()) return NVML_ERROR_INVALID_ARGUMENT;
        bool new_watch = false;
        if (!watch) {
          auto& kept = g_set_watches[key];
          new_watch = kept == nullptr;
          if (new_watch) kept = std::make_shared<ScenarioWatch>();
          watch = kept;
        }
        // The kept watch says when the folder changed (since the last wait too): the file is
        // looked at then, or when there is no watch to say so, not at every wait.
        if (changed) g_last_stat = {};  // re-read now: the file may have changed
        if (changed || new_watch || watch->fd < 0) maybe_reload_locked();
        for (auto it = g_xids.begin(); it != g_xids.end(); ++it) {
          if (s->second.count(it->gpu) == 0) continue;
          *data = nvmlEventData_t{};
          data->device.handle = reinterpret_cast<nvmlDevice_st*>(kHandleBase + it->gpu);
          data->eventType = nvmlEventTypeXidCriticalError;
          data->eventData = it->xid;
          data->gpuInstanceId = 0xFFFFFFFFU;
          data->computeInstanceId = 0xFFFFFFFFU;
          g_xids.erase(it);
          return NVML_SUCCESS;
        }
      }
      auto now = SteadyClock::now();
      if (now >= until) return NVML_ERROR_TIMEOUT;
      changed = watch->wait(until - now);
    }
  });
}

#ifndef FAKE_NVML_LEGACY
void fill_uuid16(const std::string& text, unsigned char* out) {
  std::string hex;
  for (char ch : text) {
    if (std::isxdigit(static_cast<unsigned char>(ch))) hex.push_back(ch);
  }
  for (int i = 0; i < NVML_GPU_FABRIC_UUID_LEN; ++i) {
    unsigned int b = 0;
    if (hex.size() >= static_cast<size_t>(2 * i + 2)) {
      std::sscanf(hex.substr(static_cast<size_t>(2 * i), 2).c_str(), "%x", &b);
    }
    out[i] = static_cast<unsigned char>(b);
  }
}
#endif

const char* location_name(int loc) {
  static const char* kNames[] = {"l1",          "l2",  "dram", "register_file", "texture_memory",
                                 "texture_shm", "cbu", "sram"};
  return loc >= 0 && loc < kMemoryLocationCount ? kNames[loc] : nullptr;
}

std::string ecc_key(int type, int counter) {
  std::string k = counter == NVML_AGGREGATE_ECC ? "aggregate_" : "volatile_";
  return k + (type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED ? "uncorrected" : "corrected");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Exported entry points.

FAKE_EXPORT nvmlReturn_t nvmlInit() { return do_init("nvmlInit"); }
FAKE_EXPORT nvmlReturn_t nvmlShutdown() {
  std::lock_guard lock(g_mu);
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --g_init_count;
  return NVML_SUCCESS;
}
FAKE_EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires reset";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
  }
}
FAKE_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned int len) {
  return guard([&] {
    Call c = enter("nvmlSystemGetDriverVersion", nullptr);
    if (c.ret != NVML_SUCCESS) return c.ret;
    return copy_string(c.driver->value("version", ""), v, len);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* v, unsigned int len) {
  return guard([&] {
    Call c = enter("nvmlSystemGetNVMLVersion", nullptr);
    if (c.ret != NVML_SUCCESS) return c.ret;
    return copy_string(c.driver->value("nvml_version", ""), v, len);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) {
  return guard([&] {
    Call c = enter("nvmlSystemGetCudaDriverVersion", nullptr);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (v == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *v = c.driver->value("cuda_version", 0);
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* n) {
  return do_count("nvmlDeviceGetCount", n);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t* d) {
  return do_handle("nvmlDeviceGetHandleByIndex", i, d);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfo_t* p) {
  return do_pci("nvmlDeviceGetPciInfo", d, p, true);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int* n,
                                                              nvmlProcessInfo_v1_t* p) {
  return do_processes("nvmlDeviceGetComputeRunningProcesses", d, n, p);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int* n,
                                                               nvmlProcessInfo_v1_t* p) {
  return do_processes("nvmlDeviceGetGraphicsRunningProcesses", d, n, p, "/graphics_processes");
}
FAKE_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t s, nvmlEventData_t* e, unsigned int t) {
  return do_event_wait("nvmlEventSetWait", s, e, t);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  return do_memory_v1("nvmlDeviceGetMemoryInfo", d, m);
}

#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlInit_v2() { return do_init("nvmlInit_v2"); }
FAKE_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
  return guard([&] {
    Call c = enter("nvmlSystemGetCudaDriverVersion_v2", nullptr);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (v == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *v = c.driver->value("cuda_version", 0);
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) {
  return do_count("nvmlDeviceGetCount_v2", n);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  return do_handle("nvmlDeviceGetHandleByIndex_v2", i, d);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t* p) {
  return do_pci("nvmlDeviceGetPciInfo_v2", d, p, false);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* p) {
  return do_pci("nvmlDeviceGetPciInfo_v3", d, p, false);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int* n,
                                                                 nvmlProcessInfo_t* p) {
  return do_processes("nvmlDeviceGetComputeRunningProcesses_v2", d, n, p);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* n,
                                                                 nvmlProcessInfo_t* p) {
  return do_processes("nvmlDeviceGetComputeRunningProcesses_v3", d, n, p);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int* n,
                                                                  nvmlProcessInfo_t* p) {
  return do_processes("nvmlDeviceGetGraphicsRunningProcesses_v2", d, n, p, "/graphics_processes");
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int* n,
                                                                  nvmlProcessInfo_t* p) {
  return do_processes("nvmlDeviceGetGraphicsRunningProcesses_v3", d, n, p, "/graphics_processes");
}
FAKE_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t s, nvmlEventData_t* e, unsigned int t) {
  return do_event_wait("nvmlEventSetWait_v2", s, e, t);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t* m) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetMemoryInfo_v2", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const json* mem = get(*c.gpu, "/memory");
    if (mem == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    m->total = mem->value("total", 0ULL);
    m->reserved = mem->value("reserved", 0ULL);
    m->used = mem->value("used", 0ULL);
    m->free = mem->contains("free") ? num((*mem)["free"]) : m->total - m->used - m->reserved;
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t d, nvmlTemperature_t* t) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetTemperatureV", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (t == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const char* ptr = t->sensorType == NVML_TEMPERATURE_GPU    ? "/temperature_c"
                      : t->sensorType == kTemperatureSensorHbm ? "/temperature_hbm_c"
                                                               : nullptr;
    if (ptr == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return value(c, ptr, &t->temperature);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d,
                                                                unsigned long long* r) {
  return guard([&] {
    return value(enter("nvmlDeviceGetCurrentClocksEventReasons", &d), "/clocks_event_reasons", r);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d, nvmlGpuFabricInfoV_t* f) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetGpuFabricInfoV", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (f == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (f->version != nvmlGpuFabricInfo_v3 && f->version != nvmlGpuFabricInfo_v2) {
      return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    const json* fab = get(*c.gpu, "/fabric");
    if (fab == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    unsigned int version = f->version;
    *f = nvmlGpuFabricInfoV_t{};
    f->version = version;
    fill_uuid16(fab->value("cluster_uuid", ""), f->clusterUuid);
    f->status = fab->contains("status") ? parse_return((*fab)["status"]) : NVML_SUCCESS;
    f->cliqueId = fab->value("clique_id", 0U);
    f->state = static_cast<nvmlGpuFabricState_t>(fab->value("state", 0U));
    f->healthMask = fab->value("health_mask", 0U);
    if (version == nvmlGpuFabricInfo_v3) {
      f->healthSummary = static_cast<unsigned char>(fab->value("health_summary", 0U));
    }
    return NVML_SUCCESS;
  });
}
// "platform": {"chassis_serial", "slot", "tray", "host_id", "module_id"}; absent or null:
// NOT_SUPPORTED (every GPU before GB200). A serial of 16 characters fills the array without a NUL,
// as NVML's.
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPlatformInfo(nvmlDevice_t d, nvmlPlatformInfo_t* p) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetPlatformInfo", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (p->version != nvmlPlatformInfo_v2 && p->version != struct_version(sizeof(*p), 1))
      return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const json* info = get(*c.gpu, "/platform");
    if (info == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    const unsigned int version = p->version;
    *p = nvmlPlatformInfo_t{};
    p->version = version;
    const std::string serial = info->value("chassis_serial", "");
    std::memcpy(p->chassisSerialNumber, serial.data(),
                std::min(serial.size(), sizeof(p->chassisSerialNumber)));
    p->slotNumber = static_cast<unsigned char>(info->value("slot", 0U));
    p->trayIndex = static_cast<unsigned char>(info->value("tray", 0U));
    p->hostId = static_cast<unsigned char>(info->value("host_id", 0U));
    p->moduleId = static_cast<unsigned char>(info->value("module_id", 0U));
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t d, nvmlGpuFabricInfo_t* f) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetGpuFabricInfo", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (f == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const json* fab = get(*c.gpu, "/fabric");
    if (fab == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    *f = nvmlGpuFabricInfo_t{};
    fill_uuid16(fab->value("cluster_uuid", ""), f->clusterUuid);
    f->status = fab->contains("status") ? parse_return((*fab)["status"]) : NVML_SUCCESS;
    f->cliqueId = fab->value("clique_id", 0U);
    f->state = static_cast<nvmlGpuFabricState_t>(fab->value("state", 0U));
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t* s) {
  return guard([&] {
    Call c = enter("nvmlGpmQueryDeviceSupport", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (s == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (s->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const json* v = get(*c.gpu, "/gpm_supported");
    s->isSupportedDevice = v != nullptr && num(*v) != 0 ? 1 : 0;
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  return guard([&] {
    Call c = enter("nvmlGpmSampleAlloc", nullptr);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::lock_guard lock(g_mu);
    uintptr_t key = g_next_sample++;
    g_samples[key] = -1;
    sample->handle = reinterpret_cast<nvmlGpmSample_st*>(key);
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  std::lock_guard lock(g_mu);
  return g_samples.erase(reinterpret_cast<uintptr_t>(sample.handle)) == 1
             ? NVML_SUCCESS
             : NVML_ERROR_INVALID_ARGUMENT;
}
FAKE_EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, nvmlGpmSample_t sample) {
  return guard([&] {
    Call c = enter("nvmlGpmSampleGet", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    const json* v = get(*c.gpu, "/gpm_supported");
    if (v == nullptr || num(*v) == 0) return NVML_ERROR_NOT_SUPPORTED;
    std::lock_guard lock(g_mu);
    auto it = g_samples.find(reinterpret_cast<uintptr_t>(sample.handle));
    if (it == g_samples.end()) return NVML_ERROR_INVALID_ARGUMENT;
    it->second = static_cast<int>(c.index);
    return NVML_SUCCESS;
  });
}
// Values come from the GPU's `gpm_metrics` object (by GPUd's metric name); a metric missing there
// answers NOT_SUPPORTED in its own nvmlReturn.
FAKE_EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* req) {
  return guard([&] {
    if (req == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (req->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (req->numMetrics > kGpmMetricArraySize) return NVML_ERROR_INVALID_ARGUMENT;
    int gpu = -1;
    {
      std::lock_guard lock(g_mu);
      auto a = g_samples.find(reinterpret_cast<uintptr_t>(req->sample1.handle));
      auto b = g_samples.find(reinterpret_cast<uintptr_t>(req->sample2.handle));
      if (a == g_samples.end() || b == g_samples.end() || a->second < 0 || a->second != b->second ||
          a == b)
        return NVML_ERROR_INVALID_ARGUMENT;
      gpu = a->second;
    }
    nvmlDevice_t d{reinterpret_cast<nvmlDevice_st*>(kHandleBase + static_cast<unsigned>(gpu))};
    Call g = enter("nvmlGpmMetricsGet", &d);
    if (g.ret != NVML_SUCCESS) return g.ret;
    for (unsigned int i = 0; i < req->numMetrics; ++i) {
      nvmlGpmMetric_t& m = req->metrics[i];
      m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      m.value = 0;
      const auto* spec = std::find_if(kGpmMetrics.begin(), kGpmMetrics.end(),
                                      [&](const GpmMetricSpec& x) { return x.id == m.metricId; });
      if (spec == kGpmMetrics.end()) continue;
      const json* v = get(*g.gpu, (std::string("/gpm_metrics/") + spec->name).c_str());
      if (v == nullptr || !v->is_number()) continue;
      m.value = v->get<double>();
      m.nvmlReturn = NVML_SUCCESS;
    }
    return NVML_SUCCESS;
  });
}
#endif  // FAKE_NVML_LEGACY

// A pair's NVLink P2P status: the first non-OK `p2p_nvlink_status` of the two GPUs (default 0, OK);
// NOT_SUPPORTED for any caps index but NVLink.
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t d1, nvmlDevice_t d2,
                                                nvmlGpuP2PCapsIndex_t index,
                                                nvmlGpuP2PStatus_t* status) {
  return guard([&] {
    Call a = enter("nvmlDeviceGetP2PStatus", &d1);
    if (a.ret != NVML_SUCCESS) return a.ret;
    Call b = enter("nvmlDeviceGetP2PStatus", &d2);
    if (b.ret != NVML_SUCCESS) return b.ret;
    if (status == nullptr || a.index == b.index) return NVML_ERROR_INVALID_ARGUMENT;
    if (index != NVML_P2P_CAPS_INDEX_NVLINK) return NVML_ERROR_NOT_SUPPORTED;
    const json* sa = get(*a.gpu, "/p2p_nvlink_status");
    const json* sb = get(*b.gpu, "/p2p_nvlink_status");
    int va = sa != nullptr ? static_cast<int>(num(*sa)) : NVML_P2P_STATUS_NOT_SUPPORTED;
    int vb = sb != nullptr ? static_cast<int>(num(*sb)) : NVML_P2P_STATUS_NOT_SUPPORTED;
    *status = va != NVML_P2P_STATUS_OK ? va : vb;
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
                                                                   unsigned long long* r) {
  return guard([&] {
    return value(enter("nvmlDeviceGetCurrentClocksThrottleReasons", &d), "/clocks_event_reasons",
                 r);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* b, unsigned int n) {
  return guard([&] { return string_value(enter("nvmlDeviceGetName", &d), "/name", b, n); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* b, unsigned int n) {
  return guard([&] { return string_value(enter("nvmlDeviceGetUUID", &d), "/uuid", b, n); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char* b, unsigned int n) {
  return guard([&] { return string_value(enter("nvmlDeviceGetSerial", &d), "/serial", b, n); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t d, char* b, unsigned int n) {
  return guard(
      [&] { return string_value(enter("nvmlDeviceGetVbiosVersion", &d), "/vbios_version", b, n); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int* v) {
  return guard([&] { return value(enter("nvmlDeviceGetMinorNumber", &d), "/minor", v); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t d, unsigned int* v) {
  return guard([&] { return value(enter("nvmlDeviceGetBoardId", &d), "/board_id", v); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int* v) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetIndex", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (v == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *v = c.index;
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int* major,
                                                            int* minor) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetCudaComputeCapability", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const json* cc = get(*c.gpu, "/cuda_compute_capability");
    if (cc == nullptr || !cc->is_array() || cc->size() != 2) return NVML_ERROR_NOT_SUPPORTED;
    *major = (*cc)[0].get<int>();
    *minor = (*cc)[1].get<int>();
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t d, int* v) {
  return guard([&] { return value(enter("nvmlDeviceGetBrand", &d), "/brand", v); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int* v) {
  return guard(
      [&] { return value(enter("nvmlDeviceGetPersistenceMode", &d), "/persistence_mode", v); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, int* v) {
  return guard([&] { return value(enter("nvmlDeviceGetComputeMode", &d), "/compute_mode", v); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int* v) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetTemperature", &d);
    if (sensor == NVML_TEMPERATURE_GPU) return value(c, "/temperature_c", v);
    if (sensor == kTemperatureSensorHbm) return value(c, "/temperature_hbm_c", v);
    return c.ret != NVML_SUCCESS ? c.ret : NVML_ERROR_INVALID_ARGUMENT;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, int t, unsigned int* v) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetTemperatureThreshold", &d);
    static const char* kPtrs[] = {"/thresholds_c/shutdown", "/thresholds_c/slowdown",
                                  "/thresholds_c/mem_max", "/thresholds_c/gpu_max"};
    if (t < 0 || t > 3) return c.ret != NVML_SUCCESS ? c.ret : NVML_ERROR_NOT_SUPPORTED;
    return value(c, kPtrs[t], v);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMarginTemperature(nvmlDevice_t d,
                                                        nvmlMarginTemperature_t* m) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetMarginTemperature", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != nvmlMarginTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    return value(c, "/margin_temperature_c", &m->marginTemperature);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* v) {
  return guard([&] { return value(enter("nvmlDeviceGetPowerUsage", &d), "/power_usage_mw", v); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d,
                                                             unsigned long long* v) {
  return guard([&] {
    return value(enter("nvmlDeviceGetTotalEnergyConsumption", &d), "/total_energy_mj", v);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int* v) {
  return guard([&] {
    return value(enter("nvmlDeviceGetEnforcedPowerLimit", &d), "/power_enforced_limit_mw", v);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int* v) {
  return guard([&] {
    return value(enter("nvmlDeviceGetPowerManagementLimit", &d), "/power_management_limit_mw", v);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int* v) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetClockInfo", &d);
    if (type == NVML_CLOCK_GRAPHICS) return value(c, "/clocks_mhz/graphics", v);
    if (type == NVML_CLOCK_SM) return value(c, "/clocks_mhz/sm", v);
    if (type == NVML_CLOCK_MEM) return value(c, "/clocks_mhz/memory", v);
    return c.ret != NVML_SUCCESS ? c.ret : NVML_ERROR_NOT_SUPPORTED;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetUtilizationRates", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (u == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = value(c, "/utilization/gpu", &u->gpu);
    return r != NVML_SUCCESS ? r : value(c, "/utilization/memory", &u->memory);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, int* cur, int* pend) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetEccMode", &d);
    nvmlReturn_t r = value(c, "/ecc_mode/current", cur);
    return r != NVML_SUCCESS ? r : value(c, "/ecc_mode/pending", pend);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter,
                                                     unsigned long long* v) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetTotalEccErrors", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (get(*c.gpu, "/ecc") == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    std::string ptr = "/ecc/" + ecc_key(type, counter);
    if (get(*c.gpu, ptr.c_str()) == nullptr) {
      if (v == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
      *v = 0;
      return NVML_SUCCESS;
    }
    return value(c, ptr.c_str(), v);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t d, int type, int counter,
                                                         int location, unsigned long long* v) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetMemoryErrorCounter", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (v == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const char* loc = location_name(location);
    if (loc == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::string base = std::string("/ecc/locations/") + loc;
    if (get(*c.gpu, base.c_str()) == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    const json* n = get(*c.gpu, (base + "/" + ecc_key(type, counter)).c_str());
    *v = n != nullptr ? num(*n) : 0;
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int* corr,
                                                   unsigned int* unc, unsigned int* pending,
                                                   unsigned int* failure) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetRemappedRows", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (get(*c.gpu, "/remapped_rows") == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    nvmlReturn_t r = value(c, "/remapped_rows/corrected", corr);
    if (r == NVML_SUCCESS) r = value(c, "/remapped_rows/uncorrected", unc);
    if (r == NVML_SUCCESS) r = value(c, "/remapped_rows/pending", pending);
    if (r == NVML_SUCCESS) r = value(c, "/remapped_rows/failure", failure);
    return r;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned int* count,
                                                   unsigned long long* addresses) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetRetiredPages", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int n = 0;
    nvmlReturn_t r = value(c,
                           cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
                               ? "/retired_pages/double_bit"
                               : "/retired_pages/single_bit",
                           &n);
    if (r != NVML_SUCCESS) return r;
    if (*count < n || addresses == nullptr) {
      *count = n;
      return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < n; ++i) addresses[i] = 0x1000ULL * (i + 1);
    *count = n;
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int* v) {
  return guard([&] {
    return value(enter("nvmlDeviceGetRetiredPagesPendingStatus", &d), "/retired_pages/pending", v);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int* v) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetNvLinkState", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (v == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const json* nv = get(*c.gpu, "/nvlink");
    if (nv == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= nv->value("links", 0U)) return NVML_ERROR_INVALID_ARGUMENT;
    bool down = false;
    if (nv->contains("down")) {
      for (const json& l : (*nv)["down"]) down = down || l.get<unsigned int>() == link;
    }
    *v = down ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t d, unsigned int link,
                                                         int counter, unsigned long long* v) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetNvLinkErrorCounter", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (v == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const json* nv = get(*c.gpu, "/nvlink");
    if (nv == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= nv->value("links", 0U)) return NVML_ERROR_INVALID_ARGUMENT;
    static const char* kNames[] = {"replay", "recovery", "crc_flit", "crc_data", "ecc_data"};
    if (counter < 0 || counter > 4) return NVML_ERROR_INVALID_ARGUMENT;
    std::string per = "/nvlink/link_counters/" + std::to_string(link) + "/" + kNames[counter];
    std::string all = std::string("/nvlink/counters/") + kNames[counter];
    const json* n = get(*c.gpu, per.c_str());
    if (n == nullptr) n = get(*c.gpu, all.c_str());
    *v = n != nullptr ? num(*n) : 0;
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned int* v) {
  return guard([&] {
    return value(enter("nvmlDeviceGetPcieReplayCounter", &d), "/pcie/replay_counter", v);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int* v) {
  return guard(
      [&] { return value(enter("nvmlDeviceGetCurrPcieLinkGeneration", &d), "/pcie/gen", v); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int* v) {
  return guard(
      [&] { return value(enter("nvmlDeviceGetCurrPcieLinkWidth", &d), "/pcie/width", v); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int* v) {
  return guard(
      [&] { return value(enter("nvmlDeviceGetMaxPcieLinkGeneration", &d), "/pcie/max_gen", v); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int* v) {
  return guard(
      [&] { return value(enter("nvmlDeviceGetMaxPcieLinkWidth", &d), "/pcie/max_width", v); });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGspFirmwareMode(nvmlDevice_t d, unsigned int* enabled,
                                                      unsigned int* def) {
  return guard([&] {
    Call c = enter("nvmlDeviceGetGspFirmwareMode", &d);
    nvmlReturn_t r = value(c, "/gsp_firmware/enabled", enabled);
    return r != NVML_SUCCESS ? r : value(c, "/gsp_firmware/default", def);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGspFirmwareVersion(nvmlDevice_t d, char* v) {
  return guard([&] {
    return string_value(enter("nvmlDeviceGetGspFirmwareVersion", &d), "/gsp_firmware/version", v,
                        NVML_GSP_FIRMWARE_VERSION_BUF_SIZE);
  });
}
FAKE_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  return guard([&] {
    Call c = enter("nvmlEventSetCreate", nullptr);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::lock_guard lock(g_mu);
    uintptr_t key = g_next_set++;
    g_sets[key] = {};
    set->handle = reinterpret_cast<nvmlEventSet_st*>(key);
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  std::lock_guard lock(g_mu);
  g_set_watches.erase(reinterpret_cast<uintptr_t>(set.handle));  // a wait still running keeps it
  return g_sets.erase(reinterpret_cast<uintptr_t>(set.handle)) == 1 ? NVML_SUCCESS
                                                                    : NVML_ERROR_INVALID_ARGUMENT;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types,
                                                  nvmlEventSet_t set) {
  return guard([&] {
    Call c = enter("nvmlDeviceRegisterEvents", &d);
    if (c.ret != NVML_SUCCESS) return c.ret;
    if ((types & nvmlEventTypeXidCriticalError) == 0) return NVML_ERROR_NOT_SUPPORTED;
    std::lock_guard lock(g_mu);
    auto it = g_sets.find(reinterpret_cast<uintptr_t>(set.handle));
    if (it == g_sets.end()) return NVML_ERROR_INVALID_ARGUMENT;
    it->second.insert(c.index);
    return NVML_SUCCESS;
  });
}
