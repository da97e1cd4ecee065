// The backward against its references: the recurrence's hand-derived
// gradient against central finite differences of the forward; the chunked
// FP64 backward with the exact inverse against the recurrence's gradient;
// the storage presets and a rounded inverse move the gradients by what they
// should.
#include <cmath>
#include <filesystem>
#include <functional>

#include <gtest/gtest.h>

#include "core/fp.hpp"
#include "core/rng.hpp"
#include "io/zip.hpp"
#include "downstream/backward.hpp"
#include "downstream/experiment.hpp"
#include "downstream/forward.hpp"
#include "downstream/sources.hpp"
#include "metrics/metrics.hpp"
#include "paths/gold/gold.hpp"
#include "support/sequences.hpp"
#include "support/shell.hpp"
#include "support/usage_error.hpp"

namespace chunkinv {
namespace {

using nlohmann::json;

using testing::config;
using testing::exact_inverses;

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

// chunk_gated_delta_rule's order (the decay to the chunk's end after the
// product k dh) is the same gradient: FP64 in that order equals the recurrence's.
TEST(Backward, ChunkedFp64InGatedDeltaNetsOrderEqualsTheRecurrence) {
  StoragePreset gdn_order = fp64_storage();
  gdn_order.per_token_only = true;
  SeqConfig c = config("model_like", 1024, 64, 16, 16);
  c.initial_state = "random";
  const Sequence s = find_source(c.family).make(c, 5, 0);
  Upstream up = upstream_of(s, 5, 0);
  up.dht = random_mat(16, 16, 3);
  const Gradients ref = recurrent_backward(s, up, default_scale(s));
  const std::vector<Mat> a = exact_inverses(s, 64);
  const Gradients g = chunked_backward(s, 64, a, a, gdn_order, fp64_backward(), up, default_scale(s));
  EXPECT_LE(errors(g, ref).max(), 1e-11) << errors(g, ref);
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
// of BF16's order (the gradients returned in BF16: above 1e-3); a
// BF16-rounded inverse alone (everything else FP64) gives a smaller,
// non-zero error; the same inputs twice give the same gradients (no hidden
// state).
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
    EXPECT_GT(e, 1e-3) << es;  // returned in BF16: about 1.7e-3 for normal entries
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

// chunk_gated_delta_rule's backward (per-token gates) rounds dL times the
// pair's decay to BF16 before its products with k, chunk_kda's keeps dL in
// FP32: both give BF16-order errors, and they differ.
TEST(Backward, GatedDeltaNetPresetRoundsDlWithItsDecay) {
  const SeqConfig c = config("model_like", 1024, 64, 32, 32);
  const Sequence s = find_source(c.family).make(c, 2, 0);
  const double scale = default_scale(s);
  const Upstream up = upstream_of(s, 2, 0);
  const Gradients ref = recurrent_backward(s, up, scale);
  const std::vector<Mat> a = exact_inverses(s, 64);
  const Gradients gdn = chunked_backward(s, 64, a, a, find_storage("fla_chunk_gdn"), find_backward_storage("fla_chunk_gdn"),
                                         up, scale);
  const Gradients kda = chunked_backward(s, 64, a, a, find_storage("fla_chunk_gdn"), find_backward_storage("fla_chunk_kda"),
                                         up, scale);
  const Errors e = errors(gdn, ref);
  EXPECT_GT(e.dk, 1e-4) << e;
  EXPECT_LT(e.max(), 3e-2) << e;
  EXPECT_NE(gdn.dk, kda.dk);
  EXPECT_NE(gdn.dbeta, kda.dbeta);
  EXPECT_EQ(gdn.dv, kda.dv);  // dv does not pass through dL
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

json entries_json(const SeqRunResult& r) {
  json j = json::array();
  for (const auto& e : r.entries) j.push_back(entry_to_json(e));
  return j;
}

// The backward in a run: the gold's exact inverse has no inverse-only
// gradient error; FP16 Neumann's has one; BF16 storage's is BF16's; the
// stored (BF16) and the recomputed (FP16) inverse differ; one thread or
// two, the same report.
TEST(Backward, RunDecomposesAndIsTheSameOnAnyThreadCount) {
  const auto groups = expand_sequences({{"family", "model_like"}, {"seq_len", 512}, {"chunk", 16}, {"dim", 16},
                                        {"value_dim", 16}, {"method", json::array({"exact", "neumann"})},
                                        {"storage", "fla_chunk_kda"}, {"backward", json::array({"stored", "recomputed"})}});
  ASSERT_EQ(groups.size(), 2u);
  SeqRunOptions opt;
  opt.samples = 2;
  opt.threads = 1;
  const auto paths = parse_paths("gold,emulated");
  const SeqRunResult one = run_sequences(groups, paths, opt);
  opt.threads = 2;
  const SeqRunResult two = run_sequences(groups, paths, opt);
  EXPECT_EQ(entries_json(one), entries_json(two));
  const auto median = [&](const std::string& mode, const std::string& path, const std::string& method,
                          const std::string& metric) -> double {
    for (const auto& e : one.entries)
      if (e.axes["backward"] == mode && e.axes["path"] == path && e.axes["method"] == method)
        return e.metrics.at(metric).median;
    ADD_FAILURE() << mode << " " << path << " " << method;
    return NAN;
  };
  for (const char* g : {"dq", "dk", "dv", "dg", "dbeta"}) {
    SCOPED_TRACE(g);
    const std::string m = g;
    EXPECT_LE(median("stored", "gold", "exact", m + "_rel_rmse_inverse_only"), 1e-12);
    EXPECT_GT(median("stored", "emulated", "neumann", m + "_rel_rmse_inverse_only"), 1e-8);
    const double storage = median("stored", "gold", "exact", m + "_rel_rmse_storage");
    EXPECT_GT(storage, 1e-5);
    EXPECT_LT(storage, 3e-2);
    EXPECT_EQ(median("stored", "gold", "exact", m + "_rel_rmse"), storage);  // exact inverse: total = storage
  }
  EXPECT_NE(median("stored", "emulated", "neumann", "dk_rel_rmse"), median("recomputed", "emulated", "neumann", "dk_rel_rmse"));
  EXPECT_EQ(median("stored", "gold", "exact", "grad_finite"), 1.0);
  EXPECT_EQ(median("stored", "gold", "exact", "grad_first_nonfinite"), 512.0);
  EXPECT_TRUE(one.entries[0].metrics.count("dg_rel_rmse_from_480"));
  EXPECT_TRUE(one.entries[0].metrics.count("o_rel_rmse"));  // the forward's metrics stay
}

TEST(Backward, BadConfigurationsAreOneLine) {
  using testing::usage_error;
  const auto grid = [](json extra) {
    json a = {{"family", "model_like"}, {"seq_len", 256}, {"chunk", 64}, {"backward", "stored"}};
    for (const auto& [k, v] : extra.items()) a[k] = v;
    return [a] { expand_sequences(a); };
  };
  EXPECT_HAS(usage_error(grid({{"backward", "both"}})), "axis backward = \"both\" must be none, stored or recomputed");
  EXPECT_HAS(usage_error(grid({{"storage", "flashkda"}})), "FlashKDA ships no backward");
}

Tensor tensor(std::vector<int64_t> shape, std::vector<double> values) {
  Tensor t;
  t.dtype = DType::kF64;
  t.shape = std::move(shape);
  t.values = std::move(values);
  return t;
}

// A kernel's gradients in fla's layout, equal to the recurrence's times
// (1 + e) (dk: only in the second window), scored through the command line
// against the recurrence's gradient of the inputs' do and dht; without do,
// or with some of the five, one line.
TEST(BackwardCli, ScoresAKernelsGradientsInFlasLayout) {
  const std::string dir = testing::test_dir("seq-grads");
  const int T = 128, H = 2, K = 8, V = 8, Wn = 64;
  SeqConfig c = config("model_like", T, 16, K, V, {{"gating", "channel"}});
  c.initial_state = "random";
  std::vector<Sequence> heads;
  for (int h = 0; h < H; ++h) heads.push_back(find_source(c.family).make(c, 3, h));
  const double e = 1e-3;
  std::vector<Upstream> ups;
  std::vector<Gradients> refs;
  std::vector<Trace> outs;
  for (int h = 0; h < H; ++h) {
    ups.push_back(upstream_of(heads[h], 9, h));
    ups[h].dht = random_mat(K, V, 20 + h);
    refs.push_back(recurrent_backward(heads[h], ups[h], default_scale(heads[h])));
    outs.push_back(recurrent_forward(heads[h], 16, default_scale(heads[h])));
  }
  std::vector<double> q, k, v, g, beta, h0, d_o, dht, o, dq, dk, dv, dg, db;
  const auto row = [](std::vector<double>& to, const Mat& m, int t, double f) {
    for (Eigen::Index x = 0; x < m.cols(); ++x) to.push_back(m(t, x) * f);
  };
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const Sequence& s = heads[h];
      q.insert(q.end(), s.q.begin() + t * K, s.q.begin() + (t + 1) * K);
      k.insert(k.end(), s.k.begin() + t * K, s.k.begin() + (t + 1) * K);
      v.insert(v.end(), s.v.begin() + t * V, s.v.begin() + (t + 1) * V);
      g.insert(g.end(), s.g.begin() + t * K, s.g.begin() + (t + 1) * K);
      beta.push_back(s.beta[t]);
      row(d_o, ups[h].d_o, t, 1);
      row(o, outs[h].o, t, 1);
      row(dq, refs[h].dq, t, 1 + e);
      row(dk, refs[h].dk, t, t >= Wn ? 1 + e : 1);
      row(dv, refs[h].dv, t, 1 + e);
      row(dg, refs[h].dg, t, 1 + e);
      row(db, refs[h].dbeta, t, 1 + e);
    }
  for (int h = 0; h < H; ++h) {
    h0.insert(h0.end(), heads[h].h0.begin(), heads[h].h0.end());
    for (Eigen::Index i = 0; i < ups[h].dht.size(); ++i) dht.push_back(ups[h].dht.data()[i]);
  }
  TensorMap in = {{"q", tensor({1, T, H, K}, q)},     {"k", tensor({1, T, H, K}, k)},
                  {"v", tensor({1, T, H, V}, v)},     {"g", tensor({1, T, H, K}, g)},
                  {"beta", tensor({1, T, H}, beta)},  {"initial_state", tensor({1, H, K, V}, h0)},
                  {"do", tensor({1, T, H, V}, d_o)},  {"dht", tensor({1, H, K, V}, dht)}};
  write_npz(dir + "/in.npz", in);
  TensorMap out = {{"o", tensor({1, T, H, V}, o)},    {"dq", tensor({1, T, H, K}, dq)}, {"dk", tensor({1, T, H, K}, dk)},
                   {"dv", tensor({1, T, H, V}, dv)},  {"dg", tensor({1, T, H, K}, dg)}, {"dbeta", tensor({1, T, H}, db)}};
  write_npz(dir + "/out.npz", out);
  const auto r = testing::run_chunkinv_in(
      dir, "seq --inputs in.npz --candidate out.npz -a chunk=16 -a window=64 -a method=fla_solve_tril -q -o s.json");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = testing::load_json(dir + "/s.json");
  const json& m = j["results"][0]["metrics"];
  for (const char* name : {"dq_rel_rmse", "dv_rel_rmse", "dg_rel_rmse", "dbeta_rel_rmse", "dk_rel_rmse_from_64"}) {
    EXPECT_NEAR(m[name]["min"].get<double>(), e, 1e-9) << name;
    EXPECT_NEAR(m[name]["max"].get<double>(), e, 1e-9) << name;
  }
  EXPECT_EQ(m["dk_rel_rmse_from_0"]["max"].get<double>(), 0.0);
  EXPECT_EQ(m["grad_finite"]["min"].get<double>(), 1.0);
  EXPECT_FALSE(m.contains("dq_rel_rmse_inverse_only"));
  // The run through gold and emulated with the inputs' do: the backward's metrics.
  const auto run = testing::run_chunkinv_in(dir, "seq --inputs in.npz -a chunk=16 -a backward=stored -q -o m.json");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(testing::load_json(dir + "/m.json")["results"][0]["metrics"].contains("dbeta_rel_rmse_storage"));
  // Without do, or with some of the gradients: one line, nothing written.
  in.erase("do");
  write_npz(dir + "/in2.npz", in);
  const auto no_do = testing::run_chunkinv_in(dir, "seq --inputs in2.npz --candidate out.npz -a chunk=16 -o bad.json");
  EXPECT_EQ(no_do.status, 2);
  EXPECT_HAS(no_do.out, "must hold the upstream do");
  out.erase("dg");
  write_npz(dir + "/out2.npz", out);
  const auto some = testing::run_chunkinv_in(dir, "seq --inputs in.npz --candidate out2.npz -a chunk=16 -o bad.json");
  EXPECT_EQ(some.status, 2);
  EXPECT_HAS(some.out, "holds 4 of the gradients");
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.json"));
}

}  // namespace
}  // namespace chunkinv
