// One SFU instruction over consecutive FP32 bit patterns, the results as raw
// bits: what the exhaustive tests of the CPU models (tests/gpu/test_sfu_models.cpp)
// compare input by input. The inputs are made on the device, so a scan of all
// 2^32 patterns moves only its results.
#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "gpu/probes.hpp"
#include "gpu/ptx.cuh"

namespace chunkinv::gpu::testing {
namespace {

using detail::DeviceBuffer;

__global__ void range_kernel(SfuOp op, uint32_t first, size_t n, uint32_t* out) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float x = __uint_as_float(first + uint32_t(i));
    const float y = op == SfuOp::kTanh ? ptx::tanh_approx(x)
                    : op == SfuOp::kRsqrt ? ptx::rsqrt_approx_ftz(x)
                                          : ptx::ex2_approx_ftz(x);
    out[i] = __float_as_uint(y);
  }
}

__global__ void list_kernel(SfuOp op, const uint32_t* x_bits, size_t n, uint32_t* out) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = __uint_as_float(x_bits[i]);
  const float y = op == SfuOp::kTanh ? ptx::tanh_approx(x)
                  : op == SfuOp::kRsqrt ? ptx::rsqrt_approx_ftz(x)
                                        : ptx::ex2_approx_ftz(x);
  out[i] = __float_as_uint(y);
}

}  // namespace

void sfu_range(SfuOp op, uint32_t first, size_t n, uint32_t* y_bits) {
  if (n == 0) return;
  DeviceBuffer<uint32_t> out;
  uint32_t* d = out.get(n);
  range_kernel<<<1024, 256>>>(op, first, n, d);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(y_bits, d, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
}

void sfu_apply(SfuOp op, const uint32_t* x_bits, uint32_t* y_bits, size_t n) {
  if (n == 0) return;
  DeviceBuffer<uint32_t> in, out;
  uint32_t* dx = in.get(n);
  uint32_t* dy = out.get(n);
  CUDA_CHECK(cudaMemcpy(dx, x_bits, n * sizeof(uint32_t), cudaMemcpyHostToDevice));
  list_kernel<<<unsigned((n + 255) / 256), 256>>>(op, dx, n, dy);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(y_bits, dy, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
}

}  // namespace chunkinv::gpu::testing
