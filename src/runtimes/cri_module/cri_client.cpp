// libgpud-cri.so: the CRI runtime.v1 and kubelet pod-resources v1 clients behind the C table of
// runtimes/cri.h. Each call opens its own channel to the unix socket, waits for the connection
// and makes its calls under one deadline, and turns the answer into JSON text: no gRPC or protobuf
// type crosses the table, and no exception leaves it.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cri.grpc.pb.h"
#include "podresources.grpc.pb.h"
#include "runtimes/cri.h"

namespace {

using Clock = std::chrono::system_clock;
using nlohmann::json;

gpud_cri_reply make_reply(int code, const std::string& text) {
  auto* p = static_cast<char*>(std::malloc(text.size() + 1));
  if (p == nullptr) return {GPUD_CRI_INTERNAL, nullptr};
  std::memcpy(p, text.c_str(), text.size() + 1);
  return {code, p};
}

const char* state_name(grpc_connectivity_state s) {
  switch (s) {
    case GRPC_CHANNEL_IDLE: return "idle";
    case GRPC_CHANNEL_CONNECTING: return "connecting";
    case GRPC_CHANNEL_READY: return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE: return "transient failure";
    case GRPC_CHANNEL_SHUTDOWN: return "shut down";
  }
  return "unknown";
}

// A connected channel to unix:<path>, or the reply saying why there is none.
struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  gpud_cri_reply error{GPUD_CRI_OK, nullptr};
};

Connection connect(const char* socket_path, Clock::time_point deadline, int64_t timeout_ms) {
  Connection c;
  if (socket_path == nullptr || *socket_path == '\0') {
    c.error = make_reply(GPUD_CRI_INVALID_ARGUMENT, "no socket path given");
    return c;
  }
  grpc::ChannelArguments args;
  // A listing of thousands of containers is larger than gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(64 << 20);
  // Its own subchannel: a daemon that was down at the last check is dialled afresh, not after the
  // backoff a shared subchannel would still be waiting out.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  const std::string target = std::string("unix:") + socket_path;
  c.channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  // A refused or missing socket fails the first attempt at once (transient failure): nobody
  // listens there now, and waiting out the deadline for a restart would make every check of a
  // stopped runtime cost its whole timeout.
  auto state = c.channel->GetState(true);
  while (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_TRANSIENT_FAILURE &&
         state != GRPC_CHANNEL_SHUTDOWN && c.channel->WaitForStateChange(state, deadline))
    state = c.channel->GetState(true);
  if (state != GRPC_CHANNEL_READY) {
    const std::string why =
        state == GRPC_CHANNEL_TRANSIENT_FAILURE
            ? " (connection refused or no socket)"
            : " within " + std::to_string(timeout_ms) + " ms (channel " + state_name(state) + ")";
    c.error = make_reply(GPUD_CRI_UNAVAILABLE, "cannot connect to " + target + why);
    c.channel.reset();
  }
  return c;
}

gpud_cri_reply status_reply(const char* method, const grpc::Status& s) {
  std::string msg = std::string(method) + ": " + s.error_message();
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) msg += " (deadline exceeded)";
  return make_reply(static_cast<int>(s.error_code()), msg);
}

Clock::time_point deadline_of(int64_t timeout_ms) {
  return Clock::now() + std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 1);
}

// Runs `body` and turns anything it throws into an INTERNAL reply: nothing crosses the C table.
template <typename F>
gpud_cri_reply guarded(F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return make_reply(GPUD_CRI_INTERNAL, std::string("cri module: ") + e.what());
  } catch (...) {
    return make_reply(GPUD_CRI_INTERNAL, "cri module: unknown exception");
  }
}

// Connects to the socket within the call's deadline and runs body(stub, deadline) (guarded);
// the reply saying why it could not connect otherwise.
template <typename Service, typename Body>
gpud_cri_reply with_stub(const char* socket_path, int64_t timeout_ms, Body&& body) {
  return guarded([&] {
    const auto deadline = deadline_of(timeout_ms);
    Connection c = connect(socket_path, deadline, timeout_ms);
    if (!c.channel) return c.error;
    auto stub = Service::NewStub(c.channel);
    return body(*stub, deadline);
  });
}

// Makes one call(context) under the deadline; the reply of its failed status, or nullopt.
template <typename Call>
std::optional<gpud_cri_reply> failed(const char* method, Clock::time_point deadline, Call&& call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  grpc::Status s = call(&ctx);
  if (!s.ok()) return status_reply(method, s);
  return std::nullopt;
}

using runtime::v1::RuntimeService;

gpud_cri_reply cri_version(const char* socket_path, int64_t timeout_ms) {
  return with_stub<RuntimeService>(socket_path, timeout_ms, [&](auto& stub, auto deadline) {
    runtime::v1::VersionRequest req;
    req.set_version("v1");
    runtime::v1::VersionResponse resp;
    if (auto f =
            failed("Version", deadline, [&](auto* ctx) { return stub.Version(ctx, req, &resp); }))
      return *f;
    json j = {{"version", resp.version()},
              {"runtime_name", resp.runtime_name()},
              {"runtime_version", resp.runtime_version()},
              {"runtime_api_version", resp.runtime_api_version()}};
    return make_reply(GPUD_CRI_OK, j.dump(-1, ' ', false, json::error_handler_t::replace));
  });
}

gpud_cri_reply cri_list_pods(const char* socket_path, int64_t timeout_ms) {
  return with_stub<RuntimeService>(socket_path, timeout_ms, [&](auto& stub, auto deadline) {
    runtime::v1::ListPodSandboxResponse sandboxes;
    if (auto f = failed("ListPodSandbox", deadline, [&](auto* ctx) {
          return stub.ListPodSandbox(ctx, runtime::v1::ListPodSandboxRequest(), &sandboxes);
        }))
      return *f;
    runtime::v1::ListContainersResponse containers;
    if (auto f = failed("ListContainers", deadline, [&](auto* ctx) {
          return stub.ListContainers(ctx, runtime::v1::ListContainersRequest(), &containers);
        }))
      return *f;
    json out = {{"sandboxes", json::array()}, {"containers", json::array()}};
    for (const auto& p : sandboxes.items())
      out["sandboxes"].push_back({{"id", p.id()},
                                  {"name", p.metadata().name()},
                                  {"namespace", p.metadata().namespace_()},
                                  {"uid", p.metadata().uid()},
                                  {"attempt", p.metadata().attempt()},
                                  {"state", runtime::v1::PodSandboxState_Name(p.state())},
                                  {"created_at_ns", p.created_at()},
                                  {"runtime_handler", p.runtime_handler()}});
    for (const auto& k : containers.containers())
      out["containers"].push_back({{"id", k.id()},
                                   {"sandbox_id", k.pod_sandbox_id()},
                                   {"name", k.metadata().name()},
                                   {"attempt", k.metadata().attempt()},
                                   {"image", k.image().image()},
                                   {"image_ref", k.image_ref()},
                                   {"state", runtime::v1::ContainerState_Name(k.state())},
                                   {"created_at_ns", k.created_at()}});
    return make_reply(GPUD_CRI_OK, out.dump(-1, ' ', false, json::error_handler_t::replace));
  });
}

gpud_cri_reply cri_run_pod_sandbox(const char* socket_path, const char* config_json,
                                   int64_t timeout_ms) {
  return guarded([&] {
    json spec = json::parse(config_json != nullptr ? config_json : "", nullptr, false);
    if (!spec.is_object())
      return make_reply(GPUD_CRI_INVALID_ARGUMENT,
                        "RunPodSandbox: the config is not a JSON object");
    runtime::v1::RunPodSandboxRequest req;
    auto* cfg = req.mutable_config();
    auto* md = cfg->mutable_metadata();
    md->set_name(spec.value("name", ""));
    md->set_namespace_(spec.value("namespace", ""));
    md->set_uid(spec.value("uid", ""));
    md->set_attempt(spec.value("attempt", 0u));
    if (spec.value("host_network", true))
      cfg->mutable_linux()->mutable_security_context()->mutable_namespace_options()->set_network(
          runtime::v1::NODE);
    if (spec.contains("labels") && spec["labels"].is_object())
      for (const auto& [k, v] : spec["labels"].items())
        if (v.is_string()) (*cfg->mutable_labels())[k] = v.get<std::string>();
    req.set_runtime_handler(spec.value("runtime_handler", ""));
    return with_stub<RuntimeService>(socket_path, timeout_ms, [&](auto& stub, auto deadline) {
      runtime::v1::RunPodSandboxResponse resp;
      if (auto f = failed("RunPodSandbox", deadline,
                          [&](auto* ctx) { return stub.RunPodSandbox(ctx, req, &resp); }))
        return *f;
      return make_reply(GPUD_CRI_OK, json{{"id", resp.pod_sandbox_id()}}.dump());
    });
  });
}

template <typename Req, typename Resp, typename Call>
gpud_cri_reply sandbox_call(const char* method, const char* socket_path, const char* id,
                            int64_t timeout_ms, Call call) {
  return with_stub<RuntimeService>(socket_path, timeout_ms, [&](auto& stub, auto deadline) {
    Req req;
    req.set_pod_sandbox_id(id != nullptr ? id : "");
    Resp resp;
    if (auto f = failed(method, deadline, [&](auto* ctx) { return call(stub, ctx, req, &resp); }))
      return *f;
    return make_reply(GPUD_CRI_OK, "{}");
  });
}

gpud_cri_reply cri_stop_pod_sandbox(const char* socket_path, const char* id, int64_t timeout_ms) {
  using namespace runtime::v1;
  return sandbox_call<StopPodSandboxRequest, StopPodSandboxResponse>(
      "StopPodSandbox", socket_path, id, timeout_ms,
      [](RuntimeService::Stub& s, grpc::ClientContext* ctx, const auto& req, auto* resp) {
        return s.StopPodSandbox(ctx, req, resp);
      });
}

gpud_cri_reply cri_remove_pod_sandbox(const char* socket_path, const char* id, int64_t timeout_ms) {
  using namespace runtime::v1;
  return sandbox_call<RemovePodSandboxRequest, RemovePodSandboxResponse>(
      "RemovePodSandbox", socket_path, id, timeout_ms,
      [](RuntimeService::Stub& s, grpc::ClientContext* ctx, const auto& req, auto* resp) {
        return s.RemovePodSandbox(ctx, req, resp);
      });
}

gpud_cri_reply list_pod_resources(const char* socket_path, int64_t timeout_ms) {
  return with_stub<v1::PodResourcesLister>(socket_path, timeout_ms, [&](auto& stub, auto deadline) {
    v1::ListPodResourcesResponse resp;
    if (auto f = failed("List", deadline, [&](auto* ctx) {
          return stub.List(ctx, v1::ListPodResourcesRequest(), &resp);
        }))
      return *f;
    json pods = json::array();
    for (const auto& p : resp.pod_resources()) {
      json containers = json::array();
      for (const auto& k : p.containers()) {
        json devices = json::array();
        for (const auto& d : k.devices())
          devices.push_back({{"resource_name", d.resource_name()},
                             {"device_ids", json(std::vector<std::string>(d.device_ids().begin(),
                                                                          d.device_ids().end()))}});
        containers.push_back(
            {{"name", k.name()},
             {"devices", devices},
             {"cpu_ids", json(std::vector<int64_t>(k.cpu_ids().begin(), k.cpu_ids().end()))}});
      }
      pods.push_back(
          {{"name", p.name()}, {"namespace", p.namespace_()}, {"containers", containers}});
    }
    return make_reply(GPUD_CRI_OK, json{{"pod_resources", pods}}.dump(
                                       -1, ' ', false, json::error_handler_t::replace));
  });
}

void free_reply(gpud_cri_reply* reply) {
  if (reply == nullptr) return;
  std::free(reply->text);
  reply->text = nullptr;
}

const gpud_cri_table_v1 kTable = {
    GPUD_CRI_ABI_VERSION,   sizeof(gpud_cri_table_v1), cri_version,
    cri_list_pods,          cri_run_pod_sandbox,       cri_stop_pod_sandbox,
    cri_remove_pod_sandbox, list_pod_resources,        free_reply,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const gpud_cri_table_v1* gpud_cri_client_v1(
    void) {
  return &kTable;
}
