// The CUDA side of paths/gpu.hpp: is a usable GPU there, which, and what
// runtime and driver; plus the host helpers both GPU paths share.
// Eigen (through core/matrix.hpp) calls constexpr host functions from host-device code.
#pragma nv_diag_suppress 20015
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/fp.hpp"
#include "paths/gpu.hpp"
#include "paths/kernel/cuda_check.cuh"
#include "paths/kernel/staging.cuh"

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
    out.push_back({i, p.name, p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem});
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

const std::vector<double>& bf16_values() {
  static const std::vector<double> t = [] {
    std::vector<double> v(65536);
    for (int b = 0; b < 65536; ++b) v[b] = bf16_from_bits(static_cast<uint16_t>(b));
    return v;
  }();
  return t;
}

const std::vector<double>& fp16_values() {
  static const std::vector<double> t = [] {
    std::vector<double> v(65536);
    for (int b = 0; b < 65536; ++b) v[b] = fp16_from_bits(static_cast<uint16_t>(b));
    return v;
  }();
  return t;
}

namespace {
std::mutex g_timing_mu;
std::map<std::string, BatchTiming> g_timing;
}  // namespace

void record_timing(const std::string& path, const BatchTiming& t) {
  std::lock_guard<std::mutex> lock(g_timing_mu);
  g_timing[path] = t;
}

}  // namespace detail

BatchTiming last_batch_timing(const std::string& path) {
  std::lock_guard<std::mutex> lock(detail::g_timing_mu);
  auto it = detail::g_timing.find(path);
  return it == detail::g_timing.end() ? BatchTiming{} : it->second;
}

}  // namespace chunkinv::gpu
