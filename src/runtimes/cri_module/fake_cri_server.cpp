// gpud_cri_fake_server MODE SOCKET: a tiny gRPC server on a unix socket for the cri module's tests,
// in a process of its own (a process that loads libgpud-cri.so cannot also link the generated code:
// protobuf's descriptor pool refuses the same .proto twice). Serves until killed.
//   pod-resources       PodResourcesLister.List: a canned two-pod answer
//   pod-resources-slow  PodResourcesLister.List: never answers within a client's deadline
//   runtime             RuntimeService Version / ListPodSandbox / ListContainers: canned answers
//   runtime-failing     RuntimeService whose ListPodSandbox fails (INTERNAL)
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cri.grpc.pb.h"
#include "podresources.grpc.pb.h"

namespace {

using namespace std::chrono_literals;

class CannedPodResources final : public v1::PodResourcesLister::Service {
 public:
  explicit CannedPodResources(bool slow) : slow_(slow) {}
  grpc::Status List(grpc::ServerContext* ctx, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* resp) override {
    if (slow_) {
      auto until = std::chrono::steady_clock::now() + 30s;
      while (std::chrono::steady_clock::now() < until && !ctx->IsCancelled())
        std::this_thread::sleep_for(10ms);
      return grpc::Status(grpc::StatusCode::CANCELLED, "gave up");
    }
    auto* pod = resp->add_pod_resources();
    pod->set_name("trainer-0");
    pod->set_namespace_("ml");
    auto* c = pod->add_containers();
    c->set_name("main");
    auto* d = c->add_devices();
    d->set_resource_name("nvidia.com/gpu");
    d->add_device_ids("GPU-0b0e7a52-3c3a-5a1e-9d1c-9a1f7c2f0003");
    d->add_device_ids("GPU-0b0e7a52-3c3a-5a1e-9d1c-9a1f7c2f0005");
    c->add_cpu_ids(4);
    pod->add_containers()->set_name("sidecar");
    resp->add_pod_resources()->set_name("idle");
    return grpc::Status::OK;
  }

 private:
  bool slow_;
};

class CannedRuntime final : public runtime::v1::RuntimeService::Service {
 public:
  explicit CannedRuntime(bool fail_sandboxes) : fail_sandboxes_(fail_sandboxes) {}
  grpc::Status Version(grpc::ServerContext*, const runtime::v1::VersionRequest*,
                       runtime::v1::VersionResponse* resp) override {
    resp->set_version("0.1.0");
    resp->set_runtime_name("fake-cri");
    resp->set_runtime_version("9.9.9");
    resp->set_runtime_api_version("v1");
    return grpc::Status::OK;
  }
  grpc::Status ListPodSandbox(grpc::ServerContext*, const runtime::v1::ListPodSandboxRequest*,
                              runtime::v1::ListPodSandboxResponse* resp) override {
    if (fail_sandboxes_)
      return grpc::Status(grpc::StatusCode::INTERNAL, "sandbox store is corrupt");
    auto* p = resp->add_items();
    p->set_id("5f1c0b7e2a9d");
    p->mutable_metadata()->set_name("nvidia-container-toolkit-daemonset-x7k2p");
    p->mutable_metadata()->set_namespace_("gpu-operator");
    p->mutable_metadata()->set_uid("8d2e-uid");
    p->mutable_metadata()->set_attempt(2);
    p->set_state(runtime::v1::SANDBOX_NOTREADY);
    p->set_created_at(1'700'000'000'123'456'789);
    p->set_runtime_handler("nvidia");
    return grpc::Status::OK;
  }
  grpc::Status ListContainers(grpc::ServerContext*, const runtime::v1::ListContainersRequest*,
                              runtime::v1::ListContainersResponse* resp) override {
    auto* c = resp->add_containers();
    c->set_id("c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00");
    c->set_pod_sandbox_id("5f1c0b7e2a9d");
    c->mutable_metadata()->set_name("toolkit");
    c->mutable_metadata()->set_attempt(1);
    c->mutable_image()->set_image("nvcr.io/nvidia/k8s/container-toolkit:v1.17.0");
    c->set_image_ref("sha256:abc");
    c->set_state(runtime::v1::CONTAINER_RUNNING);
    c->set_created_at(1'700'000'001'000'000'000);
    return grpc::Status::OK;
  }

 private:
  bool fail_sandboxes_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODE SOCKET\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  std::unique_ptr<grpc::Service> service;
  if (mode == "pod-resources" || mode == "pod-resources-slow")
    service = std::make_unique<CannedPodResources>(mode == "pod-resources-slow");
  else if (mode == "runtime" || mode == "runtime-failing")
    service = std::make_unique<CannedRuntime>(mode == "runtime-failing");
  else {
    std::fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
  }
  grpc::ServerBuilder b;
  b.AddListeningPort(std::string("unix:") + argv[2], grpc::InsecureServerCredentials());
  b.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "cannot listen on %s\n", argv[2]);
    return 1;
  }
  server->Wait();
  return 0;
}
