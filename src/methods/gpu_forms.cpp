// The GPU inverse forms (gpu_form.hpp), found through the method registry:
// a method that has one points at it from its MethodSpec. Host code,
// compiled with or without CUDA; the launches are in methods/<name>/gpu.cu.
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "methods/gpu_form.hpp"

namespace chunkinv::gpu {

std::span<const GpuInverse* const> gpu_inverses() {
  static const std::vector<const GpuInverse*> forms = [] {
    std::vector<const GpuInverse*> f;
    for (const MethodSpec* m : methods())
      if (m->gpu_form) f.push_back(m->gpu_form);
    return f;
  }();
  return forms;
}

const GpuInverse* find_gpu_inverse(const MethodSpec& spec) { return spec.gpu_form; }

#ifndef CHUNKINV_HAVE_CUDA
std::vector<InverseRun> invert_on_gpu(const GpuInverse& form, const Method&, std::span<const Mat>) {
  throw UsageError(fmt::format("method {} on the GPU: this build has no CUDA support", form.spec->name));
}
#endif

}  // namespace chunkinv::gpu
