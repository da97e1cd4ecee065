// Sequences for the downstream tests: a completed, validated configuration,
// and the exact (gold) inverse of every chunk of a sequence.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/matrix.hpp"
#include "downstream/experiment.hpp"
#include "downstream/sequence.hpp"
#include "downstream/sources.hpp"
#include "paths/gold/gold.hpp"

namespace chunkinv::testing {

inline SeqConfig config(const std::string& family, int T, int C, int K, int V,
                        nlohmann::json params = nlohmann::json::object()) {
  SeqConfig c;
  c.family = family;
  c.seq_len = T;
  c.chunk = C;
  c.dim = K;
  c.value_dim = V;
  c.params = std::move(params);
  complete(c);
  validate_sequence_config(c);
  return c;
}

inline std::vector<Mat> exact_inverses(const Sequence& s, int C) {
  std::vector<Mat> a;
  for (int n = 0; n < s.chunks(C); ++n) a.push_back(compute_gold(chunk_sample(s, C, n)).inv);
  return a;
}

}  // namespace chunkinv::testing
