// The gold (SPEC §2): FP64 from the BF16 keys, decay formed per pair as
// exp(min(G_i - G_j, 0)) so that it never overflows, inverse by unit-lower
// triangular solve in FP64.
#pragma once
#include "core/matrix.hpp"
#include "inputs/sample.hpp"
#include "paths/path.hpp"

namespace chunkinv {

GoldOutput compute_gold(const Sample& s);
// (I + L)^-1 by unit-lower triangular solve in FP64 (L strictly lower, finite).
Mat unit_lower_inverse(const Mat& l);

}  // namespace chunkinv
