// Method fla_solve_tril's GPU form on the `kernel` path (methods/gpu_form.hpp):
// what it covers (both precisions); the launch is in gpu.cu.
#include <fmt/format.h>

#include "methods/gpu_form.hpp"

namespace chunkinv {
extern const MethodSpec kFlaSolveTrilMethod;
}  // namespace chunkinv

namespace chunkinv::gpu {

void launch_fla_solve_tril(const InverseLaunch&);  // gpu.cu, CUDA builds only

namespace {
std::string fla_solve_tril_refuses(const Method&, int chunk) {
  if (chunk < 2 || chunk > 64)
    return fmt::format("path kernel: the GPU form of method fla_solve_tril covers chunks 2..64, not {}", chunk);
  return "";
}
}  // namespace

extern const GpuInverse kFlaSolveTrilGpu{&kFlaSolveTrilMethod, fla_solve_tril_refuses,
                                         CHUNKINV_GPU_LAUNCH(launch_fla_solve_tril)};

}  // namespace chunkinv::gpu
