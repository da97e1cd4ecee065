#include "downstream/sequence.hpp"

#include <algorithm>

namespace chunkinv {

Sample chunk_sample(const Sequence& s, int chunk, int n) {
  Sample c;
  c.chunk = chunk;
  c.dim = s.key_dim;
  c.gating = s.gating;
  const size_t t0 = static_cast<size_t>(n) * chunk, K = s.key_dim, W = s.gate_width();
  c.keys.assign(s.k.begin() + t0 * K, s.k.begin() + (t0 + chunk) * K);
  c.g.assign(s.g.begin() + t0 * W, s.g.begin() + (t0 + chunk) * W);
  c.beta.assign(s.beta.begin() + t0, s.beta.begin() + t0 + chunk);
  return c;
}

}  // namespace chunkinv
