#include "inputs/raw.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "arith/activation.hpp"
#include "core/detmath.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"

namespace chunkinv {
namespace {

constexpr double kLog2e = 1.4426950408889634074;  // log2(e), nearest double
constexpr float kLog2eF = 1.44269502f;            // log2(e), nearest float (the kernel's constant)

float bf16_value(uint16_t bits) { return static_cast<float>(bf16_from_bits(bits)); }

Sample blank(const RawInputs& r) {
  Sample s;
  s.chunk = r.chunk;
  s.dim = r.dim;
  s.gating = Gating::kChannel;
  s.keys.resize(static_cast<size_t>(r.chunk) * r.dim);
  s.g.resize(static_cast<size_t>(r.chunk) * r.dim);
  s.beta.resize(r.chunk);
  return s;
}

// The last `padding` rows: zero keys, g = 0 (a decay of 1) and beta = 0, the
// padding of the activated tokens layout (chunk_sample).
void zero_padding(Sample& s, int padding) {
  for (int t = s.chunk - padding; t < s.chunk; ++t) {
    const size_t row = static_cast<size_t>(t) * s.dim;
    std::fill(s.keys.begin() + row, s.keys.begin() + row + s.dim, 0.0);
    std::fill(s.g.begin() + row, s.g.begin() + row + s.dim, 0.0);
    s.beta[static_cast<size_t>(t)] = 0.0;
  }
}

}  // namespace

float RawInputs::key_raw(int t, int c) const { return bf16_value(keys[static_cast<size_t>(t) * dim + c]); }
float RawInputs::gate_raw(int t, int c) const { return bf16_value(g[static_cast<size_t>(t) * dim + c]); }

float kernel_key_inv_norm(const RawInputs& r, int t, float (*rsqrt)(float)) {
  const int groups = (r.dim + 7) / 8;
  int lanes = 1;
  while (lanes < groups) lanes *= 2;
  float part[512] = {};  // dim <= 4096
  for (int j = 0; j < groups; ++j) {
    float p = 0.0f;
    for (int c = 8 * j; c < std::min(r.dim, 8 * j + 8); ++c) {
      const float k = r.key_raw(t, c);
      p = std::fma(k, k, p);
    }
    part[j] = p;
  }
  for (int h = lanes / 2; h >= 1; h /= 2) {  // every lane adds its partner's sum (xor h): lane 0's is kept
    float next[512];
    for (int i = 0; i < lanes; ++i) next[i] = part[i] + part[i ^ h];
    std::memcpy(part, next, sizeof(float) * static_cast<size_t>(lanes));
  }
  return rsqrt(part[0] + 1e-6f);
}

float kernel_gate_a(const RawInputs& r, float (*ex2)(float)) { return ex2(r.a_log * kLog2eF); }

float kernel_gate_log2(const RawInputs& r, int t, int c, float a, float (*sigmoid)(float)) {
  const float scale = static_cast<float>(static_cast<double>(r.lower_bound) * kLog2e);
  const float x = a * (r.gate_raw(t, c) + r.dt_bias[static_cast<size_t>(c)]);
  return scale * sigmoid(x);
}

Sample sample_from_activated(std::shared_ptr<const RawInputs> raw, const std::vector<float>& keys,
                             const std::vector<float>& g_log2, const std::vector<float>& beta) {
  Sample s = blank(*raw);
  for (size_t e = 0; e < s.keys.size(); ++e) s.keys[e] = keys[e];
  // fp32(g log2 e), with the product in FP64 as every kernel-arithmetic path
  // forms it, gives g_log2 back exactly: g is within 2^-52 of g_log2 / log2 e.
  for (size_t e = 0; e < s.g.size(); ++e) s.g[e] = static_cast<double>(g_log2[e]) / kLog2e;
  for (size_t t = 0; t < s.beta.size(); ++t) s.beta[t] = beta[t];
  zero_padding(s, raw->padding);
  s.raw = std::move(raw);
  return s;
}

Sample activate_kernel_model(std::shared_ptr<const RawInputs> raw) {
  const RawInputs& r = *raw;
  const size_t cd = static_cast<size_t>(r.chunk) * r.dim;
  std::vector<float> keys(cd), g(cd), beta(r.chunk);
  const float a = kernel_gate_a(r, ex2_approx_model);
  for (int t = 0; t < r.chunk; ++t) {
    const float inv = kernel_key_inv_norm(r, t, rsqrt_approx_model);
    for (int c = 0; c < r.dim; ++c) {
      const size_t e = static_cast<size_t>(t) * r.dim + c;
      keys[e] = static_cast<float>(bf16(r.key_raw(t, c) * inv));  // FP32 product, then BF16
      g[e] = kernel_gate_log2(r, t, c, a, sigmoid_tanh_model);
    }
    beta[static_cast<size_t>(t)] = sigmoid_tanh_model(bf16_value(r.beta[static_cast<size_t>(t)]));
  }
  return sample_from_activated(std::move(raw), keys, g, beta);
}

Sample activate_exact(const RawInputs& r) {
  Sample s = blank(r);
  const double a = detmath::exp(static_cast<double>(r.a_log));
  for (int t = 0; t < r.chunk; ++t) {
    double norm2 = 0.0;
    for (int c = 0; c < r.dim; ++c) norm2 += static_cast<double>(r.key_raw(t, c)) * r.key_raw(t, c);
    const double inv = 1.0 / std::sqrt(norm2 + 1e-6);
    for (int c = 0; c < r.dim; ++c) {
      const size_t e = static_cast<size_t>(t) * r.dim + c;
      s.keys[e] = r.key_raw(t, c) * inv;
      s.g[e] = r.lower_bound * detmath::sigmoid(a * (static_cast<double>(r.gate_raw(t, c)) + r.dt_bias[size_t(c)]));
    }
    s.beta[static_cast<size_t>(t)] = detmath::sigmoid(bf16_value(r.beta[static_cast<size_t>(t)]));
  }
  zero_padding(s, r.padding);
  return s;
}

void validate_raw(const RawInputs& r, const std::string& what) {
  const size_t cd = static_cast<size_t>(r.chunk) * r.dim;
  if (r.keys.size() != cd || r.g.size() != cd || r.beta.size() != size_t(r.chunk) || r.dt_bias.size() != size_t(r.dim))
    throw UsageError(fmt::format("{}: raw inputs of inconsistent shapes", what));
  if (r.padding < 0 || (r.padding > 0 && r.padding >= r.chunk))
    throw UsageError(fmt::format("{}: {} padding rows in a chunk of {}", what, r.padding, r.chunk));
  auto finite_bf16 = [](uint16_t b) { return (b & 0x7F80u) != 0x7F80u; };
  for (size_t e = 0; e < cd; ++e) {
    if (!finite_bf16(r.keys[e])) throw UsageError(fmt::format("{}: keys element {} is not finite", what, e));
    if (!finite_bf16(r.g[e])) throw UsageError(fmt::format("{}: g_raw element {} is not finite", what, e));
  }
  for (size_t t = 0; t < r.beta.size(); ++t)
    if (!finite_bf16(r.beta[t])) throw UsageError(fmt::format("{}: beta_raw element {} is not finite", what, t));
  for (size_t c = 0; c < r.dt_bias.size(); ++c)
    if (!std::isfinite(r.dt_bias[c])) throw UsageError(fmt::format("{}: dt_bias element {} is not finite", what, c));
  if (!std::isfinite(r.a_log) || r.a_log > 80.0f)
    throw UsageError(fmt::format("{}: A_log = {} must be finite and at most 80", what, r.a_log));
  if (!(r.lower_bound >= -5.0f && r.lower_bound < 0.0f))
    throw UsageError(fmt::format("{}: lower_bound = {} must lie in [-5, 0)", what, r.lower_bound));
}

}  // namespace chunkinv
