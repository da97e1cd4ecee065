// One sample of the downstream stage: a whole sequence of one head, in the
// token layout the kernels read (fla's q, k [T, K], v [T, V], g [T] or
// [T, K], beta [T], initial_state [K, V]). B x H of a batch collapse into
// samples: one sequence of one head each.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "inputs/sample.hpp"

namespace chunkinv {

struct Sequence {
  int tokens = 0;     // T
  int key_dim = 0;    // K (the chunk families' `dim`)
  int value_dim = 0;  // V
  Gating gating = Gating::kToken;
  std::vector<double> q;     // T x K, each a BF16 value (exact in double)
  std::vector<double> k;     // T x K, unit rows rounded to BF16, as every path reads them
  std::vector<double> v;     // T x V, each a BF16 value
  std::vector<double> g;     // natural-log gates, all < 0 (or -0): T (token) or T x K (channel)
  std::vector<double> beta;  // T, in (0, 1)
  std::vector<double> h0;    // K x V; empty: the zero state
  // FlashKDA's raw inputs of all T tokens (their `chunk` is T), or null.
  // Then k, g and beta above are their exact FP64 activation (the gold's,
  // what the references use: keys not rounded), gating per channel, and each
  // chunk's sample is the raw tokens of the chunk, activated per path.
  std::shared_ptr<const RawInputs> raw;
  // The backward's upstream gradients where a tensor set gives them
  // (downstream/backward.hpp): do T x V (empty: random), dht K x V (empty: zero).
  std::vector<double> d_o;
  std::vector<double> dht;

  double gate(int t, int c) const {
    return gating == Gating::kToken ? g[t] : g[static_cast<size_t>(t) * key_dim + c];
  }
  int gate_width() const { return gating == Gating::kToken ? 1 : key_dim; }
  int chunks(int chunk) const { return tokens / chunk; }
};

// Tokens [n C, (n + 1) C) as the chunk sample every path takes (its keys,
// gates and beta; queries and values play no part in L). From raw inputs:
// the chunk's raw tokens, activated by the kernel's model as a raw chunk
// family's sample is (the gold activates them exactly, the kernel path on
// the GPU); every activation is token by token, so the chunk's activation
// is the sequence's rows.
Sample chunk_sample(const Sequence& s, int chunk, int n);

}  // namespace chunkinv
