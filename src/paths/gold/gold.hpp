// The gold (SPEC §2): FP64 from the BF16 keys, decay formed per pair as
// exp(min(G_i - G_j, 0)) so that it never overflows, inverse by unit-lower
// triangular solve in FP64 (method `exact`).
#pragma once
#include "inputs/sample.hpp"
#include "model/outputs.hpp"

namespace chunkinv {

GoldOutput compute_gold(const Sample& s);

}  // namespace chunkinv
