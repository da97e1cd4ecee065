// The table of GPU inverse forms (methods/gpu_form.hpp): which methods have one
// on the `kernel` path, and which of their options it covers. Host code,
// compiled with or without CUDA; the launches are in methods/<name>/gpu.cu.
#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "methods/gpu_form.hpp"

namespace chunkinv {
extern const MethodSpec kFlaSolveTrilMethod;
extern const MethodSpec kBlockwiseMethod;
extern const MethodSpec kResidualNeumannMethod;
}  // namespace chunkinv

namespace chunkinv::gpu {

#ifdef CHUNKINV_HAVE_CUDA
void launch_fla_solve_tril(const InverseLaunch&);
void launch_blockwise(const InverseLaunch&);
void launch_residual_neumann(const InverseLaunch&);
#define CHUNKINV_GPU_LAUNCH(f) f
#else
#define CHUNKINV_GPU_LAUNCH(f) nullptr
#endif

namespace {

// --- fla_solve_tril (methods/fla_solve_tril/gpu.cu) ----------------------------------
// (A method's options always hold every parameter, defaults filled in.)
std::string fla_solve_tril_refuses(const MethodOptions& options, int chunk) {
  if (chunk < 2 || chunk > 64)
    return fmt::format("path kernel: the GPU form of method fla_solve_tril covers chunks 2..64, not {}", chunk);
  const std::string& p = options.at("precision");
  if (p != "ieee" && p != "tf32")
    return fmt::format("path kernel: the GPU form of method fla_solve_tril covers precision=ieee and tf32, not {}", p);
  return "";
}

// --- blockwise (methods/blockwise/gpu.cu) -------------------------------------------
std::string blockwise_refuses(const MethodOptions& options, int chunk) {
  const std::string& b = options.at("block");
  const std::string& p = options.at("precision");
  if (b != "8" && b != "16") return fmt::format("path kernel: method blockwise's GPU form has no block={}", b);
  if (p != "bf16" && p != "fp32" && p != "tf32")
    return fmt::format("path kernel: method blockwise's GPU form has no precision={}", p);
  if (chunk < 2 || chunk > 64)
    return fmt::format("path kernel: method blockwise's GPU form covers chunks 2..64, not {}", chunk);
  return "";
}

// --- residual_neumann (methods/residual_neumann/gpu.cu) -----------------------------
std::string residual_neumann_refuses(const MethodOptions& options, int chunk) {
  if (chunk < 2 || chunk > 64)
    return fmt::format("path kernel: the GPU form of method residual_neumann covers chunk 2..64, not {}", chunk);
  const std::string& format = options.at("format");
  if (format == "fp32" || format == "int16") return "";
  return fmt::format(
      "path kernel: the GPU form of method residual_neumann covers format=fp32 and int16, not format={} "
      "(its mma.sync arithmetic is not established bit-exact on every input)",
      format);
}

const GpuInverse kForms[] = {
    {&kFlaSolveTrilMethod, fla_solve_tril_refuses, CHUNKINV_GPU_LAUNCH(launch_fla_solve_tril)},
    {&kBlockwiseMethod, blockwise_refuses, CHUNKINV_GPU_LAUNCH(launch_blockwise)},
    {&kResidualNeumannMethod, residual_neumann_refuses, CHUNKINV_GPU_LAUNCH(launch_residual_neumann)},
};

}  // namespace

std::span<const GpuInverse> gpu_inverses() { return kForms; }

const GpuInverse* find_gpu_inverse(const MethodSpec& spec) {
  for (const GpuInverse& f : kForms)
    if (f.spec == &spec) return &f;
  return nullptr;
}

#ifndef CHUNKINV_HAVE_CUDA
std::vector<InverseRun> invert_on_gpu(const GpuInverse& form, const MethodOptions&, std::span<const Mat>) {
  throw UsageError(fmt::format("method {} on the GPU: this build has no CUDA support", form.spec->name));
}
#endif

}  // namespace chunkinv::gpu
