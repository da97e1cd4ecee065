#include "gpu/pack.hpp"

#include "core/fp.hpp"

namespace chunkinv::gpu {

const std::vector<double>& bf16_values() {
  static const std::vector<double> t = [] {
    std::vector<double> v(65536);
    for (int b = 0; b < 65536; ++b) v[b] = bf16_from_bits(static_cast<uint16_t>(b));
    return v;
  }();
  return t;
}

const std::vector<double>& fp16_values() {
  static const std::vector<double> t = [] {
    std::vector<double> v(65536);
    for (int b = 0; b < 65536; ++b) v[b] = fp16_from_bits(static_cast<uint16_t>(b));
    return v;
  }();
  return t;
}

void unpack_fp16_matrix(Mat& m, const uint16_t* src, int C) {
  const std::vector<double>& hf = fp16_values();
  m.resize(C, C);
  for (int r = 0; r < C; ++r)
    for (int c = 0; c < C; ++c) m(r, c) = hf[src[r * C + c]];
}

void unpack_bf16_vector(std::vector<double>& v, const uint16_t* src, int C) {
  const std::vector<double>& bf = bf16_values();
  v.resize(C);
  for (int r = 0; r < C; ++r) v[r] = bf[src[r]];
}

}  // namespace chunkinv::gpu
