// The instructions of SPEC §2 "kernel", one inline-PTX wrapper each, so that
// the compiler can neither contract nor substitute them (--fmad=false is set
// too). Values travel as raw bits: uint16_t for one BF16/FP16, uint32_t for
// a pair (lower half = lower index), as the mma fragments hold them.
#pragma once
#include <cstdint>

namespace chunkinv::gpu::ptx {

// 2^x, the SFU's approximation; results below FLT_MIN flush to +0.
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The SFU's hyperbolic tangent (FlashKDA's sigmoid, SPEC §1 "Raw inputs").
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// 1/sqrt(x), the SFU's approximation with subnormals flushed (rsqrtf under
// --use_fast_math: FlashKDA's key norm).
__device__ __forceinline__ float rsqrt_approx_ftz(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// FP32 -> BF16 / FP16, round to nearest even (overflow to inf, subnormals kept).
__device__ __forceinline__ uint16_t cvt_rn_bf16(float x) {
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
__device__ __forceinline__ uint16_t cvt_rn_f16(float x) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
__device__ __forceinline__ float f16_to_f32(uint16_t h) {
  float x;
  asm("cvt.f32.f16 %0, %1;" : "=f"(x) : "h"(h));
  return x;
}
__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

// Products and sums rounded once (the exact result rounded to nearest even).
__device__ __forceinline__ uint16_t mul_rn_bf16(uint16_t a, uint16_t b) {
  uint16_t d;
  asm("mul.rn.bf16 %0, %1, %2;" : "=h"(d) : "h"(a), "h"(b));
  return d;
}
__device__ __forceinline__ uint16_t mul_rn_f16(uint16_t a, uint16_t b) {
  uint16_t d;
  asm("mul.rn.f16 %0, %1, %2;" : "=h"(d) : "h"(a), "h"(b));
  return d;
}
__device__ __forceinline__ uint16_t sub_rn_f16(uint16_t a, uint16_t b) {
  uint16_t d;
  asm("sub.rn.f16 %0, %1, %2;" : "=h"(d) : "h"(a), "h"(b));
  return d;
}
__device__ __forceinline__ uint16_t add_rn_f16(uint16_t a, uint16_t b) {
  uint16_t d;
  asm("add.rn.f16 %0, %1, %2;" : "=h"(d) : "h"(a), "h"(b));
  return d;
}
// Two BF16 products at once, each rounded once (mul.rn.bf16 lane by lane).
__device__ __forceinline__ uint32_t mul_rn_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// The Neumann update's add, two lanes at once (what __hadd2 compiles to).
__device__ __forceinline__ uint32_t add_rn_f16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// D (16x8, FP32) = A (16x16 BF16, row) * B (16x8 BF16, col) + C (FP32).
__device__ __forceinline__ void mma_bf16_f32(float d[4], const uint32_t a[4], const uint32_t b[2],
                                             const float c[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
// D (16x8, FP16) = A (16x16 FP16, row) * B (16x8 FP16, col) + C (FP16).
__device__ __forceinline__ void mma_f16_f16(uint32_t d[2], const uint32_t a[4], const uint32_t b[2],
                                            const uint32_t c[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
      "{%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};"
      : "=r"(d[0]), "=r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]));
}

// 16 bytes from global to shared memory without passing through registers
// (cp.async, L2 only); the copies of a thread complete at cp_async_wait_all,
// and are seen by the other threads after a barrier that follows it.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(smem))),
               "l"(gmem)
               : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Fragment layout of m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"):
// lane = 4 * group + tig. A: a[0] = rows group, cols 2tig..2tig+1; a[1] rows
// group+8; a[2], a[3] the same at cols +8. B: b[0] = k rows 2tig..2tig+1 of
// column group; b[1] at k rows +8. C/D: rows group (c0,c1) and group+8
// (c2,c3), cols 2tig, 2tig+1.
__device__ __forceinline__ uint32_t pack2(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

}  // namespace chunkinv::gpu::ptx
