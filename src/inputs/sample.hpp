// One sample: the inputs of one chunk, exactly as every path sees them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace chunkinv {

struct Sample {
  int chunk = 0;             // C
  int dim = 0;               // d
  std::vector<double> keys;  // C x d row-major, each value a BF16 (exact in double)
  std::vector<double> g;     // C log-decays, natural log, all < 0, FP64
  std::vector<double> beta;  // C, in (0, 1), FP64

  double key(int row, int col) const { return keys[static_cast<size_t>(row) * dim + col]; }
};

}  // namespace chunkinv
