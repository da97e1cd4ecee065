// Probes of single instructions, for the GPU tests and `chunkinv
// calibrate-decay`: each runs one instruction of SPEC §2 "kernel" over host
// arrays (raw bits in and out) so that it can be compared with the CPU model.
// Defined only when built with CUDA (CHUNKINV_HAVE_CUDA).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace chunkinv::gpu::testing {

// `tiles` independent mma.sync.m16n8k16 instructions. a: tiles x 16 x 16
// (row-major, m x k); b: tiles x 16 x 8 (row-major, k x n); c, d: tiles x 16 x 8.
void mma_bf16_f32(const uint16_t* a, const uint16_t* b, const float* c, float* d, size_t tiles);
void mma_f16_f16(const uint16_t* a, const uint16_t* b, const uint16_t* c, uint16_t* d, size_t tiles);

// Elementwise: ex2.approx.ftz.f32 (y) and cvt.rn.bf16.f32 of it (y_bf16).
void ex2_approx_ftz(const float* x, float* y, uint16_t* y_bf16, size_t n);
// Elementwise conversions and arithmetic, each rounded once.
void cvt_rn_bf16(const float* x, uint16_t* y, size_t n);
void cvt_rn_f16(const float* x, uint16_t* y, size_t n);
void mul_rn_bf16(const uint16_t* a, const uint16_t* b, uint16_t* y, size_t n);
void mul_rn_f16(const uint16_t* a, const uint16_t* b, uint16_t* y, size_t n);
void add_rn_f16(const uint16_t* a, const uint16_t* b, uint16_t* y, size_t n);

// Every FP32 x with |x| <= max_abs through ex2.approx.ftz.f32 + cvt.rn.bf16.
// Returned are the candidates: inputs whose FP32 result lies within `window`
// units in the last place of a BF16 rounding boundary, near the FTZ or
// overflow threshold, or whose BF16 differs from that of float(exp2(double
// x)); everywhere else bf16 of any FP32 value within `window` ulps of the
// hardware's is the hardware's BF16. max_ulp is the largest distance seen
// between the hardware's FP32 result and float(exp2(double x)), the
// evidence that `window` is wide enough.
struct DecayScan {
  uint64_t inputs = 0;
  std::vector<uint32_t> x_bits;      // candidate inputs
  std::vector<uint16_t> hw_bf16;     // the hardware's BF16 for each
  uint32_t max_ulp = 0;
  double gpu_ms = 0;
};
DecayScan scan_decay(float max_abs, int window);

}  // namespace chunkinv::gpu::testing
