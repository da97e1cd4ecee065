// Host-side packing and unpacking of the GPU paths' data (plain C++, so
// that it is tested without a GPU too).
//
// FP64 -> FP16 bits rounded once to nearest even, the same as
// fp16_bits(fp16(x)) of core/fp.hpp (which tests/gpu/test_pack.cpp checks
// over millions of values), in a few integer operations instead of
// ilogb/ldexp: the run on fp16(gold L) was 60% of the kernel path's host time.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/hd.hpp"
#include "core/matrix.hpp"

namespace chunkinv::gpu {

CHUNKINV_HD inline uint16_t fp16_bits_rn(double x) {  // host and device (metrics/device_metrics.cu)
  uint64_t u;
  std::memcpy(&u, &x, 8);
  const uint16_t sign = static_cast<uint16_t>((u >> 48) & 0x8000);
  u &= 0x7FFFFFFFFFFFFFFFull;
  if (u > 0x7FF0000000000000ull) return 0x7E00;         // NaN: the canonical quiet NaN
  if (u >= 0x40EFFE0000000000ull) return sign | 0x7C00;  // |x| >= 65520 (or inf): +-inf
  if (u < 0x3F10000000000000ull) {                       // |x| < 2^-14: subnormal or zero, step 2^-24
    double a;
    std::memcpy(&a, &u, 8);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24));  // exact scaling; 1024 is 2^-14
  }
  const int e16 = static_cast<int>(u >> 52) - 1023 + 15;  // 1..30
  const uint64_t m = u & 0xFFFFFFFFFFFFFull;
  const uint64_t q = m >> 42, rem = m & 0x3FFFFFFFFFFull, half = 0x20000000000ull;
  const uint64_t up = (rem > half || (rem == half && (q & 1))) ? 1 : 0;
  return sign | static_cast<uint16_t>((uint64_t(e16) << 10) + q + up);  // a carry moves into the exponent
}

// BF16 bits of a double that holds a BF16 value exactly (the keys): its float's top half.
inline uint16_t exact_bf16_bits(double v) {
  const float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

// Every 16-bit pattern's value (NaN patterns give NaN).
const std::vector<double>& bf16_values();
const std::vector<double>& fp16_values();

// Unpacking into a caller's objects, which keep their storage from batch to
// batch (no allocation once they have the size): a C x C matrix stored
// row-major as FP16 bit patterns, and C BF16 bit patterns, as exact doubles.
void unpack_fp16_matrix(Mat& m, const uint16_t* src, int C);
void unpack_bf16_vector(std::vector<double>& v, const uint16_t* src, int C);

}  // namespace chunkinv::gpu
