// Sequences from a tensor set in fla's layout, and a kernel's outputs on
// them (docs/downstream.md, "Your own sequences, a kernel's outputs"):
//
//   inputs     q, k [B, T, H, K], v [B, T, H, V], g [B, T, H] or [B, T, H, K],
//              beta [B, T, H], optional initial_state [N, H, K, V] and
//              cu_seqlens [N + 1] (then B = 1)
//   candidate  o [B, T, H, V], optional ht [N, H, K, V] (fla's final_state),
//              optional gradients dq, dk [B, T, H, K], dv [B, T, H, V], dg as g, dbeta [B, T, H]
//   inputs may add do [B, T, H, V] and dht [N, H, K, V]: the backward's upstream gradients
//
// in a directory of .npy files, an .npz or a .safetensors. k, g, beta and
// cu_seqlens are read and checked as every tensor set's (inputs/tensor_set);
// q, v, initial_state, o and ht beside them. Sample i is sequence i / H,
// head i mod H.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/matrix.hpp"
#include "downstream/sequence.hpp"
#include "inputs/tensor_set.hpp"

namespace chunkinv {

struct SequenceSet {
  std::string source;
  int heads = 0;
  bool packed = false;  // cu_seqlens: the sequences lie end to end in one batch row
  std::vector<Sequence> sequences;  // sequence-major, heads fastest
  bool same_length() const;
};

// UsageError naming the file, the tensor and the culprit.
SequenceSet load_sequences(const std::string& path);
// The same from tensors already read (the Python package's arrays): `set`
// holds k, g, beta and cu_seqlens, `more` q and v and, where given,
// initial_state, do and dht; errors name them as "inputs SOURCE[q]".
SequenceSet sequences_of(const TensorSet& set, const TensorMap& more, const std::string& source);
// Where sequence n of the set lies in its batch row: row, first token, tokens.
struct SequenceSpan {
  int64_t row = 0, first = 0, tokens = 0;
};
std::vector<SequenceSpan> sequence_spans(const TensorSet& set);
// Whether the tensor set at `path` holds sequences (q and v beside k, g and
// beta), as `score` tells seq's inputs from a chunk family's; reads nothing
// else and refuses nothing (load_sequences does).
bool holds_sequences(const std::string& path);

struct CandidateOutputs {
  std::vector<Mat> o;   // one per sequence of the set, T x V
  std::vector<Mat> ht;  // empty, or one per sequence, K x V
  // A kernel's gradients (empty, or one per sequence): dq, dk T x K, dv T x V,
  // dg T x 1 or T x K, dbeta T x 1, scored against the recurrence's gradient
  // of the inputs' upstream do (and dht).
  std::vector<Mat> dq, dk, dv, dg, dbeta;
};
CandidateOutputs load_candidate_outputs(const std::string& path, const SequenceSet& set);

}  // namespace chunkinv
