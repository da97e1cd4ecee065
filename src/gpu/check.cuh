// One error check for every CUDA runtime and cuBLAS call: a failure becomes
// a std::runtime_error naming the call and its file:line.
#pragma once
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "gpu/cublas_api.cuh"

namespace chunkinv::gpu::detail {

[[noreturn]] inline void fail(const std::string& what, const char* call, const char* file, int line) {
  throw std::runtime_error(what + " in " + call + " at " + file + ":" + std::to_string(line));
}
inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) fail(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")", call, file, line);
}
inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(std::string("cuBLAS error ") + cublas().status_name(s), call, file, line);
}

// Raises `kernel`'s dynamic shared-memory limit to the current device's
// opt-in maximum, prefers the largest shared-memory carveout for it, and
// returns that maximum. The attribute belongs to a device,
// so it is set once per (kernel, device), not once per process (gpu/device.cu).
int allow_optin_smem(const void* kernel);
// Units (warps or tasks of unit_warps warps) a block, at most max_units
// and at most optin bytes of them, that keep the most units resident on a
// multiprocessor of the current device (unit_smem bytes a unit): the
// fewest among equals, for finer grids and shorter tails. Blocks an SM by
// the occupancy calculator where `kernel` is given (its registers too),
// else by shared memory (plus the device's reserve a block), threads and
// blocks an SM. Where a unit runs does not change what it computes.
int units_per_block(size_t unit_smem, int unit_warps, int max_units, int optin, const void* kernel = nullptr);

}  // namespace chunkinv::gpu::detail

#define CUDA_CHECK(call) ::chunkinv::gpu::detail::check((call), #call, __FILE__, __LINE__)
// After a launch: the launch's own error, then (where asked) its completion.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
