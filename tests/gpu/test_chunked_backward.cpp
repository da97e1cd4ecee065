// The chunked backward's one step (downstream/backward_step.hpp) run by many
// threads: on the host, 37 std::threads with a barrier between stages, and
// on the GPU (gpu/chunked_backward.cu), a block a variant; each against the
// CPU's ChunkedBackward (the step on one thread), bit for bit, over the
// backward presets, both gatings, an initial state, a final state's gradient
// and inverses of every kind (the exact one, FP16 Neumann's, one with a
// non-finite entry).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "downstream/backward.hpp"
#include "downstream/backward_step.hpp"
#include "downstream/experiment.hpp"
#include "downstream/forward.hpp"
#include "downstream/sources.hpp"
#include "downstream/storage.hpp"
#include "gpu/chunked_backward.hpp"
#include "step_test_common.hpp"

namespace chunkinv {
namespace {

using steptest::Case;
using steptest::differing;
using steptest::inverses_of;

Sequence sequence_of(const Case& c, uint64_t i) { return steptest::sequence_of(c, 7, i); }

// do from the sequence's stream, dht N(0, 1) rounded to BF16 (a loss that reads the final state).
Upstream upstream(const Sequence& s) {
  Upstream up = upstream_of(s, 7, 0);
  up.dht = up.d_o.topRows(s.key_dim);  // every case has T >= K
  return up;
}

std::vector<Case> cases() {
  return {{"model_like", "channel", "fla_chunk_kda", 16, 32, 24, 64},
          {"model_like", "token", "fla_chunk_gdn", 16, 16, 40, 48},
          {"model_like", "token", "fp64", 8, 16, 13, 32}};  // V not a multiple of 4: a short group
}

// The states entering each chunk, as the chunked forward with `inverse` carries them.
std::vector<Mat> states_of(const Sequence& s, int C, const StoragePreset& p, int which) {
  ChunkedForward f(s, C, p, default_scale(s));
  std::vector<Mat> states;
  Mat rows;
  for (int n = 0; n < s.chunks(C); ++n) {
    states.push_back(f.state());
    f.advance(n, inverses_of(s, C, n)[which], rows);
  }
  return states;
}

void expect_same_rows(const Gradients& a, const Gradients& b, const std::string& what) {
  EXPECT_EQ(differing(a.dq.data(), b.dq.data(), a.dq.size()), 0u) << "dq, " << what;
  EXPECT_EQ(differing(a.dk.data(), b.dk.data(), a.dk.size()), 0u) << "dk, " << what;
  EXPECT_EQ(differing(a.dv.data(), b.dv.data(), a.dv.size()), 0u) << "dv, " << what;
  EXPECT_EQ(differing(a.dg.data(), b.dg.data(), a.dg.size()), 0u) << "dg, " << what;
  EXPECT_EQ(differing(a.dbeta.data(), b.dbeta.data(), a.dbeta.size()), 0u) << "dbeta, " << what;
}

TEST(ChunkedBackwardStep, ManyThreadsEqualOne) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.family + " " + c.gating + " " + c.storage);
    const Sequence s = sequence_of(c, 0);
    const StoragePreset& fwd = find_storage(c.storage);
    const BackwardPreset& bwd = find_backward_storage(c.storage);
    const Upstream up = upstream(s);
    const double scale = default_scale(s);
    const int W = s.gate_width();
    const std::vector<Mat> states = states_of(s, c.C, fwd, 1);
    ChunkedBackward one(s, c.C, fwd, bwd, up, scale);
    Mat ds = up.dht.unaryExpr([&](double y) { return stored(y, bwd.grad_state); });
    std::vector<double> work(backward_step::work_doubles(c.C, c.K, c.V, W));
    double norm = 0;
    for (int n = s.chunks(c.C) - 1; n >= 0; --n) {
      const Mat A = inverses_of(s, c.C, n)[1];
      Gradients want(s, c.C), got(s, c.C);
      one.step(n, A, states[n], want, n * c.C);
      norm += want.dk.norm();
      backward_step::Args a;
      const size_t t0 = size_t(n) * c.C;
      a.q = &s.q[t0 * c.K], a.k = &s.k[t0 * c.K], a.v = &s.v[t0 * c.V], a.g = &s.g[t0 * W], a.beta = &s.beta[t0];
      a.d_o = &up.d_o(Eigen::Index(t0), 0), a.A = A.data(), a.state_in = states[n].data(), a.ds = ds.data();
      a.dq = got.dq.data(), a.dk = got.dk.data(), a.dv = got.dv.data(), a.dg = got.dg.data(), a.dbeta = got.dbeta.data();
      a.work = work.data(), a.C = c.C, a.K = c.K, a.V = c.V, a.W = W, a.scale = scale;
      a.p = fwd, a.b = backward_stores_of(bwd);
      steptest::on_threads([&](steptest::ThreadsContext& x) { backward_step::step(a, x); });
      expect_same_rows(got, want, "chunk " + std::to_string(n));
      EXPECT_EQ(differing(ds.data(), one.state_grad().data(), ds.size()), 0u) << "state gradient, chunk " << n;
    }
    EXPECT_GT(norm, 0.0);  // not a comparison of zeros
  }
}

TEST(GpuChunkedBackward, EqualsTheCpuBackwardBitForBit) {
  CHUNKINV_REQUIRE_GPU();
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.family + " " + c.gating + " " + c.storage);
    const Sequence s = sequence_of(c, 1);
    const StoragePreset& fwd = find_storage(c.storage);
    const BackwardPreset& bwd = find_backward_storage(c.storage);
    const Upstream up = upstream(s);
    const double scale = default_scale(s);
    const int W = s.gate_width(), nv = 6;  // three inverses, each with the presets and in FP64
    std::vector<Stores> f;
    std::vector<backward_step::BackwardStores> b;
    std::vector<ChunkedBackward> cpu;
    std::vector<std::vector<Mat>> states;
    cpu.reserve(nv);
    for (int v = 0; v < nv; ++v) {
      const StoragePreset& p = v % 2 ? fp64_storage() : fwd;
      const BackwardPreset& q = v % 2 ? fp64_backward() : bwd;
      f.push_back(p), b.push_back(backward_stores_of(q));
      cpu.emplace_back(s, c.C, p, q, up, scale);
      states.push_back(states_of(s, c.C, p, v / 2));
    }
    gpu::DeviceChunkedBackward dev(c.C, c.K, c.V, W, scale, f, b, up.dht.data());
    double norm = 0;
    const size_t CK = size_t(c.C) * c.K, CV = size_t(c.C) * c.V, CW = size_t(c.C) * W, KV = size_t(c.K) * c.V;
    std::vector<double> dq(nv * CK), dk(nv * CK), dv(nv * CV), dg(nv * CW), dbeta(nv * c.C);
    for (int n = s.chunks(c.C) - 1; n >= 0; --n) {
      const std::vector<Mat> inv = inverses_of(s, c.C, n);
      std::vector<double> inverses, entering;
      for (int v = 0; v < nv; ++v) {
        inverses.insert(inverses.end(), inv[v / 2].data(), inv[v / 2].data() + c.C * c.C);
        entering.insert(entering.end(), states[v][n].data(), states[v][n].data() + KV);
      }
      const size_t t0 = size_t(n) * c.C;
      dev.step({&s.q[t0 * c.K], &s.k[t0 * c.K], &s.v[t0 * c.V], &s.g[t0 * W], &s.beta[t0], &up.d_o(Eigen::Index(t0), 0)},
               inverses.data(), entering.data(), {dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data()});
      std::vector<double> ds(nv * KV);
      dev.state_grad(ds.data());
      for (int v = 0; v < nv; ++v) {
        Gradients want(s, c.C), got(s, c.C);
        cpu[v].step(n, inv[v / 2], states[v][n], want, n * c.C);
        if (v == 0) norm += want.dk.norm();
        std::copy(dq.begin() + v * CK, dq.begin() + (v + 1) * CK, got.dq.data());
        std::copy(dk.begin() + v * CK, dk.begin() + (v + 1) * CK, got.dk.data());
        std::copy(dv.begin() + v * CV, dv.begin() + (v + 1) * CV, got.dv.data());
        std::copy(dg.begin() + v * CW, dg.begin() + (v + 1) * CW, got.dg.data());
        std::copy(dbeta.begin() + v * c.C, dbeta.begin() + (v + 1) * c.C, got.dbeta.data());
        expect_same_rows(got, want, "variant " + std::to_string(v) + ", chunk " + std::to_string(n));
        EXPECT_EQ(differing(ds.data() + v * KV, cpu[v].state_grad().data(), KV), 0u)
            << "state gradient of variant " << v << ", chunk " << n;
      }
    }
    EXPECT_GT(norm, 0.0);
  }
}

TEST(GpuChunkedBackward, RefusesWithoutAGpu) {
  if (gpu::unavailable_reason().empty()) GTEST_SKIP() << "a GPU is here: the refusal is not reachable";
  try {
    gpu::DeviceChunkedBackward dev(16, 16, 16, 1, 0.25, {fp64_storage()}, {backward_stores_of(fp64_backward())}, nullptr);
    FAIL() << "no refusal";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the GPU chunked backward"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace chunkinv
