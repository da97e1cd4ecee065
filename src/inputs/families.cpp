// The generated families of SPEC §4 and the registry of all families.
#include <cmath>
#include <tuple>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/detmath.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/rng.hpp"
#include "inputs/family.hpp"
#include "inputs/data_families.hpp"
#include "inputs/raw_families.hpp"

namespace chunkinv {

nlohmann::json Configuration::axes() const {
  nlohmann::json a = {{"family", family}, {"chunk", chunk}, {"dim", dim}};
  for (const auto& [k, v] : params.items()) a[k] = v;
  return a;
}

void random_unit_key(uint64_t seed, uint64_t index, int row, int dim, double* out) {
  const Rng rng(seed, index, Stream::kKeys);
  double norm2 = 0.0;
  const uint64_t base = static_cast<uint64_t>(row) * static_cast<uint64_t>(dim);
  for (int c = 0; c < dim;) {
    const uint64_t n = base + c;
    if ((n & 1) == 0 && c + 1 < dim) {  // both normals of a pair at once
      std::tie(out[c], out[c + 1]) = rng.normal_pair(n >> 1);
      c += 2;
    } else {
      out[c] = rng.normal(n);
      c += 1;
    }
  }
  for (int c = 0; c < dim; ++c) norm2 += out[c] * out[c];
  const double norm = std::sqrt(norm2);
  for (int c = 0; c < dim; ++c) out[c] = bf16(out[c] / norm);
}

namespace {

double param(const Configuration& c, const char* name) { return c.params.at(name).get<double>(); }
// The same where the axis may still be missing or not a number (NaN then; validate() names it).
double param_or_nan(const Configuration& c, const char* name) {
  const auto it = c.params.find(name);
  return it != c.params.end() && it->is_number() ? it->get<double>() : NAN;
}

void require_negative(const Configuration& c, const char* name) {
  if (!c.params.contains(name) || !c.params[name].is_number())
    throw UsageError(fmt::format("axis {} of family {} must be a number", name, c.family));
  const double v = param(c, name);
  if (!(v < 0.0) || !std::isfinite(v))
    throw UsageError(fmt::format("axis {} = {} must be a finite number < 0", name, c.params[name].dump()));
}

Gating gating_of(const Configuration& c) {
  return c.params.value("gating", nlohmann::json()) == "channel" ? Gating::kChannel : Gating::kToken;
}

Sample blank(const Configuration& c, Gating gating = Gating::kToken) {
  Sample s;
  s.chunk = c.chunk;
  s.dim = c.dim;
  s.gating = gating;
  s.keys.resize(static_cast<size_t>(c.chunk) * c.dim);
  s.g.resize(static_cast<size_t>(c.chunk) * s.gate_width());
  s.beta.resize(c.chunk);
  return s;
}

// The `gating` axis of the families that draw their own gates: "token" (the
// default, left out of the axes so that reports and baselines of per-token
// runs read as before) or "channel".
const FamilyParam kGatingParam{
    "gating", nullptr,
    "token (one log-decay per token; the default, omitted from the axes) or channel (one per token and "
    "channel, drawn independently from the same law; Kimi Delta Attention's gate)"};

void complete_gating(Configuration& c) {
  if (auto it = c.params.find("gating"); it != c.params.end() && (it->is_null() || *it == "token"))
    c.params.erase(it);
}

void validate_gating(const Configuration& c) {
  if (auto it = c.params.find("gating"); it != c.params.end() && *it != "channel")
    throw UsageError(fmt::format("axis gating = {} must be \"token\" or \"channel\"", it->dump()));
}

void random_keys(Sample& s, uint64_t seed, uint64_t index) {
  for (int r = 0; r < s.chunk; ++r) random_unit_key(seed, index, r, s.dim, s.keys.data() + static_cast<size_t>(r) * s.dim);
}

void random_beta(Sample& s, uint64_t seed, uint64_t index) {
  const Rng rng(seed, index, Stream::kBeta);
  for (int t = 0; t < s.chunk; ++t) s.beta[t] = detmath::sigmoid(rng.normal(t));
}

// Random normalised keys and beta = sigmoid(N(0,1)); the gates come from a
// decay floor (< 0), which each subclass turns into g.
class DecayFloorFamily : public Family {
 public:
  explicit DecayFloorFamily(std::string floor_help) : floor_help_(std::move(floor_help)) {}
  std::vector<FamilyParam> params() const override { return {{"decay_floor", -5.0, floor_help_}, kGatingParam}; }
  void complete(Configuration& c) const override { complete_gating(c); }
  void validate(const Configuration& c) const override {
    Family::validate(c);
    require_negative(c, "decay_floor");
    validate_gating(c);
  }
  std::optional<DeviceDraw> device_draw(const Configuration& c, std::string*) const override {
    return DeviceDraw{.kind = device_kind(), .gate = param_or_nan(c, "decay_floor"), .channel = gating_of(c) == Gating::kChannel};
  }
  Sample make(const Configuration& c, uint64_t seed, uint64_t index) const override {
    Sample s = blank(c, gating_of(c));
    random_keys(s, seed, index);
    gates(s, param(c, "decay_floor"), seed, index);
    random_beta(s, seed, index);
    return s;
  }

 protected:
  virtual void gates(Sample& s, double floor, uint64_t seed, uint64_t index) const = 0;
  virtual DeviceDraw::Kind device_kind() const = 0;

 private:
  std::string floor_help_;
};

class FloorFamily : public DecayFloorFamily {
 public:
  FloorFamily() : DecayFloorFamily("the constant log-decay of every token (< 0)") {}
  std::string name() const override { return "floor"; }
  std::string description() const override {
    return "random normalised keys; every g_t = decay_floor (per channel too with gating=channel); "
           "beta = sigmoid(N(0,1))";
  }

 protected:
  void gates(Sample& s, double floor, uint64_t, uint64_t) const override { std::fill(s.g.begin(), s.g.end(), floor); }
  DeviceDraw::Kind device_kind() const override { return DeviceDraw::Kind::kFloor; }
};

class WeakDecayCorrelatedFamily : public Family {
 public:
  std::string name() const override { return "weak_decay_correlated"; }
  std::string description() const override {
    return "one random normalised key repeated C times; g_t = log_decay; beta_t = beta";
  }
  std::vector<FamilyParam> params() const override {
    return {{"log_decay", -0.01, "the constant log-decay of every token (< 0)"},
            {"beta", 0.5, "the constant beta of every token, in (0, 1)"}};
  }
  void validate(const Configuration& c) const override {
    Family::validate(c);
    require_negative(c, "log_decay");
    const double b = c.params.contains("beta") && c.params["beta"].is_number() ? param(c, "beta") : NAN;
    if (!(b > 0.0 && b < 1.0)) throw UsageError(fmt::format("axis beta = {} must lie in (0, 1)", c.params.value("beta", nlohmann::json()).dump()));
  }
  std::optional<DeviceDraw> device_draw(const Configuration& c, std::string*) const override {
    return DeviceDraw{.kind = DeviceDraw::Kind::kWeakDecayCorrelated, .gate = param_or_nan(c, "log_decay"),
                      .beta = param_or_nan(c, "beta")};
  }
  Sample make(const Configuration& c, uint64_t seed, uint64_t index) const override {
    Sample s = blank(c);
    random_unit_key(seed, index, 0, s.dim, s.keys.data());
    for (int r = 1; r < s.chunk; ++r)
      std::copy(s.keys.begin(), s.keys.begin() + s.dim, s.keys.begin() + static_cast<ptrdiff_t>(r) * s.dim);
    std::fill(s.g.begin(), s.g.end(), param(c, "log_decay"));
    std::fill(s.beta.begin(), s.beta.end(), param(c, "beta"));
    return s;
  }
};

class ModelLikeFamily : public DecayFloorFamily {
 public:
  ModelLikeFamily() : DecayFloorFamily("the gate's lower bound (< 0)") {}
  std::string name() const override { return "model_like"; }
  std::string description() const override {
    return "random normalised keys; g_t = decay_floor * sigmoid(N(0,1)) (the K3 safe gate; one per token and "
           "channel with gating=channel); beta = sigmoid(N(0,1))";
  }

 protected:
  DeviceDraw::Kind device_kind() const override { return DeviceDraw::Kind::kModelLike; }
  void gates(Sample& s, double floor, uint64_t seed, uint64_t index) const override {
    if (s.gating == Gating::kToken) {
      const Rng gate(seed, index, Stream::kGate);
      for (int t = 0; t < s.chunk; ++t) s.g[t] = floor * detmath::sigmoid(gate.normal(t));
    } else {  // gate (t, c) is normal t * d + c of its own stream
      const Rng gate(seed, index, Stream::kChannelGate);
      for (size_t e = 0; e < s.g.size(); ++e) s.g[e] = floor * detmath::sigmoid(gate.normal(e));
    }
  }
};

const std::vector<std::unique_ptr<Family>>& registry() {
  static const std::vector<std::unique_ptr<Family>> all = [] {
    std::vector<std::unique_ptr<Family>> v;
    v.push_back(std::make_unique<FloorFamily>());
    v.push_back(std::make_unique<WeakDecayCorrelatedFamily>());
    v.push_back(std::make_unique<ModelLikeFamily>());
    v.push_back(make_kda_family());
    v.push_back(make_collinear_family());
    // Families backed by data register here (one line each).
    v.push_back(make_file_family());
    v.push_back(make_real_gates_family());
    return v;
  }();
  return all;
}

}  // namespace

void Family::validate(const Configuration& c) const {
  if (c.chunk < 2 || c.chunk > 64) throw UsageError(fmt::format("axis chunk = {} is outside 2..64", c.chunk));
  if (c.dim < 1 || c.dim > 4096) throw UsageError(fmt::format("axis dim = {} is outside 1..4096", c.dim));
}

std::nullopt_t no_device_form(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return std::nullopt;
}

namespace {

// The families with a device form, in registry order (each asked at its defaults).
std::string device_family_list() {
  std::vector<std::string> names;
  for (const auto& f : registry()) {
    Configuration c;
    c.family = f->name();
    for (const FamilyParam& p : f->params())
      if (!p.default_value.is_null()) c.params[p.name] = p.default_value;
    if (f->device_draw(c, nullptr)) names.push_back(f->name());
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

// Why c's family has no device form, where no reason of its own is given.
std::nullopt_t not_a_device_family(const Configuration& c, std::string* why) {
  if (!why) return std::nullopt;  // (device_family_list asks with none)
  static const std::string list = device_family_list();
  return no_device_form(why, fmt::format("family {} is not one the device generates ({})", c.family, list));
}

}  // namespace

std::optional<DeviceDraw> Family::device_draw(const Configuration& c, std::string* why) const {
  return not_a_device_family(c, why);
}

std::optional<DeviceDraw> device_draw_of(const Configuration& c, std::string* why) {
  for (const auto& f : registry())
    if (f->name() == c.family) return f->device_draw(c, why);
  return not_a_device_family(c, why);
}

const Family& find_family(std::string_view name) {
  for (const auto& f : registry())
    if (f->name() == name) return *f;
  const std::string near = nearest_of(std::string(name), family_names());
  throw UsageError(near.empty() ? fmt::format("unknown family \"{}\"", name)
                                : fmt::format("unknown family \"{}\" (did you mean \"{}\"?)", name, near));
}

std::vector<std::string> family_names() {
  std::vector<std::string> n;
  for (const auto& f : registry()) n.push_back(f->name());
  return n;
}

}  // namespace chunkinv
