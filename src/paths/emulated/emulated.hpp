// The emulated path: SPEC §2 "kernel" step by step on the CPU.
#pragma once
#include <memory>
#include <vector>

#include "core/matrix.hpp"
#include "inputs/sample.hpp"
#include "paths/path.hpp"

namespace chunkinv::emulated {

// Steps 1-3: the decays as BF16 values (G2 a running FP32 sum of fp32(g log2 e)).
void decays(const Sample& s, std::vector<double>& decay, std::vector<double>& inv_decay);
// Steps 3-5: the FP16 strict-lower L (chunk x chunk).
Mat kernel_l(const Sample& s, const std::vector<double>& decay, const std::vector<double>& inv_decay);
// Step 6 on an FP16 strict-lower L (any chunk 2..64; padded to a multiple of 16).
NeumannRun neumann(const Mat& l, bool keep_powers);
// The whole path for one sample.
PathOutput run(const Sample& s, const GoldOutput& gold, bool keep_powers);

std::unique_ptr<Path> make_path();

}  // namespace chunkinv::emulated
