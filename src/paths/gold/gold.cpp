#include "paths/gold/gold.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/detmath.hpp"
#include "core/error.hpp"
#include "inputs/raw.hpp"
#include "paths/path.hpp"

namespace chunkinv {

GoldOutput compute_gold(const Sample& sample) {
  // From FlashKDA's raw inputs, the exact activation of them (SPEC §1): the
  // gold is the mathematics, not the kernel's activation.
  Sample exact;
  if (sample.raw) exact = activate_exact(*sample.raw);
  const Sample& s = sample.raw ? exact : sample;
  const int c = s.chunk, w = s.gate_width();
  // G cumulated per channel (one channel for per-token gates) in FP64.
  std::vector<double> cum(static_cast<size_t>(c) * w);
  for (int k = 0; k < w; ++k) {
    double acc = 0.0;
    for (int t = 0; t < c; ++t) cum[static_cast<size_t>(t) * w + k] = acc += s.gate(t, k);
  }
  GoldOutput out;
  out.L = Mat::Zero(c, c);
  for (int i = 1; i < c; ++i) {
    for (int j = 0; j < i; ++j) {
      double dot = 0.0;  // one summation order on every platform
      if (w == 1) {
        for (int k = 0; k < s.dim; ++k) dot += s.key(i, k) * s.key(j, k);
        out.L(i, j) = s.beta[i] * dot * detmath::exp(std::min(cum[i] - cum[j], 0.0));
      } else {
        for (int k = 0; k < s.dim; ++k)
          dot += s.key(i, k) * s.key(j, k) *
                 detmath::exp(std::min(cum[static_cast<size_t>(i) * w + k] - cum[static_cast<size_t>(j) * w + k], 0.0));
        out.L(i, j) = s.beta[i] * dot;
      }
    }
  }
  out.inv = unit_lower_inverse(out.L);
  return out;
}

namespace {

class GoldPath final : public CpuPath {
  LForm form_l(const Sample&, const GoldOutput& gold, LStorage) const override { return {{}, {}, gold.L}; }
  bool forms_gold_l() const override { return true; }
};

std::string arithmetic() {
  return "FP64 from the BF16 keys: L_ij = beta_i (k_i.k_j) exp(min(G_i - G_j, 0)) (per-channel gates: "
         "beta_i sum_c k_ic k_jc exp(min(G_ic - G_jc, 0))), G cumulated in FP64; inverse by unit-lower "
         "triangular solve (Eigen) in FP64; from FlashKDA's raw inputs, their exact activation in FP64 "
         "(k / sqrt(|k|^2 + 1e-6), g = lower_bound sigmoid(e^A_log (g_raw + dt_bias)), beta = sigmoid(beta_raw))";
}
std::string available() { return ""; }
std::unique_ptr<Path> make(const PathOptions&) { return std::make_unique<GoldPath>(); }

}  // namespace

extern const PathSpec kGoldPath{.name = "gold",
                                .device = Device::kCpu,
                                .reference = true,
                                .arithmetic = arithmetic,
                                .fidelity = nullptr,
                                .unavailable = available,
                                .supports = supports_every_method,
                                .check_options = takes_no_options,
                                .make = make,
                                .pipeline_form = PipelineForm::kGold};

}  // namespace chunkinv
