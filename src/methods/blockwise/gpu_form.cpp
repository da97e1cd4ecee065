// Method blockwise's GPU form on the `kernel` path (methods/gpu_form.hpp):
// what it covers; the launch is in gpu.cu.
#include <fmt/format.h>

#include "methods/blockwise/params.hpp"
#include "methods/gpu_form.hpp"

namespace chunkinv {
extern const MethodSpec kBlockwiseMethod;
}  // namespace chunkinv

namespace chunkinv::gpu {

void launch_blockwise(const InverseLaunch&);  // gpu.cu, CUDA builds only

namespace {
std::string blockwise_refuses(const Method& m, int chunk) {
  const BlockwiseParams& p = m.params<BlockwiseParams>();  // every precision is covered
  if (p.block != 8 && p.block != 16) return fmt::format("path kernel: method blockwise's GPU form has no block={}", p.block);
  if (chunk < 2 || chunk > 64)
    return fmt::format("path kernel: method blockwise's GPU form covers chunks 2..64, not {}", chunk);
  return "";
}
}  // namespace

extern const GpuInverse kBlockwiseGpu{&kBlockwiseMethod, blockwise_refuses, CHUNKINV_GPU_LAUNCH(launch_blockwise)};

}  // namespace chunkinv::gpu
