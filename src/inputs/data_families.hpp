// Families backed by data (docs/inputs.md): `file` (an imported tensor set)
// and `real_gates` (gates captured from trained Gated DeltaNet models, with
// random keys).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "inputs/family.hpp"
#include "inputs/tensor_set.hpp"
#include "io/npy.hpp"

namespace chunkinv {

std::unique_ptr<Family> make_file_family();
std::unique_ptr<Family> make_real_gates_family();

// The tensor set at `path`, loaded once per process (thread-safe).
std::shared_ptr<const TensorSet> cached_tensor_set(const std::string& path);
// Its chunks at a chunk size (chunk_tokens), computed once per process.
std::shared_ptr<const std::vector<TokenChunk>> cached_chunks(const std::string& path, int chunk, Tail tail);
// A `file` configuration's inputs path and tail (UsageError when missing or bad).
std::string file_family_inputs(const Configuration& c);
Tail file_family_tail(const Configuration& c);

// --- real gates -------------------------------------------------------------
// The folder holding gdn-gates/: $CHUNKINV_DATA if set, else
// CHUNKINV_SOURCE_DIR "/data".
std::string data_dir();
std::vector<std::string> real_gate_models();  // "Qwen3-Next", "Qwen3.5-0.8B"

struct GateData {
  std::string model;
  int tokens = 0, heads = 0;
  std::vector<double> g, beta;   // [token, head], FP32 values widened
  std::vector<int64_t> cu_seqlens;  // sequence starts, then the total
  double gate(int token, int head) const { return g[static_cast<size_t>(token) * heads + head]; }
  double beta_at(int token, int head) const { return beta[static_cast<size_t>(token) * heads + head]; }
};
// Loaded once per process; throws UsageError naming the file on bad data.
const GateData& real_gate_data(std::string_view model);  // by value, as find_family

// One chunk of real gates: head `head`, tokens [first, first + chunk) of
// sequence `sequence`.
struct GateChunk {
  int sequence = 0, head = 0, first = 0;
};
// Every whole chunk of length `chunk`, in the family's order: sequence,
// then position within it, then head (fastest). Tails shorter than `chunk`
// at the end of a sequence are dropped.
std::vector<GateChunk> real_gate_chunks(const GateData& d, int chunk);

}  // namespace chunkinv
