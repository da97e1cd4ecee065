// BF16 patterns of doubles for host and device: what the GPU paths' key
// buffers hold. The host packer's version is gpu/pack.hpp's exact_bf16_bits;
// this gives the same bits (tests/inputs/test_device_families.cpp checks all
// 65536 patterns). fp16(beta) bits come from gpu::fp16_bits_rn itself.
#pragma once
#include <cstdint>

#include "core/hd.hpp"

namespace chunkinv::hd {

// BF16 bits of a double that holds a BF16 value exactly: its float's top half.
CHUNKINV_HD inline uint16_t exact_bf16_bits(double v) {
  return static_cast<uint16_t>(bits(static_cast<float>(v)) >> 16);
}

}  // namespace chunkinv::hd
