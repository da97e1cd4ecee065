// Shared by the tests of the chunked forward's and backward's one-source
// steps (test_chunked_forward.cpp, test_chunked_backward.cpp): their cases,
// the variants' inverses, the step run by many host threads, and a count of
// differing values.
#pragma once
#include <barrier>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "core/fp.hpp"
#include "core/matrix.hpp"
#include "downstream/sequence.hpp"
#include "downstream/sources.hpp"
#include "gpu_test_common.hpp"
#include "paths/gold/gold.hpp"
#include "support/sequences.hpp"

namespace chunkinv::steptest {

struct Case {
  std::string family, gating, storage;
  int C, K, V, T;
};

inline Sequence sequence_of(const Case& c, uint64_t seed, uint64_t i) {
  SeqConfig cfg = testing::config(c.family, c.T, c.C, c.K, c.V, {{"gating", c.gating}});
  cfg.initial_state = "random";
  return find_source(cfg.family).make(cfg, seed, i);
}

// The variants' inverses of chunk n: the exact one; the exact one rounded to
// FP16 (an inexact inverse); the exact one with one entry +inf (from chunk 1 on).
inline std::vector<Mat> inverses_of(const Sequence& s, int C, int n) {
  const Mat exact = compute_gold(chunk_sample(s, C, n)).inv;
  Mat rounded = exact.unaryExpr([](double x) { return round_to(x, kFP16); });
  Mat broken = exact;
  if (n >= 1) broken(C - 1, 0) = INFINITY;
  return {exact, rounded, broken};
}

inline size_t differing(const double* a, const double* b, size_t n) {
  size_t d = 0;
  for (size_t i = 0; i < n; ++i) d += !gputest::same_double(a[i], b[i]);
  return d;
}

// A step's context on the host: `n` std::threads, a barrier between stages.
struct ThreadsContext {
  int tid, n;
  std::barrier<>* all;
  int thread() const { return tid; }
  int threads() const { return n; }
  void sync() const { all->arrive_and_wait(); }
};

// step(x) on 37 threads (a count that divides no stage's size), joined.
template <class Step>
void on_threads(Step&& step) {
  constexpr int kThreads = 37;
  std::barrier<> all(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      ThreadsContext x{t, kThreads, &all};
      step(x);
    });
  for (std::thread& t : pool) t.join();
}

}  // namespace chunkinv::steptest
