// FlashKDA's raw inputs (SPEC §1 "Raw inputs") and their activations: the
// kernel's, in its FP32 arithmetic and order with the measured models of its
// instructions (arith/activation.hpp), and the exact one in FP64 for the gold.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inputs/sample.hpp"

namespace chunkinv {

struct RawInputs {
  int chunk = 0, dim = 0;
  std::vector<uint16_t> keys;  // C x d BF16 bits, not normalised
  std::vector<uint16_t> g;     // C x d BF16 bits: gate logits
  std::vector<uint16_t> beta;  // C BF16 bits: beta logits
  float a_log = 0.0f;          // A_log of the head
  std::vector<float> dt_bias;  // d
  float lower_bound = -5.0f;   // in [-5, 0)
  // The last `padding` rows pad the partial last chunk of a sequence (a raw
  // set of the tokens layout, tail=pad): their raw inputs are zero, and every
  // activation (CPU models, GPU, exact) gives them zero keys, g = 0 and
  // beta = 0, as the activated tokens layout pads (docs/inputs.md).
  int padding = 0;

  float key_raw(int t, int c) const;
  float gate_raw(int t, int c) const;
};

// The kernel's activation, one step each (FP32; names as in SPEC §1):
// the inverse norm of key row t: FP32 FMA partial sums over groups of 8
// channels in channel order, a butterfly of FP32 adds over the groups (their
// count padded with zeros to a power of two; FlashKDA's d = 128 has 16), then
// rsqrt.approx(sum + 1e-6).
float kernel_key_inv_norm(const RawInputs& r, int t, float (*rsqrt)(float));
// a = ex2.approx.ftz(A_log * log2 e) in FP32.
float kernel_gate_a(const RawInputs& r, float (*ex2)(float));
// The per-element gate in log2 units: (lower_bound log2 e) sig(a (g_raw + dt_bias)).
float kernel_gate_log2(const RawInputs& r, int t, int c, float a, float (*sigmoid)(float));

// The Sample every kernel-arithmetic path sees, activated by the CPU models.
Sample activate_kernel_model(std::shared_ptr<const RawInputs> raw);
// A Sample from values the kernel activated (keys BF16, gates in log2 units,
// beta FP32), e.g. on the GPU; padding rows are set to zero keys, g and beta.
Sample sample_from_activated(std::shared_ptr<const RawInputs> raw, const std::vector<float>& keys,
                             const std::vector<float>& g_log2, const std::vector<float>& beta);
// The exact activation in FP64, for the gold: k / sqrt(|k|^2 + 1e-6),
// g = lower_bound sigmoid(e^A_log (g_raw + dt_bias)) (natural log),
// beta = sigmoid(beta_raw); padding rows zero, as above.
Sample activate_exact(const RawInputs& raw);

// Checks shapes and values; throws UsageError naming `what` and the culprit.
void validate_raw(const RawInputs& raw, const std::string& what);

}  // namespace chunkinv
