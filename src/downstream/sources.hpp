// Where sequences come from (docs/downstream.md, "Sources"): the chunk
// families extended to T tokens, with queries and values, and
// `sparse_forget`, gates shaped as a trained model's. Sequence i of seed s
// is a pure function of (configuration, s, i), as a chunk sample is.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "downstream/sequence.hpp"
#include "inputs/family.hpp"

namespace chunkinv {

// One point of a downstream experiment's grid, without path and method.
struct SeqConfig {
  std::string family;
  int chunk = 64;        // C: the chunking of the chunked forward
  int dim = 64;          // K, as `dim` everywhere else
  int value_dim = 64;    // V
  int seq_len = 4096;    // T, a whole number of chunks
  int window = 0;        // positions per window of o's error; 0: T / 16 where that is whole, else T
  std::string storage = "fla_chunk_kda";
  std::string initial_state = "zero";  // or "random": h0 with BF16 N(0, 1) entries
  std::string backward = "none";       // or "stored", "recomputed": the backward too (downstream/backward_experiment.hpp)
  nlohmann::json params = nlohmann::json::object();  // the family's own axes, defaults filled in

  nlohmann::json axes() const;  // {"family", "chunk", "dim", "value_dim", "seq_len", "storage", ...}
  // The chunk family's configuration at `chunk` tokens (what a path is asked about).
  Configuration chunk_config() const;
  int window_or_default() const;
};

class SequenceSource {
 public:
  virtual ~SequenceSource() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;  // how the family extends to a sequence
  virtual std::vector<FamilyParam> params() const = 0;
  // The family's own completion of its axes (e.g. gating=token dropped).
  virtual void complete(SeqConfig& c) const = 0;
  // UsageError naming the culprit.
  virtual void validate(const SeqConfig& c) const = 0;
  virtual Sequence make(const SeqConfig& c, uint64_t seed, uint64_t index) const = 0;
};

const SequenceSource& find_source(std::string_view name);  // UsageError with a suggestion
std::vector<std::string> source_names();
// The axes every configuration has beside the family's own.
const std::vector<std::string>& sequence_axes();
// Keeps the family's own parameters (others are dropped) with their
// defaults filled in, completed as the family completes them.
void complete(SeqConfig& c);

// The longest sequence: fla's and FlashKDA's tests go to 64k tokens.
inline constexpr int kMaxSeqLen = 65536;

}  // namespace chunkinv
