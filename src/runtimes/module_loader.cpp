#include "runtimes/module_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gpud::runtimes {
namespace {

std::string executable_dir() {
  std::string buf(4096, '\0');
  ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return {};
  buf.resize(static_cast<size_t>(n));
  auto slash = buf.rfind('/');
  return slash == std::string::npos ? std::string() : buf.substr(0, slash);
}

std::vector<std::string> module_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("GPUD_MODULE_DIR"); env != nullptr && *env != '\0')
    dirs.emplace_back(env);
  if (std::string exe = executable_dir(); !exe.empty()) {
    dirs.push_back(exe);
    dirs.push_back(exe + "/../lib/gpud");
  }
  return dirs;
}

struct Loaded {
  void* handle = nullptr;
  std::string error;  // why it could not be loaded (then handle is null)
};

}  // namespace

std::string module_search_path() {
  std::string out;
  for (const std::string& d : module_dirs()) out += (out.empty() ? "" : ":") + d;
  return out;
}

Result<void*> load_module_symbol(const std::string& name, const char* symbol) {
  static std::mutex mu;
  static std::map<std::string, Loaded> loaded;  // never unloaded: its code may still be running
  std::lock_guard lock(mu);
  auto it = loaded.find(name);
  if (it == loaded.end()) {
    Loaded l;
    std::vector<std::string> errors;
    for (const std::string& dir : module_dirs()) {
      std::string path = fmt::format("{}/libgpud-{}.so", dir, name);
      if (access(path.c_str(), F_OK) != 0) continue;
      dlerror();
      l.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (l.handle != nullptr) break;
      const char* e = dlerror();
      errors.push_back(e != nullptr ? e : path + ": dlopen failed");
    }
    if (l.handle == nullptr)
      l.error = errors.empty() ? fmt::format("the {} module (libgpud-{}.so) is not in {}", name,
                                             name, module_search_path())
                               : fmt::format("cannot load the {} module: {}", name,
                                             fmt::join(errors, "; "));
    it = loaded.emplace(name, std::move(l)).first;
  }
  if (it->second.handle == nullptr) return make_error(it->second.error);
  dlerror();
  void* p = dlsym(it->second.handle, symbol);
  if (p == nullptr)
    return make_error(fmt::format("the {} module has no {} (built from another gpud version?)",
                                  name, symbol));
  return p;
}

}  // namespace gpud::runtimes
