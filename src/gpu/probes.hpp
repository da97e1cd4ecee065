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
// `tiles` independent mma.sync.m8n8k4.f64. a: tiles x 8 x 4 (row-major,
// m x k); b: tiles x 4 x 8 (row-major, k x n); c, d: tiles x 8 x 8.
void mma_f64_m8n8k4(const double* a, const double* b, const double* c, double* d, size_t tiles);

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

// Exhaustive scans of one SFU instruction over a range of FP32 inputs,
// against its correctly rounded reference (the double function rounded to
// FP32 on the GPU): what `chunkinv calibrate-activation` reports before a
// model of FlashKDA's activations is chosen (SPEC §1 "Raw inputs").
enum class SfuOp { kTanh, kRsqrt, kEx2 };
struct SfuScan {
  uint64_t inputs = 0;                     // finite inputs scanned
  uint64_t equal = 0;                      // hardware == reference, bit for bit
  std::vector<uint64_t> ulp_hist;          // 129 bins: hardware - reference in ulps, -64..64
  uint64_t ulp_below = 0, ulp_above = 0;   // beyond the bins (or of another sign)
  std::vector<uint64_t> trunc_differs;     // [k], k = 0..22: f(x cut to k mantissa bits) != f(x)
  std::vector<uint64_t> rne_differs;       // [k]: f(x rounded to nearest even at k bits) != f(x)
  uint32_t low_bits_or = 0;                // OR of every result's mantissa bits
  std::vector<uint64_t> exp_inputs;        // [biased exponent of x]: inputs
  std::vector<uint64_t> exp_differ;        // [biased exponent of x]: results != reference
  std::vector<uint32_t> exp_max_ulp;       // [biased exponent of x]: largest |hardware - reference|
  uint64_t scale4_checked = 0, scale4_differ = 0;  // rsqrt only: f(4x) != f(x) / 2
  double gpu_ms = 0;
};
// Inputs: kTanh every finite FP32; kRsqrt every positive normal FP32;
// kEx2 every FP32 with |x| <= 128.
SfuScan scan_sfu(SfuOp op);
// tanh.approx.f32 of each of the 65,536 BF16 values (index = BF16 bits),
// as FP32 bits: beta's logits are BF16, so this is the whole of its sigmoid.
std::vector<uint32_t> tanh_approx_bf16_all();

// The instruction alone, raw FP32 bits in and out (sfu_range.cu): on the n
// consecutive patterns from `first` (a scan's slice), or on a list of inputs.
void sfu_range(SfuOp op, uint32_t first, size_t n, uint32_t* y_bits);
void sfu_apply(SfuOp op, const uint32_t* x_bits, uint32_t* y_bits, size_t n);

}  // namespace chunkinv::gpu::testing
