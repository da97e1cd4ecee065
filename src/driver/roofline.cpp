#include "driver/roofline.hpp"

#include <utility>

namespace chunkinv {

std::optional<DevicePeaks> device_peaks(const gpu::DeviceInfo& d) {
  if (d.cc_major != 9 || d.cc_minor != 0 || d.clock_khz <= 0 || d.memory_clock_khz <= 0 || d.memory_bus_bits <= 0 ||
      d.multiprocessors <= 0)
    return std::nullopt;
  const double sm_hz = double(d.multiprocessors) * double(d.clock_khz) * 1e3;
  DevicePeaks p;
  p.fp64 = sm_hz * 64 * 2;
  p.fp64_mma = sm_hz * 128 * 2;
  p.fp16_mma = sm_hz * 2048 * 2;
  p.fp32 = sm_hz * 128 * 2;
  p.bytes = double(d.memory_clock_khz) * 1e3 * 2 * double(d.memory_bus_bits) / 8;
  return p;
}

StageFloor stage_floor(const StageWork& w, const DevicePeaks& p) {
  StageFloor f;
  f.fp64_ns = w.fp64 / p.fp64 * 1e9;
  f.fp64_mma_ns = w.fp64_mma / p.fp64_mma * 1e9;
  f.fp16_mma_ns = w.fp16_mma / p.fp16_mma * 1e9;
  f.fp32_ns = w.fp32 / p.fp32 * 1e9;
  f.memory_ns = w.bytes / p.bytes * 1e9;
  const std::pair<double, const char*> each[] = {{f.fp64_ns, "FP64"},
                                                 {f.fp64_mma_ns, "FP64 MMA"},
                                                 {f.fp16_mma_ns, "FP16 MMA"},
                                                 {f.fp32_ns, "FP32"},
                                                 {f.memory_ns, "memory"}};
  for (const auto& [ns, name] : each)
    if (ns > f.ns) {
      f.ns = ns;
      f.bound = name;
    }
  return f;
}

}  // namespace chunkinv
