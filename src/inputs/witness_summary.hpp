// What is extreme about one sample, in words: the structure a search
// witness (docs/search.md) or any other sample has that makes a method
// fail, so that a reader of `inspect` sees "near-collinear keys, weak
// decay, beta -> 1" without reading the matrices. Pure arithmetic on the
// sample's inputs (keys, g, beta); no path is involved.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inputs/sample.hpp"

namespace chunkinv {

struct WitnessSummary {
  // Keys: pairwise cosines i > j (rows of zero norm have no direction and are left out).
  int pairs = 0;
  double cos_min = 0, cos_max = 0, abs_cos_min = 0, abs_cos_mean = 0;
  int collinear_pairs = 0;  // |cos| >= kCollinear
  double norm_min = 0, norm_max = 0;
  // Gates and beta of tokens 1..C-1 only: g_0 cancels out of every
  // G_i - G_j and row 0 of L is empty (beta_0 multiplies nothing).
  // g_total is their sum, G_C - g_0; the bound when known.
  std::optional<double> bound;
  double g_min = 0, g_max = 0, g_total = 0;
  int g_weak = 0;    // decay exp(g) >= kWeakDecay (|g| <= 0.0513)
  int g_strong = 0;  // at the bound (g <= 0.95 bound), or without one exp(g) <= kStrongDecay
  // Beta.
  double beta_min = 0, beta_max = 0;
  int beta_high = 0, beta_low = 0;  // >= kBetaHigh, <= 1 - kBetaHigh
  std::vector<std::string> findings;  // one sentence each, most telling first

  static constexpr double kCollinear = 0.99, kWeakDecay = 0.95, kStrongDecay = 0.01, kBetaHigh = 0.99;
};

// `bound`: the gate's lower bound (a family's decay_floor) when known.
WitnessSummary summarise_witness(const Sample& s, std::optional<double> bound = std::nullopt);
nlohmann::json witness_summary_json(const WitnessSummary& w);
// "structure:\n  - near-collinear keys: ...\n" (two-space indent, one finding a line).
std::string witness_summary_text(const WitnessSummary& w);

}  // namespace chunkinv
