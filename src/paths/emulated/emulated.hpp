// The emulated path: SPEC §2 "kernel" steps 1-5 (the decays and L) step by
// step on the CPU; the methods' CPU references then invert that L.
#pragma once
#include <vector>

#include "core/matrix.hpp"
#include "inputs/sample.hpp"
#include "methods/method.hpp"

namespace chunkinv::emulated {

// Steps 1-2: the decays as BF16 values (G2 a running FP32 sum of fp32(g log2 e)),
// C of them for per-token gates, C x d (row-major) for per-channel gates.
void decays(const Sample& s, std::vector<double>& decay, std::vector<double>& inv_decay);
// Steps 3-5: the strict-lower L (chunk x chunk): FP16 times fp16(beta)
// (FlashKDA v1), or FP32 times FP32 beta (v2).
Mat kernel_l(const Sample& s, const std::vector<double>& decay, const std::vector<double>& inv_decay,
             LStorage storage = LStorage::kFp16);

}  // namespace chunkinv::emulated
