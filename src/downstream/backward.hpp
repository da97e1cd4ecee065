// The layer's backward over one sequence, two ways (docs/downstream.md,
// "Backward"), from an upstream gradient do (T x V) and optionally dht
// (K x V, the final state's):
//
// - recurrent_backward: reverse mode through the FP64 token recurrence,
//   derived by hand. Per token t, with S' = diag(e^g_t) S_{t-1},
//   r = beta_t (v_t - S'^T k_t), S_t = S' + k_t r^T, o_t = scale S_t^T q_t and
//   dS the gradient of S_t:
//     dS += scale q_t do_t^T;  dq_t = scale S_t do_t;  dk_t = dS r;  dr = dS^T k_t
//     dbeta_t = dr . (v_t - S'^T k_t);  dv_t = beta_t dr;  dp = -beta_t dr
//     dS' = dS + k_t dp^T;  dk_t += S' dp;  dg_{t,c} = sum_e dS'_ce S'_ce;  dS_{t-1} = diag(e^g_t) dS'
//   It keeps the inputs and gradients (O(T)) but never O(T) states: the
//   state is checkpointed every ceil(sqrt(T)) tokens and each stretch's
//   states recomputed from its checkpoint on the way back.
// - ChunkedBackward: the chunk-wise backward the kernels compute (fla's
//   chunk_kda / chunk_gated_delta_rule backward): per chunk, in reverse,
//   with the inverse A = (I + L)^-1 handed in, the forward's w, u, x
//   recomputed, the state gradient carried to the previous chunk, dA from
//   dw and du, the inverse's backward dL = -A^T dA A^T (strict lower part)
//   and dq, dk, dbeta, dg from L, w, u, the scores and the state terms.
//   Every intermediate is stored as a BackwardPreset (and the forward's
//   StoragePreset, for what it recomputes) says. With both FP64 and the
//   exact inverse it equals recurrent_backward to rounding.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/matrix.hpp"
#include "downstream/backward_step.hpp"
#include "downstream/forward.hpp"
#include "downstream/sequence.hpp"
#include "downstream/storage.hpp"

namespace chunkinv {

// The upstream gradients: do (T x V) and dht (K x V; empty: zero).
struct Upstream {
  Mat d_o;
  Mat dht;
};

// do with BF16 values of N(0, 1), from a stream of its own (sequence
// `index` of `seed`), and dht zero: a training loss that does not read the
// final state. The sequence's own (read from a tensor set) where it has them.
Upstream upstream_of(const Sequence& s, uint64_t seed, uint64_t index);

// Gradients of sum(do o) + sum(dht ht) with respect to the sequence's inputs.
struct Gradients {
  Mat dq;     // T x K
  Mat dk;     // T x K
  Mat dv;     // T x V
  Mat dg;     // T x 1 (per-token gates) or T x K (per channel)
  Mat dbeta;  // T x 1
  Mat dh0;    // K x V
  Gradients() = default;
  explicit Gradients(const Sequence& s);  // every matrix sized and zero
  Gradients(const Sequence& s, int rows);  // rows of tokens only (a chunk's), zero
};

// Where the chunked backward rounds, beside the forward's StoragePreset
// (which says how the forward's values it recomputes are stored).
struct BackwardPreset {
  std::string_view name;
  std::string_view models;
  Store accumulate;          // every product's and sum's result: the kernels accumulate in FP32
  Store inverse;             // A as the backward's products read it (stored A; a recomputed A is read as made)
  Store grad_operands;       // dx (fla's dv), dw and dA, and dA A^T, as the next product reads them
  Store dl_operand;          // dL (times the pair's decay, per-token gates) as its products with k read it
  Store grad_state_operand;  // the state gradient dh as stored per chunk and read by the products
  Store grad_state;          // dh as carried from chunk to chunk
  Store gradients;           // dq, dk, dv, dbeta as returned (the inputs' dtype)
  Store gate_gradient;       // dg as returned
  Store initial_state_gradient;  // dh0 as returned
};

// Its rounding points alone (what the backward step reads, on host and device).
inline backward_step::BackwardStores backward_stores_of(const BackwardPreset& b) {
  return {b.accumulate, b.inverse, b.grad_operands, b.dl_operand, b.grad_state_operand,
          b.grad_state, b.gradients, b.gate_gradient, b.initial_state_gradient};
}

std::vector<std::string> backward_storage_names();
// The backward preset of forward storage preset `storage` (the same name);
// UsageError for one that has no backward (FlashKDA ships none).
const BackwardPreset& find_backward_storage(std::string_view storage);
const BackwardPreset& fp64_backward();

// One token of the recurrence, in FP64: S <- diag(e^g_t) S; S += beta_t k_t (v_t - S^T k_t)^T.
void recurrence_step(const Sequence& s, int t, Mat& S);

// The reference: the FP64 recurrence's gradients.
Gradients recurrent_backward(const Sequence& s, const Upstream& up, double scale);

// Tokens [first, first + count) of the recurrence backward, from the state
// before token `first`: their gradient rows into `out`; the state gradient
// from that after token first + count - 1 (dht at the start) to that before
// token `first`. Keeps count states. Row r of `out` is token first_row + r.
class RecurrentBackward {
 public:
  RecurrentBackward(const Sequence& s, const Upstream& up, double scale);
  void backward(int first, int count, const Mat& state_before, Gradients& out, int first_row = 0);
  const Mat& state_grad() const { return ds_; }

 private:
  const Sequence& s_;
  const Upstream& up_;
  double scale_;
  Mat ds_;
};

class ChunkedBackward {
 public:
  ChunkedBackward(const Sequence& s, int chunk, const StoragePreset& forward, const BackwardPreset& backward,
                  const Upstream& up, double scale);
  // Chunk n, after chunk n + 1's step: `inverse` is A as the backward's
  // products read it; `state_in` the state entering chunk n as the chunked
  // forward carried it. Writes chunk n's gradient rows into `out` and, after
  // chunk 0, out.dh0. Row r of `out` is token first_row + r.
  void step(int n, const Mat& inverse, const Mat& state_in, Gradients& out, int first_row = 0);
  const Mat& state_grad() const { return ds_; }  // the gradient of the state entering the last chunk stepped

 private:
  const Sequence& s_;
  int chunk_;
  const StoragePreset& f_;
  const BackwardPreset& b_;
  const Upstream& up_;
  double scale_;
  Mat ds_;
  Scratch work_;  // the step's intermediates (downstream/backward_step.hpp)
};

// The whole chunked backward (tests, small runs): the chunked forward with
// `forward_inverses` checkpointed every ceil(sqrt(N)) chunks, then the
// chunks in reverse with `backward_inverses` (A as the backward reads it).
Gradients chunked_backward(const Sequence& s, int chunk, const std::vector<Mat>& forward_inverses,
                           const std::vector<Mat>& backward_inverses, const StoragePreset& forward,
                           const BackwardPreset& backward, const Upstream& up, double scale);

}  // namespace chunkinv
