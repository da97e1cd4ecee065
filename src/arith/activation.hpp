// FlashKDA's activations of its raw inputs (SPEC §1 "Raw inputs") on the
// CPU: the instructions the kernel uses (tanh.approx.f32, rsqrt.approx.ftz.f32,
// ex2.approx.ftz.f32) by their models, and the FP32 arithmetic around them in
// the kernel's order. Measured on the H200 (`chunkinv calibrate-activation`,
// docs/paths-compared.md "Raw inputs"):
// - tanh.approx.f32, rsqrt.approx.ftz.f32 and ex2.approx.ftz.f32 are
//   modelled bit for bit by the hardware's own algorithm, one table-driven
//   quadratic interpolator with a truncated squarer (docs/sfu-models.md). The
//   models reproduce every input of every binade measured (tanh: [2^-20, 32)
//   and [-2, -1); rsqrt: [1, 4); ex2: ten binades) and the measured tables of
//   the BF16 cases (tanh on every BF16 value, the decay's BF16 roundings);
//   tests/gpu/test_sfu_models.cpp checks them on all 2^32 inputs.
// Every function is built from integer and IEEE operations and detmath only,
// so it gives the same bits on every machine.
#pragma once
#include <cstdint>

namespace chunkinv {

// The models of the instructions.
float tanh_approx_model(float x);   // the instruction on every input
float rsqrt_approx_model(float x);  // the instruction on every input (subnormals as zeros)
float ex2_approx_model(float x);    // the instruction on every input (results below FLT_MIN flushed)
bool tanh_model_is_exact(float x);  // true: the model is the instruction on every input
int tanh_exception_count();         // entries of the measured BF16 table (kept as a check)

// FlashKDA's sigmoid: 0.5 tanh.approx(0.5 x) + 0.5 in FP32.
float sigmoid_tanh_model(float x);

}  // namespace chunkinv
