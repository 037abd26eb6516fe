#include "runtimes/attribution.h"

#include "host/proc_pid_stat.h"

namespace gpud::runtimes {

Attribution attribute(const CgroupIdentity& id, const ContainerDirectory* directory) {
  Attribution a;
  a.container_id = id.container_id;
  a.pod_uid = id.pod_uid;
  a.source = "cgroup";
  if (directory == nullptr) return a;
  if (!id.container_id.empty()) {
    if (auto c = directory->find(id.container_id)) {
      a.container = c->name;
      a.pod = c->pod_name;
      a.pod_namespace = c->pod_namespace;
      if (a.pod_uid.empty()) a.pod_uid = c->pod_uid;
      a.source = c->source;
      return a;
    }
  }
  if (!id.pod_uid.empty()) {
    for (const ContainerInfo& c : directory->all()) {
      if (c.pod_uid != id.pod_uid || c.pod_name.empty()) continue;
      a.pod = c.pod_name;
      a.pod_namespace = c.pod_namespace;
      a.source = c.source;
      break;
    }
  }
  return a;
}

std::optional<Attribution> attribute_pid(const host::HostFs& fs,
                                         const ContainerDirectory* directory, uint32_t pid) {
  auto id = read_process_cgroup(fs, pid);
  if (!id || !*id) return std::nullopt;
  return attribute(**id, directory);
}

void add_attribution(const Attribution& a, nlohmann::json& object) {
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) object[key] = v;
  };
  put("container_id", a.container_id);
  put("container", a.container);
  put("pod", a.pod);
  put("namespace", a.pod_namespace);
  put("pod_uid", a.pod_uid);
  put("attribution_source", a.source);
}

std::optional<double> process_start_seconds(const host::HostFs& fs, uint32_t pid) {
  auto stat = host::read_proc_pid_stat(fs, pid);
  if (!stat) return std::nullopt;
  auto after = host::started_after_boot(*stat);
  if (!after) return std::nullopt;
  return after->count();
}

}  // namespace gpud::runtimes
