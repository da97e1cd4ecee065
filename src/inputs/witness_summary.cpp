#include "inputs/witness_summary.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/detmath.hpp"

namespace chunkinv {
namespace {

std::string g3(double x) { return fmt::format("{:.3g}", x); }

}  // namespace

namespace {

// Per-channel gates read per token: each token's mean over the channels
// (the summary describes the sample; the paths use every channel).
Sample per_token_view(const Sample& s) {
  Sample t = s;
  t.gating = Gating::kToken;
  t.g.assign(s.chunk, 0.0);
  for (int r = 0; r < s.chunk; ++r) {
    double sum = 0.0;
    for (int c = 0; c < s.dim; ++c) sum += s.gate(r, c);
    t.g[r] = sum / s.dim;
  }
  return t;
}

}  // namespace

WitnessSummary summarise_witness(const Sample& sample, std::optional<double> bound) {
  if (sample.gating != Gating::kToken) {
    WitnessSummary w = summarise_witness(per_token_view(sample), bound);
    w.findings.push_back(fmt::format("per-channel gates: the gate figures above are each token's mean over its {} "
                                     "channels", sample.dim));
    return w;
  }
  const Sample& s = sample;
  WitnessSummary w;
  w.bound = bound;
  const int C = s.chunk;
  std::vector<double> norms(C);
  for (int i = 0; i < C; ++i) {
    double n2 = 0;
    for (int c = 0; c < s.dim; ++c) n2 += s.key(i, c) * s.key(i, c);
    norms[i] = std::sqrt(n2);
  }
  w.norm_min = *std::min_element(norms.begin(), norms.end());
  w.norm_max = *std::max_element(norms.begin(), norms.end());
  double abs_sum = 0;
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < i; ++j) {
      if (norms[i] == 0 || norms[j] == 0) continue;
      double dot = 0;
      for (int c = 0; c < s.dim; ++c) dot += s.key(i, c) * s.key(j, c);
      const double cs = dot / (norms[i] * norms[j]), a = std::fabs(cs);
      if (w.pairs == 0) w.cos_min = w.cos_max = cs, w.abs_cos_min = a;
      w.cos_min = std::min(w.cos_min, cs);
      w.cos_max = std::max(w.cos_max, cs);
      w.abs_cos_min = std::min(w.abs_cos_min, a);
      abs_sum += a;
      w.collinear_pairs += a >= WitnessSummary::kCollinear;
      ++w.pairs;
    }
  w.abs_cos_mean = w.pairs ? abs_sum / w.pairs : 0;

  // g_0 cancels out of every G_i - G_j (i > j >= 0), and row 0 of L is
  // empty, so beta_0 multiplies nothing: only tokens 1..C-1 shape L.
  const auto g1 = s.g.begin() + 1, b1 = s.beta.begin() + 1;
  w.g_min = *std::min_element(g1, s.g.end());
  w.g_max = *std::max_element(g1, s.g.end());
  for (int t = 1; t < C; ++t) {
    const double g = s.g[t];
    w.g_total += g;
    w.g_weak += detmath::exp(g) >= WitnessSummary::kWeakDecay;
    w.g_strong += bound ? g <= 0.95 * *bound : detmath::exp(g) <= WitnessSummary::kStrongDecay;
  }
  w.beta_min = *std::min_element(b1, s.beta.end());
  w.beta_max = *std::max_element(b1, s.beta.end());
  for (auto b = b1; b != s.beta.end(); ++b) {
    w.beta_high += *b >= WitnessSummary::kBetaHigh;
    w.beta_low += *b <= 1 - WitnessSummary::kBetaHigh;
  }

  // Findings: what a failure needs is large |L_ij| = beta_i |cos_ij| exp(G_i - G_j)
  // over many pairs, so collinear keys, weak decay and beta near 1 lead.
  auto& f = w.findings;
  if (w.pairs > 0) {
    const std::string range = fmt::format("pairwise cosines in [{}, {}]", g3(w.cos_min), g3(w.cos_max));
    const std::string negated = w.cos_min < 0 && w.cos_max > 0 && w.abs_cos_min >= 0.5 ? "; some keys are negated copies" : "";
    if (w.collinear_pairs == w.pairs)
      f.push_back(fmt::format("near-collinear keys: all {} pairs have |cos| >= {} ({}{})", w.pairs,
                              WitnessSummary::kCollinear, range, negated));
    else if (w.abs_cos_min >= 0.9)
      f.push_back(fmt::format("near-collinear keys: every pair has |cos| >= {}, mean {}, {} of {} pairs >= {} ({}{})",
                              g3(w.abs_cos_min), g3(w.abs_cos_mean), w.collinear_pairs, w.pairs,
                              WitnessSummary::kCollinear, range, negated));
    else if (w.abs_cos_mean >= 0.5)
      f.push_back(fmt::format("strongly aligned keys: mean |cos| {}, {} of {} pairs >= {} ({}{})", g3(w.abs_cos_mean),
                              w.collinear_pairs, w.pairs, WitnessSummary::kCollinear, range, negated));
    else if (w.collinear_pairs > 0)
      f.push_back(fmt::format("some near-collinear pairs: {} of {} pairs have |cos| >= {} (mean |cos| {}; {})",
                              w.collinear_pairs, w.pairs, WitnessSummary::kCollinear, g3(w.abs_cos_mean), range));
    else
      f.push_back(fmt::format("keys spread: mean |cos| {} ({}; random unit keys in d = {} have mean |cos| about {})",
                              g3(w.abs_cos_mean), range, s.dim, g3(std::sqrt(2.0 / (3.14159265358979 * s.dim)))));
  }
  if (w.norm_max > 0 && w.norm_min < 0.99 * w.norm_max)
    f.push_back(fmt::format("key norms differ: {} .. {}", g3(w.norm_min), g3(w.norm_max)));
  const int n = C - 1;  // tokens 1..C-1
  const std::string g_range = fmt::format("g_1..g_{} in [{}, {}], their sum {}", C - 1, g3(w.g_min), g3(w.g_max), g3(w.g_total));
  const std::string where = bound ? fmt::format(" (bound {})", g3(*bound)) : "";
  if (w.g_weak == n)
    f.push_back(fmt::format("weak decay: all {} gates that enter L have exp(g) >= {} ({}{})", n, WitnessSummary::kWeakDecay, g_range, where));
  else if (w.g_strong == n)
    f.push_back(fmt::format("strong decay: all {} gates that enter L are {} ({}{})", n,
                            bound ? "at the bound (g <= 0.95 bound)" : fmt::format("have exp(g) <= {}", WitnessSummary::kStrongDecay),
                            g_range, where));
  else
    f.push_back(fmt::format("gates (tokens 1..{}): {} of {} weak (exp(g) >= {}), {} of {} {} ({}{})", C - 1, w.g_weak, n,
                            WitnessSummary::kWeakDecay, w.g_strong, n,
                            bound ? "at the bound" : fmt::format("strong (exp(g) <= {})", WitnessSummary::kStrongDecay),
                            g_range, where));
  // The reciprocal decay the kernel forms in FP32 is 2^(-G2): infinite once G_C < -128 ln 2.
  if (w.g_total + s.g[0] < -88.0)
    f.push_back(fmt::format("cumulative decay G_C = {} is below -88.7: the FP32 reciprocal decay overflows",
                            g3(w.g_total + s.g[0])));
  const std::string b_range = fmt::format("beta_1..beta_{} in [{}, {}]", C - 1, g3(w.beta_min), g3(w.beta_max));
  if (w.beta_high == n)
    f.push_back(fmt::format("beta -> 1: all {} rows of L have beta >= {} ({})", n, WitnessSummary::kBetaHigh, b_range));
  else if (w.beta_low == n)
    f.push_back(fmt::format("beta -> 0: all {} rows of L have beta <= {} ({})", n, g3(1 - WitnessSummary::kBetaHigh), b_range));
  else if (2 * w.beta_high > n)
    f.push_back(fmt::format("beta -> 1 on most rows: {} of {} rows have beta >= {}, {} <= {} ({})", w.beta_high, n,
                            WitnessSummary::kBetaHigh, w.beta_low, g3(1 - WitnessSummary::kBetaHigh), b_range));
  else
    f.push_back(fmt::format("beta: {} of {} rows >= {}, {} <= {} ({})", w.beta_high, n, WitnessSummary::kBetaHigh,
                            w.beta_low, g3(1 - WitnessSummary::kBetaHigh), b_range));
  return w;
}

nlohmann::json witness_summary_json(const WitnessSummary& w) {
  nlohmann::json j = {
      {"keys", {{"pairs", w.pairs}, {"cosine_min", w.cos_min}, {"cosine_max", w.cos_max},
                {"abs_cosine_min", w.abs_cos_min}, {"abs_cosine_mean", w.abs_cos_mean},
                {"collinear_pairs", w.collinear_pairs}, {"norm_min", w.norm_min}, {"norm_max", w.norm_max}}},
      {"g", {{"min", w.g_min}, {"max", w.g_max}, {"G_C", w.g_total}, {"weak", w.g_weak}, {"strong", w.g_strong},
             {"bound", w.bound ? nlohmann::json(*w.bound) : nlohmann::json(nullptr)}}},
      {"beta", {{"min", w.beta_min}, {"max", w.beta_max}, {"high", w.beta_high}, {"low", w.beta_low}}},
      {"findings", w.findings}};
  return j;
}

std::string witness_summary_text(const WitnessSummary& w) {
  std::string s = "structure:\n";
  for (const std::string& f : w.findings) s += "  - " + f + "\n";
  return s;
}

}  // namespace chunkinv
