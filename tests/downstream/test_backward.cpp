// The backward against its references: the recurrence's hand-derived
// gradient against central finite differences of the forward; the chunked
// FP64 backward with the exact inverse against the recurrence's gradient;
// the storage presets and a rounded inverse move the gradients by what they
// should.
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "core/fp.hpp"
#include "core/rng.hpp"
#include "downstream/backward.hpp"
#include "downstream/experiment.hpp"
#include "downstream/forward.hpp"
#include "downstream/sources.hpp"
#include "metrics/metrics.hpp"
#include "paths/gold/gold.hpp"
#include "support/usage_error.hpp"

namespace chunkinv {
namespace {

using nlohmann::json;

SeqConfig config(const std::string& family, int T, int C, int K, int V, json params = json::object()) {
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

std::vector<Mat> exact_inverses(const Sequence& s, int C) {
  std::vector<Mat> a;
  for (int n = 0; n < s.chunks(C); ++n) a.push_back(compute_gold(chunk_sample(s, C, n)).inv);
  return a;
}

Mat random_mat(int r, int c, uint64_t seed) {
  const Rng rng(seed, 0, Stream::kUser);
  Mat m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = rng.normal(static_cast<uint64_t>(i));
  return m;
}

// The loss whose gradient the backward computes: sum(do o) + sum(dht ht).
double loss(const Sequence& s, const Upstream& up, double scale) {
  Recurrence r(s, scale);
  Mat o;
  r.advance(0, s.tokens, o);
  double l = (o.array() * up.d_o.array()).sum();
  if (up.dht.size()) l += (r.state().array() * up.dht.array()).sum();
  return l;
}

// d loss / d x by the five-point central difference (error O(h^4)).
double central_difference(const std::function<double(double)>& f, double h) {
  return (8 * (f(h) - f(-h)) - (f(2 * h) - f(-2 * h))) / (12 * h);
}

// The recurrence's hand-derived gradient is the forward's derivative: every
// entry of g, beta and h0 and every 5th of q, k and v by finite differences
// (five points, step 1e-3: they agree to about 1e-11; held to 1e-9),
// T = 256, K = 8, V = 6, with h0 and dht, per-token and per-channel gates.
TEST(Backward, RecurrenceMatchesFiniteDifferences) {
  for (const char* gating : {"token", "channel"}) {
    SCOPED_TRACE(gating);
    // Weak decay, so that h0 and the early tokens still reach the end.
    SeqConfig c = config("model_like", 256, 16, 8, 6, {{"gating", gating}, {"decay_floor", -0.5}});
    c.initial_state = "random";
    const Sequence s = find_source(c.family).make(c, 3, 1);
    const double scale = default_scale(s);
    Upstream up = upstream_of(s, 3, 1);
    up.dht = random_mat(8, 6, 11);
    const Gradients g = recurrent_backward(s, up, scale);
    const double h = 1e-3;
    const auto check = [&](const char* name, std::vector<double> Sequence::*field, const Mat& grad, int every) {
      std::vector<double> fd, an;
      for (size_t i = 0; i < (s.*field).size(); i += every) {
        Sequence p = s;
        const double x = (s.*field)[i];
        fd.push_back(central_difference(
            [&](double d) {
              (p.*field)[i] = x + d;
              return loss(p, up, scale);
            },
            h));
        an.push_back(grad.data()[i]);
      }
      const Eigen::Index n = static_cast<Eigen::Index>(fd.size());
      const Mat a = Eigen::Map<const Mat>(an.data(), n, 1), e = Eigen::Map<const Mat>(fd.data(), n, 1);
      EXPECT_LE(rel_rmse(a, e), 1e-9) << name << " over " << n << " entries";
      EXPECT_GT(e.norm(), 1e-3) << name;
    };
    check("dg", &Sequence::g, g.dg, 1);
    check("dbeta", &Sequence::beta, g.dbeta, 1);
    check("dh0", &Sequence::h0, g.dh0, 1);
    check("dq", &Sequence::q, g.dq, 5);
    check("dk", &Sequence::k, g.dk, 5);
    check("dv", &Sequence::v, g.dv, 5);
  }
}

struct Errors {
  double dq, dk, dv, dg, dbeta, dh0;
  double max() const { return std::max({dq, dk, dv, dg, dbeta, dh0}); }
};

Errors errors(const Gradients& a, const Gradients& ref) {
  return {rel_rmse(a.dq, ref.dq), rel_rmse(a.dk, ref.dk),       rel_rmse(a.dv, ref.dv),
          rel_rmse(a.dg, ref.dg), rel_rmse(a.dbeta, ref.dbeta), rel_rmse(a.dh0, ref.dh0)};
}

std::ostream& operator<<(std::ostream& o, const Errors& e) {
  return o << "dq " << e.dq << " dk " << e.dk << " dv " << e.dv << " dg " << e.dg << " dbeta " << e.dbeta << " dh0 "
           << e.dh0;
}

// The chunked FP64 backward with the exact inverse is the recurrence's
// gradient, T = 4,096, C = 16 (with h0 and dht) and 64 (without), per-token
// and per-channel gates, K = V = 32.
TEST(Backward, ChunkedFp64WithTheExactInverseEqualsTheRecurrence) {
  for (const char* gating : {"token", "channel"})
    for (int C : {16, 64}) {
      SCOPED_TRACE(::testing::Message() << gating << " C=" << C);
      SeqConfig c = config("model_like", 4096, C, 32, 32, {{"gating", gating}});
      if (C == 16) c.initial_state = "random";
      const Sequence s = find_source(c.family).make(c, 7, 3);
      const double scale = default_scale(s);
      Upstream up = upstream_of(s, 7, 3);
      if (C == 16) up.dht = random_mat(32, 32, 5);
      const Gradients ref = recurrent_backward(s, up, scale);
      const std::vector<Mat> a = exact_inverses(s, C);
      const Gradients g = chunked_backward(s, C, a, a, fp64_storage(), fp64_backward(), up, scale);
      const Errors e = errors(g, ref);
      EXPECT_LE(e.max(), 1e-11) << e;
      EXPECT_GT(ref.dg.norm(), 0.0);
      EXPECT_GT(ref.dh0.norm(), 0.0);
    }
}

// Gates that forget hard (real gates to -167 a token, forgets of -40): the
// backward's decays are formed per pair and stay finite and exact.
TEST(Backward, StrongForgetsStayExact) {
  const SeqConfig sf = config("sparse_forget", 2048, 64, 16, 16, {{"forget_rate", 0.02}, {"forget", -40.0}});
  const SeqConfig rg = config("real_gates", 1024, 64, 16, 16, {{"model", "Qwen3-Next"}});
  for (const SeqConfig* c : {&sf, &rg}) {
    const Sequence s = find_source(c->family).make(*c, 0, 1);
    const Upstream up = upstream_of(s, 0, 1);
    const Gradients ref = recurrent_backward(s, up, default_scale(s));
    const std::vector<Mat> a = exact_inverses(s, c->chunk);
    const Gradients g = chunked_backward(s, c->chunk, a, a, fp64_storage(), fp64_backward(), up, default_scale(s));
    EXPECT_LE(errors(g, ref).max(), 1e-11) << c->family << ": " << errors(g, ref);
  }
}

// What rounding does: BF16 storage (fla's chunk_kda backward) gives errors
// of BF16's order, the gradients returned in BF16 at least its half ulp's
// RMS; a BF16-rounded inverse alone (everything else FP64) gives a smaller,
// non-zero error; the same inverse in both forms gives the same gradients
// as handing it in twice (no hidden state).
TEST(Backward, StorageAndARoundedInverseMoveTheGradients) {
  const SeqConfig c = config("model_like", 1024, 64, 32, 32, {{"gating", "channel"}});
  const Sequence s = find_source(c.family).make(c, 1, 0);
  const double scale = default_scale(s);
  const Upstream up = upstream_of(s, 1, 0);
  const Gradients ref = recurrent_backward(s, up, scale);
  const std::vector<Mat> a = exact_inverses(s, 64);
  std::vector<Mat> a16;
  for (const Mat& m : a) a16.push_back(m.unaryExpr([](double x) { return bf16(x); }));
  const Gradients storage = chunked_backward(s, 64, a, a16, find_storage("fla_chunk_kda"),
                                             find_backward_storage("fla_chunk_kda"), up, scale);
  const Errors es = errors(storage, ref);
  for (double e : {es.dq, es.dk, es.dv, es.dbeta}) {
    EXPECT_GT(e, 1e-3) << es;  // BF16 outputs: about 2^-9 / sqrt(3) RMS at least
    EXPECT_LT(e, 3e-2) << es;
  }
  EXPECT_GT(es.dg, 1e-5) << es;
  EXPECT_LT(es.dg, 3e-2) << es;
  const Gradients inv = chunked_backward(s, 64, a16, a16, fp64_storage(), fp64_backward(), up, scale);
  const Errors ei = errors(inv, ref);
  EXPECT_GT(ei.dk, 1e-6) << ei;
  EXPECT_LT(ei.max(), 1e-1) << ei;
  EXPECT_LT(ei.dk, es.dk) << ei;
  const Gradients again = chunked_backward(s, 64, a16, a16, fp64_storage(), fp64_backward(), up, scale);
  EXPECT_EQ(inv.dk, again.dk);
}

TEST(Backward, UpstreamIsSeededAndBf16) {
  const SeqConfig c = config("model_like", 128, 16, 8, 8);
  const Sequence s = find_source(c.family).make(c, 0, 0);
  const Upstream a = upstream_of(s, 4, 2), b = upstream_of(s, 4, 2), other = upstream_of(s, 4, 3);
  EXPECT_EQ(a.d_o, b.d_o);
  EXPECT_NE(a.d_o, other.d_o);
  EXPECT_EQ(a.dht.size(), 0);
  for (Eigen::Index i = 0; i < a.d_o.size(); ++i) EXPECT_EQ(a.d_o.data()[i], bf16(a.d_o.data()[i]));
  EXPECT_GT(a.d_o.norm(), 0.0);
  EXPECT_HAS(testing::usage_error([] { find_backward_storage("flashkda"); }), "has no backward");
}

}  // namespace
}  // namespace chunkinv
