// Which paths exist, and the fallbacks of the GPU interface for a build
// without CUDA.
#include <fmt/format.h>

#include "core/error.hpp"
#include "paths/emulated/emulated.hpp"
#include "paths/gpu.hpp"
#include "paths/path.hpp"

namespace chunkinv {

#ifndef CHUNKINV_HAVE_CUDA
namespace gpu {
bool built() { return false; }
std::string unavailable_reason() { return "this build has no CUDA support"; }
std::vector<DeviceInfo> devices() { return {}; }
std::string runtime_version() { return ""; }
std::string driver_version() { return ""; }
std::unique_ptr<Path> make_kernel_path() { throw UsageError("path kernel: this build has no CUDA support"); }
std::unique_ptr<Path> make_cublas_path() { throw UsageError("path cublas: this build has no CUDA support"); }
}  // namespace gpu
#endif

std::vector<std::string> path_names_built() {
  std::vector<std::string> n{"gold", "emulated"};
  if (gpu::built()) {
    n.push_back("kernel");
    n.push_back("cublas");
  }
  return n;
}

std::vector<std::string> path_names_usable() {
  std::vector<std::string> n{"gold", "emulated"};
  if (gpu::built() && gpu::unavailable_reason().empty()) {
    n.push_back("kernel");
    n.push_back("cublas");
  }
  return n;
}

std::unique_ptr<Path> make_path(const std::string& name) {
  if (name == "emulated") return emulated::make_path();
  if (name == "kernel" || name == "cublas") {
    const std::string why = gpu::unavailable_reason();
    if (!why.empty()) throw UsageError(fmt::format("path {} needs a CUDA GPU: {}", name, why));
    return name == "kernel" ? gpu::make_kernel_path() : gpu::make_cublas_path();
  }
  const std::vector<std::string> all{"gold", "emulated", "kernel", "cublas"};
  const std::string near = nearest_of(name, all);
  throw UsageError(near.empty() ? fmt::format("unknown path \"{}\" (paths: gold, emulated, kernel, cublas)", name)
                                : fmt::format("unknown path \"{}\" (did you mean \"{}\"?)", name, near));
}

}  // namespace chunkinv
