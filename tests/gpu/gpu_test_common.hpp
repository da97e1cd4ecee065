// Shared by the GPU tests: the skip rule, inputs of a family, and bit-level
// comparison of FP16/BF16 values held as doubles.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/fp.hpp"
#include "inputs/family.hpp"
#include "gpu/gpu.hpp"

namespace chunkinv::gputest {

// Skips the calling test where no GPU path can run.
#ifndef CHUNKINV_HAVE_CUDA
#define CHUNKINV_REQUIRE_GPU() GTEST_SKIP() << "built without CUDA"
#else
#define CHUNKINV_REQUIRE_GPU()                                                              \
  do {                                                                                      \
    const std::string why_ = ::chunkinv::gpu::unavailable_reason();                         \
    if (!why_.empty()) GTEST_SKIP() << "no CUDA GPU: " << why_;                             \
  } while (0)
#endif

inline Configuration config(const std::string& family, int chunk, int dim = 128) {
  Configuration c;
  c.family = family;
  c.chunk = chunk;
  c.dim = dim;
  for (const FamilyParam& p : find_family(family).params())
    if (!p.default_value.is_null()) c.params[p.name] = p.default_value;
  find_family(family).validate(c);
  return c;
}

inline std::vector<Sample> make_samples(const Configuration& c, int n, uint64_t seed = 7) {
  std::vector<Sample> v;
  for (int i = 0; i < n; ++i) v.push_back(find_family(c.family).make(c, seed, uint64_t(i)));
  return v;
}

// Same value and same sign of zero; every NaN equals every NaN.
inline bool same_fp16(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return fp16_bits(a) == fp16_bits(b);
}
inline bool same_bf16(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return bf16_bits(a) == bf16_bits(b);
}
inline bool same_double(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// A small deterministic generator for test inputs (splitmix64).
class TestRng {
 public:
  explicit TestRng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1p-53; }                // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal() {  // Box-Muller; test inputs only
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  int integer(int n) { return int(next() % uint64_t(n)); }

 private:
  uint64_t s_;
};

}  // namespace chunkinv::gputest
