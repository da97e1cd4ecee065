// The `real_gates` family: g and beta captured from trained Gated DeltaNet
// models (data/gdn-gates/README.md), cut into chunks per head, with random
// normalised BF16 keys (no keys were published with the gates).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "core/error.hpp"
#include "inputs/data_families.hpp"

namespace chunkinv {

std::string data_dir() {
  if (const char* env = std::getenv("CHUNKINV_DATA"); env && *env) return env;
  return std::string(CHUNKINV_SOURCE_DIR) + "/data";
}

std::vector<std::string> real_gate_models() { return {"Qwen3-Next", "Qwen3.5-0.8B"}; }

namespace {

GateData load_gates(const std::string& model) {
  const std::filesystem::path dir = std::filesystem::path(data_dir()) / "gdn-gates" / model;
  const auto file = [&](const char* n) {
    const std::string f = (dir / n).string();
    if (!std::filesystem::exists(f))
      throw UsageError(fmt::format("real_gates: {} not found (set CHUNKINV_DATA to the folder that holds gdn-gates/)", f));
    return f;
  };
  const std::string gf = file("g.npy"), bf = file("beta.npy"), sf = file("cu_seqlens.npy");
  const Tensor g = read_npy(gf), beta = read_npy(bf), cu = read_npy(sf);
  if (g.shape.size() != 3 || g.shape[0] != 1)
    throw UsageError(fmt::format("real_gates: {}: shape is not [1, tokens, heads]", gf));
  if (beta.shape != g.shape) throw UsageError(fmt::format("real_gates: {}: shape differs from g.npy's", bf));
  if (!dtype_is_float(g.dtype) || !dtype_is_float(beta.dtype))
    throw UsageError(fmt::format("real_gates: {}: g and beta must be floating-point", dir.string()));
  GateData d;
  d.model = model;
  d.tokens = static_cast<int>(g.shape[1]);
  d.heads = static_cast<int>(g.shape[2]);
  d.g = g.values;
  d.beta = beta.values;
  // Captured g is <= 0: a few tokens of Qwen3.5-0.8B have g = -0 (decay 1,
  // the activation underflowed); they are kept as they are.
  for (size_t i = 0; i < d.g.size(); ++i)
    if (!std::isfinite(d.g[i]) || d.g[i] > 0.0)
      throw UsageError(fmt::format("real_gates: {}: entry {} = {} is not a finite g <= 0", gf, index_string(g.shape, i), d.g[i]));
  for (size_t i = 0; i < d.beta.size(); ++i)
    if (!(d.beta[i] > 0.0 && d.beta[i] < 1.0))
      throw UsageError(fmt::format("real_gates: {}: entry {} = {} is not in (0, 1)", bf, index_string(beta.shape, i), d.beta[i]));
  if (dtype_is_float(cu.dtype) || cu.shape.size() != 1 || cu.values.size() < 2)
    throw UsageError(fmt::format("real_gates: {}: not a list of integer sequence starts", sf));
  for (double v : cu.values) d.cu_seqlens.push_back(static_cast<int64_t>(v));
  if (d.cu_seqlens.front() != 0 || d.cu_seqlens.back() != d.tokens ||
      !std::is_sorted(d.cu_seqlens.begin(), d.cu_seqlens.end()))
    throw UsageError(fmt::format("real_gates: {}: must rise from 0 to the token count {}", sf, d.tokens));
  return d;
}

}  // namespace

const GateData& real_gate_data(std::string_view model_name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<GateData>> cache;
  const std::string model(model_name);
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[model];
  if (!slot) {
    try {
      slot = std::make_unique<GateData>(load_gates(model));
    } catch (...) {
      cache.erase(model);
      throw;
    }
  }
  return *slot;
}

std::vector<GateChunk> real_gate_chunks(const GateData& d, int chunk) {
  std::vector<GateChunk> out;
  for (size_t s = 0; s + 1 < d.cu_seqlens.size(); ++s) {
    const auto begin = d.cu_seqlens[s], end = d.cu_seqlens[s + 1];
    for (int64_t first = begin; first + chunk <= end; first += chunk)
      for (int h = 0; h < d.heads; ++h) out.push_back({static_cast<int>(s), h, static_cast<int>(first)});
  }
  return out;
}

namespace {

class RealGatesFamily : public Family {
 public:
  std::string name() const override { return "real_gates"; }
  std::optional<DeviceDraw> device_draw(const Configuration& c, std::string* why) const override {
    return no_device_form(why, "family " + c.family + " reads its samples from data; nothing to generate");
  }
  std::string description() const override {
    return "g and beta of trained Gated DeltaNet models (data/gdn-gates), cut per head into chunks that never cross "
           "a sequence; random normalised keys; sample i takes chunk i mod count";
  }
  std::vector<FamilyParam> params() const override {
    return {{"model", "Qwen3-Next", "whose gates: Qwen3-Next (no lower bound) or Qwen3.5-0.8B"},
            {"decay_floor", nullptr, "optional clamp g = max(g, decay_floor) (< 0); null: the gates as captured"}};
  }
  void validate(const Configuration& c) const override {
    Family::validate(c);
    model(c);
    const auto it = c.params.find("decay_floor");
    if (it != c.params.end() && !it->is_null()) {
      if (!it->is_number() || !(it->get<double>() < 0.0) || !std::isfinite(it->get<double>()))
        throw UsageError(fmt::format("axis decay_floor = {} must be a finite number < 0 (or null: no clamp)", it->dump()));
    }
    if (chunks(c).empty())
      throw UsageError(fmt::format("family real_gates: no whole chunk of {} tokens in {}", c.chunk, model(c)));
  }
  Sample make(const Configuration& c, uint64_t seed, uint64_t index) const override {
    const GateData& d = real_gate_data(model(c));
    const auto& all = chunks(c);
    const GateChunk& ch = all[index % all.size()];
    const auto it = c.params.find("decay_floor");
    const bool clamp = it != c.params.end() && !it->is_null();
    const double floor = clamp ? it->get<double>() : 0.0;
    Sample s;
    s.chunk = c.chunk;
    s.dim = c.dim;
    s.keys.resize(static_cast<size_t>(c.chunk) * c.dim);
    s.g.resize(c.chunk);
    s.beta.resize(c.chunk);
    for (int t = 0; t < c.chunk; ++t) {
      random_unit_key(seed, index, t, c.dim, s.keys.data() + static_cast<size_t>(t) * c.dim);
      const double g = d.gate(ch.first + t, ch.head);
      s.g[t] = clamp ? std::max(g, floor) : g;
      s.beta[t] = d.beta_at(ch.first + t, ch.head);
    }
    return s;
  }

 private:
  static std::string model(const Configuration& c) {
    const auto it = c.params.find("model");
    const std::string m = it != c.params.end() && it->is_string() ? it->get<std::string>() : "";
    const auto models = real_gate_models();
    if (std::find(models.begin(), models.end(), m) != models.end()) return m;
    const std::string near = nearest_of(m, models);
    const std::string shown = it != c.params.end() ? it->dump() : "null";
    throw UsageError(near.empty() ? fmt::format("axis model = {} is not one of Qwen3-Next, Qwen3.5-0.8B", shown)
                                  : fmt::format("axis model = {} is not a model (did you mean \"{}\"?)", shown, near));
  }
  // The chunk list of (model, chunk), built once.
  static const std::vector<GateChunk>& chunks(const Configuration& c) {
    const std::string m = model(c);
    const GateData& d = real_gate_data(m);
    static std::mutex mu;
    static std::map<std::pair<std::string, int>, std::vector<GateChunk>> cache;
    std::lock_guard<std::mutex> lock(mu);
    auto [it, fresh] = cache.try_emplace({m, c.chunk});
    if (fresh) it->second = real_gate_chunks(d, c.chunk);
    return it->second;  // std::map nodes never move
  }
};

}  // namespace

std::unique_ptr<Family> make_real_gates_family() { return std::make_unique<RealGatesFamily>(); }

}  // namespace chunkinv
