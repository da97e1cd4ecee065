// FlashKDA's activation of its raw inputs on the GPU, with the instructions
// its kernel uses (tanh.approx.f32, rsqrt.approx.ftz.f32, ex2.approx.ftz.f32;
// SPEC §1 "Raw inputs"). The kernel path runs the samples that carry raw
// inputs through it, so that its L and inverse start from the hardware's
// activation, where the emulated path starts from the CPU models of it.
#pragma once
#include <span>
#include <vector>

#include "inputs/sample.hpp"

namespace chunkinv::gpu {

// The samples with their raw inputs activated on the GPU (samples without
// raw inputs are copied as they are).
std::vector<Sample> activate_raw_on_gpu(std::span<const Sample> samples);
bool any_raw(std::span<const Sample> samples);

}  // namespace chunkinv::gpu
