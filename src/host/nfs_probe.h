// The NFS probe (GPUd's NFS checker groups): each member of a group writes a file named after its
// machine id into a directory of a shared NFS volume, reads it back, reads the other members'
// files, and removes its own; every step on a worker that a hung server cannot block
// (mount_call.h).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/result.h"
#include "host/host_fs.h"
#include "host/mount_call.h"
#include "host/mountinfo.h"

namespace gpud::host {

// Parses --nfs-checker-configs: a JSON array of {"volume_path", "dir_name", "file_contents"}, each
// an absolute volume path, a directory name that is one path component, and non-empty contents.
// The error names the entry and the field.
Result<std::vector<Config::NfsChecker>> parse_nfs_checker_configs(std::string_view json);

// The mount that holds `path`: the one with the longest mount point that is `path` or one of its
// parent directories (later mounts hide earlier ones on the same point). nullptr for none.
const MountInfo* containing_mount(const MountTable& table, std::string_view path);
// NFS and the network file systems GPUd treats like it (its DefaultNFSFsTypeFunc): nfs, nfs4, ...,
// lustre (Azure Managed Lustre, FSx for Lustre), wekafs and virtiofs.
bool network_fs_type(std::string_view fs_type);

struct NfsProbe {
  std::vector<std::string> members;  // the machine ids whose files were read, this one first
};
// The probe of one volume as machine `machine_id`, within `deadline` as a whole. Errors name the
// step and the file ("write /mnt/nfs/.gpud/<id>: ...", "<other id>'s file has other contents"),
// or say the mount did not answer.
[[nodiscard]] Result<NfsProbe> run_nfs_probe(
    const HostFs& fs, const Config::NfsChecker& checker, const std::string& machine_id,
    std::chrono::milliseconds deadline = kMountCallDeadline);

}  // namespace gpud::host
