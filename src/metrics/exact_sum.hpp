// The exact sum of finite doubles, whatever their order: a fixed-point
// integer in units of 2^-1074 (the least subnormal), wide enough for 2^64
// values of any magnitude. Rounded to a double once, to nearest even, when
// asked. This is what makes a streamed mean independent of how the samples
// were split (shards, batches, resumes): the sum of a sharded run is the
// unsharded run's, bit for bit.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace chunkinv {

class ExactSum {
 public:
  // A finite x (the caller counts non-finite values apart).
  void add(double x);
  void add(const ExactSum& other);
  // Adds (negative ? -1 : 1) * (hi * 2^64 + lo) * 2^shift units of 2^-1074,
  // shift in [0, 2047]: a sum of significands of one scale at once (the
  // finite doubles of biased exponent e are integers below 2^53 times
  // 2^(max(e - 1, 0) - 1074)), as metrics/device_sketch accumulates them.
  void add_units(uint64_t hi, uint64_t lo, int shift, bool negative);
  // The sum rounded once to the nearest double (ties to even); +-inf beyond
  // the double range.
  double value() const;

  // The integer (the sum in units of 2^-1074) in lower-case hexadecimal:
  // "0", "1f4", "-a0". from_hex reads exactly that form (no "+", no leading
  // zeros, no "-0") and throws UsageError on anything else.
  std::string to_hex() const;
  static ExactSum from_hex(std::string_view text);

  bool operator==(const ExactSum& other) const;

 private:
  // 32-bit limbs held in int64 so that adds need no carry: each add puts
  // less than 2^32 into at most three limbs, so 2^31 adds would fit before
  // the carries are propagated; they are every 2^20 (a 68-limb pass per
  // million adds). 2098 bits of double range, 64 of count and a sign: 68 limbs.
  static constexpr int kLimbs = 68;
  static constexpr uint32_t kAddsBeforeCarry = uint32_t{1} << 20;
  void carry() const;  // limbs 0..66 into [0, 2^32), limb 67 signed
  mutable std::array<int64_t, kLimbs> limb_{};
  mutable uint32_t adds_ = 0;
};

}  // namespace chunkinv
