#include "search/space.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/detmath.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"

namespace chunkinv {

Sample SearchSpace::decode(std::span<const double> x) const {
  Sample s;
  s.chunk = chunk;
  s.dim = dim;
  s.keys.resize(key_size());
  s.g.resize(chunk);
  s.beta.resize(chunk);
  std::vector<double> y(dim);
  for (int r = 0; r < chunk; ++r) {
    const double* z = x.data() + static_cast<size_t>(r) * dim;
    double* k = s.keys.data() + static_cast<size_t>(r) * dim;
    const double a = shared_direction ? x[weight_offset() + r] : 0.0;
    for (int c = 0; c < dim; ++c) y[c] = shared_direction ? a * x[shared_offset() + c] + z[c] : z[c];
    double n2 = 0;
    for (int c = 0; c < dim; ++c) n2 += y[c] * y[c];
    if (!(n2 > 0) || !std::isfinite(n2)) {  // no direction (or none representable): the first axis
      std::fill(k, k + dim, 0.0);
      k[0] = 1.0;
      continue;
    }
    const double norm = std::sqrt(n2);  // the same normalisation as the generated families
    for (int c = 0; c < dim; ++c) k[c] = bf16(y[c] / norm);
  }
  const auto logit = [](double v) { return std::clamp(v, -30.0, 30.0); };
  for (int t = 0; t < chunk; ++t) {
    s.g[t] = decay_floor * detmath::sigmoid(logit(x[gate_offset() + t]));
    s.beta[t] = detmath::sigmoid(logit(x[beta_offset() + t]));
  }
  return s;
}

void SearchSpace::validate() const {
  if (chunk < 2 || chunk > 64) throw UsageError(fmt::format("axis chunk = {} is outside 2..64", chunk));
  if (dim < 1 || dim > 4096) throw UsageError(fmt::format("axis dim = {} is outside 1..4096", dim));
  if (!(decay_floor < 0) || !std::isfinite(decay_floor))
    throw UsageError(fmt::format("axis decay_floor = {} must be a finite number < 0", decay_floor));
}

nlohmann::json SearchSpace::to_json() const {
  return {{"chunk", chunk},
          {"dim", dim},
          {"decay_floor", decay_floor},
          {"keys", key_form_name(keys)},
          {"gates", gate_form_name(gates)},
          {"shared_direction", shared_direction},
          {"size", size()}};
}

std::string key_form_name(KeyForm) { return "normalised"; }
std::string gate_form_name(GateForm) { return "per_token"; }

KeyForm parse_key_form(const std::string& s) {
  if (s == "normalised" || s == "normalized") return KeyForm::kNormalised;
  if (s == "raw")
    throw UsageError("--keys raw: raw (un-normalised) keys are not searchable yet; only normalised keys (docs/search.md)");
  throw UsageError(fmt::format("--keys {}: not normalised (the one key form searchable today)", s));
}

GateForm parse_gate_form(const std::string& s) {
  if (s == "per_token") return GateForm::kPerToken;
  if (s == "per_channel")
    throw UsageError("--gates per_channel: per-channel gates are not searchable yet (no path takes them); only per_token "
                     "(docs/search.md)");
  throw UsageError(fmt::format("--gates {}: not per_token (the one gate form searchable today)", s));
}

}  // namespace chunkinv
