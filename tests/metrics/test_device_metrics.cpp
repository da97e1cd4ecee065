// The gold and the metrics on the GPU (metrics/device_metrics.hpp) against
// compute_gold, evaluate() and evaluate_reference(), bit for bit (every NaN
// equals every NaN: payloads are not portable).
//
// The same per-block programs also run on the CPU here (HostBlock: the
// threads of a block one after another, a phase at a time), so that their
// layout and indexing are checked without a GPU; the GPU tests run the
// kernels on the same inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/fp.hpp"
#include "gpu/gpu_test_common.hpp"
#include "gpu/pack.hpp"
#include "inputs/family.hpp"
#include "methods/method.hpp"
#include "metrics/device_metrics.hpp"
#include "metrics/metric_ids.hpp"
#include "metrics/device_metrics_blocks.hpp"
#include "metrics/metrics.hpp"
#include "paths/gold/gold.hpp"

#ifdef CHUNKINV_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace chunkinv;
using gputest::TestRng;

namespace {

// ---- The programs on the CPU ----------------------------------------------

struct HostBlock {
  int threads;

  template <class F>
  void each(F&& f) const {
    for (int t = 0; t < threads; ++t) f(t);
  }
  template <class V>
  struct Many {
    std::vector<V> v;
    V& operator[](int t) { return v[size_t(t)]; }
  };
  template <class V>
  Many<V> local() const {
    return {std::vector<V>(size_t(threads))};
  }
  void set(int* p) const { *p = 1; }
  void set_bits(int* p, int v) const { *p |= v; }
  void add(int* p, int v) const { *p += v; }
  void max(unsigned long long* p, unsigned long long v) const {
    if (v > *p) *p = v;
  }
};

// Samples a fast program took and left.
struct FastCounts {
  long fast = 0, slow = 0;
};
FastCounts gold_reference_counts;  // the gold's tail's, over the whole test run

template <bool kChannel>
void gold_on_host_as(const gpu::GoldOnDevice& a) {
  using namespace gpu::blocks;
  const int C = a.chunk;
  std::vector<double> sm(gold_smem_doubles(C, kChannel), -7.0);  // junk: nothing may read it unwritten
  BlockFlags fl{};
  const HostBlock blk{block_threads(C)};
  std::vector<int> slow(size_t(a.n), -1);
  for (long s = 0; s < a.n; ++s) {
    if (!with_gold_shape(C, [&]<int kTiles, bool kColumns, bool kTensor>() {
          gold_program<kTiles, kChannel, kColumns, kTensor && !kChannel>(blk, a, s, sm.data(), &fl, slow.data());
        }))
      FAIL() << "tiles per thread " << tiles_per_thread(C) << ", columns " << gold_columns(C);
    if (!a.reference) continue;
    // As gold_on_device runs it: the samples the gold's tail leaves go to the full reference program.
    if (slow[size_t(s)]) {
      const gpu::GoldRead g{a.n, C, a.gold_l, a.gold_inv};
      std::vector<double> rs(reference_smem_doubles(C), -7.0);
      reference_program(blk, g, a.reference, s, rs.data(), &fl);
    }
    ++(slow[size_t(s)] ? gold_reference_counts.slow : gold_reference_counts.fast);
  }
}

void gold_on_host(const gpu::GoldOnDevice& a) {
  if (a.gate_width != 1) gold_on_host_as<true>(a);
  else gold_on_host_as<false>(a);
}

FastCounts fast_counts;  // the fast metrics program's, over the whole test run
long deferred_count = 0;  // samples whose inv_method_only it left to method_fast_program

// As metrics_on_device runs them: the fast program, then the method program
// on the samples whose inv_method_only it defers, then the full one on the
// samples it leaves.
void metrics_on_host(const gpu::GoldRead& g, const gpu::PathOnDevice& p, double* out) {
  using namespace gpu::blocks;
  // Each program its own shared memory, sized as the device's launch sizes it.
  std::vector<double> sm(metrics_smem_doubles(g.chunk), -7.0);
  std::vector<double> fast(fast_metrics_smem_doubles(g.chunk, fast_with_s1(g, p)), -7.0);
  std::vector<double> method(method_smem_doubles(g.chunk), -7.0);
  BlockFlags fl{};
  const HostBlock blk{block_threads(g.chunk)};
  std::vector<int> slow(size_t(g.n), -1), defer(size_t(g.n), -1);
  const bool defers = fast_defers(g, p);
  for (long s = 0; s < g.n; ++s) {
    with_fast_metrics_shape(g.chunk, [&]<bool kStaged, bool kTiles>() {
      metrics_fast_program<kStaged, kTiles>(blk, g, p, out, s, fast.data(), &fl, slow.data(),
                                            defers ? defer.data() : nullptr);
    });
    if (defers && defer[s]) {
      method_fast_program(blk, g, p, out, s, method.data());
      ++deferred_count;
    }
    if (slow[s]) metrics_program(blk, g, p, out, s, sm.data(), &fl);
    ++(slow[s] ? fast_counts.slow : fast_counts.fast);
  }
}

// As metrics_pair_on_device runs them: the pair program, then the full one on each entry it leaves.
FastCounts pair_counts;
void pair_on_host(const gpu::GoldRead& g, const gpu::PathOnDevice& pk, const gpu::PathOnDevice& pg, double* out_k,
                  double* out_g) {
  using namespace gpu::blocks;
  const int C = g.chunk;
  std::vector<double> sm(std::max(metrics_smem_doubles(C), pair_metrics_smem_doubles(C)), -7.0);
  BlockFlags fl{};
  const HostBlock blk{block_threads(C)};
  std::vector<int> slow_k(size_t(g.n), -1), slow_g(size_t(g.n), -1);
  for (long s = 0; s < g.n; ++s) {
    if (fast_stages_gold(C))
      pair_fast_program<true>(blk, g, pk, pg, out_k, out_g, s, sm.data(), &fl, slow_k.data(), slow_g.data());
    else
      pair_fast_program<false>(blk, g, pk, pg, out_k, out_g, s, sm.data(), &fl, slow_k.data(), slow_g.data());
    if (slow_k[size_t(s)]) metrics_program(blk, g, pk, out_k, s, sm.data(), &fl);
    if (slow_g[size_t(s)]) metrics_program(blk, g, pg, out_g, s, sm.data(), &fl);
    for (int slow : {slow_k[size_t(s)], slow_g[size_t(s)]}) ++(slow ? pair_counts.slow : pair_counts.fast);
  }
}

// The full program alone.
void full_metrics_on_host(const gpu::GoldRead& g, const gpu::PathOnDevice& p, double* out) {
  using namespace gpu::blocks;
  std::vector<double> sm(metrics_smem_doubles(g.chunk), -7.0);
  BlockFlags fl{};
  for (long s = 0; s < g.n; ++s) metrics_program(HostBlock{block_threads(g.chunk)}, g, p, out, s, sm.data(), &fl);
}

// The reference programs as metrics_on_device runs them (fast, then full where left), or the full one alone.
FastCounts reference_counts;
void reference_on_host(const gpu::GoldRead& g, double* out, bool full_only) {
  using namespace gpu::blocks;
  std::vector<double> sm(std::max(reference_smem_doubles(g.chunk), fast_reference_smem_doubles(g.chunk)), -7.0);
  BlockFlags fl{};
  const HostBlock blk{block_threads(g.chunk)};
  std::vector<int> slow(size_t(g.n), 1);
  for (long s = 0; s < g.n; ++s) {
    if (!full_only) reference_fast_program(blk, g, out, s, sm.data(), &fl, slow.data());
    if (slow[s]) reference_program(blk, g, out, s, sm.data(), &fl);
    if (!full_only) ++(slow[s] ? reference_counts.slow : reference_counts.fast);
  }
}

// ---- Inputs ----------------------------------------------------------------

// n samples of one shape, packed as gold_on_device reads them.
struct Batch {
  int C = 0, d = 0, w = 1;
  std::vector<Sample> samples;
  std::vector<uint16_t> keys;
  std::vector<double> g, beta;
  std::string what;

  void pack() {
    keys.clear();
    g.clear();
    beta.clear();
    for (const Sample& s : samples) {
      for (double k : s.keys) keys.push_back(gpu::exact_bf16_bits(k));
      g.insert(g.end(), s.g.begin(), s.g.end());
      beta.insert(beta.end(), s.beta.begin(), s.beta.end());
    }
  }
  int n() const { return int(samples.size()); }
};

Batch family_batch(const std::string& family, bool channel, int C, int d, int n, uint64_t seed,
                   const nlohmann::json& params = nlohmann::json::object()) {
  Configuration c = gputest::config(family, C, d);
  for (auto it = params.begin(); it != params.end(); ++it) c.params[it.key()] = it.value();
  if (channel) c.params["gating"] = "channel";
  find_family(family).complete(c);
  find_family(family).validate(c);
  Batch b;
  b.C = C;
  b.d = d;
  b.samples = gputest::make_samples(c, n, seed);
  b.w = b.samples[0].gate_width();
  b.what = family + (channel ? " gating=channel" : "") + " " + params.dump() + " C=" + std::to_string(C) +
           " d=" + std::to_string(d);
  b.pack();
  return b;
}

// n hand-made samples: fill(s, i, rng) draws sample i's keys, g and beta.
template <class Fill>
Batch hand_made_batch(const std::string& what, bool channel, int C, int d, int n, uint64_t seed, const Fill& fill) {
  TestRng rng(seed);
  Batch b;
  b.C = C;
  b.d = d;
  for (int i = 0; i < n; ++i) {
    Sample s;
    s.chunk = C;
    s.dim = d;
    s.gating = channel ? Gating::kChannel : Gating::kToken;
    fill(s, i, rng);
    b.samples.push_back(std::move(s));
  }
  b.w = b.samples[0].gate_width();
  b.what = what + (channel ? " gating=channel" : "") + " C=" + std::to_string(C) + " d=" + std::to_string(d);
  b.pack();
  return b;
}

// Hand-made samples at the edges: huge and tiny BF16 keys, gates of 0,
// -1e-300, -800 (subnormal and zero decays), -inf and NaN (NaN in L),
// beta outside (0, 1).
Batch extreme_batch(bool channel, int C, int d, int n, uint64_t seed) {
  return hand_made_batch("extreme", channel, C, d, n, seed, [&](Sample& s, int i, TestRng& rng) {
    const double kscale = std::pow(10.0, rng.uniform(-38.0, 37.0) * (i % 3 == 0));
    for (int e = 0; e < C * d; ++e) s.keys.push_back(bf16(rng.normal() * kscale));
    const int gw = s.gate_width();
    for (int e = 0; e < C * gw; ++e) {
      const int k = rng.integer(20);
      double v = -rng.uniform(0.0, 3.0);
      if (k == 0) v = 0.0;
      else if (k == 1) v = -1e-300;
      else if (k == 2) v = -800.0;
      else if (k == 3) v = -rng.uniform(0.0, 745.0);
      else if (k == 4 && i % 4 == 3) v = -INFINITY;
      else if (k == 5 && i % 8 == 7) v = NAN;
      s.g.push_back(v);
    }
    for (int t = 0; t < C; ++t) s.beta.push_back(i % 5 == 4 ? rng.normal() * 1e3 : rng.uniform());
  });
}

// Keys whose pairs the gold's tensor-core dot products must leave to the
// sum in channel order (device_metrics_blocks.hpp, RowBits): keys of
// magnitudes 2^-60 to 2^20 in one row (partial sums that round), a row of
// zeros and two orthogonal rows (dot products of exactly zero), and in
// some samples an infinite key (inf and NaN in L); per-token gates.
Batch wide_batch(int C, int d, int n, uint64_t seed) {
  return hand_made_batch("wide keys", false, C, d, n, seed, [&](Sample& s, int i, TestRng& rng) {
    for (int r = 0; r < C; ++r)
      for (int c = 0; c < d; ++c) {
        double k = bf16(rng.normal() * std::exp2(std::floor(rng.uniform(-60.0, 20.0))));
        if (r == 1 && i % 2 == 1) k = 0.0;
        if (r == 2 || r == 3) k = c == r - 2 ? 1.0 : 0.0;
        if (r == 4 && c == 0 && i % 3 == 2) k = INFINITY;
        s.keys.push_back(k);
      }
    for (int t = 0; t < C; ++t) s.g.push_back(-rng.uniform(0.0, 3.0));
    for (int t = 0; t < C; ++t) s.beta.push_back(rng.uniform());
  });
}

std::vector<Batch> gold_batches(int n) {
  std::vector<Batch> v;
  uint64_t seed = 101;
  for (int C : {2, 5, 16, 20, 32, 33, 48, 64})  // every shape of with_gold_shape
    for (int d : {1, 7, 128}) {
      for (bool channel : {false, true}) {
        v.push_back(family_batch("model_like", channel, C, d, n, seed++));
        v.push_back(family_batch("floor", channel, C, d, n, seed++, {{"decay_floor", -40.0}}));
        v.push_back(extreme_batch(channel, C, d, n, seed++));
      }
      v.push_back(family_batch("weak_decay_correlated", false, C, d, n, seed++));
      v.push_back(wide_batch(C, d, n, seed++));
    }
  return v;
}

std::vector<GoldOutput> cpu_gold(const Batch& b) {
  std::vector<GoldOutput> v;
  for (const Sample& s : b.samples) v.push_back(compute_gold(s));
  return v;
}

// Compares the gold's outputs with compute_gold's; returns the entries that differ.
long gold_differing(const Batch& b, const std::vector<GoldOutput>& gold, const std::vector<double>& l,
                    const std::vector<double>& inv, const std::vector<uint16_t>& l16) {
  long differing = 0;
  const size_t csq = size_t(b.C) * b.C;
  for (int s = 0; s < b.n(); ++s)
    for (int r = 0; r < b.C; ++r)
      for (int c = 0; c < b.C; ++c) {
        const size_t e = s * csq + size_t(r) * b.C + c;
        differing += !gputest::same_double(l[e], gold[s].L(r, c));
        differing += !gputest::same_double(inv[e], gold[s].inv(r, c));
        differing += l16[e] != gpu::fp16_bits_rn(gold[s].L(r, c));  // as the kernel path packs its gold_l
      }
  return differing;
}

// A path's outputs for the metrics, as the kernel path holds them: BF16
// decays, FP16 L and inverses, highest_power and power_max per run. Made
// from the gold, with noise, and per sample kind (s % 8) with one special
// entry: inf in L, NaN or an FP16 overflow in INV, inf in the gold-L run's
// INV with an FP16 subnormal in L, nonzero junk above L's diagonal.
struct PathArrays {
  int decays = 0;
  std::vector<uint16_t> decay, inv_decay, l, inv, gold_l_inv;
  std::vector<int> hp, gold_hp;
  std::vector<float> pmax, gold_pmax;
};

PathArrays path_arrays(const Batch& b, const std::vector<GoldOutput>& gold, uint64_t seed) {
  TestRng rng(seed);
  PathArrays p;
  const int C = b.C;
  const size_t csq = size_t(C) * C;
  p.decays = C * b.w;
  auto bf = [&](double v) {
    const int k = rng.integer(30);
    if (k == 0) v = 0.0;
    if (k == 1) v = -0.0;
    if (k == 2) v = INFINITY;
    if (k == 3) v = NAN;
    if (k == 4) v = 1e39;  // overflows BF16
    const double r = bf16(v);
    return std::isnan(r) ? uint16_t(0x7FC0) : bf16_bits(r);
  };
  for (int s = 0; s < b.n(); ++s) {
    for (int e = 0; e < p.decays; ++e) {
      p.decay.push_back(bf(std::exp(-rng.uniform(0.0, 100.0))));
      p.inv_decay.push_back(bf(std::exp(rng.uniform(0.0, 100.0))));
    }
    const int kind = s % 8;
    const double rel = kind == 0 ? 0.0 : kind == 7 ? 0.1 : 1e-3;
    auto noisy = [&](double v) { return gpu::fp16_bits_rn(v * (1.0 + rel * rng.normal())); };
    for (int r = 0; r < C; ++r)
      for (int c = 0; c < C; ++c) {
        p.l.push_back(c < r ? noisy(gold[s].L(r, c)) : 0);
        p.inv.push_back(noisy(gold[s].inv(r, c)));
        p.gold_l_inv.push_back(noisy(gold[s].inv(r, c)));
      }
    const size_t at = s * csq, any = at + size_t(rng.integer(int(csq)));
    const size_t lower = C > 1 ? at + size_t(1 + rng.integer(C - 1)) * C : at;  // row >= 1, column 0
    if (kind == 2) p.l[lower] = 0x7C00;                                      // inf
    if (kind == 3) p.inv[any] = 0x7E00;                                      // NaN
    if (kind == 4) p.inv[any] = gpu::fp16_bits_rn(-70000.0);                 // overflow: -inf
    if (kind == 5) p.gold_l_inv[any] = 0xFC00, p.l[lower] = 0x0011;          // -inf; a subnormal
    if (kind == 6) p.l[at + C - 1] = gpu::fp16_bits_rn(0.25);               // above the diagonal
    p.hp.push_back(1 << rng.integer(7));
    p.gold_hp.push_back(1 << rng.integer(7));
    const float pm[] = {0.5f, 65504.0f, INFINITY, NAN, 3.0e-8f};
    p.pmax.push_back(pm[rng.integer(5)]);
    p.gold_pmax.push_back(pm[rng.integer(5)]);
  }
  return p;
}

// The PathOutput the kernel path's run_batch unpacks from these arrays.
PathOutput path_output(const PathArrays& p, int C, int s, bool gold_path, const GoldOutput& gold, bool gold_run) {
  const size_t csq = size_t(C) * C;
  PathOutput o;
  if (gold_path) {
    o.l.L = gold.L;  // the gold path's LForm: no decays, the gold L
  } else {
    gpu::unpack_bf16_vector(o.l.decay, p.decay.data() + size_t(s) * p.decays, p.decays);
    gpu::unpack_bf16_vector(o.l.inv_decay, p.inv_decay.data() + size_t(s) * p.decays, p.decays);
    gpu::unpack_fp16_matrix(o.l.L, p.l.data() + s * csq, C);
  }
  gpu::unpack_fp16_matrix(o.on_path_l.inv, p.inv.data() + s * csq, C);
  o.on_path_l.diagnostics = {double(p.hp[s]), double(p.pmax[s])};
  if (gold_run) {
    gpu::unpack_fp16_matrix(o.on_gold_l.inv, p.gold_l_inv.data() + s * csq, C);
    o.on_gold_l.diagnostics = {double(p.gold_hp[s]), double(p.gold_pmax[s])};
  }
  return o;
}

std::vector<double> flat(const std::vector<GoldOutput>& gold, bool inv) {
  std::vector<double> v;
  for (const GoldOutput& g : gold) {
    const Mat& m = inv ? g.inv : g.L;
    v.insert(v.end(), m.data(), m.data() + m.size());
  }
  return v;
}

// The three variants of a path entry: a kernel-like path, the same without
// a run on the gold L, and the gold path's own (FP64 L, no decays).
enum class Variant { kPath, kNoGoldRun, kGoldPath };
constexpr Variant kVariants[] = {Variant::kPath, Variant::kNoGoldRun, Variant::kGoldPath};

gpu::PathOnDevice path_view(const PathArrays& p, Variant v, const double* gold_l) {
  gpu::PathOnDevice d;
  d.inv = p.inv.data();
  d.highest_power = p.hp.data();
  d.power_max = p.pmax.data();
  if (v == Variant::kGoldPath) {
    d.l_f64 = gold_l;
  } else {
    d.decays = p.decays;
    d.decay = p.decay.data();
    d.inv_decay = p.inv_decay.data();
    d.l_fp16 = p.l.data();
  }
  if (v != Variant::kNoGoldRun) {
    d.gold_l_inv = p.gold_l_inv.data();
    d.gold_l_highest_power = p.gold_hp.data();
    d.gold_l_power_max = p.gold_pmax.data();
  }
  return d;
}

std::vector<double> cpu_metrics(const PathArrays& p, const std::vector<GoldOutput>& gold, int C, Variant v) {
  const MethodSpec& neumann = find_method("neumann");
  const size_t M = method_metrics(neumann).size();
  std::vector<double> out(gold.size() * M);
  for (size_t s = 0; s < gold.size(); ++s)
    evaluate(neumann, gold[s], path_output(p, C, int(s), v == Variant::kGoldPath, gold[s], v != Variant::kNoGoldRun),
             out.data() + s * M);
  return out;
}

// The gold path's entry as the GPU pipeline holds it beside the kernel
// path's: its INV is the run on the gold L (and so are its diagnostics).
PathArrays gold_path_arrays(const PathArrays& p) {
  PathArrays q = p;
  q.inv = p.gold_l_inv;
  q.hp = p.gold_hp;
  q.pmax = p.gold_pmax;
  return q;
}
gpu::PathOnDevice gold_path_view(const gpu::PathOnDevice& kernel, const double* gold_l) {
  gpu::PathOnDevice d;
  d.l_f64 = gold_l;
  d.inv = kernel.gold_l_inv;
  d.highest_power = kernel.gold_l_highest_power;
  d.power_max = kernel.gold_l_power_max;
  d.gold_l_inv = kernel.gold_l_inv;
  d.gold_l_highest_power = kernel.gold_l_highest_power;
  d.gold_l_power_max = kernel.gold_l_power_max;
  return d;
}

std::vector<double> cpu_reference(const std::vector<GoldOutput>& gold) {
  std::vector<double> out(gold.size() * gpu::kReferenceMetricCount);
  for (size_t s = 0; s < gold.size(); ++s) evaluate_reference(gold[s], out.data() + s * gpu::kReferenceMetricCount);
  return out;
}

long values_differing(const std::vector<double>& a, const std::vector<double>& b, const std::string& what, int M) {
  long n = 0;
  for (size_t e = 0; e < a.size(); ++e)
    if (!gputest::same_double(a[e], b[e])) {
      if (++n <= 5)
        ADD_FAILURE() << what << ": sample " << e / M << " metric " << e % M << ": " << a[e] << " vs CPU " << b[e];
    }
  return n;
}

std::vector<Batch> metric_batches(int n) {
  std::vector<Batch> v;
  uint64_t seed = 501;
  for (int C : {2, 5, 7, 16, 33, 64}) {
    v.push_back(family_batch("model_like", false, C, 128, n, seed++));
    v.push_back(family_batch("model_like", true, C, 7, n, seed++));
    v.push_back(extreme_batch(false, C, 16, n, seed++));
  }
  return v;
}

}  // namespace

// The bound under which the gold takes the tensor cores' dot products
// (device_metrics_blocks.hpp, RowBits): wherever it holds, every order of
// the sum gives the channel order's bits. Rows of BF16 keys whose
// magnitudes span 0 to 2^-E (E up to 50, zeros too) put pairs on both
// sides of it; where it fails, some orders do differ, so the rows reach
// the sums that round and a laxer bound would be caught.
TEST(DeviceMetrics, TensorCoreBoundLeavesOnlyExactSums) {
  TestRng rng(77);
  long held = 0, failed = 0, failed_and_differ = 0;
  for (int trial = 0; trial < 40000; ++trial) {
    const int d = std::array{1, 4, 7, 32, 128}[trial % 5];
    std::vector<uint16_t> row[2];
    for (auto& r : row) {
      const double span = std::floor(rng.uniform(0.0, 50.0));
      for (int c = 0; c < d; ++c) {
        double k = bf16(rng.normal() * std::exp2(-std::floor(rng.uniform(0.0, span + 1.0))));
        if (rng.integer(16) == 0) k = 0.0;
        r.push_back(bf16_bits(k));
      }
    }
    const bool exact = gpu::blocks::dmma_exact(gpu::blocks::dmma_row_width(row[0].data(), d),
                                               gpu::blocks::dmma_row_width(row[1].data(), d), d);
    // The channel order, the reverse, even and odd channels apart, and groups of 4 summed first.
    auto p = [&](int c) { return fp64::bf16_value(row[0][size_t(c)]) * fp64::bf16_value(row[1][size_t(c)]); };
    const double forward = gpu::blocks::exact_dot(row[0].data(), row[1].data(), d);
    double reverse = 0.0, even = 0.0, odd = 0.0, grouped = 0.0;
    for (int c = d - 1; c >= 0; --c) reverse += p(c);
    for (int c = 0; c < d; ++c) (c % 2 ? odd : even) += p(c);
    for (int c = 0; c < d; c += 4) {
      double g = 0.0;
      for (int u = c; u < std::min(d, c + 4); ++u) g += p(u);
      grouped += g;
    }
    const bool same = gputest::same_double(forward, reverse) && gputest::same_double(forward, even + odd) &&
                      gputest::same_double(forward, grouped);
    if (exact) {
      ++held;
      if (!same) ADD_FAILURE() << "d = " << d << ": the bound holds, and an order differs from the channel order's "
                               << forward;
    } else {
      ++failed;
      failed_and_differ += !same;
    }
  }
  std::printf("tensor-core bound: held for %ld pairs, failed for %ld (%ld of them with sums whose order matters)\n",
              held, failed, failed_and_differ);
  EXPECT_GT(held, 10000);
  EXPECT_GT(failed_and_differ, 100);
}

// How often the bound sends a pair of model_like keys back to the channel
// order: rarely, or the tensor cores would save little (each such pair is
// one thread's serial sum from device memory).
TEST(DeviceMetrics, TensorCoreBoundTakesAlmostEveryModelLikePair) {
  const int C = 64, d = 128, n = 4000;
  Configuration c = gputest::config("model_like", C, d);
  find_family("model_like").complete(c);
  long pairs = 0, again = 0, samples = 0;
  for (int i = 0; i < n; ++i) {
    const Sample s = find_family("model_like").make(c, 0, uint64_t(i));
    std::vector<double> w(C);
    for (int r = 0; r < C; ++r) {
      gpu::blocks::RowBits b;
      for (int k = 0; k < d; ++k) b.add(bf16_bits(s.keys[size_t(r) * d + size_t(k)]));
      w[size_t(r)] = b.width();
    }
    long here = 0;
    for (int a = 1; a < C; ++a)
      for (int b = 0; b < a; ++b) here += !gpu::blocks::dmma_exact(w[size_t(a)], w[size_t(b)], d);
    pairs += C * (C - 1) / 2;
    again += here;
    samples += here > 0;
  }
  std::printf("model_like C = %d, d = %d, %d samples (seed 0): %ld of %ld pairs (%.3g%%) summed again in channel "
              "order, in %ld samples\n",
              C, d, n, again, pairs, 100.0 * double(again) / double(pairs), samples);
  EXPECT_LT(again * 500, pairs);  // below 0.2%
}

// Every chunk the tensor cores take fits its instantiation: a warp's
// tiles within the accumulators it has, a thread for each staged key row.
TEST(DeviceMetrics, TensorCoreShapesFitTheirInstantiations) {
  using namespace gpu::blocks;
  int taken = 0;
  for (int C = 2; C <= gpu::kMaxMetricsChunk; ++C) {
    EXPECT_TRUE(with_gold_shape(C, [&]<int kTiles, bool kColumns, bool kTensor>() {
      EXPECT_EQ(kTensor, gold_tensor_cores(C)) << "C = " << C;
      if (!kTensor) return;
      ++taken;
      EXPECT_LE(dmma_tiles_per_warp(C), dmma_max_tiles(kTiles, kColumns)) << "C = " << C;
      EXPECT_LE(8 * dmma_row_blocks(C), block_threads(C)) << "C = " << C;
      EXPECT_EQ(dmma_stride(C) % 16, 4) << "C = " << C;
      EXPECT_GE(dmma_stride(C), 8 * dmma_row_blocks(C)) << "C = " << C;
      EXPECT_LE(C, 2 * reference_slab_stride(C)) << "C = " << C;  // the rows' widths, in the slab before m.acc
    })) << "C = " << C;
  }
  EXPECT_EQ(taken, gpu::kMaxMetricsChunk - 16);
}

// The gold's solve shares each column's panels between two threads, whose
// sums wait for the panel's rows in the reference's slab (before its sums,
// which the gold zeroes after the solve).
TEST(DeviceMetrics, SolveSumsFitTheirThreadsAndSpace) {
  using namespace gpu::blocks;
  for (int C = 1; C <= gpu::kMaxMetricsChunk; ++C) {
    EXPECT_GE(block_threads(C), 2 * C) << "C = " << C;
    EXPECT_LE(size_t(4 * C), reference_slab_doubles(C)) << "C = " << C;
  }
}

// The residual's tensor-core pass (residual_pass): a warp holds at most two
// tiles of a row block, and two rows' squared errors (2C - 1 at most) fit
// the terms of every program that runs it, at every C and block size.
TEST(DeviceMetrics, ResidualPassFitsItsTilesAndTerms) {
  using namespace gpu::blocks;
  for (int C = 2; C <= gpu::kMaxMetricsChunk; ++C) {
    EXPECT_TRUE(residual_tiles_fit(C, block_threads(C))) << "C = " << C;
    EXPECT_GE(reference_slab_stride(C), 2 * C - 1) << "C = " << C;  // the gold's and the reference's
    for (bool s1 : {false, true}) {
      EXPECT_GE(fast_slab_stride(C, s1), 2 * C - 1) << "C = " << C;
    }
    if (gpu::pair_pays(C)) {
      EXPECT_GE(slab_stride(C), 2 * C - 1) << "C = " << C;
    }
    // Its rows a step for the terms each caller gives it (the gold's tail and
    // the reference program two reference slabs, the fast program its eight):
    // 8, 4 or 2, and every step's entries within them.
    for (bool s1 : {false, true}) {
      for (int cap : {2 * reference_slab_stride(C), kFastSums * fast_slab_stride(C, s1)}) {
        const int n = residual_pass_rows(C, cap);
        EXPECT_TRUE(n == 8 || n == 4 || n == 2) << "C = " << C;
        for (int r0 = 0; r0 < C; r0 += n)
          EXPECT_LE(packed_at(r0 + n < C ? r0 + n : C, 0) - packed_at(r0, 0), cap) << "C = " << C << ", rows " << r0;
      }
    }
  }
  // At C = 64: eight rows a step in the fast program (8 steps), four in the gold's tail (16).
  EXPECT_EQ(residual_pass_rows(64, kFastSums * fast_slab_stride(64, false)), 8);
  EXPECT_EQ(residual_pass_rows(64, 2 * reference_slab_stride(64)), 4);
}

// The gold's X by columns (C > 32): each column from the panel of its
// diagonal, four columns interleaved; every kept entry has its own double
// of the space; six blocks of C = 64 (per-token gates) fit an sm_90
// multiprocessor's 228 KB, with its 1 KB a block.
TEST(DeviceMetrics, GoldColumnsTileTheirSpace) {
  using namespace gpu::blocks;
  for (int C = 33; C <= gpu::kMaxMetricsChunk; ++C) {
    std::vector<int> owner(x_doubles(C), -1);
    long kept = 0;
    for (int c = 0; c < C; ++c) {
      EXPECT_TRUE(x_kept(c) <= c && x_kept(c) % 4 == 0 && x_kept(c) >= x_first(c));
      for (int i = x_kept(c); i < C; ++i, ++kept) {
        const long at = long(x_origin(C, c)) + 4L * i;
        ASSERT_TRUE(at >= 0 && at < long(owner.size())) << "C = " << C << ", (" << i << ", " << c << ")";
        EXPECT_EQ(owner[size_t(at)], -1) << "C = " << C << ", (" << i << ", " << c << ") shares " << at;
        owner[size_t(at)] = i * C + c;
      }
    }
    // Nothing but the groups' padding and the slots of a last group's missing columns left over.
    const long groups = (C + 3) / 4, last = C - 4 * (groups - 1);  // the last group's columns, and rows
    EXPECT_EQ(long(x_doubles(C)), kept + (groups - 1) * x_pad(C) + 4 * last - last * last) << "C = " << C;
  }
  EXPECT_LE(6 * (gold_smem_doubles(64, false) * sizeof(double) + 1024), size_t(228) * 1024);
}

// The banks of the gold's X (32 banks of 4 bytes; a warp's access takes,
// in each bank, a wavefront for each distinct word): the solve's lanes,
// one a column of 32 consecutive, read or write one row; the writing
// phase's lanes read consecutive columns of one row. Either takes
// ceil(lanes / 16) wavefronts, the fewest 8-byte accesses can, at every
// C > 32 (columns end to end took up to 4 at C = 64: 30% excess
// wavefronts in the gold, run 87).
TEST(DeviceMetrics, GoldColumnsSpreadOverTheBanks) {
  using namespace gpu::blocks;
  // Wavefronts of the accesses to X's doubles at `at`.
  auto wavefronts = [](const std::vector<long>& at) {
    std::vector<std::vector<long>> pair(16);
    for (long a : at) {
      auto& p = pair[size_t(a % 16)];
      if (std::find(p.begin(), p.end(), a) == p.end()) p.push_back(a);
    }
    size_t most = 0;
    for (const auto& p : pair) most = std::max(most, p.size());
    return long(most);
  };
  long accesses = 0;
  for (int C = 33; C <= gpu::kMaxMetricsChunk; ++C) {
    for (int i = 0; i < C; ++i) {
      for (int c0 = 0; c0 < C; c0 += 32) {  // the solve: a warp's columns on row i
        std::vector<long> at;
        for (int c = c0; c < std::min(C, c0 + 32); ++c)
          if (i >= x_kept(c)) at.push_back(long(x_origin(C, c)) + 4L * i);
        EXPECT_EQ(wavefronts(at), (long(at.size()) + 15) / 16) << "C = " << C << ", the solve, row " << i << ", columns from " << c0;
        ++accesses;
      }
      for (int j0 = 0; j0 <= i; ++j0) {  // the writing phase: consecutive kept columns of row i
        std::vector<long> at;
        for (int j = j0; j < std::min(C, j0 + 32); ++j)
          if (i >= x_kept(j)) at.push_back(long(x_origin(C, j)) + 4L * i);
        EXPECT_EQ(wavefronts(at), (long(at.size()) + 15) / 16) << "C = " << C << ", writing, row " << i << ", columns from " << j0;
        ++accesses;
      }
    }
  }
  EXPECT_GT(accesses, 0);
}

TEST(DeviceMetrics, MetricSetsHaveTheCountsTheDeviceWrites) {
  EXPECT_EQ(method_metrics(find_method("neumann")).size(), size_t(gpu::kNeumannMetricCount));
  EXPECT_EQ(reference_metrics().size(), size_t(gpu::kReferenceMetricCount));
}

// The device programs write each value at its id: every id names the metric
// the host's sets hold at that position (every method's generic part too).
TEST(DeviceMetrics, EveryIdNamesItsMetric) {
  namespace id = metric_id;
  const std::pair<int, const char*> neumann[] = {
      {id::kDecayZeros, "decay_zeros"},
      {id::kInvDecayNonfinite, "inv_decay_nonfinite"},
      {id::kLFinite, "l_finite"},
      {id::kInvFinite, "inv_finite"},
      {id::kLRelRmse, "l_rel_rmse"},
      {id::kInvTotalRelRmse, "inv_total_rel_rmse"},
      {id::kInvMethodOnlyRelRmse, "inv_method_only_rel_rmse"},
      {id::kInvGoldLRelRmse, "inv_gold_l_rel_rmse"},
      {id::kInverseResidual, "inverse_residual"},
      {id::kHighestPower, "highest_power"},
      {id::kPowerMax, "power_max"},
      {id::kGoldLHighestPower, "gold_l_highest_power"},
      {id::kGoldLPowerMax, "gold_l_power_max"},
  };
  EXPECT_EQ(std::size(neumann), size_t(id::kNeumannCount));
  for (const auto& [at, name] : neumann) EXPECT_STREQ(method_metrics(find_method("neumann")).infos.at(at).name, name);
  for (const MethodSpec* m : methods())
    for (int at = 0; at < id::kGenericCount; ++at)
      EXPECT_STREQ(method_metrics(*m).infos.at(at).name, neumann[at].second) << m->name;
  const std::pair<int, const char*> reference[] = {{id::kRefLFinite, "l_finite"},
                                                   {id::kRefInvFinite, "inv_finite"},
                                                   {id::kRefInverseResidual, "inverse_residual"},
                                                   {id::kRefInvMaxAbs, "inv_max_abs"}};
  EXPECT_EQ(std::size(reference), size_t(id::kReferenceCount));
  for (const auto& [at, name] : reference) EXPECT_STREQ(reference_metrics().infos.at(at).name, name);
}

// ---- The block programs on the CPU -----------------------------------------

TEST(DeviceMetrics, GoldProgramOnTheCpuIsComputeGoldBitForBit) {
  long differing = 0, entries = 0;
  for (const Batch& b : gold_batches(8)) {
    const std::vector<GoldOutput> gold = cpu_gold(b);
    const size_t csq = size_t(b.C) * b.C;
    std::vector<double> l(b.n() * csq, -1.0), inv(b.n() * csq, -1.0);
    std::vector<uint16_t> l16(b.n() * csq);
    gpu::GoldOnDevice a{b.n(), b.C, b.d, b.w, b.keys.data(), b.g.data(), b.beta.data(), l.data(), inv.data(), l16.data()};
    gold_on_host(a);
    const long d = gold_differing(b, gold, l, inv, l16);
    if (d) ADD_FAILURE() << b.what << ": " << d << " entries differ";
    differing += d;
    entries += 3 * long(l.size());
    // Again with the reference in the gold's tail: the same gold, and evaluate_reference's values.
    std::vector<double> ref(size_t(b.n()) * gpu::kReferenceMetricCount, -1.0);
    std::fill(l.begin(), l.end(), -1.0);
    std::fill(inv.begin(), inv.end(), -1.0);
    a.reference = ref.data();
    gold_on_host(a);
    const long dr = gold_differing(b, gold, l, inv, l16) +
                    values_differing(ref, cpu_reference(gold), b.what + " (reference)", gpu::kReferenceMetricCount);
    differing += dr;
    entries += 3 * long(l.size()) + long(ref.size());
  }
  std::printf("gold program on the CPU: %ld of %ld entries differ from compute_gold and evaluate_reference "
              "(the reference's fast rules took %ld samples, left %ld)\n",
              differing, entries, gold_reference_counts.fast, gold_reference_counts.slow);
  EXPECT_GT(gold_reference_counts.fast, gold_reference_counts.slow);
  EXPECT_GT(gold_reference_counts.slow, 0);
  EXPECT_EQ(differing, 0);
}

TEST(DeviceMetrics, MetricProgramsOnTheCpuAreEvaluateBitForBit) {
  long differing = 0, values = 0, method_only_finite = 0, lean_nan = 0, lean_values = 0, unread_fast = 0,
       unread_samples = 0;
  for (const Batch& b : metric_batches(16)) {
    const std::vector<GoldOutput> gold = cpu_gold(b);
    const std::vector<double> gl = flat(gold, false), gi = flat(gold, true);
    const gpu::GoldRead g{b.n(), b.C, gl.data(), gi.data()};
    const PathArrays p = path_arrays(b, gold, 77 + b.C);
    for (Variant v : kVariants) {
      const std::vector<double> want = cpu_metrics(p, gold, b.C, v);
      std::vector<double> out(size_t(b.n()) * gpu::kNeumannMetricCount, -1.0);
      full_metrics_on_host(g, path_view(p, v, gl.data()), out.data());
      differing += values_differing(out, want, b.what + " (full program)", gpu::kNeumannMetricCount);
      values += long(out.size());
      std::fill(out.begin(), out.end(), -1.0);
      metrics_on_host(g, path_view(p, v, gl.data()), out.data());
      differing += values_differing(out, want, b.what, gpu::kNeumannMetricCount);
      values += long(out.size());
      for (size_t e = 6; e < out.size(); e += gpu::kNeumannMetricCount) method_only_finite += std::isfinite(out[e]);
      // Without the costlier values (run --metrics): the others unchanged,
      // those NaN where the fast program took the sample (the full program,
      // on the samples it leaves, computes them all).
      // bits: 1 l_rel_rmse (value 4), 2 method_only (6), 4 residual (8), 8 l_finite (2)
      constexpr int kLeftOut[4] = {4, 6, 8, 2};
      for (int without : {7, 2, 5, 15, 10, 13, 8}) {
        gpu::PathOnDevice lean = path_view(p, v, gl.data());
        lean.l_rel_rmse = !(without & 1);
        lean.method_only = !(without & 2);
        lean.residual = !(without & 4);
        lean.l_finite = !(without & 8);
        std::fill(out.begin(), out.end(), -1.0);
        metrics_on_host(g, lean, out.data());
        std::vector<double> masked = want;
        long nan_here = 0;
        for (size_t e = 0; e < out.size(); e += gpu::kNeumannMetricCount)
          for (int bit = 0; bit < 4; ++bit)
            if ((without >> bit & 1) && std::isnan(out[e + size_t(kLeftOut[bit])])) {
              masked[e + size_t(kLeftOut[bit])] = NAN;
              ++nan_here;
            }
        lean_nan += nan_here;
        differing += values_differing(out, masked, b.what + " (without " + std::to_string(without) + ")",
                                      gpu::kNeumannMetricCount);
        lean_values += long(out.size());
        // Nothing asked for that reads an L (l_rel_rmse, method_only,
        // residual, l_finite): the fast program does not read them. With
        // both L's NaN, the values asked for and the samples it takes (its
        // NaN values) are those of the run that had them.
        if (without == 15 && v == Variant::kPath) {
          std::vector<double> poisoned_gl(gl.size(), NAN);
          gpu::PathOnDevice blind = lean;
          std::vector<uint16_t> poisoned_l(size_t(b.n()) * b.C * b.C, 0x7E00);
          blind.l_fp16 = poisoned_l.data();
          blind.l_f64 = nullptr;
          std::vector<double> again(out.size(), -1.0);
          metrics_on_host(gpu::GoldRead{b.n(), b.C, poisoned_gl.data(), gi.data()}, blind, again.data());
          long same_nan = 0, fast_here = 0, fast_blind = 0;  // the fast program's samples: l_finite NaN
          for (size_t e = 0; e < out.size(); e += gpu::kNeumannMetricCount) {
            fast_here += std::isnan(out[e + 2]);
            fast_blind += std::isnan(again[e + 2]);
            same_nan += std::isnan(again[e + 2]) && std::isnan(out[e + 2]);
            for (int q : {0, 1, 3, 5, 7, 9, 10, 11, 12})
              if (std::memcmp(&again[e + size_t(q)], &out[e + size_t(q)], sizeof(double)) != 0 && ++differing <= 10)
                std::printf("  %s, L's not read: sample %zu value %d: %a, with them %a\n", b.what.c_str(),
                            e / gpu::kNeumannMetricCount, q, again[e + size_t(q)], out[e + size_t(q)]);
          }
          unread_fast += same_nan;
          unread_samples += b.n();
          if ((same_nan != fast_here || fast_blind != fast_here) && ++differing <= 10)
            std::printf("  %s, L's not read: the fast program took %ld samples, %ld with them (%ld both)\n",
                        b.what.c_str(), fast_blind, fast_here, same_nan);
        }
      }
    }
    {  // the kernel path's entry and the gold path's at once
      std::vector<double> ok(size_t(b.n()) * gpu::kNeumannMetricCount, -1.0), og(ok.size(), -1.0);
      const gpu::PathOnDevice pk = path_view(p, Variant::kPath, gl.data());
      pair_on_host(g, pk, gold_path_view(pk, gl.data()), ok.data(), og.data());
      differing += values_differing(ok, cpu_metrics(p, gold, b.C, Variant::kPath), b.what + " (pair, kernel)",
                                    gpu::kNeumannMetricCount);
      const std::vector<double> want_g = cpu_metrics(gold_path_arrays(p), gold, b.C, Variant::kGoldPath);
      differing += values_differing(og, want_g, b.what + " (pair, gold path)", gpu::kNeumannMetricCount);
      values += long(ok.size() + og.size());
      // The gold path's entry alone, as the pipeline launches it above
      // C = 16: its INV the run on the gold L (one buffer), whose sums the
      // fast program forms once.
      std::fill(og.begin(), og.end(), -1.0);
      metrics_on_host(g, gold_path_view(pk, gl.data()), og.data());
      differing += values_differing(og, want_g, b.what + " (gold path, its INV the run)", gpu::kNeumannMetricCount);
      values += long(og.size());
    }
    const std::vector<double> want = cpu_reference(gold);
    for (bool full_only : {true, false}) {
      std::vector<double> ref(size_t(b.n()) * gpu::kReferenceMetricCount, -1.0);
      reference_on_host(g, ref.data(), full_only);
      differing += values_differing(ref, want, b.what + (full_only ? " (reference, full program)" : " (reference)"),
                                    gpu::kReferenceMetricCount);
      values += long(ref.size());
    }
  }
  std::printf("metric programs on the CPU: %ld of %ld values differ from evaluate() (%ld finite inv_method_only_rel_rmse; "
              "the fast program took %ld samples, left %ld)\n",
              differing, values, method_only_finite, fast_counts.fast, fast_counts.slow);
  EXPECT_GT(method_only_finite, values / gpu::kNeumannMetricCount / 6);
  std::printf("without the costlier values: %ld values compared, %ld of them left out (NaN)\n", lean_values, lean_nan);
  EXPECT_GT(lean_nan, lean_values / gpu::kNeumannMetricCount);
  std::printf("the L's not read: the fast program took %ld of %ld samples, as with them\n", unread_fast, unread_samples);
  EXPECT_GT(unread_fast, unread_samples / 2);
  // Both ways are exercised: most samples are lower triangular; junk above L's diagonal (kind 6), a NaN or an
  // overflow above INV's (kinds 3 and 4, half the time) and a non-finite gold L (extreme batches) are not.
  EXPECT_GT(fast_counts.fast, fast_counts.slow);
  EXPECT_GT(fast_counts.slow, 0);
  // Above C = 32 the fast program leaves inv_method_only to method_fast_program wherever it is finite.
  std::printf("the method program took %ld samples' inv_method_only\n", deferred_count);
  EXPECT_GT(deferred_count, 0);
  std::printf("pair: the fast program took %ld entries, left %ld\n", pair_counts.fast, pair_counts.slow);
  EXPECT_GT(pair_counts.fast, pair_counts.slow);
  EXPECT_GT(pair_counts.slow, 0);
  std::printf("reference: the fast program took %ld samples, left %ld\n", reference_counts.fast, reference_counts.slow);
  EXPECT_GT(reference_counts.fast, reference_counts.slow);
  EXPECT_GT(reference_counts.slow, 0);
  EXPECT_EQ(differing, 0);
}

// A gold L the fast rules do not cover (a nonzero above its diagonal, or an
// entry not finite) sends the sample to the full program wherever a value
// reads it: the values are the full program's, which puts the gold L's
// junk into l_rel_rmse and the residual where the fast sums would skip it.
// (A fast program that staged the gold L apart and left out its flags'
// pass failed here at C = 33.) The batch: model_like at C, the gold L of
// path_arrays' clean samples (their L and INV finite) poisoned.
struct PoisonedGold {
  Batch b;
  std::vector<double> gl, gi;
  PathArrays p;
  long poisoned = 0;
};
PoisonedGold poisoned_gold(int C) {
  PoisonedGold q;
  q.b = family_batch("model_like", false, C, 128, 24, 900 + uint64_t(C));
  const std::vector<GoldOutput> gold = cpu_gold(q.b);
  q.gl = flat(gold, false);
  q.gi = flat(gold, true);
  q.p = path_arrays(q.b, gold, 31 + uint64_t(C));
  const size_t csq = size_t(C) * C;
  for (int s = 0; s < q.b.n(); ++s) {
    if (s % 8 != 0 && s % 8 != 1) continue;  // path_arrays' clean kinds
    const size_t at = size_t(s) * csq;
    if (s % 16 < 8) q.gl[at + 2 * size_t(C) + 5] = 0.25;  // above the diagonal
    else q.gl[at + 5 * size_t(C) + 2] = NAN;              // below it, not finite
    ++q.poisoned;
  }
  return q;
}
constexpr int kPoisonedChunks[] = {16, 33, 64};

TEST(DeviceMetrics, FastProgramLeavesAGoldLItsRulesDoNotCover) {
  long differing = 0, poisoned = 0;
  const long slow_before = fast_counts.slow;
  for (int C : kPoisonedChunks) {
    const PoisonedGold q = poisoned_gold(C);
    poisoned += q.poisoned;
    const gpu::GoldRead g{q.b.n(), C, q.gl.data(), q.gi.data()};
    for (Variant v : {Variant::kPath, Variant::kNoGoldRun}) {
      std::vector<double> fast(size_t(q.b.n()) * gpu::kNeumannMetricCount, -1.0), full(fast.size(), -2.0);
      metrics_on_host(g, path_view(q.p, v, q.gl.data()), fast.data());
      full_metrics_on_host(g, path_view(q.p, v, q.gl.data()), full.data());
      differing +=
          values_differing(fast, full, q.b.what + " (a gold L the rules do not cover)", gpu::kNeumannMetricCount);
    }
  }
  std::printf("%ld samples with a gold L the rules do not cover; the full program took %ld samples\n", poisoned,
              fast_counts.slow - slow_before);
  EXPECT_GE(fast_counts.slow - slow_before, 2 * poisoned);
  EXPECT_EQ(differing, 0);
}

// ---- The same on the GPU ---------------------------------------------------

#ifdef CHUNKINV_HAVE_CUDA
namespace {

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(n_, 1) * sizeof(T)), cudaSuccess);
    if (n_) {
      EXPECT_EQ(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  explicit DeviceArray(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(n_, 1) * sizeof(T)), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }
  std::vector<T> host() const {
    std::vector<T> v(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (n_) {
      EXPECT_EQ(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return v;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

struct DevicePath {
  DeviceArray<uint16_t> decay, inv_decay, l, inv, gold_l_inv;
  DeviceArray<int> hp, gold_hp;
  DeviceArray<float> pmax, gold_pmax;
  explicit DevicePath(const PathArrays& p)
      : decay(p.decay), inv_decay(p.inv_decay), l(p.l), inv(p.inv), gold_l_inv(p.gold_l_inv), hp(p.hp),
        gold_hp(p.gold_hp), pmax(p.pmax), gold_pmax(p.gold_pmax) {}
  gpu::PathOnDevice view(const PathArrays& p, Variant v, const double* gold_l) const {
    gpu::PathOnDevice d = path_view(p, v, gold_l);
    d.inv = inv.get();
    d.highest_power = hp.get();
    d.power_max = pmax.get();
    if (d.decay) {
      d.decay = decay.get();
      d.inv_decay = inv_decay.get();
    }
    if (d.l_fp16) d.l_fp16 = l.get();
    if (d.gold_l_inv) {
      d.gold_l_inv = gold_l_inv.get();
      d.gold_l_highest_power = gold_hp.get();
      d.gold_l_power_max = gold_pmax.get();
    }
    return d;
  }
};

}  // namespace
#endif

TEST(DeviceMetrics, GoldOnDeviceIsComputeGoldBitForBit) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  long differing = 0, entries = 0;
  for (const Batch& b : gold_batches(16)) {
    const std::vector<GoldOutput> gold = cpu_gold(b);
    const size_t csq = size_t(b.C) * b.C, n = size_t(b.n());
    DeviceArray<uint16_t> keys(b.keys), l16(n * csq);
    DeviceArray<double> g(b.g), beta(b.beta), l(n * csq), inv(n * csq);
    gpu::gold_on_device({b.n(), b.C, b.d, b.w, keys.get(), g.get(), beta.get(), l.get(), inv.get(), l16.get()},
                        nullptr);
    long d = gold_differing(b, gold, l.host(), inv.host(), l16.host());
    entries += 3 * long(n * csq);
    // With the reference in the gold's tail.
    DeviceArray<double> ref(n * gpu::kReferenceMetricCount);
    gpu::gold_on_device(
        {b.n(), b.C, b.d, b.w, keys.get(), g.get(), beta.get(), l.get(), inv.get(), l16.get(), ref.get()}, nullptr);
    d += gold_differing(b, gold, l.host(), inv.host(), l16.host()) +
         values_differing(ref.host(), cpu_reference(gold), b.what + " (reference)", gpu::kReferenceMetricCount);
    entries += 3 * long(n * csq) + long(n * gpu::kReferenceMetricCount);
    if (d) ADD_FAILURE() << b.what << ": " << d << " entries differ";
    differing += d;
  }
  std::printf("gold on the GPU: %ld of %ld entries differ from compute_gold and evaluate_reference\n", differing,
              entries);
  EXPECT_EQ(differing, 0);
#endif
}

TEST(DeviceMetrics, MetricsOnDeviceAreEvaluateBitForBit) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  long differing = 0, values = 0;
  for (const Batch& b : metric_batches(64)) {
    const std::vector<GoldOutput> gold = cpu_gold(b);
    const size_t n = size_t(b.n());
    // The gold as gold_on_device makes it (its bits are checked above), and as the CPU uploads it.
    DeviceArray<uint16_t> keys(b.keys);
    DeviceArray<double> gg(b.g), beta(b.beta), gl(flat(gold, false).size()), gi(flat(gold, true).size());
    gpu::gold_on_device({b.n(), b.C, b.d, b.w, keys.get(), gg.get(), beta.get(), gl.get(), gi.get(), nullptr}, nullptr);
    const gpu::GoldRead g{b.n(), b.C, gl.get(), gi.get()};
    const PathArrays p = path_arrays(b, gold, 77 + b.C);
    const DevicePath dp(p);
    for (Variant v : kVariants) {
      DeviceArray<double> out(n * gpu::kNeumannMetricCount);
      gpu::metrics_on_device(g, dp.view(p, v, gl.get()), out.get(), nullptr);
      differing += values_differing(out.host(), cpu_metrics(p, gold, b.C, v), b.what, gpu::kNeumannMetricCount);
      values += long(n * gpu::kNeumannMetricCount);
    }
    {  // the kernel path's entry and the gold path's at once
      DeviceArray<double> ok(n * gpu::kNeumannMetricCount), og(n * gpu::kNeumannMetricCount);
      const gpu::PathOnDevice pk = dp.view(p, Variant::kPath, gl.get());
      gpu::metrics_pair_on_device(g, pk, gold_path_view(pk, gl.get()), ok.get(), og.get(), nullptr);
      differing += values_differing(ok.host(), cpu_metrics(p, gold, b.C, Variant::kPath), b.what + " (pair, kernel)",
                                    gpu::kNeumannMetricCount);
      const std::vector<double> want_g = cpu_metrics(gold_path_arrays(p), gold, b.C, Variant::kGoldPath);
      differing += values_differing(og.host(), want_g, b.what + " (pair, gold path)", gpu::kNeumannMetricCount);
      values += long(2 * n * gpu::kNeumannMetricCount);
      DeviceArray<double> alone(n * gpu::kNeumannMetricCount);  // the gold path's entry alone, its INV the run
      gpu::metrics_on_device(g, gold_path_view(pk, gl.get()), alone.get(), nullptr);
      differing += values_differing(alone.host(), want_g, b.what + " (gold path, its INV the run)",
                                    gpu::kNeumannMetricCount);
      values += long(n * gpu::kNeumannMetricCount);
    }
    DeviceArray<double> ref(n * gpu::kReferenceMetricCount);
    gpu::reference_metrics_on_device(g, ref.get(), nullptr);
    differing += values_differing(ref.host(), cpu_reference(gold), b.what + " (reference)", gpu::kReferenceMetricCount);
    values += long(n * gpu::kReferenceMetricCount);
  }
  std::printf("metrics on the GPU: %ld of %ld values differ from evaluate()/evaluate_reference()\n", differing, values);
  EXPECT_EQ(differing, 0);
#endif
}


// The launch with a gold L its fast rules do not cover (the CPU test above):
// the full program's values.
TEST(DeviceMetrics, MetricsOnDeviceLeaveAGoldLTheRulesDoNotCover) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  long differing = 0, values = 0;
  for (int C : kPoisonedChunks) {
    const PoisonedGold q = poisoned_gold(C);
    const DeviceArray<double> gl(q.gl), gi(q.gi);
    const gpu::GoldRead g{q.b.n(), C, gl.get(), gi.get()};
    const DevicePath dp(q.p);
    for (Variant v : {Variant::kPath, Variant::kNoGoldRun}) {
      DeviceArray<double> out(size_t(q.b.n()) * gpu::kNeumannMetricCount);
      gpu::metrics_on_device(g, dp.view(q.p, v, gl.get()), out.get(), nullptr);
      std::vector<double> full(out.host().size(), -2.0);
      full_metrics_on_host(gpu::GoldRead{q.b.n(), C, q.gl.data(), q.gi.data()}, path_view(q.p, v, q.gl.data()),
                           full.data());
      differing += values_differing(out.host(), full, q.b.what + " (a gold L the rules do not cover, GPU)",
                                    gpu::kNeumannMetricCount);
      values += long(full.size());
    }
  }
  std::printf("a gold L the rules do not cover, on the GPU: %ld of %ld values differ from the full program's\n",
              differing, values);
  EXPECT_EQ(differing, 0);
#endif
}
TEST(DeviceMetrics, RejectsChunksBeyondTheShapesItHandles) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  gpu::GoldRead g{1, 65, nullptr, nullptr};
  EXPECT_THROW(gpu::reference_metrics_on_device(g, nullptr, nullptr), std::invalid_argument);
  gpu::GoldOnDevice a;
  a.n = 1;
  a.chunk = 16;
  a.dim = 8;
  a.gate_width = 3;
  EXPECT_THROW(gpu::gold_on_device(a, nullptr), std::invalid_argument);
#endif
}
