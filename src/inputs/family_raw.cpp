// Families of FlashKDA's raw inputs (SPEC §1 "Raw inputs"; docs/inputs.md):
// `kda`, raw per-channel gates as FlashKDA's users see them, and
// `collinear`, one key repeated with a perturbation, whose eps = 0,
// gate_raw = -12, beta_raw = 8, lower_bound = -5 point is the FP16 Neumann
// inverse's NaN reproducer. A sample is its raw inputs, activated by the
// kernel's model (inputs/raw.hpp); the gold activates them exactly.
#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/rng.hpp"
#include "inputs/family.hpp"
#include "inputs/raw.hpp"
#include "inputs/raw_families.hpp"

namespace chunkinv {
namespace {

double number(const Configuration& c, const char* name) {
  const auto it = c.params.find(name);
  if (it == c.params.end() || !it->is_number())
    throw UsageError(fmt::format("axis {} of family {} must be a number", name, c.family));
  const double v = it->get<double>();
  if (!std::isfinite(v)) throw UsageError(fmt::format("axis {} = {} must be finite", name, it->dump()));
  return v;
}

void require_range(const Configuration& c, const char* name, double lo, double hi, const char* allowed) {
  const double v = number(c, name);
  if (!(v >= lo && v <= hi)) throw UsageError(fmt::format("axis {} = {} must be {}", name, c.params[name].dump(), allowed));
}

// Checks shared by both families: the lower bound and A_log.
void validate_activation_axes(const Configuration& c) {
  const double lb = number(c, "lower_bound");
  if (!(lb >= -5.0 && lb < 0.0))
    throw UsageError(fmt::format("axis lower_bound = {} must lie in [-5, 0)", c.params["lower_bound"].dump()));
  require_range(c, "a_log", -80.0, 80.0, "in [-80, 80] (a = e^a_log)");
}

uint16_t bf16_bits_of(double x) { return bf16_bits(bf16(x)); }

std::shared_ptr<RawInputs> blank_raw(const Configuration& c) {
  auto r = std::make_shared<RawInputs>();
  r->chunk = c.chunk;
  r->dim = c.dim;
  const size_t cd = static_cast<size_t>(c.chunk) * c.dim;
  r->keys.resize(cd);
  r->g.resize(cd);
  r->beta.resize(c.chunk);
  r->dt_bias.assign(c.dim, 0.0f);
  r->a_log = static_cast<float>(number(c, "a_log"));
  r->lower_bound = static_cast<float>(number(c, "lower_bound"));
  return r;
}

const FamilyParam kLowerBound{"lower_bound", -5.0, "FlashKDA's lower_bound of the gate, in [-5, 0)"};
const FamilyParam kALog{"a_log", 0.0, "the head's A_log (a = e^a_log multiplies g_raw + dt_bias)"};

class KdaFamily final : public Family {
 public:
  std::string name() const override { return "kda"; }
  std::optional<DeviceDraw> device_draw(const Configuration& c, std::string* why) const override {
    return no_device_form(why, "family " + c.family + " draws FlashKDA's raw inputs, which the device does not generate");
  }
  std::string description() const override {
    return "FlashKDA's raw inputs: keys N(0,1) in BF16, not normalised; g_raw N(0, gate_scale^2) in BF16 per "
           "token and channel; beta_raw N(0,1) in BF16; dt_bias N(0, dt_bias_spread^2) in FP32 per channel; "
           "activated by the kernel (gold: exactly)";
  }
  std::vector<FamilyParam> params() const override {
    return {kLowerBound, {"gate_scale", 1.0, "standard deviation of the raw gate logits (> 0)"}, kALog,
            {"dt_bias_spread", 1.0, "standard deviation of dt_bias (>= 0)"}};
  }
  void validate(const Configuration& c) const override {
    Family::validate(c);
    validate_activation_axes(c);
    require_range(c, "gate_scale", 1e-30, 1e30, "a positive number");
    require_range(c, "dt_bias_spread", 0.0, 1e30, "a number >= 0");
  }
  Sample make(const Configuration& c, uint64_t seed, uint64_t index) const override {
    auto r = blank_raw(c);
    const Rng keys(seed, index, Stream::kKeys), gate(seed, index, Stream::kChannelGate),
        beta(seed, index, Stream::kBeta), dt(seed, index, Stream::kDtBias);
    const double scale = number(c, "gate_scale"), spread = number(c, "dt_bias_spread");
    for (size_t e = 0; e < r->keys.size(); ++e) {
      r->keys[e] = bf16_bits_of(keys.normal(e));
      r->g[e] = bf16_bits_of(scale * gate.normal(e));
    }
    for (int t = 0; t < c.chunk; ++t) r->beta[size_t(t)] = bf16_bits_of(beta.normal(uint64_t(t)));
    for (int k = 0; k < c.dim; ++k) r->dt_bias[size_t(k)] = static_cast<float>(spread * dt.normal(uint64_t(k)));
    return activate_kernel_model(std::move(r));
  }
};

class CollinearFamily final : public Family {
 public:
  std::string name() const override { return "collinear"; }
  std::optional<DeviceDraw> device_draw(const Configuration& c, std::string* why) const override {
    return no_device_form(why, "family " + c.family + " draws FlashKDA's raw inputs, which the device does not generate");
  }
  std::string description() const override {
    return "FlashKDA's raw inputs: one key u ~ N(0, I) repeated, row t = u + eps n_t (n_t ~ N(0, I)), in BF16; "
           "every g_raw = gate_raw and beta_raw = beta_raw (BF16), dt_bias = 0; eps=0, gate_raw=-12, beta_raw=8, "
           "lower_bound=-5 is the FP16 Neumann NaN reproducer";
  }
  std::vector<FamilyParam> params() const override {
    return {{"eps", 0.0, "perturbation of each row of the repeated key (>= 0)"},
            {"gate_raw", -12.0, "the raw gate logit of every token and channel (rounded to BF16)"},
            {"beta_raw", 8.0, "the raw beta logit of every token (rounded to BF16)"},
            kLowerBound,
            kALog};
  }
  void validate(const Configuration& c) const override {
    Family::validate(c);
    validate_activation_axes(c);
    require_range(c, "eps", 0.0, 1e30, "a number >= 0");
    require_range(c, "gate_raw", -3.0e38, 3.0e38, "a finite BF16 value");
    require_range(c, "beta_raw", -3.0e38, 3.0e38, "a finite BF16 value");
  }
  Sample make(const Configuration& c, uint64_t seed, uint64_t index) const override {
    auto r = blank_raw(c);
    const Rng base(seed, index, Stream::kSingleKey), perturb(seed, index, Stream::kKeys);
    const double eps = number(c, "eps");
    for (int t = 0; t < c.chunk; ++t)
      for (int k = 0; k < c.dim; ++k) {
        const size_t e = static_cast<size_t>(t) * c.dim + k;
        const double n = eps == 0.0 ? 0.0 : eps * perturb.normal(e);
        r->keys[e] = bf16_bits_of(base.normal(uint64_t(k)) + n);
      }
    std::fill(r->g.begin(), r->g.end(), bf16_bits_of(number(c, "gate_raw")));
    std::fill(r->beta.begin(), r->beta.end(), bf16_bits_of(number(c, "beta_raw")));
    return activate_kernel_model(std::move(r));
  }
};

}  // namespace

std::unique_ptr<Family> make_kda_family() { return std::make_unique<KdaFamily>(); }
std::unique_ptr<Family> make_collinear_family() { return std::make_unique<CollinearFamily>(); }

}  // namespace chunkinv
