// FlashKDA's activations of its raw inputs (SPEC §1 "Raw inputs") on the
// CPU: the instructions the kernel uses (tanh.approx.f32, rsqrt.approx.ftz.f32,
// ex2.approx.ftz.f32) by their models, and the FP32 arithmetic around them in
// the kernel's order. Measured on the H200 (`chunkinv calibrate-activation`,
// docs/paths-compared.md "Raw inputs"):
// - tanh.approx.f32 is exact on every BF16 input (the correctly rounded tanh
//   corrected by a table of 3,650 entries), so beta's sigmoid of its BF16
//   logits is exact; on other FP32 inputs in [2^-12, 16) the hardware differs
//   from the correctly rounded tanh by up to 134 ulps and the model is not the
//   hardware there (the gate's argument);
// - rsqrt.approx.ftz.f32 is within 2 ulps of the correctly rounded 1/sqrt
//   (equal on 78.3% of inputs); the model is the correctly rounded value;
// - ex2.approx.ftz.f32 is within 2 ulps of the correctly rounded 2^x (equal
//   on 91.6% of |x| <= 128); the model is the correctly rounded value.
// Every function is built from IEEE operations and detmath only, so it gives
// the same bits on every machine.
#pragma once
#include <cstdint>

namespace chunkinv {

// The models of the instructions.
float tanh_approx_model(float x);   // exact where x is a BF16 value
float rsqrt_approx_model(float x);  // correctly rounded 1/sqrt(x), x > 0 normal; FTZ
float ex2_approx_model(float x);    // correctly rounded 2^x, results below FLT_MIN flushed to 0
bool tanh_model_is_exact(float x);  // x a BF16 value, or outside [2^-12, 16) in magnitude
int tanh_exception_count();         // entries of the measured BF16 table

// FlashKDA's sigmoid: 0.5 tanh.approx(0.5 x) + 0.5 in FP32.
float sigmoid_tanh_model(float x);

}  // namespace chunkinv
