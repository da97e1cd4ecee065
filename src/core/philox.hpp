// The one source of the generator's arithmetic, for the CPU (core/rng.cpp's
// Rng calls these) and the GPU (the device-side input generator):
// Philox4x32-10 (Salmon et al., SC'11), its counter layout, the uniform of
// 53 bits and the Marsaglia polar normal pair. Integer operations, IEEE
// arithmetic, sqrt (correctly rounded on both) and detmath's log: the same
// bits on both.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/detmath_hd.hpp"
#include "core/hd.hpp"

namespace chunkinv::philox {

struct Block {
  uint32_t v[4];
};

inline constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57;
inline constexpr uint32_t kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;

// a * b, 64 bits. On the GPU one IMAD.WIDE.U32 a product: written as a
// 64-bit product in C++, the counter's words reached the compiler as 64-bit
// values, and each product cost a wide multiply and an add of zero to its
// high word (20 of a Philox block's 60 instructions, sm_90, CUDA 13).
CHUNKINV_HD inline uint64_t mul_wide(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  uint64_t r;
  asm("mul.wide.u32 %0, %1, %2;" : "=l"(r) : "r"(a), "r"(b));
  return r;
#else
  return static_cast<uint64_t>(a) * b;
#endif
}

CHUNKINV_HD inline Block philox4x32_10(Block c, uint32_t k0, uint32_t k1) {
  CHUNKINV_UNROLL
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = mul_wide(kM0, c.v[0]);
    const uint64_t p1 = mul_wide(kM1, c.v[2]);
    c = {{static_cast<uint32_t>(p1 >> 32) ^ c.v[1] ^ k0, static_cast<uint32_t>(p1),
          static_cast<uint32_t>(p0 >> 32) ^ c.v[3] ^ k1, static_cast<uint32_t>(p0)}};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

// Block `index` of stream `stream` of sample `sample` of `seed`.
// Key: (seed lo, seed hi); counter: (index lo, index hi ^ stream << 24,
// sample lo, sample hi).
CHUNKINV_HD inline Block block(uint64_t seed, uint64_t sample, uint32_t stream, uint64_t index) {
  const Block ctr{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32) ^ (stream << 24),
                   static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32)}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The top 53 of the 64 bits hi:lo.
CHUNKINV_HD inline uint64_t top53(uint32_t hi, uint32_t lo) { return ((static_cast<uint64_t>(hi) << 32) | lo) >> 11; }

// Uniform in (0, 1) from the top 53 of 64 bits.
CHUNKINV_HD inline double to_unit(uint32_t hi, uint32_t lo) {
  return (static_cast<double>(top53(hi, lo)) + 0.5) * 0x1p-53;
}

// 2 to_unit(hi, lo) - 1, uniform in (-1, 1), in one product fewer: 2 (x
// 2^-53) and x 2^-52 are the same double for every x in (0, 2^53], both
// products by powers of two being exact.
CHUNKINV_HD inline double to_signed_unit(uint32_t hi, uint32_t lo) {
  return (static_cast<double>(top53(hi, lo)) + 0.5) * 0x1p-52 - 1.0;
}

struct NormalPair {
  double x, y;
};

// Attempt a (0..255) of pair `pair` of a stream: the point (u, v) of block
// (pair << 8) | a, each coordinate uniform in (-1, 1); true when it falls
// inside the unit disc without its centre (0 < u*u + v*v < 1).
CHUNKINV_HD inline bool polar_attempt(uint64_t seed, uint64_t sample, uint32_t stream, uint64_t pair, uint32_t a,
                                      double& u, double& v) {
  const Block b = block(seed, sample, stream, (pair << 8) | a);
  u = to_signed_unit(b.v[0], b.v[1]);
  v = to_signed_unit(b.v[2], b.v[3]);
  const double s = u * u + v * v;
  return !(s >= 1.0 || s == 0.0);
}

// The polar transform of an accepted (u, v): {u * f, v * f}, f =
// sqrt(-2 log(s) / s), s = u*u + v*v. (0, 0), which no attempt accepts,
// gives (0, 0): the unresolved pair's normals.
CHUNKINV_HD inline NormalPair polar_transform(double u, double v) {
  const double s = u * u + v * v;  // in [0, 1): u and v in (-1, 1) from polar_attempt
  if (s == 0.0) return {0.0, 0.0};
  const double f = std::sqrt(-2.0 * detmath::hd::log_finite_positive(s) / s);
  return {u * f, v * f};
}

// Normals 2*pair and 2*pair + 1 of a stream. Attempt a of the pair sits at
// counter (pair << 8) | a. Rejection leaves p < 2^-200 of pairs unresolved
// after 256 attempts, so the loop is bounded in practice and the result exact.
CHUNKINV_HD inline NormalPair normal_pair(uint64_t seed, uint64_t sample, uint32_t stream, uint64_t pair) {
  // The draws until one falls inside the unit disc, then the transform once:
  // on a GPU the lanes of a warp that accept at different draws meet again
  // before the log, instead of taking it one after another.
  double u = 0.0, v = 0.0;
  bool inside = false;
  for (uint32_t a = 0; a < 256 && !inside; ++a) inside = polar_attempt(seed, sample, stream, pair, a, u, v);
  if (!inside) return {0.0, 0.0};
  return polar_transform(u, v);
}

// Normal `index` of a stream: one of the pair index / 2.
CHUNKINV_HD inline double normal(uint64_t seed, uint64_t sample, uint32_t stream, uint64_t index) {
  const NormalPair p = normal_pair(seed, sample, stream, index >> 1);
  return (index & 1) ? p.y : p.x;
}

}  // namespace chunkinv::philox
