// The generated families (floor, model_like, weak_decay_correlated, every
// gating) drawn on the GPU straight into the kernel path's buffers, bit for
// bit as find_family(name).make(c, seed, index) draws them on the CPU: the
// generator, the normals, log and sigmoid are one source for both
// (core/philox.hpp, core/detmath_hd.hpp) and every reduction keeps the CPU's
// order (the key's norm is summed in column order by each row's warp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "inputs/family.hpp"

#ifdef CHUNKINV_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace chunkinv {

// True for the families the device draws (their device_draw); otherwise
// false and, where `why` is given, one line saying why.
inline bool device_generates(const Configuration& c, std::string* why) { return device_draw_of(c, why).has_value(); }

// Values of g per token in the generated samples: d (per-channel gates) or 1.
inline int generated_gate_width(const Configuration& c) {
  const std::optional<DeviceDraw> draw = device_draw_of(c, nullptr);
  return draw && draw->channel ? c.dim : 1;
}

// Device pointers, sample-major: sample j of a call at offset j times the
// sample's size. keys: n x C x d BF16 bits; g: n x C x gate width (FP64);
// beta: n x C (FP64); beta_fp16: n x C, fp16(beta) bits as the kernel path
// packs them (gpu::fp16_bits_rn), or null.
struct DeviceSampleBuffers {
  uint16_t* keys = nullptr;
  double* g = nullptr;
  double* beta = nullptr;
  uint16_t* beta_fp16 = nullptr;
};

#ifdef CHUNKINV_HAVE_CUDA
// Samples first .. first + n - 1 of `seed` into `out`, asynchronously on
// `stream`. Validates the configuration (UsageError); throws UsageError for
// a family the device does not generate.
void generate_on_device(const Configuration& c, uint64_t seed, uint64_t first, int n, const DeviceSampleBuffers& out,
                        cudaStream_t stream);
#endif

}  // namespace chunkinv
