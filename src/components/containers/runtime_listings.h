// RuntimeListings: the runtimes::ContainerSource a container-runtime component lists through: the
// daemon's (ComponentContext::container_source, which keeps the directory attribution reads), or,
// in a context without one (unit tests), a source of the component's own whose directory nothing
// reads.
#pragma once

#include "components/component.h"
#include "core/config.h"
#include "runtimes/container_directory.h"
#include "runtimes/container_source.h"

namespace gpud::components {

class RuntimeListings {
 public:
  explicit RuntimeListings(const ComponentContext& ctx)
      : shared_(ctx.container_source),
        own_(own_directory_, runtimes::CriHelper{ctx.config->cri_helper}) {}
  RuntimeListings(const RuntimeListings&) = delete;
  RuntimeListings& operator=(const RuntimeListings&) = delete;

  runtimes::ContainerSource& source() { return shared_ != nullptr ? *shared_ : own_; }

 private:
  runtimes::ContainerSource* shared_;
  runtimes::ContainerDirectory own_directory_;
  runtimes::ContainerSource own_;
};

}  // namespace gpud::components
