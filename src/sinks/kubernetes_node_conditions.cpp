#include "sinks/kubernetes_node_conditions.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/pci_address.h"
#include "core/strings.h"
#include "core/time_util.h"

namespace gpud::sinks {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string action_text(const std::optional<RepairAction>& a) {
  return a ? fmt::format(" (suggested action {})", to_string(*a)) : std::string();
}

std::optional<RepairAction> first_action(const HealthState& s) {
  if (!s.suggested_actions || s.suggested_actions->repair_actions.empty()) return std::nullopt;
  return s.suggested_actions->repair_actions.front();
}

// `text` cut to kMaxMessageBytes at a character boundary, saying how much was left out.
std::string bounded(std::string text) {
  if (text.size() <= kMaxMessageBytes) return text;
  const std::string more = fmt::format(" ... ({} more bytes)", text.size());
  return std::string(utf8_prefix(text, kMaxMessageBytes - more.size())) + more;
}

std::string node_path(const std::string& node) { return "/api/v1/nodes/" + node; }

}  // namespace

const std::vector<ConditionKind>& condition_kinds() {
  static const std::vector<ConditionKind> kKinds = {
      {"GpudGPUProblem", ConditionScope::kGpu, "GPUUnhealthy", "GPUsHealthy"},
      {"GpudKernelProblem", ConditionScope::kKernel, "KernelUnhealthy", "KernelHealthy"},
      {"GpudRuntimeProblem", ConditionScope::kRuntime, "RuntimeUnhealthy", "RuntimeHealthy"},
  };
  return kKinds;
}

std::optional<ConditionScope> scope_of(const HealthState& s) {
  if (s.component_type == "custom-plugin" || s.component == components::kGpudComponent)
    return std::nullopt;
  if (s.component.rfind("accelerator-", 0) == 0 || s.component == "library")
    return ConditionScope::kGpu;
  if (s.component == "containerd" || s.component == "docker" || s.component == "kubelet")
    return ConditionScope::kRuntime;
  return ConditionScope::kKernel;
}

std::vector<NodeCondition> judge_conditions(const NodeHealthInputs& in) {
  std::vector<NodeCondition> out;
  for (const ConditionKind& kind : condition_kinds()) {
    bool known = false;
    std::vector<const HealthState*> unhealthy;
    std::set<std::string> seen;
    size_t checked = 0;
    for (const HealthState& s : in.states) {
      if (scope_of(s) != kind.scope) continue;
      if (s.health != Health::kInitializing) known = true;
      if (seen.insert(s.component).second) ++checked;
      if (s.health == Health::kUnhealthy) unhealthy.push_back(&s);
    }
    if (!known) continue;
    NodeCondition c;
    c.type = kind.type;
    c.problem = !unhealthy.empty();
    c.reason = c.problem ? kind.problem_reason : kind.ok_reason;
    if (!c.problem) {
      c.message = fmt::format("gpud finds no Unhealthy component ({} checked)", checked);
      out.push_back(std::move(c));
      continue;
    }
    std::vector<std::string> parts;
    std::set<std::string> named;  // components already named with a GPU
    if (kind.scope == ConditionScope::kGpu) {
      for (const components::GpuHealth& g : in.gpus) {
        for (const components::GpuHealthCause& cause : g.causes) {
          if (cause.health != Health::kUnhealthy) continue;
          parts.push_back(fmt::format("GPU {} (bus {}, {}): {}: {}{}", g.index,
                                      normalize_pci_bus_id(g.pci_bus_id), g.uuid, cause.component,
                                      cause.reason, action_text(cause.action)));
          c.subjects.push_back(fmt::format("gpu {} {}", g.index, cause.component));
          named.insert(cause.component);
        }
      }
    }
    for (const HealthState* s : unhealthy) {
      if (named.count(s->component) != 0) continue;
      named.insert(s->component);
      parts.push_back(
          fmt::format("{}: {}{}", s->component, s->reason, action_text(first_action(*s))));
      c.subjects.push_back(s->component);
    }
    std::sort(c.subjects.begin(), c.subjects.end());
    c.message = bounded(join(parts, "; "));
    out.push_back(std::move(c));
  }
  return out;
}

nlohmann::json status_patch(const std::vector<NodeCondition>& conditions,
                            const std::map<std::string, std::string>& since, TimePoint now) {
  const std::string now_text = format_rfc3339(now);
  nlohmann::json list = nlohmann::json::array();
  for (const NodeCondition& c : conditions) {
    auto it = since.find(c.type);
    list.push_back({{"type", c.type},
                    {"status", c.problem ? "True" : "False"},
                    {"reason", c.reason},
                    {"message", c.message},
                    {"lastHeartbeatTime", now_text},
                    {"lastTransitionTime", it != since.end() ? it->second : now_text}});
  }
  return {{"status", {{"conditions", std::move(list)}}}};
}

nlohmann::json transition_event(const std::string& node, const std::string& node_uid,
                                const std::string& event_namespace, const NodeCondition& c,
                                TimePoint now) {
  const std::string now_text = format_rfc3339(now);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch());
  std::string type_lower = c.type;
  std::transform(type_lower.begin(), type_lower.end(), type_lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  nlohmann::json involved = {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}};
  if (!node_uid.empty()) involved["uid"] = node_uid;
  return {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata",
       {{"name", fmt::format("{}.{}.{:x}", node, type_lower, ns.count())},
        {"namespace", event_namespace}}},
      {"involvedObject", std::move(involved)},
      {"reason", c.reason},
      {"message",
       bounded(fmt::format("{} is {}: {}", c.type, c.problem ? "True" : "False", c.message))},
      {"type", c.problem ? "Warning" : "Normal"},
      {"source", {{"component", "gpud"}, {"host", node}}},
      {"firstTimestamp", now_text},
      {"lastTimestamp", now_text},
      {"count", 1},
      {"reportingComponent", "gpud"},
      {"reportingInstance", node},
  };
}

KubernetesNodeConditions::KubernetesNodeConditions(std::unique_ptr<KubernetesApi> api,
                                                   NodeConditionsOptions options,
                                                   std::function<NodeHealthInputs()> read)
    : api_(std::move(api)),
      options_(std::move(options)),
      read_(std::move(read)),
      failure_log_(options_.log_interval) {}

KubernetesNodeConditions::~KubernetesNodeConditions() { stop(); }

void KubernetesNodeConditions::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { loop(); });
}

void KubernetesNodeConditions::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  api_->stop();
  if (thread_.joinable()) thread_.join();
}

components::SinkStatus KubernetesNodeConditions::status() const {
  std::lock_guard lock(mu_);
  return {kNodeConditionsSink, error_};
}

void KubernetesNodeConditions::loop() {
  std::unique_lock lock(mu_);
  auto next = SteadyClock::now();
  while (!stopping_) {
    if (cv_.wait_until(lock, next, [this] { return stopping_; })) break;
    lock.unlock();
    next = run_once(SteadyClock::now());
    lock.lock();
  }
}

Result<void> KubernetesNodeConditions::sync_node() {
  auto node = api_->call("GET", node_path(options_.node_name));
  if (!node) return node.error();
  const nlohmann::json& j = *node;
  auto uid = j.find("metadata");
  if (j.value("kind", "") != "Node" || uid == j.end() || !uid->is_object())
    return make_error("GET " + node_path(options_.node_name) + ": the answer is not a Node");
  node_uid_ = uid->value("uid", "");
  written_.clear();
  since_.clear();
  if (auto st = j.find("status"); st != j.end() && st->is_object()) {
    if (auto conds = st->find("conditions"); conds != st->end() && conds->is_array()) {
      for (const auto& c : *conds) {
        if (!c.is_object() || !c.contains("type") || !c["type"].is_string()) continue;
        const std::string type = c["type"];
        bool ours = std::any_of(condition_kinds().begin(), condition_kinds().end(),
                                [&](const ConditionKind& k) { return type == k.type; });
        if (!ours) continue;
        NodeCondition known;
        known.type = type;
        known.problem = c.value("status", "") == "True";
        known.reason = c.value("reason", "");
        known.message = c.value("message", "");
        written_[type] = std::move(known);
        if (c.contains("lastTransitionTime") && c["lastTransitionTime"].is_string())
          since_[type] = c["lastTransitionTime"];
      }
    }
  }
  synced_ = true;
  return {};
}

Result<void> KubernetesNodeConditions::write(const std::vector<NodeCondition>& desired,
                                             TimePoint now) {
  std::map<std::string, std::string> since = since_;
  std::vector<const NodeCondition*> transitions;
  for (const NodeCondition& d : desired) {
    auto prev = written_.find(d.type);
    bool changed = prev == written_.end() || prev->second.problem != d.problem;
    if (changed) since[d.type] = format_rfc3339(now);
    // A condition that appears as a problem is a transition too; one that appears healthy is not.
    if (prev == written_.end() ? d.problem : changed) transitions.push_back(&d);
  }
  const std::string path = node_path(options_.node_name) + "/status";
  auto r = api_->call("PATCH", path, "application/strategic-merge-patch+json",
                      status_patch(desired, since, now).dump());
  if (!r) {
    // The Node changed under us or is gone: read it again before the next write.
    if (r.error().code == 404 || r.error().code == 409) synced_ = false;
    return r.error();
  }
  if (r->value("kind", "") != "Node")
    return make_error("PATCH " + path + ": the answer is not a Node");
  for (const NodeCondition* t : transitions) {
    if (pending_events_.size() >= options_.max_pending_events) {
      logger("kubernetes")
          ->warn("dropping the oldest waiting Kubernetes event ({} wait)", pending_events_.size());
      pending_events_.pop_front();
    }
    pending_events_.push_back(
        transition_event(options_.node_name, node_uid_, options_.event_namespace, *t, now));
    logger("kubernetes")
        ->info("node {} condition {} is now {}: {}", options_.node_name, t->type,
               t->problem ? "True" : "False", t->message);
  }
  for (const NodeCondition& d : desired) written_[d.type] = d;
  since_ = std::move(since);
  return {};
}

Result<void> KubernetesNodeConditions::send_events() {
  const std::string path = "/api/v1/namespaces/" + options_.event_namespace + "/events";
  while (!pending_events_.empty()) {
    auto r = api_->call("POST", path, "application/json", pending_events_.front().dump());
    // 409: an earlier try was stored though its answer was lost; the event is there.
    if (!r && r.error().code != 409) return r.error();
    pending_events_.pop_front();
  }
  return {};
}

void KubernetesNodeConditions::failed(const Error& e, SteadyClock::time_point now) {
  backoff_ = backoff_.count() == 0 ? options_.initial_backoff
                                   : std::min(backoff_ * 2, options_.max_backoff);
  retry_at_ = now + backoff_;
  {
    std::lock_guard lock(mu_);
    error_ = e.message;
  }
  if (auto left_out = failure_log_.admit(now))
    logger("kubernetes")
        ->warn("cannot keep node {}'s conditions (next try in {}){}: {}", options_.node_name,
               format_duration(std::chrono::duration_cast<std::chrono::seconds>(backoff_)),
               *left_out > 0 ? fmt::format(", {} failures not logged", *left_out) : "", e.message);
}

void KubernetesNodeConditions::succeeded() {
  backoff_ = std::chrono::milliseconds(0);
  std::lock_guard lock(mu_);
  if (!error_.empty())
    logger("kubernetes")->info("node {}'s conditions are written again", options_.node_name);
  error_.clear();
}

SteadyClock::time_point KubernetesNodeConditions::run_once(SteadyClock::time_point now) {
  if (now < retry_at_) return retry_at_;
  auto next = now + options_.poll_interval;
  if (!synced_) {
    if (auto r = sync_node(); !r) {
      failed(r.error(), now);
      return retry_at_;
    }
  }
  std::vector<NodeCondition> desired = judge_conditions(read_());
  bool changed = false;
  for (const NodeCondition& d : desired) {
    auto prev = written_.find(d.type);
    changed = changed || prev == written_.end() || prev->second.problem != d.problem ||
              prev->second.subjects != d.subjects;
  }
  const bool resync = last_write_ && now - *last_write_ >= options_.resync_interval;
  if (!desired.empty() && (changed || resync || !last_write_)) {
    if (last_write_ && now - *last_write_ < options_.min_write_interval) {
      next = std::min(next, *last_write_ + options_.min_write_interval);
    } else {
      if (auto r = write(desired, Clock::now()); !r) {
        failed(r.error(), now);
        return retry_at_;
      }
      last_write_ = now;
    }
  }
  if (auto r = send_events(); !r) {
    failed(r.error(), now);
    return retry_at_;
  }
  succeeded();
  return next;
}

}  // namespace gpud::sinks
