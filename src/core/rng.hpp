// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11): the
// value at a counter depends on nothing else, so sample i of seed s is the
// same on every machine, thread count, shard split and evaluation order.
// The arithmetic is core/philox.hpp, one source with the GPU's generator.
#pragma once
#include <array>
#include <cstdint>
#include <utility>

namespace chunkinv {

// Streams of one sample: each input draws from its own so that adding a
// family parameter never shifts another input's numbers.
enum class Stream : uint32_t { kKeys = 0, kGate = 1, kBeta = 2, kSingleKey = 3, kChannelGate = 4, kDtBias = 5, kUser = 16 };

class Rng {
 public:
  Rng(uint64_t seed, uint64_t sample, Stream stream)
      : seed_(seed), sample_(sample), stream_(static_cast<uint32_t>(stream)) {}

  // Four 32-bit words at position `index` of this stream.
  std::array<uint32_t, 4> block(uint64_t index) const;
  // Uniform double in (0, 1) with 53 random bits; `index` addresses it.
  double uniform(uint64_t index) const;
  // Standard normal number `index` of this stream (Marsaglia polar method,
  // with detmath::log so that it is platform-independent).
  double normal(uint64_t index) const;
  // Normals 2*pair and 2*pair + 1 at the cost of one.
  std::pair<double, double> normal_pair(uint64_t pair) const;

 private:
  uint64_t seed_;
  uint64_t sample_;
  uint32_t stream_;
};

}  // namespace chunkinv
