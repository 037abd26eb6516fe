// /proc/vmallocinfo: the kernel's vmalloc mappings, one a line; here the bytes the BPF JIT holds,
// which runs out on hosts that load many BPF programs (containerd's "failed to create shim task").
#pragma once

#include <cstdint>
#include <string_view>

#include "core/result.h"
#include "host/host_fs.h"

namespace gpud::host {

// The size of one line's mapping when the BPF JIT made it, as in
// "0xffffffffc0107000-0xffffffffc0109000    8192 bpf_jit_alloc_exec+0xe/0x20 pages=1 vmalloc N1=1";
// 0 for any other caller. The JIT's caller is bpf_jit_alloc_exec, or bpf_prog_pack_alloc where the
// kernel packs programs into 2 MiB areas and attributes them to it (seen on 6.18); GPUd counts only
// the first, so it reads 0 there. An error when such a line has no decimal size in its second
// field.
[[nodiscard]] Result<uint64_t> bpf_jit_bytes_of_line(std::string_view line);

// The sum over /proc/vmallocinfo, streamed line by line (the file is root-only: mode 0400).
[[nodiscard]] Result<uint64_t> read_bpf_jit_bytes(const HostFs& fs);

}  // namespace gpud::host
