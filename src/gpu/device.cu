// The CUDA side of gpu/gpu.hpp: is a usable GPU there, which, and what
// runtime and driver.
#include <algorithm>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/check.cuh"
#include "gpu/gpu.hpp"

namespace chunkinv::gpu {
namespace {

std::string version_string(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string find_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorNoDevice) return "no CUDA device";
  if (e == cudaErrorInsufficientDriver) {
    int driver = 0;
    cudaDriverGetVersion(&driver);
    return driver == 0 ? "no CUDA driver" : "CUDA driver " + version_string(driver) + " is older than the runtime";
  }
  if (e != cudaSuccess) return std::string("CUDA unavailable: ") + cudaGetErrorString(e);
  if (count == 0) return "no CUDA device";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "cannot query CUDA device 0";
  if (p.major < 9)
    return std::string(p.name) + " has compute capability " + std::to_string(p.major) + "." +
           std::to_string(p.minor) + "; the GPU paths need 9.0 (Hopper)";
  return "";
}

}  // namespace

bool built() { return true; }

std::string unavailable_reason() {
  static const std::string reason = find_reason();
  return reason;
}

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a missing driver
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    DeviceInfo d{i, p.name, p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem};
    // Not in cudaDeviceProp from CUDA 13 on; the attributes are.
    cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, i);
    cudaDeviceGetAttribute(&d.memory_clock_khz, cudaDevAttrMemoryClockRate, i);
    cudaDeviceGetAttribute(&d.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, i);
    out.push_back(d);
  }
  return out;
}

std::string runtime_version() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "";
  return version_string(v);
}

std::string driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) return "";
  return version_string(v);
}

namespace detail {

int allow_optin_smem(const void* kernel) {
  static std::mutex mu;
  static std::set<std::pair<const void*, int>> done;
  int dev = 0, v = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  std::lock_guard<std::mutex> lock(mu);
  if (done.insert({kernel, dev}).second) {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, v);
    // The whole unified L1 as shared memory preferred: the driver's own
    // choice left the kernel path at C = 64 a 200 KB carveout (run 44;
    // with the preference it still ran at four blocks an SM, its fifth not
    // fitting, run 46). The gold at C = 64 (44.9 KB a block) runs at five
    // with it (runs 55, 56).
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    if (e != cudaSuccess) done.erase({kernel, dev});
    CUDA_CHECK(e);
  }
  return v;
}

int units_per_block(size_t unit_smem, int unit_warps, int max_units, int optin, const void* kernel) {
  int dev = 0, sm_bytes = 0, reserved = 0, max_threads = 0, max_blocks = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerMultiProcessor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_blocks, cudaDevAttrMaxBlocksPerMultiprocessor, dev));
  const size_t max_resident = size_t(max_threads) / (32 * size_t(unit_warps));
  int best = 1;
  size_t best_resident = 0;
  for (int k = 1; k <= max_units && size_t(k) * unit_smem <= size_t(optin); ++k) {
    size_t blocks = 0;
    if (kernel) {
      int b = 0;
      CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, 32 * unit_warps * k, size_t(k) * unit_smem));
      blocks = size_t(b);
    } else {
      blocks = std::min<size_t>(size_t(sm_bytes) / (size_t(k) * unit_smem + size_t(reserved)), max_blocks);
    }
    const size_t resident = std::min(blocks * size_t(k), max_resident);
    if (resident > best_resident) best = k, best_resident = resident;
  }
  return best;
}

}  // namespace detail

}  // namespace chunkinv::gpu
