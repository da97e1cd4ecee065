// Method residual_neumann's GPU form on the `kernel` path (methods/gpu_form.hpp):
// what it covers; the launch is in gpu.cu.
#include <fmt/format.h>

#include "methods/gpu_form.hpp"
#include "methods/residual_neumann/params.hpp"

namespace chunkinv {
extern const MethodSpec kResidualNeumannMethod;
}  // namespace chunkinv

namespace chunkinv::gpu {

void launch_residual_neumann(const InverseLaunch&);  // gpu.cu, CUDA builds only

namespace {
std::string residual_neumann_refuses(const Method& m, int chunk) {
  if (chunk < 2 || chunk > 64)
    return fmt::format("path kernel: the GPU form of method residual_neumann covers chunk 2..64, not {}", chunk);
  const ResidualFormat format = m.params<ResidualNeumannParams>().format;
  if (format == ResidualFormat::kFp32 || format == ResidualFormat::kInt16) return "";
  return fmt::format(
      "path kernel: the GPU form of method residual_neumann covers format=fp32 and int16, not format={} "
      "(its mma.sync arithmetic is not established bit-exact on every input)",
      format_name(format));
}
}  // namespace

extern const GpuInverse kResidualNeumannGpu{&kResidualNeumannMethod, residual_neumann_refuses,
                                            CHUNKINV_GPU_LAUNCH(launch_residual_neumann)};

}  // namespace chunkinv::gpu
