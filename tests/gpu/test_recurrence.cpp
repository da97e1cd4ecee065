// The GPU recurrence (gpu/recurrence.cu) against the CPU's Recurrence
// (downstream/forward.cpp): bit for bit, o and the state after every block,
// per-token and per-channel gates, with and without h0, K = V = 128 and
// small shapes (V odd, V past one block's 64 columns), blocks of uneven
// lengths; the kernel's own source run on the host, thread by thread, with
// or without a GPU (its indices, barriers and shuffles); and the shapes it
// refuses.
#include <gtest/gtest.h>

#include <barrier>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "downstream/experiment.hpp"
#include "downstream/forward.hpp"
#include "downstream/sources.hpp"
#include "gpu/recurrence.hpp"
#include "gpu/recurrence_block.hpp"
#include "gpu_test_common.hpp"

namespace chunkinv {
namespace {

using gputest::same_double;

struct Case {
  std::string family;
  int K, V, T;
  const char* gating;
  bool h0;
  std::vector<int> blocks;  // tokens per advance, summing to T
  nlohmann::json params = nlohmann::json::object();
};

std::vector<Sequence> sequences(const Case& c, int n) {
  SeqConfig cfg;
  cfg.family = c.family;
  cfg.seq_len = c.T;
  cfg.chunk = 16;
  cfg.dim = c.K;
  cfg.value_dim = c.V;
  cfg.params = c.params;
  cfg.params["gating"] = c.gating;
  cfg.initial_state = c.h0 ? "random" : "zero";
  complete(cfg);
  find_source(cfg.family).validate(cfg);  // the family's own axes (T need not be a whole number of chunks here)
  std::vector<Sequence> out;
  for (int i = 0; i < n; ++i) out.push_back(find_source(cfg.family).make(cfg, 11, uint64_t(i)));
  return out;
}

// Tokens [t0, t0 + count) of every sequence, packed [n][count][X].
std::vector<double> pack(const std::vector<Sequence>& seqs, const std::vector<double> Sequence::*field, int width,
                         int t0, int count) {
  std::vector<double> out;
  for (const Sequence& s : seqs) {
    const std::vector<double>& f = s.*field;
    out.insert(out.end(), f.begin() + size_t(t0) * width, f.begin() + size_t(t0 + count) * width);
  }
  return out;
}

size_t count_differing(const double* a, const double* b, size_t n) {
  size_t d = 0;
  for (size_t i = 0; i < n; ++i) d += !same_double(a[i], b[i]);
  return d;
}

TEST(GpuRecurrence, EqualsTheCpuRecurrenceBitForBit) {
  CHUNKINV_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {"model_like", 128, 128, 200, "channel", true, {64, 64, 64, 8}},
      {"model_like", 128, 128, 200, "token", false, {100, 100}},
      {"model_like", 128, 128, 96, "channel", false, {1, 95}},
      {"sparse_forget", 128, 128, 256, "token", true, {256}, {{"forget_rate", 0.05}, {"forget", -40.0}}},
      {"model_like", 16, 13, 100, "channel", true, {37, 63}},
      {"model_like", 32, 72, 64, "token", true, {16, 48}},
      {"model_like", 64, 200, 48, "channel", false, {5, 43}},
  };
  for (const int version : {1, 2})
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "version " << version << " " << c.family << " K=" << c.K << " V=" << c.V
                                      << " T=" << c.T << " " << c.gating << (c.h0 ? " h0" : ""));
    const int n = 3, K = c.K, V = c.V, W = std::string(c.gating) == "channel" ? K : 1;
    const std::vector<Sequence> seqs = sequences(c, n);
    const double scale = default_scale(seqs[0]);
    std::vector<double> h0;
    for (const Sequence& s : seqs) h0.insert(h0.end(), s.h0.begin(), s.h0.end());
    gpu::DeviceRecurrence dev(n, K, V, W == K, scale, c.h0 ? h0.data() : nullptr, version);
    std::vector<Recurrence> cpu;
    for (const Sequence& s : seqs) cpu.emplace_back(s, scale);
    int t0 = 0;
    double o_norm = 0;
    for (const int count : c.blocks) {
      std::vector<double> o(size_t(n) * count * V), state(size_t(n) * K * V);
      dev.advance(count, pack(seqs, &Sequence::q, K, t0, count).data(), pack(seqs, &Sequence::k, K, t0, count).data(),
                  pack(seqs, &Sequence::g, W, t0, count).data(), pack(seqs, &Sequence::beta, 1, t0, count).data(),
                  pack(seqs, &Sequence::v, V, t0, count).data(), o.data());
      dev.state(state.data());
      for (int i = 0; i < n; ++i) {
        Mat rows;
        cpu[i].advance(t0, count, rows);
        o_norm += rows.norm();
        EXPECT_EQ(count_differing(o.data() + size_t(i) * count * V, rows.data(), size_t(count) * V), 0u)
            << "o of sequence " << i << ", tokens " << t0 << ".." << t0 + count;
        EXPECT_EQ(count_differing(state.data() + size_t(i) * K * V, cpu[i].state().data(), size_t(K) * V), 0u)
            << "state of sequence " << i << " after token " << t0 + count;
      }
      t0 += count;
    }
    EXPECT_EQ(t0, c.T);
    EXPECT_GT(o_norm, 0.0);  // not a comparison of zeros
  }
}

// The kernel bodies (gpu/recurrence_block.hpp) on the host: a block is
// `threads` std::threads, __syncthreads a barrier of them all, a shuffle a
// slot a lane and two barriers of its warp.
struct HostBlock {
  HostBlock(int threads, int bx, int by, size_t smem_bytes)
      : threads(threads), bx(bx), by(by), shared(smem_bytes / sizeof(double)), all(threads), slots(threads) {
    for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<std::barrier<>>(32));
  }
  int threads, bx, by;
  std::vector<double> shared;
  std::barrier<> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<double> slots;
};

struct HostContext {
  HostBlock* b;
  int tid;
  int thread() const { return tid; }
  int threads() const { return b->threads; }
  int block_x() const { return b->bx; }
  int block_y() const { return b->by; }
  double* smem() const { return b->shared.data(); }
  void sync() const { b->all.arrive_and_wait(); }
  // The device's asynchronous copy done at once: a wait or a barrier later, as there.
  void copy_async(double* to, const double* from, int n) const { std::copy(from, from + n, to); }
  void wait_copies() const {}
  double shfl_xor(double v, int mask) const {
    std::barrier<>& warp = *b->warps[tid / 32];
    b->slots[tid] = v;
    warp.arrive_and_wait();
    const double got = b->slots[(tid & ~31) | ((tid & 31) ^ mask)];
    warp.arrive_and_wait();  // every lane has read before a slot is written again
    return got;
  }
};

// The body of kernel version `version` at K = 16 NI, as the device's launch picks it.
template <int NI>
void host_block(int version, const gpu::recurrence::Args& a, HostContext& x) {
  using namespace gpu::recurrence;
  switch (version) {
    case 2: return recurrence_block_v2<NI>(a, x);
    default: return recurrence_block<NI>(a, x);
  }
}

// gpu/recurrence.cu's launch() on the host: the decays, then every block of the grid.
void emulated_launch(int K, const gpu::recurrence::Args& a, const double* g, int n, int version) {
  using namespace gpu::recurrence;
  for (int s = 0; s < n; ++s)
    for (int rest = 0; rest < a.count * a.gate_width; ++rest)
      decay_one(g, const_cast<double*>(a.d), a.layout.rows(s), a.t0, a.gate_width, size_t(s) * a.count * a.gate_width, rest);
  const Shape sh = shape_of(K, a.value_dim, version);
  for (int s = 0; s < n; ++s)
    for (int by = 0; by < sh.blocks_per_sequence; ++by) {
      HostBlock block(sh.warps * 32, s, by, sh.smem_bytes);
      std::vector<std::thread> threads;
      for (int tid = 0; tid < block.threads; ++tid)
        threads.emplace_back([&, tid] {
          HostContext x{&block, tid};
          switch (K) {
            case 16: host_block<1>(version, a, x); break;
            case 32: host_block<2>(version, a, x); break;
            case 64: host_block<4>(version, a, x); break;
            default: host_block<8>(version, a, x); break;
          }
        });
      for (std::thread& t : threads) t.join();
    }
}

TEST(GpuRecurrenceSource, KernelBodiesOnTheHostEqualTheRecurrence) {
  const std::vector<Case> cases = {
      {"model_like", 128, 128, 21, "channel", true, {13, 8}},
      {"model_like", 16, 13, 50, "token", true, {9, 41}},  // 41: four stages, each buffer filled twice
      {"model_like", 32, 72, 10, "channel", false, {10}},
  };
  for (const int version : {1, 2})
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "version " << version << " K=" << c.K << " V=" << c.V << " " << c.gating
                                      << (c.h0 ? " h0" : ""));
    const int n = 2, K = c.K, V = c.V, W = std::string(c.gating) == "channel" ? K : 1;
    const std::vector<Sequence> seqs = sequences(c, n);
    const double scale = default_scale(seqs[0]);
    std::vector<double> state(size_t(n) * K * V, 0.0);
    if (c.h0)
      for (int i = 0; i < n; ++i) std::copy(seqs[i].h0.begin(), seqs[i].h0.end(), state.begin() + size_t(i) * K * V);
    std::vector<Recurrence> cpu;
    for (const Sequence& s : seqs) cpu.emplace_back(s, scale);
    int t0 = 0;
    for (const int count : c.blocks) {
      const std::vector<double> q = pack(seqs, &Sequence::q, K, t0, count), k = pack(seqs, &Sequence::k, K, t0, count),
                                g = pack(seqs, &Sequence::g, W, t0, count), beta = pack(seqs, &Sequence::beta, 1, t0, count),
                                v = pack(seqs, &Sequence::v, V, t0, count);
      std::vector<double> o(size_t(n) * count * V, NAN), d(size_t(n) * count * W);
      const gpu::recurrence::Args a{q.data(), k.data(), d.data(), beta.data(), v.data(), o.data(), state.data(),
                                    gpu::recurrence::Layout{count, 1}, 0, count, V, W, scale};
      emulated_launch(K, a, g.data(), n, version);
      for (int i = 0; i < n; ++i) {
        Mat rows;
        cpu[i].advance(t0, count, rows);
        EXPECT_EQ(count_differing(o.data() + size_t(i) * count * V, rows.data(), size_t(count) * V), 0u)
            << "o of sequence " << i << ", tokens " << t0 << ".." << t0 + count;
        EXPECT_EQ(count_differing(state.data() + size_t(i) * K * V, cpu[i].state().data(), size_t(K) * V), 0u)
            << "state of sequence " << i << " after token " << t0 + count;
      }
      t0 += count;
    }
  }
}

// K the registers cannot hold, or past 128; V past 512: one line, before anything runs.
TEST(GpuRecurrence, RefusesShapesItDoesNotRun) {
  for (const auto& [K, V] : std::vector<std::pair<int, int>>{{24, 128}, {256, 128}, {8, 8}, {128, 0}, {128, 513}}) {
    const std::string why = gpu::recurrence_unsupported(K, V);
    EXPECT_FALSE(why.empty()) << K << " x " << V;
    EXPECT_EQ(why.find('\n'), std::string::npos);
    EXPECT_THROW(gpu::DeviceRecurrence(1, K, V, true, 1.0, nullptr), UsageError) << K << " x " << V;
  }
  for (const auto& [K, V] : std::vector<std::pair<int, int>>{{16, 1}, {32, 13}, {64, 200}, {128, 128}, {128, 512}})
    EXPECT_EQ(gpu::recurrence_unsupported(K, V), "") << K << " x " << V;
}

}  // namespace
}  // namespace chunkinv
