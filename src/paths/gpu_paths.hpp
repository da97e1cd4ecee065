// The CUDA paths' constructors, defined in paths/kernel and paths/cublas
// when built with CUDA (gpu/none.cpp otherwise). Their specs, in host code,
// are in paths/gpu_specs.cpp.
#pragma once
#include <memory>

#include "paths/path.hpp"

namespace chunkinv::gpu {

// The kernel path's default version: bit-identical to v1 and emulated on the H200, 1.2-1.6x faster.
inline constexpr int kDefaultKernelVersion = 2;

// version: 1 (kernel.cu, the reference) or 2 (kernel_v2.cu); pad: the chunk
// zero-padded to this multiple-of-16 size (0: the next multiple of 16).
std::unique_ptr<Path> make_kernel_path(int version, int pad = 0);
// batched: the products as strided-batched calls instead of one call per
// matrix (the article's); see paths/cublas/cublas_path.cu.
std::unique_ptr<Path> make_cublas_path(bool batched = false);

}  // namespace chunkinv::gpu
