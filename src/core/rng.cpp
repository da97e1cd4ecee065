#include "core/rng.hpp"

#include <cmath>

#include "core/detmath.hpp"

namespace chunkinv {
namespace {

constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57;
constexpr uint32_t kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

double to_unit(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return (static_cast<double>(bits) + 0.5) * 0x1p-53;
}

}  // namespace

std::array<uint32_t, 4> Rng::block(uint64_t index) const {
  // Counter: (index lo, index hi | stream, sample lo, sample hi).
  const std::array<uint32_t, 4> ctr{static_cast<uint32_t>(index),
                                    static_cast<uint32_t>(index >> 32) ^ (stream_ << 24),
                                    static_cast<uint32_t>(sample_),
                                    static_cast<uint32_t>(sample_ >> 32)};
  return philox4x32_10(ctr, key_);
}

double Rng::uniform(uint64_t index) const {
  const auto b = block(index);
  return to_unit(b[0], b[1]);
}

std::pair<double, double> Rng::normal_pair(uint64_t pair) const {
  // Attempt a of the pair sits at counter (pair << 8) | a. Rejection leaves
  // p < 2^-200 of pairs unresolved after 256 attempts, so the loop is
  // bounded in practice and the result exact.
  for (uint64_t a = 0; a < 256; ++a) {
    const auto b = block((pair << 8) | a);
    const double u = 2.0 * to_unit(b[0], b[1]) - 1.0;
    const double v = 2.0 * to_unit(b[2], b[3]) - 1.0;
    const double s = u * u + v * v;
    if (s >= 1.0 || s == 0.0) continue;
    const double f = std::sqrt(-2.0 * detmath::log(s) / s);
    return {u * f, v * f};
  }
  return {0.0, 0.0};
}

double Rng::normal(uint64_t index) const {
  const auto [x, y] = normal_pair(index >> 1);
  return (index & 1) ? y : x;
}

}  // namespace chunkinv
