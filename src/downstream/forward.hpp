// The layer's forward over one sequence, two ways (docs/downstream.md):
//
// - Recurrence: the token recurrence in FP64, fla's naive_recurrent_kda
//   convention, independent of any chunking. Per token t and channel c:
//     S_t = diag(exp(g_t)) S_{t-1};  S_t += beta_t k_t (v_t - S_t^T k_t)^T;  o_t = scale S_t^T q_t.
//   Its operations in one order, the GPU's (gpu/recurrence.cu), so that
//   both give the same bits (recurrence_dots below).
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

// The recurrence's dot products out[e] = sum_c a[c] S(c, e) for every column
// e of S (K x V), in the one order the GPU form computes them: row c goes
// to slice (c / 2) mod 8 and within it to chain c mod 2; each chain starts
// at +0 and takes its rows in ascending order, acc = fma(a[c], S(c, e), acc);
// slice r's partial is P_r = chain 0 + chain 1; the column's sum is
// ((P_0 + P_4) + (P_1 + P_5)) + ((P_2 + P_6) + (P_3 + P_7)).
inline constexpr int kRecurrenceSlices = 8;
void recurrence_dots(const double* a, const Mat& S, double* out);

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
  std::vector<double> decay_, dots_;
};

// Work space that a copy does not carry: a checkpoint of a forward copies
// its state, not its scratch.
struct Scratch {
  std::vector<double> v;
  Scratch() = default;
  Scratch(const Scratch&) {}
  Scratch& operator=(const Scratch&) { return *this; }
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
  Scratch work_;  // the step's intermediates (downstream/forward_step.hpp)
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
