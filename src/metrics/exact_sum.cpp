#include "metrics/exact_sum.hpp"

#include <bit>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"

namespace chunkinv {
namespace {

constexpr int64_t kMask = 0xFFFFFFFF;

}  // namespace

void ExactSum::add(double x) {
  const uint64_t u = std::bit_cast<uint64_t>(x);
  const int e = static_cast<int>((u >> 52) & 0x7FF);
  uint64_t m = u & ((uint64_t{1} << 52) - 1);
  if (e == 0x7FF || (e == 0 && m == 0)) return;  // non-finite (not ours to add) or zero
  // x = m * 2^(shift - 1074): subnormals have shift 0, normals the implicit bit.
  int shift = 0;
  if (e > 0) {
    m |= uint64_t{1} << 52;
    shift = e - 1;
  }
  const int at = shift / 32;
  const unsigned __int128 t = static_cast<unsigned __int128>(m) << (shift % 32);
  const int64_t p0 = static_cast<int64_t>(static_cast<uint64_t>(t) & kMask);
  const int64_t p1 = static_cast<int64_t>(static_cast<uint64_t>(t >> 32) & kMask);
  const int64_t p2 = static_cast<int64_t>(static_cast<uint64_t>(t >> 64));
  if (u >> 63) {
    limb_[at] -= p0;
    limb_[at + 1] -= p1;
    limb_[at + 2] -= p2;
  } else {
    limb_[at] += p0;
    limb_[at + 1] += p1;
    limb_[at + 2] += p2;
  }
  if (++adds_ == kAddsBeforeCarry) carry();
}

void ExactSum::add_units(uint64_t hi, uint64_t lo, int shift, bool negative) {
  if (shift < 0 || shift > 2047) throw std::invalid_argument("ExactSum::add_units: shift outside [0, 2047]");
  // The 128-bit integer shifted by shift % 32 spans five 32-bit pieces,
  // each below 2^32 like the three of add(double): one add's worth.
  const int at = shift / 32, s = shift % 32;
  int64_t piece[5];
  for (int i = 0; i < 5; ++i) {
    const int b = 32 * i - s;  // bit of hi:lo at the piece's bit 0
    uint64_t v = 0;
    if (b < 0) v = lo << -b;
    else if (b < 64) v = (lo >> b) | (b > 0 ? hi << (64 - b) : 0);
    else if (b < 128) v = hi >> (b - 64);
    piece[i] = static_cast<int64_t>(v & static_cast<uint64_t>(kMask));
  }
  for (int i = 0; i < 5; ++i) limb_[at + i] += negative ? -piece[i] : piece[i];  // at + 4 <= 67
  if (++adds_ == kAddsBeforeCarry) carry();
}

void ExactSum::add(const ExactSum& other) {
  carry();
  other.carry();
  for (int i = 0; i < kLimbs; ++i) limb_[i] += other.limb_[i];
  carry();
}

void ExactSum::carry() const {
  int64_t c = 0;
  for (int i = 0; i + 1 < kLimbs; ++i) {
    const int64_t v = limb_[i] + c;
    limb_[i] = v & kMask;
    c = v >> 32;  // floor division: the limb keeps the non-negative remainder
  }
  limb_[kLimbs - 1] += c;
  adds_ = 0;
}

bool ExactSum::operator==(const ExactSum& other) const {
  carry();
  other.carry();
  return limb_ == other.limb_;
}

double ExactSum::value() const {
  carry();
  ExactSum a = *this;
  const bool negative = a.limb_[kLimbs - 1] < 0;
  if (negative) {
    for (int64_t& l : a.limb_) l = -l;
    a.carry();
  }
  int top = kLimbs - 1;
  while (top >= 0 && a.limb_[top] == 0) --top;
  if (top < 0) return 0.0;
  // Bits [lo, lo + n) of the magnitude, n <= 64.
  const auto bits = [&](int lo, int n) {
    uint64_t r = 0;
    for (int i = 0; i < n; ++i) {
      const int b = lo + i;
      r |= static_cast<uint64_t>((a.limb_[b / 32] >> (b % 32)) & 1) << i;
    }
    return r;
  };
  const int length = 32 * top + static_cast<int>(std::bit_width(static_cast<uint64_t>(a.limb_[top])));
  double r;
  if (length <= 53) {
    r = std::ldexp(static_cast<double>(bits(0, length)), -1074);  // exact
  } else {
    // The leading 53 bits, the next (round) bit, and whether any below it is set.
    uint64_t m = bits(length - 53, 53);
    const bool round = bits(length - 54, 1) != 0;
    const int below = length - 54;  // bits [0, below) make the sticky bit
    bool sticky = false;
    for (int i = 0; i < below / 32 && !sticky; ++i) sticky = a.limb_[i] != 0;
    if (!sticky && below % 32) sticky = (a.limb_[below / 32] & ((int64_t{1} << (below % 32)) - 1)) != 0;
    int exponent = length - 53 - 1074;
    if (round && (sticky || (m & 1))) {
      if (++m == uint64_t{1} << 53) {
        m >>= 1;
        ++exponent;
      }
    }
    r = std::ldexp(static_cast<double>(m), exponent);  // exact, or inf past the range
  }
  return negative ? -r : r;
}

std::string ExactSum::to_hex() const {
  carry();
  ExactSum a = *this;
  const bool negative = a.limb_[kLimbs - 1] < 0;
  if (negative) {
    for (int64_t& l : a.limb_) l = -l;
    a.carry();
  }
  int top = kLimbs - 1;
  while (top > 0 && a.limb_[top] == 0) --top;
  std::string s = negative ? "-" : "";
  s += fmt::format("{:x}", a.limb_[top]);
  for (int i = top - 1; i >= 0; --i) s += fmt::format("{:08x}", a.limb_[i]);
  return s;
}

ExactSum ExactSum::from_hex(std::string_view text) {
  const auto bad = [&](const char* why) {
    const std::string shown = text.size() > 40 ? std::string(text.substr(0, 37)) + "..." : std::string(text);
    return UsageError(fmt::format("sum \"{}\" {}; a sum is the integer in units of 2^-1074 in lower-case hexadecimal",
                                  shown, why));
  };
  const bool negative = !text.empty() && text[0] == '-';
  std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty()) throw bad("has no digits");
  if (digits.size() > 1 && digits[0] == '0') throw bad("has a leading zero");
  if (negative && digits == "0") throw bad("is \"-0\"");
  // The magnitude must leave limb 67 its sign: at most 31 bits there.
  if (digits.size() > (kLimbs - 1) * 8 + 8 || (digits.size() == (kLimbs - 1) * 8 + 8 && digits[0] > '7'))
    throw bad("is too large");
  ExactSum a;
  int bit = 0;
  for (size_t i = digits.size(); i-- > 0; bit += 4) {
    const char c = digits[i];
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else throw bad("holds a character that is not a lower-case hexadecimal digit");
    a.limb_[bit / 32] |= static_cast<int64_t>(v) << (bit % 32);
  }
  if (negative) {
    for (int64_t& l : a.limb_) l = -l;
    a.carry();
  }
  return a;
}

}  // namespace chunkinv
