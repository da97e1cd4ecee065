// The layer's forward over one sequence, two ways (docs/downstream.md):
//
// - Recurrence: the token recurrence in FP64, fla's naive_recurrent_kda
//   convention, independent of any chunking. Per token t and channel c:
//     S_t = diag(exp(g_t)) S_{t-1};  S_t += beta_t k_t (v_t - S_t^T k_t)^T;  o_t = scale S_t^T q_t.
// - ChunkedForward: the chunk-wise form the kernels compute, with the
//   per-chunk inverse A = (I + L)^-1 handed in (any path x method, or the
//   exact one) and every intermediate stored as a StoragePreset says. With
//   preset fp64 and the exact inverse it equals the recurrence to rounding.
//
// Both advance chunk by chunk in lockstep, so that a run compares states at
// every chunk boundary holding O(state) memory, never O(T) states.
#pragma once
#include <vector>

#include "core/matrix.hpp"
#include "downstream/sequence.hpp"
#include "downstream/storage.hpp"

namespace chunkinv {

// fla's default: K^-1/2.
double default_scale(const Sequence& s);

// out(i, j) = sum_k a(i, k) b(k, j), k ascending: one summation order on
// every machine (Eigen's blocked product sizes its blocks from the cache).
Mat product(const Mat& a, const Mat& b);

class Recurrence {
 public:
  Recurrence(const Sequence& s, double scale);
  // Tokens [first, first + count): their outputs, rows of o (count x V).
  void advance(int first, int count, Mat& o_rows);
  const Mat& state() const { return state_; }  // K x V, after the last token advanced

 private:
  const Sequence& s_;
  double scale_;
  Mat state_;
};

class ChunkedForward {
 public:
  ChunkedForward(const Sequence& s, int chunk, const StoragePreset& preset, double scale);
  // Chunk n (tokens [n C, (n + 1) C)) with its inverse A (C x C, unit lower):
  // its outputs (C x V, in the preset's output format).
  void advance(int n, const Mat& inverse, Mat& o_rows);
  const Mat& state() const { return state_; }  // as carried to the next chunk
  Mat final_state() const;                     // ht as the kernel stores it

 private:
  const Sequence& s_;
  int chunk_;
  const StoragePreset& p_;
  double scale_;
  Mat state_;
};

// Whole-sequence forms (tests, small runs): o (T x V), the state after
// every chunk (boundary n: after chunk n) and the final state.
struct Trace {
  Mat o;
  std::vector<Mat> boundaries;
  Mat final_state;
};
Trace recurrent_forward(const Sequence& s, int chunk, double scale);
Trace chunked_forward(const Sequence& s, int chunk, const std::vector<Mat>& inverses, const StoragePreset& preset,
                      double scale);

}  // namespace chunkinv
