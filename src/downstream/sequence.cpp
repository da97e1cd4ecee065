#include "downstream/sequence.hpp"

#include <algorithm>

#include "inputs/raw.hpp"

namespace chunkinv {

namespace {

// Tokens [t0, t0 + chunk) of raw inputs over a whole sequence.
std::shared_ptr<const RawInputs> cut_raw(const RawInputs& all, int chunk, size_t t0) {
  auto r = std::make_shared<RawInputs>();
  r->chunk = chunk;
  r->dim = all.dim;
  const size_t d = static_cast<size_t>(all.dim);
  r->keys.assign(all.keys.begin() + t0 * d, all.keys.begin() + (t0 + chunk) * d);
  r->g.assign(all.g.begin() + t0 * d, all.g.begin() + (t0 + chunk) * d);
  r->beta.assign(all.beta.begin() + t0, all.beta.begin() + t0 + chunk);
  r->a_log = all.a_log;
  r->dt_bias = all.dt_bias;
  r->lower_bound = all.lower_bound;
  return r;
}

}  // namespace

Sample chunk_sample(const Sequence& s, int chunk, int n) {
  if (s.raw) return activate_kernel_model(cut_raw(*s.raw, chunk, static_cast<size_t>(n) * chunk));
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
