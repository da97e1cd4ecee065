// Bf16Divider (below), host and device.
#pragma once
#include <cstdint>

#include "core/fp.hpp"
#include "core/hd.hpp"

namespace chunkinv {

// round_to(x / y, kBF16) for many x and one y, with one division for all of
// them: the GPU's key rows divide each of a row's d normals by the row's
// norm, and a correctly rounded division was a sixth of their instructions.
//
// q = RN(x * r), r = RN(1 / y), is within 2^-52 |x / y| (two roundings of
// 2^-53 each) of x / y, and RN(x / y) within 2^-53 |x / y|, so the two are
// at most 6 units apart in q's last place (12 where they straddle a power of
// two). round_to(., kBF16) is monotone and changes value only at the
// midpoints between neighbouring BF16 values, whose low 45 significand bits
// are 2^44 in their own binade (powers of two are 2^44 units from any of
// them). Where q's low 45 bits are more than 16 units from 2^44, no midpoint
// lies between q and RN(x / y), and both round to the same BF16 value. The
// rest (about 2^-39 of quotients, and every x, y for which r or q is not a
// normal double well inside BF16's range, NaN and zeros included) divide.
class Bf16Divider {
 public:
  CHUNKINV_HD explicit Bf16Divider(double y) : y_(y), r_(1.0 / y) {
    const int e = static_cast<int>((hd::bits(r_) >> 52) & 0x7FF);
    fast_ = e > 0 && e < 0x7FF;  // r normal and finite: its own rounding is relative
  }
  CHUNKINV_HD double operator()(double x) const {
    uint64_t u;
    return product(x, u) ? round_to(hd::from_bits(u), kBF16) : round_to(x / y_, kBF16);
  }
  // The BF16 bits of (*this)(x) where the product decides it (true): the
  // rounding of q to 8 significant bits done on q's high word. No tie is
  // possible there (q is more than kMargin units from every midpoint), so
  // adding half a BF16 unit (2^44 units of q) and cutting is round to
  // nearest even; a carry into the exponent is the next binade, as in
  // round_to, and q < 2^127 cannot round past BF16's largest finite value.
  // The exponent is then rebased from the double's bias to BF16's (1023 -
  // 127 = 896). False where the division decides: call operator().
  CHUNKINV_HD bool fast_bits(double x, uint16_t& bits) const {
    uint64_t u;
    if (!product(x, u)) return false;
    const uint32_t hi = static_cast<uint32_t>(u >> 32);
    const uint32_t magnitude = ((hi & 0x7FFFFFFFu) + (uint32_t{1} << 12)) >> 13;  // exponent and 7 fraction bits
    bits = static_cast<uint16_t>(((hi >> 16) & 0x8000u) | (magnitude - (896u << 7)));
    return true;
  }
  static constexpr int64_t kMargin = 16;

 private:
  // q = x * r in u; true where RN(q, BF16) is RN(x / y, BF16) (above).
  CHUNKINV_HD bool product(double x, uint64_t& u) const {
    if (!fast_) return false;
    u = hd::bits(x * r_);
    const int e = static_cast<int>((u >> 52) & 0x7FF) - 1023;
    const int64_t low = static_cast<int64_t>(u & ((uint64_t{1} << 45) - 1));
    const int64_t off = low - (int64_t{1} << 44);
    return e > kBF16.emin && e < 127 && (off > kMargin || off < -kMargin);
  }

  double y_, r_;
  bool fast_;
};

}  // namespace chunkinv
