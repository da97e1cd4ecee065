// What host/device shared sources need: CHUNKINV_HD marks a function for
// both the CPU and the GPU (nothing without nvcc), and bit casts that work on
// both. A shared function is one source compiled twice; with --fmad=false on
// the device and -ffp-contract=off on the host, both evaluate the same IEEE
// operations in the same order, so they give the same bits.
#pragma once
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define CHUNKINV_HD __host__ __device__
#else
#define CHUNKINV_HD
#endif

// Unrolls the next loop on the device (its trip count a constant), so that
// tables indexed by the loop variable become immediates.
#ifdef __CUDA_ARCH__
#define CHUNKINV_UNROLL _Pragma("unroll")
#else
#define CHUNKINV_UNROLL
#endif
// Keeps the next loop rolled on the device (a loop whose unrolled copies
// would hold their loads in registers the kernel needs elsewhere).
#ifdef __CUDA_ARCH__
#define CHUNKINV_NO_UNROLL _Pragma("unroll 1")
#else
#define CHUNKINV_NO_UNROLL
#endif

namespace chunkinv::hd {

CHUNKINV_HD inline uint64_t bits(double x) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, 8);
  return u;
#endif
}

// The set bits of u, counted; the position of its i-th set bit (from 0,
// lowest first; i < popcount(u)).
CHUNKINV_HD inline int popcount(unsigned u) {
#ifdef __CUDA_ARCH__
  return __popc(u);
#else
  return __builtin_popcount(u);
#endif
}
CHUNKINV_HD inline int nth_bit(unsigned u, int i) {
  for (; i > 0; --i) u &= u - 1;
  return popcount((u & (0u - u)) - 1u);
}

CHUNKINV_HD inline double from_bits(uint64_t u) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, 8);
  return x;
#endif
}

CHUNKINV_HD inline uint32_t bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

}  // namespace chunkinv::hd
