// A FUSE file system whose statfs, and the lookup of any name in it, do not answer for a given
// time: a hung mount (NFS server gone, FUSE daemon stuck) that tests mount to show that no check
// waits on it.
//   hung_fuse MOUNT_DIR SECONDS     (runs in the foreground until unmounted or killed)
#define FUSE_USE_VERSION 31
#include <fuse3/fuse.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

unsigned g_hang_seconds = 30;

// The root answers at once (so the mount comes up and can be stat'ed); any name in it hangs, as an
// NFS lookup does when the server is gone: the NFS probe's mkdir or open stops here.
int hung_getattr(const char* path, struct stat* st, struct fuse_file_info*) {
  std::memset(st, 0, sizeof(*st));
  if (std::strcmp(path, "/") != 0) {
    sleep(g_hang_seconds);
    return -ENOENT;
  }
  st->st_mode = S_IFDIR | 0755;
  st->st_nlink = 2;
  return 0;
}

int hung_statfs(const char*, struct statvfs* st) {
  sleep(g_hang_seconds);
  std::memset(st, 0, sizeof(*st));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: hung_fuse MOUNT_DIR SECONDS\n");
    return 2;
  }
  g_hang_seconds = static_cast<unsigned>(std::strtoul(argv[2], nullptr, 10));
  struct fuse_operations ops {};
  ops.getattr = hung_getattr;
  ops.statfs = hung_statfs;
  char* args[] = {argv[0], const_cast<char*>("-f"), const_cast<char*>("-s"), argv[1], nullptr};
  return fuse_main(4, args, &ops, nullptr);
}
