// The generated families (floor, model_like, weak_decay_correlated, every
// gating) drawn on the GPU straight into the kernel path's buffers, bit for
// bit as find_family(name).make(c, seed, index) draws them on the CPU: the
// generator, the normals, log and sigmoid are one source for both
// (core/philox.hpp, core/detmath_hd.hpp) and every reduction keeps the CPU's
// order (the key's norm is summed in column order by each row's warp).
#pragma once
#include <cstdint>
#include <string>

#include "inputs/family.hpp"

#ifdef CHUNKINV_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace chunkinv {

// True for the families the device draws; otherwise false and, where `why`
// is given, one line saying why.
inline bool device_generates(const Configuration& c, std::string* why) {
  if (c.family == "floor" || c.family == "model_like" || c.family == "weak_decay_correlated") return true;
  if (why) {
    if (c.family == "kda" || c.family == "collinear")
      *why = "family " + c.family + " draws FlashKDA's raw inputs, which the device does not generate";
    else if (c.family == "file" || c.family == "real_gates")
      *why = "family " + c.family + " reads its samples from data; nothing to generate";
    else
      *why = "family " + c.family + " is not one the device generates (floor, model_like, weak_decay_correlated)";
  }
  return false;
}

// gating=channel in a family that takes it (floor, model_like), as
// families.cpp's gating_of reads it.
inline bool gated_per_channel(const Configuration& c) {
  return c.family != "weak_decay_correlated" && c.params.value("gating", nlohmann::json()) == "channel";
}
// Values of g per token in the generated samples: d or 1.
inline int generated_gate_width(const Configuration& c) { return gated_per_channel(c) ? c.dim : 1; }

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
