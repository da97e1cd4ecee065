// A device's peak rates, and a stage's floor against them (docs/roofline.md):
// what `bench --pipeline` sets beside each stage's measured time, so that a
// figure says which resource bounds it and how far it is from that bound.
#pragma once
#include <optional>
#include <string>

#include "driver/pipeline_work.hpp"
#include "gpu/gpu.hpp"

namespace chunkinv {

// Peak rates, FLOP/s and bytes/s.
struct DevicePeaks {
  double fp64 = 0, fp64_mma = 0, fp16_mma = 0, fp32 = 0, bytes = 0;
};

// sm_90's published rates an SM and a clock (FP64 64 FMA, its FP64 tensor
// cores 128 FMA, dense FP16/BF16 MMA 2,048 FMA, FP32 128 FMA) at the
// device's peak clock, and the memory's two transfers a clock over its bus.
// nullopt for another architecture, or where the device gave no clocks.
std::optional<DevicePeaks> device_peaks(const gpu::DeviceInfo& device);

// A stage's floor: each resource's time for the stage's work at its peak
// rate, ns a sample, and the largest of them.
struct StageFloor {
  double fp64_ns = 0, fp64_mma_ns = 0, fp16_mma_ns = 0, fp32_ns = 0, memory_ns = 0;
  double ns = 0;      // the floor: the largest of the five
  std::string bound;  // its resource: "FP64", "FP64 MMA", "FP16 MMA", "FP32" or "memory"; "" for no work
};
StageFloor stage_floor(const StageWork& work, const DevicePeaks& peaks);

}  // namespace chunkinv
