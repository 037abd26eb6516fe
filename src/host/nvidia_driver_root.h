// Where an NVIDIA driver's user-space files may live besides the host's own library directories:
// a driver root given by the operator ($GPUD_NVIDIA_DRIVER_ROOT, as GPUd reads it) and the NVIDIA
// GPU Operator's driver container, whose root the operator mounts at /run/nvidia/driver on the
// host.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "host/host_fs.h"

namespace gpud::host {

inline constexpr std::string_view kGpuOperatorDriverRoot = "/run/nvidia/driver";

// The driver roots to look under, in order: `configured` (a path as gpud sees it) when set, then
// the GPU Operator's root under `fs`'s root. Candidates only: whether one holds a driver is asked
// where it is read (the driver container may start after gpud).
std::vector<std::string> nvidia_driver_roots(const HostFs& fs, const std::string& configured);

}  // namespace gpud::host
