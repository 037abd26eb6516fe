#include "nvml/xid_watcher.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/log.h"
#include "nvml/device.h"

namespace gpud::nvml {

struct XidWatcher::State {
  std::shared_ptr<const Library> lib;
  nvmlEventSet_t set{};
  struct Gpu {
    nvmlDevice_t device;
    std::string uuid;
    std::string bus_id;
  };
  std::vector<Gpu> gpus;
  std::chrono::milliseconds wait_timeout{500};

  std::mutex mu;  // held while the callback runs, so stop() can fence it
  Callback callback;
  bool stopping = false;
  std::atomic<bool> stop_flag{false};
  std::condition_variable exited_cv;
  bool exited = false;
  std::thread thread;

  static void loop(const std::shared_ptr<State>& s) {
    const Api& a = s->lib->api;
    while (!s->stop_flag.load()) {
      nvmlEventData_t data{};
      nvmlReturn_t ret =
          a.event_set_wait(s->set, &data, static_cast<unsigned int>(s->wait_timeout.count()));
      if (ret == NVML_ERROR_TIMEOUT) continue;
      if (ret != NVML_SUCCESS) {
        // E.g. GPU_IS_LOST: the set stays usable for the other GPUs; back off instead of spinning.
        logger("nvml")->debug("nvmlEventSetWait: {}", error_text(a, ret));
        std::this_thread::sleep_for(s->wait_timeout);
        continue;
      }
      if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
      XidEvent e;
      e.xid = data.eventData;
      e.time = std::chrono::system_clock::now();
      for (size_t i = 0; i < s->gpus.size(); ++i) {
        if (s->gpus[i].device.handle == data.device.handle) {
          e.gpu_index = static_cast<unsigned int>(i);
          e.uuid = s->gpus[i].uuid;
          e.pci_bus_id = s->gpus[i].bus_id;
          break;
        }
      }
      std::lock_guard lock(s->mu);
      if (s->stopping) break;
      if (s->callback) s->callback(e);
    }
    std::lock_guard lock(s->mu);
    s->exited = true;
    s->exited_cv.notify_all();
  }
};

Result<std::unique_ptr<XidWatcher>> XidWatcher::start(Nvml& nvml, Callback callback,
                                                      std::chrono::milliseconds wait_timeout,
                                                      std::chrono::milliseconds deadline) {
  if (!nvml.ready()) return make_error(nvml.message());
  std::shared_ptr<const Library> lib = nvml.library();
  const Api& a = lib->api;
  if (a.event_set_create == nullptr || a.register_events == nullptr ||
      a.event_set_wait == nullptr) {
    return make_error("NVML events not supported by this driver");
  }
  auto st = std::make_shared<State>();
  st->lib = lib;
  st->wait_timeout = wait_timeout;
  st->callback = std::move(callback);
  std::vector<nvmlDevice_t> devices = nvml.devices();

  struct Setup {
    nvmlEventSet_t set{};
    std::vector<State::Gpu> gpus;
    std::string error;
  };
  auto setup = nvml.worker().call(
      [lib, devices] {
        const Api& a = lib->api;
        Setup s;
        nvmlReturn_t ret = a.event_set_create(&s.set);
        if (ret != NVML_SUCCESS) {
          s.error = "nvmlEventSetCreate: " + error_text(a, ret);
          return s;
        }
        int registered = 0;
        for (size_t i = 0; i < devices.size(); ++i) {
          State::Gpu g{devices[i], "", ""};
          char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
          if (a.uuid != nullptr && a.uuid(devices[i], uuid, sizeof(uuid)) == NVML_SUCCESS) {
            g.uuid = uuid;
          }
          nvmlPciInfo_t pci{};
          if (a.pci_info != nullptr && a.pci_info(devices[i], &pci) == NVML_SUCCESS) {
            pci.busId[sizeof(pci.busId) - 1] = '\0';
            pci.busIdLegacy[sizeof(pci.busIdLegacy) - 1] = '\0';
            g.bus_id = normalize_pci_bus_id(pci.busId[0] != '\0' ? pci.busId : pci.busIdLegacy);
          }
          // NOT_SUPPORTED or GPU_IS_LOST on one GPU leaves the set usable for the others.
          ret = a.register_events(devices[i], nvmlEventTypeXidCriticalError, s.set);
          if (ret == NVML_SUCCESS) {
            ++registered;
          } else {
            logger("nvml")->info("Xid events not registered for GPU {}: {}", i, error_text(a, ret));
          }
          s.gpus.push_back(std::move(g));
        }
        if (registered == 0 && !devices.empty()) {
          if (a.event_set_free != nullptr) (void)a.event_set_free(s.set);
          s.error = "no GPU accepted Xid event registration";
        }
        return s;
      },
      deadline);
  if (!setup.ok()) return setup.error();
  if (!setup->error.empty()) return make_error(setup->error);
  st->set = setup->set;
  st->gpus = std::move(setup->gpus);
  st->thread = std::thread([st] { State::loop(st); });
  return std::unique_ptr<XidWatcher>(new XidWatcher(nvml, st));
}

XidWatcher::~XidWatcher() { stop(); }

void XidWatcher::stop() {
  std::unique_lock lock(state_->mu);
  if (!state_->thread.joinable()) return;
  state_->stopping = true;
  state_->stop_flag = true;
  bool exited = state_->exited_cv.wait_for(lock, state_->wait_timeout * 2 + std::chrono::seconds(1),
                                           [&] { return state_->exited; });
  std::thread t = std::move(state_->thread);
  lock.unlock();
  if (!exited) {
    logger("nvml")->warn("Xid watcher stuck in nvmlEventSetWait; detached it");
    t.detach();
    return;
  }
  t.join();
  std::shared_ptr<const Library> lib = state_->lib;
  nvmlEventSet_t set = state_->set;
  if (lib->api.event_set_free != nullptr && !nvml_.worker().stuck()) {
    auto r = nvml_.worker().run([lib, set] { (void)lib->api.event_set_free(set); },
                                std::chrono::seconds(2));
    if (!r.ok()) logger("nvml")->warn("nvmlEventSetFree: {}", r.error().message);
  }
}

}  // namespace gpud::nvml
