// The emulated path: SPEC §2 "kernel" steps 1-5 (the decays and L) step by
// step on the CPU; the methods' CPU references then invert that L.
#pragma once
#include <vector>

#include "core/matrix.hpp"
#include "inputs/sample.hpp"

namespace chunkinv::emulated {

// Steps 1-2: the decays as BF16 values (G2 a running FP32 sum of fp32(g log2 e)).
void decays(const Sample& s, std::vector<double>& decay, std::vector<double>& inv_decay);
// Steps 3-5: the FP16 strict-lower L (chunk x chunk).
Mat kernel_l(const Sample& s, const std::vector<double>& decay, const std::vector<double>& inv_decay);

}  // namespace chunkinv::emulated
