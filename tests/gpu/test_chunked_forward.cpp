// The chunked forward's one step (downstream/forward_step.hpp) run by many
// threads: on the host, 37 std::threads with a barrier between stages, and
// on the GPU (gpu/chunked_forward.cu), a block a variant; each against the
// CPU's ChunkedForward (the step on one thread), bit for bit, over the
// storage presets, both gatings, an initial state and inverses of every kind
// (the exact one, FP16 Neumann's, one with a non-finite entry).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "downstream/experiment.hpp"
#include "downstream/forward.hpp"
#include "downstream/forward_step.hpp"
#include "downstream/sources.hpp"
#include "downstream/storage.hpp"
#include "gpu/chunked_forward.hpp"
#include "step_test_common.hpp"

namespace chunkinv {
namespace {

using steptest::Case;
using steptest::differing;
using steptest::inverses_of;

Sequence sequence_of(const Case& c, uint64_t i) { return steptest::sequence_of(c, 5, i); }

std::vector<Case> cases() {
  return {{"model_like", "channel", "fla_chunk_kda", 16, 32, 24, 64},
          {"model_like", "token", "fla_chunk_gdn", 16, 16, 40, 48},
          {"sparse_forget", "channel", "flashkda", 32, 16, 16, 96},
          {"model_like", "token", "fp64", 8, 16, 13, 32}};  // V not a multiple of 4: a short group
}

TEST(ChunkedForwardStep, ManyThreadsEqualOne) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.family + " " + c.gating + " " + c.storage);
    const Sequence s = sequence_of(c, 0);
    const StoragePreset& preset = find_storage(c.storage);
    const double scale = default_scale(s);
    ChunkedForward one(s, c.C, preset, scale);
    std::vector<double> state(size_t(c.K) * c.V), work;
    for (size_t i = 0; i < state.size(); ++i) state[i] = stored(s.h0[i], preset.state);
    const int W = s.gate_width();
    work.resize(forward_step::work_doubles(c.C, c.K, c.V, W));
    for (int n = 0; n < s.chunks(c.C); ++n) {
      const Mat inverse = inverses_of(s, c.C, n)[1];
      Mat rows;
      one.advance(n, inverse, rows);
      std::vector<double> o(size_t(c.C) * c.V, NAN);
      forward_step::Args a;
      const size_t t0 = size_t(n) * c.C;
      a.q = &s.q[t0 * c.K], a.k = &s.k[t0 * c.K], a.v = &s.v[t0 * c.V], a.g = &s.g[t0 * W], a.beta = &s.beta[t0];
      a.inverse = inverse.data(), a.state = state.data(), a.o = o.data(), a.work = work.data();
      a.C = c.C, a.K = c.K, a.V = c.V, a.W = W, a.scale = scale, a.p = preset;
      steptest::on_threads([&](steptest::ThreadsContext& x) { forward_step::step(a, x); });
      EXPECT_EQ(differing(o.data(), rows.data(), o.size()), 0u) << "o, chunk " << n;
      EXPECT_EQ(differing(state.data(), one.state().data(), state.size()), 0u) << "state, chunk " << n;
    }
  }
}

TEST(GpuChunkedForward, EqualsTheCpuForwardBitForBit) {
  CHUNKINV_REQUIRE_GPU();
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.family + " " + c.gating + " " + c.storage);
    const Sequence s = sequence_of(c, 1);
    const StoragePreset& preset = find_storage(c.storage);
    const double scale = default_scale(s);
    const int W = s.gate_width(), nv = 6;  // three inverses, each with the preset and in FP64
    std::vector<Stores> stores;
    std::vector<ChunkedForward> cpu;
    cpu.reserve(nv);
    for (int v = 0; v < nv; ++v) {
      const StoragePreset& p = v % 2 ? fp64_storage() : preset;
      stores.push_back(p);
      cpu.emplace_back(s, c.C, p, scale);
    }
    gpu::DeviceChunkedForward dev(c.C, c.K, c.V, W, scale, stores, s.h0.data());
    double o_norm = 0;
    for (int n = 0; n < s.chunks(c.C); ++n) {
      const std::vector<Mat> inv = inverses_of(s, c.C, n);
      std::vector<double> inverses, o(size_t(nv) * c.C * c.V), states(size_t(nv) * c.K * c.V);
      for (int v = 0; v < nv; ++v) inverses.insert(inverses.end(), inv[v / 2].data(), inv[v / 2].data() + c.C * c.C);
      const size_t t0 = size_t(n) * c.C;
      dev.advance(&s.q[t0 * c.K], &s.k[t0 * c.K], &s.v[t0 * c.V], &s.g[t0 * W], &s.beta[t0], inverses.data(), o.data(),
                  states.data());
      for (int v = 0; v < nv; ++v) {
        Mat rows;
        cpu[v].advance(n, inv[v / 2], rows);
        if (v == 0) o_norm += rows.norm();
        EXPECT_EQ(differing(o.data() + size_t(v) * c.C * c.V, rows.data(), size_t(c.C) * c.V), 0u)
            << "o of variant " << v << ", chunk " << n;
        EXPECT_EQ(differing(states.data() + size_t(v) * c.K * c.V, cpu[v].state().data(), size_t(c.K) * c.V), 0u)
            << "state of variant " << v << ", chunk " << n;
      }
    }
    EXPECT_GT(o_norm, 0.0);  // not a comparison of zeros
  }
}

TEST(GpuChunkedForward, RefusesWithoutAGpu) {
  if (gpu::unavailable_reason().empty()) GTEST_SKIP() << "a GPU is here: the refusal is not reachable";
  try {
    gpu::DeviceChunkedForward dev(16, 16, 16, 1, 0.25, {fp64_storage()}, nullptr);
    FAIL() << "no refusal";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the GPU chunked forward"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace chunkinv
