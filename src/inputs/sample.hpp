// One sample: the inputs of one chunk, exactly as every path sees them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace chunkinv {

// How the log-decay gates are shaped (SPEC §1): one value per token (Gated
// DeltaNet, the article) or one per token and channel (Kimi Delta
// Attention's fine-grained gate).
enum class Gating { kToken, kChannel };

struct RawInputs;  // inputs/raw.hpp

struct Sample {
  int chunk = 0;             // C
  int dim = 0;               // d
  Gating gating = Gating::kToken;
  std::vector<double> keys;  // C x d row-major, each value a BF16 (exact in double)
  std::vector<double> g;     // log-decays, natural log, all <= 0, FP64: C (token) or C x d row-major (channel)
  std::vector<double> beta;  // C, in (0, 1), FP64
  // FlashKDA's raw inputs where the sample came from them (SPEC §1 "Raw
  // inputs"); null otherwise. Then keys, g and beta above are the kernel's
  // activation of them (its CPU model; the kernel path activates them on the
  // GPU), with g the FP32 log2-unit gate divided by log2 e so that
  // fp32(g log2 e) gives it back exactly, and the gold activates them in FP64.
  std::shared_ptr<const RawInputs> raw;

  double key(int row, int col) const { return keys[static_cast<size_t>(row) * dim + col]; }
  // The gate of token t on channel c, whichever the gating.
  double gate(int t, int c) const {
    return gating == Gating::kToken ? g[t] : g[static_cast<size_t>(t) * dim + c];
  }
  // Values of g per token: 1 or d.
  int gate_width() const { return gating == Gating::kToken ? 1 : dim; }
};

}  // namespace chunkinv
